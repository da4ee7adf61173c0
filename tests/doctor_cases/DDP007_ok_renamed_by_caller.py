# ruff: noqa
# Near miss: the function writes the temporary file, its caller renames it.
import os

import torch
import torch.distributed as dist


def write(state, tmp_path):
    torch.save(state, tmp_path)


def checkpoint(model, path):
    if dist.get_rank() == 0:
        write({"model": model.state_dict()}, path + ".tmp")
        os.replace(path + ".tmp", path)


dist.init_process_group("gloo")
