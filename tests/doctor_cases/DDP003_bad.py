# ruff: noqa
import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

dataset = TensorDataset(torch.randn(64, 4), torch.randint(2, (64,)))
sampler = DistributedSampler(dataset)
loader = DataLoader(dataset, batch_size=8, sampler=sampler, shuffle=True)  # expect: DDP003
