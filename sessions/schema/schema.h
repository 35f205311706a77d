#pragma once
// The session schema, version 3 (documented in sessions/schema/FORMAT.md; keep both in step).
// Version 2 added memory_events, memory_counters, memory_snapshots and memory_blocks; version 3 added
// id_histogram. Older files are read as they are (without those tables).
// ops.lane_key = rank * 256 + lane: one integer key column makes inserts about 10% faster than
// (rank, lane), and op_view gives the two back.

namespace embedscope::sessions::detail {

inline constexpr const char* kSchemaSql = R"sql(
CREATE TABLE metadata (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE strings (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE categories (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE ranks (
  rank INTEGER PRIMARY KEY, host TEXT NOT NULL, device TEXT NOT NULL, memory_capacity_bytes INTEGER NOT NULL);
CREATE TABLE lanes (
  rank INTEGER NOT NULL, lane INTEGER NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL,
  max_duration_ns INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (rank, lane)) WITHOUT ROWID;
CREATE TABLE ops (
  lane_key INTEGER, start_ns INTEGER, id INTEGER, end_ns INTEGER, category INTEGER, name_id INTEGER,
  step INTEGER, bytes INTEGER, correlation INTEGER,
  PRIMARY KEY (lane_key, start_ns, id)) WITHOUT ROWID;
CREATE TABLE collectives (
  id INTEGER PRIMARY KEY, rank INTEGER NOT NULL, op TEXT NOT NULL, name TEXT NOT NULL,
  group_name TEXT NOT NULL, sequence INTEGER NOT NULL, dtype TEXT NOT NULL, step INTEGER NOT NULL,
  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,
  bytes_sent INTEGER NOT NULL, bytes_received INTEGER NOT NULL,
  peers TEXT NOT NULL, send_elements TEXT NOT NULL, recv_elements TEXT NOT NULL);
CREATE INDEX collectives_by_sequence ON collectives (group_name, sequence);
CREATE TABLE load_counters (
  step INTEGER NOT NULL, rank INTEGER NOT NULL, table_index INTEGER NOT NULL, shard INTEGER NOT NULL,
  ids INTEGER NOT NULL, unique_ids INTEGER NOT NULL, bytes_in INTEGER NOT NULL,
  bytes_out INTEGER NOT NULL, lookup_ns INTEGER NOT NULL,
  PRIMARY KEY (step, rank, table_index, shard)) WITHOUT ROWID;
CREATE TABLE steps (
  step INTEGER NOT NULL, rank INTEGER NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,
  loss REAL NOT NULL, memory_in_use_bytes INTEGER NOT NULL, memory_peak_bytes INTEGER NOT NULL,
  PRIMARY KEY (step, rank)) WITHOUT ROWID;
CREATE TABLE memory_counters (
  step INTEGER NOT NULL, rank INTEGER NOT NULL, allocated_bytes INTEGER NOT NULL, reserved_bytes INTEGER NOT NULL,
  peak_allocated_bytes INTEGER NOT NULL, peak_reserved_bytes INTEGER NOT NULL,
  largest_free_block_bytes INTEGER NOT NULL, rounding_loss_bytes INTEGER NOT NULL, segments INTEGER NOT NULL,
  external_fragmentation REAL NOT NULL, memviz_fragmentation REAL NOT NULL,
  PRIMARY KEY (step, rank)) WITHOUT ROWID;
CREATE TABLE memory_events (
  id INTEGER PRIMARY KEY, rank INTEGER NOT NULL, time_ns INTEGER NOT NULL, step INTEGER NOT NULL,
  action TEXT NOT NULL, address INTEGER NOT NULL, size INTEGER NOT NULL, requested INTEGER NOT NULL,
  tag TEXT NOT NULL);
CREATE TABLE memory_snapshots (
  id INTEGER PRIMARY KEY, rank INTEGER NOT NULL, step INTEGER NOT NULL, time_ns INTEGER NOT NULL, reason TEXT NOT NULL);
CREATE TABLE memory_blocks (
  snapshot_id INTEGER NOT NULL, address INTEGER NOT NULL, segment_address INTEGER NOT NULL,
  segment_size INTEGER NOT NULL, size INTEGER NOT NULL, requested INTEGER NOT NULL, allocated INTEGER NOT NULL,
  tag TEXT NOT NULL,
  PRIMARY KEY (snapshot_id, address)) WITHOUT ROWID;
CREATE TABLE id_histogram (
  rank INTEGER NOT NULL, table_index INTEGER NOT NULL, bucket INTEGER NOT NULL,
  row_begin INTEGER NOT NULL, row_end INTEGER NOT NULL, ids INTEGER NOT NULL,
  PRIMARY KEY (table_index, bucket, rank)) WITHOUT ROWID;
CREATE VIEW op_view AS
  SELECT o.lane_key >> 8 AS rank, l.name AS lane, c.name AS category, s.value AS name, o.step, o.start_ns,
         o.end_ns, o.end_ns - o.start_ns AS dur_ns, o.bytes, o.correlation
  FROM ops o JOIN strings s ON s.id = o.name_id JOIN categories c ON c.id = o.category
       JOIN lanes l ON l.rank = o.lane_key >> 8 AND l.lane = o.lane_key & 255;
)sql";

}  // namespace embedscope::sessions::detail
