// Hand-written CUDA C reference for row reductions of every length (issue #41): `sum(dim=1)`
// and `argmax(dim=1)` of a contiguous [2^28 / L, L] matrix, f32 and bf16, to learn which
// row-kernel shape fills the GPU at each L before the Rust kernel takes one (not part of the
// library). Every variant keeps the library's order (gpu-kernels/src/reduce.rs), so each
// could serve the CPU twin's bits: a row of C = L / w chunks (w = 16 bytes of elements) has
// P = min(next_pow2(C), 256) slots, slot s folds chunks s, s + 256, … in order, then the
// halving tree over the slots that received chunks. Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90 -o rowsum rowsum.cu && ./rowsum      (JSON lines to stdout)
//
// Shape: a block of 256 threads; a row takes TPR = P / M threads, thread t holding slots
// t + TPR * m for m < M (M = 1 is the library's shape before #41: a slot per thread; the
// library now takes M = 4 up to 2048 chunks a row, M = 1 past it). The
// tree's levels of distance >= TPR fold in registers (m), the others across threads: in
// shared memory with a warp barrier per level (TREE 0, the library's `segment_tree`) or with
// warp shuffles (TREE 1), levels of >= 32 threads in shared memory either way.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <vector>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include "timing.cuh"

constexpr int SLOTS = 256;

struct ArgAcc { float v; int i; };
// The library's `beats` for argmax: NaN first, then the larger value, ties to the lower index.
__device__ __host__ __forceinline__ bool beats(ArgAcc b, ArgAcc a) {
  bool an = a.v != a.v, bn = b.v != b.v;
  if (an || bn) return bn && (!an || b.i < a.i);
  return b.v > a.v || (b.v == a.v && b.i < a.i);
}

template <bool ARG> struct Acc;
template <> struct Acc<false> {
  typedef float T;
  __device__ __host__ static float first(float x, int) { return x; }
  __device__ __host__ static float fold(float a, float x, int) { return a + x; }
  __device__ __host__ static float combine(float a, float b) { return a + b; }
  __device__ static float shfl(float a, int s) { return __shfl_down_sync(0xffffffffu, a, s); }
};
template <> struct Acc<true> {
  typedef ArgAcc T;
  __device__ __host__ static ArgAcc first(float x, int i) { return ArgAcc{x, i}; }
  __device__ __host__ static ArgAcc fold(ArgAcc a, float x, int i) { return combine(a, ArgAcc{x, i}); }
  __device__ __host__ static ArgAcc combine(ArgAcc a, ArgAcc b) { return beats(b, a) ? b : a; }
  __device__ static ArgAcc shfl(ArgAcc a, int s) {
    return ArgAcc{__shfl_down_sync(0xffffffffu, a.v, s), __shfl_down_sync(0xffffffffu, a.i, s)};
  }
};

// 16 bytes of elements as floats.
template <class E> struct Chunk;
template <> struct Chunk<float> {
  static constexpr int W = 4;
  __device__ static void load(float (&d)[4], const float* p) {
    float4 v = __ldg((const float4*)p); d[0] = v.x; d[1] = v.y; d[2] = v.z; d[3] = v.w;
  }
};
template <> struct Chunk<__nv_bfloat16> {
  static constexpr int W = 8;
  __device__ static void load(float (&d)[8], const __nv_bfloat16* p) {
    uint4 v = __ldg((const uint4*)p);
    const unsigned u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int k = 0; k < 4; k++) {
      d[2 * k] = __uint_as_float(u[k] << 16);
      d[2 * k + 1] = __uint_as_float(u[k] & 0xffff0000u);
    }
  }
};

