# ruff: noqa
# The flag looks like a rank flag (False first, True inside a rank test), but it is then set True on every
# rank: every rank saves.
import os

import torch
import torch.distributed as dist


def train(args):
    dist.init_process_group("gloo")
    keeper = False
    if dist.get_rank() == 0:
        keeper = True
    if args.save_all:
        keeper = True
    model = torch.nn.Linear(4, 2)
    for epoch in range(2):
        if keeper:
            torch.save(model.state_dict(), "model.tmp")  # expect: DDP005
            os.replace("model.tmp", "model.pt")


if __name__ == "__main__":
    import argparse
    train(argparse.ArgumentParser().parse_args())
