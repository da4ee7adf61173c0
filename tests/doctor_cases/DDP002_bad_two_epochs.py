# ruff: noqa
# Two epochs, written as a number: the second repeats the first one's order.
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler

dist.init_process_group("gloo")
sampler = DistributedSampler(train_set)  # expect: DDP002
loader = DataLoader(train_set, batch_size=32, sampler=sampler)
for epoch in range(2):
    for x, y in loader:
        pass
