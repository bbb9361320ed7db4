// Content hash used to decide whether a node's sparkctl binary differs from the head's: XXH3-64 over the
// whole file, as 16 lowercase hex digits. ~10 GB/s, so a 50 MB binary costs ~5 ms.
#pragma once

#include <string>
#include <string_view>

#include "kernels/base/status.h"

namespace spk {

Result<std::string> file_xxh3_hex(const std::string& path);
std::string bytes_xxh3_hex(std::string_view bytes);

}  // namespace spk
