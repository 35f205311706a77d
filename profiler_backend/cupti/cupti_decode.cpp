#include "embedscope/profiler/cupti/cupti_decode.h"
#include "embedscope/sessions/model/metadata_keys.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <tuple>

#include <cupti_callbacks.h>
#include <cxxabi.h>

namespace embedscope::profiler {

using sessions::Lane;
using sessions::OpCategory;

ClockCalibration ClockCalibration::from_sample(int64_t host_before, uint64_t gpu_ns, int64_t host_after) {
  if (host_after < host_before)
    throw std::invalid_argument("clock calibration: host_after (" + std::to_string(host_after) +
                                " ns) is before host_before (" + std::to_string(host_before) + " ns)");
  const int64_t host_mid = host_before + (host_after - host_before) / 2;
  return ClockCalibration{host_mid - static_cast<int64_t>(gpu_ns)};
}

void write_gpu_trace_metadata(sessions::SessionWriter& w, int64_t dropped, const DecodeStats& stats,
                              const ClockCalibration& start, const ClockCalibration& end) {
  w.set_metadata(sessions::meta::kCuptiDroppedRecords, std::to_string(dropped));
  w.set_metadata(sessions::meta::kCuptiRecords, std::to_string(stats.records));
  w.set_metadata(sessions::meta::kCuptiUnknownRecords, std::to_string(stats.unknown_kind));
  w.set_metadata(sessions::meta::kCuptiLaunchesDropped, std::to_string(stats.launches_dropped));
  w.set_metadata(sessions::meta::kCuptiDeviceRankFallbacks, std::to_string(stats.device_rank_fallbacks));
  w.set_metadata(sessions::meta::kGpuClockOffsetNs, std::to_string(start.offset_ns));
  w.set_metadata(sessions::meta::kGpuClockDriftNs, std::to_string(clock_drift_ns(start, end)));
}

bool is_nccl_kernel(const char* name) {
  if (!name) return false;
  if (name[0] == '_' && name[1] == 'Z') {  // mangled: _Z<length><name>...
    name += 2;
    while (*name >= '0' && *name <= '9') ++name;
  }
  return std::strncmp(name, "ncclDevKernel_", 14) == 0 || std::strncmp(name, "ncclKernel_", 11) == 0;
}

bool makes_activity(const char* runtime_api) {
  if (!runtime_api) return false;
  const std::string_view n(runtime_api);
  for (std::string_view part : {"Launch", "Memcpy", "Memset", "Malloc", "Free", "Synchronize"})
    if (n.find(part) != std::string_view::npos) return true;
  return n.rfind("cuda_runtime_cbid_", 0) == 0;  // a call CUPTI cannot name: kept, it may be a launch
}

KernelCategory kernel_category(const char* name, sessions::OpCategory& out) {
  out = sessions::OpCategory::other;
  if (!name) return KernelCategory::known;
  const std::string_view n(name);
  const auto has = [&](std::string_view part) { return n.find(part) != std::string_view::npos; };
  if (has("cub::")) return KernelCategory::inherit;  // before the names below: CUB's templates name their users' types
  // the engine's own kernels (kernels/cuda/*.cu) first, then the libraries' by their names' parts
  if (has("tbe_forward") || has("low_rank_project")) out = sessions::OpCategory::lookup;
  else if (has("tbe_") || has("encoded_update") || has("low_rank_d") || has("sgd")) out = sessions::OpCategory::optimizer;
  else if (has("bucketize") || has("permute")) out = sessions::OpCategory::input;
  else if (has("copy_rows")) out = sessions::OpCategory::memcpy;  // host / host_cached rows moved by a kernel
  else if (has("gemm") || has("gemv") || has("cutlass") || has("xmma") || has("splitK") || has("bias_") ||
           has("relu") || has("interaction") || has("dot_forward") || has("dot_backward") || has("bce") || has("loss"))
    out = sessions::OpCategory::dense;
  return KernelCategory::known;
}

const char* memcpy_name(uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "memcpy_htod";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "memcpy_dtoh";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "memcpy_dtod";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "memcpy_htoh";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "memcpy_ptop";
    default: return "memcpy";
  }
}

namespace {
const char* sync_name(CUpti_ActivitySynchronizationType t) {
  switch (t) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return "cudaEventSynchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return "cudaStreamWaitEvent";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return "cudaStreamSynchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return "cudaDeviceSynchronize";
    default: return "synchronization";
  }
}

