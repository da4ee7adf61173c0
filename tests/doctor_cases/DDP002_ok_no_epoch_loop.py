# ruff: noqa
# Near miss: one pass, no epochs: the order of "every epoch" does not arise.
import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

dataset = TensorDataset(torch.randn(64, 4), torch.randint(2, (64,)))
for x, y in DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset)):
    pass
