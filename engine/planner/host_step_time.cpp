// A measured lm_embedding step's lower bound on this machine (planner/host_step_time.h).
#include "embedscope/engine/planner/host_step_time.h"

#include <time.h>

#include <Eigen/Core>
#include <algorithm>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "embedscope/engine/program/lm_program.h"

namespace embedscope::engine {

int64_t lm_step_flops(const LmWorkloadSpec& spec) {
  int64_t flops = 0;
  for (int r = 0; r < spec.world_size; ++r)
    for (const auto& op : build_lm_step_program(spec, r, 0).ops) flops += op.flops;
  return flops;
}

namespace {
double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
}  // namespace

double measure_gemm_flops_per_s() {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  constexpr int64_t T = 256, H = 512, V = 512;  // logits [T x V] = hidden [T x H] x weights [V x H]^T
  Mat a = Mat::Constant(T, H, 0.5f), w = Mat::Constant(V, H, 0.25f), c(T, V);
  c.noalias() = a * w.transpose();  // warm-up
  double best = std::numeric_limits<double>::infinity();
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = thread_cpu_s();
    int64_t calls = 0;
    double t = 0;
    do {
      c.noalias() = a * w.transpose();
      ++calls;
      t = thread_cpu_s() - t0;
    } while (t < 0.02);
    best = std::min(best, t / static_cast<double>(calls));
    a(0, 0) += c(0, 0) * 1e-9f;  // a result that is read: the product is not optimized away
  }
  return best > 0 ? 2.0 * static_cast<double>(T * H * V) / best : 0.0;
}

double host_step_seconds(int64_t flops, double flops_per_s_per_core, int cores, int ranks) {
  const int used = std::min(cores, ranks);
  if (flops_per_s_per_core <= 0 || used <= 0) return 0.0;
  return static_cast<double>(flops) / (flops_per_s_per_core * used);
}

std::string duration_text(double seconds) {
  if (seconds < 60) return fmt::format("{:.0f} s", seconds);
  if (seconds < 3600) return fmt::format("{:.1f} min", seconds / 60);
  return fmt::format("{:.1f} h", seconds / 3600);
}

std::string host_step_text(int64_t flops, double flops_per_s_per_core, int cores, int ranks) {
  const int used = std::min(cores, ranks);
  return fmt::format("at least {} ({:.1f} TFLOP of GEMMs a step over all ranks at {:.1f} GFLOP/s a core, measured "
                     "now, on {} core{})",
                     duration_text(host_step_seconds(flops, flops_per_s_per_core, cores, ranks)),
                     static_cast<double>(flops) / 1e12, flops_per_s_per_core / 1e9, used, used == 1 ? "" : "s");
}

std::string long_step_warning(int64_t flops, double flops_per_s_per_core, int cores, int ranks, int64_t steps,
                              double threshold_s) {
  const double step_s = host_step_seconds(flops, flops_per_s_per_core, cores, ranks);
  if (step_s <= 0 || step_s < threshold_s) return "";
  return fmt::format("this run's steps take {} each on this machine: its {} step{} at least {}; "
                     "`embedscope plan` and `--simulate PROFILE` give its figures without running it (Ctrl-C "
                     "cancels after the current step)",
                     host_step_text(flops, flops_per_s_per_core, cores, ranks), steps, steps == 1 ? "" : "s", duration_text(step_s * static_cast<double>(steps)));
}

}  // namespace embedscope::engine
