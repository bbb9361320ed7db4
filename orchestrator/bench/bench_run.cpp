#include "orchestrator/bench/bench_run.h"

#include <algorithm>
#include <cmath>
#include <future>
#include <nlohmann/json.hpp>

namespace spk::bench {
namespace {

using nlohmann::json;

const char* kChat = "Tell me a long story about a lighthouse keeper who finds a message in a bottle.";
const char* kJson =
    "Return a JSON array of ten objects, each with the fields name, age, city and email, for "
    "invented people. Output only the JSON.";
const char* kCode = "Write a C program that reads lines from stdin, sorts them, and prints them.";

// The ladder's prompt: the chat prompt, padded with filler words to about `input_tokens` tokens when
// asked (--input-len; one short English word is about one token).
std::string ladder_prompt(int input_tokens) {
  std::string p = kChat;
  for (int words = 16; words < input_tokens; ++words) p += " sea";
  return p;
}

json probe_body(const std::string& nonce, const std::string& prompt, int max_tokens) {
  return {{"messages", json::array({{{"role", "user"}, {"content", "[" + nonce + "] " + prompt}}})},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"ignore_eos", true}};
}

SampleStats stats_of(const StreamSample& s) {
  return {s.ttft_s(), s.decode_tok_s(), s.completion_tokens, s.prompt_tokens};
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// A probe must decode exactly the tokens asked for: anything else means the server ignored
// ignore_eos or stopped early, and its tok/s would not be comparable.
Result<SampleStats> probe(const BenchOptions& o, const std::string& nonce, const std::string& prompt) {
  SPK_ASSIGN(StreamSample s, stream_chat(o.ep, probe_body(nonce, prompt, o.probe_tokens)));
  if (s.completion_tokens != o.probe_tokens)
    return make_error(
        "probe " + nonce + " decoded " + std::to_string(s.completion_tokens) + " tokens, not " +
            std::to_string(o.probe_tokens) + " (finish_reason " + s.finish_reason + ")",
        "the server must honour ignore_eos and max_tokens; lower --probe-tokens below max_model_len");
  return stats_of(s);
}

std::string needle_prompt(int approx_tokens, const std::string& code) {
  // ~5 tokens per filler sentence of ~24 characters in common BPE vocabularies.
  const std::vector<std::string> filler = {"The grass is green. ", "The sky is blue. ", "The sun is warm. ",
                                           "The river runs on. ", "Here we go again. "};
  const int sentences = std::max(1, approx_tokens / 5);
  std::string text;
  for (int i = 0; i < sentences; ++i) {
    if (i == sentences / 2) text += "The secret code is " + code + ". Remember it. ";
    text += filler[i % filler.size()];
  }
  return text + "\nWhat is the secret code? Answer with the code only.";
}

NeedleResult run_needle(const BenchOptions& o) {
  NeedleResult r;
  r.needle = std::to_string(100000 + std::hash<std::string>{}(o.run_id) % 900000);
  int tokens = o.needle_tokens;
  for (int attempt = 0; attempt < 4 && tokens >= 64; ++attempt, tokens = tokens * 2 / 3) {
    json body = probe_body("needle " + o.run_id, needle_prompt(tokens, r.needle), 16);
    body["ignore_eos"] = false;
    auto s = stream_chat(o.ep, body);
    if (!s) {
      r.answer = s.error().message;  // a prompt over max_model_len: try shorter
      continue;
    }
    r.ran = true;
    r.prompt_tokens = s->prompt_tokens;
    r.ttft_s = s->ttft_s();
    r.answer = s->text;
    r.found = s->text.find(r.needle) != std::string::npos;
    break;
  }
  return r;
}

}  // namespace

std::vector<int> doubling_ladder(int max) {
  std::vector<int> v;
  for (int c = 1; c <= max; c *= 2) v.push_back(c);
  if (max >= 1 && v.back() != max) v.push_back(max);
  return v;
}

LevelResult summarize_level(int concurrency, const std::vector<StreamSample>& ok, int failed) {
  LevelResult l;
  l.concurrency = concurrency;
  l.completed = static_cast<int>(ok.size());
  l.failed = failed;
  if (ok.empty()) return l;
  auto t0 = ok.front().t_start, first = ok.front().t_first, last = ok.front().t_last;
  double tokens = 0, per_stream = 0, ttft = 0;
  for (const auto& s : ok) {
    t0 = std::min(t0, s.t_start);
    first = std::min(first, s.t_first);
    last = std::max(last, s.t_last);
    tokens += std::max(0, s.completion_tokens - 1);
    per_stream += s.decode_tok_s();
    ttft += s.ttft_s();
  }
  std::vector<double> ttfts, tpots, itls;
  for (const auto& s : ok) {
    ttfts.push_back(s.ttft_s());
    if (s.completion_tokens >= 2) tpots.push_back(s.tpot_s());
    for (size_t i = 1; i < s.text_times.size(); ++i)
      itls.push_back(std::chrono::duration<double>(s.text_times[i] - s.text_times[i - 1]).count());
  }
  l.ttft = percentiles(ttfts);
  l.tpot = percentiles(tpots);
  l.itl = percentiles(itls);
  const double window = std::chrono::duration<double>(last - first).count();
  l.aggregate_decode_tok_s = window > 0 ? tokens / window : 0;
  l.mean_stream_decode_tok_s = per_stream / ok.size();
  l.mean_ttft_s = ttft / ok.size();
  l.wall_s = std::chrono::duration<double>(last - t0).count();
  l.request_throughput = l.wall_s > 0 ? l.completed / l.wall_s : 0;
  return l;
}

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) {  // nearest rank: the smallest value with at least q of the samples at or below
    size_t k = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, k == 0 ? 0 : k - 1)];
  };
  p.p50 = rank(0.50), p.p90 = rank(0.90), p.p99 = rank(0.99);
  return p;
}

