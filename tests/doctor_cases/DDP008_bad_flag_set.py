# ruff: noqa
# A load behind a flag parameter that some call sets (by keyword or by position): it runs, on every rank.
import os

import torch
import torch.distributed as dist
import torch.nn as nn


class EmbedNet(nn.Module):
    def __init__(self, size, re_train=False, weights=""):
        super().__init__()
        self.body = nn.Linear(size, size)
        if re_train:
            self.body.load_state_dict(torch.load(weights))  # expect: DDP008


def resume(model, path, enabled=False):
    if enabled:
        model.load_state_dict(torch.load(path))  # expect: DDP008


def main(args):
    dist.init_process_group("gloo")
    model = EmbedNet(8, re_train=args.resume, weights=args.weights)
    resume(model, args.path, True)
    if dist.get_rank() == 0:
        torch.save({"all": model.state_dict(), "body": model.body.state_dict()}, "tmp")
        os.replace("tmp", args.path)
    return model


if __name__ == "__main__":
    main(None)
