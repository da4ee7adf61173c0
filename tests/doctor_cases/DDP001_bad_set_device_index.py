# ruff: noqa
# The global rank as a device through torch.accelerator.
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.accelerator.set_device_index(rank)  # expect: DDP001
