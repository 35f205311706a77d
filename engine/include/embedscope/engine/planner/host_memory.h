#pragma once
// This machine's memory as a measured run's guard sees it (tester45 F10): a cpu run's ranks are
// threads of one process, so what they need is checked against the memory available NOW
// (/proc/meminfo MemAvailable: free memory plus what the kernel can reclaim without swapping),
// not against the machine's total, which other processes may already hold. Used by the DLRM
// guard (exec/host_memory_check.h) and the lm_embedding one (lm_memory_estimate.h) alike.

#include <cstdint>
#include <string>

namespace embedscope::engine {

/// A machine's memory, bytes; 0 where unknown.
struct HostMemory {
  int64_t total_bytes = 0;      ///< MemTotal (physical memory)
  int64_t available_bytes = 0;  ///< MemAvailable: what a new process can take now without swapping
};

/// Parses the text of /proc/meminfo ("MemTotal:  24683784 kB" lines; proc(5)): MemTotal and
/// MemAvailable in bytes (kB x 1024). A field that is absent or malformed is 0; a kernel without
/// MemAvailable (before 3.14) gives available 0 (unknown). Pure; never throws.
/// Example: "MemTotal: 24683784 kB\nMemFree: 1 kB\nMemAvailable: 21538740 kB\n" ->
/// {25276194816, 22055669760}.
HostMemory parse_meminfo(const std::string& text);

/// This machine's memory now: /proc/meminfo parsed (parse_meminfo); where it cannot be read,
/// the total from sysconf(_SC_PHYS_PAGES) and available 0 (unknown: the guards then refuse
/// nothing). Reads a file each call: the available figure changes as other processes run.
HostMemory this_host_memory();

/// The cores this process may run on (its affinity set, sched_getaffinity), else the hardware's
/// count; >= 1. What a run records as its `cpu_cores` and the LM step-time warning divides by.
int host_cores();

/// The guard's rule, shared by the DLRM and lm_embedding runs: `need` bytes fit when at most
/// 90% of `m.available_bytes`; an unknown (0) available never refuses. Pure.
bool fits_host_memory(int64_t need, const HostMemory& m);

/// "18.2 GiB available now (of 23.5 GiB; a run is refused above 90% of what is available)": the
/// guards' texts (format_bytes).
std::string host_memory_text(const HostMemory& m);

}  // namespace embedscope::engine
