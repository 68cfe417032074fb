// How a streaming kernel's GB/s depends on its size and on its read/write mix (not part of
// the library): time t(bytes) of plain one-chunk-per-thread kernels over sizes from 64 MiB to
// 4 GiB moved, for a pure read (xor-fold), a 2:1 f32 add (the ceiling's form), a 1:1 copy
// (kernel and cudaMemcpyAsync), a 1:2 bf16 -> f32 cast and a pure write (fill), and an empty
// kernel's event time (one block; the grid of a 256 MiB copy). A fit of
// t = a + bytes / bw per form gives its fixed time per launch (a) and its asymptotic rate (bw).
// `./size_sweep ROUNDS queued` queues each timed launch behind a 50 us spin kernel, so that the
// events exclude the host's submission of the launch.
//   nvcc -O3 -arch=sm_90 -o size_sweep size_sweep.cu && ./size_sweep   (JSON lines)
#include <cstdio>
#include <cstdint>
#include <vector>
#include <string>
#include <functional>
#include <cuda_runtime.h>
#include "timing.cuh"

__global__ void empty() {}
__global__ void fold(const uint4* in, size_t chunks, unsigned* sink) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < chunks) { uint4 v = in[i]; if ((v.x ^ v.y ^ v.z ^ v.w) == 0x12345678u) atomicAdd(sink, 1u); }
}
__global__ void f32_add(float4* c, const float4* a, const float4* b, size_t chunks) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < chunks) { float4 x = a[i], y = b[i]; c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w); }
}
__global__ void copy16(uint4* out, const uint4* in, size_t chunks) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < chunks) out[i] = in[i];
}
__global__ void cast4(uint4* out, const uint2* in, size_t chunks) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < chunks) { uint2 x = in[i]; out[i] = make_uint4(x.x << 16, x.x & 0xffff0000u, x.y << 16, x.y & 0xffff0000u); }
}
__global__ void fill(uint4* out, size_t chunks, unsigned v) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < chunks) out[i] = make_uint4(v, v + 1, v + 2, v + 3);
}

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 3;
  bool queued = argc > 2 && std::string(argv[2]) == "queued";
  const size_t MAX = (size_t)4 << 30;  // bytes moved by the largest launch of each form
  char *x, *y, *z;
  CK(cudaMalloc(&x, MAX)); CK(cudaMalloc(&y, MAX)); CK(cudaMalloc(&z, MAX));
  CK(cudaMemset(x, 0x3c, MAX)); CK(cudaMemset(y, 0x3d, MAX)); CK(cudaMemset(z, 0, MAX));
  unsigned* sink; CK(cudaMalloc(&sink, 4));
  const unsigned B = 256;
  auto grid = [&](size_t chunks) { return (unsigned)((chunks + B - 1) / B); };
  struct Form { const char* name; double per_byte_moved; std::function<void(size_t)> run; };
  // run(m): one launch moving m bytes in all (reads + writes).
  std::vector<Form> forms = {
    {"read", 1, [&](size_t m) { fold<<<grid(m / 16), B>>>((const uint4*)x, m / 16, sink); }},
    {"f32_add_2to1", 1, [&](size_t m) { size_t c = m / 3 / 16; f32_add<<<grid(c), B>>>((float4*)z, (const float4*)x, (const float4*)y, c); }},
    {"copy_1to1", 1, [&](size_t m) { size_t c = m / 2 / 16; copy16<<<grid(c), B>>>((uint4*)z, (const uint4*)x, c); }},
    {"cudaMemcpy_1to1", 1, [&](size_t m) { CK(cudaMemcpyAsync(z, x, m / 2, cudaMemcpyDeviceToDevice)); }},
    {"cast_1to2", 1, [&](size_t m) { size_t c = m / 24; cast4<<<grid(c), B>>>((uint4*)z, (const uint2*)x, c); }},
    {"write", 1, [&](size_t m) { fill<<<grid(m / 16), B>>>((uint4*)z, m / 16, 7); }},
  };
  for (int r = 0; r < rounds; r++) {
    // The launch itself: an empty kernel of one block, and of the grid a 256 MiB copy takes.
    auto timed = [&](auto f) { return event_median_ms(f, 25, 3, queued); };
    float e1 = timed([&] { empty<<<1, B>>>(); });
    float eg = timed([&] { empty<<<grid(((size_t)128 << 20) / 16), B>>>(); });
    printf("{\"round\":%d,\"timing\":\"%s\",\"form\":\"empty\",\"us_one_block\":%.2f,\"us_copy_grid\":%.2f}\n", r, queued ? "queued" : "plain", e1 * 1e3, eg * 1e3);
    for (auto& f : forms)
      for (size_t mib = 64; mib <= 4096; mib *= 2) {
        size_t m = mib << 20;
        // bytes actually moved after rounding to whole chunks
        double moved = m;
        std::string n = f.name;
        if (n == "f32_add_2to1") moved = (double)(m / 3 / 16) * 48;
        else if (n == "copy_1to1" || n == "cudaMemcpy_1to1") moved = (double)(m / 2 / 16) * 32;
        else if (n == "cast_1to2") moved = (double)(m / 24) * 24;
        float ms = timed([&] { f.run(m); });
        printf("{\"round\":%d,\"timing\":\"%s\",\"form\":\"%s\",\"mib_moved\":%zu,\"bytes\":%.0f,\"ms\":%.5f,\"gbps\":%.1f}\n", r, queued ? "queued" : "plain", f.name, mib, moved, ms, moved / ms / 1e6);
        fflush(stdout);
      }
  }
  return 0;
}
