// The emulated network's floor under a collective (cost/network_floor.h).
#include "embedscope/engine/cost/network_floor.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "embedscope/engine/comm/gloo_process_group.h"

namespace embedscope::engine {

namespace {

// Whether the Gloo emulation paces the call: every collective except the split-size check of an
// all-to-all or reduce-scatter (ProcessGroup::all_to_all_impl passes it paced = false).
bool nf_paced(const CollectiveCall& c) { return !is_split_check(c); }

// Member c.group_rank's bytes sent to / received from each member (group order, its own 0), as
// ProcessGroup::run fills them: the per-peer splits; an all-reduce as Gloo's ring does it (its
// bytes_sent() to the next member, bytes_received() from the one before).
void nf_member_bytes(const CollectiveCall& c, std::vector<int64_t>& sent, std::vector<int64_t>& received) {
  sent.assign(c.peers.size(), 0);
  received.assign(c.peers.size(), 0);
  if (c.kind == CollectiveKind::all_reduce) {
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
  if (static_cast<size_t>(c.group_rank) < sent.size())
    sent[static_cast<size_t>(c.group_rank)] = received[static_cast<size_t>(c.group_rank)] = 0;
}

// comm/gloo_process_group.h emulated_delivery_ns to every member, in O(n log n) rather than its
// O(n^2): per link class the sender's flows sorted, so that the bytes pushed when the flow of s
// bytes ends, sum over its flows k of that class of min(s_k, s), is a prefix sum plus s times
// the number of larger flows. Equal to emulated_delivery_ns (tests/engine/cost/network_floor_test.cpp).
std::vector<int64_t> nf_deliveries(const NetworkSpec& net, int gpus_per_node, std::span<const int> peers, int me,
                                   std::span<const int64_t> sent) {
  const size_t n = peers.size();
  std::vector<int64_t> out(n, 0);
  const int lws = std::max(1, gpus_per_node);
  const int my_node = peers[static_cast<size_t>(me)] / lws;
  std::vector<int64_t> flows[2];  // [0] intra-node, [1] inter-node: the sender's flow sizes
  for (size_t k = 0; k < n; ++k)
    if (static_cast<int>(k) != me) flows[peers[k] / lws == my_node ? 0 : 1].push_back(sent[k]);
  std::vector<int64_t> prefix[2];
  for (int c = 0; c < 2; ++c) {
    std::sort(flows[c].begin(), flows[c].end());
    prefix[c].assign(flows[c].size() + 1, 0);
    for (size_t i = 0; i < flows[c].size(); ++i) prefix[c][i + 1] = prefix[c][i] + flows[c][i];
  }
  const LinkSpec* link[2] = {&net.intra_node, &net.inter_node};
  for (size_t to = 0; to < n; ++to) {
    if (static_cast<int>(to) == me || sent[to] <= 0) continue;
    const int c = peers[to] / lws == my_node ? 0 : 1;
    const auto upto = static_cast<size_t>(std::upper_bound(flows[c].begin(), flows[c].end(), sent[to]) - flows[c].begin());
    const int64_t pushed = prefix[c][upto] + sent[to] * static_cast<int64_t>(flows[c].size() - upto);
    out[to] = emulated_transfer_ns(*link[c], pushed);
  }
  return out;
}

}  // namespace

int64_t emulated_floor_ns(const CollectiveCall& c, int gpus_per_node, const NetworkSpec& net) {
  if (!net.limited() || !nf_paced(c)) return 0;
  std::vector<int64_t> sent, received;
  nf_member_bytes(c, sent, received);
  return emulated_collective_ns(net, gpus_per_node, c.peers, c.group_rank, sent, received);
}

std::vector<int64_t> emulated_member_floors_ns(std::span<const CollectiveCall* const> calls, int gpus_per_node,
                                               const NetworkSpec& net) {
  const size_t n = calls.size();
  for (size_t j = 0; j < n; ++j) {
    if (calls[j] == nullptr)
      throw std::invalid_argument(fmt::format("emulated_member_floors_ns: member {} of {} has no call", j, n));
    if (calls[j]->group_rank != static_cast<int>(j) || calls[j]->peers.size() != n || calls[j]->peers != calls[0]->peers)
      throw std::invalid_argument(fmt::format("emulated_member_floors_ns: member {}'s call '{}' is group rank {} of {} "
                                              "members, not member {} of the {} given",
                                              j, calls[j]->name, calls[j]->group_rank, calls[j]->peers.size(), j, n));
  }
  std::vector<int64_t> floors(n, 0);
  if (n <= 1 || !net.limited() || !nf_paced(*calls[0])) return floors;
  // every member's figures as it publishes them in the Gloo emulation (EmulatedMember), all
  // arriving at 0: the release is then the floor from the effective start
  std::vector<EmulatedMember> members(n);
  std::vector<int64_t> sent, received;
  for (size_t j = 0; j < n; ++j) {
    nf_member_bytes(*calls[j], sent, received);
    members[j].port_ns = emulated_collective_ns(net, gpus_per_node, calls[j]->peers, static_cast<int>(j), sent, received);
    members[j].deliver_ns = nf_deliveries(net, gpus_per_node, calls[j]->peers, static_cast<int>(j), sent);
  }
  // the ring as ProcessGroup::all_reduce_impl: ring_bytes > 0 (an empty all-reduce is paced as
  // the others, by each member's own port: its latency)
  const bool ring = calls[0]->kind == CollectiveKind::all_reduce && calls[0]->bytes_sent() > 0;
  for (size_t m = 0; m < n; ++m) floors[m] = emulated_release_ns(ring, static_cast<int>(m), members);
  return floors;
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
