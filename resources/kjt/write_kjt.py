#!/usr/bin/env python3
"""Writes recorded KJT batches in Embedscope's KJT file format (engine/input/kjt/FORMAT.md).

numpy only, no torch needed. A TorchRec user dumps the KeyedJaggedTensors of a training loop:

    from write_kjt import KjtWriter
    with KjtWriter("recorded.kjt", keys=kjt.keys(), batch_size=global_batch, labels=True) as w:
        for batch in loader:
            kjt = batch.sparse_features          # torchrec.KeyedJaggedTensor, global batch
            w.write(kjt.lengths().cpu().numpy(), kjt.values().cpu().numpy(),
                    labels=batch.labels.cpu().numpy())

then points a workload at it: "input": {"kind": "kjt", "path": "recorded.kjt"}. The header's batch
count is written when the writer closes. `python3 write_kjt.py demo OUT` writes the demo file
that the Embedscope tests read (values given by formulas in `demo()`).
"""
import struct
import sys

import numpy as np

MAGIC = b"ESKJT\0\0\0"
VERSION = 1
WEIGHTS, LABELS, DENSE = 1, 2, 4


class KjtWriter:
    """Streams batches to `path`. keys: the feature names (KJT keys, in order); batch_size:
    samples per batch (Embedscope's batch_size x devices); weights / labels: whether every batch
    carries per-id weights / labels; num_dense: dense features per sample (0: none)."""

    def __init__(self, path, keys, batch_size, weights=False, labels=True, num_dense=0):
        self.keys = [str(k) for k in keys]
        if not self.keys or len(set(self.keys)) != len(self.keys):
            raise ValueError("keys must be non-empty and distinct")
        if batch_size <= 0:
            raise ValueError("batch_size must be > 0")
        self.batch_size, self.num_dense = int(batch_size), int(num_dense)
        self.flags = (WEIGHTS if weights else 0) | (LABELS if labels else 0) | (DENSE if num_dense > 0 else 0)
        self.batches = 0
        self.f = open(path, "wb")
        self.f.write(MAGIC + struct.pack("<4I", VERSION, self.flags, len(self.keys), self.num_dense))
        self.count_at = self.f.tell()
        self.f.write(struct.pack("<2Q", 0, self.batch_size))
        for k in self.keys:
            b = k.encode("utf-8")
            self.f.write(struct.pack("<I", len(b)) + b)

    def write(self, lengths, values, weights=None, labels=None, dense=None):
        """One batch: lengths F x S (or flat, feature-major: KJT.lengths()), values (KJT.values()),
        and the parts the header promised. Raises ValueError on shapes that do not fit."""
        F, S = len(self.keys), self.batch_size
        lengths = np.asarray(lengths, dtype="<i8").reshape(-1)
        values = np.asarray(values, dtype="<i8").reshape(-1)
        if lengths.size != F * S:
            raise ValueError(f"lengths has {lengths.size} entries, expected {F} features x {S} samples")
        if (lengths < 0).any() or int(lengths.sum()) != values.size:
            raise ValueError(f"lengths sum to {int(lengths.sum())}, values has {values.size}")
        parts = [struct.pack("<Q", values.size), lengths.tobytes(), values.tobytes()]
        for flag, arr, n, name in ((WEIGHTS, weights, values.size, "weights"), (LABELS, labels, S, "labels"),
                                   (DENSE, dense, S * self.num_dense, "dense")):
            if not self.flags & flag:
                if arr is not None:
                    raise ValueError(f"{name} given but the header has none")
                continue
            a = np.asarray(arr, dtype="<f4").reshape(-1)
            if a.size != n:
                raise ValueError(f"{name} has {a.size} entries, expected {n}")
            parts.append(a.tobytes())
        self.f.write(b"".join(parts))
        self.batches += 1

    def close(self):
        if self.f is None:
            return
        self.f.seek(self.count_at)
        self.f.write(struct.pack("<Q", self.batches))
        self.f.close()
        self.f = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def demo(path):
    """4 batches of 8 samples, keys f0 (bags of b % 3 ids) and f1 (one id each), 2 dense
    features, labels: id i of bag (f, b) of batch n is (n * 100 + f * 10 + b + i) % 50."""
    keys, S = ["f0", "f1"], 8
    with KjtWriter(path, keys, S, labels=True, num_dense=2) as w:
        for n in range(4):
            lengths = [[b % 3 for b in range(S)], [1] * S]
            values = [(n * 100 + f * 10 + b + i) % 50 for f in range(2) for b in range(S) for i in range(lengths[f][b])]
            labels = [(n + b) % 2 for b in range(S)]
            dense = [[0.5 * n + b, -b] for b in range(S)]
            w.write(lengths, values, labels=labels, dense=dense)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "demo":
        demo(sys.argv[2])
    else:
        sys.exit("usage: write_kjt.py demo OUT   (or import KjtWriter)")
