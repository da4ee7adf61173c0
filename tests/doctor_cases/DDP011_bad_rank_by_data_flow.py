# ruff: noqa
# Rank tests found by where the value comes from, whatever its name: a name assigned from get_rank(), an
# mp.spawn target's first parameter, a helper whose return compares the rank.
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def leader():
    return dist.get_rank() == 0


def report(t):
    who = int(os.environ["RANK"])
    if who == 0:
        dist.all_reduce(t)  # expect: DDP011
    if leader():
        dist.barrier()  # expect: DDP011


def worker(idx, world):
    dist.init_process_group("gloo", rank=idx, world_size=world)
    if idx % world == 0:
        dist.barrier()  # expect: DDP011


if __name__ == "__main__":
    mp.spawn(worker, args=(2,), nprocs=2)
