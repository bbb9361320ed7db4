// SHA-256 (FIPS 180-4), written here because OpenSSL is not a dependency. Used to check every LFS blob
// of a hub download against its X-Linked-Etag. ~200-400 MB/s: a 5 GB shard costs ~15-25 s of one core,
// so it runs while the bytes arrive (update() per chunk), never as a second pass.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/base/status.h"

namespace spk::staging {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, std::size_t n);
  std::array<std::uint8_t, 32> digest();  // finishes; call once
  std::string hex();                      // digest() as 64 lowercase hex digits

 private:
  void block(const std::uint8_t* p);
  std::uint32_t h_[8];
  std::uint8_t buf_[64];
  std::size_t used_ = 0;
  std::uint64_t bytes_ = 0;
};

std::string sha256_hex(std::string_view data);
// Hex digest of a whole file (resume: the bytes already on disk). Error names the path.
Result<std::string> sha256_file_hex(const std::string& path);

}  // namespace spk::staging
