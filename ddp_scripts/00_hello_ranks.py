"""00 · Hello, ranks: every process prints what torchrun told it, then all of them sum a number.

    torchrun --standalone --nproc_per_node=2 00_hello_ranks.py [--out hello.json]
    python 00_hello_ranks.py            # also works: a world of one process

Devices: NCCL and one GPU per process where CUDA has a GPU for every process on the machine, gloo
and the CPU otherwise or with --device cpu (choose_device). Run by this series' tests on the CPU with
gloo, 1 to 3 processes; the GPU path is checked by tools/gpu_check.py (README, "Verified on").

Written by notebooks/00_setup.ipynb — edit it there.
"""

import argparse
import datetime
import gc
import json
import math
import os
import sys
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
    parser.add_argument("--device", choices=["auto", "cpu"], default="auto",
                        help="auto: NCCL and one GPU per process where CUDA exists, else gloo and the CPU; "
                             "cpu: gloo and the CPU")
    parser.add_argument("--timeout", type=positive_float, default=60.0, help="seconds a collective may wait")
    parser.add_argument("--fail-rank", type=rank_or_none, default=-1, help="this rank raises on purpose (-1: none)")
    return parser.parse_args()


def choose_device(cuda_available, gpu_count, local_rank, local_world_size, wanted="auto"):
    """The device policy, a pure function of the machine: (backend, device) for this process.

    NCCL and cuda:LOCAL_RANK where CUDA has a GPU for every process on this machine; gloo and the CPU
    where there is no CUDA or --device cpu asks for it. Fewer GPUs than processes is an error said in
    one line, not "invalid device ordinal" from deep inside CUDA. Every rank of a machine sees the same
    inputs (only local_rank differs), so no rank picks NCCL while another picks gloo.
    """
    if wanted == "cpu" or not cuda_available or gpu_count == 0:
        return "gloo", "cpu"
    if gpu_count < local_world_size:
        raise ValueError(f"{local_world_size} processes on this machine but {gpu_count} GPU(s): launch with "
                         f"--nproc_per_node=gpu, or fewer processes (at most {gpu_count}), or add --device cpu")
    return "nccl", f"cuda:{local_rank}"


def setup_distributed(timeout_s, wanted_device):
    """Join the process group. NCCL and one GPU per process, or gloo and the CPU."""
    local_rank = int(os.environ.get("LOCAL_RANK", 0))  # this process's index on this machine
    local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", 1))  # processes on this machine
    try:
        backend, device = choose_device(torch.cuda.is_available(), torch.cuda.device_count(),
                                        local_rank, local_world_size, wanted_device)
    except ValueError as error:  # too few GPUs: one line and exit code 2, before any CUDA work
        if local_rank == 0:
            print(f"{Path(sys.argv[0]).name}: error: {error}", file=sys.stderr)
        sys.exit(2)
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.set_device(device)  # without it every process would also start a CUDA context on GPU 0
    timeout = datetime.timedelta(seconds=timeout_s)
    bound = device if device.type == "cuda" else None  # NCCL: connect now, and barrier() knows its GPU
    if "RANK" in os.environ:  # started by torchrun: join the group it prepared
        dist.init_process_group(backend, timeout=timeout, device_id=bound)
    else:  # plain `python`: a group of one, no network needed
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout,
                                device_id=bound)
    return device


def clean_exit():
    """Leave the process group so that every rank exits 0. With gloo, a bare destroy_process_group() can
    abort the process ("terminate called without an active exception") after the work is done: collect
    what still holds the group (DDP's reducer), wait for every rank, then destroy."""
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


def say_hello(args, device):
    """Each rank prints what torchrun told it; one all_reduce sums the ranks; rank 0 gathers every view."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    seen = {name: os.environ.get(name) for name in
            ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    print(f"[rank {rank}] " + " ".join(f"{k}={v}" for k, v in seen.items())
          + f" backend={dist.get_backend()} device={device}", flush=True)
    if rank == args.fail_rank:
        raise RuntimeError(f"rank {rank} fails on purpose (--fail-rank {args.fail_rank})")

    total = torch.tensor([float(rank)], device=device)
    dist.all_reduce(total)  # every rank ends up with 0 + 1 + ... + (world_size - 1)
    everyone = [None] * world_size
    # What this rank's process group really runs on, asked back from torch, not our choice restated.
    mine = dict(seen, rank=rank, pid=os.getpid(), backend=dist.get_backend(), device=str(total.device),
                sum=total.item())
    dist.all_gather_object(everyone, mine)
    if rank == 0:
        print(f"[rank 0] all_reduce of the ranks: {total.item():g} on {world_size} processes")
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(dict(backend=dist.get_backend(), ranks=everyone), indent=1))


def main():
    args = parse_args()
    device = setup_distributed(args.timeout, args.device)
    try:
        say_hello(args, device)
    except BaseException:
        dist.destroy_process_group()  # no barrier here: the other ranks may be gone
        raise
    clean_exit()


if __name__ == "__main__":
    main()
