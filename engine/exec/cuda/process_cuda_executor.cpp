// The cuda backend with one rank per process (embedscope run --backend cuda --rank R
// --world-size N --rendezvous URL, mpirun, srun, launch): the process executor's store and
// handshake (exec/launch/executor.h), then this process's GPU from its local rank
// (launch::choose_process_gpu: before the rank claims, so that a refusal reaches its peers at
// once), rank 0's NCCL unique id of each process group through the run's store
// (launch::exchange_nccl_ids) and ncclCommInitRank on every rank (NcclComm::init_rank), then the
// interpreter the threaded cuda run uses for one rank (CudaRankDevice, NCCL collectives, CUPTI).
// Several ranks on one GPU are not for this path: each process holds one GPU of its own.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <numeric>

#include <fmt/format.h>

#include "embedscope/engine/comm/nccl_comm.h"
#include "embedscope/engine/exec/gpu_placement.h"
#include "embedscope/engine/workload/spec_error.h"
#include "embedscope/profiler/cupti/cupti_tracer.h"
#include "exec/cuda/gpu_trace_drain.h"
#include "embedscope/profiler/device/cuda_device.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "exec/device/cuda_rank_device.h"
#include "exec/launch/executor.h"
#include "exec/launch/nccl_setup.h"

namespace embedscope::engine::exec {

namespace {

class ProcessCudaExecutor final : public launch::ProcessExecutor {
 public:
  using ProcessExecutor::ProcessExecutor;
  ~ProcessCudaExecutor() override { ranks_.clear(); }  // the rank uses the communicators below

 protected:
  /// This process's GPU (refused: no GPU, more local ranks than GPUs, several ranks per GPU,
  /// the rank's memory larger than the GPU's), before the rank claims.
  void before_rendezvous() override {
    const WorkloadSpec& spec = sh_.spec;
    const auto& p = sh_.opt.process;
    if (spec.devices.ranks_per_gpu > 1)
      throw SpecError(fmt::format("/devices/ranks_per_gpu: {} ranks per GPU run as threads of one process (embedscope "
                                  "run --devices N); with one rank per process each process holds one GPU",
                                  spec.devices.ranks_per_gpu));
    const profiler::CudaDevices& devices = profiler::cuda_devices();
    launch::GpuChoiceInput in = launch::gpu_choice_from_environment(launch::gpu_choice_environment(), p.rank, devices.count);
    // the local rank the run was given: the launcher's variables (read above too) or, when
    // they say another or none, embedscope launch's EMBEDSCOPE_LAUNCH_NODE (or MPI's bootstrap)
    if (p.local_rank >= 0 && p.local_rank != in.local_rank) {
      in.local_rank = p.local_rank;
      in.local_rank_from = "embedscope launch";
      in.local_world_size = 0;
      in.local_world_from.clear();
    }
    choice_ = launch::choose_process_gpu(in);
    GpuPlacement mine;  // this process's one rank on its GPU: devices.memory_bytes must fit there
    mine.devices = devices.count;
    mine.gpu_of_rank = {choice_.gpu};
    check_placement_memory(mine, spec.devices.memory_bytes, devices.total_bytes, devices.names, "GPU");
  }

