# ruff: noqa
# The same seed on every rank (for equal initial weights), and workers seeded from it: worker k of every rank
# draws the same crops and flips.
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import datasets, transforms

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

dist.init_process_group("gloo")
torch.manual_seed(args.seed)
augment = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                              transforms.ToTensor()])
train_set = datasets.ImageFolder("data/train", transform=augment)
sampler = DistributedSampler(train_set)
train_loader = DataLoader(train_set, batch_size=64, sampler=sampler, num_workers=8,  # expect: DDP022
                          pin_memory=True, worker_init_fn=None)
val_loader = DataLoader(datasets.ImageFolder("data/val", transform=transforms.ToTensor()), batch_size=64,
                        num_workers=8)
model = DDP(torch.nn.Linear(10, 10))
