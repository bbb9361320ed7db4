// Download a model repo from the Hugging Face hub (or a mirror) into the standard hub cache layout, so
// huggingface_hub and vLLM reuse it:
//   <cache_root>/models--ORG--NAME/blobs/<etag>            content (LFS: etag = sha256 of the content)
//   <cache_root>/models--ORG--NAME/snapshots/<commit>/<f>  relative symlink -> ../../blobs/<etag>
//   <cache_root>/models--ORG--NAME/refs/<revision>         the commit a branch/tag resolved to
// Protocol: GET /api/models/REPO/revision/REV (commit + file list), then per file HEAD
// /REPO/resolve/COMMIT/FILE without following redirects (X-Repo-Commit, X-Linked-Etag, X-Linked-Size,
// ETag, Content-Length), then GET following redirects into blobs/<etag>.incomplete with a Range header
// that resumes what is already there. Size always and SHA-256 of every LFS blob are checked while the
// bytes arrive; a bad blob is deleted and fetched again (retries), then the error names file, expected
// and got. Files are fetched `parallel` at a time.
// Offline (HF_HUB_OFFLINE=1): only the cache is read; a revision that is not there is an error, never a
// download. A pinned 40-hex commit whose snapshot is already complete needs no network either.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/base/status.h"

namespace spk::staging {

struct HubOptions {
  std::string endpoint = "https://huggingface.co";  // HF_ENDPOINT (mirrors)
  std::string token;                                // HF_TOKEN: "Authorization: Bearer" to the endpoint
  bool offline = false;                             // HF_HUB_OFFLINE=1
  std::string cache_root;                           // the hub cache dir (models--ORG--NAME lives here)
  int parallel = 4;
  int retries = 3;            // attempts per file after the first
  int low_speed_time_s = 60;  // a transfer under 1 KB/s this long is dropped and retried
  std::function<void(const std::string& file, std::uint64_t got, std::uint64_t total)> progress;
};

// endpoint, token and offline from HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE.
HubOptions hub_options_from_env(const std::string& cache_root);

struct HubSnapshot {
  std::string commit;
  std::string dir;  // snapshots/<commit>
  std::vector<std::string> files;
  std::uint64_t bytes_downloaded = 0;
  bool from_cache = false;  // no network used
};

// `revision` empty = "main" (unpinned).
Result<HubSnapshot> hub_download(const std::string& repo, const std::string& revision, const HubOptions& opt);

// Which repo files a runtime needs: *.json, *.safetensors, tokenizer.model, *.txt, *.jinja, *.tiktoken.
bool hub_wanted_file(const std::string& name);

}  // namespace spk::staging
