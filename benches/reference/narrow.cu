// Hand-written CUDA C reference kernels for the narrow-type cases of issue #13 (bf16, u8),
// to learn which kernel shapes reach the ceiling before the Rust kernels take one (not part
// of the library). Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90 -o narrow narrow.cu && ./narrow      (JSON lines to stdout)
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#include "timing.cuh"

typedef uint16_t bf;  // bfloat16 bits

template <class F> static float median_ms(F launch, int reps = 25) { return event_median_ms(launch, reps, 3); }
static const char* check = "";
static void report(const char* name, double bytes, float ms) {
  printf("{\"case\":\"%s\",\"gbps\":%.1f,\"ms\":%.4f%s}\n", name, bytes / ms / 1e6, ms, check);
  fflush(stdout);
}

__device__ __forceinline__ float up(bf x) { return __uint_as_float((uint32_t)x << 16); }
__device__ __forceinline__ bf down(float f) {  // round to nearest even, NaN canonical
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffff) > 0x7f800000) return 0x7fff;
  return (bf)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
__device__ __forceinline__ uint32_t add2(uint32_t a, uint32_t b) {
  return (uint32_t)down(up(a & 0xffff) + up(b & 0xffff)) | ((uint32_t)down(up(a >> 16) + up(b >> 16)) << 16);
}
__device__ __forceinline__ uint32_t swar_add(uint32_t a, uint32_t b) {
  return ((a & 0x7f7f7f7f) + (b & 0x7f7f7f7f)) ^ ((a ^ b) & 0x80808080);
}
__device__ __forceinline__ uint4 add16(uint4 x, uint4 y) {
  return make_uint4(swar_add(x.x, y.x), swar_add(x.y, y.y), swar_add(x.z, y.z), swar_add(x.w, y.w));
}

// ---- u8 contiguous add, 16 bytes per chunk ----
// K chunks per thread: chunk t + j * blockDim of the block's K * blockDim chunks (each
// instruction coalesced), all loads before any store.
template <int K>
__global__ void u8_add(uint4* c, const uint4* a, const uint4* b, size_t chunks) {
  size_t base = (size_t)blockIdx.x * blockDim.x * K + threadIdx.x;
  uint4 x[K], y[K];
#pragma unroll
  for (int j = 0; j < K; j++) { size_t i = base + j * blockDim.x; if (i < chunks) { x[j] = a[i]; y[j] = b[i]; } }
#pragma unroll
  for (int j = 0; j < K; j++) { size_t i = base + j * blockDim.x; if (i < chunks) c[i] = add16(x[j], y[j]); }
}
// K adjacent chunks per thread (32 bytes for K = 2).
template <int K>
__global__ void u8_add_adj(uint4* c, const uint4* a, const uint4* b, size_t chunks) {
  size_t base = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * K;
  uint4 x[K], y[K];
#pragma unroll
  for (int j = 0; j < K; j++) if (base + j < chunks) { x[j] = a[base + j]; y[j] = b[base + j]; }
#pragma unroll
  for (int j = 0; j < K; j++) if (base + j < chunks) c[base + j] = add16(x[j], y[j]);
}
// Grid-stride, fixed grid.
__global__ void u8_add_gs(uint4* c, const uint4* a, const uint4* b, size_t chunks) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < chunks; i += (size_t)gridDim.x * blockDim.x)
    c[i] = add16(a[i], b[i]);
}
__global__ void f32_add(float4* c, const float4* a, const float4* b, size_t chunks) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < chunks) { float4 x = a[i], y = b[i]; c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w); }
}