const char* memory_tag(CUpti_ActivityMemoryKind k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE: return "cuda_device";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return "cuda_pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED: return "cuda_managed";
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return "cuda_pageable";
    default: return "cuda";
  }
}
// Bytes of a record of a decoded kind (0 for others).
size_t record_size(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_RUNTIME: return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return sizeof(CUpti_ActivitySynchronization2);
    case CUPTI_ACTIVITY_KIND_MEMORY2: return sizeof(CUpti_ActivityMemory4);
    default: return 0;
  }
}
}  // namespace

CuptiDecoder::CuptiDecoder(ClockCalibration clock, size_t max_launches) : clock_(clock), max_launches_(max_launches) {
  if (max_launches < 1) throw std::invalid_argument("CuptiDecoder: max_launches must be >= 1, got 0");
}

bool CuptiDecoder::attach_launch(GpuOp& g) {
  auto it = launches_.find(g.correlation_id);
  if (it == launches_.end()) return false;
  g.launch_api = it->second.api;
  g.launch_start_ns = it->second.start_ns;
  g.launch_end_ns = it->second.end_ns;
  g.launch_thread = it->second.thread;
  launches_.erase(it);  // one launch, one activity
  return true;
}

void CuptiDecoder::add_launch(uint32_t correlation, Launch l) {
  if (!launches_.insert_or_assign(correlation, l).second) return;  // the id again: its place stays
  launch_order_.push_back(correlation);
  // the oldest still waiting go first; ids already joined (not in the table) are skipped
  while (launches_.size() > max_launches_ && !launch_order_.empty()) {
    const uint32_t oldest = launch_order_.front();
    launch_order_.pop_front();
    if (launches_.erase(oldest)) ++stats_.launches_dropped;
  }
  if (launch_order_.size() > 2 * max_launches_ + 64) {  // mostly joined ids: keep those still waiting
    std::deque<uint32_t> keep;
    for (uint32_t id : launch_order_)
      if (launches_.count(id)) keep.push_back(id);
    launch_order_ = std::move(keep);
  }
}

int32_t CuptiDecoder::rank_of(uint32_t device) const {
  auto it = rank_of_device_.find(device);
  return it == rank_of_device_.end() ? static_cast<int32_t>(device) : it->second;
}

int32_t CuptiDecoder::rank_of(uint32_t device, uint32_t stream) const {
  auto it = rank_of_stream_.find({device, stream});
  return it == rank_of_stream_.end() ? rank_of(device) : it->second;
}

int32_t CuptiDecoder::charge(uint32_t device, uint32_t stream, int64_t thread) {
  if (auto s = rank_of_stream_.find({device, stream}); s != rank_of_stream_.end()) return s->second;
  if (thread >= 0)
    if (auto t = rank_of_thread_.find(static_cast<uint32_t>(thread)); t != rank_of_thread_.end()) return t->second;
  ++stats_.device_rank_fallbacks;
  return rank_of(device);
}

void CuptiDecoder::forget_call(uint32_t correlation) {
  if (!joined_early_.insert(correlation).second) return;
  joined_early_order_.push_back(correlation);
  while (joined_early_order_.size() > max_launches_) {
    joined_early_.erase(joined_early_order_.front());
    joined_early_order_.pop_front();
  }
}

const char* CuptiDecoder::kernel_name(const char* raw) {
  if (!raw) return "kernel";
  auto it = demangled_.find(raw);
  if (it != demangled_.end()) return it->second;
  int status = 0;
  char* d = raw[0] == '_' && raw[1] == 'Z' ? abi::__cxa_demangle(raw, nullptr, nullptr, &status) : nullptr;
  const char* name = names_.intern(d && status == 0 ? d : raw);
  std::free(d);
  demangled_.emplace(raw, name);
  return name;
}

const char* CuptiDecoder::runtime_name(uint32_t cbid) {
  const char* n = nullptr;
  if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &n) == CUPTI_SUCCESS && n) return names_.intern(n);
  return names_.intern("cuda_runtime_cbid_" + std::to_string(cbid));
}

void CuptiDecoder::add_buffer(const uint8_t* buffer, size_t valid_size) {
  CUpti_Activity* record = nullptr;
  // cuptiActivityGetNextRecord only reads the buffer (its signature is not const-qualified).
  auto* buf = const_cast<uint8_t*>(buffer);
  for (;;) {
    const CUptiResult rc = cuptiActivityGetNextRecord(buf, valid_size, &record);
    if (rc == CUPTI_ERROR_MAX_LIMIT_REACHED) return;
    if (rc != CUPTI_SUCCESS) {
      // CUPTI cannot walk past this record (invalid kind or truncated): count what is left.
      // `record` still points to the last record walked (null if none); the bad one follows it.
      ++stats_.unknown_kind;
      const size_t at = record ? static_cast<size_t>(reinterpret_cast<const uint8_t*>(record) - buffer) +
                                     record_size(record->kind)
                               : 0;
      stats_.undecodable_bytes += static_cast<int64_t>(valid_size - std::min(at, valid_size));
      return;
    }
    add_record(*record);
  }
}

