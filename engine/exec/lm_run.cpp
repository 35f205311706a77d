// run_lm (exec/lm_run.h): the session of an lm_embedding run around the threaded executor
// (exec/threaded/lm_executor.h), which runs the ranks.

#include "embedscope/engine/exec/lm_run.h"

#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embedscope/engine/comm/flight_recorder.h"
#include "embedscope/engine/comm/gloo_process_group.h"
#include "embedscope/engine/planner/lm_memory_estimate.h"
#include "embedscope/engine/workload/spec.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "exec/executor.h"
#include "exec/threaded/lm_executor.h"

namespace embedscope::engine {

void write_lm_session_plan(sessions::SessionWriter& writer, const LmWorkloadSpec& spec, int64_t wall_anchor_ns) {
  const int p = spec.world_size;
  namespace meta = sessions::meta;
  writer.set_metadata(meta::kWorkloadName, spec.name);
  writer.set_metadata(meta::kWorkloadJson, to_json(spec).dump());
  writer.set_metadata(meta::kWorldSize, std::to_string(p));
  writer.set_metadata(meta::kBatchSize, std::to_string(spec.micro_batch_size));
  // a sample is a sequence of S tokens: B per step (vocab_parallel), B p (the others)
  writer.set_metadata(meta::kSamplesPerStep,
                      std::to_string(spec.micro_batch_size * (spec.sharding == LmSharding::vocab_parallel ? 1 : p)));
  writer.set_metadata(meta::kSteps, std::to_string(spec.steps));
  writer.set_metadata(meta::kWarmupSteps, "0");
  writer.set_metadata(meta::kWallAnchorUnixNs, std::to_string(wall_anchor_ns));
  // the allocator the ranks' memory goes through (lm_executor.cpp: PyTorch's caching allocator,
  // no max_split_size, no compaction; the simulated run replays the same): an lm_embedding
  // workload has no memory block to say it (tester47 F14.6: the Memory page read "not recorded")
  writer.set_metadata(meta::kAllocatorSettingsJson,
                      nlohmann::json{{"allocator", "caching"}, {"max_split_size", 0}, {"compaction", false}}.dump());
  // the plan: one table, a shard per rank (data_parallel: every rank all rows)
  std::vector<sessions::ShardRecord> shards;
  for (int r = 0; r < p; ++r) {
    const VocabRange rows = spec.sharding == LmSharding::data_parallel ? VocabRange{0, spec.padded_vocab_size()}
                                                                       : vocab_range(spec.padded_vocab_size(), p, r);
    shards.push_back({0, kLmTableName, to_string(spec.sharding), -1, r, r, rows.begin, rows.size(), 0,
                      spec.hidden_size, rows.size() * spec.hidden_size * 4 * (spec.tie_word_embeddings ? 1 : 2)});
  }
  writer.add_shards(shards);
}

LmRunResult run_lm(const LmWorkloadSpec& spec, const LmRunOptions& options) {
  validate(spec, "workload");
  (void)flight_recorder_default_capacity();  // a bad EMBEDSCOPE_FR_BUFFER_SIZE is refused before anything runs
  if (spec.world_size > kMaxLmCpuRanks)
    throw SpecError(fmt::format("workload: /devices/count: a measured lm_embedding run has at most {} ranks (CPU threads "
                                "of one process), got {}; --simulate PROFILE models up to {}",
                                kMaxLmCpuRanks, spec.world_size, kMaxSimulatedRanks));
  // ranks beyond this machine's memory: bad input before anything is allocated or written (tester43 F1)
  if (const std::string why = lm_memory_refusal(estimate_lm_memory(spec), this_host_memory()); !why.empty())
    throw SpecError("workload: " + why);
  threaded::LmExecutor executor(spec, options);
  std::unique_ptr<sessions::SessionWriter> writer;
  if (!options.session_path.empty()) {
    writer = std::make_unique<sessions::SessionWriter>(options.session_path, options.overwrite);
    write_lm_session_plan(*writer, spec, executor.clock().wall_anchor_ns());
    namespace meta = sessions::meta;
    writer->set_metadata(meta::kBackend, "cpu");
    writer->set_metadata(meta::kSimulated, "0");
    writer->set_metadata(meta::kGlooVersion, gloo_version());
    writer->set_metadata(meta::kClock, "steady_clock ns since the run's start");
  }
  LmRunResult result;
  try {
    executor.run(writer.get(), result);
  } catch (const std::exception& e) {  // the ranks could not be set up: the session says so
    try {
      if (writer) writer->close(to_string(RunEnd::crashed), e.what());
    } catch (const sessions::SessionError&) {  // a full disk too: the run's own error is the one to report
    }
    throw;
  }
  // a write that failed (a full disk): every rank stopped at the end of the step in which it
  // learnt of it (lm_executor.cpp), or the last commit failed; the run ends write_failed and says
  // what the session kept, as a DLRM run (tester49 F3)
  std::string session_path = writer ? options.session_path : std::string();
  if (writer && !exec::close_run_session(*writer, result.ended, result.error)) session_path.clear();
  if (result.ended != RunEnd::complete && result.ended != RunEnd::cancelled)
    throw LmRunError(result.ended, result.error, session_path);
  return result;
}

}  // namespace embedscope::engine
