"""strided_apply against PyTorch on one CUDA device; prints one JSON line per case:
``{"impl": ..., "case": ..., "dtype": ..., "value": ..., "unit": ...}``.

Cases (``--only NAME`` selects some; repeatable, or comma-separated):

* ``tiny_host``: host time per call, Python included, of ``sa.add(a, b, out=c)`` and
  ``torch.add(a, b, out=c)`` on 1024-element f32 tensors: the median over 50 bursts of
  200 calls, each burst started after ``torch.cuda.synchronize()``, timed with
  ``time.perf_counter`` (unit ``us`` per call).
* ``transpose_add``: ``c = a + b.t()`` on 16384×16384 f32 (``sa.add(a, b.t(), out=c)``
  and ``torch.add(a, b.t(), out=c)``): CUDA events, 5 warm-ups, then the median of 30
  timed runs, the output poisoned with NaN before the timed runs, random inputs; GB/s with
  bytes = 3 × 4 × 16384²; strided_apply's result must equal torch's exactly (else the
  script exits 1).
* ``transpose_add_bf16``: the same in bf16 (bytes = 3 × 2 × 16384²).
* ``tiny_phases``: where ``sa.add``'s host time goes (``strided_apply._native._call_phases``:
  reading the three tensors, the stream query, finding the op, the launch alone, the whole
  call; median over 25 bursts of 200 of each, ``ns`` per call).

Details (medians' spread, ms, the equality check) go to stderr as ``#`` lines.
Needs Python 3.12, torch 2.11 and a CUDA GPU.
"""

import argparse
import json
import statistics
import sys
import time

import torch

import strided_apply as sa

CASES = ("tiny_host", "tiny_phases", "transpose_add", "transpose_add_bf16")


def emit(impl, case, dtype, value, unit, **detail):
    """One JSON line on stdout (keys impl, case, dtype, value, unit); details on stderr."""
    rec = {"impl": impl, "case": case, "dtype": dtype, "value": round(value, 4), "unit": unit}
    print(json.dumps(rec), flush=True)
    if detail:
        print(f"# {impl} {case} {dtype}: " + ", ".join(f"{k}={v}" for k, v in detail.items()), file=sys.stderr, flush=True)


def tiny_host(bursts=50, calls=200):
    dev = torch.device("cuda")
    a = torch.rand(1024, device=dev)
    b = torch.rand(1024, device=dev)
    c = torch.empty(1024, device=dev)
    impls = {
        "strided_apply": lambda: sa.add(a, b, out=c),
        "torch": lambda: torch.add(a, b, out=c),
    }
    for fn in impls.values():  # load modules, warm caches
        for _ in range(calls):
            fn()
    torch.cuda.synchronize()
    sa.add(a, b, out=c)
    torch.cuda.synchronize()
    assert torch.equal(c, a + b)
    for impl, fn in impls.items():
        per_call = []
        for _ in range(bursts):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            t1 = time.perf_counter()
            per_call.append((t1 - t0) / calls * 1e6)
        torch.cuda.synchronize()
        emit(impl, "tiny_host", "f32", statistics.median(per_call), "us",
             n=1024, bursts=bursts, calls_per_burst=calls, min=round(min(per_call), 4))


def tiny_phases(bursts=25, calls=200):
    from strided_apply import _native

    dev = torch.device("cuda")
    a, b, c = (torch.rand(1024, device=dev) for _ in range(3))
    _native._call_phases(calls, "add", a, b, out=c)  # warm up
    per = {}
    for _ in range(bursts):
        torch.cuda.synchronize()
        for name, ns in _native._call_phases(calls, "add", a, b, out=c):
            per.setdefault(name, []).append(ns)
    torch.cuda.synchronize()
    for name, v in per.items():
        emit("strided_apply", f"tiny_phase_{name}", "f32", statistics.median(v), "ns",
             min=round(min(v), 1))


def transpose_add(dtype_name, n=16384, warmups=5, runs=30):
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
    case = "transpose_add" if dtype_name == "f32" else "transpose_add_bf16"
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    a = torch.rand((n, n), device=dev, generator=g).to(dtype)
    b = torch.rand((n, n), device=dev, generator=g).to(dtype)
    c_sa = torch.empty((n, n), device=dev, dtype=dtype)
    c_torch = torch.empty((n, n), device=dev, dtype=dtype)
    bytes_moved = 3 * a.element_size() * n * n
    impls = {
        "strided_apply": (lambda: sa.add(a, b.t(), out=c_sa), c_sa),
        "torch": (lambda: torch.add(a, b.t(), out=c_torch), c_torch),
    }
    for impl, (fn, out) in impls.items():
        for _ in range(warmups):
            fn()
        out.fill_(float("nan"))  # poisoned: a run that writes nothing cannot pass the check
        torch.cuda.synchronize()
        times = []
        for _ in range(runs):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))  # ms
        ms = statistics.median(times)
        emit(impl, case, dtype_name, bytes_moved / (ms * 1e-3) / 1e9, "GB/s",
             n=n, ms=round(ms, 4), runs=runs, warmups=warmups)
    torch.cuda.synchronize()
    same = torch.equal(c_sa, c_torch) and not bool(torch.isnan(c_sa).any())
    print(f"# {case}: strided_apply's result {'equals' if same else 'DIFFERS FROM'} torch's", file=sys.stderr)
    if not same:
        diff = (c_sa.float() - c_torch.float()).abs()
        print(f"{case}: strided_apply differs from torch: max |diff| {diff.nan_to_num(float('inf')).max().item()}",
              file=sys.stderr)
        return False
    return True


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", action="append", default=[],
                   help=f"run only these cases (repeatable or comma-separated): {', '.join(CASES)}")
    args = p.parse_args(argv)
    only = [x for o in args.only for x in o.split(",") if x]
    unknown = [x for x in only if x not in CASES]
    if unknown:
        p.error(f"unknown case(s) {unknown}; cases: {', '.join(CASES)}")
    want = only or list(CASES)
    if not torch.cuda.is_available():
        print("bench_torch: no CUDA device (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    ok = True
    if "tiny_host" in want:
        tiny_host()
    if "tiny_phases" in want:
        tiny_phases()
    if "transpose_add" in want:
        ok &= transpose_add("f32")
    if "transpose_add_bf16" in want:
        ok &= transpose_add("bf16")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
