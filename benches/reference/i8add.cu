// What `a + b` of int8 (2^28 elements, contiguous) needs to reach the copy: threads per SM
// against bytes per thread. Every variant adds 16-byte vectors bytewise (`__vadd4`, the
// wrapping add of four bytes a word) and is checked against a host add; CUDA events, median
// of 41 after 5 warm-ups; JSON lines. Occupancy is capped with dynamic shared memory (no
// variant uses it), so one kernel measures at 2048, 1536 and 1024 threads an SM.
//
//   nvcc -O3 -arch=sm_90 -o i8add i8add.cu && ./i8add
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

__device__ __forceinline__ uint4 add16(uint4 a, uint4 b) {
  return make_uint4(__vadd4(a.x, b.x), __vadd4(a.y, b.y), __vadd4(a.z, b.z), __vadd4(a.w, b.w));
}

// V vectors a thread: vector t + k * stride for k < V (stride = all threads), no loop.
template <int V>
__global__ void per_thread(const uint4* a, const uint4* b, uint4* o, size_t nv) {
  extern __shared__ char pad[];
  size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  uint4 x[V], y[V];
#pragma unroll
  for (int k = 0; k < V; k++) {
    size_t i = t + k * stride;
    if (i < nv) { x[k] = __ldg(a + i); y[k] = __ldg(b + i); }
  }
#pragma unroll
  for (int k = 0; k < V; k++) {
    size_t i = t + k * stride;
    if (i < nv) o[i] = add16(x[k], y[k]);
  }
}

// A grid-stride loop over a fixed grid (blocks an SM times the SM count).
__global__ void grid_stride(const uint4* a, const uint4* b, uint4* o, size_t nv) {
  extern __shared__ char pad[];
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < nv; i += stride)
    o[i] = add16(__ldg(a + i), __ldg(b + i));
}

static float median_ms(cudaEvent_t e0, cudaEvent_t e1, void (*run)(void*), void* ctx) {
  for (int i = 0; i < 5; i++) run(ctx);
  std::vector<float> t;
  for (int i = 0; i < 41; i++) {
    CK(cudaEventRecord(e0));
    run(ctx);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Ctx {
  const uint4 *a, *b;
  uint4* o;
  size_t nv;
  int variant, block, grid, smem;
};

static void run(void* p) {
  Ctx* c = (Ctx*)p;
  switch (c->variant) {
    case 1: per_thread<1><<<c->grid, c->block, c->smem>>>(c->a, c->b, c->o, c->nv); break;
    case 2: per_thread<2><<<c->grid, c->block, c->smem>>>(c->a, c->b, c->o, c->nv); break;
    case 4: per_thread<4><<<c->grid, c->block, c->smem>>>(c->a, c->b, c->o, c->nv); break;
    default: grid_stride<<<c->grid, c->block, c->smem>>>(c->a, c->b, c->o, c->nv); break;
  }
}

static void copy(void* p) {
  Ctx* c = (Ctx*)p;
  CK(cudaMemcpyAsync(c->o, c->a, c->nv * 16, cudaMemcpyDeviceToDevice));
}

int main() {
  const size_t n = (size_t)1 << 28, nv = n / 16;
  std::vector<uint8_t> ha(n), hb(n), ho(n);
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    ha[i] = (uint8_t)s; hb[i] = (uint8_t)(s >> 24);
  }
  uint4 *a, *b, *o;
  CK(cudaMalloc(&a, n)); CK(cudaMalloc(&b, n)); CK(cudaMalloc(&o, n));
  CK(cudaMemcpy(a, ha.data(), n, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b, hb.data(), n, cudaMemcpyHostToDevice));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (int v : {1, 2, 4}) {
    cudaFuncSetAttribute(v == 1 ? (const void*)per_thread<1> : v == 2 ? (const void*)per_thread<2> : (const void*)per_thread<4>,
                         cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024);
  }
  cudaFuncSetAttribute((const void*)grid_stride, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024);
  Ctx c{a, b, o, nv, 0, 128, 0, 0};
  float ms = median_ms(e0, e1, copy, &c);
  printf("{\"variant\": \"copy\", \"ms\": %.4f, \"gbs\": %.0f}\n", ms, 2.0 * n / ms / 1e6);
  // Shared memory an SM: 228 KiB, 1 KiB reserved a block. Threads an SM = blocks * block.
  for (int block : {128, 256}) {
    for (int threads_sm : {2048, 1536, 1024}) {
      int blocks_sm = threads_sm / block;
      int smem = threads_sm == 2048 ? 0 : (228 * 1024 / blocks_sm) - 1024 - 256;
      for (int v : {1, 2, 4, 0}) {
        c.variant = v; c.block = block; c.smem = smem;
        c.grid = v == 0 ? sms * blocks_sm : (int)((nv / v + block - 1) / block);
        CK(cudaMemset(o, 0x5a, n));
        ms = median_ms(e0, e1, run, &c);
        CK(cudaGetLastError());
        CK(cudaMemcpy(ho.data(), o, n, cudaMemcpyDeviceToHost));
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) bad += ho[i] != (uint8_t)(ha[i] + hb[i]);
        int occ;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ,
            v == 1 ? (const void*)per_thread<1> : v == 2 ? (const void*)per_thread<2> : v == 4 ? (const void*)per_thread<4> : (const void*)grid_stride,
            block, smem));
        printf("{\"variant\": \"%s\", \"block\": %d, \"threads_sm\": %d, \"ms\": %.4f, \"gbs\": %.0f, \"bad\": %zu}\n",
               v == 0 ? "grid_stride" : v == 1 ? "v1" : v == 2 ? "v2" : "v4", block, occ * block, ms,
               3.0 * n / ms / 1e6, bad);
      }
    }
  }
  return 0;
}
