// Stand-in for `sparkctl runtime serve` in orchestration tests (up's SPARKCTL_RUNTIME_STANDIN hook): takes
// the same flags, and rank 0 answers the OpenAI routes the orchestrator uses — GET /health, POST
// /v1/chat/completions with `Authorization: Bearer $<--api-key-env>` (401 otherwise), one token per
// max_tokens — and prints the planner's "KV cache size: N tokens" and "ready:" lines. Other ranks only
// wait. SIGTERM/SIGINT end it with exit 0. SPK_FAKE_FAIL_MAX_TOKENS=N: requests with max_tokens >= N get 500.
// It exits by itself after 600 s so that a leaked one cannot outlive a test run for long.
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  std::string host = "127.0.0.1", key_env = "SPARKCTL_API_KEY", model = "fake";
  int port = 8000, rank = 0, world = 1;
  for (int i = 1; i + 1 < argc; ++i) {
    std::string a = argv[i];
    if (a == "--host")
      host = argv[++i];
    else if (a == "--port")
      port = std::atoi(argv[++i]);
    else if (a == "--rank")
      rank = std::atoi(argv[++i]);
    else if (a == "--tensor-parallel-size")
      world = std::atoi(argv[++i]);
    else if (a == "--api-key-env")
      key_env = argv[++i];
    else if (a == "--served-model-name")
      model = argv[++i];
  }
  const char* k = std::getenv(key_env.c_str());
  if (!k || !*k) {
    std::fprintf(stderr, "fake serve: $%s is empty\n", key_env.c_str());
    return 2;
  }
  const std::string key = k;
  // SPK_FAKE_START_FAIL_FILE=path: while that file exists the engine dies at start (exit 1).
  if (const char* f = std::getenv("SPK_FAKE_START_FAIL_FILE"); f && ::access(f, F_OK) == 0) {
    std::fprintf(stderr, "fake serve: %s exists: dying at start\n", f);
    return 1;
  }
  const char* fail_env = std::getenv("SPK_FAKE_FAIL_MAX_TOKENS");  // requests asking this many tokens get 500
  const int fail_from = fail_env ? std::atoi(fail_env) : 0;
  std::printf("fake serve: rank %d of %d, pid %d\n", rank, world, static_cast<int>(::getpid()));
  std::fflush(stdout);
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  if (rank != 0) {
    timespec ts{600, 0};
    int sig = sigtimedwait(&sigs, nullptr, &ts);
    std::printf("fake serve: rank %d stops (signal %d)\n", rank, sig);
    return 0;
  }
  httplib::Server s;
  // SPK_FAKE_HEALTH_FAIL_FILE=path: while that file exists /health answers 503 (a hung engine).
  const char* hang_file = std::getenv("SPK_FAKE_HEALTH_FAIL_FILE");
  s.Get("/health", [hang_file](const httplib::Request&, httplib::Response& res) {
    if (hang_file && ::access(hang_file, F_OK) == 0) {
      res.status = 503;
      return;
    }
    res.set_content("ok", "text/plain");
  });
  s.Post("/v1/chat/completions", [&](const httplib::Request& req, httplib::Response& res) {
    if (req.get_header_value("Authorization") != "Bearer " + key) {
      res.status = 401;
      res.set_content(R"({"error":{"message":"bad key"}})", "application/json");
      return;
    }
    auto body = nlohmann::json::parse(req.body, nullptr, false);
    int max_tokens = body.is_object() ? body.value("max_tokens", 16) : 16;
    std::printf("fake serve: chat completion, max_tokens %d\n", max_tokens);
    std::fflush(stdout);
    if (fail_from > 0 && max_tokens >= fail_from) {  // a fault for the tests: this shape breaks the engine
      res.status = 500;
      res.set_content(R"({"error":{"message":"fake serve: injected failure"}})", "application/json");
      return;
    }
    std::string text;
    for (int i = 0; i < max_tokens; ++i) text += "hi ";
    nlohmann::json out{
        {"id", "chatcmpl-fake"},
        {"object", "chat.completion"},
        {"model", model},
        {"choices",
         {{{"index", 0},
           {"message", {{"role", "assistant"}, {"content", text}}},
           {"finish_reason", "length"}}}},
        {"usage",
         {{"prompt_tokens", 5}, {"completion_tokens", max_tokens}, {"total_tokens", 5 + max_tokens}}}};
    res.set_content(out.dump(), "application/json");
  });
  if (!s.bind_to_port(host, port)) {
    std::fprintf(stderr, "fake serve: cannot bind %s:%d\n", host.c_str(), port);
    return 1;
  }
  std::thread stopper([&] {
    timespec ts{600, 0};
    sigtimedwait(&sigs, nullptr, &ts);
    s.stop();
  });
  std::printf("KV cache size: 4096 tokens\nready: serving %s on http://%s:%d\n", model.c_str(), host.c_str(),
              port);
  std::fflush(stdout);
  s.listen_after_bind();
  pthread_kill(stopper.native_handle(), SIGTERM);
  stopper.join();
  return 0;
}
