# ruff: noqa
import torch
import torch.distributed as dist
import torch.nn as nn

dist.init_process_group("gloo")
rank = dist.get_rank()
model, loss_fn = nn.Linear(4, 2), nn.CrossEntropyLoss()
for epoch in range(2):
    running = 0.0
    for step in range(4):
        loss = loss_fn(model(torch.randn(8, 4)), torch.randint(2, (8,)))
        running += loss.item()
        if rank == 0 and step % 2 == 0:
            print(f"step {step} loss {loss.item():.4f}")  # expect: DDP017
    if rank == 0:
        print(f"epoch {epoch} mean loss {running / 4:.4f}")  # expect: DDP017
