// The setup lines of a workload as run (run_setup_text.h), shared by the CLI and the workbench.

#include "embedscope/engine/cost/run_setup_text.h"

#include <optional>

#include <fmt/format.h>

#include "embedscope/engine/cost/dense_gemm_rate.h"
#include "embedscope/engine/cost/hardware_profile.h"
#include "embedscope/engine/workload/enums.h"
#include "embedscope/sessions/model/unit_ladder.h"

namespace embedscope::engine {

std::string emulated_network_text(const NetworkSpec& n) {
  auto link = [](const LinkSpec& l) {
    if (!l.limited()) return std::string("unlimited");
    // GB/s, MB/s, kB/s or B/s, the largest unit the rate reaches (tester48 F14.4: 1e6 read "0.001 GB/s")
    const auto rate = [](double b) {
      if (b >= 1e9) return fmt::format("{:.3g} GB/s", b / 1e9);
      if (b >= 1e6) return fmt::format("{:.3g} MB/s", b / 1e6);
      if (b >= 1e3) return fmt::format("{:.3g} kB/s", b / 1e3);
      return fmt::format("{:.3g} B/s", b);
    };
    const std::string bw = l.bandwidth_bytes_per_s > 0 ? rate(static_cast<double>(l.bandwidth_bytes_per_s))
                                                       : std::string("unlimited bandwidth");
    // the latency in the unit it reaches, as durations read elsewhere (tester50 F12: "1000000 ns")
    const double lat = static_cast<double>(l.latency_ns);
    const std::string latency = l.latency_ns < 1000        ? fmt::format("{} ns", l.latency_ns)
                                : l.latency_ns < 1'000'000 ? fmt::format("{:.2f} us", lat / 1e3)
                                                           : sessions::format_ms(lat);
    return fmt::format("{}, {} latency", bw, latency);
  };
  return fmt::format("intra_node {}; inter_node {}", link(n.intra_node), link(n.inter_node));
}

RunSetupText run_setup_text(const WorkloadSpec& spec) {
  RunSetupText out;
  out.pipeline = fmt::format("{}; qcomms forward {} backward {}", to_string(spec.pipeline),
                             to_string(spec.qcomms.forward_precision), to_string(spec.qcomms.backward_precision));
  out.network = emulated_network_text(spec.network);
  std::optional<HardwareProfile> hw;
  if (spec.devices.backend == Backend::simulated) try {  // the modelled links, not an emulation
      hw = load_hardware_profile(spec.devices.hardware);
      out.network = fmt::format("simulated: {} within a node, {} across nodes (hardware profile {})", hw->intra_node.name,
                                hw->inter_node.name, hw->name);
    } catch (const SpecError&) {
      out.network = "simulated (hardware profile " + spec.devices.hardware + ", not found here)";
    }
  // the dense part's precision, and on a simulated profile the rate its GEMMs are timed at
  if (spec.dense) out.dense = dense_precision_text(spec.dense->precision, hw ? &*hw : nullptr);
  return out;
}

}  // namespace embedscope::engine
