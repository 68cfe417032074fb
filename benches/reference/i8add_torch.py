"""PyTorch's figure for i8add.cu's case, same machine and call (JSON lines): `a + b` of int8,
2^28 elements, contiguous, into a preallocated output; CUDA events, median of 41 after 5
warm-ups."""
import json

import torch

n = 1 << 28
g = torch.Generator(device="cuda").manual_seed(7)
a = torch.randint(-128, 128, (n,), dtype=torch.int8, device="cuda", generator=g)
b = torch.randint(-128, 128, (n,), dtype=torch.int8, device="cuda", generator=g)
o = torch.empty_like(a)
for name, f in (("torch_add_out", lambda: torch.add(a, b, out=o)), ("torch_add", lambda: a + b)):
    for _ in range(5):
        f()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = []
    for _ in range(41):
        e0.record()
        f()
        e1.record()
        e1.synchronize()
        t.append(e0.elapsed_time(e1))
    ms = sorted(t)[len(t) // 2]
    assert torch.equal(torch.add(a, b), (a.to(torch.int16) + b).to(torch.int8))
    print(json.dumps({"variant": name, "ms": round(ms, 4), "gbs": round(3 * n / ms / 1e6)}))
