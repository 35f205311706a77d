// A rank's session records. The step's records (its row, load counters and id-histogram
// buckets) and the embedding backward's distinct-row counts on the device path, read without a
// wait of their own (rank.h DeferredCounts): the copy back is queued once every shard's
// accumulation is queued and taken where the host waits for the device anyway, and the step's
// records wait for them when the step ended first - so the values in the session are the same
// as with the read in the step, one step later. The memory counters, allocator history and
// snapshots of a step (or of a failed run's last step), and the flight recorder's dumps.
#include "rank.h"

namespace embedscope::engine::threaded {

void Rank::defer_counts(DeviceBuffer<int64_t>& counts, std::vector<std::tuple<size_t, int, int>> shards) {
  take_deferred_counts();  // the last step's: here after this step's waits (the loss at least), so no wait
  const auto bytes = static_cast<int64_t>(counts.size() * sizeof(int64_t));
  gpu_->defer_to_host(counts.device_data(), bytes);
  if (measured_) detail::add_sparse_grad_copies({0, 1, 0, bytes});
  for (const auto& [i, table, shard] : shards) load_of(table, shard);  // the counters exist from now, as before
  deferred_counts_ = DeferredCounts{step_, measured_, std::move(shards), counts.size(), std::nullopt};
}

void Rank::take_deferred_counts() {
  if (!deferred_counts_) return;
  std::vector<int64_t> n(deferred_counts_->num_counts, 0);
  gpu_->take_deferred(n.data());  // a device that fails here leaves the records held (failure path)
  DeferredCounts d = std::move(*deferred_counts_);
  deferred_counts_.reset();
  for (const auto& [i, table, shard] : d.shards) {
    const int64_t u = n[i];
    if (d.measured) summary.unique_ids += u;
    if (d.records) {
      for (auto& c : d.records->load)
        if (c.step == d.step && c.table == table && c.shard == shard) c.unique_ids = u;
    } else if (d.step == step_) {  // the step is still running: its counters are live
      if (auto it = load_.find({table, shard}); it != load_.end()) it->second.unique_ids = u;
    }
  }
  if (d.records) records_ready_.push_back(std::move(*d.records));
}

void Rank::write_ready_records() {
  if (sh_.session)
    for (StepRecords& r : records_ready_) sh_.session->add_step_records(r.row, r.load, r.histogram);
  records_ready_.clear();
}

void Rank::finish_deferred_counts() {
  take_deferred_counts();
  write_ready_records();
}

void Rank::write_step_records(StepRecords rec) {
  write_ready_records();
  if (deferred_counts_ && deferred_counts_->step == rec.row.step && !deferred_counts_->records) {
    deferred_counts_->records = std::move(rec);
    return;
  }
  sh_.session->add_step_records(rec.row, rec.load, rec.histogram);
}

void Rank::write_held_records_at_failure() noexcept {
  try {
    if (deferred_counts_) {
      try {
        take_deferred_counts();
      } catch (...) {  // the device failed: the held records keep 0 for its counts
        if (deferred_counts_ && deferred_counts_->records) records_ready_.push_back(std::move(*deferred_counts_->records));
        deferred_counts_.reset();
      }
    }
    write_ready_records();
  } catch (...) {  // the session cannot be written either: what was written stays
  }
}

void Rank::record_counters(int64_t step) {
  sh_.session->add_memory_events(mem_events_);
  mem_events_.clear();
  sh_.session->add_memory(arena_counter(arena_, me_, step));
  memory_step_ = step;
}

void Rank::record_memory(int64_t step, const char* reason, bool force) {
  if (!sh_.session) return;
  record_counters(step);
  uint64_t h = 0;
  sessions::MemorySnapshot sn = arena_snapshot(arena_, me_, step, sh_.tracer.now_ns(), reason, h);
  if (!force && h == last_layout_) return;  // steady state: the same layout every step
  last_layout_ = h;
  sh_.session->add_snapshot(std::move(sn));
}

void Rank::record_memory_at_failure() {
  if (sh_.session && memory_step_ != current_step_.load()) record_counters(current_step_.load());
}

void Rank::dump_flight_recorder(const std::string& reason) {
  if (!sh_.session || flight_.recorded() == 0) return;
  auto rows = flight_.dump(flight_dumps_.fetch_add(1), reason);
  sh_.session->add_flight_records(std::move(rows));
}

}  // namespace embedscope::engine::threaded
