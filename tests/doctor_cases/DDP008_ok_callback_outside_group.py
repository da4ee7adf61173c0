# ruff: noqa
# A load in a Ray Tune trial: tune_setup hands trial to tune.run (partial(trial, ...)), and only the branch
# that does not tune starts the DDP workers; no path that reaches trial forms a group, so the trial process
# loads the checkpoint it wrote itself, on its one GPU.
import argparse
import os
from functools import partial

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from ray import tune
from torch.nn.parallel import DistributedDataParallel as DDP


def worker(rank, world_size):
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    model = DDP(torch.nn.Linear(4, 2))
    model(torch.randn(3, 4)).sum().backward()
    dist.destroy_process_group()


def trial(config, checkpoint_dir=None, data_path=None):
    model = torch.nn.Linear(4, 2).to("cuda")
    if checkpoint_dir:
        model.load_state_dict(torch.load(checkpoint_dir + "/checkpoint"))
    torch.save(model.state_dict(), "checkpoint.tmp")
    os.replace("checkpoint.tmp", "checkpoint")


def tune_setup(data_path):
    return tune.run(partial(trial, data_path=data_path), resources_per_trial={"gpu": 1})


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tune", action="store_true")
    args = parser.parse_args()
    if args.tune:
        tune_setup("data")
    else:
        mp.spawn(worker, args=(2,), nprocs=2)
