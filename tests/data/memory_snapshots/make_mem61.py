"""A recorded run with garbage_collection_threshold 0.5 (mem61_gc.pickle), hand-computed.

The allocation sequence of tests/engine/memory/mem61_gc_threshold_test.cpp as PyTorch's caching
allocator records it with PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.5 on 100 MiB
allowed: small segment S (2 MiB; 512 KiB allocated and freed twice), large segments A 12 MiB,
B 14, C 16, X 18, Y 24, Z 30 MiB, each for one request of its size. The collection before Y's
segment_alloc releases A (ages A 2, B 1: average 1.5); the one before Z's releases B (ages B 2,
C 1, Y 1: average 4/3; 14 MiB < the 24 MiB target), then C and Y (average 1). Entries:
 0 segment_alloc S, 1 alloc S 512 KiB, 2-3 free S; 4-5 A; 6-7 B; 8-9 C; 10-11 free A; 12-13 X;
 14-15 free B; 16 alloc S 512 KiB, 17-18 free S; 19 segment_free A, 20-21 Y; 22-23 free C,
 24-25 free Y; 26-28 segment_free B, C, Y, 29-30 Z.
Reserved: peak 74 MiB (entry 20), final 50 MiB (S, X, Z: the dump's three segments). The same
requests without the threshold (replay-memory --allocator caching --capacity 100 MiB): Y takes
86 MiB, and Z releases every free segment and retries: 48 MiB, peak 86 MiB.
Run: python3 make_mem61.py (writes beside itself).
"""
import os
import pickle

os.chdir(os.path.dirname(os.path.abspath(__file__)))
MiB = 1 << 20
S, A, B, C, X, Y, Z = (0x7f0000000000 + k * 0x10000000 for k in range(7))
t = [0]


def e(action, addr, size):
    t[0] += 10
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": 1_000_000 + t[0],
            "frames": [{"filename": "train.py", "line": t[0] // 10, "name": f"op{t[0] // 10}"}]}


def seg(addr, size):
    return [e("segment_alloc", addr, size), e("alloc", addr, size)]


def free(addr, size):
    return [e("free_requested", addr, size), e("free_completed", addr, size)]


half = 512 * 1024
tr = ([e("segment_alloc", S, 2 * MiB), e("alloc", S, half)] + free(S, half) + seg(A, 12 * MiB) + seg(B, 14 * MiB) +
      seg(C, 16 * MiB) + free(A, 12 * MiB) + seg(X, 18 * MiB) + free(B, 14 * MiB) + [e("alloc", S, half)] +
      free(S, half) + [e("segment_free", A, 12 * MiB)] + seg(Y, 24 * MiB) + free(C, 16 * MiB) + free(Y, 24 * MiB) +
      [e("segment_free", B, 14 * MiB), e("segment_free", C, 16 * MiB), e("segment_free", Y, 24 * MiB)] +
      seg(Z, 30 * MiB))
assert len(tr) == 31


def segment(addr, size, small, allocated):
    return {"device": 0, "address": addr, "total_size": size, "allocated_size": size if allocated else 0,
            "active_size": size if allocated else 0, "requested_size": size if allocated else 0, "stream": 0,
            "segment_type": "small" if small else "large", "segment_pool_id": (0, 0), "is_expandable": False,
            "frames": [],
            "blocks": [{"address": addr, "size": size, "requested_size": size if allocated else 0,
                        "state": "active_allocated" if allocated else "inactive", "frames": []}]}


settings = {"PYTORCH_CUDA_ALLOC_CONF": "garbage_collection_threshold:0.5", "max_split_size": -1,
            "garbage_collection_threshold": 0.5, "expandable_segments": False}
snap = {"segments": [segment(S, 2 * MiB, True, False), segment(X, 18 * MiB, False, True),
                     segment(Z, 30 * MiB, False, True)],
        "device_traces": [tr], "allocator_settings": settings}
with open("mem61_gc.pickle", "wb") as f:
    pickle.dump(snap, f, protocol=4)
