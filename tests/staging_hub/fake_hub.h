// A fake Hugging Face hub for tests (cpp-httplib on 127.0.0.1) that speaks the resolve protocol: LFS
// files redirect to a CDN path with X-Linked-Etag/X-Linked-Size, small files answer with ETag. Faults on
// demand: a dropped connection mid-body, a wrong size, a wrong hash.
#pragma once

#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "orchestrator/staging/hub/hub_download.h"
#include "orchestrator/staging/hub/sha256.h"

namespace spk::testing {

namespace fs = std::filesystem;
using namespace spk::staging;

inline const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";
inline const std::string kRepo = "acme/tiny";

struct TempDir {
  fs::path p = fs::temp_directory_path() / ("spk_hub_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(p); }
  ~TempDir() { fs::remove_all(p); }
};

inline std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(g());
  return s;
}

// A safetensors file the completeness check accepts: header {"w": F32 [n]} then 4n bytes.
inline std::string safetensors(std::size_t floats, unsigned seed) {
  std::string h = R"({"w":{"dtype":"F32","shape":[)" + std::to_string(floats) + R"(],"data_offsets":[0,)" +
                  std::to_string(4 * floats) + "]}}";
  std::uint64_t n = h.size();
  return std::string(reinterpret_cast<char*>(&n), 8) + h + random_bytes(4 * floats, seed);
}

struct FakeHub {
  std::map<std::string, std::string> files;  // name -> content
  std::set<std::string> lfs;
  std::atomic<int> requests{0}, ranged{0};
  std::atomic<int> drop_once{0};  // the next N CDN bodies stop halfway
  bool wrong_hash = false, wrong_size = false;
  std::string token;  // required when set
  httplib::Server srv;
  int port = 0;
  std::thread t;

  FakeHub() {
    files["config.json"] = R"({"model_type":"llama"})";
    files["tokenizer.json"] = R"({"model":{}})";
    files["tokenizer_config.json"] = R"({"chat_template":""})";
    files["model-00001-of-00002.safetensors"] = safetensors(300000, 1);
    files["model-00002-of-00002.safetensors"] = safetensors(70001, 2);
    files["model.safetensors.index.json"] =
        R"({"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})";
    files["README.md"] = "not wanted";
    lfs = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
    auto authorized = [this](const httplib::Request& q, httplib::Response& r) {
      ++requests;
      if (token.empty() || q.get_header_value("Authorization") == "Bearer " + token) return true;
      r.status = 401;
      return false;
    };
    srv.Get(R"(/api/models/acme/tiny/revision/([^/]+))",
            [this, authorized](const httplib::Request& q, httplib::Response& r) {
              if (!authorized(q, r)) return;
              if (q.matches[1] != "main" && q.matches[1] != kCommit) {
                r.status = 404;
                return;
              }
              nlohmann::json sib = nlohmann::json::array();
              for (const auto& [n, c] : files) sib.push_back({{"rfilename", n}});
              r.set_content(nlohmann::json{{"sha", kCommit}, {"siblings", sib}}.dump(), "application/json");
            });
    srv.Get(R"(/acme/tiny/resolve/([0-9a-f]+)/(.+))",
            [this, authorized](const httplib::Request& q, httplib::Response& r) {
              if (!authorized(q, r)) return;
              std::string name = q.matches[2];
              if (!files.count(name) || q.matches[1] != kCommit) {
                r.status = 404;
                return;
              }
              const std::string& c = files[name];
              r.set_header("X-Repo-Commit", kCommit);
              if (lfs.count(name)) {
                std::string sha = sha256_hex(c);
                r.status = 302;
                r.set_header("Location", "/cdn/" + sha);
                r.set_header("X-Linked-Etag", "\"" + sha + "\"");
                r.set_header("X-Linked-Size", std::to_string(c.size()));
                return;
              }
              r.set_header("ETag", "\"" + sha256_hex(c).substr(0, 40) + "\"");
              r.set_content(c, "application/octet-stream");
            });
    srv.Get(R"(/cdn/([0-9a-f]{64}))", [this](const httplib::Request& q, httplib::Response& r) {
      ++requests;
      std::string content;
      for (const auto& [n, c] : files)
        if (sha256_hex(c) == q.matches[1].str()) content = c;
      if (wrong_hash) content[content.size() / 2] ^= 1;
      if (wrong_size) content += "extra";
      if (q.has_header("Range")) ++ranged;
      if (drop_once > 0) {
        --drop_once;
        auto data = std::make_shared<std::string>(content);
        r.set_content_provider(data->size(), "application/octet-stream",
                               [data](std::size_t off, std::size_t, httplib::DataSink& sink) {
                                 if (off >= data->size() / 2) return false;  // hang up halfway
                                 sink.write(data->data() + off, data->size() / 2 - off);
                                 return true;
                               });
        return;
      }
      r.set_content(content, "application/octet-stream");  // httplib serves Range requests itself
    });
    port = srv.bind_to_any_port("127.0.0.1");
    t = std::thread([this] { srv.listen_after_bind(); });
    while (!srv.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~FakeHub() {
    srv.stop();
    t.join();
  }
  HubOptions opts(const fs::path& cache) {
    HubOptions o;
    o.endpoint = "http://127.0.0.1:" + std::to_string(port);
    o.cache_root = cache.string();
    o.retries = 2;
    o.parallel = 3;
    o.token = token;
    return o;
  }
};

}  // namespace spk::testing
