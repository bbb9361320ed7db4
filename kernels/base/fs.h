// Small filesystem helpers with the project's guarantees: reads name the path on failure, and writes
// are atomic (temp file in the same directory + fsync + rename), so no partial file is ever visible.
#pragma once

#include <string>
#include <string_view>

#include "kernels/base/status.h"

namespace spk {

// Whole file into memory. Error names the path and errno text.
Result<std::string> read_file(const std::string& path);

// Write `data` to `path` atomically: path.tmp.<pid>, fsync, rename, fsync of the directory.
// `mode` is applied to the new file. On failure the old file (if any) is untouched.
Status write_file_atomic(const std::string& path, std::string_view data, unsigned mode = 0644);

}  // namespace spk
