// Memory-instruction forms not tried before for the two #13 rows that sit at the device's
// copy speed (not part of the library): L2 prefetch-size hints on loads (ld.L2::128B/256B),
// L2 eviction-priority policies (createpolicy evict_first) on loads and stores, and Hopper's
// bulk asynchronous copies (cp.async.bulk, global <-> shared, the 1-D TMA path), for
//   - the bf16 -> f32 cast, 2^28 elements (1:2 read/write bytes),
//   - the u8 broadcast row [16384,16384] + [1,16384] (1:1),
//   - a 256 MiB copy (1:1),
// with the plain forms also at blocks of 128, 512 and 1024 threads and a grid-stride copy over
// resident blocks only, beside the same-process references: cudaMemcpyAsync of 256 MiB and an
// f32 add of 2^28 (2:1, the form of PyTorch's add, the ceiling's usual side). Every form's output is poisoned
// first and checked against the plain form's afterwards; rounds alternate between forms.
//   nvcc -O3 -arch=sm_90 -o write_heavy write_heavy.cu && ./write_heavy   (JSON lines)
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <vector>
#include <string>
#include <functional>
#include <cuda_runtime.h>
#include "timing.cuh"

// ---- load and store forms, 8 and 16 bytes ----
enum Ld { LD_PLAIN, LD_256, LD_128, LD_EF, LD_256_EF };
enum St { ST_PLAIN, ST_EF, ST_CS };

__device__ __forceinline__ uint64_t policy_evict_first() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
template <Ld L> __device__ __forceinline__ uint2 ld8(const uint2* p) {
  uint2 v;
  if (L == LD_PLAIN) v = *p;
  else if (L == LD_256) asm volatile("ld.global.L2::256B.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  else if (L == LD_128) asm volatile("ld.global.L2::128B.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  else if (L == LD_EF) asm volatile("ld.global.L2::cache_hint.v2.u32 {%0,%1}, [%2], %3;" : "=r"(v.x), "=r"(v.y) : "l"(p), "l"(policy_evict_first()));
  else asm volatile("ld.global.L2::cache_hint.L2::256B.v2.u32 {%0,%1}, [%2], %3;" : "=r"(v.x), "=r"(v.y) : "l"(p), "l"(policy_evict_first()));
  return v;
}
template <Ld L> __device__ __forceinline__ uint4 ld16(const uint4* p) {
  uint4 v;
  if (L == LD_PLAIN) v = *p;
  else if (L == LD_256) asm volatile("ld.global.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  else if (L == LD_128) asm volatile("ld.global.L2::128B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  else if (L == LD_EF) asm volatile("ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(policy_evict_first()));
  else asm volatile("ld.global.L2::cache_hint.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4], %5;" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(policy_evict_first()));
  return v;
}
template <St S> __device__ __forceinline__ void st16(uint4* p, uint4 v) {
  if (S == ST_PLAIN) *p = v;
  else if (S == ST_EF) asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1,%2,%3,%4}, %5;" :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(policy_evict_first()) : "memory");
  else asm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};" :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
__device__ __forceinline__ uint4 widen(uint2 x) {  // four bf16 -> four f32 bit patterns
  return make_uint4(x.x << 16, x.x & 0xffff0000u, x.y << 16, x.y & 0xffff0000u);
}
__device__ __forceinline__ uint32_t swar_add(uint32_t a, uint32_t b) {
  return ((a & 0x7f7f7f7f) + (b & 0x7f7f7f7f)) ^ ((a ^ b) & 0x80808080);
}
__device__ __forceinline__ uint4 add16(uint4 x, uint4 y) {
  return make_uint4(swar_add(x.x, y.x), swar_add(x.y, y.y), swar_add(x.z, y.z), swar_add(x.w, y.w));
}

// ---- register forms: one chunk per thread ----
template <Ld L, St S> __global__ void cast4(uint4* out, const uint2* in, size_t chunks) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < chunks) st16<S>(out + i, widen(ld8<L>(in + i)));
}
template <Ld L, St S> __global__ void row16(uint4* c, const uint4* a, const uint4* b, unsigned chunks, unsigned per_row) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < chunks) st16<S>(c + i, add16(ld16<L>(a + i), b[i % per_row]));
}
template <Ld L, St S> __global__ void copy16(uint4* out, const uint4* in, size_t chunks) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < chunks) st16<S>(out + i, ld16<L>(in + i));
}
// Grid-stride over a grid of resident blocks only (no block launched after the first wave).
template <int U> __global__ void copy_gs(uint4* out, const uint4* in, size_t chunks) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < chunks; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; u++) v[u] = in[i + u * stride];
#pragma unroll
    for (int u = 0; u < U; u++) out[i + u * stride] = v[u];
  }
  for (; i < chunks; i += stride) out[i] = in[i];
}
__global__ void f32_add(float4* c, const float4* a, const float4* b, size_t chunks) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < chunks) { float4 x = a[i], y = b[i]; c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w); }
}

