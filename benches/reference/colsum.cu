// Hand-written CUDA C reference for `sum(dim=0)` of a 16384² f32 matrix (issue #16), to learn
// which column-kernel shape reaches the ceiling before the Rust kernel takes one (not part of
// the library). Every variant keeps the library's order (gpu-kernels/src/reduce.rs): 256
// slots of 4-row chunks, each slot folded in row order, then the halving tree over slots,
// so each could serve the CPU twin's bits. Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90 -o colsum colsum.cu && ./colsum      (JSON lines to stdout)
//
// Thread (x, y) of block (bx, p) holds columns `(bx * CX + x) * V ..+ V` and slots
// `p + P * (y + CY * m)` for `m < M` (`P * CY * M == 256`). The halving tree over the 256
// slots pairs slot `s` with `s + h` for h = 128 … 1: the high bits (m) fold in registers, the
// middle bits (y) in shared memory, the low bits (p) across blocks. With P > 1 the P
// partial trees go to scratch and either a second kernel (`fin`) or the last block of the
// column block (a counter per column block) folds them, in the same order.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#include "timing.cuh"

template <class F> static float median_ms(F launch, int reps = 41) { return event_median_ms(launch, reps, 5); }

constexpr int W = 4;       // rows per slot chunk (16 bytes of f32)
constexpr int SLOTS = 256;

template <int V> struct Vec;
template <> struct Vec<1> { typedef float T; };
template <> struct Vec<2> { typedef float2 T; };
template <> struct Vec<4> { typedef float4 T; };
__device__ __forceinline__ void ld(float (&d)[1], const float* p) { d[0] = __ldg(p); }
__device__ __forceinline__ void ld(float (&d)[2], const float* p) { float2 v = __ldg((const float2*)p); d[0] = v.x; d[1] = v.y; }
__device__ __forceinline__ void ld(float (&d)[4], const float* p) { float4 v = __ldg((const float4*)p); d[0] = v.x; d[1] = v.y; d[2] = v.z; d[3] = v.w; }

// FIN: 0 = write the result (P == 1), 1 = partials to scratch (a second kernel folds them),
// 2 = partials to scratch, the column block's last block folds them.
template <int CX, int CY, int M, int V, int P, int FIN>
__global__ void __launch_bounds__(CX * CY) cols(float* out, float* scratch, unsigned* count,
                                                const float* in, int rows, int ld_) {
  static_assert(P * CY * M == SLOTS, "slots");
  __shared__ float sm[CY][CX * V];
  __shared__ bool last;
  const int x = threadIdx.x % CX, y = threadIdx.x / CX, p = blockIdx.y;
  const int c0 = (blockIdx.x * CX + x) * V;
  float acc[M][V];
  const int step = SLOTS * W;
  const float* base = in + c0;
  for (int pass = 0; pass + step <= rows; pass += step) {
    float v[M][W][V];
#pragma unroll
    for (int m = 0; m < M; m++)
#pragma unroll
      for (int j = 0; j < W; j++) {
        const int r = pass + W * (p + P * (y + CY * m)) + j;
        ld(v[m][j], base + (size_t)r * ld_);
      }
#pragma unroll
    for (int m = 0; m < M; m++)
#pragma unroll
      for (int j = 0; j < W; j++)
#pragma unroll
        for (int k = 0; k < V; k++) acc[m][k] = (pass == 0 && j == 0) ? v[m][j][k] : acc[m][k] + v[m][j][k];
  }
  // (rows is a multiple of 1024 here: no partial pass.)
#pragma unroll
  for (int h = M / 2; h >= 1; h /= 2)
#pragma unroll
    for (int m = 0; m < h; m++)
#pragma unroll
      for (int k = 0; k < V; k++) acc[m][k] += acc[m + h][k];
#pragma unroll
  for (int k = 0; k < V; k++) sm[y][x * V + k] = acc[0][k];
  __syncthreads();
  for (int h = CY / 2; h >= 1; h /= 2) {
    if (y < h)
#pragma unroll
      for (int k = 0; k < V; k++) sm[y][x * V + k] += sm[y + h][x * V + k];
    __syncthreads();
  }
  const int cols = gridDim.x * CX * V;
  if (FIN == 0) {
    if (y == 0)
#pragma unroll
      for (int k = 0; k < V; k++) out[c0 + k] = sm[0][x * V + k];
    return;
  }
  if (y == 0)
#pragma unroll
    for (int k = 0; k < V; k++) scratch[(size_t)p * cols + c0 + k] = sm[0][x * V + k];
  if (FIN == 1) return;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&count[blockIdx.x], 1) == P - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  // The halving tree over the P partials, one column per thread.
  for (int c = threadIdx.x; c < CX * V; c += CX * CY) {
    const int col = blockIdx.x * CX * V + c;
    float t[P];
#pragma unroll
    for (int q = 0; q < P; q++) t[q] = __ldcg(&scratch[(size_t)q * cols + col]);
#pragma unroll
    for (int h = P / 2; h >= 1; h /= 2)
#pragma unroll
      for (int q = 0; q < h; q++) t[q] += t[q + h];
    out[col] = t[0];
  }
  if (threadIdx.x == 0) count[blockIdx.x] = 0;  // ready for the next launch
}

