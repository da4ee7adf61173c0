"""00 · Hello, ranks: every process prints what torchrun told it, then all of them sum a number.

    torchrun --standalone --nproc_per_node=2 00_hello_ranks.py [--out hello.json]
    python 00_hello_ranks.py            # also works: a world of one process
"""

import argparse
import datetime
import gc
import json
import math
import os
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist


def positive_float(text):
    """An argparse type: a finite number > 0. (A check `value <= 0` lets nan through: nan <= 0 is False.)"""
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite positive number, got {text}")
    return value


def writable_file(text):
    """An argparse type: a file we can create, checked at start-up, not after the training it would save."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text}: it is a folder")
    blocking = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocking:
        raise argparse.ArgumentTypeError(f"cannot write {text}: {blocking} is a file, not a folder")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}."):
            pass  # a file can be created there (and is removed again)
    except OSError as error:
        raise argparse.ArgumentTypeError(f"cannot write {text}: {error.strerror or error}") from None
    return path


def rank_or_none(text):
    """An argparse type: -1 (no rank) or a rank of this run, 0 .. WORLD_SIZE - 1."""
    value, world_size = int(text), int(os.environ.get("WORLD_SIZE", 1))
    if not -1 <= value < world_size:
        raise argparse.ArgumentTypeError(f"must be -1 (none) or a rank of this run (0..{world_size - 1}), got {text}")
    return value


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=writable_file, help="rank 0 writes what every rank saw to this JSON file")
    parser.add_argument("--timeout", type=positive_float, default=60.0, help="seconds a collective may wait")
    parser.add_argument("--fail-rank", type=rank_or_none, default=-1, help="this rank raises on purpose (-1: none)")
    return parser.parse_args()


def main():
    args = parse_args()
    # NCCL and one GPU per process where CUDA exists, gloo and the CPU otherwise.
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if torch.cuda.is_available():
        backend, device = "nccl", torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        backend, device = "gloo", torch.device("cpu")
    timeout = datetime.timedelta(seconds=args.timeout)
    if "RANK" in os.environ:  # started by torchrun: join the group it prepared
        dist.init_process_group(backend, timeout=timeout)
    else:  # plain `python`: a group of one, no network needed
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
    rank, world_size = dist.get_rank(), dist.get_world_size()
    try:
        seen = {name: os.environ.get(name) for name in
                ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
        print(f"[rank {rank}] " + " ".join(f"{k}={v}" for k, v in seen.items())
              + f" backend={backend} device={device}", flush=True)
        if rank == args.fail_rank:
            raise RuntimeError(f"rank {rank} fails on purpose (--fail-rank {args.fail_rank})")

        total = torch.tensor([float(rank)], device=device)
        dist.all_reduce(total)  # every rank ends up with 0 + 1 + ... + (world_size - 1)
        everyone = [None] * world_size
        dist.all_gather_object(everyone, dict(seen, rank=rank, device=str(device), sum=total.item()))
        if rank == 0:
            print(f"[rank 0] all_reduce of the ranks: {total.item():g} on {world_size} processes")
            if args.out:
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps(dict(backend=backend, ranks=everyone), indent=1))
    except BaseException:
        dist.destroy_process_group()  # no barrier here: the other ranks may be gone
        raise
    # A clean exit: with gloo a bare destroy_process_group() can abort the process
    # ("terminate called without an active exception") after all the work is done.
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
