#include "embedscope/sessions/importers/torch_memory_snapshot/snapshot.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string_view>
#include <tuple>

#include <fmt/format.h>

namespace embedscope::sessions::torch_snapshot {

using pickle::Value;

const char* to_string(BlockState s) {
  switch (s) {
    case BlockState::active_allocated: return "active_allocated";
    case BlockState::active_pending_free: return "active_pending_free";
    case BlockState::inactive: return "inactive";
  }
  return "inactive";
}

namespace {
constexpr std::pair<TraceAction, const char*> kActions[] = {
    {TraceAction::alloc, "alloc"},
    {TraceAction::free_requested, "free_requested"},
    {TraceAction::free_completed, "free_completed"},
    {TraceAction::segment_alloc, "segment_alloc"},
    {TraceAction::segment_free, "segment_free"},
    {TraceAction::segment_map, "segment_map"},
    {TraceAction::segment_unmap, "segment_unmap"},
    {TraceAction::oom, "oom"},
    {TraceAction::snapshot, "snapshot"},
    {TraceAction::annotate, "annotate"},
};
}  // namespace

const char* to_string(TraceAction a) {
  for (const auto& [k, n] : kActions)
    if (k == a) return n;
  return "alloc";
}

int64_t MemorySnapshotFile::device_count() const {
  int64_t n = static_cast<int64_t>(device_traces.size());
  for (const auto& s : segments) n = std::max(n, s.device + 1);
  return n;
}

std::vector<int64_t> MemorySnapshotFile::used_devices() const {
  std::vector<bool> used(static_cast<size_t>(device_count()), false);
  for (size_t d = 0; d < device_traces.size(); ++d) used[d] = !device_traces[d].empty();
  for (const auto& s : segments) used[static_cast<size_t>(s.device)] = true;
  std::vector<int64_t> out;
  for (size_t d = 0; d < used.size(); ++d)
    if (used[d]) out.push_back(static_cast<int64_t>(d));
  if (out.empty()) out.push_back(0);
  return out;
}

namespace {

// A key path, rendered only for an error: segments[3].blocks[2].size, the dotted form the
// other importers name fields in (distributedInfo.rank); the root has none, and an error about
// the whole snapshot names only the file.
struct Path {
  const Path* parent = nullptr;
  const char* key = nullptr;  // nullptr: an index
  size_t index = 0;
  std::string str() const {
    if (!parent && !key) return "";  // the root
    std::string up = parent ? parent->str() : "";
    if (key) return up.empty() ? key : up + "." + key;
    return up + fmt::format("[{}]", index);
  }
  Path operator/(const char* k) const { return {this, k, 0}; }
  Path operator[](size_t i) const { return {this, nullptr, i}; }
};

class Parser {
 public:
  explicit Parser(const std::string& source) : source_(source) {
    out_.stacks.push_back({});
    stack_ids_[{}] = 0;
  }

