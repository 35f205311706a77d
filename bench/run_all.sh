#!/usr/bin/env bash
# Builds and runs every CPU benchmark (the GPU ones run from tests/gpu/run_device_checks.sh).
# Usage: bench/run_all.sh [BUILD_DIR]   (default: build-bench, Release)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-bench}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DEMBEDSCOPE_BUILD_BENCH=ON -DEMBEDSCOPE_BUILD_TESTS=OFF
targets=(bench_kernels bench_sessions bench_allocator bench_planner bench_pipelines bench_simulate bench_input)
if grep -q "EMBEDSCOPE_BUILD_UI:BOOL=ON" "$build/CMakeCache.txt"; then targets+=(bench_ui_paint); fi
targets+=(bench_memory_view bench_import bench_merge bench_launch bench_lm_study)
cmake --build "$build" -j2 --target "${targets[@]}"
"$build/bench/bench_kernels"
"$build/bench/bench_sessions"
"$build/bench/bench_allocator"
# plan with N and 10 N tables: ratio_10x_tables ~10 (O(n log n)), ~100 would be quadratic
"$build/bench/bench_planner"
# criteo_kaggle, 4 ranks, 1 GB/s links: base / sparse_dist / semi_sync x fp32 / bf16, ratios to base
"$build/bench/bench_pipelines"
# the LM memory estimate of row_wise on 64 / 256 ranks: one token draw for all ranks vs a replay per rank
"$build/bench/bench_lm_study"
# criteo_kaggle row-wise on 1,024 simulated H100s, 10 steps: ratio_to_5s_goal below 1 meets the goal
"$build/bench/bench_simulate"
# the Criteo reader (parse + batch + bucketize) vs a plain line scan of a generated 16 MB file
"$build/bench/bench_input"
if [[ -x "$build/bench/bench_ui_paint" ]]; then "$build/bench/bench_ui_paint"; fi
# a 10 MB PyTorch memory snapshot of 100k entries: import + the view's model (goal 2 s), one scrub step (goal 16 ms)
"$build/bench/bench_memory_view"
# the Kineto importer on a generated 8 x 250 MB trace: MB/s (goal 150 on one core), peak RSS (goal
# 1 GiB), python3 json.load of one rank file and HTA when installed (EMBEDSCOPE_BENCH_IMPORT_MB=400 for a quick run)
"$build/bench/bench_import"
# embedscope merge of 2 / 4 / 8 rank sessions vs a plain SQLite copy of the same rows
"$build/bench/bench_merge"
# criteo_kaggle on 4 processes vs 4 threads (step time), the store rendezvous of 8 and 64 processes vs threads
"$build/bench/bench_launch"
