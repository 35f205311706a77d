#pragma once
// Why a session's Load or Memory page has nothing to draw. An imported trace holds kernels,
// copies and collectives but none of the per-table load counters of Embedscope's own runs, and
// (a Kineto or Nsight trace) no allocator history: four empty charts with a 0..6 colour scale
// said nothing to the person who opened one (tester34 D19). The workbench shows this sentence in
// place of the page. Qt-free.

#include <string>

#include "embedscope/sessions/store/session.h"

namespace embedscope::ui {

/// "" when the Load page has something to show; else why it has not, e.g. "No load counters: an
/// imported kineto_json trace records ...". Only an imported session can be empty here (a run
/// records load counters from its first step; one that ended before has its own notes on the
/// page), so a run session costs no read. Reads `load()` of an imported session (empty or small).
std::string load_page_empty_reason(const sessions::SessionReader& s);

/// The same for the Memory page: "" when the session has memory counters, allocator events,
/// snapshots or an imported allocator timeline; else what is missing and where that history comes
/// from (a PyTorch memory snapshot). Run sessions always answer "".
std::string memory_page_empty_reason(const sessions::SessionReader& s);

/// The same for the Timeline page: "" when the session has lanes (ops to draw); an imported
/// memory snapshot has none, and says where its history is (the Memory page) instead of an empty
/// axis (tester37 #20). Reads `lanes()` of an imported session only.
std::string timeline_page_empty_reason(const sessions::SessionReader& s);

}  // namespace embedscope::ui
