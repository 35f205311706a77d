#pragma once
// The collectives one rank of an executor calls, on host buffers (and three on device buffers:
// all_to_all_v_device, reduce_scatter_device, all_gather_v_device): Gloo (cpu backend) or NCCL
// (cuda backend, cuda_executor.h), so both executors share one step program (exec/threaded/).
// Same arguments and semantics as ProcessGroup's (comm/gloo_process_group.h). Internal to the engine.

#include <memory>
#include <span>

#include "embedscope/engine/comm/gloo_process_group.h"

namespace embedscope::engine::detail {

class Collectives {
 public:
  virtual ~Collectives() = default;
  /// Sequence number the next collective will get.
  virtual uint64_t next_sequence() const = 0;
  /// The sequence number a span of collectives is joined by, given next_sequence() before it
  /// began: that one (the span's first collective) unless the group numbers more collectives
  /// than the span's own (NCCL's all-to-all check of split sizes is one), then the last.
  virtual uint64_t span_correlation(uint64_t next_before) const { return next_before; }
  virtual const CommCounters& counters() const = 0;
  virtual void set_observer(const profiler::RunClock* clock, ProcessGroup::Observer observer) = 0;
  /// Records every collective of the group in `recorder` (the rank's flight recorder, which
  /// must outlive the group's collectives; null: none). Gloo: ProcessGroup::set_flight_recorder;
  /// NCCL: NcclComm::set_flight_recorder.
  virtual void set_flight_recorder(FlightRecorder* recorder) = 0;
  virtual void all_to_all_v(const char* op_name, const void* send, std::span<const int64_t> send_counts, void* recv,
                            std::span<const int64_t> recv_counts, size_t elem_size) = 0;
  /// all_to_all_v with `send` and `recv` in the device memory of the calling rank (its
  /// DeviceBuffer::device_data(): GPU memory on the cuda backend, host segments on the host
  /// stand-in): no host staging. Same arguments, split check, sequence numbers, byte counters,
  /// collective records, flight recorder entries and errors as all_to_all_v. The device work
  /// issued before the call (on the rank's compute stream: the packing of `send`) is done before
  /// any member reads `send`; `recv` is written when the call returns. The intra-device
  /// communicator copies the blocks straight out of the peers' send buffers; NCCL sends and
  /// receives on the device pointers; the hierarchical communicator runs its parts on device
  /// memory of the rank's device; Gloo (the host stand-in's leaders, or flat groups of emulated
  /// devices) takes them as host pointers, which only the stand-in's device memory is.
  virtual void all_to_all_v_device(const char* op_name, const void* send, std::span<const int64_t> send_counts,
                                   void* recv, std::span<const int64_t> recv_counts, size_t elem_size) = 0;
  virtual void all_gather_v(const char* op_name, const void* send, void* recv, std::span<const int64_t> counts,
                            size_t elem_size) = 0;
  // The row-split dists on the device (issue 14: row_wise / table_row_wise, sharding/row_wise.cpp,
  // table_row_wise.cpp), as all_to_all_v_device: `send` and `recv` in the calling rank's device
  // memory, the device work issued before the call done before any member reads `send`, `recv`
  // written when the call returns; the same split check, sequence numbers, byte counters,
  // records, flight recorder entries and errors as the host variants.
  /// reduce_scatter_q at fp32 on device memory: counts[j] floats for member j, recv = the sum of
  /// every member's block for this rank, in member order from zero (((0 + b_0) + b_1) ...),
  /// bit-equal to the host variant.
  virtual void reduce_scatter_device(const char* op_name, const float* send, std::span<const int64_t> counts,
                                     float* recv) = 0;
  /// all_gather_v on device memory.
  virtual void all_gather_v_device(const char* op_name, const void* send, void* recv, std::span<const int64_t> counts,
                                   size_t elem_size) = 0;
  virtual void all_reduce_sum(const char* op_name, float* data, int64_t count) = 0;
  virtual void all_to_all_q(const char* op_name, const float* send, std::span<const int64_t> send_counts, float* recv,
                            std::span<const int64_t> recv_counts, CommPrecision p, QuantError* err) = 0;
  virtual void reduce_scatter_q(const char* op_name, const float* send, std::span<const int64_t> counts, float* recv,
                                CommPrecision p, QuantError* err) = 0;
  virtual void all_gather_q(const char* op_name, const float* send, float* recv, std::span<const int64_t> counts,
                            CommPrecision p, QuantError* err) = 0;
  /// Closes this rank's connections to the group's peers, so that a peer blocked on this rank
  /// fails at once (ProcessGroup::close_connections). Nothing by default (NCCL: the
  /// communicator is aborted only at teardown).
  virtual void close_connections() noexcept {}
};

/// The cpu backend's: a Gloo ProcessGroup.
class GlooCollectives final : public Collectives {
 public:
  explicit GlooCollectives(std::unique_ptr<ProcessGroup> pg) : pg_(std::move(pg)) {}
  ProcessGroup& group() { return *pg_; }
  uint64_t next_sequence() const override { return pg_->next_sequence(); }
  const CommCounters& counters() const override { return pg_->counters(); }
  void set_observer(const profiler::RunClock* clock, ProcessGroup::Observer observer) override {
    pg_->set_observer(clock, std::move(observer));
  }
  void set_flight_recorder(FlightRecorder* recorder) override { pg_->set_flight_recorder(recorder); }
  void all_to_all_v(const char* op_name, const void* send, std::span<const int64_t> send_counts, void* recv,
                    std::span<const int64_t> recv_counts, size_t elem_size) override {
    pg_->all_to_all_v(op_name, send, send_counts, recv, recv_counts, elem_size);
  }
  /// all_to_all_v on the pointers as they are: valid where device memory is host memory (the
  /// host stand-in, TrainerOptions::emulate_device); never a GPU's (the cuda backend uses NCCL).
  void all_to_all_v_device(const char* op_name, const void* send, std::span<const int64_t> send_counts, void* recv,
                           std::span<const int64_t> recv_counts, size_t elem_size) override {
    pg_->all_to_all_v(op_name, send, send_counts, recv, recv_counts, elem_size);
  }
  void all_gather_v(const char* op_name, const void* send, void* recv, std::span<const int64_t> counts,
                    size_t elem_size) override {
    pg_->all_gather_v(op_name, send, recv, counts, elem_size);
  }
  /// The host variants on the pointers as they are (the stand-in's device memory only, as
  /// all_to_all_v_device).
  void reduce_scatter_device(const char* op_name, const float* send, std::span<const int64_t> counts,
                             float* recv) override {
    pg_->reduce_scatter_q(op_name, send, counts, recv, CommPrecision::fp32, nullptr);
  }
  void all_gather_v_device(const char* op_name, const void* send, void* recv, std::span<const int64_t> counts,
                           size_t elem_size) override {
    pg_->all_gather_v(op_name, send, recv, counts, elem_size);
  }
  void all_reduce_sum(const char* op_name, float* data, int64_t count) override { pg_->all_reduce_sum(op_name, data, count); }
  void all_to_all_q(const char* op_name, const float* send, std::span<const int64_t> send_counts, float* recv,
                    std::span<const int64_t> recv_counts, CommPrecision p, QuantError* err) override {
    pg_->all_to_all_q(op_name, send, send_counts, recv, recv_counts, p, err);
  }
  void reduce_scatter_q(const char* op_name, const float* send, std::span<const int64_t> counts, float* recv,
                        CommPrecision p, QuantError* err) override {
    pg_->reduce_scatter_q(op_name, send, counts, recv, p, err);
  }
  void all_gather_q(const char* op_name, const float* send, float* recv, std::span<const int64_t> counts, CommPrecision p,
                    QuantError* err) override {
    pg_->all_gather_q(op_name, send, recv, counts, p, err);
  }
  void close_connections() noexcept override { pg_->close_connections(); }

 private:
  std::unique_ptr<ProcessGroup> pg_;
};

}  // namespace embedscope::engine::detail
