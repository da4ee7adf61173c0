# ruff: noqa
# The program joins its group with rank=<the global rank> (RANK): it may span nodes, and the global rank as a
# device index points past the GPUs of every node after the first.
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    rank = int(os.getenv("RANK", 0))
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo", rank=rank)
    model = DDP(torch.nn.Linear(4, 2), device_ids=[dist.get_rank()])  # expect: DDP001


if __name__ == "__main__":
    main()