// L a multiple of W (every bench length); pshift = log2(P), tshift = log2(TPR) = pshift - log2(M).
template <class E, bool ARG, int M, int TREE>
__global__ void __launch_bounds__(SLOTS) rows(typename Acc<ARG>::T* out, const E* in, int nrows, int L,
                                              int tshift) {
  typedef Acc<ARG> A;
  typedef typename A::T T;
  constexpr int W = Chunk<E>::W;
  __shared__ T sm[SLOTS];
  const int tid = threadIdx.x, tpr = 1 << tshift, t = tid & (tpr - 1);
  const int r = blockIdx.x * (SLOTS >> tshift) + (tid >> tshift);
  const bool live = r < nrows;
  const E* base = in + (size_t)(live ? r : nrows - 1) * L;
  T acc[M];
  const int step = SLOTS * W;
  for (int pass = 0; pass < L; pass += step) {
    float v[M][W];
#pragma unroll
    for (int m = 0; m < M; m++) {
      const int c = pass + (t + tpr * m) * W;
      if (c < L) Chunk<E>::load(v[m], base + c);
    }
#pragma unroll
    for (int m = 0; m < M; m++) {
      const int c = pass + (t + tpr * m) * W;
      if (c < L) {
#pragma unroll
        for (int j = 0; j < W; j++)
          acc[m] = (pass == 0 && j == 0) ? A::first(v[m][0], c) : A::fold(acc[m], v[m][j], c + j);
      }
    }
  }
  // Slot s received chunks iff s * W < L.
#pragma unroll
  for (int h = M / 2; h >= 1; h /= 2)
#pragma unroll
    for (int m = 0; m < h; m++)
      if ((t + tpr * (m + h)) * W < L) acc[m] = A::combine(acc[m], acc[m + h]);
  T v = acc[0];
  int s = tpr / 2;
  if (s >= 32) {
    sm[tid] = v;
    __syncthreads();
    const int seg = tid - t;
    for (; s >= 32; s /= 2) {
      if (t < s) {
        if ((t + s) * W < L) v = A::combine(v, sm[seg + t + s]);
        sm[tid] = v;
      }
      __syncthreads();
    }
  }
  if (TREE == 1) {
    for (; s >= 1; s /= 2) {
      T o = A::shfl(v, s);
      if (t < s && (t + s) * W < L) v = A::combine(v, o);
    }
  } else {
    const int seg = tid - t;
    sm[tid] = v;
    for (; s >= 1; s /= 2) {
      __syncwarp();
      if (t < s) {
        if ((t + s) * W < L) v = A::combine(v, sm[seg + t + s]);
        sm[tid] = v;
      }
    }
  }
  if (live && t == 0) out[r] = v;
}

// The library's order on the host for row r (checks every variant bit for bit).
template <class E, bool ARG>
static typename Acc<ARG>::T host_row(const std::vector<float>& a, int L, int r) {
  typedef Acc<ARG> A;
  constexpr int W = Chunk<E>::W;
  typename A::T slot[SLOTS];
  for (int q = 0; q < L; q++) {
    int s = (q / W) % SLOTS;
    float x = a[(size_t)r * L + q];
    slot[s] = (q < SLOTS * W && q % W == 0) ? A::first(x, q) : A::fold(slot[s], x, q);
  }
  int used = std::min((L + W - 1) / W, SLOTS), p = 1;
  while (p < used) p *= 2;
  for (int h = p / 2; h >= 1; h /= 2)
    for (int s = 0; s < h; s++)
      if (s + h < used) slot[s] = A::combine(slot[s], slot[s + h]);
  return slot[0];
}

static const size_t TOTAL = 1ull << 28;
static std::vector<float> h_f32;  // the values (bf16-exact for the bf16 matrix)

