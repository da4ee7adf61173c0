# ruff: noqa
# Near miss: written for several nodes (--nnodes, NODE_RANK), and the device is the local rank.
import argparse
import os

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--nnodes", type=int, default=1)
args = parser.parse_args()
node_rank = int(os.environ["NODE_RANK"])
dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
rank = dist.get_rank()
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2).cuda(), device_ids=[local_rank])
print(f"node {node_rank} of {args.nnodes}, rank {rank}")
