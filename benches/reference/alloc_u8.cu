// u8 add, one 16-byte chunk per thread: cudaMalloc vs cudaMallocAsync buffers, with and
// without a big allocation freed first (as the bench's process does).
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)
__device__ __forceinline__ uint32_t sw(uint32_t a, uint32_t b) { return ((a & 0x7f7f7f7f) + (b & 0x7f7f7f7f)) ^ ((a ^ b) & 0x80808080); }
__global__ void u8_add(uint4* c, const uint4* a, const uint4* b, size_t chunks) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < chunks) { uint4 x = a[i], y = b[i]; c[i] = make_uint4(sw(x.x, y.x), sw(x.y, y.y), sw(x.z, y.z), sw(x.w, y.w)); }
}
__global__ void fill(uint32_t* d, size_t w, uint32_t s) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < w; i += (size_t)gridDim.x * blockDim.x) { uint32_t x = (uint32_t)i * 2654435761u ^ s; x ^= x >> 13; x *= 0x5bd1e995; x ^= x >> 15; d[i] = x; }
}
static float run(const char* name, char* a, char* b, char* c, size_t n) {
  size_t ch = n / 16;
  fill<<<1024, 256>>>((uint32_t*)a, n / 4, 1); fill<<<1024, 256>>>((uint32_t*)b, n / 4, 2);
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; i++) u8_add<<<ch / 256, 256>>>((uint4*)c, (uint4*)a, (uint4*)b, ch);
  std::vector<float> t;
  for (int i = 0; i < 25; i++) { CK(cudaEventRecord(e0)); u8_add<<<ch / 256, 256>>>((uint4*)c, (uint4*)a, (uint4*)b, ch); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1)); float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); t.push_back(ms); }
  std::sort(t.begin(), t.end());
  printf("{\"case\":\"%s\",\"gbps\":%.1f,\"ms\":%.4f,\"a\":\"%p\"}\n", name, 3.0 * n / t[12] / 1e6, t[12], a); fflush(stdout);
  return t[12];
}
int main(int argc, char** argv) {
  size_t n = 1ull << 28;
  char *a, *b, *c;
  CK(cudaMalloc(&a, n)); CK(cudaMalloc(&b, n)); CK(cudaMalloc(&c, n));
  run("malloc", a, b, c, n);
  CK(cudaFree(a)); CK(cudaFree(b)); CK(cudaFree(c));
  cudaStream_t s = 0;
  CK(cudaMallocAsync(&a, n, s)); CK(cudaMallocAsync(&b, n, s)); CK(cudaMallocAsync(&c, n, s));
  run("malloc_async", a, b, c, n);
  CK(cudaFreeAsync(a, s)); CK(cudaFreeAsync(b, s)); CK(cudaFreeAsync(c, s));
  // big allocations first (f32 3 x 1 GiB, f64 3 x 2 GiB), freed, then the u8 buffers
  char* big[3];
  for (int k = 0; k < 3; k++) CK(cudaMallocAsync(&big[k], 2ull << 30, s));
  for (int k = 0; k < 3; k++) CK(cudaFreeAsync(big[k], s));
  CK(cudaStreamSynchronize(s));
  CK(cudaMallocAsync(&a, n, s)); CK(cudaMallocAsync(&b, n, s)); CK(cudaMallocAsync(&c, n, s));
  run("malloc_async_after_big", a, b, c, n);
  // offsets within a larger allocation
  char* pool; CK(cudaMalloc(&pool, 4ull << 30));
  run("malloc_1g_apart", pool, pool + (1ull << 30), pool + (2ull << 30), n);
  run("malloc_256m_apart", pool, pool + n, pool + 2 * n, n);
  run("malloc_256m_plus_2m", pool, pool + n + (2 << 20), pool + 2 * n + (4 << 20), n);
  return 0;
}