// ---- u8 / bf16 broadcast row: c[r][col] = a[r][col] + b[col] ----
// One 16-byte chunk per thread, row from a division (as the library's 2-D vectorised form).
template <int K>
__global__ void u8_row_div(uint4* c, const uint4* a, const uint4* b, unsigned chunks, unsigned per_row) {
  unsigned base = blockIdx.x * blockDim.x * K + threadIdx.x;
  uint4 x[K], y[K];
#pragma unroll
  for (int j = 0; j < K; j++) { unsigned i = base + j * blockDim.x; if (i < chunks) { x[j] = a[i]; y[j] = b[i % per_row]; } }
#pragma unroll
  for (int j = 0; j < K; j++) { unsigned i = base + j * blockDim.x; if (i < chunks) c[i] = add16(x[j], y[j]); }
}
// 2-D grid: blockIdx.y is the row, no division.
template <int K>
__global__ void u8_row_2d(uint4* c, const uint4* a, const uint4* b, unsigned per_row) {
  unsigned col = blockIdx.x * blockDim.x * K + threadIdx.x;
  size_t row = blockIdx.y;
  uint4 x[K], y[K];
#pragma unroll
  for (int j = 0; j < K; j++) { unsigned cc = col + j * blockDim.x; if (cc < per_row) { x[j] = a[row * per_row + cc]; y[j] = b[cc]; } }
#pragma unroll
  for (int j = 0; j < K; j++) { unsigned cc = col + j * blockDim.x; if (cc < per_row) c[row * per_row + cc] = add16(x[j], y[j]); }
}
__device__ __forceinline__ uint4 badd8(uint4 x, uint4 y) {
  return make_uint4(add2(x.x, y.x), add2(x.y, y.y), add2(x.z, y.z), add2(x.w, y.w));
}
template <int K>
__global__ void bf_row_div(uint4* c, const uint4* a, const uint4* b, unsigned chunks, unsigned per_row) {
  unsigned base = blockIdx.x * blockDim.x * K + threadIdx.x;
  uint4 x[K], y[K];
#pragma unroll
  for (int j = 0; j < K; j++) { unsigned i = base + j * blockDim.x; if (i < chunks) { x[j] = a[i]; y[j] = b[i % per_row]; } }
#pragma unroll
  for (int j = 0; j < K; j++) { unsigned i = base + j * blockDim.x; if (i < chunks) c[i] = badd8(x[j], y[j]); }
}
template <int K>
__global__ void bf_row_2d(uint4* c, const uint4* a, const uint4* b, unsigned per_row) {
  unsigned col = blockIdx.x * blockDim.x * K + threadIdx.x;
  size_t row = blockIdx.y;
  uint4 x[K], y[K];
#pragma unroll
  for (int j = 0; j < K; j++) { unsigned cc = col + j * blockDim.x; if (cc < per_row) { x[j] = a[row * per_row + cc]; y[j] = b[cc]; } }
#pragma unroll
  for (int j = 0; j < K; j++) { unsigned cc = col + j * blockDim.x; if (cc < per_row) c[row * per_row + cc] = badd8(x[j], y[j]); }
}
// Broadcast row, b read through the read-only path.
template <int K>
__global__ void bf_row_div_ldg(uint4* c, const uint4* a, const uint4* __restrict__ b, unsigned chunks, unsigned per_row) {
  unsigned base = blockIdx.x * blockDim.x * K + threadIdx.x;
  uint4 x[K], y[K];
#pragma unroll
  for (int j = 0; j < K; j++) { unsigned i = base + j * blockDim.x; if (i < chunks) { x[j] = a[i]; y[j] = __ldg(b + i % per_row); } }
#pragma unroll
  for (int j = 0; j < K; j++) { unsigned i = base + j * blockDim.x; if (i < chunks) c[i] = badd8(x[j], y[j]); }
}

