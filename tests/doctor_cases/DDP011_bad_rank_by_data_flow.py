# ruff: noqa
# Rank tests found by where the value comes from, whatever its name: a name assigned from get_rank(), an
# mp.spawn target's first parameter, a helper whose return compares the rank, an attribute set from a
# constructor's parameter that the caller passes a rank.
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
    report(torch.ones(1))


class Trainer:
    def __init__(self, model, device_index):
        self.model = model
        self.device_index = device_index

    def log(self, t):
        if self.device_index == 0:
            dist.all_reduce(t)  # expect: DDP011


def train(model, t):
    Trainer(model, device_index=int(os.environ["LOCAL_RANK"])).log(t)


if __name__ == "__main__":
    mp.spawn(worker, args=(2,), nprocs=2)
