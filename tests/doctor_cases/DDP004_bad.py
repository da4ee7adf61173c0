# ruff: noqa
# A DDP job whose every rank trains on the whole dataset.
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset


def train():
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    dataset = TensorDataset(torch.randn(64, 4), torch.randint(2, (64,)))
    loader = DataLoader(dataset, batch_size=8, shuffle=True)  # expect: DDP004
    for epoch in range(2):
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
