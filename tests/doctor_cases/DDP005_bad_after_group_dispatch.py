# ruff: noqa
# The same command line with the group formed before the dispatch: `export` now runs on every rank, which all
# write one file.
import os
import sys

import torch
import torch.distributed as dist


def setup():
    dist.init_process_group("gloo")


def train(config):
    model = torch.nn.Linear(4, 2)
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), config + ".tmp")
        os.replace(config + ".tmp", config + ".pt")


def export(source, target):
    state = torch.load(source, map_location="cpu")
    torch.save({k: v.half() for k, v in state.items()}, target + ".tmp")  # expect: DDP005
    os.replace(target + ".tmp", target)


def main(argv):
    setup()
    command = argv[1]
    if command == "train":
        train(argv[2])
    elif command == "export":
        export(argv[2], argv[3])


if __name__ == "__main__":
    main(sys.argv)
