#pragma once
// Sessions and widgets shared by the workbench's tests (ui_test): small session files written
// to the temp folder, and a timeline showing one of them at 1 px per us.
#include <unistd.h>

#include <QPoint>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "embedscope/sessions/importers/torch_memory_snapshot/import.h"
#include "embedscope/sessions/store/session.h"
#include "support/step_sessions.h"
#include "timeline/timeline_widget.h"

namespace embedscope::ui::fixtures {

using test_support::step_session;

inline sessions::OpRecord op(int64_t s, int64_t e, sessions::OpCategory c = sessions::OpCategory::lookup) {
  sessions::OpRecord o;
  o.start_ns = s;
  o.end_ns = e;
  o.category = c;
  return o;
}

/// The committed PyTorch memory snapshot `fixture` (tests/data/memory_snapshots) imported into
/// the temp folder as es_<tag>_<pid><fixture>.db (replaced) and opened. Throws what the importer
/// (ImportError) or the reader (SessionError) throws.
inline std::shared_ptr<const sessions::SessionReader> imported_snapshot(const std::string& fixture, const std::string& tag) {
  const auto path = std::filesystem::temp_directory_path() / ("es_" + tag + "_" + std::to_string(getpid()) + fixture + ".db");
  std::filesystem::remove(path);
  {
    sessions::SessionWriter w(path.string(), true);
    sessions::torch_snapshot::import_torch_memory_snapshot(std::string(EMBEDSCOPE_TEST_DATA) + "/memory_snapshots/" + fixture, w);
    w.close("complete");
  }
  return std::make_shared<const sessions::SessionReader>(path.string());
}

// Two ranks; rank 0 computes [100, 400) us and communicates [500, 900) us; rank 1 idles.
inline std::string fixture_session() {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  sessions::SessionWriter w(path.string());
  w.set_metadata("world_size", "2");
  w.set_metadata("samples_per_step", "8");
  w.set_metadata("workload_name", "fixture");
  for (int r = 0; r < 2; ++r) {
    w.add_lane({r, 0, "compute", "thread"});
    w.add_lane({r, 1, "comm", "thread"});
    w.add_step({0, r, 0, 1'000'000, 0.5, 0, 0});
  }
  w.add_ops({{0, sessions::Lane::compute, sessions::OpCategory::lookup, "lookup", 0, 100'000, 400'000, 0, 0},
             {0, sessions::Lane::comm, sessions::OpCategory::comm, "output_dist/all_to_all", 0, 500'000, 900'000, 64, 3}});
  w.add_load({0, 0, 0, 0, 10, 5, 80, 256, 1000});
  w.close("complete");
  return path.string();
}

// Two ranks, two steps ([0, 500) and [500, 1000) us), ops in us:
//   row 0 rank 0 compute: lookup [100, 200), dense [300, 500), lookup [600, 700)
//   row 1 rank 0 comm:    output_dist/all_to_all [200, 300) 100 B seq 1, grad_dist/all_to_all [700, 800) 50 B seq 2
//   row 2 rank 1 compute: lookup [150, 250), dense [350, 450)
//   row 3 rank 1 comm:    output_dist/all_to_all [250, 320) 100 B seq 1
inline std::string busy_session() {
  const auto path = std::filesystem::temp_directory_path() / ("es_ui_busy_" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  sessions::SessionWriter w(path.string());
  using sessions::Lane;
  using sessions::OpCategory;
  for (int r = 0; r < 2; ++r) {
    w.add_lane({r, 0, "compute", "thread"});
    w.add_lane({r, 1, "comm", "thread"});
    w.add_step({0, r, 0, 500'000, 0.5, 0, 0});
    w.add_step({1, r, 500'000, 1'000'000, 0.4, 0, 0});
  }
  w.add_ops({{0, Lane::compute, OpCategory::lookup, "lookup", 0, 100'000, 200'000, 0, 0},
             {0, Lane::compute, OpCategory::dense, "dense", 0, 300'000, 500'000, 0, 0},
             {0, Lane::compute, OpCategory::lookup, "lookup", 1, 600'000, 700'000, 0, 0},
             {0, Lane::comm, OpCategory::comm, "output_dist/all_to_all", 0, 200'000, 300'000, 100, 1},
             {0, Lane::comm, OpCategory::comm, "grad_dist/all_to_all", 1, 700'000, 800'000, 50, 2},
             {1, Lane::compute, OpCategory::lookup, "lookup", 0, 150'000, 250'000, 0, 0},
             {1, Lane::compute, OpCategory::dense, "dense", 0, 350'000, 450'000, 0, 0},
             {1, Lane::comm, OpCategory::comm, "output_dist/all_to_all", 0, 250'000, 320'000, 100, 1}});
  sessions::CollectiveRecord c;
  c.rank = 0;
  c.op = "all_to_all";
  c.name = "output_dist/all_to_all";
  c.group = "world";
  c.sequence = 1;
  c.dtype = "float32";
  c.start_ns = 200'000;
  c.end_ns = 300'000;
  c.bytes_sent = 48;
  c.bytes_received = 52;
  c.peers = {0, 1};
  c.send_elements = {3, 12};
  c.recv_elements = {3, 13};
  w.add_collective(c);
  w.close("complete");
  return path.string();
}

// A widget of 1000 px of time showing [0, 1000) us: 1 px per us.
inline std::unique_ptr<TimelineWidget> busy_timeline() {
  auto w = std::make_unique<TimelineWidget>(std::make_shared<const sessions::SessionReader>(busy_session()));
  w->resize(TimelineWidget::kGutter + 1000, 200);
  w->scale().set_width(1000);  // the resize event of a hidden widget comes later
  w->scale().show(0, 1'000'000);
  return w;
}
inline QPoint at_us(const TimelineWidget& w, int us, size_t row) {
  return {TimelineWidget::kGutter + us, w.row_y(row) + TimelineWidget::kRowHeight / 2};
}
inline std::shared_ptr<const sessions::SessionReader> open_reader(const std::string& path) {
  return std::make_shared<const sessions::SessionReader>(path);
}

inline std::filesystem::path scratch(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("es_ui_" + std::to_string(getpid()) + "_" + name);
}

}  // namespace embedscope::ui::fixtures
