# ruff: noqa
# A new DistributedSampler each epoch, but its seed is the same every epoch (a constant, or one that depends only
# on an inner loop's variable): every epoch repeats the same order, and no set_epoch changes it.
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    dist.init_process_group("gloo")
    parts = [TensorDataset(torch.randn(64, 4)) for _ in range(2)]
    for epoch in range(10):
        sampler = DistributedSampler(parts[0], seed=1234)  # expect: DDP002
        for (x,) in DataLoader(parts[0], batch_size=8, sampler=sampler):
            pass
        for idx, part in enumerate(parts):
            inner = DistributedSampler(part, seed=42 + idx)  # expect: DDP002
            for (x,) in DataLoader(part, batch_size=8, sampler=inner):
                pass


if __name__ == "__main__":
    main()
