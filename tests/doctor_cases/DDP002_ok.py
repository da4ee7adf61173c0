# ruff: noqa
# Near misses: set_epoch through the loader, a sampler that does not shuffle, a sampler used once.
import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

dataset = TensorDataset(torch.randn(64, 4), torch.randint(2, (64,)))
loader = DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset, seed=1))
val_loader = DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset, shuffle=False))
for epoch in range(3):
    loader.sampler.set_epoch(epoch)
    for x, y in loader:
        pass
