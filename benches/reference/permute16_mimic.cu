// CUDA C reference for issue #13 (not part of the library): why did the library's 128 x 128
// paired tile lose 4-5 % on the bf16 permuted copy (benches/NOTES.md, "Tiles") where
// permute16.cu's won 5 %? This kernel is permute16.cu's `perm` with the library's
// differences as switches, one at a time and together:
//   SWZ    the stage's XOR swizzle (word m of stage row p at m ^ (p / 32));
//   ROUNDS phase 2 as a loop of rounds (not unrolled) instead of one unrolled sequence of
//          every store: 1 a round per column group, each storing its rows (the library's);
//          2 a round per half of the rows, each storing every column group (a warp's
//          256-byte output run in one round); 3 and 4 as 1 and 2 with the next round's
//          stage words read before this round's stores;
//   occ    dynamic shared memory padding the block so at most `occ` blocks fit on an SM (the
//          library's 128 x 128 kernel took 56 registers: two blocks of 512 threads per SM).
//   nvcc -O3 -arch=sm_90 -o mimic permute16_mimic.cu && ./mimic    (JSON lines to stdout)
#include <cstdint>
#include "permute16.cuh"


// Block index split innermost first: u tile, p tile, q, s (the library's order).
template <int TU, int TP, int R, bool SWZ, int ROUNDS>
__global__ void __launch_bounds__(32 * R) perm(uint32_t* out, const uint32_t* in) {
  __shared__ uint32_t st[TP][TU / 2 + 1];
  int b = blockIdx.x;
  const int u0 = (b % (U / TU)) * TU;
  b /= U / TU;
  const int p0 = (b % (P / TP)) * TP;
  b /= P / TP;
  const int q = b % Q, s = b / Q;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const uint32_t* src = in + (s * IN_S + q * IN_Q) / 2;
  uint32_t* dst = out + (q * OUT_Q + s * OUT_S) / 2;
  load_stage<TU, TP, R, SWZ>(st, src, u0, p0);
  __syncthreads();
  constexpr int UC = TU / 2 / 32;  // u pairs per thread column
  constexpr int PR = TP / R;       // p rows per thread row
  auto word = [&](int p, int uc) { return st[p][SWZ ? uc ^ (p >> 5) : uc]; };
  auto put = [&](int p, int uc, uint32_t w) { dst[((p0 + p) * OUT_P + u0) / 2 + uc] = w; };
  if (ROUNDS == 1) {  // rounds of column groups, each its rows (the library's)
#pragma unroll 1
    for (int i = 0; i < UC; i++) {
      uint32_t v[PR];
#pragma unroll
      for (int j = 0; j < PR; j++) v[j] = word(ty + R * j, tx + 32 * i);
#pragma unroll
      for (int j = 0; j < PR; j++) put(ty + R * j, tx + 32 * i, v[j]);
    }
  } else if (ROUNDS == 2) {  // rounds of rows, each every column group
    constexpr int RR = PR / UC;  // rows per round
#pragma unroll 1
    for (int h = 0; h < UC; h++) {
      uint32_t v[RR][UC];
#pragma unroll
      for (int j = 0; j < RR; j++)
#pragma unroll
        for (int i = 0; i < UC; i++) v[j][i] = word(ty + R * (h * RR + j), tx + 32 * i);
#pragma unroll
      for (int j = 0; j < RR; j++)
#pragma unroll
        for (int i = 0; i < UC; i++) put(ty + R * (h * RR + j), tx + 32 * i, v[j][i]);
    }
  } else if (ROUNDS == 3 || ROUNDS == 4) {  // as 1 or 2, the next round's words read first
    constexpr int RR = PR / UC;
    auto gather = [&](int h, uint32_t* v) {
#pragma unroll
      for (int k = 0; k < PR; k++) {
        int j = ROUNDS == 3 ? k : h * RR + k / UC, i = ROUNDS == 3 ? h : k % UC;
        v[k] = word(ty + R * j, tx + 32 * i);
      }
    };
    uint32_t cur[PR], next[PR];
    gather(0, cur);
#pragma unroll 1
    for (int h = 0; h < UC; h++) {
      if (h + 1 < UC) gather(h + 1, next);
#pragma unroll
      for (int k = 0; k < PR; k++) {
        int j = ROUNDS == 3 ? k : h * RR + k / UC, i = ROUNDS == 3 ? h : k % UC;
        put(ty + R * j, tx + 32 * i, cur[k]);
      }
#pragma unroll
      for (int k = 0; k < PR; k++) cur[k] = next[k];
    }
  } else {
#pragma unroll
    for (int j = 0; j < PR; j++)
#pragma unroll
      for (int i = 0; i < UC; i++) put(ty + R * j, tx + 32 * i, word(ty + R * j, tx + 32 * i));
  }
}

