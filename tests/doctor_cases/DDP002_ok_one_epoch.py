# ruff: noqa
# Near miss: one epoch, written as range(1): set_epoch would change nothing.
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler

dist.init_process_group("gloo")
sampler = DistributedSampler(train_set)
loader = DataLoader(train_set, batch_size=32, sampler=sampler)
for epoch in range(1):
    for x, y in loader:
        pass
