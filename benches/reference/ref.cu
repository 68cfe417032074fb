// Hand-written CUDA C reference kernels for the bench's cases, to learn what the GPU can
// reach with the plainest known form of each (not part of the library). Build and run on
// the GPU machine: nvcc -O3 -arch=sm_90 -o ref ref.cu && ./ref   (JSON lines to stdout)
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#include "timing.cuh"

static int sms;

template <class F> static float median_ms(F launch, int reps = 25) { return event_median_ms(launch, reps, 3); }
static bool perm_ok(const float* out, const float* in);
static const float* check_out = nullptr;
static const float* check_in = nullptr;
static void report(const char* name, double bytes, float ms) {
  const char* ok = "";
  if (check_out) { ok = perm_ok(check_out, check_in) ? ",\"check\":\"ok\"" : ",\"check\":\"WRONG\""; }
  printf("{\"case\":\"%s\",\"gbps\":%.1f,\"ms\":%.4f%s}\n", name, bytes / ms / 1e6, ms, ok);
  fflush(stdout);
}

// ---- contiguous 2-input ----
__global__ void add4(float4* c, const float4* a, const float4* b, size_t n4) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
    float4 x = a[i], y = b[i];
    c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}
__global__ void add4_cs(float4* c, const float4* a, const float4* b, size_t n4) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
    float4 x = __ldcs(a + i), y = __ldcs(b + i);
    __stcs(c + i, make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w));
  }
}
__global__ void add4_u2(float4* c, const float4* a, const float4* b, size_t n4) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  for (; i + stride < n4; i += 2 * stride) {
    float4 x = a[i], y = b[i], x2 = a[i + stride], y2 = b[i + stride];
    c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    c[i + stride] = make_float4(x2.x + y2.x, x2.y + y2.y, x2.z + y2.z, x2.w + y2.w);
  }
  if (i < n4) { float4 x = a[i], y = b[i]; c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w); }
}
// one chunk per thread, no loop (grid covers n4)
__global__ void add4_flat(float4* c, const float4* a, const float4* b, size_t n4) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n4) { float4 x = a[i], y = b[i]; c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w); }
}

// ---- transposed: c[i][j] = a[i][j] + b[j][i], n x n ----
template <int TR>
__global__ void tr_add(float* c, const float* a, const float* b, int n) {
  __shared__ float t[32][33];
  int x0 = blockIdx.x * 32, y0 = blockIdx.y * 32;  // x: column of c (unit stride), y: row of c
  float av[32 / TR];
  // b[j][i] with i = y0 + r, j = x0 + tx ... stage b rows: b[x0 + r][y0 + tx]
  float bv[32 / TR];
#pragma unroll
  for (int k = 0; k < 32 / TR; k++) {
    int r = threadIdx.y + k * TR;
    bv[k] = b[(size_t)(x0 + r) * n + y0 + threadIdx.x];
    av[k] = a[(size_t)(y0 + r) * n + x0 + threadIdx.x];
  }
#pragma unroll
  for (int k = 0; k < 32 / TR; k++) t[threadIdx.y + k * TR][threadIdx.x] = bv[k];
  __syncthreads();
#pragma unroll
  for (int k = 0; k < 32 / TR; k++) {
    int r = threadIdx.y + k * TR;
    c[(size_t)(y0 + r) * n + x0 + threadIdx.x] = av[k] + t[threadIdx.x][r];
  }
}

