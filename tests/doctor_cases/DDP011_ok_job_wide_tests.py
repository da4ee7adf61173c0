# ruff: noqa
# Near misses: tests that every rank answers alike (world size, a job-wide environment setting whose name
# holds "RANK", a flag parameter, a group object, `rank >= 0` joined to a count of processes), an if/else
# whose two sides call the same collective, and another object's method that shares a collective's name.
import os

import torch
import torch.distributed as dist


def gather_by_files(data):
    dist.barrier()
    return [data]


def gather(data, force_files=False):
    if dist.get_world_size() == 1:
        return [data]
    if os.getenv("GATHER_RANK_ZERO_ONLY") == "1":
        return gather_by_files(data)
    if os.environ.get("GATHER_VIA_FILES") == "1" or force_files:
        return gather_by_files(data)
    group = dist.new_group(backend="gloo") if os.getenv("GATHER_ON_CPU") == "1" else None
    out = [torch.zeros(1) for _ in range(dist.get_world_size())]
    if group is None:
        dist.all_gather(out, torch.ones(1))
    else:
        dist.all_gather(out, torch.ones(1), group=group)
    return out


def wait(rank):
    nranks = int(os.environ.get("WORLD_SIZE", 1))
    if rank >= 0 and nranks > 1:
        dist.barrier()


class Writer:
    def save(self, state):
        torch.save(state, "ckpt.pt")


class Trainer:
    def save(self, state):
        self.writer().save(state)
        dist.barrier()

    def writer(self):
        return Writer()

    def finish(self, state):
        def write():
            self.writer().save(state)

        if dist.get_rank() == 0:
            write()
        dist.barrier()
