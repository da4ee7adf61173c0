# ruff: noqa
# Near misses: collectives outside the branch; both branches call one; a plain model under rank 0;
# point-to-point send/recv; a branch on how the job was launched, not on the rank.
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = torch.nn.Linear(4, 2)
    ddp_model = DDP(model)
    totals = torch.ones(2)
    dist.all_reduce(totals)
    if rank == 0:
        print(totals)
        print(model(torch.randn(2, 4)))
        dist.send(totals, dst=1)
    else:
        dist.recv(totals, src=0)
    if rank == 0:
        dist.broadcast(totals, src=0)
    else:
        dist.broadcast(totals, src=0)
    if "RANK" in os.environ:
        dist.barrier()
    if dist.get_world_size() > 1:
        dist.barrier()
    dist.barrier()


def round_robin(state, me, world_size):
    """Each rank in turn is the source of a broadcast that every rank joins (a loop over the ranks)."""
    for rank in range(world_size):
        if rank == me:
            dist.broadcast_object_list([state], src=rank)
        else:
            received = [None]
            dist.broadcast_object_list(received, src=rank)
            if rank != 0:
                dist.broadcast_object_list(received, src=rank)


def different_outputs(model, x):
    """Both branches run the DDP model's forward: every rank joins (what it uses of the output differs)."""
    ddp_model = DDP(model)
    if dist.get_rank() == 0:
        out = ddp_model(x)[0]
    else:
        out = ddp_model(x)[1]
    return out