template <class CopyRecord>
void CuptiDecoder::add_copy(const CopyRecord& m, const char* name) {
  device_of_context_[m.contextId] = m.deviceId;
  if (m.start == 0 || m.end < m.start) {
    ++stats_.no_timestamp;
    return;
  }
  GpuOp g;
  auto lane_it = lane_of_stream_.find({m.deviceId, m.streamId});
  const bool comm = lane_it != lane_of_stream_.end() && lane_it->second == Lane::gpu_comm;
  g.op = {rank_of(m.deviceId, m.streamId), comm ? Lane::gpu_comm : Lane::gpu_copy, comm ? OpCategory::comm : OpCategory::memcpy,
          name, 0, clock_.to_host(m.start), clock_.to_host(m.end), static_cast<int64_t>(m.bytes), 0};
  g.device_id = m.deviceId;
  g.context_id = m.contextId;
  g.stream_id = m.streamId;
  g.correlation_id = m.correlationId;
  attach_launch(g);
  pending_.push_back(g);
}

void CuptiDecoder::add_record(const CUpti_Activity& record) {
  ++stats_.records;
  switch (record.kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto& k = reinterpret_cast<const CUpti_ActivityKernel10&>(record);
      ++stats_.kernels;
      device_of_context_[k.contextId] = k.deviceId;
      if (k.start == 0 || k.end < k.start) {
        ++stats_.no_timestamp;
        return;
      }
      GpuOp g;
      g.op.name = kernel_name(k.name);
      g.nccl = is_nccl_kernel(g.op.name);
      if (g.nccl) ++stats_.nccl_kernels;
      auto lane_it = lane_of_stream_.find({k.deviceId, k.streamId});
      const Lane lane = g.nccl ? Lane::gpu_comm : lane_it != lane_of_stream_.end() ? lane_it->second : Lane::gpu_compute;
      g.op.rank = rank_of(k.deviceId, k.streamId);
      g.op.lane = lane;
      if (lane == Lane::gpu_comm) {
        g.op.category = OpCategory::comm;
      } else {  // by name; CUB's kernels take the category of the kernel before them on the stream
        OpCategory c = OpCategory::other;
        const std::pair<uint32_t, uint32_t> stream{k.deviceId, k.streamId};
        if (kernel_category(g.op.name, c) == KernelCategory::inherit) {
          auto last = last_category_of_stream_.find(stream);
          c = last != last_category_of_stream_.end() ? last->second : OpCategory::other;
        } else {
          last_category_of_stream_[stream] = c;
        }
        g.op.category = c;
      }
      g.op.start_ns = clock_.to_host(k.start);
      g.op.end_ns = clock_.to_host(k.end);
      g.device_id = k.deviceId;
      g.context_id = k.contextId;
      g.stream_id = k.streamId;
      g.correlation_id = k.correlationId;
      attach_launch(g);
      pending_.push_back(g);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto& m = reinterpret_cast<const CUpti_ActivityMemcpy6&>(record);
      ++stats_.memcpys;
      add_copy(m, memcpy_name(m.copyKind));
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET:
      ++stats_.memsets;
      add_copy(reinterpret_cast<const CUpti_ActivityMemset4&>(record), "memset");
      return;
    case CUPTI_ACTIVITY_KIND_RUNTIME: {
      const auto& a = reinterpret_cast<const CUpti_ActivityAPI&>(record);
      ++stats_.runtime;
      // only calls that make an activity record wait for it: kernel launches, copies, memsets and
      // (de)allocations (MEMORY2); cudaEventRecord, cudaStreamWaitEvent, cudaGetLastError ... never
      // get one and would only age out of the table, counted as launches dropped (tester38 #7:
      // 5,263 in a 20-step run, none of them a kernel's)
      const char* api = runtime_name(a.cbid);
      if (!makes_activity(api)) return;
      if (joined_early_.erase(a.correlationId)) {  // its MEMORY2 (or wait) record came first
        // allocations that waited for this call's thread (several ranks on the device)
        auto [first, last] = memory_waiting_.equal_range(a.correlationId);
        for (auto it = first; it != last; ++it) {
          it->second.event.rank = charge(it->second.device, it->second.stream, a.threadId);
          memory_.push_back(std::move(it->second.event));
        }
        memory_waiting_.erase(first, last);
        return;
      }
      // an activity that came before it (separate queues in CUPTI) takes it at the next take()
      add_launch(a.correlationId, {api, clock_.to_host(a.start), clock_.to_host(a.end), a.threadId});
      return;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto& s = reinterpret_cast<const CUpti_ActivitySynchronization2&>(record);
      ++stats_.synchronizations;
      GpuOp g;
      g.op = {0, kSyncLane, OpCategory::other, sync_name(s.type), 0, clock_.to_host(s.start),
              clock_.to_host(s.end), 0, 0};
      g.context_id = s.contextId;
      g.stream_id = s.streamId;
      g.correlation_id = s.correlationId;  // the runtime call that waited (its thread)
      g.device_id = UINT32_MAX;             // resolved through its context
      pending_.push_back(g);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
      const auto& m = reinterpret_cast<const CUpti_ActivityMemory4&>(record);
      ++stats_.memory;
      const bool alloc = m.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
      if (!alloc && m.memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) return;
      sessions::MemoryEvent e;
      const bool on_stream = m.streamId != CUPTI_INVALID_STREAM_ID;
      e.time_ns = clock_.to_host(m.timestamp);
      e.action = alloc ? kMemoryAllocAction : kMemoryFreeAction;
      e.address = static_cast<int64_t>(m.address);
      e.size = static_cast<int64_t>(m.bytes);
      e.requested = static_cast<int64_t>(m.bytes);
      e.tag = memory_tag(m.memoryKind);
      if (m.memoryPoolConfig.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID) e.tag += "_pool";
      e.stream = on_stream ? static_cast<int64_t>(m.streamId) : 0;
      // whose: the stream's rank, else the calling thread's (its cudaMalloc / cudaFree record),
      // else the device's
      if (auto l = launches_.find(m.correlationId); l != launches_.end()) {
        e.rank = charge(m.deviceId, m.streamId, l->second.thread);
        launches_.erase(l);  // its cudaMalloc / cudaFree
        memory_.push_back(std::move(e));
        return;
      }
      forget_call(m.correlationId);  // the call comes later (written at its end): not kept then
      if (stream_has_rank(m.deviceId, m.streamId) || rank_of_thread_.empty()) {
        e.rank = charge(m.deviceId, m.streamId, -1);
        memory_.push_back(std::move(e));
      } else {  // waits for its call's thread
        memory_waiting_.emplace(m.correlationId, WaitingMemory{std::move(e), m.deviceId, m.streamId});
      }
      return;
    }
    default:
      ++stats_.unknown_kind;
      return;
  }
}

