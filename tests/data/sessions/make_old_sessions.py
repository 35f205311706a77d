#!/usr/bin/env python3
"""Writes the session files of older schema versions that migration_test.cpp reads:
v1.db, v2.db, v3.db, v4.db, each with the DDL of its version exactly as the writer of that version
created it (sessions/src/schema.h at commits 7271985 = v1, a9f22bd = v2, cdc92e4 = v3; v4 = v3 plus
`shards`, as schema::create_sql wrote it at 4ceb5e9, read back from a file that build wrote) and a
small, hand-chosen run: 2 ranks, 2 lanes each, 2 steps (one warmup), a table-wise and a
row-wise table. Run from this folder: python3 make_old_sessions.py"""
import json, os, sqlite3

DDL_V1 = r"""
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
CREATE VIEW op_view AS
  SELECT o.lane_key >> 8 AS rank, l.name AS lane, c.name AS category, s.value AS name, o.step, o.start_ns,
         o.end_ns, o.end_ns - o.start_ns AS dur_ns, o.bytes, o.correlation
  FROM ops o JOIN strings s ON s.id = o.name_id JOIN categories c ON c.id = o.category
       JOIN lanes l ON l.rank = o.lane_key >> 8 AND l.lane = o.lane_key & 255;
"""

DDL_V2 = r"""
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
CREATE VIEW op_view AS
  SELECT o.lane_key >> 8 AS rank, l.name AS lane, c.name AS category, s.value AS name, o.step, o.start_ns,
         o.end_ns, o.end_ns - o.start_ns AS dur_ns, o.bytes, o.correlation
  FROM ops o JOIN strings s ON s.id = o.name_id JOIN categories c ON c.id = o.category
       JOIN lanes l ON l.rank = o.lane_key >> 8 AND l.lane = o.lane_key & 255;
"""

DDL_V3 = r"""
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
"""
DDL_V4 = DDL_V3.replace("CREATE VIEW op_view AS", """CREATE TABLE shards (table_index INTEGER NOT NULL, table_name TEXT NOT NULL, sharding_type TEXT NOT NULL, node INTEGER NOT NULL, shard_index INTEGER NOT NULL, rank INTEGER NOT NULL, row_offset INTEGER NOT NULL, num_rows INTEGER NOT NULL, col_offset INTEGER NOT NULL, num_cols INTEGER NOT NULL, planned_bytes INTEGER NOT NULL, PRIMARY KEY (table_index, shard_index)) WITHOUT ROWID;
CREATE VIEW op_view AS""")
WORKLOAD = {"name": "old_tiny", "batch_size": 4, "steps": 1, "warmup_steps": 1,
            "tables": [{"name": "t_user", "num_embeddings": 100, "embedding_dim": 8, "feature_names": ["user"]},
                       {"name": "t_item", "num_embeddings": 1000, "embedding_dim": 16, "feature_names": ["item"]}]}
PLAN = {"world_size": 2, "local_world_size": 2, "tables": [
    {"name": "t_user", "sharding_type": "table_wise",
     "shards": [{"rank": 1, "row_offset": 0, "num_rows": 100, "col_offset": 0, "num_cols": 8}]},
    {"name": "t_item", "sharding_type": "row_wise",
     "shards": [{"rank": 0, "row_offset": 0, "num_rows": 500, "col_offset": 0, "num_cols": 16},
                {"rank": 1, "row_offset": 500, "num_rows": 500, "col_offset": 0, "num_cols": 16}]}]}
CATEGORIES = ["input", "lookup", "comm", "dense", "optimizer", "memcpy", "other"]
NAMES = ["lookup", "input_dist/ids", "dense_forward_backward"]