// ---- bf16 -> f32 cast ----
// E elements per chunk (E = 8: one 16-byte load, two 16-byte stores; E = 4: 8-byte load),
// K chunks per thread strided by blockDim.
template <int K>
__global__ void cast8(float4* out, const uint4* in, size_t chunks) {
  size_t base = (size_t)blockIdx.x * blockDim.x * K + threadIdx.x;
  uint4 v[K];
#pragma unroll
  for (int j = 0; j < K; j++) { size_t i = base + j * blockDim.x; if (i < chunks) v[j] = in[i]; }
#pragma unroll
  for (int j = 0; j < K; j++) {
    size_t i = base + j * blockDim.x;
    if (i < chunks) {
      uint4 x = v[j];
      out[2 * i] = make_float4(__uint_as_float(x.x << 16), __uint_as_float(x.x & 0xffff0000u), __uint_as_float(x.y << 16), __uint_as_float(x.y & 0xffff0000u));
      out[2 * i + 1] = make_float4(__uint_as_float(x.z << 16), __uint_as_float(x.z & 0xffff0000u), __uint_as_float(x.w << 16), __uint_as_float(x.w & 0xffff0000u));
    }
  }
}
__global__ void cast4_cs(float4* out, const uint2* in, size_t chunks) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < chunks) {
    uint2 x = __ldcs(in + i);
    __stcs(out + i, make_float4(__uint_as_float(x.x << 16), __uint_as_float(x.x & 0xffff0000u), __uint_as_float(x.y << 16), __uint_as_float(x.y & 0xffff0000u)));
  }
}
__global__ void cast2(float2* out, const uint32_t* in, size_t chunks) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < chunks) { uint32_t x = in[i]; out[i] = make_float2(__uint_as_float(x << 16), __uint_as_float(x & 0xffff0000u)); }
}
__global__ void copy16(uint4* out, const uint4* in, size_t chunks) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < chunks) out[i] = in[i];
}
template <int K>
__global__ void cast4(float4* out, const uint2* in, size_t chunks) {
  size_t base = (size_t)blockIdx.x * blockDim.x * K + threadIdx.x;
  uint2 v[K];
#pragma unroll
  for (int j = 0; j < K; j++) { size_t i = base + j * blockDim.x; if (i < chunks) v[j] = in[i]; }
#pragma unroll
  for (int j = 0; j < K; j++) {
    size_t i = base + j * blockDim.x;
    if (i < chunks) {
      uint2 x = v[j];
      out[i] = make_float4(__uint_as_float(x.x << 16), __uint_as_float(x.x & 0xffff0000u), __uint_as_float(x.y << 16), __uint_as_float(x.y & 0xffff0000u));
    }
  }
}

// ---- bf16 transposed: c[i][j] = a[i][j] + b[j][i], n x n ----
// Element accesses (the library's current tiled form): T x T tile, 32 x R threads, stage
// padded by PAD elements per row.
template <int T, int R, int PAD>
__global__ void tr_elem(bf* c, const bf* a, const bf* b, int n) {
  __shared__ bf t[T][T + PAD];
  int x0 = blockIdx.x * T, y0 = blockIdx.y * T;
  bf av[T * T / 32 / R], bv[T * T / 32 / R];
#pragma unroll
  for (int k = 0; k < T * T / 32 / R; k++) {
    int r = threadIdx.y + (k / (T / 32)) * R, cc = threadIdx.x + 32 * (k % (T / 32));
    bv[k] = b[(size_t)(x0 + r) * n + y0 + cc];
    av[k] = a[(size_t)(y0 + r) * n + x0 + cc];
  }
#pragma unroll
  for (int k = 0; k < T * T / 32 / R; k++) {
    int r = threadIdx.y + (k / (T / 32)) * R, cc = threadIdx.x + 32 * (k % (T / 32));
    t[r][cc] = bv[k];
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < T * T / 32 / R; k++) {
    int r = threadIdx.y + (k / (T / 32)) * R, cc = threadIdx.x + 32 * (k % (T / 32));
    c[(size_t)(y0 + r) * n + x0 + cc] = down(up(av[k]) + up(t[cc][r]));
  }
}
// Paired accesses: 64 x 64 tile, 32 x R threads; every global access is a 4-byte pair
// along the operand's unit-stride axis. The staged input's 2 x 2 blocks are transposed in
// registers (prmt) and stored as pairs along the output's axis: stage[y][x / 2] words,
// 33 words per row, column XOR-swizzled by y / 32 so the phase-1 stores (rows 2tx, 2tx + 1)
// do not conflict.
template <int R>
__global__ void tr_pair(uint32_t* c, const uint32_t* a, const uint32_t* b, int n) {
  __shared__ uint32_t st[64][33];
  const int V = 64 / R;  // words per thread in phase 2; phase 1 loads V / 2 pairs of rows
  int x0 = blockIdx.x * 64, y0 = blockIdx.y * 64, tx = threadIdx.x, ty = threadIdx.y;
  int n2 = n / 2;
  uint32_t w0[V / 2], w1[V / 2], av[V];
  // Phase 1: b[x][y], y = y0 + 2tx (a pair), x = x0 + 2m, 2m + 1 with m = ty + R j.
#pragma unroll
  for (int j = 0; j < V / 2; j++) {
    int m = ty + R * j;
    w0[j] = b[(size_t)(x0 + 2 * m) * n2 + y0 / 2 + tx];
    w1[j] = b[(size_t)(x0 + 2 * m + 1) * n2 + y0 / 2 + tx];
  }
  // a at phase-2 positions: row y = y0 + ty + R k, x pair tx.
#pragma unroll
  for (int k = 0; k < V; k++) av[k] = a[(size_t)(y0 + ty + R * k) * n2 + x0 / 2 + tx];
#pragma unroll
  for (int j = 0; j < V / 2; j++) {
    int m = ty + R * j, y = 2 * tx;
    st[y][m ^ (y >> 5)] = __byte_perm(w0[j], w1[j], 0x5410);
    st[y + 1][m ^ ((y + 1) >> 5)] = __byte_perm(w0[j], w1[j], 0x7632);
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < V; k++) {
    int y = ty + R * k;
    c[(size_t)(y0 + y) * n2 + x0 / 2 + tx] = add2(av[k], st[y][tx ^ (y >> 5)]);
  }
}
__global__ void tr_naive(bf* c, const bf* a, const bf* b, int n) {
  size_t i = blockIdx.y, j = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  c[i * n + j] = down(up(a[i * n + j]) + up(b[j * n + i]));
}

