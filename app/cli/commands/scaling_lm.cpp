// `embedscope scaling` of an lm_embedding workload (commands/scaling_lm.h).

#include "scaling_lm.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/exec/lm_scaling_study.h"
#include "embedscope/sessions/model/unit_ladder.h"  // format_rate
#include "embedscope/sessions/model/units.h"
#include "interrupt.h"
#include "output/output.h"

namespace embedscope::cli {

namespace es = embedscope::engine;

namespace {

es::LmSharding lm_sharding_from_flag(const std::string& t) {
  if (t == "vocab_parallel") return es::LmSharding::vocab_parallel;
  if (t == "data_parallel") return es::LmSharding::data_parallel;
  if (t == "row_wise") return es::LmSharding::row_wise;
  throw es::SpecError(fmt::format("--shardings: \"{}\" is not a sharding type of an lm_embedding workload; valid: "
                                  "vocab_parallel, data_parallel, row_wise",
                                  t));
}

std::string type_text(const es::LmScalingPoint& p) {
  return std::string(es::to_string(p.sharding)) + (p.sequence_parallel ? "+sp" : "");
}

std::string point_row(const es::LmScalingPoint& p) {
  const std::string head = fmt::format("{:<17} {:>5} {:>5}", type_text(p), p.gpus, p.nodes);
  if (!p.error.empty()) return fmt::format("{}  {}", head, p.error);
  return fmt::format("{} {:>11} {:>12} {:>10} {:>7.1f}% {:>6.1f}% {:>8.1f}% {:>6.1f}% {:>11} {:>10.1f} {:>10.1f} {:>11}",
                     head, ms(p.step_time_ns), sessions::format_rate(p.tokens_per_s),
                     sessions::format_rate(p.tokens_per_s / p.gpus), 100 * p.scaling_efficiency,
                     100 * p.type_scaling_efficiency, 100 * p.embedding_comm_share, 100 * p.comm_share,
                     sessions::format_bytes(p.wire_bytes_per_step), p.wire_bytes_per_token, p.body_wire_bytes_per_token,
                     sessions::format_bytes(p.memory_bytes_per_gpu));
}

}  // namespace

std::string tp_across_nodes_warning(int gpus_per_node) {
  return fmt::format("warning: vocab_parallel is one tensor-parallel group over all the GPUs, so above {0} GPUs "
                     "(one node) its activation collectives cross nodes; Megatron keeps the "
                     "tensor-parallel group inside a node (at most {0}) and replicates it over data-parallel groups "
                     "across nodes, a layout this tool does not model",
                     gpus_per_node);
}

int cmd_scaling_lm(WorkloadArgs& a, const LmScalingArgs& s) {
  // --gpus-per-node is the study's node shape: load_lm would fit the workload's own ranks to it
  WorkloadArgs b = a;
  b.given.erase("--gpus-per-node");
  // run's and the DLRM study's flags, refused naming the flags this study takes (tester62a F13:
  // run's list named --devices / --sharding / --nodes, which scaling refuses)
  for (const char* flag : {"--local-world-size", "--warmup-steps", "--backend", "--pipeline", "--qcomms",
                           "--network-bandwidth", "--network-latency", "--dense-precision"})
    if (a.was_given(flag))
      throw es::SpecError(fmt::format("{}: not for the scaling study of an lm_embedding workload ({}); its flags: "
                                      "--gpus, --shardings, --gpus-per-node, --sequence-parallel, "
                                      "--no-sequence-parallel, --steps, --batch-size, --simulate, -o, "
                                      "--force-overwrite, --json",
                                      flag, !a.file.empty() ? a.file : "preset " + a.preset));
  const es::LmWorkloadSpec spec = load_lm(b, true);
  a.origin = b.origin;
  es::LmScalingStudyOptions o;
  o.hardware = a.simulate;
  o.gpus = s.gpus;
  const std::vector<std::string> types =
      s.shardings.empty() ? std::vector<std::string>{"vocab_parallel", "data_parallel", "row_wise"} : s.shardings;
  for (const std::string& t : types) o.shardings.push_back(lm_sharding_from_flag(t));
  // the workload's own sequence_parallel, or --sequence-parallel: vocab_parallel's points
  o.sequence_parallel = a.was_given("--sequence-parallel") ? a.sequence_parallel : spec.sequence_parallel;
  if (a.was_given("--gpus-per-node")) o.gpus_per_node = a.gpus_per_node;
  o.session_dir = s.output;
  o.overwrite = s.overwrite;
  o.cancel = &cancel_on_sigint_or_sigterm("\ncancelling after the current point (Ctrl-C again stops at once)\n");
  const es::HardwareProfile hw = simulate_profile(a);
  const int per_node = o.gpus_per_node > 0 ? o.gpus_per_node : hw.gpus_per_node;
  if (!s.json) {  // the header with the first point (a study refused before any point prints its error only)
    const std::string header =
        fmt::format("scaling study: {} (lm_embedding {} x {}, sequence {} x micro batch {}) on simulated {} ({} GPU{} per "
                    "node, {} of {} each); vocab_parallel: one tensor-parallel group, every GPU reads the same {} tokens a step (strong "
                    "scaling); data_parallel and row_wise: {} tokens per GPU per step (weak scaling)\n",
                    spec.name, spec.vocab_size, spec.hidden_size, spec.sequence_length, spec.micro_batch_size, hw.name,
                    per_node, per_node == 1 ? "" : "s", hw.gpu.name, sessions::format_bytes(hw.gpu.memory_bytes),
                    spec.tokens_per_micro_batch(), spec.tokens_per_micro_batch()) +
        fmt::format("{:<17} {:>5} {:>5} {:>11} {:>12} {:>10} {:>8} {:>7} {:>9} {:>7} {:>11} {:>10} {:>10} {:>11}\n",
                    "sharding", "GPUs", "nodes", "step", "tokens/s", "per GPU", "scaling", "own", "emb comm", "comm",
                    "wire/step", "B/token", "body B/tok", "memory/GPU");
    o.on_point = [header, printed = false](const es::LmScalingPoint& p) mutable {
      if (!printed) std::cout << header;
      printed = true;
      std::cout << point_row(p) << std::endl;  // each row as it comes: a 1,024-GPU point takes seconds
    };
  }
  const auto points = es::run_lm_scaling_study(spec, o);
  const auto failed = std::find_if(points.begin(), points.end(), [](const es::LmScalingPoint& p) { return p.write_failed; });
  const auto write_failure = [&] {
    std::string written;
    for (const auto& p : points)
      if (!p.session_path.empty()) written += (written.empty() ? "" : ", ") + p.session_path;
    fmt::print(stderr, "error: scaling: {} at {} GPUs: {}\nsessions written: {}\n", type_text(*failed), failed->gpus,
               failed->error, written.empty() ? "none" : written);
    return 1;
  };
  if (s.json) {
    es::LmScalingStudy study;
    study.workload = spec.name;
    study.hardware = hw.name;
    study.gpus_per_node = per_node;
    study.micro_batch_size = spec.micro_batch_size;
    study.sequence_length = spec.sequence_length;
    study.steps = spec.steps;
    study.points = points;
    study.vocab_size = spec.vocab_size;
    study.hidden_size = spec.hidden_size;
    study.device_name = hw.gpu.name;
    study.device_memory_bytes = hw.gpu.memory_bytes;
    const nlohmann::json j = es::to_json(study);
    std::cout << dump(j) << "\n";
    return failed != points.end() ? write_failure() : 0;
  }
  const auto baseline = es::lm_scaling_baseline(points);
  std::cout << (baseline ? fmt::format("scaling: tokens/s per GPU over the baseline, the best at the smallest size any "
                                       "type ran: {} at {} GPU{}, {} tokens/s per GPU (one baseline for every type; "
                                       "100% = the baseline's rate)",
                                       es::to_string(baseline->sharding), baseline->gpus, baseline->gpus == 1 ? "" : "s",
                                       sessions::format_rate(baseline->tokens_per_s_per_gpu))
                         : std::string("scaling: no point ran, so no baseline"));
  std::cout << "; step: the step program timed by the cost model, as `plan --simulate P --devices N --sharding T` "
               "(every step equal); own: tokens/s per GPU over the same type's at its smallest size (strong "
               "scaling T(p0) p0 / (T(p) p) for vocab_parallel); emb comm: the token embedding's own collectives' "
               "share of the step, comm: every collective's (rank 0); wire/step: every rank's bytes sent a step; "
               "B/token: without Embedscope's split checks, as plan and run; body B/tok: of which the stand-in "
               "body's fp32 gradient all-reduce (body_layers replicated dense layers; Megatron's tensor-parallel "
               "transformer all-reduces no weight gradient over the tensor-parallel group, so compare "
               "sequence_parallel or not with body_layers 0); memory/GPU: the largest rank's peak allocated of the LM "
               "memory estimate (a point is refused when its peak reserved exceeds the GPU); +sp: sequence_parallel; "
               "all SIMULATED\n";
  if (std::any_of(points.begin(), points.end(), [&](const es::LmScalingPoint& p) {
        return p.sharding == es::LmSharding::vocab_parallel && p.gpus > per_node;
      }))
    std::cout << tp_across_nodes_warning(per_node) << "\n";
  if (!s.output.empty()) std::cout << "sessions: " << s.output << "/<sharding>_<gpus>.db\n";
  return failed != points.end() ? write_failure() : 0;
}

}  // namespace embedscope::cli
