"""09 · Collective bugs on demand: a stuck rank, the checkpoint trap, mismatched shapes, an unused
parameter. On gloo (--device cpu, as lesson 09 runs them) each ends in an error within seconds, never a
hang; on NCCL mismatched collectives are undefined behaviour, and a hang lasts until the watchdog's
timeout. Without --bug it runs correctly.

    torchrun --standalone --nproc_per_node=2 09_collective_bugs.py                  # correct: exits 0
    torchrun --standalone --nproc_per_node=2 09_collective_bugs.py --bug rank0-only --timeout 3
    TORCH_DISTRIBUTED_DEBUG=DETAIL torchrun ... --bug rank0-only --timeout 3         # names the mismatch
    torchrun --standalone --nproc_per_node=2 09_collective_bugs.py --bug straggler --monitored --timeout 3
    torchrun --standalone --nproc_per_node=3 09_collective_bugs.py --bug stragglers --monitored --wait-all-ranks
    TORCH_DISTRIBUTED_DEBUG=INFO torchrun ... --bug unused                           # names the parameter

Devices: NCCL and one GPU per process where CUDA has a GPU for every process on the machine, gloo
and the CPU otherwise or with --device cpu (choose_device). Run by this series' tests on the CPU with
gloo, 1 to 3 processes; the GPU path is checked by tools/gpu_check.py (README, "Verified on").

Written by notebooks/09_debugging.ipynb — edit it there.
"""

import argparse
import datetime
import gc
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

BUGS = ("none", "straggler", "stragglers", "rank0-only", "shape", "unused")


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


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bug", choices=BUGS, default="none", help="which mistake to make (none: run correctly)")
    parser.add_argument("--monitored", action="store_true", help="check in at a monitored_barrier first")
    parser.add_argument("--wait-all-ranks", action="store_true",
                        help="monitored_barrier(wait_all_ranks=True): name every missing rank, not only the first")
    parser.add_argument("--device", choices=["auto", "cpu"], default="auto",
                        help="auto: NCCL on GPUs where CUDA exists, else gloo; cpu: always gloo and the CPU "
                             "(the lesson shows gloo's messages)")
    parser.add_argument("--timeout", type=positive_float, default=60.0, help="seconds a collective may wait")
    parser.add_argument("--out", type=writable_file, help="rank 0 writes what it did to this JSON file")
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


def read_next_batch(rank, bug, timeout_s):
    """Where a real job reads data. With --bug straggler the last rank gets stuck here; with --bug
    stragglers every rank but rank 0."""
    last = rank == dist.get_world_size() - 1
    if rank > 0 and (bug == "stragglers" or (bug == "straggler" and last)):
        print(f"[rank {rank}] stuck reading the next batch", flush=True)
        time.sleep(10 * timeout_s)  # stands for a dead file system, a deadlock, an endless loop ...
    return torch.ones(4)


def save_checkpoint(state, path, rank, bug):
    """Rank 0 writes, everybody waits. With --bug rank0-only the barrier sits inside the `if`."""
    if rank == 0:
        torch.save(state, path)  # ddp-doctor: ignore[DDP007] a stand-in file in a temporary folder
        print(f"[rank {rank}] checkpoint saved", flush=True)
        if bug == "rank0-only":
            # ddp-doctor: ignore[DDP011] the bug this lesson demonstrates (--bug rank0-only)
            dist.barrier()  # BUG: only rank 0 reaches this barrier; the others are at the next collective
    if bug != "rank0-only":
        dist.barrier()  # correct: every rank waits here until the file is written


class TwoHeads(nn.Module):
    """A model with a head that the loss may not use (--bug unused)."""

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.head = nn.Linear(4, 1)
        self.aux_head = nn.Linear(4, 1)  # used only when the loss includes the auxiliary term

    def forward(self, x, use_aux):
        h = self.body(x)
        return self.head(h) + (self.aux_head(h) if use_aux else 0)


def train_two_steps(device, bug):
    """A DDP model; with --bug unused, aux_head gets no gradient and the second step fails."""
    model = DDP(TwoHeads().to(device), device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        loss = model(torch.ones(8, 4, device=device), use_aux=bug != "unused").pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def miniature_training_step(args, device):
    """Read a batch, all-reduce, save a checkpoint, all-reduce the metrics and per-sample losses, two DDP
    steps: all correct without --bug, one mistake with it."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    # monitored_barrier exists only on gloo; an NCCL job makes a gloo group for it
    monitor = dist.new_group(backend="gloo") if dist.get_backend() == "nccl" else None
    print(f"[rank {rank}] pid {os.getpid()}, backend {dist.get_backend()}, "
          f"MASTER_PORT={os.environ.get('MASTER_PORT')}, "
          f"TORCH_DISTRIBUTED_DEBUG={os.environ.get('TORCH_DISTRIBUTED_DEBUG', 'OFF')}", flush=True)
    batch = read_next_batch(rank, args.bug, args.timeout).to(device)
    if args.monitored:  # every rank checks in; rank 0 names those that do not, within the timeout
        started = time.perf_counter()
        try:
            dist.monitored_barrier(group=monitor, timeout=datetime.timedelta(seconds=args.timeout),
                                   wait_all_ranks=args.wait_all_ranks)
        except RuntimeError:
            print(f"[rank {rank}] monitored_barrier raised after {time.perf_counter() - started:.1f} s", flush=True)
            raise
    dist.all_reduce(batch)  # the step's gradient all-reduce, in miniature

    with tempfile.TemporaryDirectory() as tmp:
        save_checkpoint({"weights": batch.cpu()}, Path(tmp) / "checkpoint.pt", rank, args.bug)
        loss = torch.tensor([float(rank)], device=device)
        dist.all_reduce(loss)  # the next collective: the epoch's metrics

    # per-sample losses of this rank's validation shard: with --bug shape, rank 1's is one longer
    shard = 1000 + (1 if args.bug == "shape" and rank == 1 else 0)
    per_sample = torch.ones(shard, device=device)
    dist.all_reduce(per_sample)

    train_two_steps(device, args.bug)
    if rank == 0:
        print(f"all collectives completed on {world_size} rank(s)", flush=True)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(dict(world_size=world_size, backend=dist.get_backend(),
                                                batch_sum=batch.sum().item(), loss_sum=loss.item())))


def main():
    args = parse_args()
    device = setup_distributed(args.timeout, args.device)
    try:
        miniature_training_step(args, device)
    except BaseException:
        dist.destroy_process_group()  # no barrier here: the other ranks may be gone
        raise
    clean_exit()


if __name__ == "__main__":
    main()
