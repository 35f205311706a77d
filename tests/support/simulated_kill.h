#pragma once
// A `run --simulate` SIGKILLed as its second progress line comes, and what its session kept: the
// check the DLRM and the lm_embedding simulations share. Header-only.

#include <csignal>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "embedscope/sessions/store/session.h"
#include "support/cli_run.h"

namespace embedscope::test_support {

/// Runs the CLI `cli` with `args` (a simulated `run ... -o db` of many steps, whose progress lines
/// end "(simulated)", one every 2 s on a non-tty), sends SIGKILL as its second progress line
/// starts, and checks, with gtest assertions, that the session `db` reads `crashed` and keeps on
/// rank 0 at least the N steps the first line printed. `progress`: the line's pattern, N its first
/// group. The simulator commits every 500 ms (SessionWriter::sync): what it simulated 2 s before
/// the kill is in the session unless the writer fell 2 s behind (before that sync, a kill 4 s in
/// kept 1,924 of 9,616 steps, fewer than the 2 s line's). A bound tied to the first line alone
/// (half its steps) failed here at load 20: the last 0.5 s and the commit under way were more
/// than half the steps of a machine that ran the simulation in bursts.
inline void expect_sigkilled_simulation_keeps_its_steps(const std::string& cli, const std::vector<std::string>& args,
                                                        const std::string& db, const std::regex& progress) {
  const SignalledRun r = run_signalled(cli, args, SIGKILL, {"(simulated)\nstep "});
  ASSERT_EQ(r.sent, 1) << r.piped;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.piped, m, progress)) << r.piped;
  const long long printed = std::stoll(m[1].str());
  ASSERT_GT(printed, 0);
  const sessions::SessionReader s(db);
  EXPECT_EQ(s.status(), "crashed");
  long long kept = 0;
  for (const auto& st : s.steps()) kept += st.rank == 0;
  EXPECT_GE(kept, printed) << "the first line printed step " << printed << ", kept " << kept;
}

}  // namespace embedscope::test_support
