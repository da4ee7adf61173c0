# ruff: noqa
# The validation loader feeds an endless stream for the periodic one-batch check, and the same loader is also
# read in full by evaluate(), whose summed counts include the samples the padding repeats.
import itertools

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler


def evaluate(model, loader):
    counts = torch.zeros(2)
    for x, y in loader:
        counts += torch.tensor([(model(x).argmax(1) == y).sum().item(), len(y)])
    dist.all_reduce(counts)
    return (counts[0] / counts[1]).item()


def train(model, val_set, loss_fn, steps):
    val_sampler = DistributedSampler(val_set)  # expect: DDP018
    val_loader = DataLoader(val_set, batch_size=8, sampler=val_sampler)
    val_stream = itertools.cycle(val_loader)
    for step in range(steps):
        x, y = next(val_stream)
        print(loss_fn(model(x), y).item())
    return evaluate(model, val_loader)
