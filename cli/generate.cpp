// `sparkctl generate`: one prompt through the embedded runtime, text streamed to stdout, speed on stderr.
//   sparkctl generate --model DIR --prompt "text" | --chat "message" | --prompt-ids 1,2,3
// --dump-logits FILE writes the prefill's last-position logits summary and the generated ids in the
// format scripts/hf_reference.py writes from Hugging Face (runtime/model/logits_summary.h).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/json_out.h"
#include "cli/verbs.h"
#include "kernels/base/fs.h"
#include "runtime/chat/chat_template.h"
#include "runtime/model/logits_summary.h"
#include "runtime/model/model.h"
#include "runtime/sampler/sampler.h"
#include "runtime/sampler/stop_checker.h"
#include "runtime/tokenizer/tokenizer.h"

namespace spk::cli {
namespace {

struct GenerateFlags {
  std::string model;
  std::string prompt, chat, system, prompt_ids;
  int max_tokens = 64;
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;
  bool ignore_eos = false;
  std::string dump_logits;
  std::string backend = "cpu";
  int threads = 0;
  bool refuse_nonfinite = false;
  int block_size = 16;
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// "1,2,3" or "[1, 2, 3]".
Result<std::vector<int32_t>> parse_ids(const std::string& s) {
  std::string t;
  for (char c : s) t += (c == '[' || c == ']' || c == ',') ? ' ' : c;
  std::istringstream in(t);
  std::vector<int32_t> ids;
  std::string tok;
  while (in >> tok) {
    size_t pos = 0;
    long v = -1;
    try {
      v = std::stol(tok, &pos);
    } catch (...) {
      pos = 0;
    }
    if (pos != tok.size() || v < 0 || v > INT32_MAX)
      return make_error("--prompt-ids: '" + tok + "' is not a token id", "pass ids like 1,2,3 or [1,2,3]");
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) return make_error("--prompt-ids is empty", "pass at least one id: --prompt-ids 1,2,3");
  return ids;
}

struct Prompt {
  std::vector<int32_t> ids;
  std::shared_ptr<rt::Tokenizer> tok;  // null when only ids were given and the model dir has no tokenizer
};

Result<Prompt> build_prompt(const GenerateFlags& f) {
  const int given = !f.prompt.empty() + !f.chat.empty() + !f.prompt_ids.empty();
  if (given != 1)
    return make_error(
        "give exactly one of --prompt, --chat, --prompt-ids (got " + std::to_string(given) + ")",
        "e.g. --prompt \"Hello\"");
  Prompt p;
  auto tok = rt::Tokenizer::load(f.model);
  if (!f.prompt_ids.empty()) {
    SPK_ASSIGN(p.ids, parse_ids(f.prompt_ids));
    if (tok.ok()) p.tok = *tok;
    return p;
  }
  if (!tok.ok()) return tok.error();
  p.tok = *tok;
  if (!f.prompt.empty()) {
    p.ids = p.tok->encode(f.prompt, /*add_special_tokens=*/true);
  } else {
    SPK_ASSIGN(rt::ChatConfig chat, rt::load_chat_config(f.model));
    if (!chat.chat_template)
      return make_error(f.model + "/tokenizer_config.json has no chat_template",
                        "use --prompt instead of --chat");
    nlohmann::json messages = nlohmann::json::array();
    if (!f.system.empty()) messages.push_back({{"role", "system"}, {"content", f.system}});
    messages.push_back({{"role", "user"}, {"content", f.chat}});
    nlohmann::json context = {{"messages", messages},
                              {"add_generation_prompt", true},
                              {"bos_token", chat.bos_token},
                              {"eos_token", chat.eos_token}};
    SPK_ASSIGN(std::string text, chat.chat_template->render(context));
    p.ids = p.tok->encode(text, /*add_special_tokens=*/false);  // the template wrote the specials
  }
  if (p.ids.empty()) return make_error("the prompt encodes to no tokens", "pass a non-empty prompt");
  return p;
}

Status run_generate(const GenerateFlags& f, Context& ctx) {
  if (f.max_tokens < 0)
    return make_error("--max-tokens " + std::to_string(f.max_tokens) + " is negative", "pass >= 0");
  if (f.block_size <= 0) return make_error("--block-size must be > 0", "pass e.g. --block-size 16");
  rt::SamplingParams sp;
  sp.temperature = f.temperature;
  sp.top_k = f.top_k;
  sp.top_p = f.top_p;
  sp.seed = f.seed;
  sp.max_tokens = f.max_tokens;
  sp.ignore_eos = f.ignore_eos;
  SPK_TRY(rt::validate(sp));
  SPK_ASSIGN(Prompt prompt, build_prompt(f));

  const auto t_load = Clock::now();
  SPK_ASSIGN(
      std::unique_ptr<rt::Model> model,
      rt::Model::load(f.model,
                      {.backend = f.backend, .threads = f.threads, .refuse_nonfinite = f.refuse_nonfinite}));
  const rt::ModelConfig& cfg = model->config();
  const double load_s = seconds_since(t_load);
  const int total = static_cast<int>(prompt.ids.size()) + f.max_tokens;
  const int blocks = (total + f.block_size - 1) / f.block_size;
  SPK_TRY(model->allocate_kv(blocks, f.block_size));
  std::cerr << "loaded " << cfg.architecture << " (" << rt::arch_name(cfg.arch) << ", "
            << cfg.num_hidden_layers << " layers, hidden " << cfg.hidden_size << ", vocab " << cfg.vocab_size
            << ", " << model->weight_bytes() / 1e6 << " MB weights) in " << load_s << " s; prompt "
            << prompt.ids.size() << " tokens\n";

  rt::SeqSlice seq;
  seq.block_table.resize(blocks);
  for (int b = 0; b < blocks; ++b) seq.block_table[b] = b;
  std::vector<int32_t> history = prompt.ids, generated;
  std::vector<float> logits;
  rt::Sampler sampler(sp, f.seed);
  sampler.set_prompt_length(prompt.ids.size());
  std::unique_ptr<rt::IncrementalDecoder> dec;
  if (prompt.tok) dec = std::make_unique<rt::IncrementalDecoder>(prompt.tok, /*skip_special_tokens=*/true);
  const bool stream = !ctx.global.json;
  std::string text;
  nlohmann::json first_logits;

  // Step 0 is the prefill of the whole prompt; every later step decodes one token.
  double prefill_s = 0, decode_s = 0;
  rt::FinishReason finish = f.max_tokens == 0 ? rt::FinishReason::length : rt::FinishReason::none;
  std::vector<int32_t> step_tokens = prompt.ids;
  while (finish == rt::FinishReason::none) {
    const auto t0 = Clock::now();
    rt::StepBatch b;
    b.tokens = step_tokens;
    const int start = static_cast<int>(history.size() - step_tokens.size());
    for (int i = 0; i < static_cast<int>(step_tokens.size()); ++i) b.positions.push_back(start + i);
    seq.q_start = 0;
    seq.q_len = static_cast<int32_t>(step_tokens.size());
    seq.ctx_len = static_cast<int32_t>(history.size());
    b.seqs = {seq};
    b.logit_rows = {seq.q_len - 1};
    SPK_TRY(model->forward(b, logits));
    const int32_t next = sampler.sample(logits.data(), cfg.vocab_size, history);
    (generated.empty() ? prefill_s : decode_s) += seconds_since(t0);
    if (generated.empty() && !f.dump_logits.empty())
      first_logits = rt::summarize_logits(logits.data(), cfg.vocab_size);
    generated.push_back(next);
    history.push_back(next);
    step_tokens = {next};
    finish = rt::check_stop_token(sp, next, generated.size(), cfg.eos_token_ids);
    const bool is_stop_token = finish == rt::FinishReason::stop;
    if (dec && !is_stop_token) {
      std::string piece = dec->push(next);
      text += piece;
      if (stream) std::cout << piece << std::flush;
    }
  }
  if (dec) {
    std::string rest = dec->finish();
    text += rest;
    if (stream) std::cout << rest;
  }
  if (stream) std::cout << (dec ? "\n" : "");
  if (stream && !dec) {  // no tokenizer: print the ids
    for (size_t i = 0; i < generated.size(); ++i) std::cout << (i ? "," : "") << generated[i];
    std::cout << "\n";
  }
  // Decode speed counts the steps after the prefill (the first generated token comes from the prefill).
  const size_t decoded = generated.empty() ? 0 : generated.size() - 1;
  const double prefill_tps = prefill_s > 0 ? prompt.ids.size() / prefill_s : 0;
  const double decode_tps = decode_s > 0 ? decoded / decode_s : 0;
  std::fprintf(stderr,
               "prefill: %zu tokens in %.1f ms (%.1f tok/s); decode: %zu tokens in %.1f ms (%.1f tok/s)\n",
               prompt.ids.size(), prefill_s * 1e3, prefill_tps, decoded, decode_s * 1e3, decode_tps);
  const char* reason = finish == rt::FinishReason::stop ? "stop" : "length";

  if (!f.dump_logits.empty()) {
    nlohmann::json d = {{"format", "sparkctl-logits-v1"},
                        {"source", "sparkctl " SPARKCTL_VERSION " backend " + f.backend},
                        {"model", f.model},
                        {"architecture", cfg.architecture},
                        {"prompt_ids", prompt.ids},
                        {"last_logits", first_logits},
                        {"tokens", generated}};
    SPK_TRY(write_file_atomic(f.dump_logits, json_text(d, -1) + "\n"));
  }
  if (ctx.global.json) {
    nlohmann::json out = {{"text", text},
                          {"prompt_tokens", prompt.ids.size()},
                          {"tokens", generated},
                          {"finish_reason", reason},
                          {"prefill_tok_s", prefill_tps},
                          {"decode_tok_s", decode_tps},
                          {"load_s", load_s}};
    std::cout << json_text(out, -1) << "\n";
  }
  return ok_status();
}

}  // namespace

void setup_generate(CLI::App& app, Context& ctx) {
  auto f = std::make_shared<GenerateFlags>();
  auto* sub =
      app.add_subcommand("generate", "generate text with the embedded runtime (prints text and tok/s)");
  sub->add_option("--model", f->model, "checkpoint directory (config.json, *.safetensors, tokenizer.json)")
      ->required()
      ->envname("SPARKCTL_MODEL");
  sub->add_option("--prompt", f->prompt, "raw prompt text (tokenized with the model's special tokens)");
  sub->add_option("--chat", f->chat, "a user message, rendered with the model's chat template");
  sub->add_option("--system", f->system, "system message for --chat");
  sub->add_option("--prompt-ids", f->prompt_ids, "prompt as token ids: 1,2,3 or [1,2,3]");
  sub->add_option("--max-tokens", f->max_tokens, "tokens to generate at most");
  sub->add_option("--temperature", f->temperature, "0 = greedy");
  sub->add_option("--top-k", f->top_k, "0 = off");
  sub->add_option("--top-p", f->top_p, "nucleus sampling mass");
  sub->add_option("--seed", f->seed, "sampling seed");
  sub->add_flag("--ignore-eos", f->ignore_eos, "keep generating past end-of-sequence tokens");
  sub->add_flag("--refuse-nonfinite", f->refuse_nonfinite,
                "refuse a checkpoint holding NaN/Inf weights (default: load it with a warning)")
      ->envname("SPARKCTL_REFUSE_NONFINITE");
  sub->add_option(
      "--dump-logits", f->dump_logits,
      "write prefill last-position logits summary + generated ids as JSON (scripts/hf_reference.py format)");
  sub->add_option("--backend", f->backend, "cpu (fp32 reference) | cuda (when built)")
      ->envname("SPARKCTL_BACKEND");
  sub->add_option("--threads", f->threads, "CPU backend threads, 0 = all cores")
      ->envname("SPARKCTL_CPU_THREADS");
  sub->add_option("--block-size", f->block_size, "paged KV block size in tokens");
  sub->callback([f, &ctx] {
    auto st = run_generate(*f, ctx);
    if (!st.ok()) {
      print_error("generate", st.error().what());
      ctx.exit_code = kExitFailed;
    }
  });
}

}  // namespace spk::cli
