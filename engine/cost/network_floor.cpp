// The emulated network's floor under a collective (cost/network_floor.h).
#include "embedscope/engine/cost/network_floor.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "embedscope/engine/comm/gloo_process_group.h"

namespace embedscope::engine {

int64_t emulated_floor_ns(const CollectiveCall& c, int gpus_per_node, const NetworkSpec& net) {
  if (!net.limited()) return 0;
  std::vector<int64_t> sent(c.peers.size(), 0), received(c.peers.size(), 0);
  if (c.kind == CollectiveKind::all_reduce) {  // a ring: to the next member, from the one before
    const int n = static_cast<int>(c.peers.size());
    if (n > 1) {
      sent[static_cast<size_t>((c.group_rank + 1) % n)] = c.bytes_sent();
      received[static_cast<size_t>((c.group_rank + n - 1) % n)] = c.bytes_received();
    }
  } else {
    for (size_t j = 0; j < c.peers.size(); ++j) {
      if (j < c.send_elements.size()) sent[j] = c.send_elements[j] * c.elem_bytes;
      if (j < c.recv_elements.size()) received[j] = c.recv_elements[j] * c.elem_bytes;
    }
  }
  return emulated_collective_ns(net, gpus_per_node, c.peers, c.group_rank, sent, received);
}

int64_t emulated_member_floor_ns(double intra_bytes, double inter_bytes, bool has_intra, bool has_inter,
                                 const NetworkSpec& net) {
  if (!net.limited()) return 0;
  int64_t t = 0;
  if (has_intra) t = std::max(t, emulated_transfer_ns(net.intra_node, std::llround(std::max(0.0, intra_bytes))));
  if (has_inter) t = std::max(t, emulated_transfer_ns(net.inter_node, std::llround(std::max(0.0, inter_bytes))));
  return t;
}

}  // namespace embedscope::engine
