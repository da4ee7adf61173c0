# ruff: noqa
# Near miss: the program joins its group with rank=args.local_rank, the launcher's --local_rank: on a second
# node two processes would claim one rank and the group would never form, so it runs on one node only, where
# the global rank is the local rank.
import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=int(os.environ.get("LOCAL_RANK", 0)))
    args = parser.parse_args()
    local_rank = args.local_rank
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo", init_method="env://", rank=local_rank)
    model = DDP(torch.nn.Linear(4, 2), device_ids=[dist.get_rank()])


if __name__ == "__main__":
    main()