// ---- bf16 permuted copy: in (64,64,128,256) -> permute(3,1,0,2) -> out (256,64,64,128) ----
// out[p][q][s][u] = in[s][q][u][p]; tiles over u (out unit axis, 128) x p (in unit axis,
// 256), batch (q, s). Blocks walk u tiles, p tiles, q, s.
template <int PAD>
__global__ void perm_elem(bf* out, const bf* in) {  // 64 x 64 tile, 32 x 8 threads
  __shared__ bf t[64][64 + PAD];
  int bx = blockIdx.x, tu = bx % 2, tp = (bx / 2) % 4, q = (bx / 8) % 64, s = bx / 512;
  int u0 = tu * 64, p0 = tp * 64, tx = threadIdx.x, ty = threadIdx.y;
  const bf* src = in + (size_t)s * 2097152 + q * 32768;
  bf* dst = out + (size_t)q * 8192 + s * 128;
  bf v[16];
#pragma unroll
  for (int k = 0; k < 16; k++) { int r = ty + 8 * (k / 2), cc = tx + 32 * (k % 2); v[k] = src[(u0 + r) * 256 + p0 + cc]; }
#pragma unroll
  for (int k = 0; k < 16; k++) { int r = ty + 8 * (k / 2), cc = tx + 32 * (k % 2); t[r][cc] = v[k]; }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < 16; k++) { int r = ty + 8 * (k / 2), cc = tx + 32 * (k % 2); dst[(size_t)(p0 + r) * 524288 + u0 + cc] = t[cc][r]; }
}
// Paired: 64 x 64 tile, 32 x 8 threads, pairs as in tr_pair.
__global__ void perm_pair(uint32_t* out, const uint32_t* in) {
  __shared__ uint32_t st[64][33];
  int bx = blockIdx.x, tu = bx % 2, tp = (bx / 2) % 4, q = (bx / 8) % 64, s = bx / 512;
  int u0 = tu * 64, p0 = tp * 64, tx = threadIdx.x, ty = threadIdx.y;
  const uint32_t* src = in + ((size_t)s * 2097152 + q * 32768) / 2;
  uint32_t* dst = out + ((size_t)q * 8192 + s * 128) / 2;
  uint32_t w0[4], w1[4];
#pragma unroll
  for (int j = 0; j < 4; j++) {
    int m = ty + 8 * j;  // u pair
    w0[j] = src[(u0 + 2 * m) * 128 + p0 / 2 + tx];
    w1[j] = src[(u0 + 2 * m + 1) * 128 + p0 / 2 + tx];
  }
#pragma unroll
  for (int j = 0; j < 4; j++) {
    int m = ty + 8 * j, y = 2 * tx;
    st[y][m ^ (y >> 5)] = __byte_perm(w0[j], w1[j], 0x5410);
    st[y + 1][m ^ ((y + 1) >> 5)] = __byte_perm(w0[j], w1[j], 0x7632);
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < 8; k++) {
    int y = ty + 8 * k;  // p
    dst[((size_t)(p0 + y) * 524288 + u0) / 2 + tx] = st[y][tx ^ (y >> 5)];
  }
}
__global__ void perm_naive(bf* out, const bf* in) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;  // output linear index
  size_t u = i % 128, s = (i / 128) % 64, q = (i / 8192) % 64, p = i / 524288;
  out[i] = in[s * 2097152 + q * 32768 + u * 256 + p];
}

