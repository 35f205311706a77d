// The cuda executor: the threaded executor's ranks with rank r on GPU r / ranks_per_gpu
// (CudaRankDevice; the placement of exec/gpu_placement.h, checked by check_cuda_placement), one
// NCCL communicator per rank and process group (ncclCommInitAll) when every rank has a GPU of
// its own, or - all ranks on one GPU - no NCCL at all: every group then runs on the
// intra-device communicator (comm/local/, copies and a reduction kernel on each rank's comm
// stream; NCCL cannot put one GPU in a communicator twice); CUPTI for the whole run, drained
// into the session at every step end (when every rank has ended the step: profiler::SessionDrain),
// so that a killed run keeps the GPU lanes of its finished steps; each GPU op and MEMORY2 event
// in the step whose host window holds its start; the rest when the ranks have ended.
#include <cuda_runtime_api.h>

#include "exec/device/cuda_rank_device.h"
#include "exec/threaded/executor.h"
#include "embedscope/engine/exec/backend.h"
#include "embedscope/engine/exec/gpu_placement.h"
#include "embedscope/engine/comm/nccl_comm.h"
#include "embedscope/profiler/device/cuda_device.h"
#include "embedscope/profiler/cupti/cupti_tracer.h"
#include "embedscope/profiler/cupti/session_drain.h"
#include "embedscope/sessions/model/metadata_keys.h"

namespace embedscope::engine::exec {

namespace {

using detail::Layout;

class CudaExecutor final : public threaded::ThreadedExecutor {
 public:
  using ThreadedExecutor::ThreadedExecutor;
  ~CudaExecutor() override { ranks_.clear(); }  // the ranks use the communicators below

  /// The devices, the communicators and CUPTI, before the session exists (an NCCL error throws).
  void prepare() override {
    const WorkloadSpec& spec = sh_.spec;
    const int W = spec.devices.count;
    const auto timeout = std::chrono::milliseconds(spec.collective_timeout_ms);
    placement_ = check_cuda_placement(spec, profiler::cuda_devices());
    const auto& gpu_of = placement_.gpu_of_rank;
    sh_.gpus.clear();
    for (int r = 0; r < W; ++r) sh_.gpus.push_back(std::make_unique<detail::CudaRankDevice>(gpu_of[static_cast<size_t>(r)]));
    // the GPU of each member of a group, in group order (ncclCommInitAll's device list)
    auto devices_of = [&](const std::vector<int>& members) {
      std::vector<int> d;
      for (int m : members) d.push_back(gpu_of[static_cast<size_t>(m)]);
      return d;
    };
    auto adopt = [&](std::vector<std::unique_ptr<NcclComm>> group, std::vector<NcclComm*>& of_rank,
                     const std::vector<int>& members) {
      of_rank.resize(static_cast<size_t>(W));
      for (size_t i = 0; i < group.size(); ++i) {
        of_rank[static_cast<size_t>(members[i])] = group[i].get();
        comms_.push_back(std::move(group[i]));
      }
    };
    sh_.device_of_rank = gpu_of;
    std::vector<int> all(static_cast<size_t>(W));
    std::iota(all.begin(), all.end(), 0);
    if (!placement_.shared()) adopt(NcclComm::init_all(devices_of(all), "world", timeout, all), sh_.nccl_world, all);
    if (sh_.layout.hierarchical && !placement_.shared()) {  // the node and cross groups, as the cpu backend's (Rank::setup)
      const Layout& L = sh_.layout;
      for (int n = 0; n < L.nodes; ++n) {
        std::vector<int> m;
        for (int i = 0; i < L.local; ++i) m.push_back(n * L.local + i);
        adopt(NcclComm::init_all(devices_of(m), fmt::format("node{}", n), timeout, m), sh_.nccl_node, m);
      }
      for (int l = 0; l < L.local; ++l) {
        std::vector<int> m;
        for (int n = 0; n < L.nodes; ++n) m.push_back(n * L.local + l);
        adopt(NcclComm::init_all(devices_of(m), fmt::format("cross{}", l), timeout, m), sh_.nccl_cross, m);
      }
    }
    // EMBEDSCOPE_INJECT_DEVICE_FAULT (a test's injected CUDA error) wraps a device: last, after
    // the CudaRankDevice casts below
    if (!sh_.opt.trace || sh_.opt.session_path.empty()) return apply_device_fault_hook();
    try {
      cupti_ = std::make_unique<profiler::CuptiTracer>(sh_.tracer.clock());
      for (int r = 0; r < W; ++r) cupti_->map_device(gpu_of[static_cast<size_t>(r)], r);
      // each rank's streams are its own (ranks sharing a GPU: the device does not say whose an
      // op is); its comm stream holds the intra-device communicator's copies and reductions
      for (int r = 0; r < W; ++r) {
        const auto* dev = static_cast<const detail::CudaRankDevice*>(sh_.gpus[static_cast<size_t>(r)].get());
        dev->bind_thread();
        try {
          cupti_->map_stream(dev->device(), dev->stream(), sessions::Lane::gpu_compute, r);
          cupti_->map_stream(dev->device(), dev->comm_stream(), sessions::Lane::gpu_comm, r);
        } catch (const std::runtime_error&) {
        }
      }
      for (const auto& c : comms_) {
        for (int r = 0; r < W; ++r)  // a rank on the communicator's GPU
          if (gpu_of[static_cast<size_t>(r)] == c->device()) {
            sh_.gpus[static_cast<size_t>(r)]->bind_thread();
            break;
          }
        try {  // NCCL's kernels are recognised by their names too: a stream CUPTI does not know yet is no loss
          cupti_->map_stream(c->device(), c->stream(), sessions::Lane::gpu_comm);
        } catch (const std::runtime_error&) {
        }
      }
    } catch (const std::exception& e) {  // the run goes on; the session says why it has no GPU ops
      cupti_.reset();
      cupti_error_ = e.what();
      return apply_device_fault_hook();
    }
    // the session exists from run() on (sh_.session); the drain reads it at the first step end
    sh_.on_step_end = [this](int rank, int64_t step, int64_t start_ns, int64_t end_ns) {
      drain().step_ended(rank, step, start_ns, end_ns);
    };
    apply_device_fault_hook();
  }

