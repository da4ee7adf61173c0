# ruff: noqa
# The helper the epoch loop calls saves after its batch loop, when the epoch is done, and stores that epoch
# as it is: the resume trains it again.
import os

import torch
import torch.distributed as dist


def run_epoch(model, optimizer, loader, epoch, path):
    for i, batch in enumerate(loader):
        optimizer.step()
    if dist.get_rank() == 0:
        torch.save({"model": model.state_dict(), "epoch": epoch, "batches": i + 1}, path + ".tmp")
        os.replace(path + ".tmp", path)


def fit(model, optimizer, loader, epochs, path):
    first = 0
    if os.path.exists(path):
        first = torch.load(path, map_location="cpu", weights_only=True)["epoch"]
    for epoch in range(first, epochs):  # expect: DDP020
        loader.sampler.set_epoch(epoch)
        run_epoch(model, optimizer, loader, epoch, path)