def write(version, ddl):
    path = f"v{version}.db"
    if os.path.exists(path):
        os.remove(path)
    db = sqlite3.connect(path)
    db.executescript(ddl)
    db.execute(f"PRAGMA user_version = {version}")
    meta = {"format": "embedscope-session", "ended": "complete", "end_message": "", "writer_pid": "1",
            "writer_host": "oldhost", "tool_version": f"0.0.{version}", "sqlite_version": sqlite3.sqlite_version,
            "backend": "cpu", "simulated": "0", "workload_name": "old_tiny", "world_size": "2", "batch_size": "4",
            "samples_per_step": "8", "steps": "1", "warmup_steps": "1",
            "workload_json": json.dumps(WORKLOAD), "sharding_plan_json": json.dumps(PLAN)}
    db.executemany("INSERT INTO metadata VALUES (?, ?)", meta.items())
    db.executemany("INSERT INTO strings VALUES (?, ?)", enumerate(NAMES))
    db.executemany("INSERT INTO categories VALUES (?, ?)", enumerate(CATEGORIES))
    db.executemany("INSERT INTO ranks VALUES (?, ?, ?, ?)",
                   [(r, "oldhost", "cpu (thread)", 1 << 30) for r in (0, 1)])
    ops = []  # (lane_key, start, id, end, category, name_id, step, bytes, correlation)
    for r in (0, 1):
        db.executemany("INSERT INTO lanes (rank, lane, name, kind, max_duration_ns) VALUES (?, ?, ?, ?, ?)",
                       [(r, 0, "compute", "thread", 300), (r, 1, "comm", "thread", 150)])
        for step, base in ((-1, 0), (0, 1000)):
            ops.append((r * 256 + 1, base + 10, len(ops), base + 160, 2, 1, step, 96, step + 2))
            ops.append((r * 256 + 0, base + 200, len(ops), base + 300, 1, 0, step, 0, 0))
            ops.append((r * 256 + 0, base + 300, len(ops), base + 600, 3, 2, step, 0, 0))
    db.executemany("INSERT INTO ops VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", ops)
    for r in (0, 1):
        for step, base in ((-1, 0), (0, 1000)):
            db.execute("INSERT INTO steps VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (step, r, base, base + 700, 0.6931 if step < 0 else 0.5, 4096 + r, 8192 + r))
            db.execute("INSERT INTO collectives (rank, op, name, group_name, sequence, dtype, step, start_ns, end_ns, "
                       "bytes_sent, bytes_received, peers, send_elements, recv_elements) VALUES "
                       "(?, 'all_to_all', 'input_dist/ids', 'world', ?, 'int64', ?, ?, ?, 48, 48, '[0,1]', ?, ?)",
                       (r, step + 2, step, base + 10, base + 160, f"[{2 + r},6]", f"[{2 + r},6]"))
        db.executemany("INSERT INTO load_counters VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       [(0, r, 1, r, 40 + r, 30 + r, 320, 512, 250 + r)] + ([(0, 1, 0, 0, 16, 12, 128, 256, 90)] if r else []))
    if version >= 2:
        for r in (0, 1):
            db.execute("INSERT INTO memory_counters VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (0, r, 3000 + r, 4096, 3500, 4096, 1024, 12, 1, 0.25, 0.125))
            db.executemany("INSERT INTO memory_events (rank, time_ns, step, action, address, size, requested, tag) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           [(r, 5, -1, "segment_alloc", 4096, 4096, 0, ""),
                            (r, 6, -1, "alloc", 4096, 3072, 3000, "weights")])
        db.execute("INSERT INTO memory_snapshots VALUES (0, 1, 0, 1700, 'step')")
        db.executemany("INSERT INTO memory_blocks VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                       [(0, 4096, 4096, 4096, 3072, 3001, 1, "weights"), (0, 7168, 4096, 4096, 1024, 0, 0, "")])
    if version >= 3:
        db.executemany("INSERT INTO id_histogram VALUES (?, ?, ?, ?, ?, ?)",
                       [(0, 1, 0, 0, 4, 7), (1, 1, 0, 0, 4, 2), (1, 0, 99, 99, 100, 5)])
    if version >= 4:  # the plan as rows, with planned bytes (older files: only sharding_plan_json)
        db.executemany("INSERT INTO shards VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       [(0, "t_user", "table_wise", -1, 0, 1, 0, 100, 0, 8, 6400),
                        (1, "t_item", "row_wise", -1, 0, 0, 0, 500, 0, 16, 64000),
                        (1, "t_item", "row_wise", -1, 1, 1, 500, 500, 0, 16, 64000)])
    db.commit()
    db.execute("VACUUM")
    db.close()


for version, ddl in ((1, DDL_V1), (2, DDL_V2), (3, DDL_V3), (4, DDL_V4)):
    write(version, ddl)
