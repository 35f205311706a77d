#include "embedscope/sessions/importers/torch_memory_snapshot/snapshot.h"

#include <gtest/gtest.h>

#include <string>

#include "fixtures.h"

using namespace embedscope::sessions::torch_snapshot;
using embedscope::sessions::pickle::Value;
using embedscope::test::snapshot_expected;
using embedscope::test::snapshot_fixture;

TEST(TorchSnapshot, SegmentsBlocksAndTracesOfEveryFixtureMatchTheGenerator) {
  for (const char* name : {"training_p2.pickle", "training_p4.pickle", "training_p5.pickle", "training_p4.pickle.gz",
                           "high_address_p4.pickle", "midway_p4.pickle", "oom_p5.pickle"}) {
    SCOPED_TRACE(name);
    const MemorySnapshotFile s = load_snapshot(snapshot_fixture(name));
    const auto& e = snapshot_expected()[name];
    ASSERT_EQ(s.segments.size(), e["segments"].size());
    size_t blocks = 0, pending = 0;
    for (size_t i = 0; i < s.segments.size(); ++i) {
      const Segment& g = s.segments[i];
      const auto& x = e["segments"][i];
      EXPECT_EQ(std::to_string(g.address), x["address"].get<std::string>());
      EXPECT_EQ(g.total_size, x["total_size"].get<int64_t>());
      EXPECT_EQ(g.allocated_size, x["allocated_size"].get<int64_t>());
      EXPECT_EQ(g.active_size, x["active_size"].get<int64_t>());
      EXPECT_EQ(g.device, x["device"].get<int64_t>());
      EXPECT_EQ(g.stream, x["stream"].get<int64_t>());
      EXPECT_EQ(g.small, x["segment_type"].get<std::string>() == "small");
      ASSERT_EQ(g.blocks.size(), x["blocks"].get<size_t>());
      int64_t covered = 0;
      for (const auto& b : g.blocks) {
        EXPECT_EQ(b.address, g.address + static_cast<uint64_t>(covered));  // blocks tile the segment
        covered += b.size;
        pending += b.state == BlockState::active_pending_free;
      }
      EXPECT_EQ(covered, g.total_size);
      blocks += g.blocks.size();
    }
    EXPECT_EQ(blocks, e["blocks"].get<size_t>());
    EXPECT_EQ(pending, e["pending_free_blocks"].get<size_t>());
    ASSERT_EQ(s.device_traces.size(), e["trace_entries"].size());
    std::map<std::string, int64_t> actions;
    for (size_t d = 0; d < s.device_traces.size(); ++d) {
      EXPECT_EQ(s.device_traces[d].size(), e["trace_entries"][d].get<size_t>());
      for (const auto& t : s.device_traces[d]) ++actions[to_string(t.action)];
    }
    for (const auto& [k, v] : e["actions"].items()) EXPECT_EQ(actions[k], v.get<int64_t>()) << k;
    EXPECT_EQ(s.frames.size(), e["distinct_frames"].get<size_t>());
    EXPECT_TRUE(s.stacks[0].empty());
    EXPECT_TRUE(s.settings.present);
    EXPECT_EQ(s.settings.max_split_size, 0);  // -1 in the file: unlimited
    EXPECT_FALSE(s.settings.expandable_segments);
    ASSERT_EQ(s.settings.roundup_power2_divisions.size(), 3u);
    EXPECT_EQ(s.settings.extra.size(), 3u);  // pinned_num_register_threads, release_lock_on_cudamalloc, pinned_use_cuda_host_register
    EXPECT_EQ(s.external_annotations.size(), 1u);
  }
}

TEST(TorchSnapshot, TraceEntriesKeepAddressesStacksAndTheOomFields) {
  const MemorySnapshotFile s = load_snapshot(snapshot_fixture("oom_p5.pickle"));
  const auto& trace = s.device_traces[0];
  const TraceEntry& first = trace.front();
  EXPECT_EQ(first.action, TraceAction::segment_alloc);
  EXPECT_EQ(first.addr, 0x7F3A00000000u);
  EXPECT_EQ(first.size, 20 << 20);  // 3 MiB -> a 20 MiB large segment
  EXPECT_EQ(first.time_us, 1000007);
  ASSERT_GT(first.stack, 0);
  ASSERT_EQ(s.stacks[first.stack].size(), 2u);
  EXPECT_EQ(s.frames[s.stacks[first.stack][0]].name, "init_weights");
  EXPECT_EQ(s.frames[s.stacks[first.stack][0]].line, 5);
  EXPECT_EQ(s.frames[s.stacks[first.stack][1]].filename, "torch/nn/modules/module.py");
  const TraceEntry& oom = trace.back();
  EXPECT_EQ(oom.action, TraceAction::oom);
  const auto& e = snapshot_expected()["oom_p5.pickle"];
  EXPECT_EQ(oom.addr, e["capacity"].get<uint64_t>() - e["reserved_at_dump"][0].get<uint64_t>());  // device_free
  EXPECT_EQ(oom.size, 200 << 20);
  const MemorySnapshotFile high = load_snapshot(snapshot_fixture("high_address_p4.pickle"));
  EXPECT_EQ(high.segments[0].address, 0xFFFF800000000000u);
  EXPECT_EQ(high.device_traces[0][0].addr, 0xFFFF800000000000u);
}

