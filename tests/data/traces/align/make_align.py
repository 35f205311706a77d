#!/usr/bin/env python3
"""Writes rank0.json and rank1.json: two Kineto traces of one 2-rank job whose rank 1 clock runs
400 us ahead of rank 0's (tests/sessions/importers/clock_align_test.cpp).

Each rank runs five all-reduces (process group "0", Seq 0..4): a record_param_comms span at
100 + 1000 k us launching an NCCL kernel at 200 + 1000 k us that ends at 500 + 1000 k us on rank
0. On rank 1 every time is + 400 us, and the kernel ends are off by {0, +2, -1, +3, -2} us more
(completion latency): the offset is the median, 400 us exactly; the residual skews are
{0, 2, 1, 3, 2} us: max 3 us, median 2 us. Rank 1 also has one compute kernel that starts 10 us
before the cudaLaunchKernel that launched it (a launch-before-kernel violation: flagged, kept).
"""
import json
import os

AHEAD_US = 400
JITTER_US = [0, 2, -1, 3, -2]


def trace(rank):
    shift = AHEAD_US if rank == 1 else 0
    ev = [{"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "main"}}]
    corr = 1
    for k in range(5):
        t = 1000 * k + shift
        end = 500 + 1000 * k + shift + (JITTER_US[k] if rank == 1 else 0)
        ev.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 100 + t,
                   "dur": 20, "args": {"Collective name": "allreduce", "In msg nelems": 1000, "Out msg nelems": 1000,
                                       "Group size": 2, "dtype": "Float", "Process Group Name": "0",
                                       "Process Group Ranks": "[0, 1]", "Seq": k}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 105 + t,
                   "dur": 5, "args": {"correlation": corr}})
        ev.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                   "pid": 0, "tid": 13, "ts": 200 + t, "dur": end - (200 + t),
                   "args": {"device": 0, "stream": 13, "correlation": corr}})
        corr += 1
    # a compute kernel: launched at 700 us (+ shift); on rank 1 it starts 10 us before its launch
    start = 690 + shift if rank == 1 else 720
    ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 700 + shift,
               "dur": 5, "args": {"correlation": corr}})
    ev.append({"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": start, "dur": 50,
               "args": {"device": 0, "stream": 7, "correlation": corr}})
    return {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}, "traceEvents": ev}


here = os.path.dirname(os.path.abspath(__file__))
for r in (0, 1):
    with open(os.path.join(here, f"rank{r}.json"), "w") as f:
        json.dump(trace(r), f, indent=0)
        f.write("\n")
