# ruff: noqa
# The seed is the same on every rank, and the loader of the distributed side of `if opts.use_ddp:` has workers
# and no generator: worker k of every rank draws the same flips.
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
        feed = DataLoader(images, batch_size=16, sampler=DistributedSampler(images), num_workers=4)  # expect: DDP022
    else:
        feed = DataLoader(images, batch_size=16, shuffle=True, num_workers=4)
    return feed
