// Benchmark (prints figures; not a test): the bf16 GEMV at the Llama-3.1-8B shapes against the measured
// device copy bandwidth, plus the GEMM at prefill sizes. Usage: bench_cuda_kernels [iters]
//
// Roofline: a GEMV reads N*K*2 bytes of weights (x and y are noise); time floor = bytes / copy bandwidth.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/linear/gemm.h"

using spk::cuda::bf16;

namespace {

#define CK(x)                                                       \
  do {                                                              \
    auto e_ = (x);                                                  \
    if (e_ != cudaSuccess) {                                        \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                 \
    }                                                               \
  } while (0)

__attribute__((unused)) void fill(void* p, size_t bytes) {
  std::vector<uint16_t> h(bytes / 2);
  uint64_t s = 88172645463325252ull;
  for (auto& v : h) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    v = static_cast<uint16_t>(0x3c00 + (s & 0x3ff));  // bf16 values in [1, 2) scaled below by sign bits
  }
  CK(cudaMemcpy(p, h.data(), bytes, cudaMemcpyHostToDevice));
}

float time_ms(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 50;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));

  // Copy ceiling: 2 GiB device-to-device, counting read + write.
  const size_t copy_bytes = size_t(2) << 30;
  void *ca, *cb;
  CK(cudaMalloc(&ca, copy_bytes));
  CK(cudaMalloc(&cb, copy_bytes));
  CK(cudaMemset(ca, 1, copy_bytes));
  for (int i = 0; i < 3; ++i) CK(cudaMemcpyAsync(cb, ca, copy_bytes, cudaMemcpyDeviceToDevice));
  CK(cudaEventRecord(e0));
  for (int i = 0; i < 10; ++i) CK(cudaMemcpyAsync(cb, ca, copy_bytes, cudaMemcpyDeviceToDevice));
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  const double copy_bw = 2.0 * copy_bytes * 10 / (time_ms(e0, e1) * 1e-3) / 1e9;
  std::printf("device copy bandwidth (read+write): %.0f GB/s\n", copy_bw);
  CK(cudaFree(ca));
  CK(cudaFree(cb));

  struct Shape {
    const char* name;
    int N, K, per_token;
  };  // per_token: how many per decode token (32 layers)
  const Shape shapes[] = {{"qkv 6144x4096", 6144, 4096, 32},
                          {"o 4096x4096", 4096, 4096, 32},
                          {"gate_up 28672x4096", 28672, 4096, 32},
                          {"down 4096x14336", 4096, 14336, 32},
                          {"lm_head 128256x4096", 128256, 4096, 1}};
  std::printf("\n%-22s %5s %10s %10s %8s\n", "GEMV bf16", "batch", "us", "GB/s", "%copy");
  double token_us[9] = {0};
  double token_bytes = 0;
  for (const auto& sh : shapes) {
    const size_t wbytes = size_t(sh.N) * sh.K * 2;
    const int copies = wbytes < (size_t(256) << 20) ? 4 : 1;  // rotate so L2 (60 MB) never holds W
    std::vector<void*> W(copies);
    for (auto& w : W) {
      CK(cudaMalloc(&w, wbytes));
      fill(w, wbytes);
    }
    float *x, *y;
    CK(cudaMalloc(&x, size_t(8) * sh.K * 4));
    CK(cudaMalloc(&y, size_t(8) * sh.N * 4));
    CK(cudaMemset(x, 0x3f, size_t(8) * sh.K * 4));
    token_bytes += double(wbytes) * sh.per_token;
    for (int b : {1, 2, 4, 8}) {
      for (int i = 0; i < 3; ++i)
        (void)spk::cuda::gemv_bf16(static_cast<bf16*>(W[i % copies]), nullptr, x, b, sh.N, sh.K, y, nullptr);
      CK(cudaEventRecord(e0));
      for (int i = 0; i < iters; ++i)
        (void)spk::cuda::gemv_bf16(static_cast<bf16*>(W[i % copies]), nullptr, x, b, sh.N, sh.K, y, nullptr);
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      CK(cudaGetLastError());
      const double us = time_ms(e0, e1) * 1e3 / iters;
      const double gbs = wbytes / (us * 1e-6) / 1e9;
      std::printf("%-22s %5d %10.1f %10.0f %7.1f%%\n", sh.name, b, us, gbs, 100.0 * gbs / copy_bw);
      token_us[b] += us * sh.per_token;
    }
    for (auto& w : W) CK(cudaFree(w));
    CK(cudaFree(x));
    CK(cudaFree(y));
  }
  std::printf("\nLlama-3.1-8B linear layers per decode token: %.2f GB of weights\n", token_bytes / 1e9);
  for (int b : {1, 2, 4, 8})
    std::printf(
        "  batch %d: GEMVs %.0f us/token-step -> %.0f steps/s (roofline %.0f steps/s at copy bandwidth)\n", b,
        token_us[b], 1e6 / token_us[b], copy_bw * 1e9 / token_bytes);

  // Decode-size GEMMs through cuBLASLt (what batches above SPARKCTL_GEMV_MAX_BATCH take): weight GB/s and
  // the per-token-step sum, against the GEMV above. Weights rotate so L2 never holds them.
  {
    auto gd = spk::cuda::Gemm::create(64, 14336);
    if (!gd.ok()) {
      std::fprintf(stderr, "%s\n", gd.error().what().c_str());
      return 1;
    }
    std::unique_ptr<spk::cuda::Gemm> gemm(*gd);
    const int ms[] = {2, 4, 8, 16, 32, 64};
    double step_us[6] = {0};
    std::printf("\n%-22s %5s %10s %10s %8s\n", "GEMM decode (cuBLASLt)", "M", "us", "GB/s", "%copy");
    for (const auto& sh : shapes) {
      const size_t wbytes = size_t(sh.N) * sh.K * 2;
      const int copies = wbytes < (size_t(256) << 20) ? 4 : 1;
      std::vector<void*> W(copies);
      for (auto& w : W) {
        CK(cudaMalloc(&w, wbytes));
        fill(w, wbytes);
      }
      float *x, *y;
      CK(cudaMalloc(&x, size_t(64) * sh.K * 4));
      CK(cudaMalloc(&y, size_t(64) * sh.N * 4));
      CK(cudaMemset(x, 0x3f, size_t(64) * sh.K * 4));
      for (int mi = 0; mi < 6; ++mi) {
        const int m = ms[mi];
        for (int i = 0; i < 3; ++i)
          (void)gemm->linear(static_cast<bf16*>(W[i % copies]), nullptr, x, m, sh.N, sh.K, y, nullptr);
        CK(cudaEventRecord(e0));
        for (int i = 0; i < iters; ++i)
          (void)gemm->linear(static_cast<bf16*>(W[i % copies]), nullptr, x, m, sh.N, sh.K, y, nullptr);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaGetLastError());
        const double us = time_ms(e0, e1) * 1e3 / iters;
        const double gbs = wbytes / (us * 1e-6) / 1e9;
        std::printf("%-22s %5d %10.1f %10.0f %7.1f%%\n", sh.name, m, us, gbs, 100.0 * gbs / copy_bw);
        step_us[mi] += us * sh.per_token;
      }
      for (auto& w : W) CK(cudaFree(w));
      CK(cudaFree(x));
      CK(cudaFree(y));
    }
    for (int mi = 0; mi < 6; ++mi)
      std::printf("  M %2d: cuBLASLt linears %.0f us/token-step (roofline %.0f us)\n", ms[mi], step_us[mi],
                  token_bytes / (copy_bw * 1e9) * 1e6);
  }

  // Device sampling (sample.cu) at the Llama-3 vocab: greedy and top-p rows, batch 1/32/64.
  {
    const int V = 128256;
    float* lg;
    CK(cudaMalloc(&lg, size_t(64) * V * 4));
    std::vector<float> h(size_t(64) * V);
    uint64_t r = 12345;
    for (auto& v : h) {
      r = r * 6364136223846793005ull + 1442695040888963407ull;
      v = static_cast<float>((r >> 40) & 0xffff) / 4096.0f;  // [0, 16): peaked enough for top-p 0.9
    }
    CK(cudaMemcpy(lg, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    spk::cuda::DeviceSampleRow* pr;
    spk::cuda::DeviceSampleOut* po;
    CK(cudaMalloc(&pr, 64 * sizeof(*pr)));
    CK(cudaMalloc(&po, 64 * sizeof(*po)));
    std::printf("\n%-22s %5s %10s\n", "sample (device)", "rows", "us");
    for (int mode = 0; mode < 3; ++mode) {
      std::vector<spk::cuda::DeviceSampleRow> rows(64);
      for (auto& x : rows)
        x = mode == 0   ? spk::cuda::DeviceSampleRow{0.0f, 0, 1.0f, 0.0f, 0.5, 0, 0}
            : mode == 1 ? spk::cuda::DeviceSampleRow{0.8f, 50, 1.0f, 0.0f, 0.5, 0, 0}
                        : spk::cuda::DeviceSampleRow{1.0f, 0, 0.9f, 0.0f, 0.5, 0, 0};
      CK(cudaMemcpy(pr, rows.data(), rows.size() * sizeof(rows[0]), cudaMemcpyHostToDevice));
      for (int b : {1, 32, 64}) {
        (void)spk::cuda::sample_rows(lg, b, V, pr, po, nullptr);
        CK(cudaEventRecord(e0));
        for (int i = 0; i < 20; ++i) (void)spk::cuda::sample_rows(lg, b, V, pr, po, nullptr);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaGetLastError());
        std::printf("%-22s %5d %10.1f\n",
                    mode == 0   ? "greedy"
                    : mode == 1 ? "top-k 50"
                                : "top-p 0.9",
                    b, time_ms(e0, e1) * 1e3 / 20);
      }
    }
    CK(cudaFree(lg));
    CK(cudaFree(pr));
    CK(cudaFree(po));
  }

  // Attention at the 8B shape (32 q heads, 8 kv heads, head_dim 128, block 16): decode (one token per
  // sequence at context C) and prefill (one sequence of T tokens, causal), both kernels.
  {
    const int hq = 32, hk = 8, d = 128, bs = 16, maxT = 8192;
    const int nblocks = maxT / bs * 2;
    bf16 *kc, *vc;
    float *q, *o;
    int32_t *pos, *toff, *tab;
    int2* tiles;
    CK(cudaMalloc(&kc, size_t(nblocks) * bs * hk * d * 2));
    CK(cudaMalloc(&vc, size_t(nblocks) * bs * hk * d * 2));
    fill(kc, size_t(nblocks) * bs * hk * d * 2);
    fill(vc, size_t(nblocks) * bs * hk * d * 2);
    CK(cudaMalloc(&q, size_t(maxT) * hq * d * 4));
    CK(cudaMalloc(&o, size_t(maxT) * hq * d * 4));
    CK(cudaMemset(q, 0, size_t(maxT) * hq * d * 4));
    CK(cudaMalloc(&pos, maxT * 4));
    CK(cudaMalloc(&toff, maxT * 4));
    CK(cudaMalloc(&tab, nblocks * 4));
    CK(cudaMalloc(&tiles, maxT * 8));
    std::vector<int32_t> htab(nblocks);
    for (int i = 0; i < nblocks; ++i) htab[i] = (i * 7) % nblocks;
    CK(cudaMemcpy(tab, htab.data(), nblocks * 4, cudaMemcpyHostToDevice));
    std::printf("\n%-34s %10s\n", "attention (32q/8kv heads, d128)", "us");
    for (int B : {1, 32}) {
      for (int C : {256, 4096}) {
        std::vector<int32_t> hp(B, C - 1), ho(B, 0);
        CK(cudaMemcpy(pos, hp.data(), B * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(toff, ho.data(), B * 4, cudaMemcpyHostToDevice));
        for (int i = 0; i < 3; ++i)
          (void)spk::cuda::paged_attention(q, kc, vc, toff, pos, tab, B, hq, hk, d, bs, 0, 0.088f, o,
                                           nullptr);
        CK(cudaEventRecord(e0));
        for (int i = 0; i < 20; ++i)
          (void)spk::cuda::paged_attention(q, kc, vc, toff, pos, tab, B, hq, hk, d, bs, 0, 0.088f, o,
                                           nullptr);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaGetLastError());
        std::printf("decode  batch %2d context %5d       %10.1f\n", B, C, time_ms(e0, e1) * 1e3 / 20);
      }
    }
    for (int T : {1024, 8192}) {
      std::vector<int32_t> hp(T), ho(T, 0), ht;
      for (int i = 0; i < T; ++i) hp[i] = i;
      for (int r = 0; r < T; r += 64) {
        ht.push_back(r);
        ht.push_back(64);
      }
      CK(cudaMemcpy(pos, hp.data(), T * 4, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(toff, ho.data(), T * 4, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(tiles, ht.data(), ht.size() * 4, cudaMemcpyHostToDevice));
      for (int k = 0; k < 2; ++k) {
        auto launch = [&] {
          return k == 0 ? spk::cuda::prefill_attention(q, kc, vc, tiles, int(ht.size() / 2), toff, pos, tab,
                                                       hq, hk, d, bs, 0, 0.088f, o, nullptr)
                        : spk::cuda::paged_attention(q, kc, vc, toff, pos, tab, T, hq, hk, d, bs, 0, 0.088f,
                                                     o, nullptr);
        };
        (void)launch();
        CK(cudaEventRecord(e0));
        for (int i = 0; i < 3; ++i) (void)launch();
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaGetLastError());
        const double us = time_ms(e0, e1) * 1e3 / 3;
        const double flop = 4.0 * d * hq * (double(T) * (T + 1) / 2);
        std::printf("prefill %5d tokens (%s) %10.1f  (%.1f TFLOP/s)\n", T, k == 0 ? "tiled   " : "per-tok ",
                    us, flop / (us * 1e-6) / 1e12);
      }
    }
    CK(cudaFree(kc));
    CK(cudaFree(vc));
    CK(cudaFree(q));
    CK(cudaFree(o));
  }

  // GEMM at prefill sizes (cuBLASLt bf16, fp32 out).
  auto g = spk::cuda::Gemm::create(8192, 14336);
  if (!g.ok()) {
    std::fprintf(stderr, "%s\n", g.error().what().c_str());
    return 1;
  }
  std::unique_ptr<spk::cuda::Gemm> gemm(*g);
  std::printf("\n%-22s %6s %10s %10s\n", "GEMM bf16 (cuBLASLt)", "M", "us", "TFLOP/s");
  for (const auto& sh : shapes) {
    void* W;
    CK(cudaMalloc(&W, size_t(sh.N) * sh.K * 2));
    fill(W, size_t(sh.N) * sh.K * 2);
    for (int m : {1024, 8192}) {
      if (size_t(m) * sh.N * 4 > (size_t(8) << 30)) continue;
      float *x, *y;
      CK(cudaMalloc(&x, size_t(m) * sh.K * 4));
      CK(cudaMalloc(&y, size_t(m) * sh.N * 4));
      CK(cudaMemset(x, 0x3c, size_t(m) * sh.K * 4));
      for (int i = 0; i < 2; ++i)
        (void)gemm->linear(static_cast<bf16*>(W), nullptr, x, m, sh.N, sh.K, y, nullptr);
      CK(cudaEventRecord(e0));
      const int it = 10;
      for (int i = 0; i < it; ++i) {
        auto st = gemm->linear(static_cast<bf16*>(W), nullptr, x, m, sh.N, sh.K, y, nullptr);
        if (!st.ok()) {
          std::fprintf(stderr, "%s\n", st.error().what().c_str());
          return 1;
        }
      }
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      const double us = time_ms(e0, e1) * 1e3 / it;
      std::printf("%-22s %6d %10.1f %10.1f\n", sh.name, m, us, 2.0 * m * sh.N * sh.K / (us * 1e-6) / 1e12);
      CK(cudaFree(x));
      CK(cudaFree(y));
    }
    CK(cudaFree(W));
  }
  return 0;
}
