# ruff: noqa
# Near misses: a sampler; a shard made by hand; an evaluation loader (no backward); a loader passed in.
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Subset, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def train(loader_from_caller):
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = DDP(torch.nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    dataset = TensorDataset(torch.randn(64, 4), torch.randint(2, (64,)))
    loader = DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset))
    shard = Subset(dataset, range(rank, len(dataset), world))
    by_hand = DataLoader(shard, batch_size=8, shuffle=True)
    evaluation = DataLoader(dataset, batch_size=64)
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for source in (loader, by_hand, loader_from_caller):
            for x, y in source:
                model(x).sum().backward()
        for x, y in by_hand:
            model(x).sum().backward()
        with torch.no_grad():
            for x, y in evaluation:
                model.module(x)
