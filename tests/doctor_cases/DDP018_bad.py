# ruff: noqa
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def evaluate(model, val_set):
    loader = DataLoader(val_set, batch_size=64, sampler=DistributedSampler(val_set, shuffle=False))  # expect: DDP018
    counts = torch.zeros(2)
    for x, y in loader:
        counts += torch.tensor([(model(x).argmax(1) == y).sum().item(), len(y)])
    dist.all_reduce(counts)
    return (counts[0] / counts[1]).item()
