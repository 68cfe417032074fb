"""Summarise size_sweep.cu's JSON lines (not part of the library): GB/s per form and size
(medians over rounds), and a least-squares fit t = a + bytes / bw per form, giving its fixed
time per launch (a, µs) and asymptotic rate (bw, GB/s). Also prints the empty-kernel times.
    python3 size_fit.py sweep.jsonl
"""
import json,statistics as st,collections,sys
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    r=json.loads(l)
    if r["form"]=="empty": print("empty", r.get("timing"), r["us_one_block"], r["us_copy_grid"]); continue
    d[(r["form"],r["mib_moved"])].append((r["ms"],r["bytes"]))
forms=[]
for f,_ in d:
    if f not in forms and f != "empty": forms.append(f)
sizes=[64,128,256,512,1024,2048,4096]
print('| form | '+' | '.join('%d MiB'%s for s in sizes)+' | fixed µs | asymptote GB/s |')
print('|'+'---|'*(len(sizes)+3))
for f in forms:
    xs=[];ys=[];row=[]
    for mib in sizes:
        v=d[(f,mib)]; ms=st.median([a for a,_ in v]); b=v[0][1]
        xs.append(b/1e9); ys.append(ms*1e3); row.append('%.0f'%(b/ms/1e6))
    n=len(xs); mx=sum(xs)/n; my=sum(ys)/n
    slope=sum((x-mx)*(y-my) for x,y in zip(xs,ys))/sum((x-mx)**2 for x in xs); a=my-slope*mx
    print('| %s | %s | %.1f | %.0f |'%(f,' | '.join(row),a,1e6/slope))
