# The u8 broadcast row [16384, 16384] + [1, 16384] on the same torch buffers (issue #13; not part
# of the library): strided_apply's kernel, torch's copy of the same bytes (`c.copy_(a)`), and
# four hand-written CUDA C forms through CuPy (one 16-byte chunk per thread with a 64-bit `%`;
# the same with streaming loads and stores; a 2-D grid; two chunks per thread). Five rounds,
# alternating, each the median of 25 event-timed launches after 5; every kernel's result is
# checked against torch.add. Run with the Python module on the path:
#   PYTHONPATH=SITE python3 benches/reference/row_same_buffers.py [SEED]
import cupy as cp
import torch
import strided_apply as sa
from same_buffers import compare, dev, gen as g, stream
big = 16384
src = r'''
__device__ __forceinline__ unsigned sw(unsigned a, unsigned b) { return ((a & 0x7f7f7f7f) + (b & 0x7f7f7f7f)) ^ ((a ^ b) & 0x80808080); }
__device__ __forceinline__ uint4 add16(uint4 x, uint4 y) { return make_uint4(sw(x.x, y.x), sw(x.y, y.y), sw(x.z, y.z), sw(x.w, y.w)); }
extern "C" __global__ void row_mod(uint4* c, const uint4* a, const uint4* r, unsigned long long chunks, unsigned per_row) {
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < chunks) c[i] = add16(a[i], r[i % per_row]); }
extern "C" __global__ void row_cs(uint4* c, const uint4* a, const uint4* r, unsigned long long chunks, unsigned per_row) {
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < chunks) __stcs(c + i, add16(__ldcs(a + i), r[i % per_row])); }
extern "C" __global__ void row_2d(uint4* c, const uint4* a, const uint4* r, unsigned per_row) {
  unsigned col = blockIdx.x * blockDim.x + threadIdx.x; unsigned long long i = (unsigned long long)blockIdx.y * per_row + col;
  c[i] = add16(a[i], r[col]); }
extern "C" __global__ void row_x2(uint4* c, const uint4* a, const uint4* r, unsigned long long chunks, unsigned per_row) {
  unsigned long long i = ((unsigned long long)blockIdx.x * blockDim.x * 2) + threadIdx.x;
  uint4 x0 = a[i], x1 = a[i + blockDim.x]; uint4 y0 = r[i % per_row], y1 = r[(i + blockDim.x) % per_row];
  c[i] = add16(x0, y0); c[i + blockDim.x] = add16(x1, y1); }
'''
mod = cp.RawModule(code=src)
k = {n: mod.get_function(n) for n in ("row_mod", "row_cs", "row_2d", "row_x2")}
a = torch.randint(0, 255, (big, big), device=dev, generator=g).to(torch.uint8)
r = torch.randint(0, 255, (1, big), device=dev, generator=g).to(torch.uint8)
c = torch.empty((big, big), device=dev, dtype=torch.uint8)
want = torch.add(a, r)
chunks = big * big // 16
P = lambda t: t.data_ptr()
def launch(name):
    with stream:
        if name == "row_2d":
            k[name]((big // 16 // 256, big), (256,), (P(c), P(a), P(r), cp.uint32(big // 16)))
        elif name == "row_x2":
            k[name]((chunks // 512,), (256,), (P(c), P(a), P(r), cp.uint64(chunks), cp.uint32(big // 16)))
        else:
            k[name]((chunks // 256,), (256,), (P(c), P(a), P(r), cp.uint64(chunks), cp.uint32(big // 16)))
impls = {"strided_apply": lambda: sa.add(a, r, out=c), "torch_copy": lambda: c.copy_(a)}
for n in k: impls[n] = (lambda n=n: launch(n))
compare("u8_row_same_buffers", impls, c, 0x5a, want, 2 * big * big + big, unchecked={"torch_copy"},
        ptr=[hex(P(a)), hex(P(c))])
