#!/usr/bin/env bash
# The cache model's cold start (engine/cost/cache_model.h) against a real CPU run (issue 16):
# two tables of 20,000 x 16, host_cached at load factor LOAD (default 0.25) lru, table_wise on 2
# CPU ranks, batch 64 a rank, pooling factor 2 (256 ids a step at each shard), STEPS steps
# (default 60) and no warmup; table 0 uniform ids, table 1 Zipf(1.05) permuted. The same
# workload with backend simulated gives the model's per-step load counters (the cold start while
# the caches fill, then Che's steady state). Prints misses and hit rates per step window and the
# first step with dirty write-backs (the cache is full), measured vs model.
# Usage: bench/cache_cold_start.sh (BIN, STEPS, LOAD, OUT optional).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/build/app/cli/embedscope}
STEPS=${STEPS:-60}
LOAD=${LOAD:-0.25}
OUT=${OUT:-$(mktemp -d)}
python3 - "$OUT" "$STEPS" "$LOAD" <<'PY'
import json, sys
out, steps, load = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
tables, feats = [], []
for name, ids in [("uni", "uniform"), ("zipf", {"distribution": "zipf", "alpha": 1.05, "permute": True})]:
    tables.append({"name": name, "num_embeddings": 20000, "embedding_dim": 16, "feature_names": ["f_" + name],
                   "placement": "host_cached", "cache_load_factor": load, "cache_policy": "lru"})
    feats.append({"name": "f_" + name, "pooling_factor": 2, "ids": ids})
j = {"name": "cold_start", "tables": tables, "features": feats, "batch_size": 64, "steps": steps, "warmup_steps": 0,
     "pipeline": "base", "devices": {"count": 2, "backend": "cpu", "memory_bytes": 1 << 30},
     "sharding": {"tables": {"uni": {"type": "table_wise", "ranks": [0]}, "zipf": {"type": "table_wise", "ranks": [1]}}},
     "dense": {"num_dense_features": 4, "bottom_mlp": [16, 16], "top_mlp": [8, 1]}}
json.dump(j, open(f"{out}/cpu.json", "w"))
j["devices"] = {"count": 2, "backend": "simulated", "hardware": "h100_sxm", "memory_bytes": 1 << 30}
json.dump(j, open(f"{out}/sim.json", "w"))
PY
"$BIN" run "$OUT/cpu.json" -o "$OUT/cpu.db" --force-overwrite > "$OUT/cpu.log" 2>&1
"$BIN" run "$OUT/sim.json" -o "$OUT/sim.db" --force-overwrite > "$OUT/sim.log" 2>&1
python3 - "$OUT" "$STEPS" <<'PY'
import sqlite3, sys
out, steps = sys.argv[1], int(sys.argv[2])
def load(db):
    c = sqlite3.connect(db)
    return {(t, s): (h, m, d) for t, s, h, m, d in
            c.execute("select table_index, step, cache_hits, cache_misses, bytes_d2h from load_counters")}
a, b = load(f"{out}/cpu.db"), load(f"{out}/sim.db")
windows = [(0, 10), (10, 25), (25, steps)]
for t, name in [(0, "uniform"), (1, "zipf 1.05 permuted")]:
    print(f"{name}: misses measured / model per step window")
    for lo, hi in windows:
        ma = sum(a[(t, s)][1] for s in range(lo, min(hi, steps)))
        mb = sum(b[(t, s)][1] for s in range(lo, min(hi, steps)))
        print(f"  steps {lo}-{min(hi, steps) - 1}: {ma} / {mb} ({(mb - ma) / ma * 100:+.1f} %)")
    for s in [0, 1, 2, 5, 10, 20, 30, steps - 1]:
        if (t, s) in a:
            h, m, _ = a[(t, s)]; h2, m2, _ = b[(t, s)]
            print(f"  step {s}: hit rate {h / (h + m):.3f} / {h2 / (h2 + m2):.3f}")
    first = lambda d: next((s for s in range(steps) if d[(t, s)][2] > 0), None)
    print(f"  first step with dirty write-backs (cache full): {first(a)} / {first(b)}")
PY
