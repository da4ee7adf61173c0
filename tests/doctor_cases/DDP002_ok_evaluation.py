# ruff: noqa
# Near miss: a sampler over the validation set, never told the epoch: its order does not matter.
import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

val_set = TensorDataset(torch.randn(64, 4), torch.randint(2, (64,)))
val_loader = DataLoader(val_set, batch_size=8, sampler=DistributedSampler(val_set, drop_last=True))
for epoch in range(3):
    for x, y in val_loader:
        pass
