// cli43 (tester42 F15): `embedscope-ui --scenario ID --scenario-sessions DIR --report -o OUT`
// answered "--report needs a session file", which said nothing of scenarios; it is refused
// (exit 2, nothing written) naming what writes a scenario's pages: --screenshot for the open
// page, --compare ... --report for its runs' comparison. Failed before its fix.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace {
namespace fs = std::filesystem;

struct Cli43UiRun {
  int code = -1;
  std::string out;
};
Cli43UiRun cli43_ui(const std::string& args) {
  const std::string cmd = "QT_QPA_PLATFORM=offscreen '" + std::string(EMBEDSCOPE_UI) + "' " + args + " 2>&1";
  Cli43UiRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}
}  // namespace

TEST(Cli43ScenarioReport, ReportOfAScenarioSaysWhatToUseInstead) {
  const fs::path out = fs::temp_directory_path() / ("es_cli43_scen_report_" + std::to_string(getpid()));
  fs::remove_all(out);
  auto r = cli43_ui("--scenario compression --scenario-sessions comp --report -o " + out.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(r.out,
            "error: --report writes the pages of one session (or of --compare), not a scenario's; render the scenario's "
            "tab with --screenshot FILE.png (embedscope-ui --scenario compression --scenario-sessions comp --screenshot "
            "FILE.png), or write the comparison of its runs as a report (embedscope-ui --compare comp/compression-0.db "
            "comp/compression-1.db ... --report -o DIR)\n");
  EXPECT_FALSE(fs::exists(out));
  // a scenario file: its id is not known before it is read, so the names say ID
  r = cli43_ui("--scenario my/scen.json --report -o " + out.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("(embedscope-ui --scenario my/scen.json --screenshot FILE.png), or write the comparison of its "
                       "runs as a report (embedscope-ui --compare ID-0.db ID-1.db ... --report -o DIR)\n"),
            std::string::npos)
      << r.out;
}
