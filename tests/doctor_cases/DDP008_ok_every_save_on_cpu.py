# ruff: noqa
# Near miss: every torch.save of the script moves its tensors to the CPU first (the optimizer's state is
# loaded back with map_location), so a load without map_location puts nothing on GPU 0.
import os

import torch
import torch.distributed as dist


def save_weights(model, path):
    weights = model.state_dict()
    for key, value in weights.items():
        weights[key] = value.cpu()
    torch.save(weights, path)


def save_ema(ema, path):
    torch.save({k: v.to("cpu") for k, v in ema.state_dict().items()}, path + ".tmp")
    os.replace(path + ".tmp", path)


def save_optimizer(optimizer, path):
    torch.save(optimizer.state_dict(), path + ".tmp")
    os.replace(path + ".tmp", path)


def resume(model, ema, optimizer, paths):
    dist.init_process_group("gloo")
    model.load_state_dict(torch.load(paths[0]))
    ema.load_state_dict(torch.load(paths[1]))
    optimizer.load_state_dict(torch.load(paths[2], map_location="cpu"))
