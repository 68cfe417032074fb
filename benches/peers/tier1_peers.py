"""Compiled-expression peers of the `tier1` and `expr` bench groups: torch.compile and CuPy's
ElementwiseKernel (NVRTC) on the seed expression (f32 over three dense 16384² inputs; f32
over a row, a column and a full input; f64 over 16384×8192 the same way) and on the 12-op
chain of cheap ops over three dense f32 inputs. JSON lines on stdout (impl, case, dtype,
GB/s, ms, first call ms); bytes count every input element once and the output once, as
the Rust bench does. Median of 25 CUDA-event timings after 3 warm-up calls."""
import json, math, sys, time
import torch

try:
    import cupy as cp
except Exception:  # noqa: BLE001
    cp = None

REPS = 25
dev = "cuda"


def median_ms(fn):
    for _ in range(3):
        fn()
    times = []
    for _ in range(REPS):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return times[len(times) // 2]


def report(impl, case, dtype, nbytes, ms, first_ms):
    print(json.dumps({"impl": impl, "case": case, "dtype": dtype, "gbps": round(nbytes / ms / 1e6, 1),
                      "ms": round(ms, 4), "first_call_ms": round(first_ms, 1)}), flush=True)


def seed_t(a, b, c):
    return torch.sin(a * b) + torch.sqrt(c) + torch.cos(a) / torch.log(torch.cos(b) + 2)


def chain_t(a, b, c):
    return ((a * b + c) * (b - c) + torch.minimum(a, b) * torch.maximum(b, c) / torch.addcmul(torch.full_like(a, 2.0), a, c) - 0.25) * a


SEED_C = "out = sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+(T)2)"
CHAIN_C = "out = ((a*b + c) * (b - c) + min(a, b) * max(b, c) / fma(a, c, (T)2) - (T)0.25) * a"


def case(name, fn_t, code_c, shapes, out_shape, dtype):
    g = torch.Generator(device=dev).manual_seed(7)
    ins = [torch.rand(s, device=dev, dtype=dtype, generator=g) + 0.25 for s in shapes]
    n = math.prod(out_shape)
    nbytes = (n + sum(min(math.prod(s), n) for s in shapes)) * ins[0].element_size()
    dname = str(dtype).replace("torch.", "")
    torch._dynamo.reset()
    comp = torch.compile(fn_t)
    torch.cuda.synchronize()
    t = time.perf_counter()
    comp(*ins)
    torch.cuda.synchronize()
    first = (time.perf_counter() - t) * 1e3
    report("torch.compile", name, dname, nbytes, median_ms(lambda: comp(*ins)), first)
    report("torch eager", name, dname, nbytes, median_ms(lambda: fn_t(*ins)), 0.0)
    if cp is not None:
        t_c = "float" if dtype == torch.float32 else "double"
        k = cp.ElementwiseKernel("T a, T b, T c", "T out", code_c, f"sa_peer_{name}")
        ci = [cp.from_dlpack(x) for x in ins]
        out = cp.empty(out_shape, dtype=cp.float32 if dtype == torch.float32 else cp.float64)
        cp.cuda.runtime.deviceSynchronize()
        t = time.perf_counter()
        k(*ci, out)
        cp.cuda.runtime.deviceSynchronize()
        first = (time.perf_counter() - t) * 1e3
        report("cupy", name, dname, nbytes, median_ms(lambda: k(*ci, out)), first)


big = 16384
print(f"# torch {torch.__version__}, cupy {cp.__version__ if cp else 'absent'}, {torch.cuda.get_device_name()}", file=sys.stderr)
only = sys.argv[1] if len(sys.argv) > 1 else None
cases = [
    ("expr_seed_dense", seed_t, SEED_C, [(big, big)] * 3, (big, big), torch.float32),
    ("expr_seed_broadcast", seed_t, SEED_C, [(1, big), (big, 1), (big, big)], (big, big), torch.float32),
    ("t1_seed_f64_broadcast", seed_t, SEED_C, [(1, big // 2), (big, 1), (big, big // 2)], (big, big // 2), torch.float64),
    ("t1_chain12", chain_t, CHAIN_C, [(big, big)] * 3, (big, big), torch.float32),
]
for c in cases:
    if only is None or only in c[0]:
        case(*c)
