#!/usr/bin/python3
"""PyTorch DistributedDataParallel (gloo, CPU) on the CNN of configs/fashion_cnn_mgwfbp.toml
(--net wide: the CNN of configs/fashion_cnn_wide_fc.toml, two fc:2048 layers).

The peer that sfbd's MG-WFBP mode is measured against (scripts/peer-bench.sh): the same network
(conv:16:5:2,relu,pool:2,conv:32:5:2,relu,pool:2,fc:128,relu,fc:10), the same data (Fashion-MNIST
IDX, pixels / 255), the same per-rank batch, ranks, iterations, SGD with momentum, weight decay and
lr / (1 + lr_decay * t), one thread per rank, rank 0 evaluating the test set every `eval_every`
iterations. Prints one JSON line: median and mean iteration time (forward, backward with DDP's
bucketed all-reduce, update), wall seconds, final test accuracy.

Without --rank it spawns --ranks processes on this machine; with --rank R it is rank R only, for
one process per host (e.g. per namespace of scripts/netns-cluster.sh, with --master-addr the
address of rank 0 and GLOO_SOCKET_IFNAME naming the interface).
"""
import argparse
import gzip
import json
import os
import statistics
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(args, split):
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(os.path.join(args.data, f"{prefix}-images-idx3-ubyte.gz")).astype(np.float32) / 255.0
    y = read_idx(os.path.join(args.data, f"{prefix}-labels-idx1-ubyte.gz")).astype(np.int64)
    return torch.from_numpy(x.reshape(-1, 1, 28, 28).copy()), torch.from_numpy(y.copy())


def network(name):
    if name == "wide":
        return nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(64 * 7 * 7, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                             nn.Linear(2048, 10))
    return nn.Sequential(nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def accuracy(model, x, y):
    right = 0
    with torch.no_grad():
        for b in range(0, len(x), 1000):
            right += (model(x[b:b + 1000]).argmax(1) == y[b:b + 1000]).sum().item()
    return right / len(x)


def worker(rank, args):
    torch.set_num_threads(args.threads)
    os.environ["MASTER_ADDR"] = args.master_addr
    os.environ["MASTER_PORT"] = str(args.port)
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    torch.manual_seed(args.seed)  # the same initial weights on every rank
    model = DDP(network(args.net))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 1.0 / (1.0 + args.lr_decay * t))
    loss_fn = nn.CrossEntropyLoss()
    x, y = load(args, "train")
    tx, ty = load(args, "test") if rank == 0 else (None, None)
    gen = torch.Generator().manual_seed(args.seed * 1000 + rank)
    order, at = torch.randperm(len(x), generator=gen), 0
    times, acc = [], -1.0
    dist.barrier()
    start = time.perf_counter()
    for it in range(args.iterations):
        if at + args.batch > len(order):
            order, at = torch.randperm(len(x), generator=gen), 0
        rows = order[at:at + args.batch]
        at += args.batch
        xb, yb = x[rows], y[rows]
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        sched.step()
        times.append(time.perf_counter() - t0)
        if rank == 0 and ((it + 1) % args.eval_every == 0 or it + 1 == args.iterations):
            acc = accuracy(model.module, tx, ty)
    seconds = time.perf_counter() - start
    if rank == 0:
        steady = times[args.skip:]
        print(json.dumps({"peer": f"pytorch {torch.__version__} DDP gloo", "net": args.net, "ranks": args.ranks,
                          "batch": args.batch,
                          "threads": args.threads, "iterations": args.iterations,
                          "iteration_us_median": round(statistics.median(steady) * 1e6, 1),
                          "iteration_us": round(statistics.mean(steady) * 1e6, 1), "seconds": round(seconds, 3),
                          "final_accuracy": round(acc, 6), "mkldnn": torch.backends.mkldnn.is_available()}),
              flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--iterations", type=int, default=2000)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--lr-decay", type=float, default=0.0005)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=0.0005)
    p.add_argument("--eval-every", type=int, default=200)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--skip", type=int, default=10, help="first iterations left out of the medians (warm-up)")
    p.add_argument("--port", type=int, default=29517)
    p.add_argument("--net", choices=["default", "wide"], default="default")
    p.add_argument("--rank", type=int, default=-1, help="run this rank only (one process per host)")
    p.add_argument("--master-addr", default="127.0.0.1")
    args = p.parse_args()
    if args.rank >= 0:
        worker(args.rank, args)
    else:
        mp.spawn(worker, args=(args,), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
