// run and plan of an lm_embedding workload (commands/lm.h).

#include "lm.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "embedscope/engine/exec/lm_run.h"
#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/planner/host_step_time.h"
#include "embedscope/engine/planner/lm_memory_estimate.h"
#include "embedscope/engine/planner/search.h"
#include "embedscope/engine/program/lm_program.h"
#include "embedscope/engine/workload/spec_error.h"
#include "embedscope/sessions/analysis/stats.h"
#include "embedscope/sessions/model/units.h"
#include "embedscope/sessions/store/session.h"
#include "embedscope/sessions/model/unit_ladder.h"  // format_rate
#include "interrupt.h"
#include "output/output.h"
#include "output_guard.h"
#include "run_common.h"
#include "scaling_lm.h"  // tp_across_nodes_warning

namespace embedscope::cli {

namespace es = embedscope::engine;
using nlohmann::json;
using sessions::format_bytes;

namespace {

std::string shape_text(const es::LmWorkloadSpec& s) {
  const int64_t vp = s.padded_vocab_size();
  return fmt::format("{} x {} {}{}, {}, sequence {} x micro batch {}, {} body layer{}", s.vocab_size, s.hidden_size,
                     es::to_string(s.data_type), s.data_type == es::LmDataType::fp32 ? "" : " (fp32 master)",
                     s.tie_word_embeddings ? "tied" : "untied", s.sequence_length, s.micro_batch_size, s.body_layers,
                     s.body_layers == 1 ? "" : "s") +
         (vp != s.vocab_size ? fmt::format("; vocabulary padded to {}", vp) : "");
}

std::string mode_text(const es::LmWorkloadSpec& s) {
  return std::string(es::to_string(s.sharding)) + (s.sequence_parallel ? " + sequence_parallel" : "");
}

/// "token ids    ..." : where the run's ids come from (tester47 F1: a token file was never named):
/// the file, its dtype (".npy": the file's own), its ids N and how many sequences of S + 1 ids it
/// holds before the run wraps around it (sequence n starts at id n S: floor((N - 1) / S)), against
/// the sequences the run reads (steps x sequences a step); or the Zipf draw. A second line warns
/// when the file holds fewer ids than one sequence (every sequence then wraps).
std::string token_source_text(const es::LmWorkloadSpec& s) {
  if (!s.token_file_ids)
    return fmt::format("token ids    Zipf, alpha {:g}, over the {} ids (synthetic, seed {})\n", s.token_zipf_alpha,
                       s.vocab_size, s.seed);
  const auto n = static_cast<int64_t>(s.token_file_ids->size());
  const int64_t seq = s.sequence_length;
  const int64_t before_wrap = n > seq ? (n - 1) / seq : 0;
  const int64_t reads = s.steps * s.global_sequences_per_step();
  const bool npy = std::filesystem::path(s.token_file).extension() == ".npy";
  std::string out = fmt::format("token ids    {} ({}, {} id{}: {} sequence{} of {} + 1 before it wraps around; the run "
                                "reads {}{})\n",
                                s.token_file,
                                npy ? fmt::format(".npy of {}", es::to_string(s.token_file_dtype))
                                    : std::string(es::to_string(s.token_file_dtype)),
                                n, n == 1 ? "" : "s",
                                before_wrap, before_wrap == 1 ? "" : "s", seq, reads,
                                reads > before_wrap ? ", so it wraps" : "");
  if (n < seq + 1)
    out += fmt::format("warning: {} holds {} id{}, fewer than one sequence's {} + 1: every sequence wraps around the "
                       "file\n",
                       s.token_file, n, n == 1 ? "" : "s", seq);
  return out;
}

/// "vocabulary  ..." : V, V' and what Megatron's padding would give.
std::string padding_text(const es::LmWorkloadSpec& s) {
  const int tp = s.tensor_parallel_size();  // Megatron pads by the tensor-parallel size only
  const std::string by = tp > 1 ? fmt::format("the tensor-parallel size {}", tp)
                                : fmt::format("the tensor-parallel size 1 ({} adds no padding for its ranks)",
                                              es::to_string(s.sharding));
  const int64_t m = 128 * tp;
  const int64_t megatron = (s.vocab_size + m - 1) / m * m;
  if (s.make_vocab_size_divisible_by <= 1)
    return fmt::format("vocabulary   {} rows, not padded (make_vocab_size_divisible_by 1, the default; Megatron's 128 "
                       "would pad to a multiple of 128 x {}: {} rows)\n",
                       s.vocab_size, by, megatron);
  if (s.padded_vocab_size() == s.vocab_size)
    return fmt::format("vocabulary   {} rows, already a multiple of make_vocab_size_divisible_by {} x {}: not padded\n",
                       s.vocab_size, s.make_vocab_size_divisible_by, by);
  return fmt::format("vocabulary   {} rows padded to {} (make_vocab_size_divisible_by {} x {}); the {} padded rows "
                     "are never looked up but take part in the softmax\n",
                     s.vocab_size, s.padded_vocab_size(), s.make_vocab_size_divisible_by, by,
                     s.padded_vocab_size() - s.vocab_size);
}

/// "wire         bf16: ..." for a bf16 / fp16 workload (tester55 F2: which collectives travel in
/// 2-byte elements, program/lm_program.h lm_wire_precision); "" for fp32.
std::string wire_text(const es::LmWorkloadSpec& s) {
  if (s.data_type == es::LmDataType::fp32) return "";
  if (s.sharding == es::LmSharding::data_parallel)
    return fmt::format("wire         {}: no activation is communicated (data_parallel); the gradients' all-reduces "
                       "and the loss's are fp32 (4 B)\n",
                       es::to_string(s.data_type));
  return fmt::format("wire         {0}: the activations' collectives and their gradients' send {0} (2 B an element, "
                     "as Megatron's {0} tensors); the cross-entropy's and the parameters' gradients' fp32 (4 B)\n",
                     es::to_string(s.data_type));
}

std::string memory_table(const std::vector<es::LmMemoryEstimate>& est) {
  std::string out = fmt::format("{:<5} {:>17} {:>11} {:>11} {:>11} {:>11} {:>9} {:>9} {:>11} {:>11} {:>11} {:>11}\n",
                                "rank", "rows", "table", "out proj", "read copy", "gradients", "opt state", "body",
                                "logits", "activations", "total", "peak alloc");
  for (const auto& e : est)
    out += fmt::format("{:<5} {:>17} {:>11} {:>11} {:>11} {:>11} {:>9} {:>9} {:>11} {:>11} {:>11} {:>11}\n", e.rank,
                       fmt::format("[{}, {})", e.rows.begin, e.rows.end), format_bytes(e.table_bytes),
                       format_bytes(e.output_projection_bytes), format_bytes(e.read_copy_bytes),
                       format_bytes(e.gradient_bytes), format_bytes(e.optimizer_state_bytes), format_bytes(e.body_bytes),
                       format_bytes(e.logits_bytes), format_bytes(e.activation_bytes), format_bytes(e.total()),
                       format_bytes(e.peak_allocated_bytes));
  out += "total: the buffers' requested bytes as if all alive at once; peak alloc: the buffers replayed through the "
         "rank's caching allocator in the run's order (512 B blocks, unsplit remainders of large blocks), the figure "
         "a measured run's peak allocated is compared with\n";
  return out;
}

/// How the cost model times the step's GEMMs on profile `hw`, said on every SIMULATED line
/// (tester43 F16): fp32 GEMMs at dense_flops_per_s x dense_efficiency (CUDA cores); a bf16 / fp16
/// workload's output projection at the profile's tensor-core rate, dense_bf16_flops_per_s x
/// dense_bf16_efficiency (cost_model.h half_precision_gemm_ns), where the profile gives one; the
/// body's layers stay fp32 (the engine keeps them in fp32).
std::string gemm_rate_text(const es::LmWorkloadSpec& s, const es::HardwareProfile& hw) {
  const es::GpuProfile& g = hw.gpu;
  if (hw.cpu.cores > 0)  // a calibration's profile: this machine's CPU, no CUDA or tensor cores (tester46 F23)
    return fmt::format("GEMMs timed at the profile's fp32 rate on CPU cores ({:g} TFLOP/s x {:g}){}",
                       g.dense_flops_per_s * 1e-12, g.dense_efficiency,
                       s.data_type == es::LmDataType::fp32
                           ? std::string()
                           : fmt::format(", as the engine computes on a CPU (its {} tables read into fp32)",
                                         es::to_string(s.data_type)));
  if (s.data_type == es::LmDataType::fp32)
    return fmt::format("GEMMs timed as fp32 on CUDA cores ({:g} TFLOP/s x {:g}; no tensor cores, no TF32)",
                       g.dense_flops_per_s * 1e-12, g.dense_efficiency);
  if (g.dense_bf16_flops_per_s > 0)
    return fmt::format("the output projection's GEMMs timed as {} on tensor cores ({:g} TFLOP/s x {:g}), the body's as "
                       "fp32 on CUDA cores ({:g} TFLOP/s x {:g})",
                       es::to_string(s.data_type), g.dense_bf16_flops_per_s * 1e-12, g.dense_bf16_efficiency,
                       g.dense_flops_per_s * 1e-12, g.dense_efficiency);
  return fmt::format("GEMMs timed as fp32 ({:g} TFLOP/s x {:g}): the profile gives no dense_bf16_flops_per_s, so a {} "
                     "run on tensor cores would spend less time computing and communication's share would be larger",
                     g.dense_flops_per_s * 1e-12, g.dense_efficiency, es::to_string(s.data_type));
}

/// The caveat of an lm_embedding workload simulated on a cpu profile (hw.cpu.cores > 0: what
/// `calibrate` writes; its nodes are emulated nodes of this machine), "" on a GPU profile
/// (tester46 F23: llama3_8b_embedding_scaled simulated 463.8 ms a step on a calibrated profile, a
/// run measured 2,231.6 ms; its logits / backward GEMMs 4-5x and its exp 88x too fast).
std::string cpu_profile_warning(const std::string& profile, const es::HardwareProfile& hw) {
  if (hw.cpu.cores <= 0) return "";
  return fmt::format("{} is a cpu profile: calibrate fits its rates to DLRM step programs only (lookups, updates, "
                     "MLPs, their collectives) and refuses lm_embedding sessions, so this workload's ops - the output "
                     "projection's GEMMs, the cross-entropy's element-wise exp, the gradient all-reduces - are timed at "
                     "rates not fitted for them: expect large errors (llama3_8b_embedding_scaled on a 2-core machine: "
                     "simulated 463.8 ms a step on such a profile, measured 2,231.6 ms)",
                     profile);
}

/// "4 GPUs per node" on a GPU profile, "4 cpu ranks per emulated node of this machine" on a cpu
/// profile (tester46 F23).
std::string ranks_per_node_text(const es::HardwareProfile& hw, int per_node) {
  if (hw.cpu.cores > 0)
    return fmt::format("{} cpu rank{} per emulated node of this machine", per_node, per_node == 1 ? "" : "s");
  return fmt::format("{} GPU{} per node", per_node, per_node == 1 ? "" : "s");
}

/// A measured run's peak allocated above the estimate (tester43 F3), for the rank where it is
/// most: since lm45 the estimate replays the rank's buffers through its caching allocator
/// (planner/lm_memory_estimate.h, peak_allocated_bytes) and equals the run's peak in every mode
/// measured, so a rank above it allocated a buffer the replay does not know of. "" when no
/// rank's peak is above its estimate.
std::string peak_above_estimate_text(const es::LmRunResult& r, const std::vector<es::LmMemoryEstimate>& est) {
  size_t worst = r.ranks.size();
  int64_t over = 0;
  for (size_t i = 0; i < r.ranks.size() && i < est.size(); ++i)
    if (r.ranks[i].peak_allocated - est[i].peak_allocated_bytes > over) {
      over = r.ranks[i].peak_allocated - est[i].peak_allocated_bytes;
      worst = i;
    }
  if (worst == r.ranks.size()) return "";
  return fmt::format("\nmemory       peak allocated above the estimate by up to {} (rank {}): the estimate replays the "
                     "rank's buffers through its caching allocator (planner/lm_memory_estimate.h), so the run "
                     "allocated a buffer the replay does not model (peak requested {}, replayed {})\n",
                     format_bytes(over), worst, format_bytes(r.ranks[worst].peak_requested),
                     format_bytes(est[worst].peak_requested_bytes));
}

/// "; split checks left out: 24 B/token" (Embedscope's all-gathers of the split sizes before each
/// all-to-all and reduce-scatter, which Megatron and TorchRec do not run: tester55 F4), "" without
/// any.
std::string split_checks_text(double per_token) {
  return per_token > 0 ? fmt::format("; split checks left out: {:.4g} B/token", per_token) : "";
}

/// "memory       fits on h100_sxm: rank 0 reserves ..." / "memory       DOES NOT FIT on h100_sxm:
/// rank 3 needs ...; `run --simulate` and `scaling` refuse it": the verdict of
/// lm_gpu_memory_verdict (the one scaling's points get), its own "fits: " / "does not fit: " said
/// once.
std::string gpu_verdict_line(const es::LmGpuMemoryVerdict& v, const std::string& profile) {
  const auto after = [](const std::string& t, const std::string& prefix) {
    return t.rfind(prefix, 0) == 0 ? t.substr(prefix.size()) : t;
  };
  if (v.device_bytes <= 0) return fmt::format("memory       {} ({})\n", v.text, profile);
  if (v.fits()) return fmt::format("memory       fits on {}: {}\n", profile, after(v.text, "fits: "));
  return fmt::format("memory       DOES NOT FIT on {}: {}; `run --simulate` and `scaling` refuse it\n", profile,
                     after(v.refusal, "does not fit: "));
}

/// One step of the workload's program (program/lm_program.h) timed on hardware profile
/// `profile` (--simulate, else the planner's default): step time, communication, bytes/token.
json simulated_step_json(const es::LmWorkloadSpec& spec, const std::string& profile, int gpus_per_node) {
  const es::HardwareProfile hw = es::load_hardware_profile(profile);
  const int gpn = gpus_per_node > 0 ? gpus_per_node : std::min(spec.world_size, hw.gpus_per_node);
  const es::LmSimulatedStep sim = es::simulate_lm_step(spec, hw, gpn);
  const int64_t tokens = spec.tokens_per_step();
  const double step = static_cast<double>(sim.step_ns);
  return {{"hardware", profile},
          {"gpus_per_node", gpn},
          {"step_ns", sim.step_ns},
          {"comm_ns", sim.comm_ns},
          {"embedding_comm_ns", sim.embedding_comm_ns},
          {"comm_share", step > 0 ? static_cast<double>(sim.comm_ns) / step : 0.0},
          {"embedding_comm_share", step > 0 ? static_cast<double>(sim.embedding_comm_ns) / step : 0.0},
          {"bytes_sent_rank0", sim.bytes_sent},
          // all ranks' bytes sent / tokens, as `run` counts them (ranks differ: Zipf tokens load rank 0's
          // rows), Embedscope's split checks left out (tester55 F4: Megatron and TorchRec run none)
          {"bytes_on_the_wire_per_token", static_cast<double>(sim.bytes_sent_all_ranks) / static_cast<double>(tokens)},
          {"split_check_bytes_per_token",
           static_cast<double>(sim.split_check_bytes_all_ranks) / static_cast<double>(tokens)},
          // the names `scaling --json` gives the same figures (one name per figure across run / plan /
          // scaling); the ones above stay for what reads them
          {"step_time_ns", sim.step_ns},
          {"wire_bytes_per_token", static_cast<double>(sim.bytes_sent_all_ranks) / static_cast<double>(tokens)},
          // the stand-in body's share (program/lm_program.h LmSimulatedStep): not Megatron's
          {"body_compute_ns", sim.body_compute_ns},
          {"body_comm_ns", sim.body_comm_ns},
          {"body_wire_bytes_per_token", static_cast<double>(sim.body_bytes_all_ranks) / static_cast<double>(tokens)}};
}

/// "; of which the stand-in body (1 replicated fp32 dense layer; Megatron's transformer is
/// tensor-parallel): 8.0 ms compute, its gradient all-reduce 917616 B/token and 1.2 ms" - the
/// share of the step and of the bytes that measures the stand-in body rather than the embedding
/// (tester62a F7: it alone decided sequence_parallel or not), "" without body layers or where
/// it costs nothing. Times ns, bytes per token.
std::string body_share_text(const es::LmWorkloadSpec& spec, int64_t compute_ns, int64_t comm_ns, double bytes_per_token) {
  if (spec.body_layers <= 0) return "";
  std::string out = fmt::format(
      "\n             of which the stand-in body ({} replicated fp32 dense layer{}, body_layers; Megatron's "
      "transformer layers are tensor-parallel and all-reduce no weight gradient over the tensor-parallel group): "
      "{:.3f} ms compute",
      spec.body_layers, spec.body_layers == 1 ? "" : "s", static_cast<double>(compute_ns) * 1e-6);
  if (bytes_per_token > 0)
    out += fmt::format(", its gradient all-reduce {:.0f} B/token and {:.3f} ms", bytes_per_token,
                       static_cast<double>(comm_ns) * 1e-6);
  return out + "; body_layers 0 leaves it out";
}

}  // namespace

int cmd_plan_lm(WorkloadArgs& a, bool as_json) {
  const es::LmWorkloadSpec spec = load_lm(a, true);
  const auto est = es::estimate_lm_memory(spec);
  const std::string profile = a.simulate.empty() ? std::string(es::kDefaultPlanningProfile) : a.simulate;
  json sim = simulated_step_json(spec, profile, a.gpus_per_node);
  // one tensor-parallel group over nodes (tester62a F6), as `scaling` warns of its points
  if (spec.sharding == es::LmSharding::vocab_parallel && spec.world_size > sim.at("gpus_per_node").get<int>())
    sim["warning_tensor_parallel_across_nodes"] = tp_across_nodes_warning(sim.at("gpus_per_node").get<int>());
  const es::HardwareProfile hw = es::load_hardware_profile(profile);
  if (const std::string w = cpu_profile_warning(profile, hw); !w.empty()) {  // tester46 F23
    sim["warning"] = w;
    fmt::print(stderr, "warning: {}\n", w);
  }
  // a measured run's ranks are threads of this process: its memory is their capacity (tester43
  // F1); --simulate plans a modelled cluster, checked against the profile's GPU memory as
  // `scaling` checks each point and `run --simulate` refuses it (lm_gpu_memory_verdict, one
  // check). Said, not refused (exit 0), as a DLRM plan's verdict on this machine's memory
  // (plan.cpp host_verdict): a plan of a workload too large is what plan is for; `run` refuses it
  const es::HostMemory machine = es::this_host_memory();  // MemAvailable now (tester45 F10)
  // (a cpu profile's ranks are emulated on this machine: no GPU to check)
  const bool gpu_checked = !a.simulate.empty() && hw.cpu.cores <= 0 && hw.gpu.memory_bytes > 0;
  const es::LmGpuMemoryVerdict gpu =
      es::lm_gpu_memory_verdict(est, gpu_checked ? hw.gpu.memory_bytes : 0, hw.gpu.name, spec.sharding);
  const std::string does_not_fit = a.simulate.empty() ? es::lm_memory_refusal(est, machine) : gpu.refusal;
  int64_t need = 0;
  for (const auto& e : est) need += e.total();
  // a measured step's lower bound here (tester45 F10), for a step of > 100 GFLOP (~0.1 s to measure)
  const int64_t step_flops = a.simulate.empty() ? es::lm_step_flops(spec) : 0;
  const double gemm_rate = step_flops > 100'000'000'000 ? es::measure_gemm_flops_per_s() : 0.0;
  if (as_json) {
    json j = es::to_json(est);
    if (a.simulate.empty()) {
      j["fits"] = does_not_fit.empty();
      j["machine_memory_bytes"] = machine.total_bytes;
      j["available_memory_bytes"] = machine.available_bytes;
      j["step_flops"] = step_flops;
      if (gemm_rate > 0) {  // measured only for a step of > 100 GFLOP
        j["gemm_flops_per_s_per_core"] = gemm_rate;
        j["host_step_seconds_at_least"] =
            es::host_step_seconds(step_flops, gemm_rate, es::host_cores(), spec.world_size);
      }
      if (!does_not_fit.empty()) j["refusal"] = does_not_fit;  // run's refusal; the plan itself is not refused
    } else if (gpu_checked) {  // the profile's GPU memory, as scaling's points (device_memory_bytes, ...)
      j["fits"] = gpu.fits();
      j["device_name"] = hw.gpu.name;
      j["device_memory_bytes"] = hw.gpu.memory_bytes;
      j["memory_bytes_per_gpu"] = gpu.peak_allocated_bytes;
      j["memory_reserved_bytes_per_gpu"] = gpu.peak_reserved_bytes;
      j["memory_verdict"] = gpu.text;
      if (!gpu.fits()) j["refusal"] = gpu.refusal;  // run --simulate's refusal; the plan itself is not refused
    }
    j["workload"] = es::to_json(spec);
    j["padded_vocab_size"] = spec.padded_vocab_size();
    j["simulated_step"] = sim;
    std::cout << dump(j) << "\n";
    return 0;
  }
  std::cout << fmt::format("workload     {}: lm_embedding {}\n", spec.name, shape_text(spec));
  std::cout << fmt::format("sharding     {} on {} rank{}\n", mode_text(spec), spec.world_size, spec.world_size == 1 ? "" : "s");
  std::cout << padding_text(spec) << wire_text(spec);
  std::cout << token_source_text(spec);
  std::cout << fmt::format("\nmemory estimate per rank (planner/lm_memory_estimate.h; optimizer {})\n",
                           spec.optimizer == es::LmOptimizer::adam ? "adam: two fp32 moments per parameter"
                                                                   : "sgd: no state")
            << memory_table(est);
  if (a.simulate.empty())
    std::cout << fmt::format("memory       {}: all {} ranks need {} in all; this machine has {} (cpu ranks are "
                             "threads of one process){}\n",
                             does_not_fit.empty() ? "fits" : "DOES NOT FIT", spec.world_size, format_bytes(need),
                             es::host_memory_text(machine),
                             does_not_fit.empty() ? "" : "; `run` refuses it (--simulate PROFILE plans a cluster)");
  else if (gpu_checked)
    std::cout << gpu_verdict_line(gpu, profile);
  if (gemm_rate > 0)
    std::cout << fmt::format("step here    a measured step on this machine takes {}\n",
                             es::host_step_text(step_flops, gemm_rate, es::host_cores(), spec.world_size));
  std::cout << fmt::format(
      "\nSIMULATED step on {} ({}; the step program timed by the cost model, {}; {}): "
      "{:.3f} ms, communication {:.1f}% (embedding {:.1f}%), {:.0f} bytes on the wire per token{}{}\n",
      profile, ranks_per_node_text(hw, sim.at("gpus_per_node").get<int>()),
      hw.cpu.cores > 0 ? "not measured" : "not this machine", gemm_rate_text(spec, hw),
      sim.at("step_ns").get<double>() * 1e-6,
      100 * sim.at("comm_share").get<double>(), 100 * sim.at("embedding_comm_share").get<double>(),
      sim.at("bytes_on_the_wire_per_token").get<double>(),
      split_checks_text(sim.at("split_check_bytes_per_token").get<double>()),
      body_share_text(spec, sim.at("body_compute_ns").get<int64_t>(), sim.at("body_comm_ns").get<int64_t>(),
                      sim.at("body_wire_bytes_per_token").get<double>()));
  if (sim.contains("warning_tensor_parallel_across_nodes"))
    std::cout << sim.at("warning_tensor_parallel_across_nodes").get<std::string>() << "\n";
  return 0;
}

int cmd_run_lm(WorkloadArgs& a, bool as_json, std::string output, bool overwrite, std::atomic<bool>& cancel,
               const es::FlightDumpRequest& flight) {
  const es::LmWorkloadSpec spec = load_lm(a, true);
  const bool simulated = !a.simulate.empty();
  if (!simulated) {  // refused before it is announced (run_lm refuses it too, before any allocation)
    if (const std::string why = es::lm_memory_refusal(es::estimate_lm_memory(spec), es::this_host_memory());
        !why.empty())
      throw es::SpecError(a.origin + ": " + why);
  } else {  // the profile's GPUs, as `plan --simulate` and `scaling` check them (exit 2, as a DLRM run's)
    const es::HardwareProfile hw = es::load_hardware_profile(a.simulate);
    if (const std::string why = hw.cpu.cores > 0 ? std::string()  // emulated cpu ranks: no GPU
                                                 : es::lm_gpu_memory_refusal(es::estimate_lm_memory(spec),
                                                                             hw.gpu.memory_bytes, hw.gpu.name,
                                                                             spec.sharding);
        !why.empty())
      throw es::SpecError(fmt::format("{}: --simulate {}: {}", a.origin, a.simulate, why));
  }
  if (output.empty()) output = default_session_name();
  sessions::SessionWriter::check_path(output, overwrite);
  make_output_folder(output, "-o");  // as a DLRM run's (output_guard.h)
  es::LmRunOptions opt;
  opt.session_path = output;
  opt.overwrite = overwrite;
  // "step N/M  R tokens/s  ETA  loss", as a DLRM run's lines (run_common.h; tester47 F3)
  StepLinesSpec lines;
  lines.steps = spec.steps;
  lines.unit = "tokens";
  lines.per_sample = static_cast<double>(spec.sequence_length);
  // a second Ctrl-C or SIGTERM stops at once as a DLRM run's (run_common.h; tester47 F2); the
  // handlers are cmd_run's, installed before it read anything (fixc49); a simulated run is
  // cancelled after its current step too (it had no handler: a SIGTERM left its session
  // without an end)
  StopAtOnce& stop = StopAtOnce::install(as_json);  // the one cmd_run installed
  stop.set_session(output);
  const StopAtOnce::RunGuard run_guard(stop);  // however cmd_run_lm leaves, a stop under way ends first
  lines.steps_done = &stop.steps_done;
  opt.cancel = &cancel;
  opt.flight_dump = &flight;
  opt.on_step = step_progress_lines(lines);
  fmt::print(stderr, "embedscope run: {} (lm_embedding {}) on {} {} ranks, {}, {} steps\n", spec.name, shape_text(spec),
             spec.world_size, simulated ? "simulated" : "cpu", mode_text(spec), spec.steps);
  fmt::print(stderr, "{}", token_source_text(spec));
  // a step of minutes is said before it starts (tester45 F10: llama3_8b_embedding ran 2.5 min
  // without a step or a word); the rate is measured only for a step of > 100 GFLOP (~0.1 s)
  if (const int64_t flops = simulated ? 0 : es::lm_step_flops(spec); flops > 100'000'000'000)
    if (const std::string w = es::long_step_warning(flops, es::measure_gemm_flops_per_s(), es::host_cores(),
                                                    spec.world_size, spec.steps);
        !w.empty())
      fmt::print(stderr, "warning: {}\n", w);
  es::LmSimulateOptions sim;
  sim.session_path = output;
  sim.overwrite = overwrite;
  sim.hardware = a.simulate;
  sim.gpus_per_node = a.gpus_per_node;
  sim.cancel = &cancel;
  // "step N/M  R tokens/s (simulated)", as a simulated DLRM run's lines (before, a long simulated
  // LM run printed nothing until its end)
  StepLinesSpec sim_lines = lines;
  sim_lines.simulated = true;
  sim.on_step = step_progress_lines(sim_lines);
  if (simulated) {  // the nodes as simulate_lm places the ranks (rank r on node r / GPUs per node)
    const es::HardwareProfile hw = es::load_hardware_profile(a.simulate);
    const int gpn = a.gpus_per_node > 0 ? a.gpus_per_node : std::min(spec.world_size, hw.gpus_per_node);
    const int nodes = (spec.world_size + gpn - 1) / gpn;
    fmt::print(stderr, "SIMULATED: {} {}node{} x {} {}{} of hardware profile {}; every time below is the cost model's, "
                       "nothing is trained; {}\n",
               nodes, hw.cpu.cores > 0 ? "emulated " : "", nodes == 1 ? "" : "s", gpn,
               hw.cpu.cores > 0 ? "cpu rank" : "GPU", gpn == 1 ? "" : "s", a.simulate, gemm_rate_text(spec, hw));
    if (const std::string w = cpu_profile_warning(a.simulate, hw); !w.empty()) fmt::print(stderr, "warning: {}\n", w);
  }
  es::LmRunResult r;
  const bool tty = isatty(STDERR_FILENO) != 0;
  if (cancel) return report_cancelled_before_run(as_json);  // a signal while it was read or announced
  try {
    r = simulated ? es::simulate_lm(spec, sim) : es::run_lm(spec, opt);
    stop.end_run();  // the session is closed, its end recorded: a stop from here on leaves it as it is
    if (tty && !simulated) fmt::print(stderr, "\n");  // after the progress line rewritten in place
  } catch (const es::SpecError&) {
    throw;
  } catch (const sessions::SessionError&) {
    throw;
  } catch (const es::LmRunError& e) {  // the run says how it ended and where its session is
    if (tty && !simulated) fmt::print(stderr, "\n");
    // a full disk: "error: run ended write_failed: ...; the session keeps N steps ..." and exit 1,
    // or "no session was written" when nothing was recorded, as a DLRM run's (run.cpp, tester49 F3)
    return report_failed_run(es::to_string(e.ended), e.what(), e.session_path, as_json, e.ended == es::RunEnd::bad_input);
  } catch (const std::exception& e) {
    if (tty && !simulated) fmt::print(stderr, "\n");
    std::string ended = "crashed";  // the session says how the run ended (oom, hang, crashed)
    try {
      ended = sessions::SessionReader(output).status();
    } catch (const std::exception&) {
    }
    return report_failed_run(ended, e.what(), output, as_json, false);  // as a DLRM run's (run.cpp)
  }
  const auto d = sessions::summarize(r.step_ns);
  const int p = spec.world_size;
  const int64_t tokens = spec.tokens_per_step();
  const double tps = d.mean > 0 ? static_cast<double>(tokens) / (d.mean * 1e-9) : 0.0;
  // communication on rank 0, by collective name: count, bytes sent, time
  struct Coll {
    int64_t count = 0, bytes_sent = 0, ns = 0;
    std::string op;
  };
  std::map<std::string, Coll> by_name;
  int64_t comm_ns = 0;
  for (const auto& c : r.collectives) {
    if (c.rank != 0) continue;
    Coll& k = by_name[c.name];
    ++k.count;
    k.op = c.op;
    k.bytes_sent += c.bytes_sent;
    k.ns += c.end_ns - c.start_ns;
  }
  int64_t embedding_comm_ns = 0;  // of which the token embedding's own collectives
  for (const auto& o : r.ops)
    if (o.rank == 0 && o.lane == sessions::Lane::comm) {
      comm_ns += o.end_ns - o.start_ns;
      if (es::is_lm_embedding_collective(o.name)) embedding_comm_ns += o.end_ns - o.start_ns;
    }
  int64_t step_total = 0;
  for (int64_t s : r.step_ns) step_total += s;
  int64_t bytes_all = 0, check_bytes = 0;
  for (const auto& rk : r.ranks) bytes_all += rk.bytes_sent;
  // Embedscope's split checks are not Megatron's or TorchRec's bytes: left out of bytes/token,
  // said apart (tester55 F4)
  int64_t body_bytes = 0;  // the stand-in body's gradient all-reduce, every rank (not Megatron's: tester62a F7)
  for (const auto& c : r.collectives) {
    if (c.name.ends_with("/split_check")) check_bytes += c.bytes_sent;
    if (c.name == "body/grad_all_reduce") body_bytes += c.bytes_sent;
  }
  // over the steps run: a cancelled run ran fewer than spec.steps (tester43 F7)
  const auto steps_run = static_cast<int64_t>(r.step_ns.size());
  const bool cancelled = r.ended == es::RunEnd::cancelled;
  const double per_token =
      steps_run > 0 ? static_cast<double>(bytes_all - check_bytes) / static_cast<double>(tokens * steps_run) : 0.0;
  const double body_per_token =
      steps_run > 0 ? static_cast<double>(body_bytes) / static_cast<double>(tokens * steps_run) : 0.0;
  const double checks_per_token =
      steps_run > 0 ? static_cast<double>(check_bytes) / static_cast<double>(tokens * steps_run) : 0.0;
  const double comm_share = step_total > 0 ? static_cast<double>(comm_ns) / static_cast<double>(step_total) : 0.0;
  const double embedding_comm_share =
      step_total > 0 ? static_cast<double>(embedding_comm_ns) / static_cast<double>(step_total) : 0.0;
  const auto est = es::estimate_lm_memory(spec);
  if (as_json) {
    json colls = json::array();
    for (const auto& [name, k] : by_name)
      colls.push_back({{"name", name}, {"op", k.op}, {"count", k.count}, {"bytes_sent", k.bytes_sent}, {"ns", k.ns}});
    json ranks = json::array();
    for (size_t i = 0; i < r.ranks.size(); ++i)
      ranks.push_back({{"rank", i},
                       {"row_begin", r.ranks[i].rows.begin},
                       {"row_end", r.ranks[i].rows.end},
                       {"bytes_sent", r.ranks[i].bytes_sent},
                       {"bytes_received", r.ranks[i].bytes_received},
                       {"memory_estimate_bytes", est[i].peak_allocated_bytes},
                       {"memory_estimate_reserved_bytes", est[i].peak_reserved_bytes},
                       {"memory_requested_sum_bytes", est[i].total()},
                       {"peak_allocated_bytes", r.ranks[i].peak_allocated},
                       {"peak_requested_bytes", r.ranks[i].peak_requested}});
    std::cout << dump(json{{"ended", es::to_string(r.ended)},
                           {"session", output},
                           {"workload", spec.name},
                           {"model", "lm_embedding"},
                           {"simulated", simulated},
                           {"sharding", es::to_string(spec.sharding)},
                           {"sequence_parallel", spec.sequence_parallel},
                           {"world_size", p},
                           {"padded_vocab_size", spec.padded_vocab_size()},
                           {"steps", steps_run},
                           {"steps_planned", spec.steps},
                           {"tokens_per_step", tokens},
                           {"step_time_ns", {{"mean", d.mean}, {"p50", d.p50}, {"min", d.min}, {"max", d.max}}},
                           {"tokens_per_s", tps},
                           {"loss", r.losses},
                           {"comm_share_rank0", comm_share},
                           {"embedding_comm_share_rank0", embedding_comm_share},
                           {"bytes_on_wire_per_token", per_token},
                           // scaling's and plan's names of the same figures (kept the old beside them)
                           {"comm_share", comm_share},
                           {"embedding_comm_share", embedding_comm_share},
                           {"wire_bytes_per_token", per_token},
                           {"body_wire_bytes_per_token", body_per_token},
                           {"split_check_bytes_per_token", checks_per_token},
                           {"collectives_rank0", colls},
                           {"ranks", ranks}})
              << "\n";
    return 0;
  }
  std::cout << padding_text(spec) << wire_text(spec);
  std::cout << fmt::format("steps        {}{} of {} tokens ({})\n", steps_run,
                           cancelled ? fmt::format(" (cancelled; {} planned)", spec.steps) : "", tokens,
                           spec.sharding == es::LmSharding::vocab_parallel ? "one tensor-parallel group, every rank the same tokens"
                                                                           : fmt::format("{} per rank x {} ranks", tokens / p, p));
  std::cout << fmt::format("step time    mean {}  p50 {}  min {}\n", ms(d.mean), ms(d.p50), ms(d.min));
  std::cout << fmt::format("throughput   {} tokens/s\n", embedscope::sessions::format_rate(tps));
  if (r.losses.empty())
    std::cout << "loss         none (SIMULATED: nothing is trained)\n";
  else
    std::cout << fmt::format("loss         first {:.4f}  last {:.4f}\n", r.losses.front(), r.losses.back());
  std::cout << fmt::format("comm         {:.1f}% of rank 0's step time in collectives, {:.1f}% in the token "
                           "embedding's own ({}); {:.0f} bytes on the wire per token (all ranks' bytes sent / "
                           "tokens{}){}\n\n",
                           100.0 * comm_share, 100.0 * embedding_comm_share,
                           simulated ? "SIMULATED: the cost model's figures, one op at a time per rank"
                                     : "thread-level: the rank's one thread waits while they run",
                           per_token, split_checks_text(checks_per_token),
                           body_per_token > 0
                               ? fmt::format("; of which the stand-in body's gradient all-reduce {:.0f} B/token "
                                             "(body_layers: replicated fp32 layers; Megatron's tensor-parallel "
                                             "transformer all-reduces no weight gradient over the tensor-parallel "
                                             "group)",
                                             body_per_token)
                               : std::string());
  std::cout << fmt::format("{:<40} {:<15} {:>6} {:>14} {:>12}\n", "collective (rank 0, whole run)", "op", "count",
                           "bytes sent", "time");
  for (const auto& [name, k] : by_name)
    std::cout << fmt::format("{:<40} {:<15} {:>6} {:>14} {:>12}\n", name, k.op, k.count, format_bytes(k.bytes_sent),
                             ms(k.ns));
  std::cout << fmt::format("\n{:<5} {:>17} {:>14} {:>14} {:>16} {:>15}\n", "rank", "rows", "bytes sent",
                           "bytes received", "memory estimate", "peak allocated");
  for (size_t i = 0; i < r.ranks.size(); ++i)
    std::cout << fmt::format("{:<5} {:>17} {:>14} {:>14} {:>16} {:>15}\n", i,
                             fmt::format("[{}, {})", r.ranks[i].rows.begin, r.ranks[i].rows.end),
                             format_bytes(r.ranks[i].bytes_sent), format_bytes(r.ranks[i].bytes_received),
                             format_bytes(est[i].peak_allocated_bytes),
                             simulated ? std::string("-") : format_bytes(r.ranks[i].peak_allocated));
  if (!simulated) std::cout << peak_above_estimate_text(r, est);
  if (cancelled)  // as a cancelled DLRM run ends its summary (run.cpp)
    std::cout << fmt::format("\ncancelled after {} step{}; session: {}\n", steps_run, steps_run == 1 ? "" : "s", output);
  else
    std::cout << fmt::format("\nsession: {}\n", output);
  return 0;
}

}  // namespace embedscope::cli
