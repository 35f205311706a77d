#pragma once
// Where the parts of a step program are written: the program builder's phases and the sharding
// modules (sharding/embedding_sharding.h) append ops through it. Derives what each op waits for
// from the order of issue (see Emitter in program_sink.cpp). Internal to the engine.

#include <string>
#include <vector>

#include "sharding/layout.h"
#include "embedscope/engine/program/step_program.h"

namespace embedscope::engine::program {

class ProgramSink {
 public:
  /// Throws what detail::Layout throws for a plan that does not fit the spec.
  ProgramSink(const WorkloadSpec& spec, const ShardingPlan& plan, int rank, StepProgram& p);

  const WorkloadSpec& spec;
  const detail::Layout layout;
  const int rank, world;
  const int64_t B;
  std::vector<int> world_ranks, node_ranks, cross_ranks;  ///< members of this rank's groups
  std::string node_group, cross_group;                    ///< "node<n>", "cross<l>"
  StepProgram& program;

  /// A compute op; it waits for the previous compute op and the last comm op queued
  /// synchronously since.
  int compute(std::string name, sessions::OpCategory cat, int batch, std::string what, int64_t rows = 0,
              int64_t flops = 0);
  /// A comm op queued after the last compute op (or, launched_by >= 0, from inside that op);
  /// `sync`: the compute worker waits for it. Every all-to-all and reduce-scatter in `calls`
  /// is preceded by its split check ("<name>/split_check", comm/gloo_process_group.h).
  int comm(std::string name, int batch, std::vector<CollectiveCall> calls, bool sync, std::string what,
           int launched_by = -1);

  /// An all-to-all(v) of this rank: send[j] / recv[j] elements to / from peer j.
  CollectiveCall all_to_all(const char* name, const std::vector<int>& peers, const std::string& group,
                            std::vector<int64_t> send, std::vector<int64_t> recv, int64_t elem_bytes, const char* dtype,
                            bool exact = true) const;
  /// A reduce-scatter: block j (counts[j] elements) to peer j; counts[group rank] from each.
  CollectiveCall reduce_scatter(const char* name, const std::vector<int>& peers, const std::string& group,
                                const std::vector<int64_t>& counts, int64_t elem_bytes, const char* dtype) const;
  /// An all-gather(v): this rank's counts[group rank] elements to every peer, counts[j] from j.
  CollectiveCall all_gather(const char* name, const std::vector<int>& peers, const std::string& group,
                            const std::vector<int64_t>& counts, int64_t elem_bytes, const char* dtype,
                            bool exact = true) const;

  /// Bytes per element and dtype name of a communicated tensor of precision p.
  static int64_t elem_bytes(CommPrecision p) { return p == CommPrecision::fp32 ? 4 : 2; }
  static const char* dtype(CommPrecision p) {
    return p == CommPrecision::fp16 ? "float16" : p == CommPrecision::bf16 ? "bfloat16" : "float32";
  }

 private:
  int add(std::string name, sessions::Lane lane, sessions::OpCategory cat, int batch, std::string what);
  void wait(int op, int on);
  int last_compute_ = -1, last_comm_ = -1, sync_comm_ = -1;
};

}  // namespace embedscope::engine::program
