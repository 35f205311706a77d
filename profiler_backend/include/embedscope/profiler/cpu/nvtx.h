#pragma once
// NVTX ranges that mark the engine's phases for Nsight Systems and other NVTX tools (header
// only). Without a tool attached an NVTX call is one predictable branch; in a build without
// CUDA (EMBEDSCOPE_WITH_CUDA unset) NvtxRange compiles to nothing.

#if EMBEDSCOPE_WITH_CUDA
#include <nvtx3/nvToolsExt.h>
#endif

namespace embedscope::profiler {

#if EMBEDSCOPE_WITH_CUDA
/// The "embedscope" NVTX domain (created on first use).
inline nvtxDomainHandle_t nvtx_domain() {
  static const nvtxDomainHandle_t d = nvtxDomainCreateA("embedscope");
  return d;
}
#endif

/// Pushes an NVTX range named `name` (a string that outlives the range) in the "embedscope"
/// domain on construction and pops it on destruction, on the calling thread.
class NvtxRange {
 public:
  explicit NvtxRange(const char* name) {
#if EMBEDSCOPE_WITH_CUDA
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = name;
    nvtxDomainRangePushEx(nvtx_domain(), &a);
#else
    (void)name;
#endif
  }
  ~NvtxRange() {
#if EMBEDSCOPE_WITH_CUDA
    nvtxDomainRangePop(nvtx_domain());
#endif
  }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace embedscope::profiler
