# ruff: noqa
# Near miss: a package's command line whose `train` command forms the process group; `export`, a sibling
# branch of the dispatch, runs in one process and saves there: no rank runs it after the group forms.
import os
import sys

import torch
import torch.distributed as dist


def train(config):
    dist.init_process_group("gloo")
    model = torch.nn.Linear(4, 2)
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), config + ".tmp")
        os.replace(config + ".tmp", config + ".pt")


def export(source, target):
    state = torch.load(source)
    torch.save({k: v.half() for k, v in state.items()}, target + ".tmp")
    os.replace(target + ".tmp", target)


def main(argv):
    command = argv[1]
    if command == "train":
        train(argv[2])
    elif command == "export":
        export(argv[2], argv[3])
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main(sys.argv)
