# ruff: noqa
# Samplers that leave the function that builds them (returned in their loader, in a tuple, stored on self),
# and no set_epoch anywhere in the program: every epoch has epoch 0's order.
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler


def from_path(dataset, is_distributed=False):
    return DataLoader(dataset, batch_size=8, shuffle=not is_distributed,
                      sampler=DistributedSampler(dataset) if is_distributed else None)  # expect: DDP002


def make(dataset):
    sampler = DistributedSampler(dataset)  # expect: DDP002
    loader = DataLoader(dataset, batch_size=8, sampler=sampler)
    return loader, sampler


class Data:
    def __init__(self, dataset):
        self.sampler = DistributedSampler(dataset)  # expect: DDP002


def train(dataset, epochs):
    loader, sampler = make(dataset)
    for epoch in range(epochs):
        for batch in loader:
            pass
