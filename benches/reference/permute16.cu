// Hand-written CUDA C reference for issue #13's bf16 permuted copy (not part of the library):
// in (64,64,128,256) -> permute(3,1,0,2) -> out (256,64,64,128), i.e.
// out[p][q][s][u] = in[s][q][u][p]. Which tile shape and which block order reach 0.85 of the
// ceiling? Pairs in 64 x 64 tiles gave 0.82 (narrow.cu, perm_pair).
//   nvcc -O3 -arch=sm_90 -o permute16 permute16.cu && ./permute16    (JSON lines to stdout)
//
// A tile is TU x TP elements (u: the output's unit axis, 128 long; p: the input's, 256
// long). Every global access is a 4-byte pair along the operand's unit axis; each thread
// turns two input words (rows u, u + 1 at pair p, p + 1) into two stage words (rows p, p + 1
// at pair u, u + 1) with prmt. Blocks of 32 x R threads. The block index splits into (tile
// of u, tile of p, q, s) in the order ORDER names, innermost first.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#include "permute16.cuh"

template <class F> static float median_ms(F launch, int reps = 31) { return event_median_ms(launch, reps, 5); }


// ORDER: digits of the split, innermost first: 0 = u tile, 1 = p tile, 2 = q, 3 = s.
template <int TU, int TP, int R>
__global__ void __launch_bounds__(32 * R) perm(uint32_t* out, const uint32_t* in, int order) {
  __shared__ uint32_t st[TP][TU / 2 + 1];
  const int n[4] = {U / TU, P / TP, Q, S};
  int idx[4], b = blockIdx.x;
  for (int k = 0; k < 4; k++) {
    int d = (order >> (4 * k)) & 0xf;
    idx[d] = b % n[d];
    b /= n[d];
  }
  const int u0 = idx[0] * TU, p0 = idx[1] * TP, q = idx[2], s = idx[3];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const uint32_t* src = in + (s * IN_S + q * IN_Q) / 2;
  uint32_t* dst = out + (q * OUT_Q + s * OUT_S) / 2;
  load_stage<TU, TP, R, false>(st, src, u0, p0);
  __syncthreads();
  constexpr int UC = TU / 2 / 32 > 0 ? TU / 2 / 32 : 1;  // u pairs per thread column
  constexpr int PR = TP / R;                             // p rows per thread row
#pragma unroll
  for (int j = 0; j < PR; j++)
#pragma unroll
    for (int i = 0; i < UC; i++) {
      int p = ty + R * j, uc = tx + 32 * i;
      if (uc < TU / 2) dst[((p0 + p) * OUT_P + u0) / 2 + uc] = st[p][uc];
    }
}

__global__ void f32_add(float4* c, const float4* a, const float4* b, size_t chunks) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < chunks) { float4 x = a[i], y = b[i]; c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w); }
}

int main() {
  const size_t n = (size_t)U * P * Q * S, bytes = 2 * n;  // 2^27 bf16, 256 MiB
  char *a, *c, *r, *f;
  unsigned long long* dcount;
  CK(cudaMalloc(&a, bytes)); CK(cudaMalloc(&c, bytes)); CK(cudaMalloc(&r, bytes));
  CK(cudaMalloc(&f, 3ull << 30)); CK(cudaMalloc(&dcount, 8));
  fill_rand<<<1024, 256>>>((uint32_t*)a, bytes / 4, 1);
  fill_rand<<<1024, 256>>>((uint32_t*)f, (3ull << 30) / 4, 2);
  perm_naive<<<(unsigned)(n / 256), 256>>>((uint16_t*)r, (uint16_t*)a);
  CK(cudaDeviceSynchronize());
  auto report = [](const char* name, double b, float ms, long long diff) {
    printf("{\"case\":\"%s\",\"gbps\":%.1f,\"ms\":%.4f,\"diff\":%lld}\n", name, b / ms / 1e6, ms, diff);
    fflush(stdout);
  };
  // The ceiling's two: copy of 1 GiB, f32 add of 2^28 (3 GiB).
  report("copy_d2d_1GiB", 2.0 * (1 << 30), median_ms([&] { CK(cudaMemcpyAsync(f + (1ull << 30), f, 1ull << 30, cudaMemcpyDeviceToDevice)); }), -1);
  {
    size_t ch = (1ull << 28) / 4;
    float4* base = (float4*)f;
    report("f32_add_2^28", 3.0 * 4 * (1 << 28), median_ms([&] { f32_add<<<(unsigned)(ch / 256), 256>>>(base, base + ch, base + 2 * ch, ch); }), -1);
  }
  report("copy_d2d_256MiB", 2.0 * bytes, median_ms([&] { CK(cudaMemcpyAsync(c, a, bytes, cudaMemcpyDeviceToDevice)); }), -1);
  auto run = [&](const char* name, auto launch) {
    unsigned long long d = poisoned_diff(launch, c, r, bytes, dcount);
    report(name, 2.0 * bytes, median_ms(launch), (long long)d);
  };
  char nm[128];
  // Orders, innermost first (hex digits): 0x3210 = u, p, q, s (narrow.cu's); 0x2310 = u, p, s, q;
  // 0x2130 = u, s, p, q; 0x1320 = u, q, s, p; 0x2301 = p, u, s, q.
  const int orders[] = {0x3210, 0x2310, 0x2130, 0x1320, 0x2301};
#define SHAPE(TU, TP, R)                                                                          \
  for (int o : orders) {                                                                          \
    unsigned blocks = (U / TU) * (P / TP) * Q * S;                                                \
    snprintf(nm, sizeof nm, "bf_perm_pair_%dx%d_r%d_order%04x", TU, TP, R, o);                    \
    run(nm, [&] { perm<TU, TP, R><<<blocks, dim3(32, R)>>>((uint32_t*)c, (const uint32_t*)a, o); }); \
  }
  SHAPE(64, 64, 8)
  SHAPE(128, 64, 8)
  SHAPE(128, 64, 16)
  SHAPE(64, 128, 8)
  SHAPE(128, 128, 16)
  SHAPE(128, 128, 8)
  SHAPE(128, 128, 32)
  return 0;
}
