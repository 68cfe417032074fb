// What permute16.cu and permute16_mimic.cu share (CUDA C references, not part of the
// library): the permutation's extents and strides, phase 1 of a paired tile, and the
// kernels that fill, compute naively and compare.
#pragma once
#include <cstdint>
#include "timing.cuh"

constexpr int U = 128, P = 256, Q = 64, S = 64;  // extents
constexpr long IN_S = (long)Q * U * P, IN_Q = (long)U * P, IN_U = P;  // input strides
constexpr long OUT_P = (long)Q * S * U, OUT_Q = (long)S * U, OUT_S = U;  // output strides

// Phase 1 of a TU x TP tile, blocks of 32 x R threads: every thread loads its word pairs
// (rows u, u + 1 at pair p of the input) before any store, then turns each 2 x 2 block with
// prmt into two stage words (rows p, p + 1 at pair u). With SWZ, word m of stage row p goes
// to m ^ (p / 32).
template <int TU, int TP, int R, bool SWZ>
__device__ __forceinline__ void load_stage(uint32_t (*st)[TU / 2 + 1], const uint32_t* src, int u0, int p0) {
  const int tx = threadIdx.x, ty = threadIdx.y;
  constexpr int PC = TP / 2 / 32;  // p pairs per thread column
  constexpr int MU = TU / 2 / R;   // u pairs per thread row
  uint32_t w0[MU][PC], w1[MU][PC];
#pragma unroll
  for (int j = 0; j < MU; j++)
#pragma unroll
    for (int i = 0; i < PC; i++) {
      int m = ty + R * j, pc = tx + 32 * i;
      w0[j][i] = src[(u0 + 2 * m) * (IN_U / 2) + p0 / 2 + pc];
      w1[j][i] = src[(u0 + 2 * m + 1) * (IN_U / 2) + p0 / 2 + pc];
    }
#pragma unroll
  for (int j = 0; j < MU; j++)
#pragma unroll
    for (int i = 0; i < PC; i++) {
      int m = ty + R * j, pc = tx + 32 * i;
      int col = SWZ ? m ^ ((2 * pc) >> 5) : m;
      st[2 * pc][col] = __byte_perm(w0[j][i], w1[j][i], 0x5410);
      st[2 * pc + 1][col] = __byte_perm(w0[j][i], w1[j][i], 0x7632);
    }
}

__global__ void perm_naive(uint16_t* out, const uint16_t* in) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;  // output linear index
  size_t u = i % U, s = (i / U) % S, q = (i / OUT_Q) % Q, p = i / OUT_P;
  out[i] = in[s * IN_S + q * IN_Q + u * IN_U + p];
}
__global__ void fill_rand(uint32_t* d, size_t w, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < w; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t x = (uint32_t)i * 2654435761u ^ seed; x ^= x >> 13; x *= 0x5bd1e995; x ^= x >> 15; d[i] = x;
  }
}
__global__ void count_diff(const uint32_t* x, const uint32_t* y, size_t n, unsigned long long* d) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    if (x[i] != y[i]) atomicAdd(d, 1ull);
}

// Poisons `out` (`bytes` of 0xff), runs `launch` once and returns how many 4-byte words of
// `out` differ from `want` (`dcount`: a device counter).
template <class F>
static unsigned long long poisoned_diff(F launch, char* out, const char* want, size_t bytes, unsigned long long* dcount) {
  CK(cudaMemset(out, 0xff, bytes));
  launch();
  CK(cudaDeviceSynchronize());
  CK(cudaMemset(dcount, 0, 8));
  count_diff<<<1024, 256>>>((const uint32_t*)out, (const uint32_t*)want, bytes / 4, dcount);
  unsigned long long d;
  CK(cudaMemcpy(&d, dcount, 8, cudaMemcpyDeviceToHost));
  return d;
}
