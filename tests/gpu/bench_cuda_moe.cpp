// Benchmark (prints figures; not a test): the mixture-of-experts ops at the Qwen3-30B-A3B layer shape
// (hidden 2048, 128 experts of 768, top-8) against the bandwidth roofline. Each op is captured once in a
// CUDA graph and replayed, as the runtime's decode steps are.
//   bench_cuda_moe [iters] [experts]
//
// Roofline: a step reads the weights of every expert its tokens route to once (3 x 768 x 2048 x 2 B =
// 9.4 MB each); time floor = those bytes / the measured copy bandwidth. Routing is uniform at random
// (distinct experts per token), so the touched count is what a balanced router gives.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "kernels/cuda/moe/moe_ffn.h"
#include "kernels/cuda/moe/moe_route.h"

using spk::cuda::bf16;
using spk::cuda::MoeExpert;

namespace {

#define CK(x)                                                       \
  do {                                                              \
    auto e_ = (x);                                                  \
    if (e_ != cudaSuccess) {                                        \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                 \
    }                                                               \
  } while (0)

template <class F>
float graph_us(cudaStream_t s, int iters, F&& launch) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  launch();
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(ge, s));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a, s));
  for (int i = 0; i < iters; ++i) CK(cudaGraphLaunch(ge, s));
  CK(cudaEventRecord(b, s));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  return ms * 1e3f / iters;
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 200;
  const int E = argc > 2 ? std::atoi(argv[2]) : 128, d = 2048, inter = 768, k = 8;
  cudaStream_t s;
  CK(cudaStreamCreate(&s));

  // Copy ceiling (read + write), the bandwidth the roofline uses.
  const size_t cb = size_t(1) << 30;
  void *ca, *cc;
  CK(cudaMalloc(&ca, cb));
  CK(cudaMalloc(&cc, cb));
  CK(cudaMemset(ca, 1, cb));
  // A stream copy, not a graph node: a memcpy node goes to a copy engine (~2.7 TB/s), a stream
  // device-to-device copy runs on the SMs like the kernels do.
  cudaEvent_t c0, c1;
  CK(cudaEventCreate(&c0));
  CK(cudaEventCreate(&c1));
  for (int i = 0; i < 3; ++i) CK(cudaMemcpyAsync(cc, ca, cb, cudaMemcpyDeviceToDevice, s));
  CK(cudaEventRecord(c0, s));
  for (int i = 0; i < 10; ++i) CK(cudaMemcpyAsync(cc, ca, cb, cudaMemcpyDeviceToDevice, s));
  CK(cudaEventRecord(c1, s));
  CK(cudaEventSynchronize(c1));
  float copy_ms = 0;
  CK(cudaEventElapsedTime(&copy_ms, c0, c1));
  const float copy_us = copy_ms * 1e3f / 10;
  const double bw = 2.0 * cb / (copy_us * 1e-6);
  CK(cudaFree(ca));
  CK(cudaFree(cc));
  std::printf("copy bandwidth %.0f GB/s; %d experts of %d x %d, top-%d\n", bw / 1e9, E, inter, d, k);

  // Experts: one allocation, small random bf16 values.
  const size_t per = size_t(3) * inter * d;
  std::vector<uint16_t> hw(per * E);
  std::mt19937 rng(7);
  for (auto& v : hw) v = static_cast<uint16_t>(0x3c00 + (rng() & 0x3ff)) ^ ((rng() & 1) << 15);
  bf16* wbase;
  CK(cudaMalloc(&wbase, hw.size() * 2));
  CK(cudaMemcpy(wbase, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
  hw = {};
  std::vector<MoeExpert> tab(E);
  for (int e = 0; e < E; ++e) {
    bf16* b = wbase + per * e;
    tab[e] = {b, b + size_t(inter) * d, b + size_t(2) * inter * d, inter};
  }
  MoeExpert* dtab;
  CK(cudaMalloc(&dtab, E * sizeof(MoeExpert)));
  CK(cudaMemcpy(dtab, tab.data(), E * sizeof(MoeExpert), cudaMemcpyHostToDevice));
  const spk::cuda::MoeShape sh{E, d, inter, true};

  std::printf("%6s %8s %10s %10s %10s %8s %10s %10s\n", "tokens", "experts", "floor us", "gemv us", "tc us",
              "best %", "plan us", "route us");
  for (int n : {1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096}) {
    std::vector<int32_t> ids(size_t(n) * k);
    std::vector<float> w(ids.size(), 0.125f), x(size_t(n) * d), logits(size_t(n) * E);
    std::set<int> touched;
    for (int t = 0; t < n; ++t) {
      std::vector<int> perm(E);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      for (int j = 0; j < k; ++j) touched.insert(ids[size_t(t) * k + j] = perm[j]);
    }
    for (auto& v : x) v = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
    for (auto& v : logits) v = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
    int32_t* did;
    float *dw, *dx, *dout, *dlog;
    CK(cudaMalloc(&did, ids.size() * 4));
    CK(cudaMalloc(&dw, w.size() * 4));
    CK(cudaMalloc(&dx, x.size() * 4));
    CK(cudaMalloc(&dout, x.size() * 4));
    CK(cudaMalloc(&dlog, logits.size() * 4));
    CK(cudaMemcpy(did, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dw, w.data(), w.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dlog, logits.data(), logits.size() * 4, cudaMemcpyHostToDevice));
    const size_t sbytes = spk::cuda::moe::carve(nullptr, n * k, E, d, inter, nullptr);
    void* scratch;
    CK(cudaMalloc(&scratch, sbytes));
    auto run = [&](bool tc) {
      auto st = spk::cuda::moe_ffn_bf16(dtab, sh, dx, did, dw, n, k, scratch, tc, dout, s);
      if (!st.ok()) {
        std::fprintf(stderr, "moe_ffn: %s\n", st.error().what().c_str());
        std::exit(1);
      }
    };
    const float gemv = graph_us(s, iters, [&] { run(false); });
    if (n <= 64 && std::getenv("SPK_BENCH_GEMV_SWEEP")) {  // rows x chunks in flight, gate/up and down
      for (const char* cfg : {"1x1,1x1", "1x4,1x4", "2x2,2x4", "2x4,2x4", "4x2,4x2", "4x1,4x4", "1x2,2x2"}) {
        setenv("SPARKCTL_MOE_GEMV", cfg, 1);
        std::printf("  n %d gemv %s: %.1f us\n", n, cfg, graph_us(s, iters, [&] { run(false); }));
      }
      unsetenv("SPARKCTL_MOE_GEMV");
    }
    const float tc = graph_us(s, iters, [&] { run(true); });
    spk::cuda::moe::Plan p;
    spk::cuda::moe::carve(scratch, n * k, E, d, inter, &p);
    const float plan = graph_us(s, iters, [&] { (void)spk::cuda::moe::build_plan(did, n * k, E, p, s); });
    spk::MoeRouteSpec rs;
    rs.num_experts = E;
    rs.top_k = k;
    rs.norm_topk_prob = true;
    int32_t* rid;
    float* rw;
    CK(cudaMalloc(&rid, ids.size() * 4));
    CK(cudaMalloc(&rw, w.size() * 4));
    const float route =
        graph_us(s, iters, [&] { (void)spk::cuda::moe_route(rs, dlog, n, nullptr, rid, rw, s); });
    const double floor_us = touched.size() * per * 2.0 / bw * 1e6;
    std::printf("%6d %8zu %10.1f %10.1f %10.1f %8.0f %10.1f %10.1f\n", n, touched.size(), floor_us, gemv, tc,
                100.0 * floor_us / std::min(gemv, tc), plan, route);
    for (void* q :
         {(void*)did, (void*)dw, (void*)dx, (void*)dout, (void*)dlog, scratch, (void*)rid, (void*)rw})
      CK(cudaFree(q));
  }
  return 0;
}
