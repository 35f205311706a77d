#pragma once
// The collectives of a CPU trace that has no record_param_comms span: PyTorch's legacy profiler
// (torch.autograd.profiler without Kineto, e.g. Debian's torch 1.13) records none, only the
// ProcessGroupGloo worker thread's `gloo:*` call that ran each collective and the `c10d::*` call
// on the calling thread that issued it (c10d::allreduce_ around DDP's gloo:all_reduce). The
// worker's call is the collective; the caller's is not a second one (testerB F7: four
// all-reduces a step where two ran).

#include <cstdint>
#include <string>
#include <vector>

#include "importers/common/interner.h"
#include "importers/kineto_json/trace_model.h"

namespace embedscope::sessions::importers::kineto {

/// One collective a gloo:* call ran.
struct HostCollective {
  size_t event = 0;       ///< index into RankTrace::events of its gloo:* call
  std::string op;         ///< the session's op name: all_reduce, all_to_all, ... (collective_op)
  uint64_t sequence = 0;  ///< 1, 2, ...: its place among the rank's calls of the same name, by start
};

/// The collectives of `tr` when it holds no record_param_comms span: each `gloo:*` host call that
/// ended (did-not-end ones are left out), numbered per operation in start order (the n-th
/// gloo:all_reduce is all_reduce sequence n: a process group runs its collectives in the order
/// every member issued them, so the n-th of each rank is one collective, which `--align
/// collectives` matches by group, operation and sequence).
/// The `c10d::*` calls are not collectives here. Empty when `tr` has record_param_comms spans (they
/// are its collectives) or no gloo:* call. Example: gloo:all_to_all at 4.8 ms and 19.2 ms,
/// gloo:all_reduce at 11.6 ms -> (all_to_all, 1), (all_reduce, 1), (all_to_all, 2).
std::vector<HostCollective> host_collectives(const RankTrace& tr, const Interner& names);

/// The session's op name for a PyTorch collective name ("allreduce", "all_to_allv",
/// "_allgather_base", "all_reduce"): all_to_all, all_reduce, all_gather, reduce_scatter or
/// broadcast; any other name as it is ("unknown" for "").
std::string collective_op(const std::string& name);

}  // namespace embedscope::sessions::importers::kineto