bool CuptiDecoder::resolve(GpuOp& g, bool final) {
  if (g.op.lane == kSyncLane) {  // a wait: its device from its context; its call's thread if it needs one
    if (g.device_id == UINT32_MAX) {
      auto it = device_of_context_.find(g.context_id);
      if (it == device_of_context_.end()) return final;  // kept as rank 0 when never seen
      g.device_id = it->second;
    }
    if (g.launch_start_ns >= 0 || attach_launch(g)) return true;
    // a wait on a ranked stream, or with no thread mapped, needs no call: out now, and its call
    // (when it comes) is not kept
    if (final || stream_has_rank(g.device_id, g.stream_id) || rank_of_thread_.empty()) {
      forget_call(g.correlation_id);
      return true;
    }
    return false;
  }
  return g.launch_start_ns >= 0 || attach_launch(g) || final;
}

std::vector<GpuOp> CuptiDecoder::take(bool final) {
  std::vector<GpuOp> out, keep;
  int64_t latest = INT64_MIN;
  for (GpuOp& g : overdue_) {  // waited one take: out now, resolved or not
    latest = std::max(latest, g.op.end_ns);
    resolve(g, true);
    out.push_back(g);
  }
  overdue_.clear();
  for (GpuOp& g : pending_) {
    latest = std::max(latest, g.op.end_ns);
    (resolve(g, final) ? out : keep).push_back(g);
  }
  pending_.clear();
  overdue_ = std::move(keep);
  // whose each op is: its stream's rank, else its call's thread's, else its device's (a wait on a
  // context never seen stays rank 0 unless its thread says)
  for (GpuOp& g : out) {
    const int64_t thread = g.launch_start_ns >= 0 ? static_cast<int64_t>(g.launch_thread) : -1;
    if (g.device_id != UINT32_MAX) {
      g.op.rank = charge(g.device_id, g.stream_id, thread);
    } else if (auto t = thread >= 0 ? rank_of_thread_.find(static_cast<uint32_t>(thread)) : rank_of_thread_.end();
               t != rank_of_thread_.end()) {
      g.op.rank = t->second;
    }
  }
  if (final)  // allocations still waiting for their call: their device's rank
    for (auto& [corr, w] : memory_waiting_) {
      w.event.rank = charge(w.device, w.stream, -1);
      memory_.push_back(std::move(w.event));
    }
  if (final) memory_waiting_.clear();
  // Runtime calls that launched nothing (cudaMalloc, cudaEventQuery, ...) are forgotten once
  // they are a minute older than the newest activity (no launch waits that long to run).
  constexpr int64_t kLaunchHorizonNs = 60'000'000'000;
  if (final) {
    launches_.clear();
    launch_order_.clear();
  } else if (latest != INT64_MIN) {
    for (auto it = launches_.begin(); it != launches_.end();)
      it = it->second.end_ns < latest - kLaunchHorizonNs ? launches_.erase(it) : std::next(it);
  }
  std::sort(out.begin(), out.end(), [](const GpuOp& a, const GpuOp& b) {
    return std::tie(a.op.rank, a.op.lane, a.op.start_ns) < std::tie(b.op.rank, b.op.lane, b.op.start_ns);
  });
  return out;
}

