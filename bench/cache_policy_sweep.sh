#!/usr/bin/env bash
# Simulated vs measured host_cached counters (tester42 F27 / cache43): tester42's tiny-based
# workload (t_b 100 x 6 serving two uniform features, 96 ids a step; t_c 1,000 x 12, 32 Zipf(1.1)
# permuted ids a step, plain or hashed into 100 buckets), adam, sparse_dist, 2 CPU ranks, STEPS
# measured steps (default 100), for lru and lfu at load factors LOADS (default 0.05 0.1 0.2 0.4).
# Prints per table: hit rate, rows fetched / step, H2D and D2H bytes / step, measured then simulated
# (`--simulate h100_sxm --devices 2 --gpus-per-node 2`).
# Usage: EMBEDSCOPE=build/app/cli/embedscope bench/cache_policy_sweep.sh
set -euo pipefail
E=${EMBEDSCOPE:-build/app/cli/embedscope}
STEPS=${STEPS:-100}
LOADS=${LOADS:-0.05 0.1 0.2 0.4}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
printf '%-6s %-4s %-5s %-6s | %7s %7s %8s %8s | %7s %7s %8s %8s\n' table pol load hashed hit% rows h2d d2h hit% rows h2d d2h
for hashed in 0 1; do for pol in lru lfu; do for load in $LOADS; do
  python3 - "$ROOT/resources/workloads/tiny.json" "$DIR/w.json" "$pol" "$load" "$hashed" "$STEPS" <<'PY'
import json, sys
src, dst, pol, load, hashed, steps = sys.argv[1:]
w = json.load(open(src))
w.update(optimizer={"type": "adam", "learning_rate": 0.01}, pipeline="sparse_dist", steps=int(steps))
for f in w["features"]:
    if f["name"] in ("f_b0", "f_b1"): f["pooling_factor"] = 3
for t in w["tables"]:
    if t["name"] in ("t_b", "t_c"):
        t.update(placement="host_cached", cache_policy=pol, cache_load_factor=float(load))
    if t["name"] == "t_c" and hashed == "1": t["hash_size"] = 100
json.dump(w, open(dst, "w"))
PY
  "$E" run "$DIR/w.json" --json -o "$DIR/m.db" --force-overwrite > "$DIR/m.json" 2>/dev/null
  "$E" run "$DIR/w.json" --simulate h100_sxm --devices 2 --gpus-per-node 2 --json -o "$DIR/s.db" --force-overwrite > "$DIR/s.json" 2>/dev/null
  python3 - "$DIR/m.json" "$DIR/s.json" "$pol" "$load" "$hashed" "$STEPS" <<'PY'
import json, sys
m, s = (json.load(open(p)) for p in sys.argv[1:3])
pol, load, hashed, steps = sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6])
def row(t):
    hm = t["cache_hits"] + t["cache_misses"]
    return (100.0 * t["cache_hits"] / hm if hm else 0.0, t["rows_fetched"] / steps, t["bytes_h2d"] / steps, t["bytes_d2h"] / steps)
for tm, ts in zip(m["tables"], s["tables"]):
    if tm.get("placement") != "host_cached": continue
    a, b = row(tm), row(ts)
    print("%-6s %-4s %-5s %-6s | %6.1f%% %7.1f %8.0f %8.0f | %6.1f%% %7.1f %8.0f %8.0f" % ((tm["table"], pol, load, "yes" if hashed == "1" else "no") + a + b))
PY
done; done; done
