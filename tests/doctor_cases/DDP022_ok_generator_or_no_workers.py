# ruff: noqa
# Near misses, beside one seed for every rank and random crops: a loader given a generator; one given a
# worker_init_fn; no workers (0, or none asked for); an evaluation loader; a seed that is a parameter the file
# never passes (its caller may pass seed + rank); a seed set in the function that calls mp.spawn.
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import datasets, transforms
from helpers import make_generator, seed_worker

dist.init_process_group("gloo")
torch.manual_seed(0)
model = DDP(torch.nn.Linear(10, 10))
train_set = datasets.CIFAR10("data", transform=transforms.RandomCrop(32, padding=4))
sampler = DistributedSampler(train_set)
by_generator = DataLoader(train_set, sampler=sampler, num_workers=4, generator=make_generator())
by_init_fn = DataLoader(train_set, sampler=sampler, num_workers=4, worker_init_fn=seed_worker)
in_process = DataLoader(train_set, sampler=sampler, num_workers=0)
default = DataLoader(train_set, sampler=sampler)
val_loader = DataLoader(datasets.CIFAR10("data", train=False), batch_size=256, num_workers=4)
