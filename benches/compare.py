"""Joins the Rust bench and the peer script (JSON lines) into a markdown table and a PNG.
Rows join on (case, dtype label, elements); dtype labels name one type ("bf16"), a cast
("f32->bf16") or a mixed-type op ("bf16*f32->f32"), identically on both sides.
usage: python3 benches/compare.py ours.jsonl peers.jsonl out.md out.png"""
import json
import sys

ours_f, peers_f, md_f, png_f = sys.argv[1:5]
rows = [json.loads(l) for f in (ours_f, peers_f) for l in open(f) if l.startswith("{")]
by = {}
for r in rows:
    by.setdefault((r["case"], r["dtype"], r["elements"]), {})[r["impl"]] = r

copy = max(r["gbps"] for r in rows if r["case"] == "d2d_copy" and "gbps" in r)
torch_add = max((r["gbps"] for r in rows if r["case"] == "contiguous_add" and r["impl"] == "pytorch"
                 and r["dtype"] == "f32"), default=0)
ceiling = max(copy, torch_add)
lines = [f"ceiling (max of d2d copy {copy:.0f} and PyTorch contiguous add {torch_add:.0f}): {ceiling:.0f} GB/s", "",
         "| case | dtype | elements | strided-apply GB/s | × ceiling | PyTorch GB/s | ours / PyTorch | CuPy GB/s | torch.compile GB/s | check |",
         "|---|---|---|---|---|---|---|---|---|---|"]
chart = []
for (case, dtype, n), impls in by.items():
    if case == "tiny_add_host_us":
        o, p = impls.get("strided-apply", {}), impls.get("pytorch", {})
        lines.append(f"| tiny add, host µs/call | {dtype} | {n} | {o.get('host_us', '-')} µs | - | {p.get('host_us', '-')} µs | - | - | - | - |")
        lines.append(f"| tiny add, host µs/call, bursts of 200 | {dtype} | {n} | {o.get('burst_host_us', '-')} µs | - | {p.get('burst_host_us', '-')} µs | - | - | - | - |")
        lines.append(f"| tiny add, cuLaunchKernel alone, bursts of 200 | {dtype} | {n} | {o.get('driver_launch_us', '-')} µs | - | - | - | - | - | - |")
        continue
    if case == "tiny_dispatch_host_us":
        o = impls.get("strided-apply", {})
        lines.append(f"| tiny add, run-time dispatch (lookup each call), bursts of 200 | {dtype} | {n} | {o.get('burst_host_us', '-')} µs | - | - | - | - | - | typed {o.get('typed_burst_host_us', '-')} µs |")
        lines.append(f"| tiny add, run-time dispatch (kept DynOp), bursts of 200 | {dtype} | {n} | {o.get('kept_op_burst_host_us', '-')} µs | - | - | - | - | - | - |")
        continue
    if case == "tiny_graph_per_op_us":
        o, p = impls.get("strided-apply", {}), impls.get("pytorch", {})
        lines.append(f"| tiny add ×100 replayed from a CUDA graph, device µs/op | {dtype} | {n} | {o.get('graph_per_op_us', '-')} µs | - | {p.get('graph_per_op_us', '-')} µs | - | - | - | - |")
        lines.append(f"| tiny add ×100 eager, device µs/op | {dtype} | {n} | {o.get('eager_per_op_us', '-')} µs | - | {p.get('eager_per_op_us', '-')} µs | - | - | - | - |")
        continue
    o = impls.get("strided-apply", {}).get("gbps")
    p = impls.get("pytorch", {}).get("gbps")
    c = impls.get("cupy", {}).get("gbps")
    t = impls.get("torch.compile", {}).get("gbps")
    f = lambda x: "-" if x is None else f"{x:.0f}"
    ratio = "-" if not (o and p) else f"{o / p:.2f}"
    frac = "-" if not o else f"{o / ceiling:.2f}"
    md_dtype = dtype.replace("*", "\\*")  # keeps `bf16*f32->f32` literal in markdown
    lines.append(f"| {case} | {md_dtype} | {n} | {f(o)} | {frac} | {f(p)} | {ratio} | {f(c)} | {f(t)} | "
                 f"{impls.get('strided-apply', {}).get('check', '-')} |")
    if o and p and case != "d2d_copy":
        chart.append((f"{case} {dtype} {n}", o, p))
open(md_f, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(10, 0.35 * len(chart) + 1.5))
    ys = range(len(chart))
    ax.barh([y + 0.2 for y in ys], [c[1] for c in chart], 0.4, label="strided-apply")
    ax.barh([y - 0.2 for y in ys], [c[2] for c in chart], 0.4, label="PyTorch")
    ax.axvline(ceiling, color="k", ls="--", label="ceiling")
    ax.set_yticks(list(ys), [c[0] for c in chart], fontsize=7)
    ax.set_xlabel("GB/s")
    ax.legend()
    fig.tight_layout()
    fig.savefig(png_f, dpi=120)
except Exception as e:
    print(f"chart skipped: {e}")
