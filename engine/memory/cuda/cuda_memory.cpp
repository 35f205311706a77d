#include "embedscope/engine/memory/cuda_memory.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace embedscope::engine {

namespace {

void check(cudaError_t rc, const char* call) {
  if (rc != cudaSuccess) throw std::runtime_error(fmt::format("{} failed: {} ({})", call, cudaGetErrorName(rc), cudaGetErrorString(rc)));
}

class CudaMallocSource final : public SegmentSource {
 public:
  const char* name() const override { return "cudaMalloc"; }
  void* map(int64_t bytes) override {
    void* p = nullptr;
    const cudaError_t rc = cudaMalloc(&p, static_cast<size_t>(bytes));
    if (rc == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // not sticky: clear it, the allocator declares OOM
      return nullptr;
    }
    check(rc, "cudaMalloc");
    return p;
  }
  void unmap(void* p, int64_t) override { check(cudaFree(p), "cudaFree"); }
  void* reserve_range(int64_t) override { throw std::logic_error("cudaMalloc segments have no reserved ranges"); }
  bool commit(void*, int64_t, int64_t) override { throw std::logic_error("cudaMalloc segments have no reserved ranges"); }
  void decommit(void*, int64_t, int64_t) override { throw std::logic_error("cudaMalloc segments have no reserved ranges"); }
  void release_range(void*, int64_t) override { throw std::logic_error("cudaMalloc segments have no reserved ranges"); }
};

// The driver entry points of the VMM path (cudaGetDriverEntryPointByVersion: no libcuda link).
struct Vmm {
  decltype(&::cuMemAddressReserve) address_reserve = nullptr;
  decltype(&::cuMemAddressFree) address_free = nullptr;
  decltype(&::cuMemCreate) create = nullptr;
  decltype(&::cuMemRelease) release = nullptr;
  decltype(&::cuMemMap) map = nullptr;
  decltype(&::cuMemUnmap) unmap = nullptr;
  decltype(&::cuMemSetAccess) set_access = nullptr;
  decltype(&::cuMemGetAllocationGranularity) granularity = nullptr;
  decltype(&::cuGetErrorName) error_name = nullptr;

  template <class F>
  static void load(F& fn, const char* symbol) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status{};
    const cudaError_t rc = cudaGetDriverEntryPointByVersion(symbol, &p, 12000, cudaEnableDefault, &status);
    if (rc != cudaSuccess || status != cudaDriverEntryPointSuccess || p == nullptr)
      throw std::runtime_error(fmt::format("cudaGetDriverEntryPointByVersion({}) failed: {} (query status {})", symbol,
                                           cudaGetErrorName(rc), static_cast<int>(status)));
    fn = reinterpret_cast<F>(p);
  }
  Vmm() {
    load(address_reserve, "cuMemAddressReserve");
    load(address_free, "cuMemAddressFree");
    load(create, "cuMemCreate");
    load(release, "cuMemRelease");
    load(map, "cuMemMap");
    load(unmap, "cuMemUnmap");
    load(set_access, "cuMemSetAccess");
    load(granularity, "cuMemGetAllocationGranularity");
    load(error_name, "cuGetErrorName");
  }
  void check(CUresult rc, const char* call) const {
    if (rc == CUDA_SUCCESS) return;
    const char* name = "?";
    error_name(rc, &name);
    throw std::runtime_error(fmt::format("{} failed: {}", call, name));
  }
};

