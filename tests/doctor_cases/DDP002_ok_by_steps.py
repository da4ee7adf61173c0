# ruff: noqa
# Near miss: `while True:` in the file, but the loader it reads is made afresh inside it with a sampler
# seeded by the pass (and another loader is read once, outside any loop).
import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main(max_steps):
    dataset = TensorDataset(torch.randn(64, 4), torch.randint(2, (64,)))
    sampler = DistributedSampler(dataset, num_replicas=2, rank=0)
    once = DataLoader(dataset, batch_size=8, sampler=sampler)
    for x, y in once:
        pass
    step, rounds = 0, 0
    while True:
        fresh = DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset, 2, 0, seed=rounds))
        rounds += 1
        for x, y in fresh:
            step += 1
            if step >= max_steps:
                return
