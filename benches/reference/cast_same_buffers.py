# The bf16 -> f32 cast of 2^28 contiguous elements on the same torch buffers (issue #13; not
# part of the library): strided_apply's kernel, torch's `out.copy_(a)`, and CUDA C forms
# through CuPy (4 elements per thread: an 8-byte load and a 16-byte store, the library's
# form; the same with a streaming store; 8 per thread: a 16-byte load and two 16-byte
# stores; two chunks of 4 per thread). Five rounds, alternating, each the median of 25
# event-timed launches after 5; every result checked against torch's. Run with the Python
# module on the path:
#   PYTHONPATH=SITE python3 benches/reference/cast_same_buffers.py [SEED]
import cupy as cp
import torch
import strided_apply as sa
from same_buffers import compare, dev, gen as g, stream
n = 1 << 28
src = r'''
__device__ __forceinline__ float4 widen4(uint2 v) {
  return make_float4(__uint_as_float(v.x << 16), __uint_as_float(v.x & 0xffff0000u),
                     __uint_as_float(v.y << 16), __uint_as_float(v.y & 0xffff0000u)); }
extern "C" __global__ void c4(float4* o, const uint2* a, unsigned long long m) {
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < m) o[i] = widen4(a[i]); }
extern "C" __global__ void c4_cs(float4* o, const uint2* a, unsigned long long m) {
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < m) __stcs(o + i, widen4(__ldcs(a + i))); }
extern "C" __global__ void c8(float4* o, const uint4* a, unsigned long long m) {
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < m) { uint4 v = a[i]; o[2 * i] = widen4(make_uint2(v.x, v.y)); o[2 * i + 1] = widen4(make_uint2(v.z, v.w)); } }
extern "C" __global__ void c4x2(float4* o, const uint2* a, unsigned long long m) {
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x * 2 + threadIdx.x;
  uint2 v0 = a[i], v1 = a[i + blockDim.x]; o[i] = widen4(v0); o[i + blockDim.x] = widen4(v1); }
'''
mod = cp.RawModule(code=src)
k = {name: mod.get_function(name) for name in ("c4", "c4_cs", "c8", "c4x2")}
a = (torch.rand(n, device=dev, generator=g) * 2 - 1).to(torch.bfloat16)
o = torch.empty(n, device=dev, dtype=torch.float32)
want = a.to(torch.float32)
P = lambda t: t.data_ptr()
def launch(name):
    with stream:
        if name == "c8":
            k[name]((n // 8 // 256,), (256,), (P(o), P(a), cp.uint64(n // 8)))
        elif name == "c4x2":
            k[name]((n // 4 // 512,), (256,), (P(o), P(a), cp.uint64(n // 4)))
        else:
            k[name]((n // 4 // 256,), (256,), (P(o), P(a), cp.uint64(n // 4)))
impls = {"strided_apply": lambda: sa.cast(a, out=o), "torch_copy_": lambda: o.copy_(a)}
for name in k: impls[name] = (lambda name=name: launch(name))
compare("cast_bf16_f32_same_buffers", impls, o, float("nan"), want, 6 * n)
