#pragma once
// PyTorch profiler (Kineto) Chrome-trace JSON -> session (format and rules: the section
// "Imported sessions" of sessions/schema/FORMAT.md).
//
// One file per rank (`distributedInfo.rank`; a file without it takes the lowest free rank), except
// the successive windows of one process that tensorboard_trace_handler wrote, one rank in time
// order (importers/kineto_json/process_windows.h). PyTorch's legacy profiler (no Kineto: a bare
// array on pid "CPU functions") is read as well; a CPU trace without record_param_comms has its
// gloo:* calls as its collectives (host_collectives.h). Each
// CPU thread, each GPU stream, and the user spans drawn on a GPU stream's track become lanes of
// the rank; ProfilerStep#N spans become step N; kernels, copies and memsets join the host call
// that launched them by args.correlation (ops.correlation holds it on both) and take its step;
// record_param_comms args become collective records attached to the NCCL kernels launched inside
// the span. Times are exact integer ns: Kineto's microseconds with fractions, never float64.

#include <string>
#include <string_view>
#include <vector>

#include "embedscope/sessions/importers/importer.h"

namespace embedscope::sessions::importers {

/// Whether the text starts like a Chrome trace (an object with "traceEvents", or an array of
/// objects with "ph", or "[]": torch's export of a profile that recorded nothing).
bool probe_kineto_json(std::string_view head);

/// Imports `files` (one rank each) into `writer` and records the import problems in it (the
/// writer is not closed). Throws ImportError when a file cannot be read at all; bad content is
/// counted in the summary's problems and never throws.
ImportSummary import_kineto_json(const std::vector<std::string>& files, SessionWriter& writer,
                                 const ImportOptions& options);

}  // namespace embedscope::sessions::importers
