"""Peer timings for the bench cases: PyTorch eager, CuPy (when importable; it has no
bfloat16) and, for the permuted copies, the fused expression and the dense mixed-type
multiply, torch.compile. JSON lines on stdout, same fields and case/dtype labels as the Rust
bench (src/bin/bench.rs). CUDA events, median of 25 runs after warm-up; buffers that fit in
L2 are rotated. Bytes: every input read once + the output written once, each at its own
element size; reductions (groups "reduce", "reduce_rows", "reduce_cols_1b", "reduce_cols_slot"
and "reduce_rows_expr") count every input read once (two for sqdiff; x and its [rows, 1] m for the
expression rows) and report the first input's elements. STRIDED_APPLY_BENCH_QUEUED=1: each
timed call queued behind a spin kernel (see median_ms)."""
import json
import os
import sys
import torch

quick = "--quick" in sys.argv
# `--only NAME`: only the group NAME, or the groups with a case whose name contains NAME (the
# copy ceiling always runs). Same table and rule as GROUPS in src/bin/bench.rs: an exact
# group name never selects another group, though "broadcast_row" is inside
# "mixed_broadcast_row" and "cast" inside "broadcast_row".
only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv[:-1] else None
GROUPS = {
    "contiguous_add": ["contiguous_add"],
    "broadcast_row": ["broadcast_row"],
    "transposed": ["transposed", "transposed_dlpack"],
    "slice_step2": ["slice_step2"],
    "permute_copy": ["permute_copy"],
    "cast": ["cast"],
    "mixed": ["mixed_broadcast_row", "mixed_contiguous"],
    "divmul": ["fused_divmul", "three_kernel_divmul"],
    "stencil": ["stencil_laplacian2", "stencil_laplacian3"],
    "reduce": ["sum_dim1_f32", "sum_dim0_f32", "sum_all_f32", "sum_perm13_f32", "sum_dim1_bf16",
               "amax_dim1_f32", "sumsq_all_f32", "argmax_dim1_f32", "sqdiff_all_f32"],
    # {op}_rows{len}_{dtype}: by length, then f32 before bf16, then the op (issue #41).
    "reduce_rows": [f"{op}_rows{length}_{name}" for length in (16, 64, 128, 512, 1024, 4096, 32768)
                    for name in ("f32", "bf16") for op in ("sum", "amax", "mean", "argmax", "sumsq")],
    # {op}_rows{len}_{dtype} of an expression of x and a broadcast [rows, 1] m: same order.
    # Columns of the slot kernel that reduce_cols_1b does not time: float amax/amin of big * big
    # and of big * (big - 1), per dtype; then big * (big - 1) of the one-byte folds that take
    # the order-free kernel where their vectors are whole.
    "reduce_cols_slot": [f"{op}_{shape}_{name}" for name in ("f32", "f64", "f16", "bf16")
                         for shape in ("dim0", "dim0odd") for op in ("amax", "amin")]
                        + ["any_dim0odd_Bool", "all_dim0odd_Bool", "any_dim0odd_u8", "all_dim0odd_u8",
                           "all_dim0odd_f16", "any_dim0odd_f16", "all_dim0odd_bf16", "any_dim0odd_bf16"]
                        + [f"{op}_dim0odd_u8" for op in ("sum", "amax", "amin", "prod")],
    "reduce_rows_expr": [f"{op}_rows{length}_{name}" for length in (128, 1024, 4096, 32768)
                         for name in ("f32", "bf16") for op in ("sumexp", "sqdev")]
                        + [f"{op}_cols{length}_{name}" for length in (1024, 32768)
                           for name in ("f32", "bf16") for op in ("sumexp", "sqdev")],
    # Columns whose kernel folds one-byte values: all/any of every dtype, u8 sum/amax/amin/prod.
    "reduce_cols_1b": [f"{op}_dim0_{name}" for name in ("Bool", "u8", "i32", "u32", "i64", "f32",
                                                        "f64", "f16", "bf16")
                       for op in ("all", "any")]
                      + [f"{op}_dim0_u8" for op in ("sum", "amax", "amin", "prod")],
    "opset": ["opset_erf_broadcast_row", "opset_where_isnan_f16_transposed", "opset_add_i8_contiguous",
              "opset_add_bf16_f32_broadcast_row", "opset_gelu_tanh_bf16_contiguous",
              "opset_gelu_tanh_bf16_transposed"],
    "tiny": ["tiny_add_host_us", "tiny_dispatch_host_us", "tiny_graph_per_op_us"],
}


