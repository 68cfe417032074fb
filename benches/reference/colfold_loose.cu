// Hand-written CUDA C reference for the order-free column kernel over rows that are not
// 16-byte aligned (not part of the library): `amax`/`any` of u8 and `all` of bf16 over dim 0
// of 16384 x 16383 (odd widths: each row starts at another byte) and of 16384 x 16384. It
// measures which shape of element reads reaches the vector kernel's speed before the Rust
// kernel takes one. Folds are exact (integer max, or, and), so any order gives the same
// bits; every variant is checked against a host fold. Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90 -o colfold_loose colfold_loose.cu && ./colfold_loose  (JSON lines)
//
// `vec`: the library's `cols_exact` shape (gpu-kernels/src/reduce.rs): blocks of 8 x 64
// threads, thread (x, y) reads columns x*E ..+ E of its block (E = 16 / size) as one 16-byte
// vector per row, pieces of 8 rows y, y + 64, ... loaded before any fold, a shared-memory
// tree over y. Needs 16-byte aligned rows.
// `loose<L, R, C, P>`: blocks of L x R threads; thread (x, y) holds columns x + L*c (c < C)
// of its block (a warp reads L consecutive elements of one row per load when L = 32), pieces
// of P rows loaded (P * C element loads) before any fold, the same tree over y.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>
#include "timing.cuh"

struct AmaxU8 {
  typedef uint8_t T;
  __device__ __host__ static uint8_t id() { return 0; }
  __device__ __host__ static uint8_t fold(uint8_t a, uint8_t x) { return a > x ? a : x; }
  __device__ __host__ static uint8_t fin(uint8_t a) { return a; }
  static const char* name() { return "amax_u8"; }
};
struct AnyU8 {
  typedef uint8_t T;
  __device__ __host__ static uint8_t id() { return 0; }
  __device__ __host__ static uint8_t fold(uint8_t a, uint8_t x) { return a | x; }
  __device__ __host__ static uint8_t fin(uint8_t a) { return a != 0; }
  static const char* name() { return "any_u8"; }
};
struct AllBf16 {
  typedef uint16_t T;
  __device__ __host__ static uint8_t id() { return 1; }
  __device__ __host__ static uint8_t fold(uint8_t a, uint16_t x) { return a & ((x & 0x7fff) != 0); }
  __device__ __host__ static uint8_t fin(uint8_t a) { return a; }
  static const char* name() { return "all_bf16"; }
};

template <class Op, int L, int R, int C, int P, int G>
__global__ void __launch_bounds__(L * R) loose(uint8_t* out, const typename Op::T* in, int rows, int cols, long ld) {
  typedef typename Op::T T;
  static_assert(C % G == 0, "groups");
  __shared__ uint8_t sm[R][L * C];
  const int x = threadIdx.x, y = threadIdx.y;
  // column of the thread's value c: G consecutive columns, groups L * G apart
  auto col = [&](int c) { return blockIdx.x * L * C + (x + L * (c / G)) * G + c % G; };
  const T* base[C];
#pragma unroll
  for (int c = 0; c < C; c++) base[c] = in + min(col(c), cols - 1);
  uint8_t acc[C];
#pragma unroll
  for (int c = 0; c < C; c++) acc[c] = Op::id();
  int r = y * P;
  for (; r + P <= rows; r += R * P) {
    T v[P][C];
#pragma unroll
    for (int j = 0; j < P; j++)
#pragma unroll
      for (int c = 0; c < C; c++) v[j][c] = base[c][(long)(r + j) * ld];
#pragma unroll
    for (int j = 0; j < P; j++)
#pragma unroll
      for (int c = 0; c < C; c++) acc[c] = Op::fold(acc[c], v[j][c]);
  }
  for (int j = 0; j < P && r + j < rows; j++)
#pragma unroll
    for (int c = 0; c < C; c++) acc[c] = Op::fold(acc[c], base[c][(long)(r + j) * ld]);
#pragma unroll
  for (int c = 0; c < C; c++) sm[y][x * C + c] = acc[c];
  __syncthreads();
  for (int s = R / 2; s >= 1; s /= 2) {
    if (y < s)
#pragma unroll
      for (int c = 0; c < C; c++) sm[y][x * C + c] = Op::fold(sm[y][x * C + c], sm[y + s][x * C + c]);
    __syncthreads();
  }
  if (y == 0)
#pragma unroll
    for (int c = 0; c < C; c++)
      if (col(c) < cols) out[col(c)] = Op::fin(sm[0][x * C + c]);
}