Result<BenchReport> run_bench(const BenchOptions& o) {
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  BenchReport rep;
  rep.model = o.ep.model;
  rep.endpoint = "http://" + o.ep.host + ":" + std::to_string(o.ep.port) + "/v1";
  rep.probe_tokens = o.probe_tokens;

  // The first request after ready, then the steady state it is compared with.
  SPK_ASSIGN(rep.first_request, probe(o, o.run_id + "-first", kChat));
  say("first request: " + std::to_string(rep.first_request.decode_tok_s) + " tok/s");
  WorkloadResult chat{"chat", {}, 0, 0};
  for (int i = 0; i < std::max(1, o.repeats); ++i) {
    SPK_ASSIGN(SampleStats s, probe(o, o.run_id + "-chat-" + std::to_string(i), kChat));
    chat.samples.push_back(s);
  }
  for (auto [name, prompt] : {std::pair{"json", kJson}, std::pair{"code", kCode}}) {
    WorkloadResult w{name, {}, 0, 0};
    SPK_ASSIGN(SampleStats s, probe(o, o.run_id + "-" + name, prompt));
    w.samples.push_back(s);
    rep.workloads.push_back(w);
  }
  rep.workloads.insert(rep.workloads.begin(), chat);
  for (auto& w : rep.workloads) {
    std::vector<double> d, t;
    for (const auto& s : w.samples) {
      d.push_back(s.decode_tok_s);
      t.push_back(s.ttft_s);
    }
    w.median_decode_tok_s = median(d);
    w.median_ttft_s = median(t);
    say(w.name + ": " + std::to_string(w.median_decode_tok_s) + " tok/s");
  }
  rep.steady = {rep.workloads[0].median_ttft_s, rep.workloads[0].median_decode_tok_s, o.probe_tokens, 0};
  if (rep.steady.decode_tok_s > 0)
    rep.first_vs_steady_pct =
        100.0 * (rep.steady.decode_tok_s - rep.first_request.decode_tok_s) / rep.steady.decode_tok_s;

  for (int c : o.ladder) {
    std::vector<std::future<Result<StreamSample>>> fs;
    for (int i = 0; i < c; ++i) {
      const std::string nonce = o.run_id + "-c" + std::to_string(c) + "-" + std::to_string(i);
      fs.push_back(std::async(std::launch::async, [&o, nonce] {
        return stream_chat(o.ep, probe_body(nonce, ladder_prompt(o.input_tokens), o.probe_tokens));
      }));
    }
    std::vector<StreamSample> ok;
    int failed = 0;
    std::string first_error;
    for (auto& f : fs) {
      auto r = f.get();
      if (r && r->completion_tokens == o.probe_tokens) {
        ok.push_back(*r);
      } else {
        ++failed;
        if (first_error.empty())
          first_error = r ? "decoded " + std::to_string(r->completion_tokens) + " tokens" : r.error().what();
      }
    }
    LevelResult l = summarize_level(c, ok, failed);
    l.first_error = first_error;
    say("concurrency " + std::to_string(c) + ": " + std::to_string(l.aggregate_decode_tok_s) +
        " tok/s aggregate");
    rep.ladder.push_back(l);
  }
  if (o.needle_tokens > 0) rep.needle = run_needle(o);
  return rep;
}

}  // namespace spk::bench
