#include "orchestrator/staging/hub/hub_download.h"

#include <curl/curl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "kernels/base/fs.h"
#include "orchestrator/staging/hub/sha256.h"
#include "orchestrator/staging/verify.h"

namespace spk::staging {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool is_commit(const std::string& s) {
  if (s.size() != 40) return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}
bool is_sha256(const std::string& s) { return s.size() == 64 && std::all_of(s.begin(), s.end(), ::isxdigit); }

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "W/\"abc\"" -> "abc"
std::string clean_etag(std::string e) {
  if (e.rfind("W/", 0) == 0) e = e.substr(2);
  if (e.size() >= 2 && e.front() == '"' && e.back() == '"') e = e.substr(1, e.size() - 2);
  return e;
}

struct Curl {
  CURL* h = curl_easy_init();
  curl_slist* headers = nullptr;
  std::map<std::string, std::string> resp;  // response headers, lower-case names (last response)
  ~Curl() {
    curl_slist_free_all(headers);
    curl_easy_cleanup(h);
  }
};

std::size_t on_header(char* p, std::size_t size, std::size_t n, void* ud) {
  auto* c = static_cast<Curl*>(ud);
  std::string line(p, size * n);
  if (line.rfind("HTTP/", 0) == 0) c->resp.clear();  // a new response (after a redirect)
  auto colon = line.find(':');
  if (colon != std::string::npos) {
    std::string v = line.substr(colon + 1);
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.erase(0, 1);
    while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) v.pop_back();
    c->resp[lower(line.substr(0, colon))] = v;
  }
  return size * n;
}

std::size_t to_string(char* p, std::size_t size, std::size_t n, void* ud) {
  static_cast<std::string*>(ud)->append(p, size * n);
  return size * n;
}

