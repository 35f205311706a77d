#pragma once
// The Summary's tables of `embedscope stats` for traces and runs whose ranks shared collectives or
// whose GPU events were recorded: each rank's waits for its peers (PeerWaitsModel) and HTA's GPU
// kernel breakdown (KernelTypesModel, KernelBreakdownModel: top 10 and "... and K more").

#include <cstdint>
#include <string>
#include <vector>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/analysis/kernel_breakdown.h"

class QVBoxLayout;
class QWidget;

namespace embedscope::ui {

/// Adds under `layout` (widgets parented to `page`): the "Waiting for peers, per rank" caption
/// and table where sessions::straggler_text says something (a collective on two ranks or more),
/// its times per counted step (per the whole trace for a trace without steps), as stats prints
/// them; then, where `breakdown` has events, the "GPU kernel breakdown" caption, its types table,
/// the top kernels and the "... and K more" line (object names "peer_waits", "kernel_types",
/// "kernel_breakdown", "kernel_breakdown_more"). `names`: the kernels' whole names in the order of
/// breakdown.kernels. Adds nothing when neither applies.
void add_peer_and_kernel_tables(QVBoxLayout* layout, QWidget* page, const sessions::RunStats& st,
                                sessions::KernelBreakdown breakdown, std::vector<std::string> names);

}  // namespace embedscope::ui