class CudaVmmSource final : public SegmentSource {
 public:
  explicit CudaVmmSource(int device) {
    prop_.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop_.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop_.location.id = device;
    access_.location = prop_.location;
    access_.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    size_t g = 0;
    vmm_.check(vmm_.granularity(&g, &prop_, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), "cuMemGetAllocationGranularity");
    granularity_ = static_cast<int64_t>(g);
  }
  const char* name() const override { return "cuMemMap"; }
  void* map(int64_t) override { throw std::logic_error("CUDA VMM segments are ranges"); }
  void unmap(void*, int64_t) override { throw std::logic_error("CUDA VMM segments are ranges"); }
  void* reserve_range(int64_t bytes) override {
    const int64_t size = VmmPages(granularity_).round_up(bytes);
    CUdeviceptr p = 0;
    vmm_.check(vmm_.address_reserve(&p, static_cast<size_t>(size), static_cast<size_t>(granularity_), 0, 0),
               "cuMemAddressReserve");
    ranges_.emplace(p, Range{});
    return reinterpret_cast<void*>(p);
  }
  // Maps the pages holding [from, to) that are not mapped yet (the range's end, or a hole an
  // earlier decommit left, as PyTorch's ExpandableSegment::map), one handle per page.
  bool commit(void* base, int64_t from, int64_t to) override {
    Range& r = range(base);
    std::vector<int64_t> mapped_now;
    for (int64_t i = from / granularity_; i < (to + granularity_ - 1) / granularity_; ++i) {
      if (r.handles.count(i)) continue;
      CUmemGenericAllocationHandle h{};
      const CUresult rc = vmm_.create(&h, static_cast<size_t>(granularity_), &prop_, 0);
      if (rc == CUDA_ERROR_OUT_OF_MEMORY) {  // undo the pages of this call, then OOM
        unmap_pages(base, r, mapped_now);
        return false;
      }
      vmm_.check(rc, "cuMemCreate");
      if (const CUresult mapped = vmm_.map(addr(base, i), static_cast<size_t>(granularity_), 0, h, 0);
          mapped != CUDA_SUCCESS) {
        vmm_.release(h);  // not mapped: the handle would leak
        vmm_.check(mapped, "cuMemMap");
      }
      r.handles[i] = h;
      mapped_now.push_back(i);
      vmm_.check(vmm_.set_access(addr(base, i), static_cast<size_t>(granularity_), &access_, 1), "cuMemSetAccess");
    }
    return true;
  }
  // Unmaps the pages wholly inside [from, to) (ExpandableSegment::unmap): anywhere in the range.
  void decommit(void* base, int64_t from, int64_t to) override {
    Range& r = range(base);
    std::vector<int64_t> pages;
    for (auto it = r.handles.lower_bound((from + granularity_ - 1) / granularity_);
         it != r.handles.end() && it->first < to / granularity_; ++it)
      pages.push_back(it->first);
    unmap_pages(base, r, pages);
  }
  void release_range(void* base, int64_t bytes) override {
    Range& r = range(base);
    std::vector<int64_t> pages;
    for (const auto& [i, h] : r.handles) pages.push_back(i);
    unmap_pages(base, r, pages);
    vmm_.check(vmm_.address_free(reinterpret_cast<CUdeviceptr>(base),
                                 static_cast<size_t>(VmmPages(granularity_).round_up(bytes))),
               "cuMemAddressFree");
    ranges_.erase(reinterpret_cast<CUdeviceptr>(base));
  }

 private:
  struct Range {
    std::map<int64_t, CUmemGenericAllocationHandle> handles;  // page index -> its handle, the mapped pages
  };
  Range& range(void* base) {
    auto it = ranges_.find(reinterpret_cast<CUdeviceptr>(base));
    if (it == ranges_.end()) throw std::logic_error("CUDA VMM: not a reserved range");
    return it->second;
  }
  CUdeviceptr addr(void* base, int64_t page) const {
    return reinterpret_cast<CUdeviceptr>(base) + static_cast<CUdeviceptr>(page * granularity_);
  }
  // Unmaps and releases `pages` (indices of mapped pages of r).
  // cuMemUnmap does not wait for work still reading the pages (unlike cudaFree; PyTorch's
  // expandable segments synchronize before unmapping too): the device ops of a step are
  // asynchronous (CudaRankDevice), so a block freed to the allocator may still be in use.
  void unmap_pages(void* base, Range& r, const std::vector<int64_t>& pages) {
    if (!pages.empty()) check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (before cuMemUnmap)");
    for (int64_t i : pages) {  // page by page, as each was mapped
      vmm_.check(vmm_.unmap(addr(base, i), static_cast<size_t>(granularity_)), "cuMemUnmap");
      vmm_.check(vmm_.release(r.handles.at(i)), "cuMemRelease");
      r.handles.erase(i);
    }
  }

  Vmm vmm_;
  CUmemAllocationProp prop_{};
  CUmemAccessDesc access_{};
  int64_t granularity_ = 0;
  std::map<CUdeviceptr, Range> ranges_;
};

