# ruff: noqa
# Near misses: the local rank picks the device; the global rank only names the process.
import os

import torch
import torch.distributed as dist

dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
rank = dist.get_rank()
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
device = torch.device("cuda", local_rank)
print(f"[rank {rank}] on cuda:{local_rank}")
gpu = rank % torch.cuda.device_count()  # a computed index: not the bare global rank
torch.manual_seed(rank)  # the rank as a seed is fine
model = torch.nn.Linear(4, 2).to(device)


def helper(rank):
    return torch.device("cuda", rank)  # a parameter: the caller may pass the local rank
