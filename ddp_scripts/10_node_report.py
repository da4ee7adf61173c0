"""10 · Node report: every process says where it runs (node, local and global rank) and what it listens on.

    torchrun --standalone --nproc_per_node=2 10_node_report.py [--out ranks.json]
    torchrun --nnodes=2 --nproc_per_node=2 --rdzv-backend=c10d --rdzv-endpoint=HEAD:PORT --rdzv-id=JOB 10_node_report.py
    python 10_node_report.py            # also works: a world of one process

Devices: NCCL and one GPU per process where CUDA has a GPU for every process on the machine, gloo
and the CPU otherwise or with --device cpu (choose_device). Run by this series' tests on the CPU with
gloo, 1 to 3 processes; the GPU path is checked by tools/gpu_check.py (README, "Verified on").

Written by notebooks/10_multi_node.ipynb — edit it there.
"""

import argparse
import datetime
import gc
import json
import math
import os
import socket
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


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["auto", "cpu"], default="auto",
                        help="auto: NCCL and one GPU per process where CUDA exists, else gloo and the CPU; "
                             "cpu: gloo and the CPU")
    parser.add_argument("--timeout", type=positive_float, default=60.0, help="seconds a collective may wait")
    parser.add_argument("--out", type=writable_file, help="rank 0 writes every rank's report to this JSON file")
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


def listening_sockets(pid):
    """The TCP ports process `pid` listens on, as (address, port), read from Linux's /proc; None elsewhere."""
    try:
        tables = [(family, Path(f"/proc/net/{name}").read_text().splitlines()[1:])
                  for family, name in ((socket.AF_INET, "tcp"), (socket.AF_INET6, "tcp6"))]
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # not Linux, or no permission: say "unknown" rather than guess
        return None
    inodes = set()
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")  # "socket:[INODE]" for a socket
        except OSError:  # closed in the meantime
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for family, lines in tables:
        for line in lines:
            fields = line.split()
            address, port = fields[1].split(":")
            if fields[3] == "0A" and fields[9] in inodes:  # state 0A is LISTEN
                raw = bytes.fromhex(address)  # /proc prints each 32-bit word in host (little-endian) order
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                found.append((socket.inet_ntop(family, raw), int(port, 16)))
    return sorted(found)


def report_node(args, device):
    """Each rank says where it runs and what it listens on; rank 0 gathers every report."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    me = dict(
        rank=rank, world_size=world_size,
        local_rank=int(os.environ.get("LOCAL_RANK", 0)),  # index on this machine (本機序號)
        local_world_size=int(os.environ.get("LOCAL_WORLD_SIZE", 1)),  # processes on this machine
        node_rank=int(os.environ.get("GROUP_RANK", 0)),  # index of this machine (節點序號)
        nnodes=int(os.environ.get("GROUP_WORLD_SIZE", 1)),
        hostname=socket.gethostname(), pid=os.getpid(), agent_pid=os.getppid(), device=str(device),
        master=f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}",
        listening=dict(worker=listening_sockets(os.getpid()),  # the agent is torchrun, our parent
                       agent=listening_sockets(os.getppid()) if "TORCHELASTIC_RUN_ID" in os.environ else None))
    print(f"[rank {rank}] node {me['node_rank']} local rank {me['local_rank']} on {me['hostname']} "
          f"(pid {me['pid']}, agent pid {me['agent_pid']}, {device})", flush=True)
    everyone = [None] * world_size
    dist.all_gather_object(everyone, me)
    if rank == 0 and args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(dict(backend=dist.get_backend(), ranks=everyone), indent=1))


def main():
    args = parse_args()
    device = setup_distributed(args.timeout, args.device)
    try:
        report_node(args, device)
    except BaseException:
        dist.destroy_process_group()  # no barrier here: the other ranks may be gone
        raise
    clean_exit()


if __name__ == "__main__":
    main()
