#!/usr/bin/env bash
# Tables in host memory (issue 16, placement host_cached): criteo_kaggle on 4 CPU ranks, seed 1,
# every table on the device (fp32, the preset) against every table host_cached (lru) at load
# factors LOADS (default "0.05 0.2"), each for STEPS measured steps (default 20, 2 warmup).
# Prints per run the device memory of the busiest rank (arena peak), the table bytes kept in
# host memory, the cache hit rate (distinct rows of the lookups found in the cache, all
# tables and ranks), the rows fetched and bytes moved per measured step (all ranks: host ->
# device and back) and the mean step time. Needs about 7 GB of host memory. Step times on a
# loaded machine are rough: this is a study, not a benchmark (bench/ has those).
# PREFETCH=1 adds, per load factor, the same cache with prefetch_pipeline (variant cached_L_pf)
# and runs every variant under pipeline sparse_dist (prefetch needs a pipeline that has the next
# batch's ids a step ahead), so that the hit rates with and without prefetch compare.
# Usage: bench/host_cache_study.sh (BIN, STEPS, LOADS, POLICY, PREFETCH, OUT optional).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/build/app/cli/embedscope}
STEPS=${STEPS:-20}
LOADS=${LOADS:-0.05 0.2}
POLICY=${POLICY:-lru}
PREFETCH=${PREFETCH:-0}
OUT=${OUT:-$(mktemp -d)}
WL=$ROOT/resources/workloads/criteo_kaggle.json
VARIANTS="device"
for l in $LOADS; do
  VARIANTS="$VARIANTS cached_$l"
  if [ "$PREFETCH" = 1 ]; then VARIANTS="$VARIANTS cached_${l}_pf"; fi
done
for v in $VARIANTS; do
  python3 - "$WL" "$v" "$POLICY" "$PREFETCH" > "$OUT/$v.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); v = sys.argv[2]
j["name"] = "criteo_kaggle_" + v
if sys.argv[4] == "1":
    j["pipeline"] = "sparse_dist"
if v.startswith("cached_"):
    pf = v.endswith("_pf")
    for t in j["tables"]:
        t["placement"], t["cache_load_factor"], t["cache_policy"] = "host_cached", float(v[7:].removesuffix("_pf")), sys.argv[3]
        if pf:
            t["prefetch_pipeline"] = True
print(json.dumps(j))
PY
  "$BIN" run "$OUT/$v.json" --devices 4 --steps "$STEPS" -o "$OUT/$v.db" --force-overwrite --json > "$OUT/$v.out.json"
done
python3 - "$OUT" $VARIANTS <<'PY'
import json, sys
out = sys.argv[1]
print(f"{'run':<15} {'device peak/rank (max)':>22} {'host bytes (all)':>16} {'hit rate':>9} {'rows fetched/step':>17} {'H2D/step':>10} {'D2H/step':>10} {'step ms':>8} {'prefetched/step':>16}")
for v in sys.argv[2:]:
    j = json.load(open(f"{out}/{v}.out.json"))
    t = j["tables"]
    peak = max(r["memory_bytes"] for r in j["ranks"])
    host = sum(sum(x.get("host_bytes", [])) for x in t)
    hits, misses = sum(x.get("cache_hits", 0) for x in t), sum(x.get("cache_misses", 0) for x in t)
    n = j["steps"]
    rate = f"{100 * hits / (hits + misses):.1f}%" if hits + misses else "-"
    print(f"{v:<15} {peak/2**20:>18.1f} MiB {host/2**20:>12.1f} MiB {rate:>9} {sum(x.get('rows_fetched', 0) for x in t)/n:>17.0f} "
          f"{sum(x.get('bytes_h2d', 0) for x in t)/n/2**20:>6.2f} MiB {sum(x.get('bytes_d2h', 0) for x in t)/n/2**20:>6.2f} MiB {j['step_time_ns']['mean']/1e6:>8.0f} {sum(x.get('prefetched_rows', 0) for x in t)/n:>16.0f}")
PY
