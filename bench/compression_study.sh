#!/usr/bin/env bash
# The compression study of issue 16: one workload, the same seed, steps and batches, its tables
# stored each way; per variant the table bytes per rank, the peak, the step time, the loss after
# the same steps and, on held-out batches the generator makes from iterations training never
# reaches (engine model/held_out.h; `run --held-out-batches`, default 4 global batches), the
# model's loss and ROC AUC, each against fp32's.
#
#   STUDY=criteo (default)  WORKLOAD (default criteo_kaggle) on 4 CPU ranks, seed 1, STEPS
#                           measured steps (default 20) after the workload's warmup
#   STUDY=terabyte          the same with WORKLOAD=criteo_terabyte_10m at its full rows (12.6 GB
#                           of fp32 rows; ROW_SCALE below scales them down)
#   STUDY=tradeoffs         the runs of the scenario resources/scenarios/compression.json
#
# Variants (VARIANTS, space-separated; default: every technique at two settings):
#   fp32                the reference
#   fp16 bf16           2-byte rows (FBGEMM's fp16 / bf16 weights)
#   int8 int4           FBGEMM's fused 8-bit / 4-bit row-wise rows (int4: stochastic rounding,
#                       its default); int4_rtn: int4 rounded to nearest; fp16_sr: fp16 with
#                       stochastic rounding
#   hash2 hash10        the hashing trick, hash_size = ceil(rows / 2) and ceil(rows / 10), fp32
#   rank_half rank_quarter  low_rank_dim = dim / 2 and dim / 4, fp32 factors
# ROW_SCALE (default 1): every table's num_embeddings divided by it (rounded up) before the
# variant is applied, so a workload too large for this host runs at a stated scale; the ids
# follow the smaller tables (they are drawn over num_embeddings). BATCH overrides batch_size.
# HELD_OUT: global held-out batches (default 4). Needs host memory for the fp32 run's tables
# (criteo_kaggle: 2.1 GB; criteo_terabyte_10m: 12.6 GB / ROW_SCALE) plus the ranks' buffers.
# Usage: bench/compression_study.sh (BIN, STEPS, OUT optional).
#
# STUDY=tradeoffs prints per scenario run the bytes of rows and of optimizer state on the
# busiest rank, the peak, the mean step time, the loss, the held-out AUC and the stored rows'
# error (about 1.5 GB of host memory; low-rank factors are fp32, so their stored error is 0:
# what the factorization costs shows in the loss and the AUC).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/build/app/cli/embedscope}
STEPS=${STEPS:-20}
HELD_OUT=${HELD_OUT:-4}
OUT=${OUT:-$(mktemp -d)}
STUDY=${STUDY:-criteo}
if [ "$STUDY" = tradeoffs ]; then
  SC=$ROOT/resources/scenarios/compression.json
  n=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["runs"]))' "$SC")
  for ((i = 0; i < n; i++)); do
    python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["runs"][int(sys.argv[2])]["workload"]))' \
      "$SC" "$i" > "$OUT/run$i.json"
    "$BIN" run "$OUT/run$i.json" --steps "$STEPS" --held-out-batches "$HELD_OUT" -o "$OUT/run$i.db" --force-overwrite \
      --json > "$OUT/run$i.out.json"
  done
  python3 - "$OUT" "$SC" <<'PY'
import json, sys
out, sc = sys.argv[1], json.load(open(sys.argv[2]))
print(f"{'run':<30} {'rows/rank':>11} {'state/rank':>11} {'peak/rank':>11} {'step ms':>8} {'loss first':>10} {'loss last':>10} {'held-out AUC':>12} {'rows rel err':>12} {'collisions/step':>15}")
for i, r in enumerate(sc["runs"]):
    j = json.load(open(f"{out}/run{i}.out.json"))
    W = j["world_size"]
    rows = max(sum(t["weight_bytes"][k] for t in j["tables"]) for k in range(W))
    state = max(sum(t["optimizer_state_bytes"][k] for t in j["tables"]) for k in range(W))
    peak = max(k["memory_bytes"] for k in j["ranks"])
    rel = max(t["relative_error"] for t in j["tables"])
    coll = sum(t["hash_collisions"] for t in j["tables"]) / j["steps"]
    h = j.get("held_out") or {}
    auc = f"{h['auc']:.4f}" if h.get("auc") is not None else "-"
    print(f"{r['label']:<30} {rows/2**20:>7.1f} MiB {state/2**20:>7.1f} MiB {peak/2**20:>7.1f} MiB {j['step_time_ns']['mean']/1e6:>8.0f} {j['loss_first']:>10.4f} {j['loss_last']:>10.4f} {auc:>12} {rel:>12.3g} {coll:>15.1f}")
