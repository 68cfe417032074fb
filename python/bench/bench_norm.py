"""Normalisation programs (``sa.norm`` and the library functions built on it) against torch
eager and ``torch.compile`` on one CUDA device; prints one JSON line per measurement:
``{"impl": ..., "case": ..., "dtype": ..., "value": ..., "unit": ...}``.

Shapes: M rows of N elements normalised over the last axis, N = 256, 1024, 4096, 16384,
65536, 262144 (``--quick``: 1024, 4096, 32768), M = 2^27 / N (256 MiB of bf16, 512 MiB of
f32; M = 512 at N = 262144), in bf16 and f32. The ``case`` field is ``<case>_n<N>``.

Cases (``--only NAME`` selects some; repeatable, or comma-separated):

* ``softmax``: ``sa.softmax(x, -1, out=y)``, ``torch.softmax(x, -1)`` and
  ``torch.compile`` of it (mode default, ``dynamic=False``).
* ``rms_norm``: ``sa.rms_norm(x, (N,), w, 1e-6, out=y)``, ``F.rms_norm`` alike, compiled.
* ``layer_norm``: ``sa.layer_norm(x, (N,), w, b, 1e-5, out=y)``, ``F.layer_norm``, compiled.
* ``user_softmax``: ``sa.norm("x = a * s + mask; m = amax(x); e = exp(x - m); e / sum(e)")``
  called as ``f(a=x, s=0.125, mask=mask, dim=-1, out=y)``, ``mask`` an [N] row broadcast
  over the rows; ``torch.softmax(x * 0.125 + mask, -1)`` eager and its ``torch.compile``.
* ``cross_entropy``: ``sa.cross_entropy(x, t)`` (mean over the rows; ``t`` int64 class
  indices), ``F.cross_entropy(x, t)`` and compiled; the bytes are ``x`` and ``t`` read once
  (the loss is one value, returned: no ``out=``).
* ``copy``: ``y.copy_(x)``, the ceiling (impl ``torch``); it runs at every shape and type,
  whatever ``--only`` says, as the ratios need it.

``x`` is ``torch.randn``; ``w`` (0.5 + uniform [0, 1)), ``b`` and ``mask`` (standard normal)
are [N] of x's type. Impls ``strided_apply``, ``torch``, ``torch_compile`` in GB/s, then
``<impl>_vs_copy`` (unit ``x copy``): that GB/s over the copy's at the same shape and type.

Timing (as bench_torch.py): CUDA events around each call, 5 warm-ups, then the median of 30
timed runs; strided_apply writes a preallocated ``out``, poisoned with NaN after the
warm-ups (torch's functions have no ``out=``: they run as they are); every impl of a case
runs in one process. GB/s = (x read once + y written once + w, b, mask once) / median time.

First calls (stderr): from the call to the end of a ``torch.cuda.synchronize()``.
``compile_s`` is torch.compile's first call (``torch._dynamo.reset()`` before each case;
Inductor's and Triton's disk caches in a fresh temporary folder unless ``--warm-caches``);
``first_call_s`` is strided_apply's: a new program for ``user_softmax`` (``sa.norm(text)``
included), the first call at this shape and type for the library functions (one ``sa.add``
has run before, so the CUDA context is up). A new row kernel compiles on a thread of its own
while that first call runs the composition of precompiled kernels; ``sa.wait_compiles()``
then waits for it before the timed runs.

Check, once per case: strided_apply's output of the timed runs against torch eager's,
``torch.testing.assert_close`` with rtol 1.6e-2, atol 1e-5 (bf16) or rtol 1e-5, atol 1e-6
(f32); in bf16 torch runs on f32 copies and rounds once, as the library does (its bf16
``x * 0.125 + mask`` would round before the softmax). A failed check, or a strided_apply
call that raised, makes the exit status 1 after every case has run; a failed
``torch.compile`` is reported and the run goes on. Exit status 2 without a CUDA device.
Needs torch 2.11 and a CUDA GPU.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import traceback

torch = None
sa = None

CASES = ("softmax", "rms_norm", "layer_norm", "user_softmax", "cross_entropy", "copy")
SIZES = (256, 1024, 4096, 16384, 65536, 262144)
QUICK_SIZES = (1024, 4096, 32768)
ELEMENTS = 1 << 27
USER = "x = a * s + mask; m = amax(x); e = exp(x - m); e / sum(e)"
TOL = {"bf16": (1.6e-2, 1e-5), "f32": (1e-5, 1e-6)}
# The row tensors each case's torch function takes, in order.
ARGS = {"softmax": ("x",), "rms_norm": ("x", "w"), "layer_norm": ("x", "w", "b"), "user_softmax": ("x", "mask"),
        "cross_entropy": ("x", "t")}
WARMUPS, RUNS = 5, 30


def log(msg):
    print(f"# {msg}", file=sys.stderr, flush=True)


def emit(impl, case, dtype, value, unit, **detail):
    """One JSON line on stdout (keys impl, case, dtype, value, unit); details on stderr."""
    rec = {"impl": impl, "case": case, "dtype": dtype, "value": round(value, 4), "unit": unit}
    print(json.dumps(rec), flush=True)
    if detail:
        log(f"{impl} {case} {dtype}: " + ", ".join(f"{k}={v}" for k, v in detail.items()))


def guarded(what, fn):
    """fn() or None, the exception and its traceback on stderr."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - a benchmark reports and goes on
        log(f"{what} failed: {type(e).__name__}: {e}")
        traceback.print_exc(file=sys.stderr)