// The `cols_exact` shape: 16-byte vectors, 8 x 64 threads, pieces of 8 rows.
template <class Op>
__global__ void __launch_bounds__(512) vec(uint8_t* out, const typename Op::T* in, int rows, int cols, long ld) {
  typedef typename Op::T T;
  constexpr int E = 16 / sizeof(T), L = 8, R = 64, P = 8;
  __shared__ uint8_t sm[R][L * E];
  const int x = threadIdx.x, y = threadIdx.y;
  const int c = blockIdx.x * L * E + x * E;
  const T* base = in + min(c, cols - E);
  uint8_t acc[E];
#pragma unroll
  for (int l = 0; l < E; l++) acc[l] = Op::id();
  int r = y * P;
  for (; r + P <= rows; r += R * P) {
    uint4 v[P];
#pragma unroll
    for (int j = 0; j < P; j++) v[j] = *(const uint4*)(base + (long)(r + j) * ld);
#pragma unroll
    for (int j = 0; j < P; j++) {
      T e[E];
      memcpy(e, &v[j], 16);
#pragma unroll
      for (int l = 0; l < E; l++) acc[l] = Op::fold(acc[l], e[l]);
    }
  }
  for (int j = 0; j < P && r + j < rows; j++) {
    uint4 w = *(const uint4*)(base + (long)(r + j) * ld);
    T e[E];
    memcpy(e, &w, 16);
#pragma unroll
    for (int l = 0; l < E; l++) acc[l] = Op::fold(acc[l], e[l]);
  }
#pragma unroll
  for (int l = 0; l < E; l++) sm[y][x * E + l] = acc[l];
  __syncthreads();
  for (int s = R / 2; s >= 1; s /= 2) {
    if (y < s)
#pragma unroll
      for (int l = 0; l < E; l++) sm[y][x * E + l] = Op::fold(sm[y][x * E + l], sm[y + s][x * E + l]);
    __syncthreads();
  }
  if (y == 0)
#pragma unroll
    for (int l = 0; l < E; l++)
      if (c + l < cols) out[c + l] = Op::fin(sm[0][x * E + l]);
}

__global__ void fill(uint8_t* p, size_t n, unsigned seed, int sparse) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned x = (unsigned)i * 2654435761u ^ seed;
    x ^= x >> 13; x *= 0x5bd1e995u; x ^= x >> 15;
    // sparse: mostly zero bytes (so `any` and `all` read every row)
    p[i] = sparse ? ((x % 4096) == 0 ? (uint8_t)(x >> 8) : 0) : (uint8_t)(x >> 8);
  }
}

template <class Op>
static void run(const char* shape, int rows, int cols) {
  typedef typename Op::T T;
  const long ld = cols;
  const size_t n = (size_t)rows * ld, bytes = n * sizeof(T);
  T* in; uint8_t* out;
  CK(cudaMalloc(&in, bytes)); CK(cudaMalloc(&out, cols));
  // all of bf16: nonzero values with a few zeros (every column true except some).
  fill<<<1024, 256>>>((uint8_t*)in, bytes, 7, sizeof(T) == 1 && Op::id() == 0 && strcmp(Op::name(), "any_u8") == 0);
  CK(cudaDeviceSynchronize());
  std::vector<T> h(n);
  CK(cudaMemcpy(h.data(), in, bytes, cudaMemcpyDeviceToHost));
  if (sizeof(T) == 2) {  // all of bf16: one zero (or -0) in a few columns
    for (size_t i = 0; i < n; i++) if (h[i] == 0) h[i] = 1;
    for (int c = 0; c < cols; c += 97) h[(size_t)((c * 131) % rows) * ld + c] = (c & 1) ? 0x8000 : 0;
    CK(cudaMemcpy(in, h.data(), bytes, cudaMemcpyHostToDevice));
  }
  std::vector<uint8_t> want(cols, Op::id()), got(cols);
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++) want[c] = Op::fold(want[c], h[(size_t)r * ld + c]);
  for (int c = 0; c < cols; c++) want[c] = Op::fin(want[c]);
  auto report = [&](const char* variant, auto launch) {
    CK(cudaMemset(out, 0xa5, cols));
    launch();
    CK(cudaMemcpy(got.data(), out, cols, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int c = 0; c < cols; c++) bad += got[c] != want[c];
    float ms = event_median_ms(launch, 41, 5);
    printf("{\"op\":\"%s\",\"shape\":\"%s\",\"variant\":\"%s\",\"ms\":%.4f,\"gbs\":%.0f,\"bad\":%d}\n", Op::name(), shape,
           variant, ms, (bytes + cols) / ms / 1e6, bad);
    fflush(stdout);
  };
  if (cols % (16 / sizeof(T)) == 0)
    report("vec", [&] { vec<Op><<<(cols + 8 * (16 / sizeof(T)) - 1) / (8 * (16 / sizeof(T))), dim3(8, 64)>>>(out, in, rows, cols, ld); });
#define LOOSE(L, R, C, P, G)                                                                                    \
  report("loose L" #L " R" #R " C" #C " P" #P " G" #G,                                                          \
         [&] { loose<Op, L, R, C, P, G><<<(cols + L * C - 1) / (L * C), dim3(L, R)>>>(out, in, rows, cols, ld); });
  LOOSE(32, 32, 2, 8, 1)
  LOOSE(32, 32, 4, 8, 1)
  LOOSE(32, 32, 4, 16, 1)
  LOOSE(32, 32, 4, 8, 4)
  LOOSE(32, 32, 4, 16, 4)
  LOOSE(32, 16, 4, 16, 4)
  LOOSE(32, 32, 2, 8, 2)
  LOOSE(32, 32, 2, 16, 2)
  LOOSE(32, 32, 8, 8, 8)
  LOOSE(32, 32, 8, 4, 8)
  LOOSE(32, 16, 8, 8, 8)
  LOOSE(32, 32, 8, 8, 4)
  LOOSE(32, 32, 4, 8, 2)
  LOOSE(32, 16, 16, 4, 16)
  LOOSE(8, 64, 16, 8, 16)
  CK(cudaFree(in)); CK(cudaFree(out));
}

int main() {
  for (int cols : {16383, 16384}) {
    const char* shape = cols == 16384 ? "16384x16384" : "16384x16383";
    run<AmaxU8>(shape, 16384, cols);
    run<AnyU8>(shape, 16384, cols);
    run<AllBf16>(shape, 16384, cols);
  }
}
