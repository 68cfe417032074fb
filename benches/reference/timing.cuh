// What the CUDA C references share (not part of the library): CK, which exits on a CUDA
// error with its place, and the median of CUDA-event times of single launches (optionally
// queued behind a spin kernel).
#pragma once
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

// Spins for `ns` nanoseconds of the global timer: keeps the stream busy while the host
// submits the timed launch, so that the events time the GPU's work and not the submission.
__global__ void spin(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}

// `warmups` calls of `launch`, then the median of `reps` event-timed calls, in ms; `queued`:
// each timed call waits in the stream behind a 50 us spin.
template <class F> static float event_median_ms(F launch, int reps, int warmups, bool queued = false) {
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  for (int i = 0; i < warmups; i++) launch();
  std::vector<float> t;
  for (int i = 0; i < reps; i++) {
    if (queued) spin<<<1, 1>>>(50000);
    CK(cudaEventRecord(a)); launch(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b)); t.push_back(ms);
  }
  CK(cudaGetLastError());
  CK(cudaEventDestroy(a)); CK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The f32 add references' inputs and check: `init` fills `p` with hashed values in
// [-0.5, 0.5); `count_bad` counts the elements of `c` that are not `a + b`.
__global__ void count_bad_add(const float* c, const float* a, const float* b, size_t n, unsigned long long* bad) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    if (c[i] != a[i] + b[i]) atomicAdd(bad, 1ull);
}
__global__ void init(float* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned x = (unsigned)i * 2654435761u ^ seed;
    x ^= x >> 13; x *= 0x5bd1e995u; x ^= x >> 15;
    p[i] = (float)(x & 0xffffff) / 16777216.0f - 0.5f;
  }
}

// Three f32 operands of `bytes` each, `a` and `b` filled by `init`, and the check of the
// adds written to `c`.
struct AddOperands {
  float *a, *b, *c;
  unsigned long long* bad;
  explicit AddOperands(size_t bytes) {
    CK(cudaMalloc(&a, bytes)); CK(cudaMalloc(&b, bytes)); CK(cudaMalloc(&c, bytes));
    init<<<1024, 256>>>(a, bytes / 4, 1); init<<<1024, 256>>>(b, bytes / 4, 2);
    CK(cudaMalloc(&bad, 8));
    CK(cudaDeviceSynchronize());
  }
  // How many of the first `n` elements of `c` are not `a + b`.
  unsigned long long bad_sums(size_t n) {
    CK(cudaMemset(bad, 0, 8));
    count_bad_add<<<1024, 256>>>(c, a, b, n, bad);
    unsigned long long nb; CK(cudaMemcpy(&nb, bad, 8, cudaMemcpyDeviceToHost));
    return nb;
  }
};
