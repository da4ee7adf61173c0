# ruff: noqa
# set_epoch on the validation sampler only: the training sampler is never told the epoch.
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler

dist.init_process_group("gloo")
train_sampler = DistributedSampler(train_set)  # expect: DDP002
val_sampler = DistributedSampler(val_set, shuffle=False)
loader = DataLoader(train_set, batch_size=32, sampler=train_sampler)
for epoch in range(5):
    val_sampler.set_epoch(epoch)
    for x, y in loader:
        pass
