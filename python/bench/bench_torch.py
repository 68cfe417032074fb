"""strided_apply against PyTorch on one CUDA device; prints one JSON line per case:
``{"impl": ..., "case": ..., "dtype": ..., "value": ..., "unit": ...}``.

Cases (``--only NAME`` selects some; repeatable, or comma-separated):

* ``tiny_host``: host time per call, Python included, of ``sa.add(a, b, out=c)`` and
  ``torch.add(a, b, out=c)`` on 1024-element f32 tensors: the median over 50 bursts of
  200 calls each, the two alternating burst by burst, each burst started after
  ``torch.cuda.synchronize()``, timed with ``time.perf_counter`` (unit ``us`` per call);
  then ``tiny_host_ratio``, the median over the 50 pairs of bursts of ours / torch's.
* ``transpose_add``: ``c = a + b.t()`` on 16384×16384 f32 (``sa.add(a, b.t(), out=c)``
  and ``torch.add(a, b.t(), out=c)``): CUDA events, 5 warm-ups, then the median of 30
  timed runs, the output poisoned with NaN before the timed runs, random inputs; GB/s with
  bytes = 3 × 4 × 16384²; strided_apply's result must equal torch's exactly (else the
  script exits 1).
* ``transpose_add_bf16``: the same in bf16 (bytes = 3 × 2 × 16384²).
* ``tiny_phases``: where ``sa.add``'s host time goes (``strided_apply._native._call_phases``:
  reading the three tensors, the stream query, finding the op, the launch alone, the whole
  call; median over 25 bursts of 200 of each, ``ns`` per call).

* ``same_buffers``: issue #13's narrow-type cases (u8 and bf16 contiguous add, broadcast
  row, bf16 ``A + Bᵀ`` and permuted copy) and the ceiling's two (f32 add, d2d copy), each
  run by torch and by strided_apply **on the same torch tensors**, so that where the
  allocator put the buffers cannot differ between the two; the two alternate, three rounds
  of 5 warm-ups and the median of 20 CUDA-event-timed runs each, the output poisoned
  first; GB/s with each operand's bytes counted once. The results must be equal.

``STRIDED_APPLY_TORCH_READER=python`` makes the module read torch tensors with six Python
calls each, ``=shim`` with libtorch's stable C shim only (no calibrated reads); the stderr
lines of ``tiny_host`` say which reads were used.

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

CASES = ("tiny_host", "tiny_phases", "transpose_add", "transpose_add_bf16", "same_buffers")


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
    # Bursts alternate between the two (which goes first alternates too), so that a drift of the
    # host's speed during the run weighs on both alike.
    per_call = {impl: [] for impl in impls}
    order = list(impls.items())
    for k in range(bursts):
        for impl, fn in (order if k % 2 == 0 else order[::-1]):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            t1 = time.perf_counter()
            per_call[impl].append((t1 - t0) / calls * 1e6)
    torch.cuda.synchronize()
    ratios = [x / y for x, y in zip(per_call["strided_apply"], per_call["torch"])]
    for impl, v in per_call.items():
        emit(impl, "tiny_host", "f32", statistics.median(v), "us",
             n=1024, bursts=bursts, calls_per_burst=calls, min=round(min(v), 4),
             torch_reader=sa._native._torch_reader())
    emit("strided_apply", "tiny_host_ratio", "f32", statistics.median(ratios), "x torch",
         pairs=len(ratios), q1=round(statistics.quantiles(ratios, n=4)[0], 3),
         q3=round(statistics.quantiles(ratios, n=4)[2], 3))


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


def median_ms(fn, out, warmups, runs):
    """`warmups` calls of `fn`, `out` poisoned (NaN, or 255 for integers: a run that writes
    nothing cannot pass the equality check), then the median of `runs` CUDA-event times, ms."""
    for _ in range(warmups):
        fn()
    out.fill_(float("nan") if out.dtype.is_floating_point else 255)
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


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
        ms = median_ms(fn, out, warmups, runs)
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


def same_buffers(warmups=5, runs=20, rounds=3):
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(1)
    big = 16384
    sq = (big, big)

    def rnd(shape, dtype):
        if dtype.is_floating_point:
            return (torch.rand(shape, device=dev, generator=g) * 2 - 1).to(dtype)
        return torch.randint(0, 255, shape, device=dev, generator=g).to(dtype)

    def case(name, dtype_name, inputs, out_dtype, out_shape, sa_fn, torch_fn):
        outs = {k: torch.empty(out_shape, device=dev, dtype=out_dtype) for k in ("strided_apply", "torch")}
        nbytes = outs["torch"].numel() * outs["torch"].element_size() + sum(
            x.untyped_storage().nbytes() if x.numel() > 0 else 0 for x in inputs)
        impls = {"torch": lambda: torch_fn(*inputs, outs["torch"]),
                 "strided_apply": lambda: sa_fn(*inputs, outs["strided_apply"])}
        per = {k: [] for k in impls}
        for _ in range(rounds):
            for impl, fn in impls.items():
                ms = median_ms(fn, outs[impl], warmups, runs)
                per[impl].append(nbytes / (ms * 1e-3) / 1e9)
        for impl, v in per.items():
            emit(impl, f"same_buffers_{name}", dtype_name, statistics.median(v), "GB/s",
                 rounds=[round(x, 1) for x in v], bytes=nbytes)
        same = torch.equal(outs["strided_apply"], outs["torch"])
        print(f"# same_buffers_{name} {dtype_name}: strided_apply's result "
              f"{'equals' if same else 'DIFFERS FROM'} torch's", file=sys.stderr)
        return same

    add = lambda a, b, out: sa.add(a, b, out=out)  # noqa: E731
    tadd = lambda a, b, out: torch.add(a, b, out=out)  # noqa: E731
    ok = True
    n = 1 << 28
    ok &= case("d2d_copy", "f32", [rnd((n,), torch.float32)], torch.float32, (n,),
               lambda a, out: sa.cast(a, out=out), lambda a, out: out.copy_(a))
    for name, dt in (("f32", torch.float32), ("u8", torch.uint8), ("bf16", torch.bfloat16)):
        ok &= case("contiguous_add", name, [rnd((n,), dt), rnd((n,), dt)], dt, (n,), add, tadd)
    for name, dt in (("u8", torch.uint8), ("bf16", torch.bfloat16)):
        ok &= case("broadcast_row", name, [rnd(sq, dt), rnd((1, big), dt)], dt, sq, add, tadd)
    ok &= case("transposed", "bf16", [rnd(sq, torch.bfloat16), rnd(sq, torch.bfloat16).t()], torch.bfloat16, sq,
               add, tadd)
    x = rnd((64, 64, 128, 256), torch.bfloat16).permute(3, 1, 0, 2)
    ok &= case("permute_copy", "bf16", [x], torch.bfloat16, x.shape,
               lambda a, out: sa.cast(a, out=out), lambda a, out: out.copy_(a))
    return ok


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
    if "same_buffers" in want:
        ok &= same_buffers()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
