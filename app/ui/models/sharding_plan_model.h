#pragma once
// The sharding plan of a session as a tree, like TorchRec's planner statistics: one row per
// rank (the shards it holds by type, its planned and measured memory, the ids it looked up and
// the bytes its lookups took in and gave out; an lm_embedding rank's: its collectives' bytes
// received and sent), with one child row per shard (table, sharding
// type, rows x cols at its offset, its weight bytes and its own load). A run with live
// rebalances shows the plan it ended with (the load view shows the plan over time), a rank's
// shards of earlier plans that served it in earlier steps as rows of their own ("table_wise #0
// (until step 2)", each load counter credited to the shard that served its step: tester49 F3),
// a rank's hot-row replica of a table as a row "hot-row replica" (tester49 F8a), and each
// rank's measured peak is compared with the estimate of the plan in force when the peak
// happened (core/plan_history.h), not with the first plan's. A shard in host memory
// (placement host / host_cached, model/host_cache.h) counts its device cache as its device
// bytes (0 under host) and shows its host bytes and cache hit rate beside them, on its row and
// summed on its rank's. Sources: the session's tables `shards` and `plan_changes`,
// workload_json metadata, load_counters (measured steps), memory_counters and the per-rank
// peak allocated memory of sessions::analyze (sessions/schema/FORMAT.md).

#include <QAbstractItemModel>
#include <QString>

#include <string>
#include <vector>

#include "embedscope/sessions/analysis/analysis.h"
#include "embedscope/sessions/model/hot_row_replica.h"
#include "embedscope/sessions/store/session.h"

namespace embedscope::engine {
struct WorkloadSpec;
}

namespace embedscope::ui {

class ShardingPlanModel : public QAbstractItemModel {
  Q_OBJECT

 public:
  enum Column { Name, Sharding, Size, PlannedMemory, PeakMemory, IdsLookedUp, BytesIn, BytesOut, ColumnCount };

  struct ShardRow {
    std::string table, type;  ///< table name, TorchRec sharding type
    int shard = 0;            ///< index into the table's shards in the plan
    int64_t num_rows = 0, num_cols = 0, row_offset = 0, col_offset = 0;
    int64_t weight_bytes = 0;  ///< device bytes of its rows: num_rows x num_cols x 4 (fp32); 0 in host memory
    int64_t ids = 0, bytes_in = 0, bytes_out = 0;  ///< load counters, measured steps
    /// The table's placement ("device", "host", "host_cached"; the workload's TableSpec::placement).
    std::string placement = "device";
    /// host / host_cached: the device cache (cache_device_bytes; 0 under host) and the host
    /// memory (fp32 rows and optimizer state, the cache's row -> slot index and lfu's counts, as
    /// the run's table storage counts them), bytes; 0 on the device.
    int64_t cache_bytes = 0, host_bytes = 0;
    /// host / host_cached: the load counters' distinct rows of lookups found / not found in
    /// the cache, measured steps.
    int64_t cache_hits = 0, cache_misses = 0;
    /// placement host or host_cached.
    bool in_host_memory() const { return placement != "device"; }
    /// A shard of an earlier plan that a live rebalance replaced or moved off this rank (a
    /// table_wise shard before its table was split row_wise, or before it moved): the ids it
    /// looked up in the steps it served stay its own (tester49 F3), on the rank that served
    /// them; no device bytes now. The last measured step it served; -1: a shard of the plan shown.
    int64_t served_until = -1;
    bool former() const { return served_until >= 0; }
    /// The rank's replica of the table's hot rows (workload hot_rows, shard
    /// sessions::kHotRowReplicaShard): the ids of its own batch it looked up there (tester49
    /// F8a); num_rows x num_cols = hot rows x dim, its fp32 weight bytes.
    bool hot_row_replica() const { return shard == sessions::kHotRowReplicaShard; }
  };
  struct RankRow {
    int rank = 0;
    std::vector<ShardRow> shards;
    /// engine::estimate_memory total of the plan shown (the final one); an lm_embedding session's:
    /// engine::estimate_lm_memory's peak_allocated_bytes (the replay through the rank's caching
    /// allocator); -1 when unknown
    int64_t planned_bytes = -1;
    int64_t peak_bytes = -1;     ///< measured peak allocated; -1 when the session has none
    /// The estimate the peak is compared with: the plan in force when it happened (during a live
    /// rebalance's move: the plan before it plus the move's new shards and all-to-all buffers,
    /// rebalance::move_transient_bytes); -1 when unknown (the plan changed and the session has no
    /// memory counters to say when the peak happened: no comparison).
    int64_t peak_planned_bytes = -1;
    /// When the peak happened and under which plan, for the tooltip: "step 4, under the plan in
    /// force from step 3", "step 2 or the live rebalance's move after it (...)"; "" for a run
    /// whose plan never changed.
    std::string peak_when;
    /// Beside the peak in its cell when it did not happen under the plan shown: "at the move
    /// after step 2", "under an earlier plan"; empty otherwise.
    QString peak_note;
    /// ids: every shard row's, former and replica included; bytes_in / bytes_out: likewise the
    /// lookups' (ids and lengths received, pooled rows produced), but for an lm_embedding session
    /// the rank's collectives' bytes received / sent over the measured steps
    /// (sessions::RankStats::bytes_received / bytes_sent, as `stats` and `run`'s rank table).
    int64_t ids = 0, bytes_in = 0, bytes_out = 0;
  };