template <int P>
__global__ void fin(float* out, const float* scratch, int cols) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float t[P];
#pragma unroll
  for (int q = 0; q < P; q++) t[q] = scratch[(size_t)q * cols + c];
#pragma unroll
  for (int h = P / 2; h >= 1; h /= 2)
#pragma unroll
    for (int q = 0; q < h; q++) t[q] += t[q + h];
  out[c] = t[0];
}

// The library's order on the host, for one column (checks every variant bit for bit).
static float host_col(const std::vector<float>& a, int rows, int cols, int c) {
  float slot[SLOTS];
  for (int s = 0; s < SLOTS; s++) slot[s] = 0;
  for (int r = 0; r < rows; r++) {
    int s = (r / W) % SLOTS;
    float v = a[(size_t)r * cols + c];
    slot[s] = (r < SLOTS * W && r % W == 0) ? v : slot[s] + v;
  }
  for (int h = SLOTS / 2; h >= 1; h /= 2)
    for (int s = 0; s < h; s++) slot[s] += slot[s + h];
  return slot[0];
}

static int rows_ = 16384, cols_ = 16384;
static float *d_in, *d_out, *d_scr;
static unsigned* d_cnt;
static std::vector<float> h_in;

template <int CX, int CY, int M, int V, int P, int FIN>
static void run(const char* name) {
  const int colblocks = cols_ / (CX * V);
  dim3 grid(colblocks, P);
  auto go = [&] {
    cols<CX, CY, M, V, P, FIN><<<grid, CX * CY>>>(d_out, d_scr, d_cnt, d_in, rows_, cols_);
    if (FIN == 1) fin<P><<<cols_ / 256, 256>>>(d_out, d_scr, cols_);
  };
  CK(cudaMemset(d_out, 0xff, cols_ * 4));
  go();
  CK(cudaDeviceSynchronize());
  std::vector<float> h(cols_);
  CK(cudaMemcpy(h.data(), d_out, cols_ * 4, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int c = 0; c < cols_; c += 97) {
    float r = host_col(h_in, rows_, cols_, c);
    if (memcmp(&r, &h[c], 4) != 0) bad++;
  }
  float ms = median_ms(go);
  cudaFuncAttributes attr;
  CK(cudaFuncGetAttributes(&attr, cols<CX, CY, M, V, P, FIN>));
  int occ = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, cols<CX, CY, M, V, P, FIN>, CX * CY, 0));
  printf("{\"case\":\"%s\",\"gbps\":%.1f,\"ms\":%.4f,\"blocks\":%d,\"threads\":%d,\"regs\":%d,\"blocks_per_sm\":%d,\"bitwise_bad\":%d}\n",
         name, (double)rows_ * cols_ * 4 / ms / 1e6, ms, colblocks * P, CX * CY, attr.numRegs, occ, bad);
  fflush(stdout);
}

