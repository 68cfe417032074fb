"""First call of the seed expression in a fresh process, by size: python first_call.py N MODE"""
import sys, time, torch
import strided_apply as sa
n, mode = int(sys.argv[1]), sys.argv[2]
g = torch.Generator(device="cuda").manual_seed(1)
if mode == "broadcast":
    a = torch.rand(1, n, device="cuda", generator=g); b = torch.rand(n, 1, device="cuda", generator=g)
else:
    a = torch.rand(n, n, device="cuda", generator=g); b = torch.rand(n, n, device="cuda", generator=g)
c = torch.rand(n, n, device="cuda", generator=g)
out = torch.empty(n, n, device="cuda")
sa.add(c, c, out=out); torch.cuda.synchronize()
import os
if os.environ.get("WARM_POOL"):
    sa.sum(c); torch.cuda.synchronize()  # scratch from the device's stream-ordered pool
t = time.perf_counter(); f = sa.expr("sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+2)"); t_build = time.perf_counter() - t
f(a=a, b=b, c=c, out=out); torch.cuda.synchronize(); t1 = time.perf_counter() - t
t = time.perf_counter(); f(a=a, b=b, c=c, out=out); torch.cuda.synchronize(); t2 = time.perf_counter() - t
t = time.perf_counter(); g2 = sa.expr("a*b + c"); g2(a=a, b=b, c=c, out=out); torch.cuda.synchronize(); t3 = time.perf_counter() - t
info = [m for m in sa.module_info(0) if "expr" in m]
print(f"n={n} mode={mode} warm_pool={bool(os.environ.get('WARM_POOL'))} build_ms={t_build*1e3:.2f} first_ms={t1*1e3:.2f} second_ms={t2*1e3:.2f} new_expr_ms={t3*1e3:.2f} {info}")