int main() {
  const size_t n = (size_t)U * P * Q * S, bytes = 2 * n;  // 2^27 bf16, 256 MiB
  char *a, *c, *r;
  unsigned long long* dcount;
  CK(cudaMalloc(&a, bytes)); CK(cudaMalloc(&c, bytes)); CK(cudaMalloc(&r, bytes)); CK(cudaMalloc(&dcount, 8));
  fill_rand<<<1024, 256>>>((uint32_t*)a, bytes / 4, 1);
  perm_naive<<<(unsigned)(n / 256), 256>>>((uint16_t*)r, (uint16_t*)a);
  CK(cudaDeviceSynchronize());
  printf("{\"case\":\"copy_d2d_256MiB\",\"gbps\":%.1f}\n",
         2.0 * bytes / event_median_ms([&] { CK(cudaMemcpyAsync(c, a, bytes, cudaMemcpyDeviceToDevice)); }, 31, 5) / 1e6);
  auto run = [&](const char* name, auto kernel, int tu, int tp, int rows, int occ) {
    unsigned blocks = (U / tu) * (P / tp) * Q * S;
    cudaFuncAttributes fa; CK(cudaFuncGetAttributes(&fa, kernel));
    int sm_bytes; CK(cudaDeviceGetAttribute(&sm_bytes, cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0));
    // Pad the block's shared memory so `occ + 1` blocks do not fit (1 KiB reserved per block).
    size_t dyn = occ ? sm_bytes / (occ + 1) + 1 - fa.sharedSizeBytes : 0;
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn));
    int fit; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, kernel, 32 * rows, dyn));
    auto launch = [&] { kernel<<<blocks, dim3(32, rows), dyn>>>((uint32_t*)c, (const uint32_t*)a); };
    unsigned long long d = poisoned_diff(launch, c, r, bytes, dcount);
    float ms = event_median_ms(launch, 51, 5);
    printf("{\"case\":\"%s_%dx%d_r%d_occ%d\",\"gbps\":%.1f,\"regs\":%d,\"blocks_per_sm\":%d,\"diff\":%llu}\n",
           name, tu, tp, rows, occ, 2.0 * bytes / ms / 1e6, fa.numRegs, fit, d);
    fflush(stdout);
  };
#define CASE(TU, TP, R, SWZ, ROUNDS, OCC) \
  run("swz_" #SWZ "_rounds_" #ROUNDS, perm<TU, TP, R, SWZ, ROUNDS>, TU, TP, R, OCC)
  for (int rep = 0; rep < 2; rep++) {
    for (int occ : {0, 2}) {
      CASE(128, 128, 16, false, 0, occ);
      CASE(128, 128, 16, false, 1, occ);
      CASE(128, 128, 16, false, 2, occ);
      CASE(128, 128, 16, false, 3, occ);
      CASE(128, 128, 16, false, 4, occ);
      CASE(128, 128, 16, true, 2, occ);
      CASE(128, 128, 16, true, 4, occ);
    }
    CASE(64, 64, 8, false, 0, 0);
  }
  return 0;
}