// ---- permuted copy: in (64,64,128,256) viewed as permute(3,1,0,2) -> out (256,64,64,128) ----
// out[p][q][s][u] = in[s][q][u][p]; out strides (524288, 8192, 128, 1), in strides (2097152, 32768, 256, 1)
// tile over (u: out unit axis, size 128) x (p: in unit axis, size 256); batch (q, s)
// ORDER 0: blocks walk u tiles, p tiles, q, s; 1: u tiles, p tiles, s, q; 2: u tiles, s, q, p tiles
template <int TR, int ORDER>
__global__ void perm_copy(float* out, const float* in) {
  __shared__ float t[32][33];
  int bx = blockIdx.x;          // tiles over u: 4, p: 8
  int tu = bx % 4, tp, q, s;
  if (ORDER == 0) { tp = (bx / 4) % 8; q = (bx / 32) % 64; s = bx / 2048; }
  else if (ORDER == 1) { tp = (bx / 4) % 8; s = (bx / 32) % 64; q = bx / 2048; }
  else { s = (bx / 4) % 64; q = (bx / 256) % 64; tp = bx / 16384; }
  int u0 = tu * 32, p0 = tp * 32;
  const float* ib = in + (size_t)s * 2097152 + (size_t)q * 32768;
  float* ob = out + (size_t)q * 8192 + (size_t)s * 128;
  float v[32 / TR];
#pragma unroll
  for (int k = 0; k < 32 / TR; k++) {
    int r = threadIdx.y + k * TR;  // u = u0 + r, p = p0 + tx (coalesced on in)
    v[k] = ib[(size_t)(u0 + r) * 256 + p0 + threadIdx.x];
  }
#pragma unroll
  for (int k = 0; k < 32 / TR; k++) t[threadIdx.y + k * TR][threadIdx.x] = v[k];
  __syncthreads();
#pragma unroll
  for (int k = 0; k < 32 / TR; k++) {
    int r = threadIdx.y + k * TR;  // p = p0 + r, u = u0 + tx (coalesced on out)
    ob[(size_t)(p0 + r) * 524288 + u0 + threadIdx.x] = t[threadIdx.x][r];
  }
}

// TU x 32 tile (u extent TU: 32, 64 or 128; p extent 32), 32x8 threads, blocks walk u tiles, p tiles, q, s
template <int TU>
__global__ void perm_copy_wide(float* out, const float* in) {
  __shared__ float t[TU][33];
  constexpr int NU = 128 / TU;
  int bx = blockIdx.x;
  int tu = bx % NU, tp = (bx / NU) % 8, q = (bx / (NU * 8)) % 64, s = bx / (NU * 8 * 64);
  int u0 = tu * TU, p0 = tp * 32;
  const float* ib = in + (size_t)s * 2097152 + (size_t)q * 32768;
  float* ob = out + (size_t)q * 8192 + (size_t)s * 128;
  float v[TU / 8];
#pragma unroll
  for (int k = 0; k < TU / 8; k++) v[k] = ib[(size_t)(u0 + threadIdx.y + k * 8) * 256 + p0 + threadIdx.x];
#pragma unroll
  for (int k = 0; k < TU / 8; k++) t[threadIdx.y + k * 8][threadIdx.x] = v[k];
  __syncthreads();
#pragma unroll
  for (int k = 0; k < 4; k++)
#pragma unroll
    for (int j = 0; j < TU / 32; j++) {
      int r = threadIdx.y + k * 8, cu = threadIdx.x + 32 * j;
      ob[(size_t)(p0 + r) * 524288 + u0 + cu] = t[cu][r];
    }
}

// General TU x TP tile (u: output unit axis, p: input unit axis), 32x8 threads.
// SFAST: batch order s fastest (s is adjacent to u in the output) instead of q.
template <int TU, int TP, bool SFAST>
__global__ void perm_tile(float* out, const float* in) {
  __shared__ float t[TU][TP + 1];
  constexpr int NU = 128 / TU, NP = 256 / TP;
  int bx = blockIdx.x;
  int tu = bx % NU, tp = (bx / NU) % NP, b = bx / (NU * NP);
  int q = SFAST ? b / 64 : b % 64, s = SFAST ? b % 64 : b / 64;
  int u0 = tu * TU, p0 = tp * TP;
  const float* ib = in + (size_t)s * 2097152 + (size_t)q * 32768;
  float* ob = out + (size_t)q * 8192 + (size_t)s * 128;
  float v[TU / 8][TP / 32];
#pragma unroll
  for (int k = 0; k < TU / 8; k++)
#pragma unroll
    for (int j = 0; j < TP / 32; j++)
      v[k][j] = ib[(size_t)(u0 + threadIdx.y + k * 8) * 256 + p0 + threadIdx.x + 32 * j];
#pragma unroll
  for (int k = 0; k < TU / 8; k++)
#pragma unroll
    for (int j = 0; j < TP / 32; j++) t[threadIdx.y + k * 8][threadIdx.x + 32 * j] = v[k][j];
  __syncthreads();
#pragma unroll
  for (int k = 0; k < TP / 8; k++)
#pragma unroll
    for (int j = 0; j < TU / 32; j++) {
      int r = threadIdx.y + k * 8, cu = threadIdx.x + 32 * j;
      ob[(size_t)(p0 + r) * 524288 + u0 + cu] = t[cu][r];
    }
}

