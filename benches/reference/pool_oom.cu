// Does the driver give a pool's cached memory back by itself when an allocation would
// otherwise fail? (benches/NOTES.md, "The memory pool"; not part of the library.) With the
// default pool's release threshold at UINT64_MAX: fill the device with 1 GiB cudaMallocAsync
// chunks until out of memory, free them all and synchronise (the pool keeps them), then ask
// for one block of all but 2 GiB; then trim the pool and ask again.
//   nvcc -O3 -arch=sm_90 -o pool_oom pool_oom.cu && ./pool_oom
#include <cstdint>
#include "timing.cuh"

int main() {
  cudaMemPool_t pool; CK(cudaDeviceGetDefaultMemPool(&pool, 0));
  uint64_t th = UINT64_MAX;
  CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &th));
  std::vector<void*> held;
  const size_t gib = 1ull << 30;
  for (;;) {
    void* p;
    if (cudaMallocAsync(&p, gib, 0) != cudaSuccess) { cudaGetLastError(); break; }
    held.push_back(p);
  }
  for (void* p : held) CK(cudaFreeAsync(p, 0));
  CK(cudaStreamSynchronize(0));
  size_t reserved = 0;
  CK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  size_t want = (held.size() - 2) * gib;
  void* big = nullptr;
  cudaError_t first = cudaMallocAsync(&big, want, 0);
  cudaGetLastError();
  if (first == cudaSuccess) CK(cudaFreeAsync(big, 0));
  CK(cudaStreamSynchronize(0));
  CK(cudaMemPoolTrimTo(pool, 0));
  cudaError_t second = cudaMallocAsync(&big, want, 0);
  cudaGetLastError();
  printf("{\"filled_gib\":%zu,\"cached_gib\":%zu,\"want_gib\":%zu,\"first\":\"%s\",\"after_trim\":\"%s\"}\n",
         held.size(), reserved / gib, want / gib, cudaGetErrorName(first), cudaGetErrorName(second));
  return 0;
}
