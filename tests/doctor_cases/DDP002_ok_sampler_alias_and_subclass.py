# ruff: noqa
# Near miss: the aliased sampler is told the epoch, and the subclass draws its own order in an __iter__
# that reads no epoch (set_epoch would not change it).
import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler as DDP_sampler


class FixedOrderSampler(DDP_sampler):
    def __iter__(self):
        return iter(range(self.rank, len(self.dataset), self.num_replicas))


def train(epochs):
    dataset = TensorDataset(torch.randn(64, 4), torch.randint(2, (64,)))
    sampler = DDP_sampler(dataset, rank=0, num_replicas=2)
    loader = DataLoader(dataset, batch_size=8, shuffle=False, sampler=sampler)
    other = DataLoader(dataset, batch_size=8, sampler=FixedOrderSampler(dataset))
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            pass
        for x, y in other:
            pass
