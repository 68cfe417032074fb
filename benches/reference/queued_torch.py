"""PyTorch's f32 add of 2^28 (the ceiling's case) and a 256 MiB copy, timed as the bench
times them (events around one call) and queued behind a 50 us spin (`torch.cuda._sleep`),
so that the events exclude the host's submission (not part of the library).
    python3 queued_torch.py [ROUNDS]      (JSON lines)
"""
import json
import statistics
import sys

import torch


def median_ms(fn, queued, reps=25, warmups=3):
    for _ in range(warmups):
        fn()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        if queued:
            torch.cuda._sleep(100_000)  # clock cycles: ~50 us at 1.98 GHz
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    g = torch.Generator(device="cuda").manual_seed(7)
    n = 1 << 28
    x = torch.rand(n, device="cuda", generator=g)
    y = torch.rand(n, device="cuda", generator=g)
    z = torch.full((n,), float("nan"), device="cuda")
    s = torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda", generator=g)
    d = torch.zeros_like(s)
    cases = {
        "f32_add_2^28": (lambda: torch.add(x, y, out=z), 12.0 * n),
        "u8_copy_256MiB": (lambda: d.copy_(s), 2.0 * n),
    }
    for r in range(rounds):
        for queued in (False, True):
            for name, (fn, nbytes) in cases.items():
                ms = median_ms(fn, queued)
                print(json.dumps({"round": r, "timing": "queued" if queued else "plain", "case": name,
                                  "ms": round(ms, 5), "gbps": round(nbytes / ms / 1e6, 1)}), flush=True)
    torch.cuda.synchronize()
    assert torch.equal(z, x + y) and torch.equal(d, s), "a result differs"


main()
