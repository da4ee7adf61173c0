# ruff: noqa
# Near misses: forward and backward inside no_sync; the model passed to a helper inside it.
import torch
from torch.nn.parallel import DistributedDataParallel as DDP


def accumulate(ddp_model, batches, optimizer, loss_of):
    for i, (x, y) in enumerate(batches):
        if i < len(batches) - 1:
            with ddp_model.no_sync():
                torch.nn.functional.cross_entropy(ddp_model(x), y).backward()
            with ddp_model.no_sync():
                loss_of(ddp_model, x, y).backward()
        else:
            torch.nn.functional.cross_entropy(ddp_model(x), y).backward()
    optimizer.step()
