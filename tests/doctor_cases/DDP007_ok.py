# ruff: noqa
# Near misses: written to a temporary file, then renamed; a buffer in memory; a tensor that is no checkpoint.
import io
import os
from pathlib import Path

import torch
import torch.distributed as dist


def save_checkpoint(model, path):
    if dist.get_rank() == 0:
        tmp = Path(str(path) + ".tmp")
        torch.save({"model": model.state_dict()}, tmp)
        tmp.replace(path)
    dist.barrier()


def to_bytes(model):
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.getvalue()


def save_predictions(predictions, path):
    if dist.get_rank() == 0:
        torch.save(predictions, path)


dist.init_process_group("gloo")