TEST(TorchSnapshot, BadStructureNamesTheKeyPath) {
  auto error = [](const Value& v) {
    try {
      parse_snapshot(v, "x.pickle");
    } catch (const SnapshotError& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  auto seg = [](Value blocks_size) {
    return Value::dict({{Value::string("address"), Value::integer(4096)},
                        {Value::string("total_size"), Value::integer(1024)},
                        {Value::string("blocks"),
                         Value::list({Value::dict({{Value::string("size"), blocks_size},
                                                   {Value::string("state"), Value::string("inactive")}})})}});
  };
  EXPECT_EQ(error(Value::list()), "x.pickle: a memory snapshot is a dict, got list");
  EXPECT_EQ(error(Value::dict()), "x.pickle: segments: missing: a memory snapshot has a list of segments");
  EXPECT_EQ(error(Value::dict({{Value::string("segments"), Value::list({seg(Value::integer(1024)), seg(Value::string("big"))})}})),
            "x.pickle: segments[1].blocks[0].size: must be an int, got str");
  EXPECT_EQ(error(Value::dict({{Value::string("segments"), Value::list({Value::dict({{Value::string("address"), Value::integer(1)}})})}})),
            "x.pickle: segments[0].total_size: missing");
  EXPECT_EQ(error(Value::dict({{Value::string("segments"), Value::list()},
                               {Value::string("device_traces"),
                                Value::list({Value::list({Value::dict({{Value::string("action"), Value::string("grab")}})})})}})),
            "x.pickle: device_traces[0][0].action: unknown action \"grab\" (alloc, free_requested, free_completed, "
            "segment_alloc, segment_free, segment_map, segment_unmap, oom, snapshot, annotate)");
  // A device index past any real one (PyTorch's are int8_t) made device_count() walk 2^62 devices
  // in the import and in replay-memory, and INT64_MAX + 1 overflowed.
  auto on_device = [](int64_t device) {
    return Value::dict({{Value::string("segments"),
                         Value::list({Value::dict({{Value::string("device"), Value::integer(device)},
                                                   {Value::string("address"), Value::integer(4096)},
                                                   {Value::string("total_size"), Value::integer(0)},
                                                   {Value::string("blocks"), Value::list()}})})}});
  };
  EXPECT_EQ(error(on_device(int64_t{1} << 62)),
            "x.pickle: segments[0].device: device 4611686018427387904 is not a CUDA device index (PyTorch's are below "
            "128; at most 1023 here)");
  EXPECT_EQ(error(on_device(1024)).find("segments[0].device: device 1024 is not"), 10u);
  EXPECT_EQ(parse_snapshot(on_device(1023), "x.pickle").device_count(), 1024);
  // unknown keys are kept; optional keys may be missing; the docstring's state spelling reads
  const Value ok = Value::dict(
      {{Value::string("segments"),
        Value::list({Value::dict({{Value::string("address"), Value::integer(4096)},
                                  {Value::string("total_size"), Value::integer(1024)},
                                  {Value::string("future_key"), Value::integer(7)},
                                  {Value::string("blocks"),
                                   Value::list({Value::dict({{Value::string("size"), Value::integer(1024)},
                                                             {Value::string("state"), Value::string("active_awaiting_free")}})})}})})},
       {Value::string("new_top_level"), Value::none()}});
  const MemorySnapshotFile s = parse_snapshot(ok, "x.pickle");
  ASSERT_EQ(s.segments.size(), 1u);
  EXPECT_EQ(s.segments[0].blocks[0].state, BlockState::active_pending_free);
  EXPECT_EQ(s.segments[0].blocks[0].address, 4096u);
  EXPECT_EQ(s.segments[0].active_size, 1024);  // derived from the blocks when absent
  EXPECT_EQ(s.segments[0].allocated_size, 0);
  ASSERT_EQ(s.segments[0].extra.size(), 1u);
  EXPECT_EQ(s.segments[0].extra[0].first, "future_key");
  ASSERT_EQ(s.extra.size(), 1u);
  EXPECT_FALSE(s.settings.present);
  EXPECT_TRUE(s.device_traces.empty());
}
