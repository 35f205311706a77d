// `embedscope merge A.db B.db ... -o ALL.db [--align none|collectives] [--force-overwrite]
// [--json]`: one session from per-rank sessions (sessions/merge/merge.h).

#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "embedscope/sessions/merge/merge.h"
#include "embedscope/sessions/store/session.h"
#include "output/gpu_kernels_text.h"
#include "output/output.h"
#include "cancel_writes.h"
#include "output_guard.h"
#include "staged_output.h"

namespace embedscope::cli {

namespace ss = embedscope::sessions;
using nlohmann::json;

namespace {
struct MergeState {
  std::vector<std::string> inputs;
  std::string output;
  std::string align = "none";
  bool overwrite = false;
  bool json = false;
  bool allow_disjoint = false;
};

int cmd_merge(const MergeState& s) {
  ss::MergeOptions opt;
  opt.align = s.align;
  opt.overwrite = s.overwrite;
  opt.allow_disjoint = s.allow_disjoint;
  if (!input_that_is(s.output, s.inputs).empty())  // before the staging: as merge_sessions says it
    throw ss::SessionError(
        fmt::format("{}: the output is one of the inputs; write the merged session elsewhere (-o)", s.output));
  // a missing input before anything is said or staged (docs55 D12: "merging 2 sessions" came first)
  for (const auto& in : s.inputs)
    if (std::error_code ec; !std::filesystem::exists(in, ec))  // a symbolic link loop says so, not "No such file"
      throw ss::SessionError(fmt::format("{}: cannot open: {}", in, ec ? ec.message() : "No such file or directory"));
  // Written under a temporary name beside the output and renamed over it once complete
  // (staged_output.h); Ctrl-C or SIGTERM cancel at once: the temporary session is removed, no
  // half-written session is left and an existing output is as it was (cancel_writes.h).
  StagedSession staged(s.output, s.overwrite, "merge");
  CancelWrites cancel("merge", s.output, "written", s.json, "\ncancelling the merge\n");
  cancel.remove_on_cancel(staged.temp());
  fmt::print(stderr, "merge: merging {} sessions into {}\n", s.inputs.size(), s.output);
  opt.overwrite = true;  // the temporary name, claimed by StagedSession
  const ss::MergeSummary sum = with_out_name(staged, [&] { return ss::merge_sessions(s.inputs, staged.temp(), opt); });
  cancel.commit([&] { staged.commit(); });
  const ss::SessionReader merged(s.output);
  const auto problems = merged.import_stats();
  if (s.json) {
    json j{{"session", s.output},
           {"files", sum.files},
           {"ranks", sum.ranks},
           {"ops", sum.ops},
           {"ended", merged.status()},
           {"alignment", sum.alignment_json.empty() ? json(nullptr) : json::parse(sum.alignment_json)},
           {"problems", import_problems_json(problems)}};
    std::cout << dump(j) << "\n";
    return 0;
  }
  std::string ranks;
  for (auto r : sum.ranks) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  std::cout << fmt::format("merged       {} session(s) into {} ({})\n", sum.files.size(), s.output, merged.status());
  for (const auto& f : sum.files) std::cout << fmt::format("             {}\n", f);
  std::cout << fmt::format("ranks        {} ({} rank{})\n", ranks, sum.ranks.size(), sum.ranks.size() == 1 ? "" : "s");
  std::cout << fmt::format("ops          {}\n", sum.ops);
  if (!sum.alignment_text.empty()) std::cout << sum.alignment_text;
  if (!problems.empty()) std::cout << "import problems\n" << import_problems_text(problems);
  return 0;
}
}  // namespace

Command add_merge_command(CLI::App& app) {
  auto s = std::make_shared<MergeState>();
  auto* c = app.add_subcommand("merge", "Merge per-rank sessions (imported traces, or Embedscope runs on different "
                                        "hosts) into one session; a rank in two inputs is refused");
  c->add_option("sessions", s->inputs, "Session files, two or more (each rank from one file only)")->required()->expected(2, -1);
  c->add_option("-o,--output", s->output, "Session file to write")
      ->check(CLI::Validator(
          [](const std::string& v) { return empty_output_name_refusal(v, "give the session file to write"); }, "NAME"))
      ->required();
  c->add_option("--align", s->align, "How ranks' clocks are aligned: none (as recorded, one global minimum) or "
                                     "collectives (one offset per rank from matching collectives' ends)")
      ->check(CLI::IsMember({"none", "collectives"}));
  c->add_flag("--force-overwrite", s->overwrite, "Replace the output file if it exists");
  c->add_flag("--allow-disjoint", s->allow_disjoint,
              "Merge ranks whose time ranges do not overlap (refused otherwise: traces of different jobs?)");
  c->add_flag("--json", s->json, "Print what was merged as one JSON object on stdout");
  return {c, [s] { return cmd_merge(*s); }, [s] { return s->json; }};
}

}  // namespace embedscope::cli
