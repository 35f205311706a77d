// The device path's failure handling (issue 14, "a GPU that errors or disappears mid-run"): the
// test hook EMBEDSCOPE_INJECT_DEVICE_FAULT (exec/device/fault_injection.h) makes one call of one
// rank's device fail as the CUDA runtime would; on the host stand-in the run ends crashed naming
// the rank and the call, with the session readable and everything recorded before kept.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "embedscope/engine/exec/run.h"
#include "embedscope/engine/sharding/sharding.h"
#include "embedscope/engine/workload/presets.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "embedscope/sessions/store/session.h"
#include "exec/device/fault_injection.h"

namespace {
namespace esd = embedscope::engine::detail;

// Sets EMBEDSCOPE_INJECT_DEVICE_FAULT for one scope.
struct DeviceFaultEnv {
  explicit DeviceFaultEnv(const char* value) { ::setenv("EMBEDSCOPE_INJECT_DEVICE_FAULT", value, 1); }
  ~DeviceFaultEnv() { ::unsetenv("EMBEDSCOPE_INJECT_DEVICE_FAULT"); }
};

std::string device_fault_parse_error(const std::string& value, int world) {
  try {
    esd::parse_device_fault(value, world);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(DeviceFault, TheHookParsesAndRefusesBadValuesNamingTheVariable) {
  const auto f = esd::parse_device_fault("1:lookup:3", 4);
  EXPECT_EQ(f.rank, 1);
  EXPECT_EQ(f.call, "lookup");
  EXPECT_EQ(f.nth, 3);
  EXPECT_EQ(f.error, "cudaErrorLaunchFailure");
  EXPECT_EQ(esd::parse_device_fault("0:to_host:5:cudaErrorDevicesUnavailable", 1).error, "cudaErrorDevicesUnavailable");
  EXPECT_EQ(device_fault_parse_error("4:lookup:1", 4),
            "EMBEDSCOPE_INJECT_DEVICE_FAULT=4:lookup:1: rank 4 is not a rank of this run (0 to 3) (expected "
            "RANK:CALL:N[:ERROR])");
  EXPECT_EQ(device_fault_parse_error("0:lookups:1", 4),
            "EMBEDSCOPE_INJECT_DEVICE_FAULT=0:lookups:1: 'lookups' is not a device call (lookup, update, "
            "linear_forward, linear_backward, to_device, to_host, comm_copy, comm_add, comm_to_host, comm_sync) "
            "(expected RANK:CALL:N[:ERROR])");
  EXPECT_NE(device_fault_parse_error("0:lookup:0", 4).find("N 0 is not >= 1"), std::string::npos);
  EXPECT_NE(device_fault_parse_error("0:lookup:3x", 4).find("N '3x' is not a whole number"), std::string::npos);
  EXPECT_NE(device_fault_parse_error("0:lookup", 4).find("2 field(s)"), std::string::npos);
  EXPECT_NE(device_fault_parse_error("0:lookup:1:cudaErrorOops", 4).find("'cudaErrorOops' is not an error that can be injected"),
            std::string::npos);
}

TEST(DeviceFault, AnInjectedLaunchFailureEndsTheRunCrashedNamingTheRankAndTheCall) {
  embedscope::engine::WorkloadSpec s = embedscope::engine::load_preset("tiny");
  s.devices.count = 2;
  s.steps = 4;
  s.warmup_steps = 1;
  embedscope::engine::TrainerOptions opt;
  opt.emulate_device = true;
  opt.emulated_devices = 1;  // both ranks on one emulated GPU
  opt.session_path = (std::filesystem::temp_directory_path() / ("es_device_fault_" + std::to_string(getpid()) + ".db")).string();
  opt.session_overwrite = true;
  s.collective_timeout_ms = 20'000;
  embedscope::engine::RunResult r;
  const auto t0 = std::chrono::steady_clock::now();
  {
    DeviceFaultEnv env("1:lookup:3");
    r = embedscope::engine::run_training(s, embedscope::engine::plan_sharding(s), opt);
  }
  // rank 0, waiting for rank 1 in a collective, fails at once (its connections closed), not at
  // the 20 s collective timeout (30 s before the executor closed a failed rank's connections)
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  const std::string expected =
      "rank 1: lookup failed: cudaErrorLaunchFailure (unspecified launch failure) [injected: "
      "EMBEDSCOPE_INJECT_DEVICE_FAULT=1:lookup:3:cudaErrorLaunchFailure]";
  EXPECT_EQ(r.ended, embedscope::engine::RunEnd::crashed) << r.error;
  EXPECT_NE(r.error.find(expected), std::string::npos) << r.error;
  const embedscope::sessions::SessionReader session(opt.session_path);
  EXPECT_EQ(session.status(), "crashed");
  EXPECT_NE(session.meta(embedscope::sessions::meta::kEndMessage).find(expected), std::string::npos)
      << session.meta(embedscope::sessions::meta::kEndMessage);
  EXPECT_GT(session.op_count(), 0);  // what the ranks did before the failure is kept
  EXPECT_EQ(session.ranks().size(), 2u);

  // the same run without the hook completes: the failure was the injected one
  const embedscope::engine::RunResult ok = embedscope::engine::run_training(s, embedscope::engine::plan_sharding(s), opt);
  EXPECT_EQ(ok.ended, embedscope::engine::RunEnd::complete) << ok.error;
}

TEST(DeviceFault, ARunWithoutADeviceRefusesTheHook) {
  embedscope::engine::WorkloadSpec s = embedscope::engine::load_preset("tiny");
  s.devices.count = 2;
  s.steps = 2;
  embedscope::engine::TrainerOptions opt;  // the cpu backend: no device to fail
  DeviceFaultEnv env("0:lookup:1");
  std::string error;
  try {
    const auto r = embedscope::engine::run_training(s, embedscope::engine::plan_sharding(s), opt);
    ADD_FAILURE() << "the run went on (" << embedscope::engine::to_string(r.ended) << ")";
  } catch (const std::invalid_argument& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("EMBEDSCOPE_INJECT_DEVICE_FAULT is set, but this run has no device (the cpu backend)"),
            std::string::npos)
      << error;
}

// A rank that fails closes its connections at once; a peer's Gloo write to them then raises
// SIGPIPE, whose default action killed the whole process (an OOM run under ASan: "SIGPIPE
// ***Exception"). run_training ignores SIGPIPE where nobody handles it, so the write fails with EPIPE.
TEST(DeviceFault, RunsIgnoreSigpipeSoAClosedPeerIsAnErrorNotADeadProcess) {
  embedscope::engine::WorkloadSpec s = embedscope::engine::load_preset("tiny");
  s.devices.count = 2;
  s.steps = 1;
  embedscope::engine::run_training(s, embedscope::engine::plan_sharding(s), {});
  struct sigaction current {};
  ASSERT_EQ(sigaction(SIGPIPE, nullptr, &current), 0);
  EXPECT_EQ(current.sa_handler, SIG_IGN);
}
