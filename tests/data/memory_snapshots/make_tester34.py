#!/usr/bin/python3
"""Writes the small snapshots of tester34's memory defects (no torch needed):

  small_oom_p4.pickle   one 20 MiB segment; allocs of 4, 8 (request 8 MiB - 100 B at the dump)
                        and 2 MiB, the 4 MiB one freed; an OOM asking 30 MiB with device_free
                        6 MiB. Device 1 has an empty trace. Peak allocated 12 MiB at entry 2 (8 of
                        20 MiB free in one block: memviz 64/400 = 0.16); reserved first at its
                        peak, 20 MiB, with the alloc of entry 1 (16 of 20 MiB free: memviz 0.64).
  shrunk_oom_p4.pickle  two 9 MiB allocs fill most of a 20 MiB segment, a third takes a second
                        one (peak reserved 40 MiB, first with the alloc of entry 4), freed again
                        (empty_cache), then an OOM asking 30 MiB with device_free 2 MiB: the
                        capacity free + reserved at the OOM is 22 MiB, below the trace's own 40.

Run: /usr/bin/python3 tests/data/memory_snapshots/make_tester34.py (writes beside itself).
"""
import os
import pickle

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20
A = 0x7F0000000000
SETTINGS = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.0,
            "expandable_segments": False, "roundup_power2_divisions": {"1": 0}}


def frames(name, line):
    return [{"filename": "train.py", "line": line, "name": name}]


def entries(spec):
    out, t = [], 1000
    for action, addr, size, name, line, *extra in spec:
        t += 10
        e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t, "frames": frames(name, line)}
        if extra:
            e.update(extra[0])
        out.append(e)
    return out


def segment(addr, blocks):
    return {"device": 0, "address": addr, "total_size": 20 * MiB, "stream": 0, "segment_type": "large",
            "segment_pool_id": (0, 0), "is_expandable": False, "frames": frames("seg", 5),
            "allocated_size": sum(b["size"] for b in blocks if b["state"] != "inactive"),
            "active_size": sum(b["size"] for b in blocks if b["state"] != "inactive"),
            "requested_size": sum(b["requested_size"] for b in blocks), "blocks": blocks}


def block(addr, size, requested, state, name=None, line=0):
    b = {"address": addr, "size": size, "requested_size": requested, "state": state}
    if name:
        b["frames"] = frames(name, line)
    return b


small = {"segments": [segment(A, [block(A, 4 * MiB, 4 * MiB, "inactive"),
                                  block(A + 4 * MiB, 8 * MiB, 8 * MiB - 100, "active_allocated", "emb_b", 11),
                                  block(A + 12 * MiB, 2 * MiB, 2 * MiB, "active_allocated", "emb_c", 13),
                                  block(A + 14 * MiB, 6 * MiB, 0, "inactive")])],
         "device_traces": [entries([("segment_alloc", A, 20 * MiB, "seg", 5), ("alloc", A, 4 * MiB, "emb_a", 10),
                                    ("alloc", A + 4 * MiB, 8 * MiB, "emb_b", 11),
                                    ("free_requested", A, 4 * MiB, "emb_a", 12),
                                    ("free_completed", A, 4 * MiB, "emb_a", 12),
                                    ("alloc", A + 12 * MiB, 2 * MiB, "emb_c", 13),
                                    ("oom", 6 * MiB, 30 * MiB, "big", 20, {"device_free": 6 * MiB})]), []],
         "allocator_settings": SETTINGS}
B = A + 0x10000000
shrunk = {"segments": [segment(A, [block(A, 9 * MiB, 9 * MiB, "active_allocated", "w", 1),
                                   block(A + 9 * MiB, 9 * MiB, 9 * MiB, "active_allocated", "x", 3),
                                   block(A + 18 * MiB, 2 * MiB, 0, "inactive")])],
          "device_traces": [entries([("segment_alloc", A, 20 * MiB, "seg", 5), ("alloc", A, 9 * MiB, "w", 1),
                                     ("alloc", A + 9 * MiB, 9 * MiB, "x", 3),
                                     ("segment_alloc", B, 20 * MiB, "seg", 5), ("alloc", B, 9 * MiB, "act", 2),
                                     ("free_requested", B, 9 * MiB, "act", 2),
                                     ("free_completed", B, 9 * MiB, "act", 2),
                                     ("segment_free", B, 20 * MiB, "empty_cache", 9),
                                     ("oom", 2 * MiB, 30 * MiB, "big", 20, {"device_free": 2 * MiB})])],
          "allocator_settings": SETTINGS}
for name, snap in (("small_oom_p4.pickle", small), ("shrunk_oom_p4.pickle", shrunk)):
    with open(os.path.join(HERE, name), "wb") as f:
        pickle.dump(snap, f, protocol=4)
