"""PyTorch's figures for colfold_loose.cu's cases, same machine and call (JSON lines): amax and
any of u8, all of bf16, over dim 0 of 16384 x 16383 and 16384 x 16384; CUDA events, median
of 41 after 5 warm-ups."""
import json

import torch


def median_ms(f, reps=41, warm=5):
    for _ in range(warm):
        f()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = []
    for _ in range(reps):
        a.record()
        f()
        b.record()
        b.synchronize()
        t.append(a.elapsed_time(b))
    return sorted(t)[len(t) // 2]


for cols in (16383, 16384):
    g = torch.Generator(device="cuda").manual_seed(7)
    u8 = torch.randint(0, 256, (16384, cols), dtype=torch.uint8, device="cuda", generator=g)
    sparse = torch.where(u8 < 255, 0, u8).to(torch.uint8)
    bf = (torch.rand(16384, cols, device="cuda", generator=g) + 0.5).to(torch.bfloat16)
    for name, x, f in (
        ("amax_u8", u8, lambda x: torch.amax(x, dim=0)),
        ("any_u8", sparse, lambda x: torch.any(x, dim=0)),
        ("all_bf16", bf, lambda x: torch.all(x, dim=0)),
    ):
        ms = median_ms(lambda: f(x))
        gbs = (x.numel() * x.element_size() + cols) / ms / 1e6
        print(json.dumps({"op": name, "shape": f"16384x{cols}", "variant": "torch", "ms": round(ms, 4), "gbs": round(gbs)}))
