"""PyTorch reference for the demo's cases, run in the same session as the Rust binaries:
f32 device-to-device copy and c = a + b (contiguous, broadcast row, transposed), 4096x4096.
Times with CUDA events, median of 21 runs after warm-up. Prints GB/s (bytes = inputs read
once + output written once)."""
import torch

N = 4096
dev = "cuda"
a = torch.rand(N, N, device=dev) * 2 - 1
b = torch.rand(N, N, device=dev) * 2 - 1
row = torch.rand(1, N, device=dev)
c = torch.full((N, N), float("nan"), device=dev)


def median_ms(f, reps=21):
    for _ in range(3):
        f()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        f()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return times[len(times) // 2]


print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
cases = [
    ("d2d copy", lambda: c.copy_(a), 2 * N * N * 4),
    ("contiguous", lambda: torch.add(a, b, out=c), 3 * N * N * 4),
    ("broadcast row", lambda: torch.add(a, row, out=c), (2 * N * N + N) * 4),
    ("transposed b", lambda: torch.add(a, b.t(), out=c), 3 * N * N * 4),
]
for name, f, nbytes in cases:
    ms = median_ms(f)
    print(f"torch {name:<16} {nbytes / ms / 1e6:>10.0f} GB/s")
