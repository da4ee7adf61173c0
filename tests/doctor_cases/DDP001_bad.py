# ruff: noqa
# The global rank used to pick a GPU: fine on one machine, "invalid device ordinal" on the second.
import os

import torch
import torch.distributed as dist

dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
rank = dist.get_rank()
torch.cuda.set_device(rank)  # expect: DDP001
device = torch.device("cuda", rank)  # expect: DDP001
model = torch.nn.Linear(4, 2).cuda(dist.get_rank())  # expect: DDP001


def setup():
    global_rank = int(os.environ["RANK"])
    return f"cuda:{global_rank}"  # expect: DDP001


ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])  # expect: DDP001
