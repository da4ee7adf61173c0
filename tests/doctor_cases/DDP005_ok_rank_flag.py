# ruff: noqa
# Near miss: the save is under a flag that only one rank sets True (False first, True inside a rank test,
# or in the run that is not distributed): a rank test kept in a name.
import os

import torch
import torch.distributed as dist


def train(args):
    keeper = False
    if args.world_size > 1:
        dist.init_process_group("gloo")
        if dist.get_rank() == 0:
            keeper = True
    else:
        keeper = True
    model = torch.nn.Linear(4, 2)
    for epoch in range(2):
        if keeper:
            torch.save(model.state_dict(), "model.tmp")
            os.replace("model.tmp", "model.pt")


if __name__ == "__main__":
    import argparse
    train(argparse.ArgumentParser().parse_args())
