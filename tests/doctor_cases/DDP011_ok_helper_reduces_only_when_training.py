# ruff: noqa
# Near miss: rank 0 alone runs a validation pass through the helper that also trains; the helper all-reduces
# only `if train:`, and the call passes train=False (the DDP model of Linear layers has no buffers).
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
            with torch.no_grad():
                print(run_epoch(model, batches, False))


if __name__ == "__main__":
    main()