__global__ void add(float* c, const float* a, const float* b, size_t n) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n / 4) {
    float4 x = ((const float4*)a)[i], y = ((const float4*)b)[i];
    ((float4*)c)[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}

int main(int argc, char** argv) {
  const size_t n = (size_t)rows_ * cols_;
  h_in.resize(n);
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    h_in[i] = (float)((s >> 40) & 0xffffff) / 16777216.0f - 0.5f;
  }
  CK(cudaMalloc(&d_in, n * 4));
  CK(cudaMalloc(&d_out, cols_ * 4));
  CK(cudaMalloc(&d_scr, (size_t)cols_ * 64 * 4));
  CK(cudaMalloc(&d_cnt, 65536 * 4));
  CK(cudaMemset(d_cnt, 0, 65536 * 4));
  CK(cudaMemcpy(d_in, h_in.data(), n * 4, cudaMemcpyHostToDevice));
  {  // ceiling: f32 add 2^28 and a d2d copy of 1 GiB, fresh buffers
    size_t m = 1ull << 28;
    float *a, *b, *c;
    CK(cudaMalloc(&a, m * 4)); CK(cudaMalloc(&b, m * 4)); CK(cudaMalloc(&c, m * 4));
    CK(cudaMemset(a, 0, m * 4)); CK(cudaMemset(b, 0, m * 4));
    float ms = median_ms([&] { add<<<(unsigned)(m / 4 / 256), 256>>>(c, a, b, m); });
    printf("{\"case\":\"add_f32\",\"gbps\":%.1f,\"ms\":%.4f}\n", 3.0 * m * 4 / ms / 1e6, ms);
    ms = median_ms([&] { CK(cudaMemcpyAsync(c, a, m * 4, cudaMemcpyDeviceToDevice)); });
    printf("{\"case\":\"d2d_copy\",\"gbps\":%.1f,\"ms\":%.4f}\n", 2.0 * m * 4 / ms / 1e6, ms);
    CK(cudaFree(a)); CK(cudaFree(b)); CK(cudaFree(c));
  }
  for (int rep = 0; rep < 2; rep++) {
    // The library's shape today: 32 x 16 threads, one column and 16 slots each.
    run<32, 16, 16, 1, 1, 0>("A_32x16_v1_p1");
    // Slots split over P blocks (more, smaller blocks), second kernel or last-block fold.
    run<32, 8, 16, 1, 2, 2>("B_32x8_v1_p2_last");
    run<32, 4, 16, 1, 4, 2>("C_32x4_v1_p4_last");
    run<32, 4, 16, 1, 4, 1>("C_32x4_v1_p4_fin");
    run<32, 2, 16, 1, 8, 2>("D_32x2_v1_p8_last");
    run<32, 8, 8, 1, 4, 2>("D2_32x8_m8_p4_last");
    // 16-byte loads along the kept axis.
    run<8, 64, 4, 4, 1, 0>("E_8x64_v4_p1");
    run<8, 16, 4, 4, 4, 2>("F_8x16_v4_p4_last");
    run<32, 4, 4, 4, 16, 2>("G_32x4_v4_p16_last");
    run<16, 8, 4, 4, 8, 2>("H_16x8_v4_p8_last");
    run<16, 16, 4, 4, 4, 2>("H2_16x16_v4_p4_last");
    run<32, 8, 4, 4, 8, 2>("G2_32x8_v4_p8_last");
    run<16, 4, 8, 2, 8, 2>("I_16x4_v2_m8_p8_last");
    run<32, 4, 8, 2, 8, 2>("J_32x4_v2_m8_p8_last");
  }
  return 0;
}
