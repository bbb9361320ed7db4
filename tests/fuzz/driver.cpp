// The fuzz harnesses without libFuzzer (any compiler, CTest): every file of the corpus directories,
// then `-runs=N` seeded mutations of them (bit flips, interesting bytes, inserted/deleted/duplicated
// spans, splices of two inputs, tokens of a small dictionary). A crash is the process dying; the seed and
// the run number are printed first so a failure reproduces (-seed=S -runs=N). Flags mirror libFuzzer's
// where they overlap: -runs=N -seed=S -max_len=N -max_total_time=S.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz.h"

namespace {

namespace fs = std::filesystem;

std::vector<std::string> load_corpus(const std::vector<std::string>& dirs) {
  std::vector<std::string> out;
  for (const auto& d : dirs) {
    std::vector<fs::path> files;
    std::error_code ec;
    if (fs::is_regular_file(d, ec)) files.emplace_back(d);
    for (auto it = fs::directory_iterator(d, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
      if (it->is_regular_file()) files.push_back(it->path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      out.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  return out;
}

// Tokens that matter to the parsers: JSON/YAML structure, numbers at type limits, bad UTF-8.
const char* const kDict[] = {"{",
                             "}",
                             "[",
                             "]",
                             "\"",
                             ":",
                             ",",
                             "null",
                             "true",
                             "-1",
                             "0",
                             "1e309",
                             "NaN",
                             "9223372036854775808",
                             "18446744073709551616",
                             "4294967296",
                             "\\u0000",
                             "\\ud800",
                             "\xff",
                             "\xc0\x80",
                             "\xed\xa0\x80",
                             "\xf4\x90\x80\x80",
                             "\n",
                             "- ",
                             ": ",
                             "&a ",
                             "*a",
                             "!!binary ",
                             "---\n",
                             "\t",
                             "'",
                             "\"dtype\"",
                             "\"shape\"",
                             "\"data_offsets\"",
                             "\"F32\"",
                             "\"BF16\"",
                             "\"__metadata__\"",
                             "\"model\"",
                             "\"messages\"",
                             "\"role\"",
                             "\"content\"",
                             "\"max_tokens\"",
                             "\"stop\"",
                             "\"tools\"",
                             "\"vocab\"",
                             "\"merges\"",
                             "\"added_tokens\"",
                             "\"pre_tokenizer\"",
                             "\"pattern\"",
                             "\"Regex\"",
                             "(?<",
                             "\\p{L}",
                             "\"hidden_size\"",
                             "\"num_attention_heads\"",
                             "\"rope_scaling\"",
                             "\"architectures\""};

std::string mutate(std::string s, const std::vector<std::string>& corpus, std::mt19937_64& rng,
                   size_t max_len) {
  auto pick = [&](size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng() % n); };
  const int steps = 1 + static_cast<int>(rng() % 4);
  for (int k = 0; k < steps; ++k) {
    switch (rng() % 9) {
      case 0:  // flip a bit
        if (!s.empty()) s[pick(s.size())] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1: {  // interesting byte
        static const unsigned char b[] = {0,   0x20, 0x7f, 0x80, 0xbf, 0xc0, 0xff,
                                          '"', '\\', '{',  '[',  ':',  '\n'};
        if (!s.empty()) s[pick(s.size())] = static_cast<char>(b[pick(sizeof b)]);
        break;
      }
      case 2:  // delete a span
        if (!s.empty()) {
          const size_t at = pick(s.size());
          s.erase(at, 1 + pick(std::min<size_t>(16, s.size() - at)));
        }
        break;
      case 3: {  // duplicate a span
        if (s.empty()) break;
        const size_t at = pick(s.size()), len = 1 + pick(std::min<size_t>(64, s.size() - at));
        s.insert(pick(s.size() + 1), s.substr(at, len));
        break;
      }
      case 4:  // dictionary token
      case 5:
        s.insert(pick(s.size() + 1), kDict[pick(std::size(kDict))]);
        break;
      case 6: {  // splice with another input
        const std::string& o = corpus[pick(corpus.size())];
        const size_t cut = pick(s.size() + 1), from = pick(o.size() + 1);
        s = s.substr(0, cut) + o.substr(from);
        break;
      }
      case 7:  // random digits (lengths, offsets, sizes)
        s.insert(pick(s.size() + 1), std::to_string(rng() >> (rng() % 64)));
        break;
      case 8:  // overwrite a little-endian u64 at the front (safetensors length) or anywhere
        if (s.size() >= 8) {
          const uint64_t v = (rng() % 2) ? rng() % 4096 : rng();
          std::memcpy(s.data() + ((rng() % 2) ? 0 : pick(s.size() - 7)), &v, 8);
        }
        break;
    }
  }
  if (s.size() > max_len) s.resize(max_len);
  return s;
}

// The input being run, written to ./fuzz-crash-<pid> when the harness dies (signal-safe calls only).
const std::string* g_current = nullptr;

void on_crash(int sig) {
  if (g_current != nullptr) {
    char name[64] = "fuzz-crash-";
    std::snprintf(name + 11, sizeof(name) - 11, "%d", static_cast<int>(::getpid()));
    const int fd = ::open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      [[maybe_unused]] auto w = ::write(fd, g_current->data(), g_current->size());
      ::close(fd);
    }
    const char msg[] = "driver: crashing input written to ./fuzz-crash-<pid>\n";
    [[maybe_unused]] auto w = ::write(2, msg, sizeof(msg) - 1);
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void run_one(const std::string& in) {
  g_current = &in;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(in.data()), in.size());
  g_current = nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t runs = 0, seed = 1, max_len = 65536;
  double max_time = 0;
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&](const char* k) { return a.rfind(k, 0) == 0 ? a.c_str() + std::strlen(k) : nullptr; };
    if (const char* v = val("-runs="))
      runs = std::strtoull(v, nullptr, 10);
    else if (const char* v = val("-seed="))
      seed = std::strtoull(v, nullptr, 10);
    else if (const char* v = val("-max_len="))
      max_len = std::strtoull(v, nullptr, 10);
    else if (const char* v = val("-max_total_time="))
      max_time = std::strtod(v, nullptr);
    else if (a.rfind("-", 0) == 0)
      std::fprintf(stderr, "driver: ignoring %s\n", a.c_str());
    else
      dirs.push_back(a);
  }
  std::vector<std::string> corpus = load_corpus(dirs);
  if (corpus.empty()) {
    std::fprintf(stderr, "driver: no corpus files in the given directories\n");
    return 2;
  }
  std::fprintf(stderr, "driver: %zu corpus inputs, %llu mutations, seed %llu\n", corpus.size(),
               static_cast<unsigned long long>(runs), static_cast<unsigned long long>(seed));
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, on_crash);
  for (const auto& c : corpus) run_one(c);
  std::mt19937_64 rng(seed);
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t done = 0;
  for (; runs == 0 || done < runs; ++done) {
    if (max_time > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > max_time)
      break;
    if (runs == 0 && max_time == 0) break;
    const std::string in = mutate(corpus[rng() % corpus.size()], corpus, rng, max_len);
    run_one(in);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "driver: %llu mutated inputs in %.1f s, no crash (seed %llu)\n",
               static_cast<unsigned long long>(done), s, static_cast<unsigned long long>(seed));
  return 0;
}