// ---- bulk asynchronous copies (sm_90) ----
__device__ __forceinline__ uint32_t smem(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem(bar)), "r"(count) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// One thread: expect `bytes` on `bar`, then bring them from global `src` to shared `dst`.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, unsigned bytes, uint64_t* bar) {
  asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}" :: "r"(smem(bar)), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(smem(dst)), "l"(src), "r"(bytes), "r"(smem(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done) : "r"(smem(bar)), "r"(parity) : "memory");
}
__device__ __forceinline__ void bulk_store(void* dst, const void* src, unsigned bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" :: "l"(dst), "r"(smem(src)), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
template <int N> __device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory"); }
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// One tile per block: bulk load, widen in shared memory (threads), bulk store.
template <int T> __global__ void cast_bulk(uint32_t* out, const uint16_t* in) {
  extern __shared__ __align__(128) unsigned char sm[];
  uint2* sin = (uint2*)sm;                      // T bf16
  uint4* sout = (uint4*)(sm + T * 2);           // T f32
  __shared__ uint64_t bar;
  size_t t0 = (size_t)blockIdx.x * T;
  if (threadIdx.x == 0) { mbar_init(&bar, 1); bulk_load(sin, in + t0, T * 2, &bar); }
  __syncthreads();
  mbar_wait(&bar, 0);
  for (int i = threadIdx.x; i < T / 4; i += blockDim.x) sout[i] = widen(sin[i]);
  fence_async_shared();
  __syncthreads();
  if (threadIdx.x == 0) { bulk_store(out + t0, sout, T * 4); bulk_wait_all(); }
}
// Persistent blocks, S stages: tile k of the block loads while k-1 widens and k-S stores.
template <int T, int S> __global__ void cast_bulk_pipe(uint32_t* out, const uint16_t* in, size_t tiles) {
  extern __shared__ __align__(128) unsigned char sm[];
  __shared__ uint64_t bar[S];
  auto sin = [&](int s) { return (uint2*)(sm + s * T * 6); };
  auto sout = [&](int s) { return (uint4*)(sm + s * T * 6 + T * 2); };
  size_t mine = tiles > blockIdx.x ? (tiles - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; s++) mbar_init(&bar[s], 1);
    for (int s = 0; s < S && (size_t)s < mine; s++) bulk_load(sin(s), in + (blockIdx.x + (size_t)s * gridDim.x) * T, T * 2, &bar[s]);
  }
  __syncthreads();
  for (size_t k = 0; k < mine; k++) {
    int s = k % S;
    size_t tile = blockIdx.x + k * gridDim.x;
    mbar_wait(&bar[s], (k / S) & 1);
    if (threadIdx.x == 0) bulk_wait_read<S - 1>();  // the store from sout(s), S tiles ago, has read it
    __syncthreads();
    for (int i = threadIdx.x; i < T / 4; i += blockDim.x) sout(s)[i] = widen(sin(s)[i]);
    fence_async_shared();
    __syncthreads();
    if (threadIdx.x == 0) {
      bulk_store(out + tile * T, sout(s), T * 4);
      if (k + S < mine) bulk_load(sin(s), in + (tile + (size_t)S * gridDim.x) * T, T * 2, &bar[s]);
    }
  }
  if (threadIdx.x == 0) bulk_wait_all();
}
// Copy and u8 row, one tile of T bytes per block, in place in shared memory.
template <int T, bool ROW> __global__ void bytes_bulk(uint4* c, const uint4* a, const uint4* b, unsigned per_row) {
  extern __shared__ __align__(128) unsigned char sm[];
  uint4* s = (uint4*)sm;
  __shared__ uint64_t bar;
  size_t t0 = (size_t)blockIdx.x * (T / 16);
  if (threadIdx.x == 0) { mbar_init(&bar, 1); bulk_load(s, a + t0, T, &bar); }
  __syncthreads();
  mbar_wait(&bar, 0);
  if (ROW) {
    for (int i = threadIdx.x; i < T / 16; i += blockDim.x) s[i] = add16(s[i], b[(t0 + i) % per_row]);
    fence_async_shared();
    __syncthreads();
  }
  if (threadIdx.x == 0) { bulk_store(c + t0, s, T); bulk_wait_all(); }
}

