"""PyTorch's sum and argmax over dim 1 of [2^28 / L, L] (f32, bf16), CUDA events, median of
41 after 5 warm-ups: the figures beside benches/reference/rowsum.cu in the same call (issue
#41; not part of the library)."""
import torch,json
d='cuda';T=1<<28
def med(f,n=41):
    for _ in range(5): f()
    ts=[]
    for _ in range(n):
        a=torch.cuda.Event(enable_timing=True);b=torch.cuda.Event(enable_timing=True)
        a.record();f();b.record();b.synchronize();ts.append(a.elapsed_time(b))
    ts.sort();return ts[len(ts)//2]
for L in (16,64,128,512,1024,4096,32768):
    for dt,nm in ((torch.float32,'f32'),(torch.bfloat16,'bf16')):
        x=torch.randn(T//L,L,device=d,dtype=dt);o=torch.empty(T//L,device=d,dtype=dt);oi=torch.empty(T//L,device=d,dtype=torch.int64)
        for op,f in (('sum',lambda:torch.sum(x,dim=1,out=o)),('argmax',lambda:torch.argmax(x,dim=1,out=oi))):
            ms=med(f);print(json.dumps({'impl':'torch','case':f'{op}_rows{L}_{nm}','gbps':round(T*x.element_size()/ms/1e6,1),'ms':round(ms,4)}),flush=True)
        del x
