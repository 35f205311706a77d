#pragma once
// The name an imported trace's Work::wait span is stored under (sessions/schema/FORMAT.md ops).

namespace embedscope::sessions {

/// OpRecord name of a PyTorch profiler (Kineto) `record_param_comms` span whose `Collective
/// name` is `wait`: Work::wait, the host blocked until an earlier collective finished (Group size
/// 1, In/Out msg nelems 0, no process group). The Kineto importer stores it under this name
/// (category comm, as the comm library's call it is) so that readers can tell it from the
/// collectives' record_param_comms spans, which carry the same name in the trace.
/// It is no collective (tester49 F2: no collective record) and no communication: a wait is idle
/// time. The step figures (analysis.h rank_step_times: comm, overlap, exposed communication, time
/// by category) and the per-collective times leave it out, as Holistic Trace Analysis' overlap
/// counts only the collectives' kernels (hta/analyzers/breakdown_analysis.py
/// get_comm_comp_overlap: communication kernels against computation kernels); the critical path
/// still walks it (the host spent that time there).
inline constexpr const char* kImportedWaitSpanName = "record_param_comms (wait)";

}  // namespace embedscope::sessions
