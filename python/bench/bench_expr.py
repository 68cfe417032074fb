"""Expressions (``sa.expr``) on one CUDA device against torch eager, ``torch.compile``,
CuPy's ``ElementwiseKernel`` and the library's specialised kernels.

Usage (a GPU machine with torch 2.11, CuPy and the strided_apply wheel installed)::

    python bench_expr.py --out DIR            # the full run (a few minutes: mostly compiles)
    python bench_expr.py --out DIR --quick    # sizes 16x smaller, fewer runs: a smoke run
    python bench_expr.py --out DIR --only seed,chain   # some groups: seed, single, chain, host, reduce

It prints one Markdown table per group and writes ``DIR/bench_expr.json`` (the machine,
the versions, and every row with its raw numbers). The exit status is 1 when a result
check failed (the numbers are still written), 2 without a CUDA device.

Groups:

* ``seed``: ``sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+2)``: (i) f32, out 16384x16384, ``a``
  a row [1, 16384], ``b`` a column [16384, 1], ``c`` full; (ii) f32, three dense inputs
  of 2^27 elements; (iii) f64, out 16384x8192, broadcast as (i). Columns: ``sa.expr``
  (steady GB/s and the first call's seconds), torch eager (the same expression with torch
  ops, its last op writing into ``out``), ``torch.compile`` (steady GB/s and first call),
  CuPy ``ElementwiseKernel`` with broadcasting (steady GB/s and first call), and the ratio
  sa/eager of the steady GB/s.
* ``single``: one op through ``sa.expr("a + b")`` against ``sa.add`` in the same process:
  f32 contiguous 2^26, f32 ``a + b.t()`` (8192x8192), bf16 ``a + b`` with ``b`` a
  broadcast row (8192x8192 out), u8 contiguous 2^26; the ratio is expr/specialised GB/s.
  The two alternate over 3 rounds (the median of the rounds' medians is reported) and
  their results must be equal.
* ``chain``: 12 cheap ops on three dense f32 inputs of 2^26 elements
  (``CHAIN`` below): sa.expr, torch eager, torch.compile, CuPy.
* ``host``: host time per call on 1024-element f32 tensors: the wall time of 10000 calls
  of a kept expression ``f(a=x, b=y, out=z)`` (and positional ``f(x, y, out=z)``), of
  ``sa.add(x, y, out=z)`` and of ``torch.add(x, y, out=z)``, divided by 10000,
  synchronising only at the end (the final synchronisation is inside the wall time); the
  median of 11 such bursts, the impls alternating burst by burst.
* ``reduce``: ``sa.expr(text).sum(..., dim=d)`` in one pass against the library's
  ``sa.map_reduce("sqdiff", ...)`` (where one exists), torch eager (the expression, then
  ``torch.sum``) and ``torch.compile``: ``sum((a-b)*(a-b))`` of two dense f32 8192x8192
  over dim 1 (rows) and dim 0 (columns), over the rows of [2^20, 64], and the seed
  expression (broadcast as the seed's first row, 16384x16384) over dim 1. GB/s = the
  inputs read once + the output written once.

Timing (as bench_torch.py): CUDA events on torch's current stream around each call, 5
warm-ups, then the median of 30 timed runs (``--quick``: 2 and 10); random inputs; every
preallocated output is poisoned (NaN, or 255 for integers) after the warm-ups, so a run
that writes nothing cannot pass the result check. GB/s = (the bytes of every input read
once + the output written once) / median time: the traffic of an ideal fused kernel, used
for every column (torch eager moves more than that; its number is an effective rate).
CuPy runs on torch's current stream, on the same buffers (``cupy.from_dlpack``).

First calls: time from the call (for ``sa.expr``: from building the expression) to the
end of a ``torch.cuda.synchronize()``. ``sa``'s first seed row includes loading the
interpreter's kernels (the process has run one ``sa.add`` before as the warm-up op, so the
CUDA context is up); its later rows and the chain only parse and compile a program, which
takes microseconds. ``torch.compile`` is reset (``torch._dynamo.reset()``)
before each row, and CuPy's kernels get a new name per row. Unless ``--warm-caches`` is
given, the Inductor, Triton and CuPy on-disk caches point to a fresh temporary folder, so
first calls are cold compiles as on a new machine.

Every column of every row is guarded: an exception is printed in its cell ("n/a: ...")
and the run goes on.
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import traceback

torch = None
cp = None
sa = None

SEED = "sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+2)"
# 12 ops: * + / - maximum * + minimum - * fma +
CHAIN = "minimum(maximum(a*b + c - a/b, c), a*2 + b) * (c - b) + fma(a, c, b)"
CHAIN_OPS = 12
GROUPS = ("seed", "single", "chain", "host", "reduce")


def log(msg):
    print(f"# {msg}", file=sys.stderr, flush=True)


def na(e):
    msg = f"{type(e).__name__}: {e}".replace("\n", " ").replace("|", "/")
    return "n/a: " + (msg[:160] + "..." if len(msg) > 160 else msg)


def guarded(what, fn, errors):
    """fn() or None, the exception logged (with its traceback on stderr) and kept in
    `errors[what]`."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - a benchmark reports and goes on
        errors[what] = na(e)
        log(f"{what} failed: {na(e)}")
        traceback.print_exc(file=sys.stderr)
        return None