PY
  exit 0
fi
if [ "$STUDY" = terabyte ]; then
  WORKLOAD=${WORKLOAD:-criteo_terabyte_10m}
  ROW_SCALE=${ROW_SCALE:-1}
fi
WORKLOAD=${WORKLOAD:-criteo_kaggle}
ROW_SCALE=${ROW_SCALE:-1}
WL=$ROOT/resources/workloads/$WORKLOAD.json
VARIANTS=${VARIANTS:-fp32 fp16 bf16 int8 int4 hash2 hash10 rank_half rank_quarter}
echo "study: $WORKLOAD, rows / $ROW_SCALE, batch ${BATCH:-as the workload says} a rank, $STEPS measured steps, $HELD_OUT held-out batches; sessions in $OUT" >&2
for v in $VARIANTS; do
  python3 - "$WL" "$v" "$ROW_SCALE" "${BATCH:-0}" > "$OUT/$v.json" <<'PY'
import json, math, sys
j = json.load(open(sys.argv[1])); v = sys.argv[2]; scale = int(sys.argv[3]); batch = int(sys.argv[4])
j["name"] = f"{j['name']}_{v}"
j["seed"] = 1
if batch > 0: j["batch_size"] = batch
for t in j["tables"]:
    t["num_embeddings"] = max(1, math.ceil(t["num_embeddings"] / scale))
    dim = t["embedding_dim"]
    if v == "hash2": t["hash_size"] = max(1, math.ceil(t["num_embeddings"] / 2))
    elif v == "hash10": t["hash_size"] = max(1, math.ceil(t["num_embeddings"] / 10))
    elif v == "rank_half": t["low_rank_dim"] = dim // 2
    elif v == "rank_quarter": t["low_rank_dim"] = dim // 4
    elif v == "int4_rtn": t["data_type"], t["stochastic_rounding"] = "int4", False
    elif v == "fp16_sr": t["data_type"], t["stochastic_rounding"] = "fp16", True
    elif v in ("fp16", "bf16", "int8", "int4"): t["data_type"] = v
    elif v != "fp32": sys.exit(f"unknown variant {v}")
print(json.dumps(j))
PY
  "$BIN" run "$OUT/$v.json" --devices 4 --steps "$STEPS" --held-out-batches "$HELD_OUT" -o "$OUT/$v.db" \
    --force-overwrite --json > "$OUT/$v.out.json"
done
python3 - "$OUT" $VARIANTS <<'PY'
import json, sys
out, variants = sys.argv[1], sys.argv[2:]
runs = {v: json.load(open(f"{out}/{v}.out.json")) for v in variants}
def table_bytes(j):  # the busiest rank's rows + optimizer state
    W = j["world_size"]
    return max(sum(t["weight_bytes"][r] + t["optimizer_state_bytes"][r] for t in j["tables"]) for r in range(W))
ref = runs.get("fp32")
print("| variant | tables / rank (rows + state) | vs fp32 | peak / rank | step ms | loss last | vs fp32 | held-out loss | held-out AUC | vs fp32 | rows' rel. error | collisions / step |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for v, j in runs.items():
    tb = table_bytes(j)
    peak = max(r["memory_bytes"] for r in j["ranks"])
    h = j.get("held_out") or {}
    auc = h.get("auc")
    rel = max(t["relative_error"] for t in j["tables"])
    coll = sum(t["hash_collisions"] for t in j["tables"]) / j["steps"]
    if ref is None or v == "fp32":
        d_tb = d_loss = d_auc = ""
    else:
        rh = ref.get("held_out") or {}
        d_tb = f"{100 * tb / table_bytes(ref):.1f} %"
        d_loss = f"{j['loss_last'] - ref['loss_last']:+.5f}"
        d_auc = f"{auc - rh['auc']:+.4f}" if auc is not None and rh.get("auc") is not None else "-"
    print(f"| {v} | {tb / 2**20:.1f} MiB | {d_tb} | {peak / 2**20:.1f} MiB | {j['step_time_ns']['mean'] / 1e6:.0f} | "
          f"{j['loss_last']:.5f} | {d_loss} | {h.get('loss', float('nan')):.5f} | "
          f"{'-' if auc is None else f'{auc:.4f}'} | {d_auc} | {rel:.3g} | {coll:.1f} |")
PY