  MemorySnapshotFile run(const Value& root) {
    const Path top{};
    if (!root.is_dict()) fail(top, fmt::format("a memory snapshot is a dict, got {}", kind(root)));
    for (const auto& [k, v] : root.pairs()) {
      const std::string& key = k.as_string();
      if (key == "segments") {
        const Path p = top / "segments";
        const auto& items = seq(v, p);
        out_.segments.reserve(items.size());
        for (size_t i = 0; i < items.size(); ++i) out_.segments.push_back(segment(items[i], p[i]));
      } else if (key == "device_traces") {
        const Path p = top / "device_traces";
        const auto& devs = seq(v, p);
        // one list per visible GPU (PyTorch's snapshot()): as many as device indices may be
        if (static_cast<int64_t>(devs.size()) > kMaxDevices)
          fail(p, fmt::format("{} device lists: PyTorch writes one per visible GPU (fewer than 128); at most {} here",
                              devs.size(), kMaxDevices));
        for (size_t d = 0; d < devs.size(); ++d) {
          const auto& entries = seq(devs[d], p[d]);
          auto& trace = out_.device_traces.emplace_back();
          trace.reserve(entries.size());
          for (size_t i = 0; i < entries.size(); ++i) trace.push_back(entry(entries[i], p[d][i]));
        }
      } else if (key == "allocator_settings") {
        settings(v, top / "allocator_settings");
      } else if (key == "external_annotations") {
        out_.external_annotations = seq(v, top / "external_annotations");
      } else {
        out_.extra.emplace_back(key, v);
      }
    }
    if (!root.get("segments")) fail(top / "segments", "missing: a memory snapshot has a list of segments");
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(const Path& p, const std::string& why) const {
    const std::string at = p.str();
    if (at.empty()) throw SnapshotError(fmt::format("{}: {}", source_, why));
    throw SnapshotError(fmt::format("{}: {}: {}", source_, at, why));
  }
  static const char* kind(const Value& v) { return Value::kind_name(v.kind()); }

  const pickle::List& seq(const Value& v, const Path& p) const {
    if (!v.is_sequence()) fail(p, fmt::format("must be a list, got {}", kind(v)));
    return v.items();
  }
  const Value& dict(const Value& v, const Path& p) const {
    if (!v.is_dict()) fail(p, fmt::format("must be a dict, got {}", kind(v)));
    return v;
  }
  int64_t i64(const Value& v, const Path& p) const {
    if (v.kind() == Value::Kind::integer || v.kind() == Value::Kind::boolean) return v.as_int();
    if (v.kind() == Value::Kind::unsigned_integer) fail(p, fmt::format("{} does not fit a signed 64-bit size", v.as_uint()));
    fail(p, fmt::format("must be an int, got {}", kind(v)));
  }
  int64_t size(const Value& v, const Path& p) const {
    const int64_t n = i64(v, p);
    if (n < 0) fail(p, fmt::format("must be >= 0, got {}", n));
    return n;
  }
  // bytes of memory a device holds: at most kMaxSnapshotBytes
  int64_t bytes(const Value& v, const Path& p) const {
    const int64_t n = size(v, p);
    if (n > kMaxSnapshotBytes)
      fail(p, fmt::format("{} B is larger than any device's memory (at most {} B, 1 PiB, here)", n, kMaxSnapshotBytes));
    return n;
  }
  uint64_t address(const Value& v, const Path& p) const {
    if (v.kind() == Value::Kind::unsigned_integer) return v.as_uint();
    if (v.kind() == Value::Kind::integer) return v.as_uint();  // int64 bit pattern (the C++ pickler's form)
    fail(p, fmt::format("must be an int (an address), got {}", kind(v)));
  }
  bool boolean(const Value& v, const Path& p) const {
    if (v.kind() == Value::Kind::boolean) return v.as_bool();
    if (v.kind() == Value::Kind::integer) return v.as_int() != 0;
    fail(p, fmt::format("must be a bool, got {}", kind(v)));
  }
  // A range [address, address + bytes) that runs past 2^64 wraps around: no memory of any device
  // (tester59 F2: such a segment was imported without a problem and stats lost its free block)
  void no_wrap(uint64_t address, int64_t bytes, const Path& p, const char* size_field) const {
    if (bytes > 0 && address > std::numeric_limits<uint64_t>::max() - static_cast<uint64_t>(bytes) + 1)
      fail(p, fmt::format("address 0x{:x} + {} {} B wraps past 2^64 (the range would end at 0x{:x} of the next "
                          "2^64): not a range of memory",
                          address, size_field, bytes, address + static_cast<uint64_t>(bytes)));
  }
  const std::string& text(const Value& v, const Path& p) const {
    if (!v.is_string()) fail(p, fmt::format("must be a str, got {}", kind(v)));
    return v.as_string();
  }

  int32_t stack(const Value& v, const Path& p) {
    const auto& items = seq(v, p);
    std::vector<int32_t> ids;
    ids.reserve(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      const Path fp = p[i];
      const Value& f = dict(items[i], fp);
      // looked up by views of the pickle's strings: a frame seen before costs no copies
      const Value* file = f.get("filename");
      const Value* line = f.get("line");
      const Value* name = f.get("name");
      const std::string_view file_text = file ? std::string_view(text(*file, fp / "filename")) : std::string_view();
      const int64_t line_no = line ? i64(*line, fp / "line") : 0;
      const std::string_view name_text = name ? std::string_view(text(*name, fp / "name")) : std::string_view();
      auto it = frame_ids_.find(std::make_tuple(file_text, line_no, name_text));
      if (it == frame_ids_.end()) {
        Frame fr;
        fr.filename = file_text;
        fr.line = line_no;
        fr.name = name_text;
        it = frame_ids_.emplace(std::make_tuple(fr.filename, fr.line, fr.name), static_cast<int32_t>(out_.frames.size())).first;
        out_.frames.push_back(std::move(fr));
      }
      ids.push_back(it->second);
    }
    auto it = stack_ids_.find(ids);
    if (it != stack_ids_.end()) return it->second;
    const auto id = static_cast<int32_t>(out_.stacks.size());
    stack_ids_.emplace(ids, id);
    out_.stacks.push_back(std::move(ids));
    return id;
  }

  Segment segment(const Value& v, const Path& p) {
    dict(v, p);
    Segment s;
    bool has_address = false, has_total = false, has_allocated = false, has_active = false;
    for (const auto& [k, x] : v.pairs()) {
      const std::string& key = k.as_string();
      if (key == "device") {
        s.device = size(x, p / "device");
        if (s.device >= kMaxDevices)
          fail(p / "device", fmt::format("device {} is not a CUDA device index (PyTorch's are below 128; at most {} here)",
                                         s.device, kMaxDevices - 1));
      }
      else if (key == "address") s.address = address(x, p / "address"), has_address = true;
      else if (key == "total_size") s.total_size = bytes(x, p / "total_size"), has_total = true;
      else if (key == "allocated_size") s.allocated_size = bytes(x, p / "allocated_size"), has_allocated = true;
      else if (key == "active_size") s.active_size = bytes(x, p / "active_size"), has_active = true;
      else if (key == "requested_size") s.requested_size = bytes(x, p / "requested_size");
      else if (key == "stream") s.stream = i64(x, p / "stream");
      else if (key == "segment_type") {
        const std::string& t = text(x, p / "segment_type");
        if (t != "small" && t != "large") fail(p / "segment_type", fmt::format("must be \"small\" or \"large\", got \"{}\"", t));
        s.small = t == "small";
      } else if (key == "segment_pool_id") {
        const auto& id = seq(x, p / "segment_pool_id");
        if (id.size() != 2) fail(p / "segment_pool_id", fmt::format("must be a pair of ints, got {} items", id.size()));
        s.pool_id = {i64(id[0], (p / "segment_pool_id")[0]), i64(id[1], (p / "segment_pool_id")[1])};
      } else if (key == "is_expandable") s.is_expandable = boolean(x, p / "is_expandable");
      else if (key == "frames") s.stack = stack(x, p / "frames");
      else if (key != "blocks") s.extra.emplace_back(key, x);
    }
    if (!has_address) fail(p / "address", "missing");
    if (!has_total) fail(p / "total_size", "missing");
    no_wrap(s.address, s.total_size, p, "total_size");
    if (const Value* b = v.get("blocks")) {
      const Path bp = p / "blocks";
      const auto& items = seq(*b, bp);
      uint64_t at = s.address;
      for (size_t i = 0; i < items.size(); ++i) {
        s.blocks.push_back(block(items[i], bp[i], at));
        at = s.blocks.back().address + static_cast<uint64_t>(s.blocks.back().size);
      }
    }
    // sizes the file left out are what its blocks say
    if (!has_allocated || !has_active) {
      int64_t alloc = 0, active = 0;
      for (const auto& b : s.blocks) {
        if (b.state == BlockState::active_allocated) alloc += b.size;
        if (b.state != BlockState::inactive) active += b.size;
      }
      if (!has_allocated) s.allocated_size = alloc;
      if (!has_active) s.active_size = active;
    }
    return s;
  }

  Block block(const Value& v, const Path& p, uint64_t expected_address) {
    dict(v, p);
    Block b;
    b.address = expected_address;  // PyTorch lists blocks in address order, each after the last
    bool has_size = false, has_state = false, has_frames = false;
    for (const auto& [k, x] : v.pairs()) {
      const std::string& key = k.as_string();
      if (key == "address") b.address = address(x, p / "address");
      else if (key == "size") b.size = bytes(x, p / "size"), has_size = true;
      else if (key == "requested_size") b.requested_size = bytes(x, p / "requested_size");
      else if (key == "state") {
        const std::string& st = text(x, p / "state");
        if (st == "active_allocated") b.state = BlockState::active_allocated;
        else if (st == "active_pending_free" || st == "active_awaiting_free") b.state = BlockState::active_pending_free;
        else if (st == "inactive") b.state = BlockState::inactive;
        else fail(p / "state", fmt::format("must be active_allocated, active_pending_free or inactive, got \"{}\"", st));
        has_state = true;
      } else if (key == "frames") b.stack = stack(x, p / "frames"), has_frames = true;
      else b.extra.emplace_back(key, x);
    }
    if (!has_size) fail(p / "size", "missing");
    if (!has_state) fail(p / "state", "missing");
    no_wrap(b.address, b.size, p, "size");
    if (!has_frames)
      if (const Value* h = v.get("history"); h && h->is_sequence() && !h->items().empty()) {  // the older form
        const Path hp = (p / "history")[h->items().size() - 1];
        if (const Value* f = dict(h->items().back(), hp).get("frames")) b.stack = stack(*f, hp / "frames");
      }
    return b;
  }

  TraceEntry entry(const Value& v, const Path& p) {
    dict(v, p);
    TraceEntry e;
    bool has_action = false;
    for (const auto& [k, x] : v.pairs()) {
      const std::string& key = k.as_string();
      if (key == "action") {
        const std::string& a = text(x, p / "action");
        auto it = std::find_if(std::begin(kActions), std::end(kActions), [&](const auto& kv) { return a == kv.second; });
        if (it == std::end(kActions))
          fail(p / "action", fmt::format("unknown action \"{}\" (alloc, free_requested, free_completed, segment_alloc, "
                                         "segment_free, segment_map, segment_unmap, oom, snapshot, annotate)",
                                         a));
        e.action = it->first;
        has_action = true;
      } else if (key == "addr") e.addr = address(x, p / "addr");
      else if (key == "device_free") e.addr = address(x, p / "device_free");
      else if (key == "size") e.size = size(x, p / "size");  // bounded below, once the action is known
      else if (key == "stream") e.stream = i64(x, p / "stream");
      else if (key == "time_us") e.time_us = i64(x, p / "time_us");
      else if (key == "frames") e.stack = stack(x, p / "frames");
      else e.extra.emplace_back(key, x);
    }
    if (!has_action) fail(p / "action", "missing");
    // an oom entry's size is the request that failed (any size); the others' are memory held
    if (e.action != TraceAction::oom && e.size > kMaxSnapshotBytes)
      fail(p / "size", fmt::format("{} B is larger than any device's memory (at most {} B, 1 PiB, here)", e.size,
                                   kMaxSnapshotBytes));
    // an oom entry's addr is the device's free bytes; the others' an address with size bytes from it
    if (e.action != TraceAction::oom && e.action != TraceAction::snapshot && e.action != TraceAction::annotate)
      no_wrap(e.addr, e.size, p, "size");
    return e;
  }

  void settings(const Value& v, const Path& p) {
    dict(v, p);
    AllocatorSettings& s = out_.settings;
    s.present = true;
    for (const auto& [k, x] : v.pairs()) {
      const std::string& key = k.as_string();
      if (key == "max_split_size") {
        // SIZE_MAX (unlimited) arrives as -1 (int64) or 2^64 - 1
        const bool unlimited = x.kind() == Value::Kind::unsigned_integer || (x.is_int() && x.as_int() < 0);
        s.max_split_size = unlimited ? 0 : i64(x, p / "max_split_size");
        if (s.max_split_size >= (int64_t{1} << 62)) s.max_split_size = 0;
      } else if (key == "expandable_segments") s.expandable_segments = boolean(x, p / "expandable_segments");
      else if (key == "garbage_collection_threshold") {
        if (x.kind() != Value::Kind::floating && !x.is_int())
          fail(p / "garbage_collection_threshold", fmt::format("must be a float, got {}", kind(x)));
        s.garbage_collection_threshold = x.as_double();
      } else if (key == "PYTORCH_CUDA_ALLOC_CONF") s.conf = x.is_none() ? "" : text(x, p / "PYTORCH_CUDA_ALLOC_CONF");
      else if (key == "roundup_power2_divisions") {
        const Path rp = p / "roundup_power2_divisions";
        if (x.is_dict()) {
          for (const auto& [rk, rv] : x.pairs()) s.roundup_power2_divisions.emplace_back(rk.as_string(), i64(rv, rp));
        } else {
          const auto& items = seq(x, rp);
          for (size_t i = 0; i < items.size(); ++i)
            s.roundup_power2_divisions.emplace_back(std::to_string(i), i64(items[i], rp[i]));
        }
      } else s.extra.emplace_back(key, x);
    }
  }

  const std::string& source_;
  MemorySnapshotFile out_;
  // Found by string_views (a frame seen before costs no copies): a transparent order over both
  // tuple kinds (libstdc++'s std::less<> cannot compare a tuple of strings with one of views
  // under clang).
  struct FrameKeyLess {
    using is_transparent = void;
    template <class A, class B>
    bool operator()(const A& a, const B& b) const {
      return std::tuple<std::string_view, int64_t, std::string_view>(std::get<0>(a), std::get<1>(a), std::get<2>(a)) <
             std::tuple<std::string_view, int64_t, std::string_view>(std::get<0>(b), std::get<1>(b), std::get<2>(b));
    }
  };
  std::map<std::tuple<std::string, int64_t, std::string>, int32_t, FrameKeyLess> frame_ids_;
  std::map<std::vector<int32_t>, int32_t> stack_ids_;
};

}  // namespace

MemorySnapshotFile parse_snapshot(const pickle::Value& root, const std::string& source) {
  return Parser(source).run(root);
}

MemorySnapshotFile load_snapshot(const std::string& path, const pickle::PickleLimits& limits) {
  return parse_snapshot(pickle::load_file(path, limits), path);
}

}  // namespace embedscope::sessions::torch_snapshot