def poison(out):
    out.fill_(float("nan") if out.dtype.is_floating_point else 255)


def median_ms(fn, out, warmups, runs):
    """`warmups` calls of `fn`, `out` poisoned (when given), then the median of `runs`
    CUDA-event times on torch's current stream, ms."""
    for _ in range(warmups):
        fn()
    if out is not None:
        poison(out)
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


def first_call_s(fn):
    """Seconds from the call to the end of a device synchronisation; and fn's result."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    r = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0, r


def gbs(nbytes, ms):
    return nbytes / (ms * 1e-3) / 1e9


def nbytes(*ts):
    """Bytes of each tensor read or written once (a broadcast row counts its own size)."""
    return sum(t.numel() * t.element_size() for t in ts)


def cupy_stream():
    """CuPy's stream context on torch's current stream (the timing events' stream)."""
    ptr = torch.cuda.current_stream().cuda_stream
    return cp.cuda.Stream.null if ptr == 0 else cp.cuda.ExternalStream(ptr)


def compare(got, want, rtol, atol):
    """'ok', or how far `got` is from `want` (NaN positions must agree)."""
    if not torch.equal(got.isnan(), want.isnan()):
        return "NaN positions differ"
    if torch.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
        return "ok"
    d = (got - want).abs().nan_to_num(0).max().item()
    return f"max |diff| {d:.3g}"


def release():
    """Drops torch.compile's graphs and returns cached blocks between rows."""
    try:
        torch._dynamo.reset()
    except Exception:  # noqa: BLE001
        pass
    torch.cuda.empty_cache()


def fmt(x, digits=1):
    if x is None:
        return "n/a"
    if isinstance(x, str):
        return x if len(x) <= 70 else x[:67] + "..."  # the whole text is in the JSON
    return f"{x:.{digits}f}"


def table(headers, rows):
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# seed


def seed_eager(a, b, c, out=None):
    return torch.add(torch.sin(a * b) + torch.sqrt(c), torch.cos(a) / torch.log(torch.cos(b) + 2), out=out)


def seed_fn(a, b, c):
    return torch.sin(a * b) + torch.sqrt(c) + torch.cos(a) / torch.log(torch.cos(b) + 2)


# By dtype name (torch is imported in main, after the cache folders are set).
CUPY_SEED = {
    "float32": "out = sinf(a*b) + sqrtf(c) + cosf(a)/logf(cosf(b) + 2.0f)",
    "float64": "out = sin(a*b) + sqrt(c) + cos(a)/log(cos(b) + 2.0)",
}


def seed_row(tag, label, dtype, shapes, out_shape, s):
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    a = torch.randn(shapes[0], device=dev, generator=g, dtype=dtype)
    # |b| < 2: log(cos(b) + 2) stays above 0.46.
    b = torch.rand(shapes[1], device=dev, generator=g, dtype=dtype) * 4 - 2
    c = torch.rand(shapes[2], device=dev, generator=g, dtype=dtype)
    outs = {k: torch.empty(out_shape, device=dev, dtype=dtype) for k in ("sa", "eager", "cupy")}
    moved = nbytes(a, b, c, outs["sa"])
    rtol, atol = (1e-5, 1e-5) if dtype == torch.float32 else (1e-12, 1e-12)
    row = {"group": "seed", "row": label, "dtype": str(dtype).removeprefix("torch."),
           "out_shape": list(out_shape), "input_shapes": [list(x) for x in shapes], "bytes": moved}
    errors = {}
    checks = {}

    def run_sa():
        def build_and_run():
            f = sa.expr(SEED)
            f(a, b, c, out=outs["sa"])
            return f

        t, f = first_call_s(build_and_run)
        row["sa_first_s"] = t
        ms = median_ms(lambda: f(a, b, c, out=outs["sa"]), outs["sa"], s.warmups, s.runs)
        row["sa_ms"], row["sa_gbs"] = ms, gbs(moved, ms)

    def run_eager():
        ms = median_ms(lambda: seed_eager(a, b, c, out=outs["eager"]), outs["eager"], s.warmups, s.runs)
        row["eager_ms"], row["eager_gbs"] = ms, gbs(moved, ms)

    def run_compile():
        torch._dynamo.reset()
        cfn = torch.compile(seed_fn)
        t, _ = first_call_s(lambda: cfn(a, b, c))
        row["compile_first_s"] = t
        ms = median_ms(lambda: cfn(a, b, c), None, s.warmups, s.runs)
        row["compile_ms"], row["compile_gbs"] = ms, gbs(moved, ms)
        checks["compile"] = lambda: cfn(a, b, c)

    def run_cupy():
        if cp is None:
            raise RuntimeError(f"CuPy is not importable ({CUPY_IMPORT_ERROR})")
        ty = str(dtype).removeprefix("torch.")
        body = CUPY_SEED[ty]
        ca, cb, cc, co = (cp.from_dlpack(x) for x in (a, b, c, outs["cupy"]))

        def build_and_run():
            k = cp.ElementwiseKernel(f"{ty} a, {ty} b, {ty} c", f"{ty} out", body, f"sa_bench_seed_{tag}")
            with cupy_stream():
                k(ca, cb, cc, co)
            return k

        t, k = first_call_s(build_and_run)
        row["cupy_first_s"] = t

        def run():
            with cupy_stream():
                k(ca, cb, cc, co)

        ms = median_ms(run, outs["cupy"], s.warmups, s.runs)
        row["cupy_ms"], row["cupy_gbs"] = ms, gbs(moved, ms)

    for what, fn in (("sa", run_sa), ("eager", run_eager), ("compile", run_compile), ("cupy", run_cupy)):
        log(f"seed {label}: {what}")
        guarded(what, fn, errors)
    torch.cuda.synchronize()
    if "eager_ms" in row:
        if "sa_ms" in row:
            row["check_sa"] = guarded("check sa", lambda: compare(outs["sa"], outs["eager"], rtol, atol), errors)
        if "cupy_ms" in row:
            row["check_cupy"] = guarded("check cupy", lambda: compare(outs["cupy"], outs["eager"], rtol, atol),
                                        errors)
        if "compile" in checks:
            row["check_compile"] = guarded("check compile",
                                           lambda: compare(checks["compile"](), outs["eager"], rtol, atol), errors)
    if "sa_gbs" in row and "eager_gbs" in row:
        row["sa_over_eager"] = row["sa_gbs"] / row["eager_gbs"]
    row["errors"] = errors
    del a, b, c, outs, checks
    release()
    return row


def seed_group(s):
    q = s.shrink
    n2 = 16384 // s.side
    rows = [
        ("i", f"(i) f32, out {n2}x{n2}, a row, b column, c full", torch.float32, [(1, n2), (n2, 1), (n2, n2)], (n2, n2)),
        ("ii", f"(ii) f32, dense 2^{27 - s.log2_shrink} x3", torch.float32,
         [(2**27 // q,)] * 3, (2**27 // q,)),
        ("iii", f"(iii) f64, out {n2}x{n2 // 2}, a row, b column, c full", torch.float64,
         [(1, n2 // 2), (n2, 1), (n2, n2 // 2)], (n2, n2 // 2)),
    ]
    out = []
    for tag, label, dtype, shapes, out_shape in rows:
        r = guarded(f"seed row {label}", lambda: seed_row(tag, label, dtype, shapes, out_shape, s), {})
        out.append(r or {"group": "seed", "row": label, "errors": {"row": "failed (see stderr)"}})
    return out


def seed_table(rows):
    h = ["row", "sa.expr GB/s", "sa.expr first call s", "eager GB/s", "compile GB/s", "compile first call s",
         "CuPy GB/s", "CuPy first call s", "sa/eager", "checks vs eager", "errors"]
    body = []
    for r in rows:
        e = r.get("errors", {})
        checks = ", ".join(f"{k[6:]} {r[k]}" for k in ("check_sa", "check_compile", "check_cupy") if r.get(k))
        body.append([
            r["row"],
            fmt(r.get("sa_gbs", e.get("sa"))), fmt(r.get("sa_first_s"), 3),
            fmt(r.get("eager_gbs", e.get("eager"))),
            fmt(r.get("compile_gbs", e.get("compile"))), fmt(r.get("compile_first_s"), 2),
            fmt(r.get("cupy_gbs", e.get("cupy"))), fmt(r.get("cupy_first_s"), 2),
            fmt(r.get("sa_over_eager"), 2), checks or "n/a",
            "; ".join(f"{k}: {v}" for k, v in e.items() if k.startswith(("check", "row"))) or "",
        ])
    return table(h, body)


# ---------------------------------------------------------------------------------------
# single ops


def single_row(label, dtype, a_shape, b_make, out_shape, s):
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(1)

    def rnd(shape):
        if dtype.is_floating_point:
            return (torch.rand(shape, device=dev, generator=g) * 2 - 1).to(dtype)
        return torch.randint(0, 256, shape, device=dev, generator=g, dtype=torch.int64).to(dtype)

    a = rnd(a_shape)
    b = b_make(rnd)
    o_expr = torch.empty(out_shape, device=dev, dtype=dtype)
    o_add = torch.empty(out_shape, device=dev, dtype=dtype)
    moved = nbytes(a, b, o_expr)
    f = sa.expr("a + b")
    impls = {"expr": (lambda: f(a, b, out=o_expr), o_expr), "add": (lambda: sa.add(a, b, out=o_add), o_add)}
    per = {k: [] for k in impls}
    errors = {}
    for rnd_k in range(s.rounds):
        order = list(impls.items()) if rnd_k % 2 == 0 else list(impls.items())[::-1]
        for name, (fn, out) in order:
            if name in errors:
                continue
            ms = guarded(name, lambda: median_ms(fn, out, s.warmups, s.runs), errors)
            if ms is not None:
                per[name].append(ms)
    row = {"group": "single", "row": label, "dtype": str(dtype).removeprefix("torch."),
           "out_shape": list(out_shape), "bytes": moved, "errors": errors}
    for name, v in per.items():
        if v:
            ms = statistics.median(v)
            row[f"{name}_ms"], row[f"{name}_gbs"] = ms, gbs(moved, ms)
            row[f"{name}_rounds_ms"] = v
    if "expr_gbs" in row and "add_gbs" in row:
        row["expr_over_add"] = row["expr_gbs"] / row["add_gbs"]
        torch.cuda.synchronize()
        row["check"] = "equal" if torch.equal(o_expr, o_add) else "DIFFERENT"
    del a, b, o_expr, o_add
    torch.cuda.empty_cache()
    return row


def single_group(s):
    q, side = s.shrink, s.side
    n1 = 2**26 // q
    n2 = 8192 // side
    rows = [
        (f"f32 a + b, contiguous 2^{26 - s.log2_shrink}", torch.float32, (n1,), lambda r: r((n1,)), (n1,)),
        (f"f32 a + b.t(), {n2}x{n2}", torch.float32, (n2, n2), lambda r: r((n2, n2)).t(), (n2, n2)),
        (f"bf16 a + b, b a broadcast row, {n2}x{n2} out", torch.bfloat16, (n2, n2), lambda r: r((1, n2)), (n2, n2)),
        (f"u8 a + b, contiguous 2^{26 - s.log2_shrink}", torch.uint8, (n1,), lambda r: r((n1,)), (n1,)),
    ]
    out = []
    for label, dtype, a_shape, b_make, out_shape in rows:
        log(f"single {label}")
        r = guarded(f"single row {label}", lambda: single_row(label, dtype, a_shape, b_make, out_shape, s), {})
        out.append(r or {"group": "single", "row": label, "errors": {"row": "failed (see stderr)"}})
    return out


def single_table(rows):
    h = ["row", "sa.expr GB/s", "sa.add GB/s", "expr/specialised", "results", "errors"]
    body = []
    for r in rows:
        e = r.get("errors", {})
        body.append([r["row"], fmt(r.get("expr_gbs", e.get("expr"))), fmt(r.get("add_gbs", e.get("add"))),
                     fmt(r.get("expr_over_add"), 3), r.get("check", "n/a"),
                     "; ".join(f"{k}: {v}" for k, v in e.items() if k == "row")])
    return table(h, body)


# ---------------------------------------------------------------------------------------
# 12-op chain


def chain_eager(a, b, c, out=None):
    return torch.add(torch.minimum(torch.maximum(a * b + c - a / b, c), a * 2 + b) * (c - b),
                     torch.addcmul(b, a, c), out=out)


def chain_fn(a, b, c):
    return torch.minimum(torch.maximum(a * b + c - a / b, c), a * 2 + b) * (c - b) + torch.addcmul(b, a, c)


CUPY_CHAIN = "out = fminf(fmaxf(a*b + c - a/b, c), a*2.0f + b) * (c - b) + fmaf(a, c, b)"


def chain_group(s):
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(2)
    n = 2**26 // s.shrink
    label = f"12 ops, f32, dense 2^{26 - s.log2_shrink} x3"
    a = torch.rand(n, device=dev, generator=g) * 2 - 1
    b = torch.rand(n, device=dev, generator=g) + 0.5  # no division by ~0
    c = torch.rand(n, device=dev, generator=g) * 2 - 1
    outs = {k: torch.empty(n, device=dev) for k in ("sa", "eager", "cupy")}
    moved = nbytes(a, b, c, outs["sa"])
    row = {"group": "chain", "row": label, "expr": CHAIN, "ops": CHAIN_OPS, "dtype": "float32",
           "out_shape": [n], "bytes": moved}
    errors = {}
    checks = {}

    def run_sa():
        def build_and_run():
            f = sa.expr(CHAIN)
            f(a, b, c, out=outs["sa"])
            return f

        t, f = first_call_s(build_and_run)
        row["sa_first_s"] = t
        ms = median_ms(lambda: f(a, b, c, out=outs["sa"]), outs["sa"], s.warmups, s.runs)
        row["sa_ms"], row["sa_gbs"] = ms, gbs(moved, ms)

    def run_eager():
        ms = median_ms(lambda: chain_eager(a, b, c, out=outs["eager"]), outs["eager"], s.warmups, s.runs)
        row["eager_ms"], row["eager_gbs"] = ms, gbs(moved, ms)

    def run_compile():
        torch._dynamo.reset()
        cfn = torch.compile(chain_fn)
        t, _ = first_call_s(lambda: cfn(a, b, c))
        row["compile_first_s"] = t
        ms = median_ms(lambda: cfn(a, b, c), None, s.warmups, s.runs)
        row["compile_ms"], row["compile_gbs"] = ms, gbs(moved, ms)
        checks["compile"] = lambda: cfn(a, b, c)

    def run_cupy():
        if cp is None:
            raise RuntimeError(f"CuPy is not importable ({CUPY_IMPORT_ERROR})")
        ca, cb, cc, co = (cp.from_dlpack(x) for x in (a, b, c, outs["cupy"]))

        def build_and_run():
            k = cp.ElementwiseKernel("float32 a, float32 b, float32 c", "float32 out", CUPY_CHAIN,
                                     "sa_bench_chain")
            with cupy_stream():
                k(ca, cb, cc, co)
            return k

        t, k = first_call_s(build_and_run)
        row["cupy_first_s"] = t

        def run():
            with cupy_stream():
                k(ca, cb, cc, co)

        ms = median_ms(run, outs["cupy"], s.warmups, s.runs)
        row["cupy_ms"], row["cupy_gbs"] = ms, gbs(moved, ms)

    for what, fn in (("sa", run_sa), ("eager", run_eager), ("compile", run_compile), ("cupy", run_cupy)):
        log(f"chain: {what}")
        guarded(what, fn, errors)
    torch.cuda.synchronize()
    # fma against torch's addcmul, and fminf/fmaxf: the same values up to a few ulp.
    if "eager_ms" in row:
        if "sa_ms" in row:
            row["check_sa"] = guarded("check sa", lambda: compare(outs["sa"], outs["eager"], 1e-5, 1e-5), errors)
        if "cupy_ms" in row:
            row["check_cupy"] = guarded("check cupy", lambda: compare(outs["cupy"], outs["eager"], 1e-5, 1e-5),
                                        errors)
        if "compile" in checks:
            row["check_compile"] = guarded(
                "check compile", lambda: compare(checks["compile"](), outs["eager"], 1e-5, 1e-5), errors)
    if "sa_gbs" in row and "eager_gbs" in row:
        row["sa_over_eager"] = row["sa_gbs"] / row["eager_gbs"]
    row["errors"] = errors
    del a, b, c, outs, checks
    release()
    return [row]


def chain_table(rows):
    h = ["row", "sa.expr GB/s", "sa.expr first call s", "eager GB/s", "compile GB/s", "compile first call s",
         "CuPy GB/s", "CuPy first call s", "sa/eager", "checks vs eager"]
    body = []
    for r in rows:
        e = r.get("errors", {})
        checks = ", ".join(f"{k[6:]} {r[k]}" for k in ("check_sa", "check_compile", "check_cupy") if r.get(k))
        body.append([
            r["row"],
            fmt(r.get("sa_gbs", e.get("sa"))), fmt(r.get("sa_first_s"), 3),
            fmt(r.get("eager_gbs", e.get("eager"))),
            fmt(r.get("compile_gbs", e.get("compile"))), fmt(r.get("compile_first_s"), 2),
            fmt(r.get("cupy_gbs", e.get("cupy"))), fmt(r.get("cupy_first_s"), 2),
            fmt(r.get("sa_over_eager"), 2), checks or "n/a",
        ])
    return table(h, body)


# ---------------------------------------------------------------------------------------
# reductions of expressions


def reduce_row(label, text, make, dim, lib, s):
    """One reduction row: `sa.expr(text).sum(..., dim=dim)` (one pass), the library's
    `map_reduce(lib, ...)` where it has one, torch eager (the expression, then `sum`) and
    torch.compile, on the inputs `make()` gives."""
    dev = torch.device("cuda")
    ins = make(dev)
    shape = torch.broadcast_shapes(*(x.shape for x in ins))
    out_shape = [n for k, n in enumerate(shape) if k != dim]
    outs = {k: torch.empty(out_shape, device=dev) for k in ("sa", "lib", "eager")}
    moved = nbytes(*ins, outs["sa"])
    row = {"group": "reduce", "row": label, "expr": text, "dim": dim, "dtype": "float32",
           "shape": list(shape), "bytes": moved}
    errors = {}
    checks = {}
    values = {"sqdiff": lambda x, y: (x - y) * (x - y), "seed": seed_fn}[lib or "seed"]

    def fn(*x):
        return torch.sum(values(*x), dim=dim)

    def run_sa():
        def build_and_run():
            f = sa.expr(text)
            f.sum(*ins, dim=dim, out=outs["sa"])
            return f

        t, f = first_call_s(build_and_run)
        row["sa_first_s"] = t
        ms = median_ms(lambda: f.sum(*ins, dim=dim, out=outs["sa"]), outs["sa"], s.warmups, s.runs)
        row["sa_ms"], row["sa_gbs"] = ms, gbs(moved, ms)

    def run_lib():
        if lib is None:
            raise RuntimeError("no map_reduce id for this expression")
        ms = median_ms(lambda: sa.map_reduce(lib, *ins, dim=dim, out=outs["lib"]), outs["lib"], s.warmups,
                       s.runs)
        row["lib_ms"], row["lib_gbs"] = ms, gbs(moved, ms)

    def run_eager():
        ms = median_ms(lambda: torch.sum(values(*ins), dim=dim, out=outs["eager"]), outs["eager"], s.warmups, s.runs)
        row["eager_ms"], row["eager_gbs"] = ms, gbs(moved, ms)

    def run_compile():
        torch._dynamo.reset()
        cfn = torch.compile(fn)
        t, _ = first_call_s(lambda: cfn(*ins))
        row["compile_first_s"] = t
        ms = median_ms(lambda: cfn(*ins), None, s.warmups, s.runs)
        row["compile_ms"], row["compile_gbs"] = ms, gbs(moved, ms)
        checks["compile"] = lambda: cfn(*ins)

    for what, f in (("sa", run_sa), ("lib", run_lib), ("eager", run_eager), ("compile", run_compile)):
        log(f"reduce {label}: {what}")
        guarded(what, f, errors)
    torch.cuda.synchronize()
    # Sums in different orders: close, not equal.
    if "eager_ms" in row:
        for k in ("sa", "lib"):
            if f"{k}_ms" in row:
                row[f"check_{k}"] = guarded(f"check {k}", lambda: compare(outs[k], outs["eager"], 1e-4, 1e-3),
                                            errors)
        if "compile" in checks:
            row["check_compile"] = guarded(
                "check compile", lambda: compare(checks["compile"](), outs["eager"], 1e-4, 1e-3), errors)
    if "sa_gbs" in row and "eager_gbs" in row:
        row["sa_over_eager"] = row["sa_gbs"] / row["eager_gbs"]
    row["errors"] = errors
    del ins, outs, checks
    release()
    return row


def reduce_group(s):
    side = 8192 // s.side

    def rand(*shape):
        return lambda dev: torch.rand(*shape, device=dev) * 2 - 1

    def two(*shape):
        return lambda dev: (rand(*shape)(dev), rand(*shape)(dev))

    def seed_ins(m, n):
        def make(dev):
            a = torch.rand(1, n, device=dev) * 2 - 1
            b = torch.rand(m, 1, device=dev) * 4 - 2
            c = torch.rand(m, n, device=dev)
            return a, b, c
        return make

    sq = "(a - b) * (a - b)"
    rows = [
        reduce_row(f"sum((a-b)^2, dim=1), f32 {side}x{side}", sq, two(side, side), 1, "sqdiff", s),
        reduce_row(f"sum((a-b)^2, dim=0), f32 {side}x{side}", sq, two(side, side), 0, "sqdiff", s),
        reduce_row(f"sum((a-b)^2, dim=1), f32 {2**20 // s.shrink}x64", sq, two(2**20 // s.shrink, 64), 1, "sqdiff",
                   s),
        reduce_row(f"sum(seed, dim=1), f32 {2 * side}x{2 * side} broadcast", SEED, seed_ins(2 * side, 2 * side), 1,
                   None, s),
    ]
    return rows


def reduce_table(rows):
    h = ["row", "sa.expr sum GB/s", "first call s", "sa.map_reduce GB/s", "eager GB/s", "compile GB/s",
         "compile first call s", "sa/eager", "checks vs eager"]
    body = []
    for r in rows:
        e = r.get("errors", {})
        checks = ", ".join(f"{k[6:]} {r[k]}" for k in ("check_sa", "check_lib", "check_compile") if r.get(k))
        body.append([
            r["row"],
            fmt(r.get("sa_gbs", e.get("sa"))), fmt(r.get("sa_first_s"), 3),
            fmt(r.get("lib_gbs", e.get("lib"))),
            fmt(r.get("eager_gbs", e.get("eager"))),
            fmt(r.get("compile_gbs", e.get("compile"))), fmt(r.get("compile_first_s"), 2),
            fmt(r.get("sa_over_eager"), 2), checks or "n/a",
        ])
    return table(h, body)


# ---------------------------------------------------------------------------------------
# host time per call


def host_group(s):
    dev = torch.device("cuda")
    x, y, z = (torch.rand(1024, device=dev) for _ in range(3))
    f = sa.expr("a + b")
    calls = s.host_calls
    impls = {
        "sa.expr f(a=x, b=y, out=z)": lambda: f(a=x, b=y, out=z),
        "sa.expr f(x, y, out=z)": lambda: f(x, y, out=z),
        "sa.add(x, y, out=z)": lambda: sa.add(x, y, out=z),
        "torch.add(x, y, out=z)": lambda: torch.add(x, y, out=z),
    }
    errors = {}
    for name, fn in impls.items():  # load, compile, warm caches
        guarded(name, lambda: [fn() for _ in range(min(calls, 1000))], errors)
    torch.cuda.synchronize()
    per = {k: [] for k in impls if k not in errors}
    order = [k for k in impls if k not in errors]
    for burst in range(s.host_bursts):
        for name in (order if burst % 2 == 0 else order[::-1]):
            fn = impls[name]
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
            per[name].append((time.perf_counter() - t0) / calls * 1e6)
    rows = []
    for name in impls:
        r = {"group": "host", "row": name, "calls": calls, "elements": 1024, "dtype": "float32"}
        if name in errors:
            r["errors"] = {"call": errors[name]}
        else:
            r["us_per_call"] = statistics.median(per[name])
            r["bursts_us"] = per[name]
        rows.append(r)
    return rows


def host_table(rows):
    h = ["call (1024 f32 elements)", "host us per call", "bursts min..max us"]
    body = []
    for r in rows:
        v = r.get("bursts_us")
        body.append([r["row"], fmt(r.get("us_per_call", r.get("errors", {}).get("call")), 2),
                     f"{min(v):.2f}..{max(v):.2f}" if v else ""])
    return table(h, body)


# ---------------------------------------------------------------------------------------


class Settings:
    def __init__(self, quick):
        self.quick = quick
        self.log2_shrink = 4 if quick else 0
        self.shrink = 2**self.log2_shrink  # element counts
        self.side = 4 if quick else 1  # each side of a 2-D shape (16x fewer elements)
        self.warmups = 2 if quick else 5
        self.runs = 10 if quick else 30
        self.rounds = 1 if quick else 3
        self.host_calls = 10000 // self.shrink
        self.host_bursts = 3 if quick else 11


CUPY_IMPORT_ERROR = None


def main(argv=None):
    global torch, cp, sa, CUPY_IMPORT_ERROR
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=".", help="folder for bench_expr.json (created if needed)")
    p.add_argument("--quick", action="store_true", help="sizes 16x smaller and fewer runs: a smoke run")
    p.add_argument("--only", action="append", default=[],
                   help=f"run only these groups (repeatable or comma-separated): {', '.join(GROUPS)}")
    p.add_argument("--warm-caches", action="store_true",
                   help="keep the usual Inductor/Triton/CuPy on-disk caches (first calls may hit them)")
    args = p.parse_args(argv)
    only = [x for o in args.only for x in o.split(",") if x]
    unknown = [x for x in only if x not in GROUPS]
    if unknown:
        p.error(f"unknown group(s) {unknown}; groups: {', '.join(GROUPS)}")
    want = only or list(GROUPS)
    s = Settings(args.quick)

    cache_dir = None
    if not args.warm_caches:
        # Before torch and CuPy are imported: they read these once.
        cache_dir = tempfile.mkdtemp(prefix="bench_expr_caches_")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache_dir, "inductor")
        os.environ["TRITON_CACHE_DIR"] = os.path.join(cache_dir, "triton")
        os.environ["CUPY_CACHE_DIR"] = os.path.join(cache_dir, "cupy")

    import torch as _torch

    torch = _torch
    if not torch.cuda.is_available():
        print("bench_expr: no CUDA device (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    try:
        import cupy as _cp

        cp = _cp
    except Exception as e:  # noqa: BLE001
        CUPY_IMPORT_ERROR = na(e)
        log(f"CuPy: {CUPY_IMPORT_ERROR}")
    import strided_apply as _sa

    sa = _sa

    # The warm-up op: the CUDA context and the built-in kernels are loaded before the first
    # expression's first call is timed.
    w = torch.ones(1024, device="cuda")
    sa.add(w, w, out=w)
    torch.cuda.synchronize()

    meta = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cupy": getattr(cp, "__version__", None) if cp is not None else CUPY_IMPORT_ERROR,
        "strided_apply": os.path.dirname(sa.__file__),
        "python": platform.python_version(),
        "quick": args.quick,
        "warmups": s.warmups,
        "runs": s.runs,
        "cold_caches": cache_dir is not None,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    log(f"{meta['device']}, torch {meta['torch']}, CuPy {meta['cupy']}, quick={args.quick}")
    groups = {"seed": (seed_group, seed_table, "Seed expression `" + SEED + "`"),
              "single": (single_group, single_table, "One op: `sa.expr(\"a + b\")` against `sa.add`"),
              "chain": (chain_group, chain_table, f"{CHAIN_OPS}-op chain `{CHAIN}`"),
              "host": (host_group, host_table, "Host time per call"),
              "reduce": (reduce_group, reduce_table, "Reductions of expressions: `sa.expr(...).sum(dim=...)`")}
    results = []
    for name in GROUPS:
        if name not in want:
            continue
        run, show, title = groups[name]
        rows = guarded(f"group {name}", lambda: run(s), {}) or [
            {"group": name, "row": "(group failed: see stderr)", "errors": {"row": "failed"}}]
        results.extend(rows)
        print(f"\n### {title}\n", flush=True)
        print(guarded(f"table {name}", lambda: show(rows), {}) or "(table failed: see stderr)", flush=True)
    if args.quick:
        print("\n(--quick: sizes 16x smaller, fewer runs; not for reporting)", flush=True)

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "bench_expr.json")
    with open(path, "w") as fh:
        json.dump({"meta": meta, "rows": results}, fh, indent=1, default=str)
    log(f"wrote {path}")
    if cache_dir is not None:
        shutil.rmtree(cache_dir, ignore_errors=True)
    bad = [r["row"] for r in results
           for k in ("check", "check_sa", "check_compile", "check_cupy")
           if isinstance(r.get(k), str) and r[k] not in ("ok", "equal")]
    if bad:
        print(f"bench_expr: result checks failed in: {bad}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