__global__ void count_diff(const uint4* x, const uint4* y, size_t n, unsigned long long* bad) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint4 p = x[i], q = y[i];
    local += (p.x != q.x) | (p.y != q.y) | (p.z != q.z) | (p.w != q.w);
  }
  if (local) atomicAdd(bad, local);
}

struct Form { std::string group, name; double bytes; std::function<void()> run; uint4* out; size_t out_chunks; uint4* truth; };

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 5;
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t N = (size_t)1 << 28;          // cast elements and f32 add elements
  const unsigned R = 16384, C = 16384;       // u8 row
  const size_t BYTES = (size_t)R * C;        // 256 MiB
  uint16_t* cin; uint4 *cout, *ctruth;
  uint4 *ra, *rb, *rc, *rtruth, *cc, *ctr;
  float4 *fa, *fb, *fc;
  CK(cudaMalloc(&cin, N * 2)); CK(cudaMalloc(&cout, N * 4)); CK(cudaMalloc(&ctruth, N * 4));
  CK(cudaMalloc(&ra, BYTES)); CK(cudaMalloc(&rb, C)); CK(cudaMalloc(&rc, BYTES)); CK(cudaMalloc(&rtruth, BYTES));
  CK(cudaMalloc(&cc, BYTES)); CK(cudaMalloc(&ctr, BYTES));
  CK(cudaMalloc(&fa, N * 4)); CK(cudaMalloc(&fb, N * 4)); CK(cudaMalloc(&fc, N * 4));
  {  // random inputs (a host LCG; bf16 patterns of finite values)
    std::vector<uint32_t> h(N * 2 / 4);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (auto& v : h) { x = x * 6364136223846793005ull + 1442695040888963407ull; v = (uint32_t)(x >> 32) & 0x3fff3fffu; }
    CK(cudaMemcpy(cin, h.data(), N * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(ra, h.data(), BYTES, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(rb, h.data() + 1000, C, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(fa, h.data(), N * 2, cudaMemcpyHostToDevice)); CK(cudaMemcpy((char*)fa + N * 2, h.data(), N * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(fb, fa, N * 4, cudaMemcpyDeviceToDevice));
  }
  const unsigned B = 256;
  size_t cch = N / 4;  // cast chunks (4 elements)
  unsigned rch = BYTES / 16;
  std::vector<Form> forms;
  auto add = [&](const char* g, const char* n, double bytes, std::function<void()> f, uint4* out, size_t oc, uint4* truth) {
    forms.push_back({g, n, bytes, f, out, oc, truth});
  };
  double cb = N * 6.0, rbytes = 2.0 * BYTES + C, pb = 2.0 * BYTES;
#define CAST(L, S) add("cast", #L "/" #S, cb, [=] { cast4<L, S><<<(cch + B - 1) / B, B>>>(cout, (const uint2*)cin, cch); }, cout, N / 4, ctruth)
#define ROW(L, S) add("u8_row", #L "/" #S, rbytes, [=] { row16<L, S><<<(rch + B - 1) / B, B>>>(rc, ra, rb, rch, C / 16); }, rc, rch, rtruth)
#define COPY(L, S) add("copy", #L "/" #S, pb, [=] { copy16<L, S><<<(rch + B - 1) / B, B>>>(cc, ra, rch); }, cc, rch, ctr)
  CAST(LD_PLAIN, ST_PLAIN); CAST(LD_256, ST_PLAIN); CAST(LD_128, ST_PLAIN); CAST(LD_PLAIN, ST_EF);
  CAST(LD_EF, ST_EF); CAST(LD_256, ST_EF); CAST(LD_256_EF, ST_EF); CAST(LD_PLAIN, ST_CS);
  ROW(LD_PLAIN, ST_PLAIN); ROW(LD_256, ST_PLAIN); ROW(LD_128, ST_PLAIN); ROW(LD_PLAIN, ST_EF);
  ROW(LD_EF, ST_EF); ROW(LD_256, ST_EF); ROW(LD_256_EF, ST_EF);
  COPY(LD_PLAIN, ST_PLAIN); COPY(LD_256, ST_PLAIN); COPY(LD_PLAIN, ST_EF); COPY(LD_256_EF, ST_EF);
  // block sizes other than 256, and grid-stride over resident blocks only
  for (unsigned bs : {128u, 512u, 1024u}) {
    std::string t = "LD_PLAIN/ST_PLAIN/B" + std::to_string(bs);
    forms.push_back({"cast", t, cb, [=] { cast4<LD_PLAIN, ST_PLAIN><<<(cch + bs - 1) / bs, bs>>>(cout, (const uint2*)cin, cch); }, cout, N / 4, ctruth});
    forms.push_back({"u8_row", t, rbytes, [=] { row16<LD_PLAIN, ST_PLAIN><<<(rch + bs - 1) / bs, bs>>>(rc, ra, rb, rch, C / 16); }, rc, rch, rtruth});
    forms.push_back({"copy", t, pb, [=] { copy16<LD_PLAIN, ST_PLAIN><<<(rch + bs - 1) / bs, bs>>>(cc, ra, rch); }, cc, rch, ctr});
  }
  for (int u : {1, 2, 4}) {
    std::string t = "grid_stride/U" + std::to_string(u);
    unsigned grid = sms * 2048 / 256;
    forms.push_back({"copy", t, pb, [=] {
      if (u == 1) copy_gs<1><<<grid, 256>>>(cc, ra, rch);
      else if (u == 2) copy_gs<2><<<grid, 256>>>(cc, ra, rch);
      else copy_gs<4><<<grid, 256>>>(cc, ra, rch);
    }, cc, rch, ctr});
  }
  // bulk forms
  {
    auto k1 = cast_bulk<4096>; CK(cudaFuncSetAttribute(k1, cudaFuncAttributeMaxDynamicSharedMemorySize, 4096 * 6));
    add("cast", "bulk/T4096", cb, [=] { cast_bulk<4096><<<N / 4096, 256, 4096 * 6>>>((uint32_t*)cout, cin); }, cout, N / 4, ctruth);
    auto k2 = cast_bulk<8192>; CK(cudaFuncSetAttribute(k2, cudaFuncAttributeMaxDynamicSharedMemorySize, 8192 * 6));
    add("cast", "bulk/T8192", cb, [=] { cast_bulk<8192><<<N / 8192, 256, 8192 * 6>>>((uint32_t*)cout, cin); }, cout, N / 4, ctruth);
    auto k3 = cast_bulk_pipe<4096, 2>; CK(cudaFuncSetAttribute(k3, cudaFuncAttributeMaxDynamicSharedMemorySize, 4096 * 12));
    for (int per : {2, 4}) {
      std::string n = "bulk_pipe/T4096xS2/" + std::to_string(per) + "perSM";
      unsigned grid = sms * per;
      forms.push_back({"cast", n, cb, [=] { cast_bulk_pipe<4096, 2><<<grid, 256, 4096 * 12>>>((uint32_t*)cout, cin, N / 4096); }, cout, N / 4, ctruth});
    }
    auto k4 = bytes_bulk<16384, true>; CK(cudaFuncSetAttribute(k4, cudaFuncAttributeMaxDynamicSharedMemorySize, 16384));
    add("u8_row", "bulk/T16384", rbytes, [=] { bytes_bulk<16384, true><<<BYTES / 16384, 256, 16384>>>(rc, ra, rb, C / 16); }, rc, rch, rtruth);
    auto k5 = bytes_bulk<32768, true>; CK(cudaFuncSetAttribute(k5, cudaFuncAttributeMaxDynamicSharedMemorySize, 32768));
    add("u8_row", "bulk/T32768", rbytes, [=] { bytes_bulk<32768, true><<<BYTES / 32768, 256, 32768>>>(rc, ra, rb, C / 16); }, rc, rch, rtruth);
    auto k6 = bytes_bulk<16384, false>; CK(cudaFuncSetAttribute(k6, cudaFuncAttributeMaxDynamicSharedMemorySize, 16384));
    add("copy", "bulk/T16384", pb, [=] { bytes_bulk<16384, false><<<BYTES / 16384, 256, 16384>>>(cc, ra, rb, C / 16); }, cc, rch, ctr);
  }
  add("copy", "cudaMemcpyAsync", pb, [=] { CK(cudaMemcpyAsync(cc, ra, BYTES, cudaMemcpyDeviceToDevice)); }, cc, rch, ctr);
  add("f32_add", "plain", N * 12.0, [=] { f32_add<<<(N / 4 + B - 1) / B, B>>>(fc, fa, fb, N / 4); }, nullptr, 0, nullptr);
  // Truths from the plain forms (the first of each group).
  cast4<LD_PLAIN, ST_PLAIN><<<(cch + B - 1) / B, B>>>(ctruth, (const uint2*)cin, cch);
  row16<LD_PLAIN, ST_PLAIN><<<(rch + B - 1) / B, B>>>(rtruth, ra, rb, rch, C / 16);
  CK(cudaMemcpy(ctr, ra, BYTES, cudaMemcpyDeviceToDevice));
  CK(cudaDeviceSynchronize());
  unsigned long long* bad; CK(cudaMalloc(&bad, 8));
  for (int r = 0; r < rounds; r++) {
    for (auto& f : forms) {
      if (f.out) CK(cudaMemset(f.out, 0xa5, f.out_chunks * 16));
      float ms = event_median_ms(f.run, 25, 3);
      unsigned long long nb = 0;
      if (f.out) {
        CK(cudaMemset(bad, 0, 8));
        count_diff<<<sms * 8, 256>>>(f.out, f.truth, f.out_chunks, bad);
        CK(cudaMemcpy(&nb, bad, 8, cudaMemcpyDeviceToHost));
      }
      printf("{\"round\":%d,\"group\":\"%s\",\"form\":\"%s\",\"gbps\":%.1f,\"ms\":%.4f,\"bad_chunks\":%llu}\n",
             r, f.group.c_str(), f.name.c_str(), f.bytes / ms / 1e6, ms, nb);
      fflush(stdout);
    }
  }
  return 0;
}
