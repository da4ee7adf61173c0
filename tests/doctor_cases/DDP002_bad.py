# ruff: noqa
# A shuffling DistributedSampler that is never told the epoch: every epoch, the same order.
import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

dataset = TensorDataset(torch.randn(64, 4), torch.randint(2, (64,)))
sampler = DistributedSampler(dataset)  # expect: DDP002
loader = DataLoader(dataset, batch_size=8, sampler=sampler)
for epoch in range(3):
    for x, y in loader:
        pass
