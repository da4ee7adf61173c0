"""10 · Node report: every process says where it runs (node, local and global rank) and what it listens on.

    torchrun --standalone --nproc_per_node=2 10_node_report.py [--out ranks.json]
    torchrun --nnodes=2 --nproc_per_node=2 --rdzv-backend=c10d --rdzv-endpoint=HEAD:PORT --rdzv-id=JOB 10_node_report.py
    python 10_node_report.py            # also works: a world of one process
"""

import argparse
import datetime
import gc
import json
import math
import os
import socket
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
    parser.add_argument("--timeout", type=positive_float, default=60.0, help="seconds a collective may wait")
    parser.add_argument("--out", type=writable_file, help="rank 0 writes every rank's report to this JSON file")
    return parser.parse_args()


def setup_distributed(timeout_s):
    """Join the process group: NCCL and one GPU per process, or gloo and the CPU (as in 04)."""
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if torch.cuda.is_available():
        backend, device = "nccl", torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        backend, device = "gloo", torch.device("cpu")
    timeout = datetime.timedelta(seconds=timeout_s)
    if "RANK" in os.environ:  # started by torchrun: join the group it prepared
        dist.init_process_group(backend, timeout=timeout)
    else:  # plain `python`: a group of one, no network needed
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
    return device


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


def main():
    args = parse_args()
    device = setup_distributed(args.timeout)
    rank, world_size = dist.get_rank(), dist.get_world_size()
    try:
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
    except BaseException:
        dist.destroy_process_group()  # no barrier here: the other ranks may be gone
        raise
    # A clean exit: with gloo a bare destroy_process_group() can abort the process.
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