  /// The NCCL communicators (world; with table_row_wise the node and cross groups too), the
  /// rank's device and CUPTI.
  void after_rendezvous() override {
    const WorkloadSpec& spec = sh_.spec;
    const int W = spec.devices.count, R = sh_.opt.process.rank;
    const auto timeout = std::chrono::milliseconds(spec.collective_timeout_ms);
    sh_.gpus.clear();
    sh_.gpus.resize(static_cast<size_t>(W));  // only this process's rank has a device here
    sh_.gpus[static_cast<size_t>(R)] = std::make_unique<detail::CudaRankDevice>(choice_.gpu);
    {  // two processes of one host on one GPU (e.g. the same one-GPU CUDA_VISIBLE_DEVICES): refused, named
      char bus[64] = {};
      if (cudaDeviceGetPCIBusId(bus, sizeof bus, choice_.gpu) != cudaSuccess) std::snprintf(bus, sizeof bus, "%d", choice_.gpu);
      launch::check_distinct_gpus(run_store(), R, W, threaded::host_name(), bus, choice_.how, timeout, sh_.opt.cancel);
    }
    const auto& L = sh_.layout;
    std::vector<std::string> groups{"world"};
    if (L.hierarchical) {
      for (int n = 0; n < L.nodes; ++n) groups.push_back(fmt::format("node{}", n));
      for (int l = 0; l < L.local; ++l) groups.push_back(fmt::format("cross{}", l));
    }
    const auto ids = launch::exchange_nccl_ids(
        run_store(), R, groups,
        [] {
          ncclUniqueId id{};
          if (const ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
            throw std::runtime_error(fmt::format("ncclGetUniqueId failed: {}", ncclGetErrorString(r)));
          return std::string(id.internal, sizeof id.internal);
        },
        timeout, sh_.opt.cancel);
    auto init = [&](const std::string& group, std::vector<int> members, std::vector<NcclComm*>& of_rank) {
      ncclUniqueId id{};
      const std::string& bytes = ids.at(group);
      std::copy(bytes.begin(), bytes.end(), id.internal);
      const int size = static_cast<int>(members.size());
      const int me = static_cast<int>(std::find(members.begin(), members.end(), R) - members.begin());
      comms_.push_back(NcclComm::init_rank(id, size, me, choice_.gpu, group, timeout, std::move(members)));
      of_rank.assign(static_cast<size_t>(W), nullptr);
      of_rank[static_cast<size_t>(R)] = comms_.back().get();
    };
    std::vector<int> all(static_cast<size_t>(W));
    std::iota(all.begin(), all.end(), 0);
    init("world", all, sh_.nccl_world);  // every process in the same order: world, node, cross
    if (L.hierarchical) {
      const int node = R / L.local, l = R % L.local;
      std::vector<int> node_members, cross_members;
      for (int i = 0; i < L.local; ++i) node_members.push_back(node * L.local + i);
      for (int n = 0; n < L.nodes; ++n) cross_members.push_back(n * L.local + l);
      init(fmt::format("node{}", node), node_members, sh_.nccl_node);
      init(fmt::format("cross{}", l), cross_members, sh_.nccl_cross);
    }
    // EMBEDSCOPE_INJECT_DEVICE_FAULT (a test's injected CUDA error): last, after the casts below
    if (!sh_.opt.trace || sh_.opt.session_path.empty()) return apply_device_fault_hook();
    try {
      cupti_ = std::make_unique<profiler::CuptiTracer>(sh_.tracer.clock());
      cupti_->map_device(choice_.gpu, R);
      const auto* dev = static_cast<const detail::CudaRankDevice*>(sh_.gpus[static_cast<size_t>(R)].get());
      dev->bind_thread();
      try {
        cupti_->map_stream(dev->device(), dev->stream(), sessions::Lane::gpu_compute, R);
        cupti_->map_stream(dev->device(), dev->comm_stream(), sessions::Lane::gpu_comm, R);
      } catch (const std::runtime_error&) {
      }
      for (const auto& c : comms_) try {
          cupti_->map_stream(c->device(), c->stream(), sessions::Lane::gpu_comm, R);
        } catch (const std::runtime_error&) {
        }
    } catch (const std::exception& e) {  // the run goes on; the session says why it has no GPU ops
      cupti_.reset();
      cupti_error_ = e.what();
      return apply_device_fault_hook();
    }
    // drained into this rank's session at every step end, as the threaded cuda run: a killed
    // process keeps the GPU lanes of its ended steps
    gpu_trace_ = std::make_unique<GpuTraceDrain>(*cupti_, sh_, std::vector<int32_t>{R});
    sh_.on_step_end = [this](int rank, int64_t step, int64_t start_ns, int64_t end_ns) {
      gpu_trace_->step_ended(rank, step, start_ns, end_ns);
    };
    apply_device_fault_hook();
  }

  void after_ranks(sessions::SessionWriter* session) override {
    const int R = sh_.opt.process.rank;
    if (!sh_.errors.empty())  // a peer may be gone: its kernels never finish (ncclCommDestroy would wait)
      for (auto& c : comms_) c->abort();
    if (auto& g = sh_.gpus[static_cast<size_t>(R)]) {
      g->bind_thread();
      cudaDeviceSynchronize();
    }
    if (gpu_trace_) {
      const std::string error = gpu_trace_->finish(ranks_, session);
      if (cupti_error_.empty()) cupti_error_ = error;
    }
    if (!session) return;
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    session->set_metadata(sessions::meta::kCudaVersion, fmt::format("{}.{}", runtime / 1000, runtime % 1000 / 10));
    session->set_metadata(sessions::meta::kNcclVersion, nccl_version());
    session->set_metadata(sessions::meta::kGpuNames, gpu_name());
    if (!cupti_error_.empty()) session->set_metadata(sessions::meta::kGpuTraceError, cupti_error_);
  }

 private:
  std::string gpu_name() const {
    const auto& n = profiler::cuda_devices().names;
    return static_cast<size_t>(choice_.gpu) < n.size() ? n[static_cast<size_t>(choice_.gpu)] : std::string("GPU");
  }

  launch::GpuChoice choice_;
  std::vector<std::unique_ptr<NcclComm>> comms_;
  std::unique_ptr<profiler::CuptiTracer> cupti_;
  std::string cupti_error_;
  std::unique_ptr<GpuTraceDrain> gpu_trace_;  // with cupti_ (after_rendezvous); ends before it
};

}  // namespace

std::unique_ptr<Executor> make_process_cuda_executor(const WorkloadSpec& spec, const ShardingPlan& plan,
                                                     const TrainerOptions& options) {
  return std::make_unique<ProcessCudaExecutor>(spec, plan, options);
}

}  // namespace embedscope::engine::exec
