# ruff: noqa
# Training by steps: `while True:` starts the loader again and again, and nothing ever calls set_epoch:
# every pass over the data has the first pass's order.
import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main(max_steps):
    dataset = TensorDataset(torch.randn(64, 4), torch.randint(2, (64,)))
    sampler = DistributedSampler(dataset, num_replicas=2, rank=0, shuffle=True)  # expect: DDP002
    loader = DataLoader(dataset, batch_size=8, sampler=sampler)
    step = 0
    while True:
        for x, y in loader:
            step += 1
            if step >= max_steps:
                return
