#!/usr/bin/env python3
"""Holistic Trace Analysis' own checks on a folder of per-rank Kineto traces, without HTA.

HTA (github.com/facebookresearch/HolisticTraceAnalysis) cannot be installed where Embedscope is
built (no PyPI); this script redoes, with the standard library only, what HTA does to a trace
folder before and in its communication/computation overlap analysis, so that the output of
`embedscope export SESSION.db --format kineto -o DIR` can be checked against it:

  hta/common/trace_file.py   create_rank_to_trace_dict: every .json / .gz file of DIR; a file's
                             rank is the first line matching "rank":\\s+(\\d+); ranks unique.
  hta/common/trace_parser.py metadata = the keys before "traceEvents" (ijson reader); events
                             without "dur" or "cat" dropped, cat "Trace" dropped; ns-precision
                             (float) ts rounded: ts up, end down; args.stream to int, else -1.
  hta/common/trace.py        GPU kernels: stream >= 0 and correlation >= 0 (or names Event Sync /
                             Context Sync); the rest are CPU events. ProfilerStep names must match
                             ProfilerStep#(\\d+) (HTA asserts). With >= 2 steps, only GPU kernels
                             whose correlation is a CPU event's that starts before the last step
                             are kept (_filter_irrelevant_gpu_kernels).
  hta/common/types.py, hta/analyzers/communication_analysis.py
                             kernel classes by name; overlap % = time computing while
                             communicating / time communicating, on merged intervals per rank.

Usage: python3 bench/hta_check.py DIR   (exit 0: no violation; 1: violations listed; 2: bad use)
Prints per rank: kernels by class, kept after the step filter, HTA's overlap %.
"""
import gzip
import json
import math
import os
import re
import sys

COMM = re.compile(r"(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)")
MEMORY = re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")
NOT_COMPUTE = re.compile(
    r"(^nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|(^.*Sync)|(^Stream Wait Event)|(cuda.*LaunchKernel)|(^runFunction)"
    r"|(^hip)|(^job_exe)|(^packet)|(^pe_exe)|(^cpum_exe_subgraph)|(^hccl)|(^collective_subgraph_execution)")
RANK = re.compile(r'"rank":\s+(\d+)')
STEP = re.compile(r"ProfilerStep\s*#\s*(\d+)")


def kernel_type(name):
    if COMM.match(name):
        return "COMMUNICATION"
    if MEMORY.match(name):
        return "MEMORY"
    if not NOT_COMPUTE.match(name):
        return "COMPUTATION"
    return "OTHER"


