#include "embedscope/engine/memory/memory.h"

#include "embedscope/engine/memory/replay.h"
#include "embedscope/profiler/cpu/tracer.h"
#include "embedscope/sessions/model/units.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

namespace embedscope::engine {

namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

Allocation DeviceArena::allocate(const std::string& tag, int64_t bytes) {
  const int64_t t0 = now_ns();
  try {
    Allocation a = allocator_->allocate(bytes, tag);
    allocator_ns_ += now_ns() - t0;
    if (!log_cut_) {
      const int64_t id = ++next_log_id_;
      log_ids_[a.address] = id;
      log(static_cast<uint8_t>(MemoryAction::Kind::alloc), id, bytes);
    }
    return a;
  } catch (const DeviceOutOfMemory& e) {
    if (on_oom_) on_oom_();
    const std::string advice = oom_advice_from_replays(e, bytes);
    const std::string text = advice.empty() || e.explanation.empty() ? std::string(e.what())
                                                                     : e.explanation + " Advice: " + advice;
    throw OomError(fmt::format("rank {}: {}", rank_, text), rank_, e.fragmentation, bytes);
  }
}

DeviceArena::Logged DeviceArena::site_now(uint8_t kind, int64_t id, int64_t size) const {
  Logged l;
  l.id = id;
  l.size = size;
  l.kind = kind;
  if (const profiler::ScopedSpan* span = profiler::ScopedSpan::innermost()) {
    l.step = static_cast<int32_t>(std::clamp<int64_t>(span->step(), INT32_MIN + 1, INT32_MAX));
    const std::string name = span->name() ? span->name() : "";
    if (auto it = op_index_.find(name); it != op_index_.end()) {
      l.op = it->second;
    } else if (op_names_.size() <= UINT16_MAX) {
      l.op = static_cast<uint16_t>(op_names_.size());
      op_index_.emplace(name, l.op);
      op_names_.push_back(name);
    }
  }
  return l;
}

void DeviceArena::log(uint8_t kind, int64_t id, int64_t size) {
  if (log_cut_) return;
  if (log_.size() >= kOomLogLimit) {
    log_cut_ = true;
    log_.clear();
    log_.shrink_to_fit();
    log_ids_.clear();
    return;
  }
  log_.push_back(kind == 255 ? Logged{id, size, kNoStep, 0, kind} : site_now(kind, id, size));
}

std::string DeviceArena::describe(const Logged& l, int64_t entry) const {
  std::vector<std::string> parts;
  if (l.step != kNoStep && l.step >= 0) {
    parts.push_back(fmt::format("step {}", l.step));
  } else if (l.step != kNoStep) {  // the warm-up's steps are numbered -warmup .. -1
    parts.push_back(warmup_steps_ > 0 && l.step >= -warmup_steps_
                        ? fmt::format("warm-up step {} of {}", l.step + warmup_steps_ + 1, warmup_steps_)
                        : fmt::format("warm-up step (step {})", l.step));
  }
  if (l.op != 0) parts.push_back(op_names_[l.op]);
  const auto kind = static_cast<MemoryAction::Kind>(l.kind);
  std::string what = kind == MemoryAction::Kind::alloc     ? "asking " + sessions::format_bytes(l.size)
                     : kind == MemoryAction::Kind::compact ? "compacting the device"
                                                           : "freeing a block";
  std::string text;
  for (const auto& p : parts) text += (text.empty() ? "" : ", ") + p;
  // "OOM at " + this: with neither step nor op, "the request of 832.0 KiB outside any op", not
  // "OOM at asking 832.0 KiB outside any op" (tester63c F10)
  if (parts.empty() && kind == MemoryAction::Kind::alloc) what = "the request of " + sessions::format_bytes(l.size);
  text += parts.empty() ? what + " outside any op" : ", " + what;
  return fmt::format("{} (action {} of rank {}'s log)", text, entry, rank_);
}

std::string DeviceArena::describe_action(int64_t entry, int64_t pending_bytes) const {
  int64_t i = 0;
  for (const auto& l : log_) {
    if (l.kind == 255) continue;
    if (i++ == entry) return describe(l, entry);
  }
  if (entry == i && pending_bytes > 0) {
    Logged now = site_now(static_cast<uint8_t>(MemoryAction::Kind::alloc), -1,
                                                          pending_bytes);
    return describe(now, entry);
  }
  return fmt::format("action {} of rank {}'s log", entry, rank_);
}

void DeviceArena::mark_step_end() { log(255, 0, 0); }

std::string DeviceArena::oom_advice_from_replays(const DeviceOutOfMemory& failed, int64_t bytes) const {
  const AllocatorConfig own = allocator_->config();
  if (log_cut_ || own.kind == AllocatorKind::cuda_async || !failed.fragmentation) return "";
  std::vector<MemoryAction> actions, packed;
  actions.reserve(log_.size() + 1);
  std::vector<Logged> logged;  // the entry of each action, for describe
  logged.reserve(log_.size() + 1);
  bool steps = false;
  for (const auto& l : log_) {
    if (l.kind == 255) {
      steps = true;
      MemoryAction c;
      c.kind = MemoryAction::Kind::compact;
      c.entry = static_cast<int64_t>(actions.size());
      packed.push_back(c);
      continue;
    }
    MemoryAction a;
    a.kind = static_cast<MemoryAction::Kind>(l.kind);
    a.id = l.id;
    a.size = l.size;
    a.entry = static_cast<int64_t>(actions.size());
    actions.push_back(a);
    packed.push_back(a);
    logged.push_back(l);
  }
  logged.push_back(site_now(static_cast<uint8_t>(MemoryAction::Kind::alloc), -1, bytes));
  MemoryAction request;
  request.kind = MemoryAction::Kind::alloc;
  request.id = -1;  // no block address is negative
  request.size = bytes;
  request.entry = static_cast<int64_t>(actions.size());
  actions.push_back(request);
  packed.push_back(request);
  AllocatorConfig base = own;
  base.back_with_memory = false;
  std::vector<ReplayResult> rows;
  rows.push_back(replay_actions(actions, {}, base, "the run", true));
  if (!rows.front().oom || rows.front().oom_action != request.entry) return "";  // the replay is not this run
  auto add = [&](AllocatorKind k, int64_t max_split) {
    AllocatorConfig c = base;
    c.kind = k;
    c.max_split_size = max_split;
    if (k == own.kind && max_split == own.max_split_size) return;
    rows.push_back(replay_actions(actions, {}, c, "the run", true));
  };
  for (const AllocatorKind k : {AllocatorKind::caching, AllocatorKind::expandable, AllocatorKind::direct}) add(k, 0);
  // PyTorch applies max_split_size to the large pool only
  if (round_size(bytes) > kSmallSize) add(AllocatorKind::caching, own.max_split_size > 0 ? 0 : kMinMaxSplitSizeBytes);
  if (steps && own.kind != AllocatorKind::direct) {
    ReplayResult r = replay_actions(packed, {}, base, "the run", true);
    r.label = fmt::format("{} with memory.compaction 1 (the device packed after every step)", setting_label(own));
    rows.push_back(r);
  }
  // the run's actions after the OOM never happened: a setting that completes these may still run
  // out later (an expandable run that fails in its warmup step against caching, which fails a step later)
  const std::string what = fmt::format("this rank's {} allocator actions so far and this request (what the run "
                                       "would have done after it is unknown)",
                                       actions.size() - 1);
  const auto where = [&](int64_t entry) {
    return entry >= 0 && entry < static_cast<int64_t>(logged.size())
               ? describe(logged[static_cast<size_t>(entry)], entry)
               : fmt::format("action {} of rank {}'s log", entry, rank_);
  };
  advise_from_replays(
      rows, what,
      [&](const AllocatorConfig& c) {
        ReplayResult r = replay_actions(actions, {}, c, "the run", true);
        return r;
      },
      where);
  return rows.front().oom_advice;
}

void DeviceArena::release(const Allocation& a) {
  if (!log_cut_)
    if (auto it = log_ids_.find(a.address); it != log_ids_.end()) {
      log(static_cast<uint8_t>(MemoryAction::Kind::free), it->second, 0);
      log_ids_.erase(it);
    }
  const int64_t t0 = now_ns();
  allocator_->free(a);
  allocator_ns_ += now_ns() - t0;
}

DeviceArena::Compaction DeviceArena::compact() {
  if (device_memory_) throw std::logic_error("compaction of GPU memory is not supported (spec validation refuses it)");
  Compaction c;
  const MemoryStats before = allocator_->stats();
  c.reserved_before = before.reserved;
  c.largest_free_before = before.largest_free_block;
  std::vector<std::pair<Allocation*, std::string>> owners(tracked_.begin(), tracked_.end());
  std::stable_sort(owners.begin(), owners.end(), [](const auto& a, const auto& b) {
    return a.first->size != b.first->size ? a.first->size > b.first->size : a.first->address < b.first->address;
  });
  log(static_cast<uint8_t>(MemoryAction::Kind::compact), 0, 0);
  const size_t logged = log_.size();
  std::vector<int64_t> ids;  // each moved block's logged id, kept across its move
  for (const auto& [owner, tag] : owners) {
    const auto it = log_ids_.find(owner->address);
    ids.push_back(it == log_ids_.end() ? 0 : it->second);
    if (it != log_ids_.end()) log_ids_.erase(it);
  }
  std::vector<std::vector<char>> saved;
  saved.reserve(owners.size());
  for (auto& [owner, tag] : owners) {
    const auto* p = static_cast<const char*>(owner->ptr);
    saved.emplace_back(p, p + owner->requested);
    allocator_->free(*owner);
  }
  allocator_->empty_cache();
  for (size_t i = 0; i < owners.size(); ++i) {
    Allocation& owner = *owners[i].first;
    const Allocation fresh = allocate(owners[i].second, owner.requested);
    std::memcpy(fresh.ptr, saved[i].data(), saved[i].size());
    c.bytes_moved += static_cast<int64_t>(saved[i].size());
    ++c.blocks_moved;
    owner = fresh;
  }
  // the compaction is one logged action: its frees and allocations are what Kind::compact replays
  if (!log_cut_ && log_.size() >= logged) {
    log_.resize(logged);  // the moved blocks keep their ids at their new addresses
    for (size_t i = 0; i < owners.size(); ++i)
      if (ids[i] != 0) log_ids_[owners[i].first->address] = ids[i];
  }
  const MemoryStats after = allocator_->stats();
  c.reserved_after = after.reserved;
  c.largest_free_after = after.largest_free_block;
  return c;
}

}  // namespace embedscope::engine