class CudaAsyncAllocator final : public DeviceAllocator {
 public:
  CudaAsyncAllocator(const AllocatorConfig& c, int device, cudaStream_t stream) : DeviceAllocator(c), stream_(stream) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    check(cudaMemPoolCreate(&pool_, &props), "cudaMemPoolCreate");
    auto threshold = static_cast<uint64_t>(c.capacity_bytes);
    check(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &threshold), "cudaMemPoolSetAttribute");
  }
  ~CudaAsyncAllocator() override {
    for (const auto& [p, l] : live_) cudaFreeAsync(reinterpret_cast<void*>(p), stream_);
    cudaStreamSynchronize(stream_);
    cudaMemPoolDestroy(pool_);
  }

  Allocation allocate(int64_t bytes, const std::string& tag) override {
    if (bytes <= 0) throw std::invalid_argument(fmt::format("allocate: {} bytes for {}", bytes, tag));
    void* p = nullptr;
    for (int attempt = 0; attempt < 2 && p == nullptr; ++attempt) {
      if (requested_ + bytes > config_.capacity_bytes) break;
      if (attempt == 1) {  // give the pool's cached memory back and retry, as the block allocators do
        ++retries_;
        empty_cache();
      }
      const cudaError_t rc = cudaMallocFromPoolAsync(&p, static_cast<size_t>(bytes), pool_, stream_);
      if (rc == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        p = nullptr;
      } else {
        check(rc, "cudaMallocFromPoolAsync");
      }
    }
    if (p == nullptr) {
      ++ooms_;
      const MemoryStats st = stats();
      notify(AllocatorEvent::Kind::oom, st.capacity - st.reserved, bytes, bytes, tag);
      throw out_of_memory(bytes, tag);
    }
    const auto addr = reinterpret_cast<int64_t>(p);
    live_[addr] = {bytes, tag};
    requested_ += bytes;
    notify(AllocatorEvent::Kind::alloc, addr, bytes, bytes, tag);
    return Allocation{p, addr, bytes, bytes, ++next_id_};
  }

  void free(const Allocation& a) override {
    auto it = live_.find(a.address);
    if (it == live_.end()) throw std::logic_error(fmt::format("free of an address that is not allocated: {:#x}", a.address));
    notify(AllocatorEvent::Kind::free, a.address, it->second.bytes, it->second.bytes, it->second.tag);
    requested_ -= it->second.bytes;
    live_.erase(it);
    check(cudaFreeAsync(a.ptr, stream_), "cudaFreeAsync");
  }

  void empty_cache() override {
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    check(cudaMemPoolTrimTo(pool_, 0), "cudaMemPoolTrimTo");
  }

  MemoryStats stats() const override {
    MemoryStats st;
    st.capacity = config_.capacity_bytes;
    st.allocated = attribute(cudaMemPoolAttrUsedMemCurrent);
    st.reserved = attribute(cudaMemPoolAttrReservedMemCurrent);
    st.peak_allocated = attribute(cudaMemPoolAttrUsedMemHigh);
    st.peak_reserved = attribute(cudaMemPoolAttrReservedMemHigh);
    st.requested = requested_;
    st.rounding_loss = std::max<int64_t>(0, st.allocated - requested_);
    st.segments = st.reserved > 0 ? 1 : 0;
    st.alloc_retries = retries_;
    st.ooms = ooms_;
    fragmentation_of(snapshot(), st);
    return st;
  }
  int64_t allocated_bytes() const override { return attribute(cudaMemPoolAttrUsedMemCurrent); }
  int64_t reserved_bytes() const override { return attribute(cudaMemPoolAttrReservedMemCurrent); }

  std::vector<SegmentInfo> snapshot() const override {
    const int64_t reserved = attribute(cudaMemPoolAttrReservedMemCurrent);
    if (reserved == 0 && live_.empty()) return {};
    SegmentInfo seg{reinterpret_cast<int64_t>(pool_), reserved, false, {}};
    int64_t at = seg.address;
    for (const auto& [addr, l] : live_) {  // packed in address order: the pool's offsets are hidden
      seg.blocks.push_back({at, l.bytes, l.bytes, true, l.tag});
      at += l.bytes;
    }
    seg.size = std::max(reserved, at - seg.address);
    if (at < seg.address + seg.size) seg.blocks.push_back({at, seg.address + seg.size - at, 0, false, {}});
    return {seg};
  }

 private:
  int64_t attribute(cudaMemPoolAttr a) const {
    uint64_t v = 0;
    check(cudaMemPoolGetAttribute(pool_, a, &v), "cudaMemPoolGetAttribute");
    return static_cast<int64_t>(v);
  }
  struct Live {
    int64_t bytes;
    std::string tag;
  };
  cudaStream_t stream_;
  cudaMemPool_t pool_ = nullptr;
  std::map<int64_t, Live> live_;
  int64_t requested_ = 0, retries_ = 0, ooms_ = 0, next_id_ = 0;
};

}  // namespace

std::shared_ptr<SegmentSource> cuda_malloc_source() { return std::make_shared<CudaMallocSource>(); }

std::shared_ptr<SegmentSource> cuda_vmm_source(int device) { return std::make_shared<CudaVmmSource>(device); }

int64_t cuda_free_memory() {
  size_t free_b = 0, total = 0;
  check(cudaMemGetInfo(&free_b, &total), "cudaMemGetInfo");
  return static_cast<int64_t>(free_b);
}

std::unique_ptr<DeviceAllocator> create_cuda_async_allocator(const AllocatorConfig& config, int device, void* stream) {
  if (config.capacity_bytes <= 0) throw std::invalid_argument("allocator capacity must be > 0");
  return std::make_unique<CudaAsyncAllocator>(config, device, static_cast<cudaStream_t>(stream));
}

}  // namespace embedscope::engine