__global__ void count_diff(const uint16_t* x, const uint16_t* y, size_t n, unsigned long long* d) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    if (x[i] != y[i]) atomicAdd(d, 1ull);
}
static unsigned long long* dcount;
static const char* compare16(const void* x, const void* y, size_t n) {
  CK(cudaMemset(dcount, 0, 8));
  count_diff<<<1024, 256>>>((const uint16_t*)x, (const uint16_t*)y, n, dcount);
  unsigned long long h; CK(cudaMemcpy(&h, dcount, 8, cudaMemcpyDeviceToHost));
  return h == 0 ? ",\"check\":\"ok\"" : ",\"check\":\"WRONG\"";
}

__global__ void fill_rand(uint32_t* d, size_t words, uint32_t seed, uint32_t mask, uint32_t set) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t x = (uint32_t)i * 2654435761u ^ seed; x ^= x >> 13; x *= 0x5bd1e995; x ^= x >> 15;
    x = x * 0x9e3779b9u + seed; x ^= x >> 16;
    d[i] = x & mask | set;
  }
}

int main() {
  cudaDeviceProp pr; CK(cudaGetDeviceProperties(&pr, 0));
  fprintf(stderr, "%s, %d SMs\n", pr.name, pr.multiProcessorCount);
  const size_t bytes = 1ull << 30;  // 1 GiB per buffer
  char *a, *b, *c, *r;
  CK(cudaMalloc(&a, bytes)); CK(cudaMalloc(&b, bytes)); CK(cudaMalloc(&c, bytes)); CK(cudaMalloc(&r, bytes));
  CK(cudaMalloc(&dcount, 8));
  // Every bit random first (the u8 cases); bf16 pairs in [1, 2) for the bf16 cases.
  fill_rand<<<1024, 256>>>((uint32_t*)a, bytes / 4, 1, ~0u, 0); fill_rand<<<1024, 256>>>((uint32_t*)b, bytes / 4, 2, ~0u, 0);
  CK(cudaDeviceSynchronize());
  char nm[96];
  report("copy_d2d_1GiB", 2.0 * bytes, median_ms([&] { CK(cudaMemcpyAsync(c, a, bytes, cudaMemcpyDeviceToDevice)); }));
  // u8 contiguous add, 2^28 bytes per operand (the bench case), and f32 add of the same bytes.
  {
    size_t n = 1ull << 28, ch = n / 16; double B = 3.0 * n;
    report("f32_add_2^26_flat256", B, median_ms([&] { f32_add<<<(unsigned)(ch / 256), 256>>>((float4*)c, (float4*)a, (float4*)b, ch); }));
    report("f32_add_2^28_flat256", 4 * B, median_ms([&] { f32_add<<<(unsigned)(4 * ch / 256), 256>>>((float4*)c, (float4*)a, (float4*)b, 4 * ch); }));
    for (int blk : {128, 256, 512}) {
      snprintf(nm, 96, "u8_add_k1_b%d", blk); report(nm, B, median_ms([&] { u8_add<1><<<(unsigned)(ch / blk), blk>>>((uint4*)c, (uint4*)a, (uint4*)b, ch); }));
      snprintf(nm, 96, "u8_add_k2_b%d", blk); report(nm, B, median_ms([&] { u8_add<2><<<(unsigned)(ch / blk / 2), blk>>>((uint4*)c, (uint4*)a, (uint4*)b, ch); }));
      snprintf(nm, 96, "u8_add_k4_b%d", blk); report(nm, B, median_ms([&] { u8_add<4><<<(unsigned)(ch / blk / 4), blk>>>((uint4*)c, (uint4*)a, (uint4*)b, ch); }));
    }
    report("u8_add_adj2_b256", B, median_ms([&] { u8_add_adj<2><<<(unsigned)(ch / 512), 256>>>((uint4*)c, (uint4*)a, (uint4*)b, ch); }));
    for (int per_sm : {8, 16, 32}) {
      snprintf(nm, 96, "u8_add_gs_%dxSM", per_sm);
      report(nm, B, median_ms([&] { u8_add_gs<<<pr.multiProcessorCount * per_sm, 256>>>((uint4*)c, (uint4*)a, (uint4*)b, ch); }));
    }
    // Same kernels on 2^30 bytes per operand: is it the size?
    size_t ch2 = bytes / 16;
    report("u8_add_k1_b256_2^30", 3.0 * bytes, median_ms([&] { u8_add<1><<<(unsigned)(ch2 / 256), 256>>>((uint4*)c, (uint4*)a, (uint4*)b, ch2); }));
    report("u8_add_k2_b256_2^30", 3.0 * bytes, median_ms([&] { u8_add<2><<<(unsigned)(ch2 / 512), 256>>>((uint4*)c, (uint4*)a, (uint4*)b, ch2); }));
    report("f32_add_2^26_flat256_randbits", B, median_ms([&] { f32_add<<<(unsigned)(ch / 256), 256>>>((float4*)c, (float4*)a, (float4*)b, ch); }));
    fill_rand<<<1024, 256>>>((uint32_t*)a, bytes / 4, 1, 0x3f3f3f3fu, 0); fill_rand<<<1024, 256>>>((uint32_t*)b, bytes / 4, 2, 0x3f3f3f3fu, 0);
    CK(cudaDeviceSynchronize());
    report("u8_add_k1_b256_masked", B, median_ms([&] { u8_add<1><<<(unsigned)(ch / 256), 256>>>((uint4*)c, (uint4*)a, (uint4*)b, ch); }));
    fill_rand<<<1024, 256>>>((uint32_t*)a, bytes / 4, 1, 0x007fffffu, 0x3f800000u); fill_rand<<<1024, 256>>>((uint32_t*)b, bytes / 4, 2, 0x007fffffu, 0x3f800000u);
    CK(cudaDeviceSynchronize());
    report("u8_add_k1_b256_f32data", B, median_ms([&] { u8_add<1><<<(unsigned)(ch / 256), 256>>>((uint4*)c, (uint4*)a, (uint4*)b, ch); }));
    report("f32_add_2^26_flat256_f32data", B, median_ms([&] { f32_add<<<(unsigned)(ch / 256), 256>>>((float4*)c, (float4*)a, (float4*)b, ch); }));
    fill_rand<<<1024, 256>>>((uint32_t*)a, bytes / 4, 1, ~0u, 0); fill_rand<<<1024, 256>>>((uint32_t*)b, bytes / 4, 2, ~0u, 0);
    CK(cudaDeviceSynchronize());
  }
  // Broadcast rows: u8 [16384, 16384] + [1, 16384] (bytes: a and c, b once), bf16 same shape.
  {
    unsigned rows = 16384, cols = 16384;
    unsigned per = cols / 16, ch = rows * per; double B = 2.0 * rows * cols + cols;
    for (int K : {1, 2}) {
      snprintf(nm, 96, "u8_row_div_k%d", K);
      report(nm, B, median_ms([&] { if (K == 1) u8_row_div<1><<<ch / 256, 256>>>((uint4*)c, (uint4*)a, (uint4*)b, ch, per); else u8_row_div<2><<<ch / 512, 256>>>((uint4*)c, (uint4*)a, (uint4*)b, ch, per); }));
      snprintf(nm, 96, "u8_row_2d_k%d", K);
      report(nm, B, median_ms([&] { if (K == 1) u8_row_2d<1><<<dim3(per / 256, rows), 256>>>((uint4*)c, (uint4*)a, (uint4*)b, per); else u8_row_2d<2><<<dim3(per / 512, rows), 256>>>((uint4*)c, (uint4*)a, (uint4*)b, per); }));
    }
    fill_rand<<<1024, 256>>>((uint32_t*)a, bytes / 4, 1, 0x3fff3fffu, 0x3c003c00u); fill_rand<<<1024, 256>>>((uint32_t*)b, bytes / 4, 2, 0x3fff3fffu, 0x3c003c00u);
    CK(cudaDeviceSynchronize());
    per = cols / 8; ch = rows * per; B = 2.0 * 2 * rows * cols + 2 * cols;
    for (int K : {1, 2}) {
      snprintf(nm, 96, "bf_row_div_k%d", K);
      report(nm, B, median_ms([&] { if (K == 1) bf_row_div<1><<<ch / 256, 256>>>((uint4*)c, (uint4*)a, (uint4*)b, ch, per); else bf_row_div<2><<<ch / 512, 256>>>((uint4*)c, (uint4*)a, (uint4*)b, ch, per); }));
      snprintf(nm, 96, "bf_row_div_ldg_k%d", K);
      report(nm, B, median_ms([&] { if (K == 1) bf_row_div_ldg<1><<<ch / 256, 256>>>((uint4*)c, (uint4*)a, (uint4*)b, ch, per); else bf_row_div_ldg<2><<<ch / 512, 256>>>((uint4*)c, (uint4*)a, (uint4*)b, ch, per); }));
      snprintf(nm, 96, "bf_row_2d_k%d", K);
      report(nm, B, median_ms([&] { if (K == 1) bf_row_2d<1><<<dim3(per / 256, rows), 256>>>((uint4*)c, (uint4*)a, (uint4*)b, per); else bf_row_2d<2><<<dim3(per / 512, rows), 256>>>((uint4*)c, (uint4*)a, (uint4*)b, per); }));
    }
  }
  // bf16 -> f32 cast, 2^28 elements (512 MiB in, 1 GiB out).
  {
    size_t n = 1ull << 28; double B = 6.0 * n;
    for (int K : {1, 2}) {
      snprintf(nm, 96, "cast_bf_f32_e8_k%d", K);
      report(nm, B, median_ms([&] { if (K == 1) cast8<1><<<(unsigned)(n / 8 / 256), 256>>>((float4*)c, (uint4*)a, n / 8); else cast8<2><<<(unsigned)(n / 8 / 512), 256>>>((float4*)c, (uint4*)a, n / 8); }));
      snprintf(nm, 96, "cast_bf_f32_e4_k%d", K);
      report(nm, B, median_ms([&] { if (K == 1) cast4<1><<<(unsigned)(n / 4 / 256), 256>>>((float4*)c, (uint2*)a, n / 4); else cast4<2><<<(unsigned)(n / 4 / 512), 256>>>((float4*)c, (uint2*)a, n / 4); }));
    }
    report("cast_bf_f32_e4_k4", B, median_ms([&] { cast4<4><<<(unsigned)(n / 4 / 1024), 256>>>((float4*)c, (uint2*)a, n / 4); }));
    report("cast_bf_f32_e4_cs", B, median_ms([&] { cast4_cs<<<(unsigned)(n / 4 / 256), 256>>>((float4*)c, (uint2*)a, n / 4); }));
    report("cast_bf_f32_e4_b128", B, median_ms([&] { cast4<1><<<(unsigned)(n / 4 / 128), 128>>>((float4*)c, (uint2*)a, n / 4); }));
    report("cast_bf_f32_e4_b512", B, median_ms([&] { cast4<1><<<(unsigned)(n / 4 / 512), 512>>>((float4*)c, (uint2*)a, n / 4); }));
    report("cast_bf_f32_e2", B, median_ms([&] { cast2<<<(unsigned)(n / 2 / 256), 256>>>((float2*)c, (uint32_t*)a, n / 2); }));
    report("copy_kernel_same_bytes_1to1", 2.0 * 3 * n, median_ms([&] { copy16<<<(unsigned)(3 * n / 16 / 256), 256>>>((uint4*)c, (uint4*)r, 3 * n / 16); }));
  }
  // bf16 transposed add, 16384^2.
  {
    int side = 16384; size_t n = (size_t)side * side; double B = 3.0 * 2 * n;
    tr_naive<<<dim3(side / 256, side), 256>>>((bf*)r, (bf*)a, (bf*)b, side);
    CK(cudaDeviceSynchronize());
#define TR(name, launch) do { CK(cudaMemset(c, 0xff, 2 * n)); launch; CK(cudaDeviceSynchronize()); check = compare16(c, r, n); \
      report(name, B, median_ms([&] { launch; })); check = ""; } while (0)
    TR("bf_tr_elem_32x32_r4_pad1", (tr_elem<32, 4, 1><<<dim3(side / 32, side / 32), dim3(32, 4)>>>((bf*)c, (bf*)a, (bf*)b, side)));
    TR("bf_tr_elem_32x32_r4_pad2", (tr_elem<32, 4, 2><<<dim3(side / 32, side / 32), dim3(32, 4)>>>((bf*)c, (bf*)a, (bf*)b, side)));
    TR("bf_tr_elem_64x64_r8_pad2", (tr_elem<64, 8, 2><<<dim3(side / 64, side / 64), dim3(32, 8)>>>((bf*)c, (bf*)a, (bf*)b, side)));
    TR("bf_tr_elem_64x64_r16_pad2", (tr_elem<64, 16, 2><<<dim3(side / 64, side / 64), dim3(32, 16)>>>((bf*)c, (bf*)a, (bf*)b, side)));
    TR("bf_tr_pair_64x64_r4", (tr_pair<4><<<dim3(side / 64, side / 64), dim3(32, 4)>>>((uint32_t*)c, (uint32_t*)a, (uint32_t*)b, side)));
    TR("bf_tr_pair_64x64_r8", (tr_pair<8><<<dim3(side / 64, side / 64), dim3(32, 8)>>>((uint32_t*)c, (uint32_t*)a, (uint32_t*)b, side)));
    TR("bf_tr_pair_64x64_r16", (tr_pair<16><<<dim3(side / 64, side / 64), dim3(32, 16)>>>((uint32_t*)c, (uint32_t*)a, (uint32_t*)b, side)));
  }
  // bf16 permuted copy, 2^27 elements.
  {
    size_t n = 1ull << 27; double B = 2.0 * 2 * n;
    perm_naive<<<(unsigned)(n / 256), 256>>>((bf*)r, (bf*)a);
    CK(cudaDeviceSynchronize());
    TR("bf_perm_elem_64x64_pad1", (perm_elem<1><<<2 * 4 * 4096, dim3(32, 8)>>>((bf*)c, (bf*)a)));
    TR("bf_perm_elem_64x64_pad2", (perm_elem<2><<<2 * 4 * 4096, dim3(32, 8)>>>((bf*)c, (bf*)a)));
    TR("bf_perm_pair_64x64", (perm_pair<<<2 * 4 * 4096, dim3(32, 8)>>>((uint32_t*)c, (uint32_t*)a)));
  }
  return 0;
}
