# ruff: noqa
# Rank 0 alone runs the helper with train=True: its all_reduce runs on rank 0 only, and the other ranks
# never join it.
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def run_epoch(model, batches, train, optimizer=None):
    total = torch.zeros(1)
    for x, y in batches:
        loss = torch.nn.functional.mse_loss(model(x), y)
        if train:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            dist.all_reduce(loss)
        total += loss.detach()
    return total


def main():
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [(torch.randn(2, 4), torch.randn(2, 1))]
    for epoch in range(3):
        run_epoch(model, batches, True, optimizer)
        if dist.get_rank() == 0:
            print(run_epoch(model, batches, train=True, optimizer=optimizer))  # expect: DDP011


if __name__ == "__main__":
    main()
