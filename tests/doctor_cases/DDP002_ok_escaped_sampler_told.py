# ruff: noqa
# Near miss: the sampler leaves its helper and the caller tells it the epoch (a set_epoch in the program).
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler


def make(dataset):
    sampler = DistributedSampler(dataset)
    return DataLoader(dataset, batch_size=8, sampler=sampler), sampler


def train(dataset, epochs):
    loader, received = make(dataset)
    for epoch in range(epochs):
        received.set_epoch(epoch)
        for batch in loader:
            pass