template <class E, bool ARG, int M, int TREE>
static void run(const char* dt, const E* d_in, int L) {
  typedef typename Acc<ARG>::T T;
  constexpr int W = Chunk<E>::W;
  const int C = L / W;
  int pshift = 0;
  while ((1 << pshift) < C && pshift < 8) pshift++;
  int mshift = 0;
  while ((1 << mshift) < M) mshift++;
  if (mshift > pshift) return;  // more slots per thread than the row has
  const int tshift = pshift - mshift;
  const int nrows = (int)(TOTAL / L);
  const int blocks = (nrows + (SLOTS >> tshift) - 1) / (SLOTS >> tshift);
  T* d_out;
  CK(cudaMalloc(&d_out, nrows * sizeof(T)));
  CK(cudaMemset(d_out, 0xff, nrows * sizeof(T)));
  auto go = [&] { rows<E, ARG, M, TREE><<<blocks, SLOTS>>>(d_out, d_in, nrows, L, tshift); };
  go();
  CK(cudaDeviceSynchronize());
  std::vector<T> h(nrows);
  CK(cudaMemcpy(h.data(), d_out, nrows * sizeof(T), cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int r = 0; r < nrows; r += std::max(1, nrows / 997)) {
    T want = host_row<E, ARG>(h_f32, L, r);
    if (memcmp(&want, &h[r], sizeof(T)) != 0) bad++;
  }
  float ms = event_median_ms(go, 41, 5);
  cudaFuncAttributes attr;
  CK(cudaFuncGetAttributes(&attr, rows<E, ARG, M, TREE>));
  printf("{\"case\":\"%s_rows%d_%s\",\"M\":%d,\"tree\":\"%s\",\"gbps\":%.1f,\"ms\":%.4f,\"regs\":%d,"
         "\"bitwise_bad\":%d}\n",
         ARG ? "argmax" : "sum", L, dt, M, TREE ? "shfl" : "smem", (double)TOTAL * sizeof(E) / ms / 1e6, ms,
         attr.numRegs, bad);
  fflush(stdout);
  CK(cudaFree(d_out));
}

template <class E, bool ARG, int TREE>
static void sweep(const char* dt, const E* d_in, int L) {
  run<E, ARG, 1, TREE>(dt, d_in, L);
  run<E, ARG, 2, TREE>(dt, d_in, L);
  run<E, ARG, 4, TREE>(dt, d_in, L);
  run<E, ARG, 8, TREE>(dt, d_in, L);
  run<E, ARG, 16, TREE>(dt, d_in, L);
}

int main() {
  h_f32.resize(TOTAL);
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < TOTAL; i++) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    // Values with 8 significant bits (exact in bf16, so one host copy serves both types)
    // over 16 binades, so that sums round and a wrong order shows in the bits.
    h_f32[i] = ldexpf((float)((s >> 40) & 0xff) / 256.0f - 0.5f, -(int)((s >> 52) & 15));
  }
  float* d_f32;
  __nv_bfloat16* d_bf16;
  CK(cudaMalloc(&d_f32, TOTAL * 4));
  CK(cudaMalloc(&d_bf16, TOTAL * 2));
  CK(cudaMemcpy(d_f32, h_f32.data(), TOTAL * 4, cudaMemcpyHostToDevice));
  {
    std::vector<__nv_bfloat16> hb(TOTAL);
    for (size_t i = 0; i < TOTAL; i++) hb[i] = __float2bfloat16(h_f32[i]);
    CK(cudaMemcpy(d_bf16, hb.data(), TOTAL * 2, cudaMemcpyHostToDevice));
  }
  {  // the copy ceiling: a d2d copy of 1 GiB (bytes read + written)
    float* c;
    CK(cudaMalloc(&c, TOTAL * 4));
    float ms = event_median_ms([&] { CK(cudaMemcpyAsync(c, d_f32, TOTAL * 4, cudaMemcpyDeviceToDevice)); }, 21, 3);
    printf("{\"case\":\"copy\",\"gbps\":%.1f,\"ms\":%.4f}\n", 2.0 * TOTAL * 4 / ms / 1e6, ms);
    CK(cudaFree(c));
  }
  const int lens[] = {16, 64, 128, 512, 1024, 4096, 32768};
  for (int L : lens) {
    sweep<float, false, 0>("f32", d_f32, L);
    sweep<float, false, 1>("f32", d_f32, L);
    sweep<__nv_bfloat16, false, 0>("bf16", d_bf16, L);
    sweep<__nv_bfloat16, false, 1>("bf16", d_bf16, L);
    sweep<float, true, 0>("f32", d_f32, L);
    sweep<float, true, 1>("f32", d_f32, L);
  }
  return 0;
}
