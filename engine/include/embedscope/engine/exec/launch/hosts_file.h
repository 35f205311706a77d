#pragma once
// The hosts of `embedscope launch --hosts-file F`: an Open MPI-style hostfile whose hosts are
// loopback addresses of this machine, so that one machine plays several: each rank's Gloo device
// binds to its host's address (run --host) and the hosts are the nodes (run --local-world-size),
// which table_row_wise's groups and the network emulation's intra-/inter-node links follow.
// Pure functions, apart from reading the file.

#include <string>
#include <string_view>
#include <vector>

namespace embedscope::engine::launch {

/// One line of a hosts file: "ADDRESS [slots=N]".
struct HostSlots {
  std::string address;  ///< a loopback address: 127.0.0.0/8, ::1 or localhost
  int slots = 1;        ///< ranks the host takes
  int line = 0;         ///< 1-based line of the file
};

/// Parses a hosts file's text (`name` names it in errors). Blank lines and '#' comments (whole
/// lines or the rest of one) are skipped. Throws SpecError "NAME:LINE: ..." for an address that is
/// not a loopback one ("launch runs every rank on this machine; for several machines use mpirun
/// or srun"), a token other than slots=N, slots not a whole number in 1..1024, an address given
/// twice, and a file with no host. Example: "127.0.0.2 slots=2\n127.0.0.3 slots=2\n" -> two hosts
/// of 2 slots.
std::vector<HostSlots> parse_hosts(std::string_view text, const std::string& name);
/// Reads and parses the file at `path`; throws SpecError naming it when it cannot be read.
std::vector<HostSlots> read_hosts_file(const std::string& path);

/// Where `n` ranks go: in blocks, the first host's slots first (rank r on host r / slots), so a
/// host is a node of `local_world_size` = its slots ranks.
struct HostPlacement {
  std::vector<std::string> host_of_rank;  ///< size n
  int local_world_size = 1;
  int hosts_used = 0;
};

/// Places `n` ranks (n >= 1) on `hosts`. Every host used must have the same slots and be filled
/// (table_row_wise's nodes are blocks of one size); throws SpecError naming the file (`name`) and
/// the host's line otherwise, or when the slots of all hosts are fewer than n. Example: hosts of
/// 2, 2, 2 slots and n = 4 -> ranks 0, 1 on the first, 2, 3 on the second, local world size 2.
HostPlacement place_ranks(const std::vector<HostSlots>& hosts, int n, const std::string& name);

}  // namespace embedscope::engine::launch
