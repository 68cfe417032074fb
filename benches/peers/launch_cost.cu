// Host time per launch of a 1024-element f32 add, by launch path and kernel origin (issue
// #15: where `sa.add`'s launch time goes). Bursts of 200 launches from an idle queue, median
// of 50 bursts, microseconds per launch; one JSON line per case on stdout.
//
//   nvcc -O2 -arch=sm_90 launch_cost.cu -lcuda -o launch_cost
//   ./launch_cost add_f32.cubin add_f32.ptx      (scripts/ptx --extract DIR writes both)
//
// Cases: our `add_f32_v` loaded from the image's cubin and from its PTX (driver JIT), each
// through cuLaunchKernel; an nvcc-compiled add through cuLaunchKernel and through <<<>>>
// (cudaLaunchKernel, as PyTorch launches); each on a created non-blocking stream and on the
// legacy default stream. The results are checked (c == a + b).
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#define CK(x)                                                                  \
  do {                                                                         \
    auto e = (x);                                                              \
    if (e != 0) {                                                              \
      std::fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #x,  \
                   (int)e);                                                    \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

__global__ void add_k(float* c, const float* a, const float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

static std::string slurp(const char* path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "cannot read %s\n", path);
    std::exit(1);
  }
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

static double burst_us(const std::function<void()>& launch) {
  for (int i = 0; i < 1000; i++) launch();
  CK(cudaDeviceSynchronize());
  std::vector<double> v;
  for (int b = 0; b < 50; b++) {
    CK(cudaDeviceSynchronize());
    auto t = std::chrono::steady_clock::now();
    for (int i = 0; i < 200; i++) launch();
    auto d = std::chrono::steady_clock::now() - t;
    v.push_back(std::chrono::duration<double, std::micro>(d).count() / 200);
  }
  CK(cudaDeviceSynchronize());
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s add_f32.cubin add_f32.ptx\n", argv[0]);
    return 2;
  }
  const int n = 1024;
  CK(cudaFree(0));  // the primary context, current on this thread
  std::vector<float> ha(n), hb(n), hc(n);
  for (int i = 0; i < n; i++) ha[i] = i * 0.5f, hb[i] = 1000.0f - i;
  float *a, *b, *c;
  CK(cudaMalloc(&a, n * 4));
  CK(cudaMalloc(&b, n * 4));
  CK(cudaMalloc(&c, n * 4));
  CK(cudaMemcpy(a, ha.data(), n * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b, hb.data(), n * 4, cudaMemcpyHostToDevice));
  cudaStream_t own;
  CK(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
  auto poison = [&] { CK(cudaMemset(c, 0xff, n * 4)); };
  auto verify = [&](const char* what) {
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(hc.data(), c, n * 4, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
      if (hc[i] != ha[i] + hb[i]) {
        std::fprintf(stderr, "%s: wrong sum at %d\n", what, i);
        std::exit(1);
      }
  };
  // Our kernel's parameters, as the Rust bench's `driver_launch_us` passes them: the op
  // (4 bytes), a `VecArg` (the count and a divider by 1 {d 1, magic 1, shift 0}, padded to
  // 24 bytes), an empty geometry (sizes 1, strides 0, ndim 0: 36 bytes), three pointers.
  unsigned op = 0;
  struct VecArg {
    unsigned long long n;
    unsigned d, magic, shift;
  } count = {(unsigned long long)n, 1, 1, 0};
  static_assert(sizeof(VecArg) == 24, "VecArg is 24 bytes, as the kernel's parameter");
  unsigned geometry[9] = {1, 1, 0, 0, 0, 0, 0, 0, 0};
  unsigned long long pc = (unsigned long long)c, pa = (unsigned long long)a,
                     pb = (unsigned long long)b;
  void* ours[] = {&op, &count, geometry, &pc, &pa, &pb};
  int in = n;
  void* theirs[] = {&c, &a, &b, &in};
  CUfunction nv;
  CK(cudaGetFuncBySymbol((cudaFunction_t*)&nv, (const void*)add_k));
  struct Path {
    const char* name;
    std::string image;
  };
  Path paths[] = {{"cubin", slurp(argv[1])}, {"ptx", slurp(argv[2])}};
  struct Stream {
    const char* name;
    cudaStream_t s;
  };
  Stream streams[] = {{"own", own}, {"legacy", 0}};
  auto emit = [](const char* kernel, const char* via, const char* stream, double us) {
    std::printf(
        "{\"case\":\"launch_cost\",\"kernel\":\"%s\",\"via\":\"%s\",\"stream\":\"%s\","
        "\"us\":%.3f}\n",
        kernel, via, stream, us);
    std::fflush(stdout);
  };
  for (int round = 0; round < 2; round++) {
    for (auto& st : streams) {
      for (auto& p : paths) {
        CUmodule m;
        CK(cuModuleLoadData(&m, p.image.c_str()));
        CUfunction f;
        CK(cuModuleGetFunction(&f, m, "add_f32_v"));
        poison();
        double us = burst_us([&] {
          CK(cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, (CUstream)st.s, ours, nullptr));
        });
        verify(p.name);
        emit(p.name, "cuLaunchKernel", st.name, us);
      }
      poison();
      double us = burst_us([&] {
        CK(cuLaunchKernel(nv, 4, 1, 1, 256, 1, 1, 0, (CUstream)st.s, theirs, nullptr));
      });
      verify("nvcc cuLaunchKernel");
      emit("nvcc", "cuLaunchKernel", st.name, us);
      poison();
      us = burst_us([&] {
        add_k<<<4, 256, 0, st.s>>>(c, a, b, n);
        CK(cudaGetLastError());
      });
      verify("nvcc <<<>>>");
      emit("nvcc", "<<<>>>", st.name, us);
    }
  }
  return 0;
}
