// embedscope: the headless command line (no Qt). Exit codes: 0 ok, 1 the job failed
// (OOM, hang, divergence), 2 bad input (config, file, flags).
//
// Wiring only: each command lives in commands/<command>.cpp (commands.h says how to add one),
// the text and JSON they share in output/.

#include <cstring>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands/commands.h"
#include "interrupt.h"
#include "embedscope/engine/workload/spec_error.h"
#include "embedscope/sessions/store/session.h"
#include "output/output.h"

namespace cli = embedscope::cli;
using nlohmann::json;

// What --help says of the exit codes (docs/cli-run.md, "Exit codes", says the same at length).
constexpr const char* kExitCodes =
    "Exit codes: 0 ok (a run cancelled by Ctrl-C or SIGTERM too); 1 the job failed while running (oom, hang, crash, "
    "write_failed: a session that could not be written, or created on a full disk); 2 bad input (a file, flag or "
    "workload at fault, an output name that is empty or cannot be created: a read-only or missing folder, no "
    "permission), also ids outside a table found while running; 3 import --strict recorded data_loss; 130 "
    "cancelled at once (a second Ctrl-C; an import, merge or export cancelled).";

namespace {
// `run` takes SIGINT and SIGTERM from its first moment (docs/cli-run.md): from the executable's
// .preinit_array, which the dynamic loader calls with main's arguments once the libraries are
// mapped and relocated, before any of their initialisers (OpenBLAS starts its threads in its
// own) and before main. Only for `run`: every other command keeps the dispositions it inherited
// until it installs its own.
void take_run_signals_first(int argc, char** argv, char** /*envp*/) {
  if (argc > 1 && argv && argv[1] && std::strcmp(argv[1], "run") == 0) cli::take_stop_signals_early(cli::kRunCancelling);
}
}  // namespace
__attribute__((section(".preinit_array"), used)) void (*const embedscope_preinit_run_signals)(int, char**, char**) =
    take_run_signals_first;

int main(int argc, char** argv) {
  CLI::App app{"embedscope: sharded embedding training workloads, profiled (headless CLI)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "embedscope " EMBEDSCOPE_VERSION);
  app.footer("Documentation: README.md and docs/ in the source tree (docs/cli-run.md: run, plan, program; "
             "docs/sessions.md: stats, import, merge, export, replay-memory; docs/output.md: what the output means; "
             "docs/configuration.md: the workload file). COMMAND --help for each command.\n" + std::string(kExitCodes));
  // In the order --help lists them.
  const std::vector<cli::Command> commands = {
      cli::add_run_command(app),
      cli::add_plan_command(app),
      cli::add_inspect_input_command(app),
      cli::add_tokenize_command(app),
      cli::add_program_command(app),
      cli::add_scaling_command(app),
      cli::add_calibrate_command(app),
      cli::add_scenario_command(app),
      cli::add_stats_command(app),
      cli::add_compare_command(app),
      cli::add_rebalance_command(app),
      cli::add_import_command(app),
      cli::add_merge_command(app),
      cli::add_launch_command(app),
      cli::add_replay_memory_command(app),
      cli::add_export_command(app),
  };
  for (const auto& c : commands) c.app->footer(kExitCodes);  // every COMMAND --help lists them too
  try {
    app.parse(argc, argv);
  } catch (const CLI::RequiredError& e) {
    const std::string first = argc > 1 ? argv[1] : "";
    std::vector<std::string> names;
    bool known = false;
    for (const auto& c : commands) {
      names.push_back(c.app->get_name());
      known = known || first == c.app->get_name();
    }
    if (!first.empty() && first[0] != '-' && !known) {  // `embedscope frobnicate`
      fmt::print(stderr, "error: unknown command '{}'; commands: {} (see --help)\n", first, fmt::join(names, ", "));
      return 2;
    }
    app.exit(e);
    return 2;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ExtrasError& e) {
    app.exit(e);
    // a list option's second value given after a space (tester44 F13): name the option and its form
    for (int i = 1; i + 2 < argc; ++i)
      for (const char* list : {"--sharding-types", "--allow-storage", "--shardings", "--gpus"})
        if (std::string_view(argv[i]) == list && argv[i + 2][0] != '-' && std::string_view(argv[i + 2]).find('.') == std::string_view::npos)
          fmt::print(stderr, "hint: {} takes its values comma-separated in one argument ({} {},{})\n", list, list,
                     argv[i + 1], argv[i + 2]);
    return 2;
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  bool wants_json = false;
  for (const auto& c : commands)
    if (*c.app && c.wants_json) wants_json = wants_json || c.wants_json();
  try {
    for (const auto& c : commands)
      if (*c.app) return c.run();
  } catch (const embedscope::engine::SpecError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    if (wants_json) std::cout << cli::dump(json{{"ended", "bad_input"}, {"error", e.what()}}) << "\n";
    return 2;
  } catch (const embedscope::sessions::SessionWriteError& e) {
    // a session that could not be written (a full disk at its creation): not bad input, exit 1
    // as a run that ended write_failed (retest49 R7); nothing was left behind
    if (wants_json)
      std::cout << cli::dump(json{{"ended", "write_failed"}, {"error", e.what()}, {"session", nullptr}}) << "\n";
    fmt::print(stderr, "error: {}\nno session was written\n", e.what());
    return 1;
  } catch (const embedscope::sessions::SessionError& e) {
    if (wants_json) std::cout << cli::dump(json{{"ended", "bad_input"}, {"error", e.what()}}) << "\n";
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