def want(group):
    if only is None:
        return True
    if only in GROUPS:
        return group == only
    return any(only in case for case in GROUPS[group])

dev = "cuda"
big = 4096 if quick else 16384
REPS = 25
ROTATE = 512 << 20

try:
    import cupy as cp
except Exception:  # CuPy is optional
    cp = None


# STRIDED_APPLY_BENCH_QUEUED=1: each timed call waits in the stream behind a ~50 us spin, so
# that the events exclude the host's submission of the call (as the Rust bench then does).
QUEUED = os.environ.get("STRIDED_APPLY_BENCH_QUEUED", "") not in ("", "0")
SPIN_CYCLES = 100_000  # torch.cuda._sleep counts clock cycles: ~50 us at 1.98 GHz


def median_ms(f, sets=1):
    for i in range(3):
        f(i % sets)
    torch.cuda.synchronize()
    times = []
    for i in range(REPS):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if QUEUED:
            torch.cuda._sleep(SPIN_CYCLES)
        s.record()
        f(i % sets)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return times[REPS // 2]


def report(impl, case, dtype, elements, nbytes, ms):
    print(json.dumps(dict(impl=impl, case=case, dtype=dtype, elements=elements, bytes=nbytes,
                          ms=round(ms, 5), gbps=round(nbytes / ms / 1e6, 1))), flush=True)


def rand(shape, dtype):
    if dtype.is_floating_point:
        return torch.rand(shape, device=dev, dtype=dtype) * 2 - 1
    return torch.randint(0, 255, shape, device=dev, dtype=dtype)


def binary(case, make_a, make_b, out_shape, dtype, name, op="add", with_compile=False):
    """out = a op b into a preallocated `dtype` out (op: "add" or "mul"); each operand's bytes
    at its own element size. `with_compile`: also torch.compile(a op b), which allocates its out."""
    n = 1
    for s in out_shape:
        n *= s
    a0, b0 = make_a(), make_b()
    out_size = torch.empty((), dtype=dtype).element_size()
    nbytes = n * out_size + min(a0.numel(), n) * a0.element_size() + min(b0.numel(), n) * b0.element_size()
    sets = max(1, min(64, -(-ROTATE // nbytes)))
    bufs = [(make_a(), make_b(), torch.empty(out_shape, device=dev, dtype=dtype)) for _ in range(sets)]
    tfn = getattr(torch, op)
    ms = median_ms(lambda i: tfn(bufs[i][0], bufs[i][1], out=bufs[i][2]), sets)
    report("pytorch", case, name, n, nbytes, ms)
    if cp is not None and torch.bfloat16 not in (a0.dtype, b0.dtype, dtype):
        cfn = getattr(cp, "multiply" if op == "mul" else op)
        cbufs = [(cp.from_dlpack(a), cp.from_dlpack(b), cp.from_dlpack(c)) for a, b, c in bufs]
        ms = median_ms(lambda i: cfn(cbufs[i][0], cbufs[i][1], out=cbufs[i][2]), sets)
        report("cupy", case, name, n, nbytes, ms)
    if with_compile:
        try:
            compiled = torch.compile(lambda x, y: tfn(x, y))
            ms = median_ms(lambda i: compiled(bufs[i][0], bufs[i][1]), sets)
            report("torch.compile", case, name, n, nbytes, ms)
        except Exception as e:  # inductor needs a working triton
            print(f"# torch.compile ({case} {name}) failed: {e}", file=sys.stderr)
    del bufs


print(f"# torch {torch.__version__}, cupy {cp.__version__ if cp else 'absent'}, {torch.cuda.get_device_name()}, "
      f"timing {'queued behind a spin' if QUEUED else 'around each call'}", file=sys.stderr)
n = 1 << 24 if quick else 1 << 28
src = rand((n,), torch.float32)
dst = torch.empty_like(src)
report("pytorch", "d2d_copy", "f32", n, 2 * n * 4, median_ms(lambda i: dst.copy_(src)))
del src, dst
for p in ([12, 20, 24] if quick else [12, 16, 20, 24, 26, 28]) if want("contiguous_add") else []:
    n = 1 << p
    binary("contiguous_add", lambda: rand((n,), torch.float32), lambda: rand((n,), torch.float32), (n,), torch.float32, "f32")
if want("contiguous_add"):
    n = big * big // 2
    binary("contiguous_add", lambda: rand((n,), torch.float64), lambda: rand((n,), torch.float64), (n,), torch.float64, "f64")
    n = big * big
    binary("contiguous_add", lambda: rand((n,), torch.uint8), lambda: rand((n,), torch.uint8), (n,), torch.uint8, "u8")
    binary("contiguous_add", lambda: rand((n,), torch.bfloat16), lambda: rand((n,), torch.bfloat16), (n,),
           torch.bfloat16, "bf16")
    binary("contiguous_add", lambda: rand((n,), torch.float16), lambda: rand((n,), torch.float16), (n,),
           torch.float16, "f16")
sq = (big, big)
if want("broadcast_row"):
    binary("broadcast_row", lambda: rand(sq, torch.float32), lambda: rand((1, big), torch.float32), sq, torch.float32, "f32")
    binary("broadcast_row", lambda: rand(sq, torch.uint8), lambda: rand((1, big), torch.uint8), sq, torch.uint8, "u8")
    binary("broadcast_row", lambda: rand(sq, torch.bfloat16), lambda: rand((1, big), torch.bfloat16), sq,
           torch.bfloat16, "bf16")
if want("transposed"):
    binary("transposed", lambda: rand(sq, torch.float32), lambda: rand(sq, torch.float32).t(), sq, torch.float32, "f32")
    binary("transposed", lambda: rand(sq, torch.bfloat16), lambda: rand(sq, torch.bfloat16).t(), sq, torch.bfloat16,
           "bf16")
if want("slice_step2"):
    binary("slice_step2", lambda: rand((big, 2 * big), torch.float32)[:, ::2], lambda: rand(sq, torch.float32), sq,
           torch.float32, "f32")

if want("permute_copy"):
    shape = (16, 16, 32, 64) if quick else (64, 64, 128, 256)
    for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        x = rand(shape, dtype).permute(3, 1, 0, 2)
        out = torch.empty(x.shape, device=dev, dtype=dtype)
        n, size = x.numel(), x.element_size()
        report("pytorch", "permute_copy", name, n, 2 * n * size, median_ms(lambda i: out.copy_(x)))
        if cp is not None and dtype != torch.bfloat16:
            cx, cout = cp.from_dlpack(x), cp.from_dlpack(out)
            report("cupy", "permute_copy", name, n, 2 * n * size, median_ms(lambda i: cp.copyto(cout, cx)))
        try:
            compiled = torch.compile(lambda t: t.contiguous())
            report("torch.compile", "permute_copy", name, n, 2 * n * size, median_ms(lambda i: compiled(x)))
        except Exception as e:  # inductor needs a working triton
            print(f"# torch.compile ({name}) failed: {e}", file=sys.stderr)
        del x, out

# Contiguous casts, big * big elements, both ways between f32 and bf16 (labels "A->O"), into
# a preallocated out.
if want("cast"):
    n = big * big
    for src_t, dst_t, name in ((torch.float32, torch.bfloat16, "f32->bf16"),
                               (torch.bfloat16, torch.float32, "bf16->f32")):
        x = rand((n,), src_t)
        out = torch.empty((n,), device=dev, dtype=dst_t)
        nbytes = n * (x.element_size() + out.element_size())
        report("pytorch", "cast", name, n, nbytes, median_ms(lambda i: out.copy_(x)))
        del x, out

# Mixed types: out_f32[big, big] = a_bf16[big, big] * b_f32, b a broadcast row [1, big] and
# then dense [big, big] (the dense one also through torch.compile).
if want("mixed"):
    binary("mixed_broadcast_row", lambda: rand(sq, torch.bfloat16), lambda: rand((1, big), torch.float32), sq,
           torch.float32, "bf16*f32->f32", op="mul")
    binary("mixed_contiguous", lambda: rand(sq, torch.bfloat16), lambda: rand(sq, torch.float32), sq,
           torch.float32, "bf16*f32->f32", op="mul", with_compile=True)

# Fused expression c = (a / 3) * (b / 7): eager (three kernels and temporaries) and
# torch.compile (one generated kernel). Bytes counted as 2 reads + 1 write for both.
if want("divmul"):
    n = 1 << 24 if quick else 1 << 28
    fa, fb = rand((n,), torch.float32), rand((n,), torch.float32)
    report("pytorch", "fused_divmul", "f32", n, 3 * n * 4, median_ms(lambda i: (fa / 3) * (fb / 7)))
    try:
        fused = torch.compile(lambda x, y: (x / 3) * (y / 7))
        report("torch.compile", "fused_divmul", "f32", n, 3 * n * 4, median_ms(lambda i: fused(fa, fb)))
    except Exception as e:  # inductor needs a working triton
        print(f"# torch.compile (fused) failed: {e}", file=sys.stderr)
    del fa, fb


NAMES = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16", torch.float64: "f64",
         torch.bool: "Bool", torch.uint8: "u8", torch.int32: "i32", torch.uint32: "u32",
         torch.int64: "i64"}


def reduction(case, x0, make_x, out_shape, fn, compiled=None, out_dtype=None):
    """o = fn(*xs, o) into a preallocated out of `out_dtype` (default the input's; fn may
    ignore o and allocate); bytes: every input read once, elements: the first input's, as the
    Rust bench's `bench_reduce`. `x0` is the first input set, a tensor or a tuple of tensors
    (a reduction of two inputs); `make_x` makes the others (in the same form) when they fit
    in L2. `compiled`: also torch.compile(compiled) over the inputs, reported as impl
    "torch.compile"."""
    xs0 = x0 if isinstance(x0, tuple) else (x0,)
    n = xs0[0].numel()
    name = NAMES[xs0[0].dtype]
    nbytes = sum(x.numel() * x.element_size() for x in xs0)
    sets = max(1, min(64, -(-ROTATE // nbytes)))

    def inputs(i):
        xs = xs0 if i == 0 else make_x()
        return xs if isinstance(xs, tuple) else (xs,)

    odt = xs0[0].dtype if out_dtype is None else out_dtype
    bufs = [(*inputs(i), torch.empty(out_shape, device=dev, dtype=odt)) for i in range(sets)]
    report("pytorch", case, name, n, nbytes, median_ms(lambda i: fn(*bufs[i]), sets))
    if compiled is not None:
        try:
            cf = torch.compile(compiled)
            report("torch.compile", case, name, n, nbytes, median_ms(lambda i: cf(*bufs[i][:-1]), sets))
        except Exception as e:  # inductor needs a working triton
            print(f"# torch.compile ({case}) failed: {e}", file=sys.stderr)
    del bufs


# Stencils with clamp-to-edge borders: the 2-D 5-point Laplacian of a big * big image and the
# 3-D 7-point one of a 512^3 cube (bytes: the input read once + the output written once).
# Eager: replicate padding then cuDNN's conv2d / conv3d (two kernels); torch.compile: the
# padded slices summed, fused by inductor.
if want("stencil"):
    import torch.nn.functional as F

    def laplacian(x):
        nd = x.dim()
        p = F.pad(x[None, None], (1, 1) * nd, mode="replicate")[0, 0]
        inner = tuple(slice(1, -1) for _ in range(nd))
        acc = -2 * nd * p[inner]
        for a in range(nd):
            for lo, hi in ((0, -2), (2, None)):
                s = list(inner)
                s[a] = slice(lo, hi)
                acc = acc + p[tuple(s)]
        return acc

    for case, shape in (("stencil_laplacian2", (big, big)),
                        ("stencil_laplacian3", (128,) * 3 if quick else (512,) * 3)):
        nd = len(shape)
        x = rand(shape, torch.float32)
        n = x.numel()
        k = torch.zeros((3,) * nd, device=dev)
        centre = (1,) * nd
        k[centre] = -2 * nd
        for a in range(nd):
            for o in (0, 2):
                idx = list(centre)
                idx[a] = o
                k[tuple(idx)] = 1
        k = k[None, None]
        conv = F.conv2d if nd == 2 else F.conv3d
        eager = lambda i: conv(F.pad(x[None, None], (1, 1) * nd, mode="replicate"), k)
        report("pytorch", case, "f32", n, 2 * n * 4, median_ms(eager))
        try:
            cf = torch.compile(laplacian)
            torch.testing.assert_close(cf(x), eager(0)[0, 0], rtol=1e-5, atol=1e-5)
            report("torch.compile", case, "f32", n, 2 * n * 4, median_ms(lambda i: cf(x)))
        except Exception as e:  # inductor needs a working triton
            print(f"# torch.compile ({case}) failed: {e}", file=sys.stderr)
        del x


# Reductions: rows and columns of a big * big matrix, a whole vector (1 << 28 elements) into a
# 0-d out, a permuted view summed over two non-adjacent axes. Bytes: the input read once.
# torch.sum has no `out=` without `dim`: the whole-vector sums reduce dim 0 of the 1-D input.
if want("reduce"):
    mk = lambda: rand(sq, torch.float32)
    m = mk()
    reduction("sum_dim1_f32", m, mk, (big,), lambda x, o: torch.sum(x, dim=1, out=o))
    reduction("sum_dim0_f32", m, mk, (big,), lambda x, o: torch.sum(x, dim=0, out=o))
    reduction("amax_dim1_f32", m, mk, (big,), lambda x, o: torch.amax(x, dim=1, out=o))
    # The index of each row's maximum, into an int64 out (bytes: the input read once).
    reduction("argmax_dim1_f32", m, mk, (big,), lambda x, o: torch.argmax(x, dim=1, out=o),
              out_dtype=torch.int64)
    del m
    n = 1 << 24 if quick else 1 << 28
    mk = lambda: rand((n,), torch.float32)
    v = mk()
    reduction("sum_all_f32", v, mk, (), lambda x, o: torch.sum(x, dim=0, out=o))
    # Eager x * x then sum: two kernels and a temporary; torch.compile fuses them.
    reduction("sumsq_all_f32", v, mk, (), lambda x, o: (x * x).sum(), compiled=lambda x: (x * x).sum())
    # The sum of squared differences of two vectors (bytes: both read once). Eager a - b, its
    # square, then the sum: three kernels and two temporaries; torch.compile fuses them.
    w = mk()
    reduction("sqdiff_all_f32", (v, w), lambda: (mk(), mk()), (), lambda a, b, o: ((a - b) ** 2).sum(),
              compiled=lambda a, b: ((a - b) ** 2).sum())
    del v, w
    shape = (16, 16, 32, 64) if quick else (64, 64, 128, 256)
    mk = lambda: rand(shape, torch.float32).permute(3, 1, 0, 2)
    p = mk()
    reduction("sum_perm13_f32", p, mk, (p.shape[0], p.shape[2]), lambda x, o: torch.sum(x, dim=(1, 3), out=o))
    del p
    mk = lambda: rand(sq, torch.bfloat16)
    reduction("sum_dim1_bf16", mk(), mk, (big,), lambda x, o: torch.sum(x, dim=1, out=o))

# Columns of one-byte folds: dim 0 of a contiguous big * big matrix; all/any of every dtype
# into a bool out, then sum/amax/amin/prod of a uint8 matrix into a uint8 out (sum and prod
# accumulate in uint8, wrapping, as the Rust side). Bytes: the input read once.
# The uint8 folds over columns (sum and prod accumulate in uint8, wrapping, as the Rust side).
U8_COL_FOLDS = (("sum", lambda x, o: torch.sum(x, dim=0, dtype=torch.uint8, out=o)),
                ("amax", lambda x, o: torch.amax(x, dim=0, out=o)),
                ("amin", lambda x, o: torch.amin(x, dim=0, out=o)),
                ("prod", lambda x, o: torch.prod(x, dim=0, dtype=torch.uint8, out=o)))
if want("reduce_cols_1b"):
    for dtype in (torch.bool, torch.uint8, torch.int32, torch.uint32, torch.int64, torch.float32,
                  torch.float64, torch.float16, torch.bfloat16):
        if dtype == torch.bool:
            mk = lambda: torch.randint(0, 64, sq, device=dev) != 0
        else:
            mk = lambda dtype=dtype: rand(sq, dtype)
        m = mk()
        for op, fn in (("all", torch.all), ("any", torch.any)):
            try:
                reduction(f"{op}_dim0_{NAMES[dtype]}", m, mk, (big,),
                          lambda x, o, fn=fn: fn(x, dim=0, out=o), out_dtype=torch.bool)
            except Exception as e:  # a dtype torch does not reduce
                print(f"# {op}_dim0_{NAMES[dtype]}: {e}", file=sys.stderr)
        del m
    mk = lambda: rand(sq, torch.uint8)
    m = mk()
    for op, fn in U8_COL_FOLDS:
        try:
            reduction(f"{op}_dim0_u8", m, mk, (big,), fn)
        except Exception as e:
            print(f"# {op}_dim0_u8: {e}", file=sys.stderr)
    del m

# Columns of the slot kernel that reduce_cols_1b does not time (cases as
# GROUPS["reduce_cols_slot"]): float amax/amin of a contiguous big * big matrix and of a
# big * (big - 1) one, per dtype, into an out of the input's dtype; then big * (big - 1)
# matrices of all/any (into bool) and of the uint8 folds (sum and prod accumulate in uint8).
if want("reduce_cols_slot"):
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        for shape, cols in (("dim0", big), ("dim0odd", big - 1)):
            mk = lambda dtype=dtype, cols=cols: rand((big, cols), dtype)
            m = mk()
            for op, fn in (("amax", torch.amax), ("amin", torch.amin)):
                reduction(f"{op}_{shape}_{NAMES[dtype]}", m, mk, (cols,),
                          lambda x, o, fn=fn: fn(x, dim=0, out=o))
            del m
    odd = (big, big - 1)
    for dtype, ops in ((torch.bool, ("any", "all")), (torch.uint8, ("any", "all")),
                       (torch.float16, ("all", "any")), (torch.bfloat16, ("all", "any"))):
        if dtype == torch.bool:
            mk = lambda: torch.randint(0, 64, odd, device=dev) != 0
        else:
            mk = lambda dtype=dtype: rand(odd, dtype)
        m = mk()
        for op in ops:
            fn = getattr(torch, op)
            reduction(f"{op}_dim0odd_{NAMES[dtype]}", m, mk, (big - 1,),
                      lambda x, o, fn=fn: fn(x, dim=0, out=o), out_dtype=torch.bool)
        del m
    mk = lambda: rand(odd, torch.uint8)
    m = mk()
    for op, fn in U8_COL_FOLDS:
        reduction(f"{op}_dim0odd_u8", m, mk, (big - 1,), fn)
    del m

# Short rows (issue #41): dim 1 of a contiguous [total // length, length] matrix, 2^28 elements
# in all (2^24 quick), rows of 16 to 32768 elements; per length an f32 and then a bf16 matrix,
# each reduced by sum, amax, mean, argmax (into int64) and sumsq (the sum of squares), then
# freed. Cases as GROUPS["reduce_rows"] lists them. Eager sumsq is two kernels, x * x into a
# temporary of the input's size and dtype (bf16 squares rounded to bf16) and then the sum;
# its bytes count the input read once, as ours.
if want("reduce_rows"):
    total = 1 << 24 if quick else 1 << 28
    ROW_OPS = (
        ("sum", lambda x, o: torch.sum(x, dim=1, out=o), None),
        ("amax", lambda x, o: torch.amax(x, dim=1, out=o), None),
        ("mean", lambda x, o: torch.mean(x, dim=1, out=o), None),
        ("argmax", lambda x, o: torch.argmax(x, dim=1, out=o), torch.int64),
        ("sumsq", lambda x, o: torch.sum(x * x, dim=1, out=o), None),
    )
    for length in (16, 64, 128, 512, 1024, 4096, 32768):
        for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
            # Defaults bind this iteration's shape and dtype (a plain closure would see the
            # loop's last values if called later).
            mk = lambda shape=(total // length, length), dtype=dtype: rand(shape, dtype)
            m = mk()
            for op, fn, out_dtype in ROW_OPS:
                reduction(f"{op}_rows{length}_{name}", m, mk, (total // length,), fn, out_dtype=out_dtype)
            del m

# Expression reductions over short rows (issue #41), as the Rust bench's `short_rows_expr`:
# x a contiguous [total // length, length] matrix (2^28 elements in all, 2^24 quick), rows of
# 128 to 32768 elements, m = its row maxima, [rows, 1], broadcast along each row (computed
# once per operand set, outside the timing); per length an f32 and then a bf16 x, then freed.
# sumexp: the sum over each row of exp(x - m) (softmax's denominator); sqdev: the mean over
# each row of (x - m)^2. Eager is three kernels each, x - m and then exp (or square) into two
# temporaries of x's size and dtype (bf16 rounded after each), then the sum (or mean) into
# the preallocated out; the Rust side is one pass. Bytes: x and m read once each
# ((rows * length + rows) * element size, the output not counted), as the Rust bench; cases
# as GROUPS["reduce_rows_expr"] lists them.
if want("reduce_rows_expr"):
    total = 1 << 24 if quick else 1 << 28
    # (kind, reduced dim, lengths): rows reduce dim 1 of [total // length, length], columns
    # dim 0 of [length, total // length]; m is x's maxima along that dim, kept.
    for kind, dim, lengths in (("rows", 1, (128, 1024, 4096, 32768)), ("cols", 0, (1024, 32768))):
        ops = (
            ("sumexp", lambda x, m, o, d=dim: torch.sum(torch.exp(x - m), dim=d, out=o)),
            ("sqdev", lambda x, m, o, d=dim: torch.mean(torch.square(x - m), dim=d, out=o)),
        )
        for length in lengths:
            shape = (total // length, length) if dim == 1 else (length, total // length)
            for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
                def mk(shape=shape, dtype=dtype, dim=dim):
                    x = rand(shape, dtype)
                    return x, torch.amax(x, dim=dim, keepdim=True)
                xm = mk()
                for op, fn in ops:
                    reduction(f"{op}_{kind}{length}_{name}", xm, mk, (total // length,), fn)
                del xm

def pointwise(case, make_inputs, out_shape, dtype, name, fn):
    """The op set's cases: fn(inputs, out) in eager PyTorch into the preallocated row-major
    `out` (so a transposed input is a transpose, as in the Rust bench); bytes as the Rust bench counts them (each input's elements read once, at
    most the output's count, and the output written once)."""
    n = 1
    for s in out_shape:
        n *= s
    x0 = make_inputs()
    nbytes = n * torch.empty((), dtype=dtype).element_size() + sum(
        min(x.numel(), n) * x.element_size() for x in x0)
    sets = max(1, min(64, -(-ROTATE // nbytes)))
    bufs = [(make_inputs(), torch.empty(out_shape, device=dev, dtype=dtype)) for _ in range(sets)]
    ms = median_ms(lambda i: fn(bufs[i][0], bufs[i][1]), sets)
    report("pytorch", case, name, n, nbytes, ms)
    del bufs


if want("opset"):
    def nan_f16():
        x = rand(sq, torch.float16)
        x[torch.rand(sq, device=dev) < 0.1] = float("nan")
        return x.t()

    pointwise("opset_erf_broadcast_row", lambda: [rand((1, big), torch.float32).expand(sq)], sq, torch.float32,
              "f32", lambda x, o: torch.erf(x[0], out=o))
    zero16 = torch.zeros((), device=dev, dtype=torch.float16)
    pointwise("opset_where_isnan_f16_transposed", lambda: [nan_f16()], sq, torch.float16, "f16",
              lambda x, o: torch.where(torch.isnan(x[0]), zero16, x[0], out=o))
    pointwise("opset_add_i8_contiguous", lambda: [torch.randint(-128, 128, sq, device=dev, dtype=torch.int8)
                                                  for _ in range(2)], sq, torch.int8, "i8",
              lambda x, o: torch.add(x[0], x[1], out=o))
    pointwise("opset_add_bf16_f32_broadcast_row", lambda: [rand(sq, torch.bfloat16), rand((1, big), torch.float32)],
              sq, torch.float32, "f32", lambda x, o: torch.add(x[0], x[1], out=o))
    pointwise("opset_gelu_tanh_bf16_contiguous", lambda: [rand(sq, torch.bfloat16)], sq, torch.bfloat16, "bf16",
              lambda x, o: torch.ops.aten.gelu.out(x[0], approximate="tanh", out=o))
    pointwise("opset_gelu_tanh_bf16_transposed", lambda: [rand(sq, torch.bfloat16).t()], sq, torch.bfloat16, "bf16",
              lambda x, o: torch.ops.aten.gelu.out(x[0], approximate="tanh", out=o))

if not want("tiny"):
    sys.exit(0)
import time
a = rand((1024,), torch.float32)
b = rand((1024,), torch.float32)
c = torch.empty_like(a)
for _ in range(1000):
    torch.add(a, b, out=c)
torch.cuda.synchronize()
calls = 20000
t = time.perf_counter()
for _ in range(calls):
    torch.add(a, b, out=c)
host_us = (time.perf_counter() - t) * 1e6 / calls
torch.cuda.synchronize()
us = (time.perf_counter() - t) * 1e6 / calls
bursts = []
for _ in range(50):
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(200):
        torch.add(a, b, out=c)
    bursts.append((time.perf_counter() - t) * 1e6 / 200)
bursts.sort()
print(json.dumps(dict(impl="pytorch", case="tiny_add_host_us", dtype="f32", elements=1024,
                      host_us=round(host_us, 3), us_incl_sync=round(us, 3),
                      burst_host_us=round(bursts[len(bursts) // 2], 3))), flush=True)

# 100 adds replayed from a CUDA graph against the same 100 launched eagerly (device time per
# op, CUDA events, median of 25), as the Rust bench's `tiny_graph_per_op_us`.
OPS = 100
def hundred():
    for _ in range(OPS):
        torch.add(a, b, out=c)
eager_ms = median_ms(lambda i: hundred())
g = torch.cuda.CUDAGraph()
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    hundred()  # warm-up on a side stream, as torch's graph docs ask
torch.cuda.current_stream().wait_stream(side)
with torch.cuda.graph(g):
    hundred()
graph_ms = median_ms(lambda i: g.replay())
print(json.dumps(dict(impl="pytorch", case="tiny_graph_per_op_us", dtype="f32", elements=1024,
                      ops=OPS, graph_per_op_us=round(graph_ms * 1e3 / OPS, 3),
                      eager_per_op_us=round(eager_ms * 1e3 / OPS, 3))), flush=True)