def merge(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def overlap_pct(comp, comm):
    comp, comm = merge(comp), merge(comm)
    total = sum(e - s for s, e in comm)
    if total == 0:
        return None
    both, i = 0, 0
    for s, e in comm:
        for cs, ce in comp:
            if ce > s and cs < e:
                both += min(e, ce) - max(s, cs)
    return 100.0 * both / total


def as_int(v, default=-1):
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def check(trace_dir):
    problems = []
    files = sorted(f for f in os.listdir(trace_dir) if f.endswith(".json") or f.endswith(".gz"))
    if not files:
        return ["no .json / .gz file in " + trace_dir], {}
    ranks = {}
    for f in files:
        path = os.path.join(trace_dir, f)
        opener = gzip.open if f.endswith(".gz") else open
        with opener(path, "rt") as fh:
            text = fh.read()
        rank = None
        for line in text.splitlines():
            m = RANK.search(line)
            if m:
                rank = int(m.group(1))
                break
        if rank is None:
            problems.append(f"{path}: no line matches \"rank\":\\s+(\\d+) (HTA takes it as rank 0)")
            rank = 0
        if rank in ranks:
            problems.append(f"{path}: rank {rank} again (also {ranks[rank][0]}); HTA keeps the last")
        data = json.loads(text)
        if text.find('"traceEvents"') < text.find('"distributedInfo"'):
            problems.append(f"{path}: distributedInfo after traceEvents (HTA's ijson metadata reader stops there)")
        ranks[rank] = (path, data)
    results = {}
    for rank, (path, data) in sorted(ranks.items()):
        info = data.get("distributedInfo", {})
        if info.get("rank") != rank:
            problems.append(f"{path}: distributedInfo.rank {info.get('rank')} != {rank}")
        events = []
        for e in data.get("traceEvents", []):
            if "dur" not in e or "cat" not in e or e.get("cat") == "Trace":
                continue
            ts, dur = e.get("ts"), e.get("dur")
            if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)):
                problems.append(f"{path}: event {e.get('name')!r}: ts / dur not numbers")
                continue
            if isinstance(ts, float) or isinstance(dur, float):  # round_down_time_stamps
                end = math.floor(ts + dur)
                ts = math.ceil(ts)
                dur = end - ts
            args = e.get("args", {}) or {}
            events.append({"name": e.get("name", ""), "cat": e["cat"], "ts": ts, "dur": dur,
                           "stream": as_int(args.get("stream")), "correlation": as_int(args.get("correlation"))})
        gpu = [e for e in events if (e["stream"] >= 0 and e["correlation"] >= 0)
               or e["name"] in ("Event Sync", "Context Sync")]
        cpu = [e for e in events if not ((e["stream"] >= 0 and e["correlation"] >= 0)
                                         or e["name"] in ("Event Sync", "Context Sync"))]
        steps = [e for e in cpu if e["name"].startswith("ProfilerStep")]
        for s in steps:
            if not STEP.match(s["name"]):
                problems.append(f"{path}: {s['name']!r} fails HTA's ProfilerStep#(\\d+) (an assert in add_iteration)")
        cpu_corr = {}
        for e in cpu:
            if e["correlation"] >= 0:
                cpu_corr.setdefault(e["correlation"], e)
        for k in gpu:
            if k["stream"] == 0:
                problems.append(f"{path}: kernel {k['name']!r} on stream 0 (HTA gives it no iteration)")
            if k["correlation"] not in cpu_corr and k["name"] not in ("Event Sync", "Context Sync"):
                problems.append(f"{path}: kernel {k['name']!r} correlation {k['correlation']} has no CPU event")
        kept = gpu
        if len({s["name"] for s in steps}) >= 2:
            last = max(s["ts"] for s in steps)
            ok = {c for c, e in cpu_corr.items() if e["ts"] < last}
            kept = [k for k in gpu if k["correlation"] in ok]
        kinds = {}
        for k in gpu:
            kinds[kernel_type(k["name"])] = kinds.get(kernel_type(k["name"]), 0) + 1
        comp = [(k["ts"], k["ts"] + k["dur"]) for k in kept if k["stream"] != -1 and kernel_type(k["name"]) == "COMPUTATION"]
        comm = [(k["ts"], k["ts"] + k["dur"]) for k in kept if k["stream"] != -1 and kernel_type(k["name"]) == "COMMUNICATION"]
        results[rank] = {"file": os.path.basename(path), "events": len(events), "gpu_kernels": len(gpu),
                         "kinds": kinds, "kept_after_step_filter": len(kept), "profiler_steps": len(steps),
                         "overlap_pct": overlap_pct(comp, comm)}
    return problems, results


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print(__doc__.strip().splitlines()[0] + "\nusage: hta_check.py DIR", file=sys.stderr)
        return 2
    problems, results = check(sys.argv[1])
    for rank, r in results.items():
        ov = "n/a (no communication kernels)" if r["overlap_pct"] is None else f"{r['overlap_pct']:.2f}%"
        print(f"rank {rank} ({r['file']}): {r['events']} events, {r['profiler_steps']} ProfilerSteps, "
              f"{r['gpu_kernels']} GPU kernels {r['kinds']}, {r['kept_after_step_filter']} kept by the step filter, "
              f"comm/comp overlap {ov}")
    for p in problems:
        print("VIOLATION: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