void setup(Curl& c, const std::string& url, const HubOptions& opt, bool follow) {
  curl_easy_setopt(c.h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c.h, CURLOPT_FOLLOWLOCATION, follow ? 1L : 0L);
  curl_easy_setopt(c.h, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(c.h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c.h, CURLOPT_CONNECTTIMEOUT, 30L);
  curl_easy_setopt(c.h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(c.h, CURLOPT_LOW_SPEED_TIME, static_cast<long>(opt.low_speed_time_s));
  curl_easy_setopt(c.h, CURLOPT_USERAGENT, "sparkctl/" SPARKCTL_VERSION);
  curl_easy_setopt(c.h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c.h, CURLOPT_HEADERDATA, &c);
  // libcurl sends Authorization only to the original host (CURLOPT_UNRESTRICTED_AUTH stays off), so the
  // token never reaches a CDN a redirect points to.
  if (!opt.token.empty())
    c.headers = curl_slist_append(c.headers, ("Authorization: Bearer " + opt.token).c_str());
  curl_easy_setopt(c.h, CURLOPT_HTTPHEADER, c.headers);
}

Error http_error(const std::string& what, long code, const std::string& body) {
  std::string fix = code == 401 || code == 403 ? "set HF_TOKEN to a token with access to the repo"
                    : code == 404              ? "check the repo id and revision in the recipe"
                                               : "retry later or set HF_ENDPOINT to a mirror";
  return make_error(what + ": HTTP " + std::to_string(code) + (body.empty() ? "" : " " + body.substr(0, 200)),
                    fix, code >= 500 || code == 429);
}

struct FileMeta {
  std::string name, etag, commit;
  std::uint64_t size = 0;
  bool lfs = false;
};

Result<FileMeta> head_file(const std::string& base, const std::string& repo, const std::string& commit,
                           const std::string& file, const HubOptions& opt) {
  Curl c;
  setup(c, base + "/" + repo + "/resolve/" + commit + "/" + file, opt, false);
  curl_easy_setopt(c.h, CURLOPT_NOBODY, 1L);
  CURLcode rc = curl_easy_perform(c.h);
  if (rc != CURLE_OK)
    return make_error("HEAD " + file + " of " + repo + ": " + curl_easy_strerror(rc),
                      "check the network or HF_ENDPOINT", true);
  long code = 0;
  curl_easy_getinfo(c.h, CURLINFO_RESPONSE_CODE, &code);
  if (code >= 400) return http_error("HEAD " + file + " of " + repo, code, "");
  FileMeta m;
  m.name = file;
  m.commit = c.resp.count("x-repo-commit") ? c.resp["x-repo-commit"] : "";
  m.lfs = c.resp.count("x-linked-etag") > 0;
  m.etag = clean_etag(m.lfs ? c.resp["x-linked-etag"] : c.resp["etag"]);
  std::string size =
      m.lfs && c.resp.count("x-linked-size") ? c.resp["x-linked-size"] : c.resp["content-length"];
  m.size = std::strtoull(size.c_str(), nullptr, 10);
  if (m.etag.empty() || m.etag.find('/') != std::string::npos || m.etag.find("..") != std::string::npos)
    return make_error(file + " of " + repo + ": the hub sent no usable ETag ('" + m.etag + "')",
                      "check HF_ENDPOINT");
  if (m.commit.empty() || m.commit != commit)
    return make_error(
        file + " of " + repo + ": X-Repo-Commit '" + m.commit + "' is not the resolved commit " + commit,
        "the revision moved while downloading: rerun", true);
  return m;
}

struct Sink {
  FILE* f = nullptr;
  Sha256 sha;
  std::uint64_t got = 0;
  long status = 0;
  Curl* c = nullptr;
  const HubOptions* opt = nullptr;
  const FileMeta* meta = nullptr;
};

std::size_t to_file(char* p, std::size_t size, std::size_t n, void* ud) {
  auto* s = static_cast<Sink*>(ud);
  std::size_t len = size * n;
  if (std::fwrite(p, 1, len, s->f) != len) return 0;
  s->sha.update(p, len);
  s->got += len;
  if (s->opt->progress) s->opt->progress(s->meta->name, s->got, s->meta->size);
  return len;
}

// One attempt: appends to `part` from its current size; on return the file holds what arrived.
Status fetch_once(const std::string& url, const std::string& part, const FileMeta& m, const HubOptions& opt) {
  Sink s;
  s.opt = &opt;
  s.meta = &m;
  struct stat st {};
  std::uint64_t have = ::stat(part.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
  if (have > m.size) have = 0;  // longer than the file: start over
  if (have > 0) {               // resume: the hash covers the bytes already on disk
    auto f = std::fopen(part.c_str(), "rb");
    std::vector<char> buf(1 << 20);
    for (std::size_t n; f && (n = std::fread(buf.data(), 1, buf.size(), f)) > 0;) s.sha.update(buf.data(), n);
    if (f) std::fclose(f);
    s.got = have;
  }
  s.f = std::fopen(part.c_str(), have > 0 ? "ab" : "wb");
  if (!s.f) return make_error("cannot write " + part, "check the hub cache dir");
  Curl c;
  s.c = &c;
  setup(c, url, opt, true);
  std::string range = std::to_string(have) + "-";
  if (have > 0) curl_easy_setopt(c.h, CURLOPT_RANGE, range.c_str());
  curl_easy_setopt(c.h, CURLOPT_WRITEFUNCTION, to_file);
  curl_easy_setopt(c.h, CURLOPT_WRITEDATA, &s);
  curl_easy_setopt(c.h, CURLOPT_FAILONERROR, 1L);
  CURLcode rc = curl_easy_perform(c.h);
  long code = 0;
  curl_easy_getinfo(c.h, CURLINFO_RESPONSE_CODE, &code);
  bool ok_close = std::fflush(s.f) == 0 && ::fsync(fileno(s.f)) == 0;
  std::fclose(s.f);
  if (have > 0 && code == 200) {  // the server ignored the range and sent it all: keep only that
    ::truncate(part.c_str(), 0);
    return make_error(m.name + ": the server ignored the resume range", "", true);
  }
  if (rc != CURLE_OK)
    return make_error("GET " + m.name + ": " + curl_easy_strerror(rc) + " after " + std::to_string(s.got) +
                          " of " + std::to_string(m.size) + " bytes",
                      "rerun to resume", true);
  if (!ok_close) return make_error("cannot write " + part, "check the disk");
  if (s.got != m.size) {
    ::unlink(part.c_str());
    return make_error(m.name + ": received " + std::to_string(s.got) +
                          " bytes, X-Linked-Size/Content-Length says " + std::to_string(m.size),
                      "retry later or use another HF_ENDPOINT", true);
  }
  if (m.lfs && is_sha256(m.etag)) {
    std::string got = s.sha.hex();
    if (got != lower(m.etag)) {
      ::unlink(part.c_str());
      return make_error(m.name + ": sha256 " + got + " but the hub says " + m.etag + " (corrupted download)",
                        "retry later or use another HF_ENDPOINT", true);
    }
  }
  return ok_status();
}

Status fetch_file(const std::string& base, const std::string& repo, const std::string& commit,
                  const FileMeta& m, const std::string& repo_dir, const HubOptions& opt,
                  std::atomic<std::uint64_t>& bytes) {
  const std::string blob = repo_dir + "/blobs/" + m.etag;
  struct stat st {};
  if (!(::stat(blob.c_str(), &st) == 0 && static_cast<std::uint64_t>(st.st_size) == m.size)) {
    const std::string part = blob + ".incomplete";
    const std::string url = base + "/" + repo + "/resolve/" + commit + "/" + m.name;
    Status last = ok_status();
    for (int attempt = 0; attempt <= opt.retries; ++attempt) {
      struct stat ps {};
      std::uint64_t before = ::stat(part.c_str(), &ps) == 0 ? static_cast<std::uint64_t>(ps.st_size) : 0;
      last = fetch_once(url, part, m, opt);
      std::uint64_t after = ::stat(part.c_str(), &ps) == 0 ? static_cast<std::uint64_t>(ps.st_size) : 0;
      if (after > before) bytes += after - before;
      if (last.ok() || !last.error().retryable) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200 << std::min(attempt, 4)));
    }
    if (!last.ok()) return last;
    if (::rename(part.c_str(), blob.c_str()) != 0)
      return make_error("cannot rename " + part, "check the hub cache dir");
  }
  // snapshots/<commit>/<dirs...>/<file> -> ../../(../ per dir)blobs/<etag>, swapped in atomically.
  fs::path link = fs::path(repo_dir) / "snapshots" / commit / m.name;
  std::error_code ec;
  fs::create_directories(link.parent_path(), ec);
  std::string target = "../../";
  for (char c : m.name)
    if (c == '/') target += "../";
  target += "blobs/" + m.etag;
  std::string tmp = link.string() + ".tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  if (::symlink(target.c_str(), tmp.c_str()) != 0 || ::rename(tmp.c_str(), link.c_str()) != 0)
    return make_error("cannot link " + link.string(), "check the hub cache dir");
  return ok_status();
}

bool safe_repo_file(const std::string& f) {
  return !f.empty() && f.front() != '/' && f.find("..") == std::string::npos &&
         f.find('\\') == std::string::npos;
}

Result<HubSnapshot> from_cache(const std::string& repo, const std::string& repo_dir, const std::string& rev,
                               const HubOptions& opt) {
  HubSnapshot s;
  s.from_cache = true;
  if (is_commit(rev)) {
    s.commit = rev;
  } else {
    auto ref = read_file(repo_dir + "/refs/" + rev);
    if (!ref.ok()) {
      if (!opt.offline) return make_error("not cached");
      return make_error(repo + "@" + rev + " is not in the hub cache " + opt.cache_root +
                            " and HF_HUB_OFFLINE=1: nothing is downloaded silently",
                        "unset HF_HUB_OFFLINE, or stage the model on a connected machine");
    }
    s.commit = *ref;
    while (!s.commit.empty() && std::isspace(static_cast<unsigned char>(s.commit.back())))
      s.commit.pop_back();
  }
  s.dir = repo_dir + "/snapshots/" + s.commit;
  VerifyReport v = verify_model_dir(s.dir);
  if (!v.complete()) {
    if (!opt.offline) return make_error("not cached");
    std::string first = v.problems.empty() ? "" : v.problems.front();
    return make_error(repo + "@" + rev + " is not complete in the hub cache (" + first +
                          ") and HF_HUB_OFFLINE=1: nothing is downloaded silently",
                      "unset HF_HUB_OFFLINE, or stage the model on a connected machine");
  }
  return s;
}

}  // namespace

