#include "orchestrator/deploy/fingerprint.h"

#include "orchestrator/transport/file_hash.h"

namespace spk {

namespace {
void append_field(std::string& out, std::string_view v) {
  out += std::to_string(v.size());
  out += ':';
  out += v;
  out += ';';
}
}  // namespace

std::string deployment_fingerprint(const FingerprintInputs& in) {
  std::string buf;
  append_field(buf, in.lane);
  append_field(buf, in.recipe_text);
  append_field(buf, in.binary_xxh3);
  append_field(buf, in.model_revision);
  return bytes_xxh3_hex(buf);
}

}  // namespace spk
