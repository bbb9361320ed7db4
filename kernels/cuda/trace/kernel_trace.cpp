// Kernel timeline through CUPTI, for reading where a decode step's time goes (there is no nsys on the
// device machine, and ncu runs every kernel alone, so it cannot show PDL overlap or the gaps between
// kernels and steps).
//
//   SPK_KERNEL_TRACE=/tmp/trace.csv LD_PRELOAD=libspk_kernel_trace.so sparkctl dev bench-model ...
//
// Every kernel the process runs (graph nodes included) becomes one CSV row at exit:
// start_ns,end_ns,grid_blocks,block_threads,name (demangled, template arguments kept). Records are
// collected by CUPTI's concurrent-kernel activity, which does not serialise kernels. Not linked into
// sparkctl: a separate shared library, preloaded only when measuring.
#include <cupti.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Row {
  uint64_t start, end;
  int64_t blocks, threads;
  std::string name;
};

std::mutex g_mu;
std::vector<Row> g_rows;
bool g_on = false;

std::string demangle(const char* n) {
  if (!n) return "?";
  int st = 0;
  char* d = abi::__cxa_demangle(n, nullptr, nullptr, &st);
  std::string s = st == 0 && d ? d : n;
  std::free(d);
  return s;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 2u << 20;  // small buffers complete while the process runs (see the flush period below)
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL)
      continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
    g_rows.push_back(Row{k->start, k->end, static_cast<int64_t>(k->gridX) * k->gridY * k->gridZ,
                         static_cast<int64_t>(k->blockX) * k->blockY * k->blockZ, demangle(k->name)});
  }
  std::free(buffer);
}

struct Trace {
  Trace() {
    if (!std::getenv("SPK_KERNEL_TRACE")) return;
    if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
      std::fprintf(stderr, "kernel_trace: CUPTI refused the kernel activity; no trace\n");
      return;
    }
    // Records reach buffer_completed only when a buffer fills or is flushed; a flush at exit can come after
    // the CUDA context is gone and deliver nothing, so flush on a period while the process runs.
    cuptiActivityFlushPeriod(200);
    g_on = true;
  }
  ~Trace() {
    if (!g_on) return;
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    const char* path = std::getenv("SPK_KERNEL_TRACE");
    FILE* f = std::fopen(path, "w");
    if (!f) {
      std::fprintf(stderr, "kernel_trace: cannot write %s\n", path);
      return;
    }
    std::lock_guard<std::mutex> lock(g_mu);
    std::fprintf(f, "start_ns,end_ns,grid_blocks,block_threads,name\n");
    for (const Row& r : g_rows) {
      std::string n = r.name;
      for (char& c : n)
        if (c == ',') c = ';';
      std::fprintf(f, "%llu,%llu,%lld,%lld,%s\n", static_cast<unsigned long long>(r.start),
                   static_cast<unsigned long long>(r.end), static_cast<long long>(r.blocks),
                   static_cast<long long>(r.threads), n.c_str());
    }
    std::fclose(f);
    std::fprintf(stderr, "kernel_trace: %zu kernels -> %s\n", g_rows.size(), path);
  }
} g_trace;

}  // namespace
