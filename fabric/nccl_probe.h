// Which NCCL the runtime would load: dlopen("libnccl.so.2") + ncclGetVersion, never linked.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "kernels/base/status.h"

namespace spk::fabric {

struct NcclInfo {
  int code = 0;         // ncclGetVersion value: 22304
  std::string version;  // "2.23.4"
  std::string path;     // the file the loader picked
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(NcclInfo, code, version, path)

// Error "NCCL not found (install NCCL or set LD_LIBRARY_PATH)" when the library cannot be loaded.
Result<NcclInfo> probe_nccl(const std::string& soname = "libnccl.so.2");

// 22304 -> "2.23.4" (codes below 10000 use the old 1000*major+100*minor+patch form).
std::string nccl_version_string(int code);

}  // namespace spk::fabric