 protected:
  void after_ranks(sessions::SessionWriter* session) override {
    const int W = sh_.spec.devices.count;
    // a failed rank may have left its peers' kernels waiting: abort every communicator before
    // they are destroyed (ncclCommDestroy would wait for them)
    if (!sh_.errors.empty())
      for (auto& c : comms_) c->abort();
    for (auto& g : sh_.gpus) {
      g->bind_thread();
      cudaDeviceSynchronize();
    }
    if (cupti_) {
      // what the step-end drains left, and the records of a step a rank failed in
      std::map<int32_t, int64_t> running;
      for (size_t i = 0; i < ranks_.size(); ++i) {
        const auto& win = ranks_[i]->windows;
        const int64_t in = ranks_[i]->step_in_progress();
        if (!win.empty() && in > win.back().step) running[local_ranks_[i]] = in;
      }
      drain().finish(running);
      if (session) cupti_->write_metadata(*session);
      if (cupti_error_.empty()) cupti_error_ = drain().error();
    }
    if (!session) return;
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    session->set_metadata(sessions::meta::kCudaVersion, fmt::format("{}.{}", runtime / 1000, runtime % 1000 / 10));
    session->set_metadata(sessions::meta::kNcclVersion, nccl_version());
    std::string names;
    for (int r = 0; r < W; ++r) {  // per rank: the name of the GPU it ran on
      const auto& n = profiler::cuda_devices().names;
      const size_t g = static_cast<size_t>(placement_.gpu_of_rank[static_cast<size_t>(r)]);
      names += (r ? "," : "") + (g < n.size() ? n[g] : std::string("GPU"));
    }
    session->set_metadata(sessions::meta::kGpuNames, names);
    if (!cupti_error_.empty()) session->set_metadata(sessions::meta::kGpuTraceError, cupti_error_);
  }

 private:
  GpuPlacement placement_;  // rank -> GPU (prepare)
  std::vector<std::unique_ptr<NcclComm>> comms_;
  std::unique_ptr<profiler::CuptiTracer> cupti_;
  std::string cupti_error_;
  std::once_flag drain_once_;
  std::unique_ptr<profiler::SessionDrain> drain_;  // made at the first use, when sh_.session is set
  profiler::SessionDrain& drain() {
    std::call_once(drain_once_, [this] {
      drain_ = std::make_unique<profiler::SessionDrain>(
          *cupti_, sh_.session, std::vector<int32_t>(local_ranks_.begin(), local_ranks_.end()),
          -sh_.spec.warmup_steps - 1,  // the step of setup's work (Rank::setup)
          [this](int64_t since_ns) {
            std::vector<sessions::CollectiveRecord> out;
            std::lock_guard<std::mutex> lock(sh_.records_mu);
            for (const auto& r : sh_.records)
              if (r.end_ns + 20000 >= since_ns) out.push_back(r);
            return out;
          });
    });
    return *drain_;
  }
};

}  // namespace

std::unique_ptr<Executor> make_cuda_executor(const WorkloadSpec& spec, const ShardingPlan& plan,
                                             const TrainerOptions& options) {
  return std::make_unique<CudaExecutor>(spec, plan, options);
}

}  // namespace embedscope::engine::exec
