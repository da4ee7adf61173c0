# ruff: noqa
# Near miss: the program joins its group with rank=<its local rank> (read from LOCAL_RANK): on a second node
# two processes would claim one rank and the group would never form, so it runs on one node only, where the
# global rank is the local rank.
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    local_rank = int(os.getenv("LOCAL_RANK", 0))
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo", rank=local_rank)
    device = dist.get_rank()
    model = DDP(torch.nn.Linear(4, 2).to(device), device_ids=[dist.get_rank()])


if __name__ == "__main__":
    main()
