// Does the stream-ordered pool's release threshold move the u8 rows? (issue #13; not part of
// the library.) One process runs the Rust bench's allocation sequence: a 1 GiB copy (the
// ceiling), a 256 MiB copy, u8 add 2^28 (3 x 256 MiB), u8 broadcast row 16384^2 — every
// buffer from cudaMallocAsync on the legacy stream (where `event_median_ms` records its
// events), freed and the stream synchronised after each case, as the bench's tensors are. `release` keeps the driver's default release threshold
// (0: freed memory goes back to the driver at each synchronise; cudarc's behaviour);
// `keep` sets it to UINT64_MAX first (the pool keeps what it mapped, as PyTorch's caching
// allocator, RMM and TensorFlow do).
//   nvcc -O3 -arch=sm_90 -o pool_keep pool_keep.cu && ./pool_keep keep|release
#include <cstdint>
#include <cstring>
#include "timing.cuh"

__device__ __forceinline__ uint32_t sw(uint32_t a, uint32_t b) {
  return ((a & 0x7f7f7f7f) + (b & 0x7f7f7f7f)) ^ ((a ^ b) & 0x80808080);
}
__device__ __forceinline__ uint4 add16(uint4 x, uint4 y) {
  return make_uint4(sw(x.x, y.x), sw(x.y, y.y), sw(x.z, y.z), sw(x.w, y.w));
}
__global__ void u8_add(uint4* c, const uint4* a, const uint4* b, size_t chunks) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < chunks) c[i] = add16(a[i], b[i]);
}
__global__ void u8_row(uint4* c, const uint4* a, const uint4* row, size_t chunks, unsigned per_row) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < chunks) c[i] = add16(a[i], row[i % per_row]);
}
__global__ void fill(uint32_t* d, size_t w, uint32_t s) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < w; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t x = (uint32_t)i * 2654435761u ^ s; x ^= x >> 13; x *= 0x5bd1e995; x ^= x >> 15; d[i] = x;
  }
}

static const cudaStream_t s = 0;
static const char* mode;
static char* alloc(size_t n, uint32_t seed) {
  char* p; CK(cudaMallocAsync(&p, n, s));
  fill<<<1024, 256, 0, s>>>((uint32_t*)p, n / 4, seed);
  return p;
}
static void report(const char* c, size_t bytes, float ms) {
  size_t reserved = 0; cudaMemPool_t pool; CK(cudaDeviceGetDefaultMemPool(&pool, 0));
  CK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  printf("{\"mode\":\"%s\",\"case\":\"%s\",\"gbps\":%.1f,\"ms\":%.4f,\"pool_reserved_mib\":%zu}\n", mode, c,
         bytes / ms / 1e6, ms, reserved >> 20);
  fflush(stdout);
}
static void done(std::initializer_list<char*> ps) {
  for (char* p : ps) CK(cudaFreeAsync(p, s));
  CK(cudaStreamSynchronize(s));
}

int main(int argc, char** argv) {
  mode = argc > 1 ? argv[1] : "release";
  cudaMemPool_t pool; CK(cudaDeviceGetDefaultMemPool(&pool, 0));
  uint64_t th = strcmp(mode, "keep") == 0 ? UINT64_MAX : 0;
  CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &th));
  auto timed = [](auto f) { return event_median_ms([&] { f(); }, 25, 3); };
  for (int round = 0; round < 2; round++) {
    size_t g = 1ull << 30, n = 1ull << 28;
    { char *a = alloc(g, 1), *b = alloc(g, 2);
      report("d2d_copy_1g", 2 * g, timed([&] { CK(cudaMemcpyAsync(b, a, g, cudaMemcpyDeviceToDevice, s)); }));
      done({a, b}); }
    { char *a = alloc(n, 3), *b = alloc(n, 4);
      report("d2d_copy_256m", 2 * n, timed([&] { CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s)); }));
      done({a, b}); }
    { char *a = alloc(n, 5), *b = alloc(n, 6), *c = alloc(n, 7);
      size_t ch = n / 16;
      report("u8_add", 3 * n, timed([&] { u8_add<<<ch / 256, 256, 0, s>>>((uint4*)c, (uint4*)a, (uint4*)b, ch); }));
      done({a, b, c}); }
    { char *a = alloc(n, 8), *r = alloc(16384, 9), *c = alloc(n, 10);
      size_t ch = n / 16;
      report("u8_row", 2 * n + 16384,
             timed([&] { u8_row<<<ch / 256, 256, 0, s>>>((uint4*)c, (uint4*)a, (uint4*)r, ch, 16384 / 16); }));
      done({a, r, c}); }
  }
  CK(cudaGetLastError());
  return 0;
}
