// Chunks per thread for f32 adds from 2^12 to 2^28 elements (not part of the library): one
// 16-byte chunk per thread (the library's vectorised form) against two and four (chunk
// t + j * blockDim of the block's share, PyTorch's vectorized_elementwise_kernel shape), in
// blocks of 128 and 256, timed around the launch and queued behind a spin. Inputs rotate
// through 512 MiB per operand so that no size runs from L2; every output is checked.
//   nvcc -O3 -arch=sm_90 -o small_launch small_launch.cu && ./small_launch   (JSON lines)
#include <cstdio>
#include <cstdint>
#include <vector>
#include <cuda_runtime.h>
#include "timing.cuh"

template <int K>
__global__ void add(float4* c, const float4* a, const float4* b, size_t chunks) {
  size_t base = (size_t)blockIdx.x * blockDim.x * K + threadIdx.x;
  float4 x[K], y[K];
#pragma unroll
  for (int j = 0; j < K; j++) { size_t i = base + j * blockDim.x; if (i < chunks) { x[j] = a[i]; y[j] = b[i]; } }
#pragma unroll
  for (int j = 0; j < K; j++) {
    size_t i = base + j * blockDim.x;
    if (i < chunks) c[i] = make_float4(x[j].x + y[j].x, x[j].y + y[j].y, x[j].z + y[j].z, x[j].w + y[j].w);
  }
}

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 3;
  const size_t ROT = (size_t)512 << 20;  // bytes per operand
  const size_t MAXN = (size_t)1 << 28;
  size_t region = std::max(ROT, MAXN * 4);
  AddOperands ops(region);
  float *a = ops.a, *b = ops.b, *c = ops.c;
  for (int r = 0; r < rounds; r++)
    for (int q = 0; q < 2; q++)
      for (int lg : {12, 16, 20, 22, 24, 26, 28}) {
        size_t n = (size_t)1 << lg, chunks = n / 4;
        size_t sets = std::max<size_t>(1, region / (n * 4));
        for (int k : {1, 2, 4})
          for (unsigned bs : {128u, 256u}) {
            CK(cudaMemset(c, 0xff, region));
            size_t rep = 0;
            unsigned grid = (unsigned)((chunks + (size_t)bs * k - 1) / ((size_t)bs * k));
            auto launch = [&] {
              size_t off = (rep++ % sets) * n;
              float4 *cc = (float4*)(c + off), *aa = (float4*)(a + off), *bb = (float4*)(b + off);
              if (k == 1) add<1><<<grid, bs>>>(cc, aa, bb, chunks);
              else if (k == 2) add<2><<<grid, bs>>>(cc, aa, bb, chunks);
              else add<4><<<grid, bs>>>(cc, aa, bb, chunks);
            };
            float ms = event_median_ms(launch, 25, 3, q == 1);
            // Every set written at least once is checked.
            unsigned long long nb = ops.bad_sums(std::min(sets, rep) * n);
            printf("{\"round\":%d,\"timing\":\"%s\",\"log2n\":%d,\"chunks_per_thread\":%d,\"block\":%u,\"us\":%.3f,\"gbps\":%.1f,\"bad\":%llu}\n",
                   r, q ? "queued" : "plain", lg, k, bs, ms * 1e3, 12.0 * n / ms / 1e6, nb);
            fflush(stdout);
          }
      }
  return 0;
}
