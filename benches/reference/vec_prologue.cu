// Where the library's vectorised kernel spends its time on small launches (not part of the
// library): its `add_f32_v` as the image has it, and with parts cut out of its PTX by
// `vec_variants.py` (the geometry and stride-2 branches, the grid-stride loop, the tail),
// against a plain CUDA C add of one 16-byte chunk per thread, f32 adds of 2^12–2^24
// elements, each launched as the library launches it (one chunk per thread, blocks of 128),
// timed around the launch and queued behind a spin. Inputs rotate through 512 MiB per operand
// so that no size runs from L2; every output is checked.
//   nvcc -O3 -arch=sm_90 -o vec_prologue vec_prologue.cu -lcuda
//   ./vec_prologue ROUNDS NAME=FILE.{ptx,cubin}...   (JSON lines)
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include <cuda.h>
#include <cuda_runtime.h>
#include "timing.cuh"

#define CU(x) do { CUresult r = (x); if (r != CUDA_SUCCESS) { const char* s; cuGetErrorString(r, &s); \
  fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, s); exit(1); } } while (0)

__global__ void add_c(float4* c, const float4* a, const float4* b, size_t chunks) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < chunks) {
    float4 x = a[i], y = b[i];
    c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}

// The kernel's parameters: the op (4 bytes, unused by Add), a `VecArg` (count, divider by 1),
// an empty geometry (sizes 1, strides 0, ndim 0: 36 bytes), three pointers.
struct VecArg { unsigned long long n; unsigned d, magic, shift; };
static_assert(sizeof(VecArg) == 24, "VecArg is 24 bytes");

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 3;
  CK(cudaFree(0));  // the primary context, current for the driver calls below
  std::vector<std::pair<std::string, CUfunction>> kernels;
  for (int i = 2; i < argc; i++) {
    const char* eq = strchr(argv[i], '=');
    if (!eq) { fprintf(stderr, "expected NAME=FILE, got %s\n", argv[i]); return 2; }
    FILE* f = fopen(eq + 1, "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", eq + 1); return 2; }
    std::vector<char> img;
    char buf[65536]; size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) img.insert(img.end(), buf, buf + k);
    fclose(f);
    img.push_back(0);  // PTX is loaded as a C string
    CUmodule m; CUfunction fn;
    CU(cuModuleLoadData(&m, img.data()));
    CU(cuModuleGetFunction(&fn, m, "add_f32_v"));
    kernels.push_back({std::string(argv[i], eq - argv[i]), fn});
  }
  const size_t region = (size_t)512 << 20;
  AddOperands ops(region);
  float *a = ops.a, *b = ops.b, *c = ops.c;
  const unsigned bs = 128;
  for (int r = 0; r < rounds; r++)
    for (int q = 0; q < 2; q++)
      for (int lg : {12, 14, 16, 18, 20, 22, 24})
        for (size_t v = 0; v <= kernels.size(); v++) {
          size_t n = (size_t)1 << lg, chunks = n / 4;
          size_t sets = region / (n * 4);
          unsigned grid = (unsigned)((chunks + bs - 1) / bs);
          CK(cudaMemset(c, 0xff, region));
          size_t rep = 0;
          unsigned op = 0;
          VecArg arg = {n, 1, 1, 0};
          unsigned geometry[9] = {1, 1, 0, 0, 0, 0, 0, 0, 0};
          auto launch = [&] {
            size_t off = (rep++ % sets) * n;
            float *cc = c + off, *aa = a + off, *bb = b + off;
            if (v == kernels.size()) {
              add_c<<<grid, bs>>>((float4*)cc, (const float4*)aa, (const float4*)bb, chunks);
            } else {
              void* params[] = {&op, &arg, geometry, &cc, &aa, &bb};
              CU(cuLaunchKernel(kernels[v].second, grid, 1, 1, bs, 1, 1, 0, 0, params, nullptr));
            }
          };
          float ms = event_median_ms(launch, 25, 3, q == 1);
          // Every set written at least once is checked.
          unsigned long long nb = ops.bad_sums(std::min(sets, rep) * n);
          printf("{\"round\":%d,\"timing\":\"%s\",\"log2n\":%d,\"kernel\":\"%s\",\"us\":%.3f,\"bad\":%llu}\n",
                 r, q ? "queued" : "plain", lg, v == kernels.size() ? "cuda_c" : kernels[v].first.c_str(),
                 ms * 1e3, nb);
          fflush(stdout);
        }
  return 0;
}
