# ruff: noqa
# The program declares the launcher's --local_rank but joins its group with rank=args.rank, a global rank: it
# may span nodes, and the global rank as a device index points past the GPUs of every node after the first.
import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=int(os.environ.get("LOCAL_RANK", 0)))
    parser.add_argument("--rank", type=int, default=0)
    args = parser.parse_args()
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo", init_method="env://", rank=args.rank)
    model = DDP(torch.nn.Linear(4, 2), device_ids=[dist.get_rank()])  # expect: DDP001


if __name__ == "__main__":
    main()
