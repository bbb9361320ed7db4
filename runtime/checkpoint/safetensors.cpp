// Safetensors reader: mmap the file, validate the untrusted header, expose views into the data section.
// Format: u64 little-endian N, then N bytes of JSON header, then the data section.
#include "runtime/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "runtime/checkpoint/safetensors_limits.h"
#include "runtime/checkpoint/utf8_safe.h"

namespace spk::rt {

namespace {

using nlohmann::json;

Error bad(const std::string& path, const std::string& what) {
  return make_error(path + ": " + utf8_safe(what),
                    "the file is corrupt or not safetensors: re-download or regenerate it");
}

std::string hex_byte(unsigned char c) {
  static const char* d = "0123456789abcdef";
  return std::string("0x") + d[c >> 4] + d[c & 15];
}

Error bad_tensor(const std::string& path, const std::string& tensor, const std::string& what) {
  return bad(path, "tensor '" + tensor + "': " + what);
}

// Nesting depth of JSON text, counting only brackets outside strings. A valid header has depth 3
// (top object -> tensor object -> shape array); anything deeper is refused before the full parse so a
// hostile "[[[[..." header cannot blow the parser's stack.
int json_depth(std::string_view s) {
  int depth = 0, max_depth = 0;
  bool in_str = false, esc = false;
  for (char c : s) {
    if (in_str) {
      if (esc) {
        esc = false;
      } else if (c == '\\') {
        esc = true;
      } else if (c == '"') {
        in_str = false;
      }
      continue;
    }
    if (c == '"') {
      in_str = true;
    } else if (c == '{' || c == '[') {
      max_depth = std::max(max_depth, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return max_depth;
}

bool is_uint(const json& j) {
  return j.is_number_unsigned() || (j.is_number_integer() && j.get<int64_t>() >= 0);
}

// numel * elem_size with overflow detection.
bool checked_bytes(const std::vector<int64_t>& shape, size_t elem_size, uint64_t* out) {
  uint64_t n = elem_size;
  for (int64_t d : shape) {
    const auto ud = static_cast<uint64_t>(d);
    if (ud != 0 && n > UINT64_MAX / ud) return false;
    n *= ud;
  }
  *out = n;
  return true;
}

Result<TensorInfo> parse_entry(const std::string& path, const std::string& name, const json& e,
                               uint64_t data_size) {
  if (!e.is_object()) return bad_tensor(path, name, "header entry is not an object");
  TensorInfo t;
  t.name = name;
  auto dt = e.find("dtype");
  if (dt == e.end() || !dt->is_string()) return bad_tensor(path, name, "missing or non-string \"dtype\"");
  auto parsed = parse_dtype(dt->get<std::string>());
  if (!parsed)
    return bad_tensor(
        path, name,
        "unsupported dtype \"" + dt->get<std::string>() + "\" (supported: F32, F16, BF16, I32, I64, U8)");
  t.dtype = *parsed;
  auto sh = e.find("shape");
  if (sh == e.end() || !sh->is_array()) return bad_tensor(path, name, "missing or non-array \"shape\"");
  if (sh->size() > kMaxTensorRank)
    return bad_tensor(path, name,
                      "rank " + std::to_string(sh->size()) + " exceeds " + std::to_string(kMaxTensorRank));
  for (const auto& d : *sh) {
    if (!is_uint(d))
      return bad_tensor(path, name, "shape entry " + d.dump() + " is not a non-negative integer");
    const auto v = d.get<uint64_t>();
    if (v > static_cast<uint64_t>(INT64_MAX))
      return bad_tensor(path, name, "shape entry " + d.dump() + " too large");
    t.shape.push_back(static_cast<int64_t>(v));
  }
  auto off = e.find("data_offsets");
  if (off == e.end() || !off->is_array() || off->size() != 2 || !is_uint((*off)[0]) || !is_uint((*off)[1]))
    return bad_tensor(path, name, "\"data_offsets\" must be [begin, end] of non-negative integers");
  t.begin = (*off)[0].get<uint64_t>();
  t.end = (*off)[1].get<uint64_t>();
  if (t.begin > t.end)
    return bad_tensor(path, name,
                      "data_offsets begin " + std::to_string(t.begin) + " > end " + std::to_string(t.end));
  if (t.end > data_size)
    return bad_tensor(path, name,
                      "data_offsets end " + std::to_string(t.end) + " is past the data section (" +
                          std::to_string(data_size) + " bytes): file truncated?");
  uint64_t want = 0;
  if (!checked_bytes(t.shape, dtype_size(t.dtype), &want))
    return bad_tensor(path, name, "shape x dtype size overflows 64 bits");
  if (want != t.end - t.begin)
    return bad_tensor(path, name,
                      std::string(dtype_name(t.dtype)) + " shape needs " + std::to_string(want) +
                          " bytes but data_offsets span " + std::to_string(t.end - t.begin));
  return t;
}

}  // namespace

uint64_t TensorInfo::numel() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

uint64_t TensorView::numel() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  // O_NONBLOCK: a FIFO at this path must not block the open; it is refused below.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return make_error("cannot open " + path + ": " + std::strerror(errno), "check the path");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return make_error("cannot stat " + path + ": " + std::strerror(e), "check the path");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return bad(path, "not a regular file");
  }
  const auto file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < 8) {
    ::close(fd);
    return bad(path,
               "file is " + std::to_string(file_size) + " bytes, shorter than the 8-byte header length");
  }
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->map_size_ = file_size;
  void* m = ::mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  if (m == MAP_FAILED)
    return make_error("cannot mmap " + path + ": " + std::strerror(map_errno),
                      "check memory limits (ulimit -v)");
  f->map_ = m;
  const auto* base = static_cast<const uint8_t*>(m);

  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | base[i];
  if (n > kMaxHeaderBytes)
    return bad(path, "header length " + std::to_string(n) + " exceeds the " +
                         std::to_string(kMaxHeaderBytes) + "-byte cap");
  if (n > file_size - 8)
    return bad(path, "header length " + std::to_string(n) + " exceeds the file size minus 8 (" +
                         std::to_string(file_size - 8) + "): file truncated?");
  const std::string_view text(reinterpret_cast<const char*>(base + 8), n);
  // The format: the header is a JSON object starting with '{' and may be padded at its end with spaces
  // (0x20) only (writers pad to 8 bytes). Anything else after the closing brace (NUL padding, a length
  // that reaches into the data or stops short of it) is refused: every tensor would be shifted.
  if (n == 0 || text.front() != '{')
    return bad(path, "header does not start with '{' (header length " + std::to_string(n) +
                         "): the 8-byte length or the file is wrong");
  size_t json_end = text.size();
  while (json_end > 0 && text[json_end - 1] == ' ') --json_end;
  if (json_end == 0 || text[json_end - 1] != '}')
    return bad(path, "header of " + std::to_string(n) + " bytes does not end with '}' followed only by " +
                         "space padding (last byte " + hex_byte(static_cast<unsigned char>(text[n - 1])) +
                         "): the 8-byte length is off or the padding is not spaces");
  const int depth = json_depth(text);
  if (depth > kMaxHeaderDepth)
    return bad(path, "header JSON nesting depth " + std::to_string(depth) + " exceeds " +
                         std::to_string(kMaxHeaderDepth));
  json h;
  std::string duplicate;
  try {
    // Keys repeated in one object are refused (the JSON parser would keep the last one silently).
    std::vector<std::set<std::string>> keys;
    json::parser_callback_t cb = [&](int, json::parse_event_t ev, json& parsed) {
      if (ev == json::parse_event_t::object_start) {
        keys.emplace_back();
      } else if (ev == json::parse_event_t::object_end) {
        if (!keys.empty()) keys.pop_back();
      } else if (ev == json::parse_event_t::key && !keys.empty() && parsed.is_string() &&
                 !keys.back().insert(parsed.get_ref<const std::string&>()).second && duplicate.empty()) {
        duplicate = parsed.get_ref<const std::string&>();
      }
      return true;
    };
    h = json::parse(text.substr(0, json_end), cb);
  } catch (const std::exception& e) {
    return bad(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!duplicate.empty()) return bad(path, "header names key '" + duplicate + "' twice");
  if (!h.is_object()) return bad(path, "header JSON is not an object");
  if (h.size() > kMaxTensors)
    return bad(path, "header lists " + std::to_string(h.size()) + " entries, over the cap of " +
                         std::to_string(kMaxTensors));

  const uint64_t data_size = file_size - 8 - n;
  f->data_ = base + 8 + n;
  for (const auto& [key, val] : h.items()) {
    if (key == "__metadata__") {
      if (!val.is_object()) return bad(path, "\"__metadata__\" is not an object");
      for (const auto& [mk, mv] : val.items()) {
        if (!mv.is_string()) return bad(path, "\"__metadata__\" value for '" + mk + "' is not a string");
        f->metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    if (key.empty()) return bad(path, "tensor with an empty name");
    SPK_ASSIGN(TensorInfo t, parse_entry(path, key, val, data_size));
    f->tensors_.push_back(std::move(t));
  }
  std::sort(f->tensors_.begin(), f->tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  // The data section is exactly the tensors, back to back in offset order: no gap (bytes nobody
  // owns), no overlap, and nothing left over at the end (as the reference loader requires).
  uint64_t expect_begin = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo& t : f->tensors_) {
    if (t.begin < expect_begin)
      return bad_tensor(path, t.name,
                        "bytes [" + std::to_string(t.begin) + "," + std::to_string(t.end) +
                            ") overlap tensor '" + prev->name + "' [" + std::to_string(prev->begin) + "," +
                            std::to_string(prev->end) + ")");
    if (t.begin > expect_begin)
      return bad_tensor(path, t.name,
                        "starts at data offset " + std::to_string(t.begin) + " but the previous tensor" +
                            (prev ? " '" + prev->name + "'" : std::string()) + " ends at " +
                            std::to_string(expect_begin) + ": a gap of unowned bytes");
    expect_begin = t.end;
    prev = &t;
  }
  if (expect_begin != data_size)
    return bad(path, "the tensors cover " + std::to_string(expect_begin) + " bytes of the " +
                         std::to_string(data_size) +
                         "-byte data section: " + std::to_string(data_size - expect_begin) +
                         " trailing bytes belong to no tensor (wrong header length, or extra bytes)");
  for (size_t i = 0; i < f->tensors_.size(); ++i) f->index_.emplace(f->tensors_[i].name, i);
  return f;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

TensorView SafetensorsFile::view(const TensorInfo& t) const {
  return TensorView{data_ + t.begin, t.dtype, t.shape};
}

}  // namespace spk::rt
