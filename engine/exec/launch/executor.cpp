#include "executor.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "embedscope/engine/exec/launch/rank_env.h"
#include "embedscope/engine/sharding/plan_json.h"
#include "embedscope/engine/workload/spec_error.h"
#include "embedscope/sessions/model/metadata_keys.h"
#include "peer_failure.h"

namespace embedscope::engine::launch {

namespace {
constexpr int64_t kReportSlackMs = 1000;  // beyond the collective timeout, for a peer's failure key
constexpr int64_t kCleanupWaitMs = 5000;  // at most, for the peers' done / gone keys at the end
}  // namespace

ProcessExecutor::ProcessExecutor(const WorkloadSpec& spec, const ShardingPlan& plan, const TrainerOptions& options)
    : ThreadedExecutor(spec, plan, options, {options.process.rank}) {}

ProcessExecutor::~ProcessExecutor() = default;

void ProcessExecutor::prepare() {
  const auto& p = sh_.opt.process;
  before_rendezvous();
  store_ = std::make_unique<RunStore>(p.rendezvous, p.run_id);
  RunStore* store = store_.get();
  sh_.rv = Rendezvous::over_store(store_->store(), [store](const std::string& k) { return store->has(k); }, p.host);
  try {  // before the claim: a rank that cannot listen never arrives, and the others name it
    device_ = sh_.rv->device_address();
  } catch (const std::exception& e) {
    throw SpecError(fmt::format("--host {}: rank {} cannot listen there (Gloo's TCP device): {}",
                                p.host.empty() ? "(this host's name)" : p.host, p.rank, e.what()));
  }
  const nlohmann::json document{{"workload", to_json(sh_.spec)}, {"plan", to_json(sh_.spec, sh_.plan)}};
  hs_ = handshake(*store_, p.rank, sh_.spec.devices.count, document,
                  std::chrono::milliseconds(sh_.spec.collective_timeout_ms), sh_.opt.cancel);
  after_rendezvous();
}

void ProcessExecutor::run(sessions::SessionWriter* session, RunResult& result) {
  if (session) {
    const auto& p = sh_.opt.process;
    session->set_metadata(sessions::meta::kProcessRank, std::to_string(p.rank));
    session->set_metadata(sessions::meta::kRendezvous, p.rendezvous);
    session->set_metadata(sessions::meta::kRunId, p.run_id);
    session->set_metadata(sessions::meta::kRunDigest, hs_.digest);
    session->set_metadata(sessions::meta::kClockOffsetToRank0Ns, std::to_string(hs_.clock_offset_ns));
    session->set_metadata(sessions::meta::kClockOffsetUncertaintyNs, std::to_string(hs_.clock_uncertainty_ns));
    session->set_metadata(sessions::meta::kRendezvousNs, std::to_string(hs_.rendezvous_ns));
    session->set_metadata(sessions::meta::kGlooDevice, device_);
    if (p.node >= 0 && p.local_rank >= 0)
      session->set_metadata(sessions::meta::kLaunchNode, fmt::format("{}/{}", p.node, p.local_rank));
  }
  ThreadedExecutor::run(session, result);
  if (result.ended == RunEnd::complete) remove_run_keys();
}

void ProcessExecutor::remove_run_keys() {
  if (!store_) return;
  const int W = sh_.spec.devices.count, me = sh_.opt.process.rank;
  const auto wait = std::chrono::milliseconds(std::min<int64_t>(sh_.spec.collective_timeout_ms, kCleanupWaitMs));
  auto keys_of = [W](const char* kind) {
    std::vector<std::string> k;
    for (int r = 0; r < W; ++r) k.push_back(fmt::format("{}/{}", kind, r));
    return k;
  };
  try {
    // 1. every rank is done: no one reads a data key any more; 2. each removes its own keys
    // (not its done key, which a slower peer may still be polling) and says gone; 3. rank 0,
    // once every rank is gone, removes the done and gone keys. A rank that is missing at 1 or 3
    // leaves the keys where they are (a later run must use another run id, as before).
    store_->set(fmt::format("done/{}", me), "1");
    if (!store_->wait_for(keys_of("done"), wait).empty()) return;
    store_->remove_own_keys({fmt::format("done/{}", me)});
    store_->set(fmt::format("gone/{}", me), "1");
    if (me != 0) return;
    if (!store_->wait_for(keys_of("gone"), wait).empty()) return;
    store_->remove_keys(keys_of("done"));
    store_->remove_keys(keys_of("gone"));
  } catch (const std::exception&) {  // the store went away: nothing to clean
  }
}

void ProcessExecutor::on_rank_failed(int rank) {
  if (failed_set_.exchange(true) || !store_) return;
  // the failure key's value: "1" for a failed collective (a consequence of a peer's failure,
  // or a hang the peers see themselves), else this rank's own error (an OOM, a crash), which
  // the peers name (explain_peer_failure); called inside the rank's catch block
  std::string value = "1";
  try {
    if (auto e = std::current_exception()) std::rethrow_exception(e);
  } catch (const CollectiveError&) {
  } catch (const std::exception& e) {
    value = e.what();
    if (const std::string own = fmt::format("rank {}: ", rank); value.rfind(own, 0) == 0) value.erase(0, own.size());
    // the cause, not its advice: the first sentence, at most 200 characters (the rank's own
    // session has the whole message)
    if (const auto dot = value.find(". "); dot != std::string::npos) value.resize(dot);
    if (value.size() > 200) value = value.substr(0, 197) + "...";
    if (value.empty() || value == "1") value = "an error";
  } catch (...) {
    value = "an unknown error";
  }
  try {
    // the peers whose failure came before this one (explain_peer_failure: a peer whose key comes
    // later never arrived; its collective failed as a consequence of this one, tester49 F-C)
    for (int r = 0; r < sh_.spec.devices.count; ++r)
      if (r != rank && store_->has(fmt::format("failed/{}", r))) failed_before_.insert(r);
    store_->set(fmt::format("failed/{}", rank), value);
  } catch (const std::exception&) {  // the store went away: the peers name this rank as gone
  }
}

std::string ProcessExecutor::explain_peer_failure(int rank, const CollectiveError& e) {
  if (!store_) return "";
  // Peers still blocked on a transfer from this rank (a ring's next hop, a pairwise exchange)
  // would otherwise wait out their own collective timeout before they set their failure key,
  // and this loop would wait for it: close this rank's connections first, so that every live
  // peer fails now and the wait below ends as soon as the launcher's word on the dead rank is in.
  for (size_t i = 0; i < local_ranks_.size(); ++i)
    if (local_ranks_[i] == rank && i < ranks_.size()) ranks_[i]->close_connections();
  const int W = sh_.spec.devices.count;
  // a peer whose own collective times out reports at most the timeout after this failure
  const int64_t wait_ms = sh_.spec.collective_timeout_ms + kReportSlackMs;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  PeerFailureFacts facts;
  facts.missing = e.missing_ranks;
  facts.timed_out = e.timed_out;
  facts.timeout_ms = sh_.spec.collective_timeout_ms;
  facts.wait_ms = wait_ms;
  facts.failed_before = failed_before_;
  std::vector<int> open;  // ranks with neither a failure key nor a death key yet
  for (int r = 0; r < W; ++r)
    if (r != rank) open.push_back(r);
  for (;;) {
    std::vector<int> still;
    for (int r : open) {
      if (const std::string k = fmt::format("failed/{}", r); store_->has(k)) {
        facts.failed.emplace_back(r, store_->get(k));
        continue;
      }
      if (const std::string k = fmt::format("dead/{}", r); store_->has(k)) {
        facts.died.emplace_back(r, store_->get(k));
        continue;
      }
      still.push_back(r);
    }
    open = std::move(still);
    if (open.empty() || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  facts.silent = std::move(open);
  return peer_failure_text(facts);
}

void report_refused_rank(const std::string& url, const std::string& run_id, int rank, const std::string& reason) {
  RunStore store(url, run_id);
  // a claimed rank: this process lost a race for it (the holder runs on), or it passed the
  // claim and the handshake itself refused (the peers learn that there)
  if (store.has(fmt::format("claim/{}", rank))) return;
  const std::string key = fmt::format("refused/{}", rank);
  if (!store.has(key)) store.set(key, refusal_value(reason));
}

void report_dead_rank(const std::string& url, const std::string& run_id, int rank, const std::string& how) {
  RunStore store(url, run_id);
  const std::string key = fmt::format("dead/{}", rank);
  if (!store.has(key)) store.set(key, how);
  // the first death ends the peers' waits on the store at once (store.h: a rank still connecting
  // waited its whole 30 s for the entries of a peer launch had already reaped, tester62c F4)
  if (!store.has(kFirstDeathKey)) store.set(kFirstDeathKey, fmt::format("rank {} {}", rank, how));
}

}  // namespace embedscope::engine::launch
