# ruff: noqa
# Near misses: a seed that is a parameter the file never passes (its caller may pass seed + rank); a seed set in
# the function that calls mp.spawn (each spawned rank starts from torch's own random seed).
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import datasets, transforms


def build(seed, data):
    torch.manual_seed(seed)
    return DDP(torch.nn.Linear(10, 10)), DataLoader(data, sampler=DistributedSampler(data), num_workers=2)


def launcher(args):
    torch.manual_seed(args.seed)
    torch.multiprocessing.spawn(worker, args=(args,), nprocs=args.gpus)


def worker(gpu, args):
    data = datasets.CIFAR10("data", transform=transforms.RandomCrop(32, padding=4))
    return DataLoader(data, sampler=DistributedSampler(data), num_workers=4)
