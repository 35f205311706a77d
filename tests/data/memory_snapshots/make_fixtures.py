#!/usr/bin/python3
"""Writes the PyTorch CUDA memory snapshot fixtures of issue 13 and expected.json beside them.

Run with /usr/bin/python3 (no torch needed):  tests/data/memory_snapshots/make_fixtures.py

The snapshots are shaped as torch.cuda.memory._snapshot() returns them (torch/cuda/memory.py,
torch/csrc/cuda/memory_snapshot.cpp): {"segments": [...], "device_traces": [[...], ...],
"allocator_settings": {...}}, pickled with the stdlib `pickle` module as
torch.cuda.memory._dump_snapshot does. Their traces come from a small emulation of PyTorch's
caching allocator below (512-byte rounding, small pool <= 1 MiB in 2 MiB segments, large pool
in 20 MiB segments below 10 MiB requests and the request rounded to 2 MiB above, best fit per
(stream, pool), split rules, coalescing, deferred frees of blocks used on another stream), so
the segments at the dump are exactly what the trace built. Every expected number in
expected.json is counted here, from the objects before pickling - never by the reader.
"""
import gzip
import json
import os
import pickle
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
KiB, MiB = 1024, 1024 * 1024


class Emulator:
    """PyTorch's caching allocator, enough of it to build consistent traces (no max_split_size)."""

    def __init__(self, device, base, settings):
        self.device, self.next_addr, self.settings = device, base, settings
        self.segments = []  # dicts: address, total_size, stream, small, blocks (list of dicts, address order)
        self.trace = []
        self.time_us = 1_000_000
        self.pending = {}  # address -> block awaiting free_completed
        self.peak = None   # figures() when the allocated bytes first reached their maximum
        self.ooms = []     # figures() at each oom entry, with the request and device_free

    def _frames(self, name, line):
        return [{"filename": "train.py", "line": line, "name": name},
                {"filename": "torch/nn/modules/module.py", "line": 1736, "name": "_call_impl"}]

    def _entry(self, action, addr, size, stream, frames=None):
        self.time_us += 7
        e = {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": self.time_us}
        if frames is not None:
            e["frames"] = frames
        self.trace.append(e)
        if action == "alloc":  # the state already holds the block: is this the peak?
            f = self.figures()
            if self.peak is None or f["allocated"] > self.peak["allocated"]:
                self.peak = f

    def figures(self):
        """The layout now, as `embedscope stats` reports it: allocated (blocks not pending),
        requested, reserved, free bytes in segments, the largest free block, both fragmentation
        measures, and the bytes held per innermost frame (active blocks, pending included)."""
        blocks = [b for s in self.segments for b in s["blocks"]]
        free = [b["size"] for b in blocks if b["state"] == "inactive"]
        held = {}
        for b in blocks:
            if b["state"] != "inactive":
                held[b["frames"][0]["name"]] = held.get(b["frames"][0]["name"], 0) + b["size"]
        return {"entry": len(self.trace) - 1,
                "allocated": sum(b["size"] for b in blocks if b["state"] == "active_allocated"),
                "requested": sum(b["requested_size"] for b in blocks if b["state"] == "active_allocated"),
                "reserved": sum(s["total_size"] for s in self.segments),
                "free_in_segments": sum(free), "largest_free_block": max(free, default=0),
                "external_fragmentation": 1 - max(free) / sum(free) if free else 0.0,
                # MemoryViz.js calculate_fragmentation: squared free gaps over the squared sum of the segments
                "memviz_fragmentation": sum(g * g for g in free) / sum(s["total_size"] for s in self.segments) ** 2
                if self.segments else 0.0,
                "held_by_frame": held}

    @staticmethod
    def round(n):
        return max(512, (n + 511) // 512 * 512)

    def alloc(self, requested, stream=0, name="forward", line=10):
        size = self.round(requested)
        small = size <= MiB
        best = None
        for seg in self.segments:
            if seg["stream"] != stream or seg["small"] != small:
                continue
            for b in seg["blocks"]:
                if b["state"] == "inactive" and b["size"] >= size:
                    if best is None or (b["size"], b["address"]) < (best[1]["size"], best[1]["address"]):
                        best = (seg, b)
        if best is None:
            seg_size = 2 * MiB if small else (20 * MiB if size < 10 * MiB else (size + 2 * MiB - 1) // (2 * MiB) * (2 * MiB))
            addr = self.next_addr
            self.next_addr += seg_size + 2 * MiB  # a gap: segments are not adjacent
            seg = {"address": addr, "total_size": seg_size, "stream": stream, "small": small,
                   "blocks": [{"address": addr, "size": seg_size, "requested_size": 0, "state": "inactive", "frames": []}],
                   "frames": self._frames(name, line)}
            self.segments.append(seg)
            self._entry("segment_alloc", addr, seg_size, stream, self._frames(name, line))
            best = (seg, seg["blocks"][0])
        seg, b = best
        rest = b["size"] - size
        if (small and rest >= 512) or (not small and rest > MiB):
            i = seg["blocks"].index(b)
            seg["blocks"].insert(i + 1, {"address": b["address"] + size, "size": rest, "requested_size": 0,
                                         "state": "inactive", "frames": []})
            b["size"] = size
        b.update(requested_size=requested, state="active_allocated", frames=self._frames(name, line))
        self._entry("alloc", b["address"], requested, stream, self._frames(name, line))
        return b["address"]

    def _find(self, addr):
        for seg in self.segments:
            for b in seg["blocks"]:
                if b["address"] == addr:
                    return seg, b
        raise KeyError(hex(addr))

    def free(self, addr, deferred=False):
        seg, b = self._find(addr)
        self._entry("free_requested", addr, b["requested_size"], seg["stream"])
        if deferred:  # used on another stream (record_stream): free once its event completes
            b["state"] = "active_pending_free"
            self.pending[addr] = b
            return
        self._complete(seg, b)

    def complete_pending(self, addr):
        seg, b = self._find(addr)
        del self.pending[addr]
        self._complete(seg, b)

    def _complete(self, seg, b):
        self._entry("free_completed", b["address"], b["requested_size"], seg["stream"])
        b.update(state="inactive", requested_size=0, frames=[])
        blocks = seg["blocks"]
        i = blocks.index(b)
        if i + 1 < len(blocks) and blocks[i + 1]["state"] == "inactive":
            b["size"] += blocks.pop(i + 1)["size"]
        if i > 0 and blocks[i - 1]["state"] == "inactive":
            blocks[i - 1]["size"] += blocks.pop(i)["size"]

    def empty_cache(self):
        for seg in list(self.segments):
            if len(seg["blocks"]) == 1 and seg["blocks"][0]["state"] == "inactive":
                self._entry("segment_free", seg["address"], seg["total_size"], seg["stream"])
                self.segments.remove(seg)

    def oom(self, requested, device_free, stream=0):
        # before it gives up, PyTorch releases every cached segment that holds no block
        # (release_cached_blocks) and retries: their segment_free entries precede the oom
        self.empty_cache()
        self.time_us += 7
        self.trace.append({"action": "oom", "device_free": device_free, "size": requested, "stream": stream,
                           "time_us": self.time_us, "frames": self._frames("backward", 99)})
        self.ooms.append(dict(self.figures(), request=requested, device_free=device_free))

    def segments_out(self):
        out = []
        for seg in self.segments:
            allocated = sum(b["size"] for b in seg["blocks"] if b["state"] == "active_allocated")
            active = sum(b["size"] for b in seg["blocks"] if b["state"] != "inactive")
            requested = sum(b["requested_size"] for b in seg["blocks"] if b["state"] != "inactive")
            out.append({"device": self.device, "address": seg["address"], "total_size": seg["total_size"],
                        "allocated_size": allocated, "active_size": active, "requested_size": requested,
                        "stream": seg["stream"], "segment_type": "small" if seg["small"] else "large",
                        "segment_pool_id": (0, 0), "is_expandable": False, "frames": seg["frames"],
                        "blocks": [dict(b) for b in seg["blocks"]]})
        return out


def settings(max_split=-1, expandable=False):
    # as memory_snapshot.cpp writes them (max_split_size: SIZE_MAX means unlimited; here -1 as int64)
    return {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True" if expandable else "",
            "max_split_size": max_split, "garbage_collection_threshold": 0.0, "expandable_segments": expandable,
            "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
            "pinned_use_cuda_host_register": False, "roundup_power2_divisions": {"1": 0, "2": 0, "4": 0}}


def training_device(device, base, steps):
    """Weights, then `steps` iterations of activations and gradients; stream 7 is a comm stream
    whose buffers are used by stream 0 (record_stream), so their frees complete later."""
    e = Emulator(device, base, settings())
    weights = [e.alloc(s, 0, "init_weights", 5) for s in (3 * MiB, 64 * MiB, 300 * KiB, 12 * MiB + 100)]
    for step in range(steps):
        acts = [e.alloc(s, 0, "forward", 20 + i) for i, s in enumerate((5 * MiB, 700 * KiB, 2 * MiB + 1, 30 * MiB))]
        comm = e.alloc(8 * MiB, 7, "all_to_all", 40)
        grads = [e.alloc(s, 0, "backward", 60 + i) for i, s in enumerate((3 * MiB, 64 * MiB + 512))]
        e.free(comm, deferred=True)
        for a in reversed(acts):
            e.free(a)
        e.complete_pending(comm)
        for g in grads[1:]:
            e.free(g)
        if step % 3 == 2:
            e.empty_cache()
    keep = e.alloc(1500, 0, "optimizer_step", 80)  # small pool
    pend = e.alloc(4 * MiB, 7, "all_gather", 41)
    e.free(pend, deferred=True)  # still pending at the dump: state active_pending_free
    e.snapshot_entry = True
    e._entry("snapshot", 0, 0, 0)
    return e


def counts(emulators):
    segs = [s for e in emulators for s in e.segments_out()]
    frames = set()
    for e in emulators:
        for t in e.trace:
            for f in t.get("frames", []):
                frames.add((f["filename"], f["line"], f["name"]))
        for s in e.segments_out():
            for f in s["frames"]:
                frames.add((f["filename"], f["line"], f["name"]))
            for b in s["blocks"]:
                for f in b["frames"]:
                    frames.add((f["filename"], f["line"], f["name"]))
    actions = {}
    for e in emulators:
        for t in e.trace:
            actions[t["action"]] = actions.get(t["action"], 0) + 1
    return {
        "devices": len(emulators),
        "segments": [{"device": s["device"], "address": str(s["address"]), "total_size": s["total_size"],
                      "allocated_size": s["allocated_size"], "active_size": s["active_size"],
                      "blocks": len(s["blocks"]), "stream": s["stream"], "segment_type": s["segment_type"]}
                     for s in segs],
        "blocks": sum(len(s["blocks"]) for s in segs),
        "pending_free_blocks": sum(1 for s in segs for b in s["blocks"] if b["state"] == "active_pending_free"),
        "trace_entries": [len(e.trace) for e in emulators],
        "actions": actions,
        "distinct_frames": len(frames),
        "reserved_at_dump": [sum(s["total_size"] for s in e.segments_out()) for e in emulators],
        "allocated_at_dump": [sum(s["allocated_size"] for s in e.segments_out()) for e in emulators],
        "peak_reserved": [peak_reserved(e.trace) for e in emulators],
        "at_peak": [e.peak for e in emulators],
        "at_ooms": [e.ooms for e in emulators],
        "segment_lives": [segment_lives(e) for e in emulators],
    }


def segment_lives(e):
    """The segment timeline's bands of one device, in the order they appear: each segment from
    its segment_alloc entry (-1: before the first entry of the trace) to its segment_free entry
    (-1: live at the dump), with its address (a string: above 2^63 in one fixture) and bytes."""
    lives, open_at = [], {}
    for i, t in enumerate(e.trace):
        if t["action"] == "segment_alloc":
            open_at[t["addr"]] = len(lives)
            lives.append({"address": str(t["addr"]), "size": t["size"], "start_entry": i, "end_entry": -1})
        elif t["action"] == "segment_free":
            if t["addr"] in open_at:
                lives[open_at.pop(t["addr"])]["end_entry"] = i
            else:  # made before the trace starts (a ring buffer that dropped it)
                lives.append({"address": str(t["addr"]), "size": t["size"], "start_entry": -1, "end_entry": i})
    for s in e.segments:  # live at the dump, made before the trace starts
        if s["address"] not in open_at:
            lives.append({"address": str(s["address"]), "size": s["total_size"], "start_entry": -1, "end_entry": -1})
    return lives


def peak_reserved(trace):
    r = peak = 0
    for t in trace:
        if t["action"] == "segment_alloc":
            r += t["size"]
        elif t["action"] == "segment_free":
            r -= t["size"]
        peak = max(peak, r)
    return peak


def snapshot_of(emulators):
    return {"segments": [s for e in emulators for s in e.segments_out()],
            "device_traces": [e.trace for e in emulators],
            "allocator_settings": emulators[0].settings,
            "external_annotations": [{"device": 0, "stage": "START", "name": "step", "time_us": 1_000_001}]}


def write(name, obj, protocol, compress=False):
    data = pickle.dumps(obj, protocol=protocol)
    if compress:
        data = gzip.compress(data, mtime=0)
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
    return data


def main():
    expected = {}
    # two devices, one rank each; the trace starts at the process start
    two = [training_device(0, 0x7F3A00000000, 6), training_device(1, 0x7F9C00000000, 4)]
    snap = snapshot_of(two)
    for proto in (2, 4, 5):
        write(f"training_p{proto}.pickle", snap, proto)
        expected[f"training_p{proto}.pickle"] = counts(two)
    write("training_p4.pickle.gz", snap, 4, compress=True)
    expected["training_p4.pickle.gz"] = counts(two)

    # addresses above 2^63 (pickled as 9-byte LONG1: two's complement needs a zero sign byte)
    high = [training_device(0, 0xFFFF800000000000, 2)]
    write("high_address_p4.pickle", snapshot_of(high), 4)
    expected["high_address_p4.pickle"] = counts(high)

    # a ring buffer that dropped the first entries: the trace starts mid-way
    mid = [training_device(0, 0x7F3A00000000, 5)]
    full = len(mid[0].trace)
    mid[0].trace = mid[0].trace[40:]
    write("midway_p4.pickle", snapshot_of(mid), 4)
    expected["midway_p4.pickle"] = dict(counts(mid), dropped_entries=40, full_trace_entries=full)

    # an OOM: a request that does not fit, recorded as PyTorch does (device_free instead of addr)
    o = [training_device(0, 0x7F3A00000000, 1)]
    # a device 10 MiB larger than the trace's peak: device_free is what the reserved bytes leave
    o[0].empty_cache()
    capacity = peak_reserved(o[0].trace) + 10 * MiB
    o[0].oom(200 * MiB, capacity - sum(s["total_size"] for s in o[0].segments))
    write("oom_p5.pickle", snapshot_of(o), 5)
    expected["oom_p5.pickle"] = dict(counts(o), capacity=capacity, oom_entry=len(o[0].trace) - 1)

    # fragmentation: a 40 MiB block is freed, a 2 MiB request splits it (PyTorch's best fit), and
    # a new 40 MiB request finds 58 MiB free but no block or room for a 40 MiB segment on a
    # 60 MiB device: the caching allocator runs out of memory where expandable segments would not
    # (their large pool maps 20 MiB pages: 40 MiB in two, the 2 MiB split off the freed block, the
    # second 40 MiB in the free 38 MiB and one more page - 60 MiB; a 48 MiB device, as before
    # alloc52's 20 MiB pages, is too small for them too)
    f = Emulator(0, 0x7F3A00000000, settings())
    big = f.alloc(40 * MiB, 0, "activations", 30)
    f.free(big)
    f.alloc(2 * MiB, 0, "kjt", 31)
    f.oom(40 * MiB, 20 * MiB)  # device_free: 60 MiB - the 40 MiB segment
    write("fragmented_oom_p4.pickle", snapshot_of([f]), 4)
    expected["fragmented_oom_p4.pickle"] = dict(counts([f]), capacity=60 * MiB, oom_entry=len(f.trace) - 1)

    # hostile files
    hostile = {}
    # GLOBAL + REDUCE: os.system("true") - what a malicious pickle looks like
    evil = b"\x80\x02cos\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03."
    hostile["global_reduce.pickle"] = {"opcode": "GLOBAL", "offset": 2}
    open(os.path.join(HERE, "global_reduce.pickle"), "wb").write(evil)
    # STACK_GLOBAL (protocol 4 form) after two strings
    sg = b"\x80\x04\x8c\x02os\x94\x8c\x06system\x94\x93\x94."
    hostile["stack_global.pickle"] = {"opcode": "STACK_GLOBAL", "offset": len(sg) - 3}
    open(os.path.join(HERE, "stack_global.pickle"), "wb").write(sg)
    # 100000 nested lists: [[[[...]]]]
    deep = b"\x80\x02" + b"]" * 100000 + b"a" * 99999 + b"."
    hostile["deep_nesting.pickle"] = {"depth": 100000}
    open(os.path.join(HERE, "deep_nesting.pickle"), "wb").write(deep)
    # a valid snapshot cut in half
    whole = pickle.dumps(snap, protocol=4)
    cut = whole[: len(whole) // 2]
    hostile["truncated.pickle"] = {"size": len(cut)}
    open(os.path.join(HERE, "truncated.pickle"), "wb").write(cut)
    # BINUNICODE claiming 2 GiB - 1 bytes with 5 present
    lie = b"\x80\x02X" + struct.pack("<I", 0x7FFFFFFF) + b"hello."
    hostile["lying_length.pickle"] = {"offset": 2, "claimed": 0x7FFFFFFF}
    open(os.path.join(HERE, "lying_length.pickle"), "wb").write(lie)
    # an integer of 16 bytes (wider than 64 bits) as an address
    wide = pickle.dumps({"segments": [], "device_traces": [[{"action": "alloc", "addr": 1 << 100, "size": 512,
                                                               "stream": 0, "time_us": 1}]]}, protocol=2)
    hostile["wide_int.pickle"] = {"bits": 101}
    open(os.path.join(HERE, "wide_int.pickle"), "wb").write(wide)
    expected["hostile"] = hostile

    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


def realistic(path, entries, seed=13):
    """A training-like snapshot of about `entries` trace entries (not a committed fixture: for the
    workbench's screenshots and bench/memory_view_bench): weights, then steps of activations of
    varied sizes freed in varied order, gradients, comm buffers on stream 7 whose frees complete
    later, an empty_cache every 25 steps, and at the end an OOM the fragmentation explains.
    Each entry carries its own list of frames (a real snapshot's stacks are deep), so the file's
    size grows with the entries as a real one's does."""
    import random
    rng = random.Random(seed)
    e = Emulator(0, 0x7F3A00000000, settings())
    depth = ["train.py", "torch/nn/modules/module.py", "torch/autograd/graph.py", "model/layers.py"]

    def frames(name, line):
        return [{"filename": depth[i % len(depth)], "line": line + 7 * i, "name": name if i == 0 else f"call_{i}"}
                for i in range(6)]
    e._frames = frames
    for i in range(40):
        e.alloc(rng.choice((256 * KiB, 3 * MiB, 16 * MiB + 512, 40 * MiB)), 0, "init_weights", 5 + i % 8)
    step, carry = 0, []
    while len(e.trace) < entries:
        acts = [e.alloc(rng.randint(1, 24) * rng.choice((4 * KiB, 64 * KiB, 1 * MiB)) + rng.randint(0, 511), 0,
                        "forward", 20 + i % 30) for i in range(rng.randint(20, 60))]
        comm = [e.alloc(rng.choice((2, 8, 12)) * MiB, 7, "all_to_all", 40) for _ in range(2)]
        grads = [e.alloc(rng.choice((512 * KiB, 3 * MiB, 9 * MiB)), 0, "backward", 60 + i % 10) for i in range(10)]
        for c in comm:
            e.free(c, deferred=True)
        rng.shuffle(acts)
        for a in carry + acts[: len(acts) * 9 // 10]:  # a tenth lives into the next step, fragmenting the segments
            e.free(a)
        carry = acts[len(acts) * 9 // 10:]
        for c in comm:
            e.complete_pending(c)
        for g in grads:
            e.free(g)
        step += 1
        if step % 25 == 0:
            e.empty_cache()
    reserved = sum(s["total_size"] for s in e.segments)
    free = [b["size"] for s in e.segments for b in s["blocks"] if b["state"] == "inactive"]
    # asks more than any free block and than the device's rest, less than both together: fragmentation
    e.oom(max(max(free, default=0), 16 * MiB) + 8 * MiB, 16 * MiB)
    e._entry("snapshot", 0, 0, 0)
    snap = snapshot_of([e])
    write_path = os.path.abspath(path)
    with open(write_path, "wb") as f:
        f.write(pickle.dumps(snap, protocol=4))
    print(f"{write_path}: {len(e.trace)} trace entries, {len(e.segments)} segments, reserved {reserved} B, "
          f"{os.path.getsize(write_path)} bytes")


if __name__ == "__main__":
    import sys
    if len(sys.argv) >= 2 and sys.argv[1] == "--realistic":
        # make_fixtures.py --realistic OUT.pickle [ENTRIES]
        realistic(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 5000)
    else:
        main()