def median_ms(fn, out):
    """WARMUPS calls of `fn`, `out` poisoned with NaN (when given), then the median of RUNS
    CUDA-event times on torch's current stream, ms."""
    for _ in range(WARMUPS):
        fn()
    if out is not None:
        out.fill_(float("nan"))
    torch.cuda.synchronize()
    times = []
    for _ in range(RUNS):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def first_call_s(fn):
    """Seconds from the call to the end of a device synchronisation; and fn's result."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    r = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0, r


def sa_call(case, t, y):
    """strided_apply's call for a case, writing `y`, run once and returned (for user_softmax
    the program is parsed here too, so a first call timed around this includes it)."""
    x, n = t["x"], t["x"].shape[-1]
    if case == "user_softmax":
        f = sa.norm(USER)
        call = lambda: f(a=x, s=0.125, mask=t["mask"], dim=-1, out=y)  # noqa: E731
    else:
        call = {"softmax": lambda: sa.softmax(x, -1, out=y),
                "rms_norm": lambda: sa.rms_norm(x, (n,), t["w"], 1e-6, out=y),
                "layer_norm": lambda: sa.layer_norm(x, (n,), t["w"], t["b"], 1e-5, out=y),
                "cross_entropy": lambda: sa.cross_entropy(x, t["t"])}[case]
    call()
    return call


def torch_fn(case, n):
    """torch's function for a case, of the tensors ARGS[case] names."""
    F = torch.nn.functional
    return {
        "softmax": lambda x: torch.softmax(x, -1),
        "rms_norm": lambda x, w: F.rms_norm(x, (n,), w, 1e-6),
        "layer_norm": lambda x, w, b: F.layer_norm(x, (n,), w, b, 1e-5),
        "user_softmax": lambda x, mask: torch.softmax(x * 0.125 + mask, -1),
        "cross_entropy": lambda x, t: F.cross_entropy(x, t),
    }[case]