// ---- slice with stride 2: c[i][j] = A[i][2j] + B[i][j]; A is rows x 2cols ----
__global__ void slice_scalar(float* c, const float* a, const float* b, int rows, int cols) {
  size_t n = (size_t)rows * cols;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    size_t r = i / cols, j = i % cols;
    c[i] = a[r * 2 * cols + 2 * j] + b[i];
  }
}
__global__ void slice_vec(float4* c, const float4* a, const float4* b, int rows, int cols) {
  size_t n4 = (size_t)rows * cols / 4;  // cols % 4 == 0
  int c4 = cols / 4;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
    size_t r = i / c4, j = i % c4;
    const float4* ar = a + r * 2 * c4 + 2 * j;
    float4 x0 = ar[0], x1 = ar[1], y = b[i];
    c[i] = make_float4(x0.x + y.x, x0.z + y.y, x1.x + y.z, x1.z + y.w);
  }
}
__global__ void slice_vec_cs(float4* c, const float4* a, const float4* b, int rows, int cols) {
  size_t n4 = (size_t)rows * cols / 4;
  int c4 = cols / 4;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
    size_t r = i / c4, j = i % c4;
    const float4* ar = a + r * 2 * c4 + 2 * j;
    float4 x0 = __ldcs(ar), x1 = __ldcs(ar + 1), y = __ldcs(b + i);
    __stcs(c + i, make_float4(x0.x + y.x, x0.z + y.y, x1.x + y.z, x1.z + y.w));
  }
}

