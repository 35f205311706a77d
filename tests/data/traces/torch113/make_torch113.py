#!/usr/bin/env python3
"""Trims real torch 1.13.1 legacy-profiler traces into the fixtures of this directory.

The inputs were written by Debian's python3-torch 1.13.1 (no Kineto: torch.profiler falls back to
the legacy profiler, whose tensorboard_trace_handler / export_chrome_trace write a bare JSON
array of "X" events on pid "CPU functions", ts from the profiler's own start, no
distributedInfo): the scripts gen_cycles.py, gen_odd.py, gen_single.py, gen_dist.py and
gen_empty.py of a user's test run (schedule(wait=1, warmup=1, active=2, repeat=3) over 14 steps;
schedule(wait=0, warmup=0, active=6) over 6 uneven steps; a DLRM-like step loop; a 2-rank gloo
DDP + all_to_all_single job; an empty profile). Two fixtures are cut or shortened from them as a
failure leaves a trace: the three windows each cut short (cycles_cut/), and the DLRM loop whose
last iteration raised in its forward pass (dlrm_crash.pt.trace.json, beside the same loop whole:
dlrm_whole.pt.trace.json). Trimming keeps every ProfilerStep span, every
gloo:* / c10d:: / record_function span and the profiler's own start-up ops, and the first ops of
each step, with their real times; events stay in the file's order (start order), written as
torch writes them (json.dumps of the list). Run: make_torch113.py SRC_DIR (the run's directory).
"""
import json
import os
import sys

SRC = sys.argv[1] if len(sys.argv) > 1 else "/tmp/testerB"
OUT = os.path.dirname(os.path.abspath(__file__))


def load(path):
    with open(os.path.join(SRC, path)) as f:
        return json.load(f)


def write(name, events):
    os.makedirs(os.path.dirname(os.path.join(OUT, name)), exist_ok=True)
    with open(os.path.join(OUT, name), "w") as f:
        f.write(json.dumps(events))


KEEP_NAMES = ("ProfilerStep#", "gloo:", "c10d::", "pooled_a2a")


def trim(events, per_step):
    """Every step span and named span; per step the first `per_step` other ops starting in it."""
    steps = [e for e in events if e["name"].startswith("ProfilerStep#")]
    taken = {}
    out = []
    for e in events:
        if e["name"].startswith(KEEP_NAMES):
            out.append(e)
            continue
        inside = [s for s in steps if s["ts"] <= e["ts"] < s["ts"] + s["dur"]]
        key = inside[0]["ts"] if inside else None
        if key is None:  # before the first step: the profiler's own aten::zeros / empty / zero_
            out.append(e)
            continue
        taken[key] = taken.get(key, 0) + 1
        if taken[key] <= per_step:
            out.append(e)
    return out


# 1. three windows of one process (worker "trainer"): steps 1-2, 5-6, 9-10
for name in sorted(os.listdir(os.path.join(SRC, "cycles"))):
    write("cycles/" + name, trim(load("cycles/" + name), 8))
# 2. uneven steps (ProfilerStep#0 twice: torch 1.13 with wait=0) and the stub window after the loop
for name in sorted(os.listdir(os.path.join(SRC, "odd/uneven"))):
    write("uneven/" + name, trim(load("odd/uneven/" + name), 6))
# 3. a DLRM-like trace cut inside ProfilerStep#2's ops (as a killed writer leaves it): steps 1-2
#    with their first 20 ops each, the text cut in the middle of step 2's 13th op
dlrm = [e for e in trim(load("single/dlrm.1796600488652.pt.trace.json"), 20)
        if e["ts"] < 14077]  # before ProfilerStep#3
text = json.dumps(dlrm)
step2 = next(i for i, e in enumerate(dlrm) if e["name"] == "ProfilerStep#2")
cut_in = dlrm[step2 + 13]
at = text.index(json.dumps(cut_in)) + 40
with open(os.path.join(OUT, "dlrm_cut.pt.trace.json"), "w") as f:
    f.write(text[:at])
# 4. two gloo ranks (their own worker names rank0 / rank1)
for name in sorted(os.listdir(os.path.join(SRC, "dist2"))):
    write("dist2/" + name, trim(load("dist2/" + name), 6))
# 5. torch's export of a profile that recorded nothing
with open(os.path.join(SRC, "bad/real_empty.json")) as f, open(os.path.join(OUT, "real_empty.json"), "w") as g:
    g.write(f.read())
# 6. the three windows of 1., each file cut inside its last step's ops (as a killed writer or a
#    full disk leaves each window's file): the text cut in the middle of the last step's 5th op
for name in sorted(os.listdir(os.path.join(SRC, "cycles"))):
    events = trim(load("cycles/" + name), 8)
    text = json.dumps(events)
    last = max(i for i, e in enumerate(events) if e["name"].startswith("ProfilerStep#"))
    at = text.index(json.dumps(events[last + 5])) + 40
    os.makedirs(os.path.join(OUT, "cycles_cut"), exist_ok=True)
    with open(os.path.join(OUT, "cycles_cut", name), "w") as f:
        f.write(text[:at])
# 7. the DLRM loop of 3., steps 1-3: per step its first 12 ops and its phases' top ops (the first
#    3 autograd::engine::evaluate_function spans of the backward pass, Optimizer.zero_grad# and
#    Optimizer.step#), whole (dlrm_whole); and with step 3 aborted in its forward pass (dlrm_crash):
#    its ops from Optimizer.zero_grad# on dropped, its span ending 58 us after its last op (the
#    untraced tail of the real crash of gen_odd.py's 4., where an exception ended the iteration
#    and p.stop() the step), nothing after it
def phases(events):
    steps = [e for e in events if e["name"].startswith("ProfilerStep#")]
    out, taken, backward = [], {}, {}
    for e in events:
        if e["name"].startswith("ProfilerStep#"):
            out.append(e)
            continue
        inside = [s for s in steps if s["ts"] <= e["ts"] < s["ts"] + s["dur"]]
        if not inside:
            out.append(e)
            continue
        key = inside[0]["ts"]
        if e["name"].startswith("Optimizer."):
            out.append(e)
        elif e["name"].startswith("autograd::engine::evaluate_function"):
            backward[key] = backward.get(key, 0) + 1
            if backward[key] <= 3:
                out.append(e)
        else:
            taken[key] = taken.get(key, 0) + 1
            if taken[key] <= 12:
                out.append(e)
    return out
dlrm3 = phases(load("single/dlrm.1796600488652.pt.trace.json"))
write("dlrm_whole.pt.trace.json", dlrm3)
step3 = next(e for e in dlrm3 if e["name"] == "ProfilerStep#3")
abort_at = next(e["ts"] for e in dlrm3 if e["ts"] >= step3["ts"] and e["name"].startswith("Optimizer.zero_grad#"))
crash = [dict(e) for e in dlrm3 if e["ts"] < abort_at]
last_end = max(e["ts"] + e["dur"] for e in crash if e["ts"] > step3["ts"])
for e in crash:
    if e["name"] == "ProfilerStep#3":
        e["dur"] = last_end + 58 - e["ts"]
write("dlrm_crash.pt.trace.json", crash)