def run_case(case, dt, t, copy_gbs):
    """strided_apply, torch eager and torch.compile on one case; whether the check passed."""
    x = t["x"]
    m, n = x.shape
    name = f"{case}_n{n}"
    args = [t[k] for k in ARGS[case]]
    loss = case == "cross_entropy"  # one value, returned
    y = None if loss else torch.empty_like(x)
    moved = sum(a.numel() * a.element_size() for a in args) + (0 if loss else y.numel() * y.element_size())
    fn = torch_fn(case, n)
    rows = {}
    got = {}

    def run_sa():
        first, call = first_call_s(lambda: sa_call(case, t, y))
        sa.wait_compiles()  # a new row kernel compiles in the background: time it, not the composition
        ms = median_ms(call, y)
        got["y"] = call() if loss else y
        return ms, {"first_call_s": round(first, 4)}

    def run_eager():
        return median_ms(lambda: fn(*args), None), {}

    def run_compile():
        torch._dynamo.reset()
        cfn = torch.compile(fn, dynamic=False)
        first, _ = first_call_s(lambda: cfn(*args))
        return median_ms(lambda: cfn(*args), None), {"compile_s": round(first, 2)}

    for impl, run in (("strided_apply", run_sa), ("torch", run_eager), ("torch_compile", run_compile)):
        r = guarded(f"{impl} {name} {dt}", run)
        if r is None:
            continue
        ms, detail = r
        rows[impl] = moved / ms / 1e6  # bytes per ms / 1e6 = GB/s
        emit(impl, name, dt, rows[impl], "GB/s", rows=m, n=n, ms=round(ms, 4), bytes=moved, **detail)
    for impl, v in rows.items():
        emit(f"{impl}_vs_copy", name, dt, v / copy_gbs, "x copy")
    torch._dynamo.reset()
    if "strided_apply" not in rows:
        log(f"{name} {dt}: check not run (strided_apply failed)")
        return False
    rtol, atol = TOL[dt]
    want = fn(*(a.float() if a.is_floating_point() else a for a in args)).to(x.dtype) if dt == "bf16" else fn(*args)
    y = got["y"]
    try:
        torch.testing.assert_close(y, want, rtol=rtol, atol=atol)
    except AssertionError as e:
        log(f"{name} {dt}: strided_apply DIFFERS FROM torch (rtol {rtol}, atol {atol}): " + " ".join(str(e).split()))
        return False
    log(f"{name} {dt}: strided_apply's result is close to torch's (rtol {rtol}, atol {atol}; "
        f"max |diff| {(y.float() - want.float()).abs().max().item():.3g})")
    return True


def main(argv=None):
    global torch, sa
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", action="append", default=[],
                   help=f"run only these cases (repeatable or comma-separated): {', '.join(CASES)}")
    p.add_argument("--quick", action="store_true", help=f"only N = {', '.join(map(str, QUICK_SIZES))}")
    p.add_argument("--warm-caches", action="store_true",
                   help="keep the usual Inductor/Triton on-disk caches (compile times may hit them)")
    args = p.parse_args(argv)
    only = [x for o in args.only for x in o.split(",") if x]
    unknown = [x for x in only if x not in CASES]
    if unknown:
        p.error(f"unknown case(s) {unknown}; cases: {', '.join(CASES)}")
    want = [c for c in CASES if c != "copy" and (not only or c in only)]

    cache_dir = None
    if not args.warm_caches:
        # Before torch is imported: Inductor and Triton read these once.
        cache_dir = tempfile.mkdtemp(prefix="bench_norm_caches_")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache_dir, "inductor")
        os.environ["TRITON_CACHE_DIR"] = os.path.join(cache_dir, "triton")
    import torch as _torch

    torch = _torch
    if not torch.cuda.is_available():
        print("bench_norm: no CUDA device (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    import strided_apply as _sa

    sa = _sa
    dev = torch.device("cuda")
    w = torch.ones(1024, device=dev)  # the CUDA context and the built-in kernels, loaded
    sa.add(w, w, out=w)
    torch.cuda.synchronize()
    log(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, cold caches {cache_dir is not None}")

    ok = True
    for dt, dtype in (("bf16", torch.bfloat16), ("f32", torch.float32)):
        for n in QUICK_SIZES if args.quick else SIZES:
            g = torch.Generator(device=dev).manual_seed(n)
            x = torch.randn((ELEMENTS // n, n), device=dev, dtype=dtype, generator=g)
            t = {"x": x, "w": 0.5 + torch.rand(n, device=dev, dtype=dtype, generator=g)}
            t["b"], t["mask"] = (torch.randn(n, device=dev, dtype=dtype, generator=g) for _ in range(2))
            t["t"] = torch.randint(0, n, (x.shape[0],), device=dev, generator=g)
            y = torch.empty_like(x)
            ms = median_ms(lambda: y.copy_(x), y)
            copy_gbs = 2 * x.numel() * x.element_size() / ms / 1e6
            emit("torch", f"copy_n{n}", dt, copy_gbs, "GB/s", rows=x.shape[0], n=n, ms=round(ms, 4))
            del y
            for case in want:
                ok &= run_case(case, dt, t, copy_gbs)
            del x, t
            torch.cuda.empty_cache()
    if cache_dir is not None:
        shutil.rmtree(cache_dir, ignore_errors=True)
    if not ok:
        print("bench_norm: some result checks failed (see the # lines above)", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
