# ruff: noqa
# One save moves its tensors to the CPU, the other does not: a load without map_location may read the
# file saved from GPU 0, and every rank's copy lands there.
import os

import torch
import torch.distributed as dist


def save_weights(model, path):
    weights = {k: v.cpu() for k, v in model.state_dict().items()}
    torch.save(weights, path)


def save_checkpoint(model, epoch, path):
    torch.save({"model": model.state_dict(), "epoch": epoch}, path + ".tmp")
    os.replace(path + ".tmp", path)


def resume(model, path):
    dist.init_process_group("gloo")
    model.load_state_dict(torch.load(path)["model"])  # expect: DDP008
