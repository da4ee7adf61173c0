# ruff: noqa
# DDP026's case without its node facts (no NODE_RANK, no node count): the same use is DDP001's advice, wrong
# only on a second node, a launch this program does not show. Setting NODE_RANK is not reading it.
import os

import torch
import torch.distributed as dist

os.environ["NODE_RANK"] = "0"
dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
rank = dist.get_rank()
torch.cuda.set_device(rank)  # expect: DDP001
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2).cuda(), device_ids=[rank])  # expect: DDP001
print(f"rank {rank}")
