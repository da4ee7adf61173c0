# ruff: noqa
# Near miss: the only loader with workers is on the single-process side of a "distributed or not" test (the
# `else` of `if opts.use_ddp:`, and the body of `if not distributed:`): one process, no other rank to repeat.
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import datasets, transforms


def run(index, opts):
    torch.manual_seed(opts.seed)
    flips = transforms.Compose([transforms.RandomVerticalFlip(), transforms.ToTensor()])
    images = datasets.ImageFolder("pics/train", transform=flips)
    if opts.use_ddp:
        dist.init_process_group("gloo", rank=index, world_size=opts.world)
        feed = DataLoader(images, batch_size=16, sampler=DistributedSampler(images), num_workers=0)
    else:
        feed = DataLoader(images, batch_size=16, shuffle=True, num_workers=4)
    distributed = opts.world > 1
    if not distributed:
        feed = DataLoader(images, batch_size=16, shuffle=True, num_workers=2)
    return feed
