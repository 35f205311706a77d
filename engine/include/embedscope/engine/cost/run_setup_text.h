#pragma once
// How a workload's run was set up, in the words `embedscope run` / `plan` / `stats` print under
// the plan and the workbench's Summary shows in its header (tester50 F8: the Summary never said
// that the network was emulated, nor the simulated hardware profile or the dense precision): one
// source for both, so the CLI and the workbench cannot drift apart.

#include <string>

#include "embedscope/engine/workload/spec.h"

namespace embedscope::engine {

/// One line for an emulated network: "intra_node unlimited; inter_node 10 MB/s, 0 ns latency".
/// Each link reads "unlimited" (neither bandwidth nor latency limited) or "<rate>, <latency>
/// latency" (the latency in ns below 1 us, "5.00 us" below 1 ms, else "1.00 ms"), the rate in the largest of GB/s, MB/s, kB/s, B/s it reaches (3 significant
/// digits: 1e6 B/s reads "1 MB/s") or "unlimited bandwidth" when only the latency is set.
std::string emulated_network_text(const NetworkSpec& n);

/// The setup lines of a (table) workload as run, each without a label or a newline:
///   pipeline: "base; qcomms forward fp32 backward fp32" (pipeline, then the qcomms precisions);
///   network:  emulated_network_text(spec.network) for an emulated (or unlimited) network, or for the
///             simulated backend the modelled links: "simulated: nvlink4 within a node, ib_ndr
///             across nodes (hardware profile h100_sxm)" - "simulated (hardware profile NAME, not
///             found here)" when the profile named by devices.hardware cannot be loaded here;
///   dense:    dense_precision_text(dense.precision, the simulated profile or nullptr);
///             "" for a workload without a dense part.
/// Throws nothing of its own (a missing profile is said in the text).
struct RunSetupText {
  std::string pipeline;
  std::string network;
  std::string dense;
};
RunSetupText run_setup_text(const WorkloadSpec& spec);

}  // namespace embedscope::engine
