#pragma once
// The state the threaded executor's ranks work on (rank.h): Shared, what the ranks of one run
// share (the spec, plan and layout, the batch source, the tracer, the session, the devices and
// communicators the executor made); LocalShard, one shard a rank holds (its rows and optimizer
// state, on the host or in the device arena, encoded or fp32, factorized or not); Inflight, one
// batch on its way through the phases of a step (its ids before and after the input dist, the
// per-slot ids, offsets and scales, the queued comm ops it waits for). Internal to the threaded
// executor.


#include "embedscope/engine/input/source.h"
#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <mutex>
#include <numeric>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "comm/collectives.h"
#include "comm/hier/hier_comm.h"
#include "sharding/layout.h"
#include "exec/device/rank_device.h"
#include "exec/threaded/memory_records.h"
#include "exec/threaded/rank_dense_device.h"
#include "embedscope/engine/comm/gloo_process_group.h"
#include "embedscope/engine/model/dense.h"
#include "embedscope/engine/input/hashing.h"
#include "embedscope/engine/input/id_histogram.h"
#include "embedscope/engine/input/input.h"
#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/kernels/low_rank.h"
#include "embedscope/engine/model/low_rank.h"
#include "embedscope/engine/model/host_cache.h"
#include "embedscope/engine/memory/memory.h"
#include "embedscope/engine/quant/row_codec.h"
#include "embedscope/engine/program/step_program.h"
#include "embedscope/engine/rebalance/policy.h"
#include "embedscope/engine/exec/run.h"
#include "embedscope/profiler/cpu/tracer.h"
#include "embedscope/sessions/store/session.h"
#include "sharding/embedding_sharding.h"
#include "program/program_sink.h"
#include "comm_worker.h"
#include "rank_failure.h"
#if EMBEDSCOPE_WITH_CUDA
#include "embedscope/engine/comm/nccl_comm.h"
#endif

namespace embedscope::engine::threaded {

using detail::Collectives;
using detail::GlooCollectives;
using detail::Layout;
using detail::Slot;
using sessions::Lane;
using sessions::OpCategory;
using profiler::ScopedSpan;

/// The machine's host name (gethostname).
std::string host_name();

// ---- shared run state -------------------------------------------------------------------------
struct Shared {
  const WorkloadSpec& spec;
  const ShardingPlan& plan;
  const TrainerOptions& opt;
  Layout layout;
  std::unique_ptr<BatchSource> source;  // spec.input (make_batch_source)
  profiler::Tracer tracer;
  std::shared_ptr<Rendezvous> rv = Rendezvous::in_process();
  sessions::SessionWriter* session = nullptr;
  int progress_rank = 0;  // the local rank that calls TrainerOptions::on_step
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  std::vector<RankError> errors;
  // the device of each rank (cuda backend, or TrainerOptions::emulate_device); empty: none
  std::vector<std::unique_ptr<detail::RankDevice>> gpus;
  // with gpus: the device (GPU or emulated device) each rank is placed on (exec/gpu_placement.h);
  // a group whose members all share one runs on the intra-device communicator, whose shared
  // state is made once per group name (under mu)
  std::vector<int> device_of_rank;
  std::map<std::string, std::shared_ptr<detail::LocalGroup>> local_groups;
  // Called on a rank's thread at the end of each of its steps, after the step's spans, step row
  // and memory went to the session: the rank, the step and its host window [start_ns, end_ns)
  // (the cuda executor drains CUPTI there). Unset: nothing. Must not throw.
  std::function<void(int rank, int64_t step, int64_t start_ns, int64_t end_ns)> on_step_end;
  // Called on each rank's thread when it starts (after bind_thread) and on its comm worker's
  // thread when the rank sets up: the rank (the cuda executor names the thread's rank to CUPTI,
  // so that device-level records of its calls - cudaMalloc, copies on no rank's stream - are
  // charged to it). Unset: nothing. Must not throw.
  std::function<void(int rank)> on_thread_start;
  // per group name on the hierarchical communicator (comm/hier/): its members' arrivals (under mu)
  std::map<std::string, std::shared_ptr<detail::HierArrivals>> hier_arrivals;
#if EMBEDSCOPE_WITH_CUDA
  // cuda backend: the NCCL communicators of each rank (owned by the cuda executor); every
  // collective record, for joining NCCL kernels with them (records_mu)
  std::vector<NcclComm*> nccl_world, nccl_node, nccl_cross;
  // per group name ("world", "node0", "cross1", ...) spread over several GPUs with several ranks
  // on some GPU: the NCCL communicator of the group's leaders (one rank per GPU), by global rank
  // (null for the other ranks); the cross-device part of the hierarchical communicator
  std::map<std::string, std::vector<NcclComm*>> nccl_leaders;
  std::mutex records_mu;
  std::vector<sessions::CollectiveRecord> records;
#endif

