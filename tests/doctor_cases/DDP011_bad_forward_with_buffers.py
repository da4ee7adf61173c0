# ruff: noqa
# A rank-0 evaluation through a DDP model whose modules hold buffers: each forward broadcasts them from
# rank 0 (broadcast_buffers=True, the default), and the other ranks never join. The buffers are seen in a
# class of the file (BatchNorm, register_buffer), in a torchvision model with BatchNorm, through the names
# the model is bound to; `distributed = local_rank >= 0` is no rank test, `local_rank > 0` is one. The
# ranks are read where they come from: LOCAL_RANK and get_rank().
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torchvision
from torch.nn.parallel import DistributedDataParallel as DDP


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.norm = nn.BatchNorm2d(8)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.register_buffer("scale", torch.ones(1))
        self.head = nn.Linear(8, 2)


def evaluate_net(args, loader):
    model = Net().to(args.device)
    model = DDP(model)
    if dist.get_rank() == 0:
        for x in loader:
            model(x)  # expect: DDP011


def evaluate_resnet(args, loader):
    args.local_rank = int(os.environ.get("LOCAL_RANK", -1))
    backbone = torchvision.models.resnet18()
    model = nn.Sequential(backbone, nn.Linear(1000, 2))
    ddp_model = DDP(model, device_ids=[args.local_rank])
    distributed = args.local_rank >= 0
    if distributed:
        dist.barrier()
    if args.local_rank > 0:
        dist.barrier()  # expect: DDP011
    if args.local_rank == 0:
        with torch.no_grad():
            ddp_model(next(iter(loader)))  # expect: DDP011


def evaluate_backbone(args, resnet, loader):
    args.rank = dist.get_rank()
    trunk, width = resnet.__dict__[args.arch](zero_init_residual=True)
    model = DDP(nn.Sequential(trunk, nn.Linear(width, 2)))
    if args.rank == 0:
        model(next(iter(loader)))  # expect: DDP011
