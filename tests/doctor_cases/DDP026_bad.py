# ruff: noqa
# Written for several nodes (it reads NODE_RANK), and it takes the global rank for its GPU: on node 1 the
# ranks go on from 8, and cuda:8 does not exist.
import os

import torch
import torch.distributed as dist

node_rank = int(os.environ.get("NODE_RANK", 0))
dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
rank = dist.get_rank()
torch.cuda.set_device(rank)  # expect: DDP026
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2).cuda(), device_ids=[rank])  # expect: DDP026
print(f"node {node_rank} rank {rank}")
