# ruff: noqa
# The side of a "distributed or not" test that a distributed run takes is every rank: a save there, with no
# rank test, runs N times; so does the `else` of a test that mixes in something else (`ddp and epoch > 2`).
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

ddp = int(os.environ.get("RANK", -1)) != -1


def main(args, epoch):
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(4, 2))
    losses = torch.zeros(3)
    if ddp:
        torch.save(losses, "ddp.pt")  # expect: DDP005
    if args.local_rank != -1:
        torch.save(losses, "launched.pt")  # expect: DDP005
    if ddp and epoch > 2:
        dist.barrier()
    else:
        torch.save(losses, "late.pt")  # expect: DDP005


if __name__ == "__main__":
    main(None, 0)


def init_mode(args, losses):
    """The other side of `"RANK" in os.environ` may be another launcher (SLURM here): not one process."""
    if "RANK" in os.environ:
        dist.init_process_group("gloo")
    elif "SLURM_PROCID" in os.environ:
        dist.init_process_group("gloo")
        torch.save(losses, "slurm.pt")  # expect: DDP005


init_mode(None, None)