  /// "80.0%" (hits / (hits + misses)) for a host_cached shard or rank with lookups, else "-".
  static QString hit_rate_text(int64_t hits, int64_t misses, bool cached);

  /// A session without a plan gives an empty model. An lm_embedding session's bytes columns are
  /// headed "bytes received" / "bytes sent" and hold its ranks' collective bytes, "13.1 KiB (6.6
  /// KiB a step)" (Qt::UserRole: the whole bytes), its shard rows none; the header's tooltip says
  /// what the columns count. Size column of a rank: "weights X" and,
  /// when it holds shards in host memory, ", device cache Y, host Z, hit rate H" (its
  /// host_cached shards' hits over their lookups); planned memory of a shard: its device bytes.
  ShardingPlanModel(const sessions::SessionReader& session, const sessions::RunStats& stats, QObject* parent = nullptr);
  const std::vector<RankRow>& ranks() const { return ranks_; }
  /// The ranks whose measured peak allocated memory exceeds the estimate of the plan in force
  /// when it happened (RankRow::peak_planned_bytes: the plan under-estimated them), ascending.
  /// Their peak cell reads "746.3 MiB (+1.0 MiB over the plan)" in red, with the figures in its
  /// tooltip.
  /// A peak above its estimate by at most one 512 B allocator block or 0.1% of it, whichever is
  /// larger (sessions/analysis/estimate_rounding.h): the estimate's rounding (one block over
  /// 538.3 MiB, tester46 F9; over 268.0 KiB, 0.19 %, tester48 F14.9), not an under-estimate -
  /// left out of under_planned() and its red line, said by within_rounding_text(). A 4.9 MiB
  /// excess over 2.0 GiB (0.24%, tester38 #10) stays red.
  std::vector<int> under_planned() const;
  /// "the measured peak is the plan's to within its rounding (at most one 512 B allocator block or
  /// 0.1% above it, whichever is larger): rank 2
  /// planned 538.3 MiB, peak 538.3 MiB (+512 B)", or "" when no rank is so (Summary, plain text).
  QString within_rounding_text() const;
  /// The Summary's red line for under_planned() ("" when none): per rank planned, measured peak,
  /// the excess in bytes and percent of the plan (tester38 #10: "planned 2.0 GiB, peak 2.0 GiB"
  /// hid a 4.9 MiB excess), and for a cuda session what estimates before the dense part's device
  /// copies were counted left out there; for an lm_embedding session that its estimate counts
  /// requested bytes, not the caching allocator's rounding of large blocks.
  QString under_planned_text() const;
  /// Live rebalances that changed the plan (plan_changes at distinct steps); 0: the plan shown
  /// is the one the run started with.
  int plan_changes() const { return plan_changes_; }
  /// An lm_embedding session: its bytes columns are the ranks' collectives' (received, sent).
  bool lm() const { return lm_; }

  QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
  QModelIndex parent(const QModelIndex& child) const override;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  /// DisplayRole: text; Qt::UserRole: the raw number (bytes, ids) of numeric columns.
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  /// Fills each rank's peak_planned_bytes and peak_when: the plan in force at the moment of its
  /// peak (core/plan_history.h) and its estimate (plus the move's transient bytes for a peak
  /// during a live rebalance's move). Without changes: the plan shown.
  void compare_peaks(const engine::WorkloadSpec& spec, const std::vector<sessions::ShardRecord>& initial,
                     const std::vector<sessions::PlanChangeRecord>& changes,
                     const std::vector<sessions::MemoryCounter>& counters, int world);
  /// An lm_embedding session (workload_json "model": "lm_embedding"): fills every rank's planned
  /// and compared estimate with engine::estimate_lm_memory's peak_allocated_bytes (tester43 F2;
  /// lm45: the allocator replay, no longer the sum of requested bytes; unknown when the
  /// workload no longer parses) and returns true; false for any other workload.
  bool fill_lm_estimate(const std::string& workload_json);
  std::vector<RankRow> ranks_;
  int plan_changes_ = 0;
  static bool over_within_rounding(const RankRow& r);  // under_planned()'s tolerance
  static bool over_the_plan(const RankRow& r);          // above the estimate beyond it
  bool lm_ = false;  // an lm_embedding session (under_planned_text, the bytes columns)
  int64_t lm_steps_ = 0;  // an lm_embedding session's counted steps (its bytes a step)
  bool cuda_ = false;  // the session's backend is cuda (under_planned_text)
};

}  // namespace embedscope::ui
