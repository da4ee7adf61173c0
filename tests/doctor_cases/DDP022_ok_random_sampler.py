# ruff: noqa
# Near miss: one seed on every rank and loader workers, but nothing random in sight except a RandomSampler,
# which orders the samples and augments nothing: no augmentation for the workers to repeat.
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, RandomSampler


def main(args, train_set):
    torch.manual_seed(args.seed)
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(4, 2))
    loader = DataLoader(train_set, batch_size=8, sampler=RandomSampler(train_set), num_workers=4)
    for x, y in loader:
        model(x).sum().backward()
