// Every kernel's start and end on the GPU, from CUPTI's activity API, for any CUDA program and
// without changing it: the driver loads this library when CUDA_INJECTION64_PATH names it and
// calls InitializeInjection. At exit the records go to $PT_KERNEL_TRACE (CSV: start_ns, end_ns,
// stream, grid, block, name); dev/kernel_trace/gaps.py turns them into the gaps between kernels.
// This is the per-kernel timeline nsys would give, which the GPU image cannot take (no nsys), and
// unlike `bench model --breakdown` it records no events between kernels, so kernels run as in a
// plain step.
//
//   dev/kernel_trace/build.sh                  (→ build-trace/libpt_kernel_trace.so)
//   CUDA_INJECTION64_PATH=$PWD/build-trace/libpt_kernel_trace.so PT_KERNEL_TRACE=k.csv paratrain …
#include <cupti.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct KernelRecord {
  uint64_t start, end;
  uint32_t stream;
  int32_t grid, block;
  std::string name;
};

std::mutex g_mutex;
std::vector<KernelRecord>* g_records = nullptr;  // leaked on purpose: written from atexit

void check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  std::fprintf(stderr, "kernel_trace: %s: %s\n", what, msg ? msg : "?");
  std::exit(3);
}

constexpr size_t kBufferBytes = 8u << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  std::lock_guard<std::mutex> lock(g_mutex);
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
    g_records->push_back({k->start, k->end, k->streamId, k->gridX * k->gridY * k->gridZ,
                          k->blockX * k->blockY * k->blockZ, k->name ? k->name : "?"});
  }
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  if (dropped) std::fprintf(stderr, "kernel_trace: %zu records dropped\n", dropped);
  std::free(buffer);
}

void write_records() {
  check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  // A process that ran no kernel (a parent that only waits for its child) leaves the file alone.
  if (g_records->empty()) return;
  const char* path = std::getenv("PT_KERNEL_TRACE");
  if (!path) path = "kernel_trace.csv";
  const std::string tmp = std::string(path) + ".part";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "kernel_trace: cannot write %s\n", tmp.c_str());
    return;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(f, "start_ns,end_ns,stream,grid,block,name\n");
  for (const auto& r : *g_records)  // names are mangled C++: no commas or quotes in them
    std::fprintf(f, "%llu,%llu,%u,%d,%d,%s\n", (unsigned long long)r.start, (unsigned long long)r.end, r.stream, r.grid,
                 r.block, r.name.c_str());
  const bool ok = std::fclose(f) == 0 && std::rename(tmp.c_str(), path) == 0;
  std::fprintf(stderr, "kernel_trace: %zu kernels %s %s\n", g_records->size(), ok ? "written to" : "NOT written to",
               path);
}

}  // namespace

extern "C" int InitializeInjection(void) {
  g_records = new std::vector<KernelRecord>();
  g_records->reserve(1 << 20);
  check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityEnable");
  std::atexit(write_records);
  return 1;
}
