#include "fabric/nccl_probe.h"

#include <dlfcn.h>

namespace spk::fabric {

std::string nccl_version_string(int code) {
  int major, minor, patch;
  if (code >= 10000)
    major = code / 10000, minor = code / 100 % 100, patch = code % 100;
  else
    major = code / 1000, minor = code / 100 % 10, patch = code % 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

Result<NcclInfo> probe_nccl(const std::string& soname) {
  void* h = ::dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    return make_error("NCCL not found: " + soname + (e ? std::string(" (") + e + ")" : ""),
                      "install NCCL or set LD_LIBRARY_PATH");
  }
  using GetVersion = int (*)(int*);
  auto fn = reinterpret_cast<GetVersion>(::dlsym(h, "ncclGetVersion"));
  NcclInfo info;
  if (!fn) {
    ::dlclose(h);
    return make_error(soname + " has no ncclGetVersion", "install a real NCCL 2.x or fix LD_LIBRARY_PATH");
  }
  int code = 0;
  if (fn(&code) != 0) {
    ::dlclose(h);
    return make_error("ncclGetVersion failed in " + soname, "reinstall NCCL");
  }
  info.code = code;
  info.version = nccl_version_string(code);
  Dl_info di{};
  if (::dladdr(reinterpret_cast<void*>(fn), &di) && di.dli_fname) info.path = di.dli_fname;
  ::dlclose(h);
  return info;
}

}  // namespace spk::fabric