bool hub_wanted_file(const std::string& name) {
  for (const char* ext : {".json", ".safetensors", ".txt", ".jinja", ".tiktoken"})
    if (name.ends_with(ext)) return true;
  return name == "tokenizer.model" || name.ends_with("/tokenizer.model");
}

HubOptions hub_options_from_env(const std::string& cache_root) {
  HubOptions o;
  o.cache_root = cache_root;
  if (const char* e = std::getenv("HF_ENDPOINT"); e && *e) o.endpoint = e;
  while (!o.endpoint.empty() && o.endpoint.back() == '/') o.endpoint.pop_back();
  if (const char* t = std::getenv("HF_TOKEN"); t && *t) o.token = t;
  if (const char* f = std::getenv("HF_HUB_OFFLINE"); f && *f) {
    std::string v = lower(f);
    o.offline = v == "1" || v == "true" || v == "yes" || v == "on";
  }
  return o;
}

Result<HubSnapshot> hub_download(const std::string& repo, const std::string& revision,
                                 const HubOptions& opt) {
  const std::string rev = revision.empty() ? "main" : revision;
  auto slash = repo.find('/');
  if (slash == std::string::npos || repo.find('/', slash + 1) != std::string::npos ||
      repo.find("..") != std::string::npos)
    return make_error("hub id '" + repo + "' is not ORG/NAME", "fix model.hub in the recipe");
  if (rev.find('/') != std::string::npos || rev.find("..") != std::string::npos)
    return make_error("revision '" + rev + "' has a '/' or '..'", "pin a commit hash in the recipe");
  const std::string repo_dir =
      opt.cache_root + "/models--" + repo.substr(0, slash) + "--" + repo.substr(slash + 1);
  if (opt.offline || is_commit(rev)) {
    auto cached = from_cache(repo, repo_dir, rev, opt);
    if (cached.ok() || opt.offline) return cached;
  }
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });

  Curl c;
  std::string body;
  setup(c, opt.endpoint + "/api/models/" + repo + "/revision/" + rev, opt, true);
  curl_easy_setopt(c.h, CURLOPT_WRITEFUNCTION, to_string);
  curl_easy_setopt(c.h, CURLOPT_WRITEDATA, &body);
  CURLcode rc = curl_easy_perform(c.h);
  if (rc != CURLE_OK)
    return make_error("cannot reach " + opt.endpoint + " for " + repo + ": " + curl_easy_strerror(rc),
                      "check the network, or set HF_ENDPOINT to a mirror", true);
  long code = 0;
  curl_easy_getinfo(c.h, CURLINFO_RESPONSE_CODE, &code);
  if (code != 200) return http_error(repo + "@" + rev, code, body);
  json info = json::parse(body, nullptr, false);
  if (info.is_discarded() || !info.contains("sha") || !info["sha"].is_string() || !is_commit(info["sha"]))
    return make_error(opt.endpoint + " answered no commit for " + repo + "@" + rev, "check HF_ENDPOINT");
  HubSnapshot snap;
  snap.commit = info["sha"].get<std::string>();
  if (is_commit(rev) && lower(snap.commit) != lower(rev))
    return make_error(repo + ": asked for commit " + rev + ", the hub resolved " + snap.commit,
                      "check the recipe's revision");
  for (const auto& s : info.value("siblings", json::array()))
    if (s.contains("rfilename") && s["rfilename"].is_string()) {
      std::string f = s["rfilename"].get<std::string>();
      if (hub_wanted_file(f) && safe_repo_file(f)) snap.files.push_back(f);
    }
  if (snap.files.empty()) return make_error(repo + "@" + rev + " lists no model files", "check the repo id");
  std::error_code ec;
  fs::create_directories(repo_dir + "/blobs", ec);
  fs::create_directories(repo_dir + "/refs", ec);
  if (ec) return make_error("cannot create " + repo_dir + ": " + ec.message(), "check the cache dir");

  std::atomic<std::size_t> next{0};
  std::atomic<std::uint64_t> bytes{0};
  std::mutex mu;
  std::vector<std::string> errors;
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(1, opt.parallel); ++t)
    pool.emplace_back([&] {
      for (std::size_t i; (i = next++) < snap.files.size();) {
        auto m = head_file(opt.endpoint, repo, snap.commit, snap.files[i], opt);
        Status st = m.ok() ? fetch_file(opt.endpoint, repo, snap.commit, *m, repo_dir, opt, bytes)
                           : Status(m.error());
        if (!st.ok()) {
          std::lock_guard<std::mutex> l(mu);
          errors.push_back(st.error().what());
        }
      }
    });
  for (auto& t : pool) t.join();
  snap.bytes_downloaded = bytes;
  if (!errors.empty())
    return make_error(
        repo + "@" + rev + ": " + std::to_string(errors.size()) + " file(s) failed; first: " + errors.front(),
        "rerun to resume (complete blobs are kept)", true);
  if (!is_commit(rev)) SPK_TRY(write_file_atomic(repo_dir + "/refs/" + rev, snap.commit));
  snap.dir = repo_dir + "/snapshots/" + snap.commit;
  return snap;
}

}  // namespace spk::staging
