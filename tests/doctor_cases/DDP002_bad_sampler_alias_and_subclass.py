# ruff: noqa
# DistributedSampler under another name: imported as an alias, or a subclass of the file that keeps its
# order (no __iter__ of its own): each is a shuffling DistributedSampler never told the epoch.
import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler as DDP_sampler


class RepeatSampler(DDP_sampler):
    def __len__(self):
        return super().__len__()


def train(epochs):
    dataset = TensorDataset(torch.randn(64, 4), torch.randint(2, (64,)))
    sampler = DDP_sampler(dataset, rank=0, num_replicas=2)  # expect: DDP002
    loader = DataLoader(dataset, batch_size=8, shuffle=False, sampler=sampler)
    other = DataLoader(dataset, batch_size=8, sampler=RepeatSampler(dataset))  # expect: DDP002
    for epoch in range(epochs):
        for x, y in loader:
            pass
        for x, y in other:
            pass
