# What row_same_buffers.py and cast_same_buffers.py share (not part of the library): the seeded
# generator, CuPy launches on torch's current stream, event timing, and the alternating rounds.
import json, statistics, sys
import torch, cupy as cp

dev = torch.device("cuda")
# The seed is the script's first argument (default 1).
gen = torch.Generator(device=dev).manual_seed(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
# CuPy kernels launch here (`with stream:`), where torch's events are recorded.
stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)


def ev_ms(f, warm=5, runs=25):
    """Median of `runs` event-timed calls of `f` after `warm` untimed ones, in ms."""
    for _ in range(warm):
        f()
    t = []
    for _ in range(runs):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); f(); e.record(); e.synchronize(); t.append(s.elapsed_time(e))
    return statistics.median(t)


def compare(case, impls, out, poison, want, nbytes, unchecked=(), rounds=5, **extra):
    """`rounds` rounds over `impls` (name -> launch writing `out`), alternating: `out` poisoned,
    timed, then checked equal to `want` (except the names in `unchecked`). Prints one JSON line
    per impl: the median GB/s over the rounds and each round's."""
    per = {name: [] for name in impls}
    for _ in range(rounds):
        for name, f in impls.items():
            out.fill_(poison); torch.cuda.synchronize()
            ms = ev_ms(f)
            if name not in unchecked:
                assert torch.equal(out, want), name
            per[name].append(round(nbytes / ms / 1e6, 1))
    for name, v in per.items():
        print(json.dumps({"case": case, "impl": name, "median_gbps": statistics.median(v), "rounds": v, **extra}))
