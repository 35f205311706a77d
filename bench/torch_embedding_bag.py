#!/usr/bin/python3
"""PyTorch peer of bench/kernels_bench.cpp (--device cpu) and bench/gpu_kernels_bench.cpp
(--device cuda), run by them through popen, once per shape.

Measures, on the CPU single-threaded or on the first CUDA device, on the same shape and the
same ids as the C++ benchmark:
  forward:  torch.nn.EmbeddingBag(mode="sum") on a num_rows x dim fp32 table,
            batch bags of exactly `bag` ids each;
  backward: the EmbeddingBag sparse backward (sparse=True) of a random grad_out, coalesced
            (sort + per-row sum, as our accumulate_sparse_grad), then a row-wise Adagrad update
            of the unique rows written in torch ops:
                state[row] += mean(g^2);  w[row] -= lr * g / (sqrt(state[row]) + eps)

Byte counts (identical to the C++ benchmark; n_ids = batch * bag, 4 bytes per fp32):
  forward  bytes = n_ids * dim * 4                     (rows gathered)
  backward bytes = (n_ids + 2 * n_unique) * dim * 4    (one grad_out row gathered per id
                   occurrence, plus each unique weight row read and written by the update)

Prints one line of JSON: {"forward_GBps": ..., "backward_GBps": ..., ...} with the median of
--reps timed repetitions after --warmup untimed ones (cuda: each repetition timed by CUDA
events around it). If torch cannot be imported, or --device cuda finds no device, prints
{"error": "..."} and exits with status 3.
"""

import argparse
import json
import statistics
import sys
import time

MASK64 = (1 << 64) - 1


def splitmix64_ids(n, num_rows, seed):
    """The id stream of the C++ benchmark: splitmix64(seed) % num_rows, n draws."""
    out = [0] * n
    x = seed & MASK64
    for i in range(n):
        x = (x + 0x9E3779B97F4A7C15) & MASK64
        z = x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        z ^= z >> 31
        out[i] = z % num_rows
    return out


def median_seconds(fn, warmup, reps, cuda=None):
    """Median seconds of fn(); with cuda (the torch.cuda module), timed by CUDA events."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        if cuda is None:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        else:
            start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e-3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, required=True, help="table rows (num_embeddings)")
    ap.add_argument("--dim", type=int, required=True, help="embedding_dim")
    ap.add_argument("--bag", type=int, required=True, help="ids per bag (pooling factor)")
    ap.add_argument("--batch", type=int, required=True, help="bags per batch")
    ap.add_argument("--seed", type=int, default=42, help="id stream seed (as the C++ side)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cpu: one thread; cuda: the first CUDA device")
    args = ap.parse_args()

    try:
        import torch
    except Exception as e:  # ImportError, or a broken install
        print(json.dumps({"error": f"torch not importable by {sys.executable}: {e}"}))
        return 3

    cuda = None
    if args.device == "cuda":
        if not torch.cuda.is_available():
            print(json.dumps({"error": f"torch {torch.__version__} sees no CUDA device"}))
            return 3
        cuda = torch.cuda
    else:
        torch.set_num_threads(1)
    dev = torch.device(args.device)
    torch.manual_seed(args.seed)
    n_ids = args.batch * args.bag

    ids = torch.tensor(splitmix64_ids(n_ids, args.rows, args.seed), dtype=torch.int64, device=dev)
    offsets = torch.arange(0, n_ids, args.bag, dtype=torch.int64, device=dev)
    n_unique = int(torch.unique(ids).numel())

    emb = torch.nn.EmbeddingBag(args.rows, args.dim, mode="sum", sparse=True, device=dev)
    with torch.no_grad():
        emb.weight.uniform_(-0.1, 0.1)
    weight = emb.weight
    state = torch.zeros(args.rows, dtype=torch.float32, device=dev)
    grad_out = torch.rand(args.batch, args.dim, dtype=torch.float32, device=dev) - 0.5

    # ---- forward
    def forward():
        with torch.no_grad():
            return emb(ids, offsets)

    fwd_s = median_seconds(forward, args.warmup, args.reps, cuda)

    # ---- backward: sparse grad of the pooled lookup + row-wise Adagrad on the unique rows.
    # The graph is built once; each repetition runs its backward again (retain_graph), so the
    # timed part is backward + coalesce + update only, as in the C++ benchmark.
    out = emb(ids, offsets)

    def backward():
        (g,) = torch.autograd.grad(out, weight, grad_out, retain_graph=True)
        g = g.coalesce()  # sorted unique rows, per-row sum
        rows = g.indices()[0]
        vals = g.values()
        with torch.no_grad():
            st = state.index_select(0, rows).add_(vals.square().mean(dim=1))
            state.index_copy_(0, rows, st)
            vals.mul_((args.lr / st.sqrt_().add_(args.eps)).unsqueeze(1))  # vals is ours: in place
            weight.index_add_(0, rows, vals, alpha=-1.0)

    bwd_s = median_seconds(backward, args.warmup, args.reps, cuda)

    fwd_bytes = n_ids * args.dim * 4
    bwd_bytes = (n_ids + 2 * n_unique) * args.dim * 4
    print(json.dumps({
        "torch_version": torch.__version__,
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "threads": torch.get_num_threads(),
        "rows": args.rows, "dim": args.dim, "bag": args.bag, "batch": args.batch,
        "n_unique": n_unique,
        "forward_ms": fwd_s * 1e3,
        "backward_ms": bwd_s * 1e3,
        "forward_GBps": fwd_bytes / fwd_s / 1e9,
        "backward_GBps": bwd_bytes / bwd_s / 1e9,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