// Spot-checks out[p][q][s][u] == in[s][q][u][p] at 4096 pseudo-random positions.
static bool perm_ok(const float* out, const float* in) {
  unsigned x = 12345;
  for (int i = 0; i < 4096; i++) {
    x = x * 1664525u + 1013904223u;
    size_t p = (x >> 4) % 256, q = (x >> 12) % 64, s = (x >> 18) % 64, u = (x >> 24) % 128;
    float o, v;
    CK(cudaMemcpy(&o, out + p * 524288 + q * 8192 + s * 128 + u, 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(&v, in + s * 2097152 + q * 32768 + u * 256 + p, 4, cudaMemcpyDeviceToHost));
    if (o != v) return false;
  }
  return true;
}

static void fill(float* d, size_t n) {
  std::vector<float> h(1 << 20);
  for (size_t i = 0; i < h.size(); i++) h[i] = (float)((i * 2654435761u) % 1000) / 100.f;
  for (size_t o = 0; o < n; o += h.size())
    CK(cudaMemcpy(d + o, h.data(), std::min(h.size(), n - o) * 4, cudaMemcpyHostToDevice));
}

int main() {
  cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0)); sms = p.multiProcessorCount;
  fprintf(stderr, "%s, %d SMs\n", p.name, sms);
  const size_t n = 1ull << 28;
  float *a, *b, *c, *a2;
  CK(cudaMalloc(&a, n * 4)); CK(cudaMalloc(&b, n * 4)); CK(cudaMalloc(&c, n * 4)); CK(cudaMalloc(&a2, 2 * n * 4));
  fill(a, n); fill(b, n); fill(a2, 2 * n);
  double B2 = 2.0 * n * 4, B3 = 3.0 * n * 4;
  report("copy_d2d", B2, median_ms([&] { CK(cudaMemcpyAsync(c, a, n * 4, cudaMemcpyDeviceToDevice)); }));
  size_t n4 = n / 4;
  for (int per_sm : {4, 8, 16, 32}) {
    int g = sms * per_sm; char nm[64];
    snprintf(nm, 64, "add4_grid%dxSM", per_sm); report(nm, B3, median_ms([&] { add4<<<g, 256>>>((float4*)c, (float4*)a, (float4*)b, n4); }));
    snprintf(nm, 64, "add4_cs_grid%dxSM", per_sm); report(nm, B3, median_ms([&] { add4_cs<<<g, 256>>>((float4*)c, (float4*)a, (float4*)b, n4); }));
    snprintf(nm, 64, "add4_u2_grid%dxSM", per_sm); report(nm, B3, median_ms([&] { add4_u2<<<g, 256>>>((float4*)c, (float4*)a, (float4*)b, n4); }));
  }
  report("add4_flat", B3, median_ms([&] { add4_flat<<<(unsigned)((n4 + 255) / 256), 256>>>((float4*)c, (float4*)a, (float4*)b, n4); }));
  int side = 16384;
  dim3 tg(side / 32, side / 32);
  report("transpose_add_32x8", B3, median_ms([&] { tr_add<8><<<tg, dim3(32, 8)>>>(c, a, b, side); }));
  report("transpose_add_32x4", B3, median_ms([&] { tr_add<4><<<tg, dim3(32, 4)>>>(c, a, b, side); }));
  report("transpose_add_32x16", B3, median_ms([&] { tr_add<16><<<tg, dim3(32, 16)>>>(c, a, b, side); }));
  size_t np = 1ull << 27;
  check_out = c; check_in = a;
  report("perm_copy_32x8_order0", 2.0 * np * 4, median_ms([&] { perm_copy<8, 0><<<32 * 64 * 64, dim3(32, 8)>>>(c, a); }));
  report("perm_copy_32x4_order0", 2.0 * np * 4, median_ms([&] { perm_copy<4, 0><<<32 * 64 * 64, dim3(32, 4)>>>(c, a); }));
  report("perm_copy_32x8_order1", 2.0 * np * 4, median_ms([&] { perm_copy<8, 1><<<32 * 64 * 64, dim3(32, 8)>>>(c, a); }));
  report("perm_copy_32x8_order2", 2.0 * np * 4, median_ms([&] { perm_copy<8, 2><<<32 * 64 * 64, dim3(32, 8)>>>(c, a); }));
  report("perm_copy_wide64", 2.0 * np * 4, median_ms([&] { perm_copy_wide<64><<<2 * 8 * 64 * 64, dim3(32, 8)>>>(c, a); }));
  report("perm_copy_wide128", 2.0 * np * 4, median_ms([&] { perm_copy_wide<128><<<8 * 64 * 64, dim3(32, 8)>>>(c, a); }));
  report("perm_tile_32x32", 2.0 * np * 4, median_ms([&] { perm_tile<32, 32, false><<<4 * 8 * 4096, dim3(32, 8)>>>(c, a); }));
  report("perm_tile_64x32", 2.0 * np * 4, median_ms([&] { perm_tile<64, 32, false><<<2 * 8 * 4096, dim3(32, 8)>>>(c, a); }));
  report("perm_tile_128x32", 2.0 * np * 4, median_ms([&] { perm_tile<128, 32, false><<<1 * 8 * 4096, dim3(32, 8)>>>(c, a); }));
  report("perm_tile_128x32_sfast", 2.0 * np * 4, median_ms([&] { perm_tile<128, 32, true><<<1 * 8 * 4096, dim3(32, 8)>>>(c, a); }));
  report("perm_tile_64x32_sfast", 2.0 * np * 4, median_ms([&] { perm_tile<64, 32, true><<<2 * 8 * 4096, dim3(32, 8)>>>(c, a); }));
  report("perm_tile_32x64", 2.0 * np * 4, median_ms([&] { perm_tile<32, 64, false><<<4 * 4 * 4096, dim3(32, 8)>>>(c, a); }));
  report("perm_tile_64x64", 2.0 * np * 4, median_ms([&] { perm_tile<64, 64, false><<<2 * 4 * 4096, dim3(32, 8)>>>(c, a); }));
  report("perm_tile_128x64", 2.0 * np * 4, median_ms([&] { perm_tile<128, 64, false><<<1 * 4 * 4096, dim3(32, 8)>>>(c, a); }));
  check_out = nullptr;
  report("slice_vec_flat", B3, median_ms([&] { slice_vec<<<(unsigned)(n / 4 / 256), 256>>>((float4*)c, (float4*)a2, (float4*)b, side, side); }));
  for (int per_sm : {8, 16, 32}) {
    int g = sms * per_sm; char nm[64];
    snprintf(nm, 64, "slice_scalar_grid%dxSM", per_sm); report(nm, B3, median_ms([&] { slice_scalar<<<g, 256>>>(c, a2, b, side, side); }));
    snprintf(nm, 64, "slice_vec_grid%dxSM", per_sm); report(nm, B3, median_ms([&] { slice_vec<<<g, 256>>>((float4*)c, (float4*)a2, (float4*)b, side, side); }));
    snprintf(nm, 64, "slice_vec_cs_grid%dxSM", per_sm); report(nm, B3, median_ms([&] { slice_vec_cs<<<g, 256>>>((float4*)c, (float4*)a2, (float4*)b, side, side); }));
  }
  return 0;
}
