# ruff: noqa
# Near misses: shuffle=True without a sampler (one process), sampler=None, the sampler shuffles.
import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

dataset = TensorDataset(torch.randn(64, 4), torch.randint(2, (64,)))
single = DataLoader(dataset, batch_size=8, shuffle=True)
also_single = DataLoader(dataset, batch_size=8, sampler=None, shuffle=True)
sharded = DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset, shuffle=True), shuffle=False)
