# ruff: noqa
# Near misses: an early return that only holds without FSDP evaluation, a flag that says whether the run is
# distributed (`ddp = RANK != -1`), and every rank taking its turn in a loop over the ranks.
import os

import torch
import torch.distributed as dist


def evaluate(x, use_fsdp_eval, is_rank0):
    if not use_fsdp_eval and not is_rank0:
        return
    if use_fsdp_eval:
        dist.broadcast(x, src=0)


def main():
    ddp = int(os.environ.get("RANK", -1)) != -1
    if ddp:
        dist.init_process_group("gloo")
        dist.all_reduce(torch.ones(1))
    for rank in range(dist.get_world_size()):
        if rank == dist.get_rank():
            dist.barrier()