std::vector<sessions::MemoryEvent> CuptiDecoder::take_memory_events() {
  for (auto it = memory_waiting_.begin(); it != memory_waiting_.end();) {  // waited one take: the device's rank
    if (!it->second.waited) {
      it->second.waited = true;
      ++it;
      continue;
    }
    it->second.event.rank = charge(it->second.device, it->second.stream, -1);
    memory_.push_back(std::move(it->second.event));
    it = memory_waiting_.erase(it);
  }
  std::vector<sessions::MemoryEvent> out = std::move(memory_);
  memory_.clear();
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.time_ns < b.time_ns; });
  return out;
}

int64_t CuptiDecoder::join_collectives(std::vector<GpuOp>& ops, const std::vector<sessions::CollectiveRecord>& records,
                                       int64_t tolerance_ns) {
  std::map<int32_t, std::vector<const sessions::CollectiveRecord*>> by_rank;
  for (const auto& r : records) by_rank[r.rank].push_back(&r);
  std::map<int32_t, std::vector<GpuOp*>> kernels;
  for (auto& g : ops)
    if (g.nccl) kernels[g.op.rank].push_back(&g);
  int64_t joined = 0;
  for (auto& [rank, ks] : kernels) {
    auto& rs = by_rank[rank];
    std::stable_sort(rs.begin(), rs.end(), [](auto* a, auto* b) { return a->start_ns < b->start_ns; });
    std::stable_sort(ks.begin(), ks.end(), [](auto* a, auto* b) { return a->op.start_ns < b->op.start_ns; });
    size_t i = 0;
    for (GpuOp* k : ks) {
      // Records that ended before this kernel began launched no kernel (size-1 group, no bytes).
      while (i < rs.size() && rs[i]->end_ns + tolerance_ns < k->op.start_ns) ++i;
      if (i == rs.size()) break;
      const auto* r = rs[i];
      if (r->start_ns - tolerance_ns > k->op.start_ns || k->op.end_ns > r->end_ns + tolerance_ns)
        continue;  // not issued by a recorded collective (another communicator)
      k->op.name = names_.intern(r->name);
      k->op.bytes = r->bytes_sent + r->bytes_received;
      k->op.correlation = r->sequence;
      k->op.category = OpCategory::comm;
      k->op.step = r->step;
      ++joined;
      ++i;
    }
  }
  stats_.nccl_joined += joined;
  // the intra-device communicator's copies and reductions: every one inside a record takes it
  for (auto& g : ops) {
    if (g.nccl || g.op.lane != Lane::gpu_comm || g.op.category != OpCategory::comm) continue;
    auto it = by_rank.find(g.op.rank);
    if (it == by_rank.end()) continue;
    for (const auto* r : it->second)  // sorted by start above only for ranks with NCCL kernels: scan
      if (r->start_ns - tolerance_ns <= g.op.start_ns && g.op.end_ns <= r->end_ns + tolerance_ns) {
        g.op.name = names_.intern(r->name);
        g.op.correlation = r->sequence;
        g.op.step = r->step;
        break;
      }
  }
  return joined;
}

}  // namespace embedscope::profiler
