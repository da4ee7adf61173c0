# ruff: noqa
# Near misses: the loss all-reduced before it is logged, through dist or a helper; a line that says it is
# one rank's; a loss that arrives as a parameter (its caller may have reduced it); rank 0's own evaluation.
import torch
import torch.distributed as dist
import torch.nn as nn


def sum_over_ranks(*numbers):
    totals = torch.tensor(numbers, dtype=torch.float64)
    dist.all_reduce(totals)
    return totals.tolist()


def log(epoch, loss):
    if dist.get_rank() == 0:
        print(f"epoch {epoch} loss {loss.item():.4f}")


dist.init_process_group("gloo")
rank = dist.get_rank()
model, criterion = nn.Linear(4, 2), nn.CrossEntropyLoss()
for epoch in range(2):
    running, seen = 0.0, 0
    for step in range(4):
        loss = criterion(model(torch.randn(8, 4)), torch.randint(2, (8,)))
        running += loss.item()
        seen += 1
    loss = loss.detach().clone()
    dist.all_reduce(loss)
    total, count = sum_over_ranks(running, seen)
    if rank == 0:
        print(f"last step, summed over ranks: {loss.item():.4f}; epoch mean {total / count:.4f}")
        val_loss = evaluate_everything(model)
        print(f"validation loss {val_loss.item():.4f}")
    print(f"[rank {rank}] this rank's own loss {running / seen:.4f}")
    log(epoch, loss)
