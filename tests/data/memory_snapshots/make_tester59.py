"""Fixtures of a user's fragmentation OOM (tester59), with hand-computed figures.

tester59_mine.pickle, device 0: large segment A = 0x7f0000000000 (20 MiB), small segment B =
0x7f0100000000 (2 MiB). Trace (12 entries): 0 segment_alloc A; 1-4 alloc 4 MiB at A+0/4/8/12 MiB;
5 segment_alloc B; 6 alloc 1000 B at B (block 1024); 7-8 free A+0 (free_requested,
free_completed); 9-10 free A+8 MiB; 11 oom of 6 MiB with device_free 4 MiB.
Hand figures: peak allocated 16 MiB + 1024 at entry 6; peak reserved 22 MiB (first at entry 5);
capacity 26 MiB (device_free + reserved). The 6 MiB request needs a new 20 MiB large segment:
22 + 20 > 26, so caching runs out; expandable needs one more 20 MiB page too; max_split_size 20
MiB does not change how 4 MiB requests split; direct holds 8 MiB + 1 KiB + 6 MiB = 14 MiB <= 26:
only direct completes the trace.
Variants: tester59_wrap_segment.pickle (segment B moved to 0xfffffffffff00000, 2 MiB: ends past
2^64), tester59_wrap_block.pickle (a block of B given the address 2^64 - 512, size 1024),
tester59_wrap_entry.pickle (entry 6's alloc at 2^64 - 512 for 1000 B), tester59_badfree.pickle
(entry 8's free_completed points at A + 123, inside the block at A, at no block start: the one
import problem is entry 8, taken as the completion of entry 7's free of A; every figure is
tester59_mine.pickle's, and the trace still starts at the process start),
tester59_gc.pickle (allocator_settings garbage_collection_threshold 0.6), tester59_notsnap.pickle
(a pickle that is no snapshot: {"hello": [1, 2, 3]}).
Run: python3 make_tester59.py (writes beside itself).
"""
import copy
import os
import pickle

os.chdir(os.path.dirname(os.path.abspath(__file__)))
MiB = 1 << 20
A = 0x7f0000000000
B = 0x7f0100000000
t = [0]


def fr(n):
    return [{"filename": "train.py", "line": n, "name": f"op{n}"}]


def e(action, addr, size, stream=0):
    t[0] += 10
    return {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": 1_000_000 + t[0],
            "frames": fr(t[0] // 10)}


tr = [e("segment_alloc", A, 20 * MiB),
      e("alloc", A, 4 * MiB), e("alloc", A + 4 * MiB, 4 * MiB), e("alloc", A + 8 * MiB, 4 * MiB),
      e("alloc", A + 12 * MiB, 4 * MiB),
      e("segment_alloc", B, 2 * MiB), e("alloc", B, 1000),
      e("free_requested", A, 4 * MiB), e("free_completed", A, 4 * MiB),
      e("free_requested", A + 8 * MiB, 4 * MiB), e("free_completed", A + 8 * MiB, 4 * MiB)]
tr.append({"action": "oom", "device_free": 4 * MiB, "size": 6 * MiB, "stream": 0, "time_us": 1_000_200,
           "frames": fr(99)})


def blk(a, s, st, req=None, f=None):
    return {"address": a, "size": s, "requested_size": s if req is None else req, "state": st, "frames": f or []}


segA = {"device": 0, "address": A, "total_size": 20 * MiB, "allocated_size": 8 * MiB, "active_size": 8 * MiB,
        "requested_size": 8 * MiB, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
        "is_expandable": False, "frames": fr(1),
        "blocks": [blk(A, 4 * MiB, "inactive", 0), blk(A + 4 * MiB, 4 * MiB, "active_allocated", None, fr(3)),
                   blk(A + 8 * MiB, 4 * MiB, "inactive", 0),
                   blk(A + 12 * MiB, 4 * MiB, "active_allocated", None, fr(5)),
                   blk(A + 16 * MiB, 4 * MiB, "inactive", 0)]}
segB = {"device": 0, "address": B, "total_size": 2 * MiB, "allocated_size": 1024, "active_size": 1024,
        "requested_size": 1000, "stream": 0, "segment_type": "small", "segment_pool_id": (0, 0),
        "is_expandable": False, "frames": fr(6),
        "blocks": [blk(B, 1024, "active_allocated", 1000, fr(7)), blk(B + 1024, 2 * MiB - 1024, "inactive", 0)]}
settings = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.0,
            "expandable_segments": False}
snap = {"segments": [segA, segB], "device_traces": [tr], "allocator_settings": settings}


def dump(s, name):
    with open(name, "wb") as f:
        pickle.dump(s, f, protocol=4)


dump(snap, "tester59_mine.pickle")

top = (1 << 64) - 1 * MiB  # 0xfffffffffff00000: a 2 MiB segment there ends 1 MiB past 2^64
w = copy.deepcopy(snap)
for x in w["device_traces"][0]:
    if x["action"] != "oom" and x["addr"] >= B:
        x["addr"] = top + (x["addr"] - B)
w["segments"][1]["address"] = top
for b in w["segments"][1]["blocks"]:
    b["address"] = top + (b["address"] - B)
dump(w, "tester59_wrap_segment.pickle")

wb = copy.deepcopy(snap)
wb["segments"][1]["blocks"][1]["address"] = (1 << 64) - 512
wb["segments"][1]["blocks"][1]["size"] = 1024
dump(wb, "tester59_wrap_block.pickle")

we = copy.deepcopy(snap)
we["device_traces"][0][6]["addr"] = (1 << 64) - 512
dump(we, "tester59_wrap_entry.pickle")

bf = copy.deepcopy(snap)
bf["device_traces"][0][8]["addr"] = A + 123
dump(bf, "tester59_badfree.pickle")

gc = copy.deepcopy(snap)
gc["allocator_settings"]["garbage_collection_threshold"] = 0.6
dump(gc, "tester59_gc.pickle")

dump({"hello": [1, 2, 3]}, "tester59_notsnap.pickle")
