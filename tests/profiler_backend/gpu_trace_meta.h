#pragma once
// A decoder's counters as a session stores them (write_gpu_trace_metadata), for the CUPTI tests.

#include <unistd.h>

#include <filesystem>
#include <string>

#include "embedscope/profiler/cupti/cupti_decode.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::test_support {

/// The metadata value `key` (e.g. "cupti_launches_dropped") of a scratch session into which
/// write_gpu_trace_metadata wrote `stats` (no CUPTI drops, default clock calibrations); the
/// session is removed again.
inline std::string gpu_trace_meta(const profiler::DecodeStats& stats, const std::string& key) {
  const auto path =
      std::filesystem::temp_directory_path() / ("es_gpu_trace_meta_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string());
    profiler::write_gpu_trace_metadata(w, 0, stats, {}, {});
    w.close("complete");
  }
  const std::string value = sessions::SessionReader(path.string()).meta(key);
  std::filesystem::remove(path);
  return value;
}

}  // namespace embedscope::test_support