  Shared(const WorkloadSpec& s, const ShardingPlan& p, const TrainerOptions& o)
      : spec(s), plan(p), opt(o), layout(s, p), source(make_batch_source(s)), tracer(p.world_size, o.trace) {}
};

struct LocalShard {
  int table = 0;
  int shard_index = 0;  // index into TablePlan::shards
  Shard s;
  // the rows: fp32 tables in `weights`; the other data types (TableSpec::data_type) encoded in
  // `packed` (num_rows x row_bytes(data_type, num_cols), quant/row_codec.h), `weights` empty
  TableDataType data_type = TableDataType::fp32;
  // TableSpec::uses_stochastic_rounding: updates encode with encode_row_stochastic, keyed by
  // sr_key (the spec's seed, the table, the shard's row and column offsets)
  bool stochastic_rounding = false;
  StochasticRoundingKey sr_key;
  DeviceBuffer<float> weights;
  DeviceBuffer<uint8_t> packed;
  QuantError storage_error;  // of the rows encoded by the updates, measured steps (lookup error vs fp32)
  // optimizer state (FBGEMM layouts): fp32 in momentum1 / momentum2; fp16 / bf16
  // (TableSpec::optimizer_state_type) as 2-byte codes in packed_state1 / packed_state2
  OptimizerStateType state_type = OptimizerStateType::fp32;
  DeviceBuffer<float> momentum1, momentum2;
  DeviceBuffer<uint8_t> packed_state1, packed_state2;
  // low-rank tables (TableSpec::low_rank_dim r > 0, model/low_rank.h): `weights` holds A
  // (num_rows x r), factor_b holds B (r x num_cols) and the b_* buffers B's optimizer state (the
  // state above is A's)
  int64_t low_rank_dim = 0;
  DeviceBuffer<float> factor_b, b_momentum1, b_momentum2;
  DeviceBuffer<uint8_t> b_packed_state1, b_packed_state2;
  // placement host / host_cached (TableSpec::placement): `weights` and the state above are host
  // memory (buffers without an arena); `host` moves their rows to the device and keeps the cache
  TablePlacement placement = TablePlacement::device;
  std::unique_ptr<HostRowStore> host;
  /// Row r of the shard (local row index) decoded to fp32 into out[0, num_cols) (low-rank: A_r B).
  void row(int64_t r, float* out) const {
    if (low_rank_dim > 0)
      low_rank_row(weights.data(), low_rank_dim, factor_b.data(), s.num_cols, r, out);
    else if (data_type == TableDataType::fp32)
      std::memcpy(out, weights.data() + r * s.num_cols, sizeof(float) * static_cast<size_t>(s.num_cols));
    else
      decode_row(data_type, packed.data() + r * row_bytes(data_type, s.num_cols), s.num_cols, out);
  }
  RowOptimizerState state() {
    return {{momentum1.data(), momentum1.size()},
            {momentum2.data(), momentum2.size()},
            state_type,
            {packed_state1.data(), packed_state1.size()},
            {packed_state2.data(), packed_state2.size()}};
  }
  RowOptimizerState b_state() {
    return {{b_momentum1.data(), b_momentum1.size()},
            {b_momentum2.data(), b_momentum2.size()},
            state_type,
            {b_packed_state1.data(), b_packed_state1.size()},
            {b_packed_state2.data(), b_packed_state2.size()}};
  }
};

// ---- one batch on its way through the phases of a step ---------------------------------------
// What the sharding modules' ops see of it (slot_out, pooled, dpooled, slot_grad, output_jobs,
// their scratch) is the ModuleBatch base.
struct Inflight : sharding::ModuleBatch {
  int64_t it = -1;  // the batch's iteration (warmup included)
  Batch batch;
  // a run with a session: the batch's ids over its tables' row buckets, until its lookup adds
  // them to the session's histogram (Rank::lookup)
  std::optional<IdHistogram> ids_histogram;
  std::vector<int64_t> off;
  // input dist: what is sent, and what is received (into host vectors on the comm thread)
  std::vector<int64_t> send_splits, send_counts_splits, recv_counts_splits, send_lengths, send_ids, send_ids_counts;
  std::vector<int64_t> lsend, lrecv, recv_splits, irecv, recv_lengths_v, recv_ids_v;
  /// The comm ops the batch queued (its input dist, its output dist) that nobody has waited for
  /// yet, in queue order (Rank::settle).
  std::vector<std::shared_future<void>> queued;
  DeviceBuffer<int64_t> recv_lengths, recv_ids;
  // per local slot: its W*B bags (source rank major)
  std::vector<std::vector<int64_t>> slot_ids, slot_off, slot_len;
  // The input dist on the device (Rank::input_dist_on_device, decided by bucketize; issue 14).
  // Until finish_input, in device memory outside the rank's allocator, as the intra-device
  // communicator's staging they replace (so the memory estimate's replay holds): kjt_send
  // (RankDevice::scratch_alloc) the bucketized lengths (send slots x B), their splits (send
  // slots) and ids; recv_lengths_comm and recv_ids_comm what the all-to-alls received (comm_alloc
  // on the comm worker: the arena belongs to the compute thread). finish_input frees them once
  // kjt_permute read them; then recv_ids (arena) holds the ids per local slot (slot k's from
  // slot_at[k], slot_n[k] of them) and slot_off_dev (arena, where the host path's recv_lengths
  // was) each slot's W * B + 1 offsets from 0 (at k * (W * B + 1)). slot_host[k]: slot k's ids,
  // offsets and lengths were also copied to slot_ids / slot_off / slot_len
  // (Rank::slot_ids_on_host); every slot's lengths are there when some slot needs them (mean
  // pooling, a slot on the host).
  bool kjt_dev = false;
  DeviceBuffer<int64_t> slot_off_dev;
  std::shared_ptr<void> kjt_send, recv_lengths_comm, recv_ids_comm;
  std::vector<int64_t> slot_at, slot_n;
  std::vector<uint8_t> slot_host;
  std::vector<std::vector<float>> slot_scale;  // per-bag scale used forward and backward
  bool looked_up = false;         // lookup() ran (semi_sync's batch ahead at a step's end)
  bool output_done = false;       // finish_output_dist ran: `pooled` is final (a second call does nothing)
  std::vector<uint8_t> pooled_dev;  // per feature: pooled[f] is final in device memory (finish_output_dist)
  bool trained = false;           // its dense_optimizer ran: the batch is done
  int64_t seen_in = -1;           // the last iteration whose phases touched it
  // the buffers go back to the allocator in the order they always did: the output dist's, the
  // pooled outputs, the looked-up rows, then the received ids (members)
  ~Inflight() {
    output_jobs.clear();
    pooled.clear();
    slot_out.clear();
  }
};

}  // namespace embedscope::engine::threaded
