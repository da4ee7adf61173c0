# ruff: noqa
# Near miss: under `if local_rank in [-1, 0]:` (rank 0 or a single process), a helper that calls a collective
# runs only inside `if local_rank == -1:` (or `in [-1]`): the run that is not distributed, no other rank to wait.
import argparse
import os

import torch
import torch.distributed as dist


def score(model):
    total = torch.ones(1)
    dist.all_reduce(total)
    return total


def train(args, model):
    if args.local_rank != -1:
        dist.init_process_group("gloo")
    for step in range(10):
        if args.local_rank in [-1, 0] and step % 5 == 0:
            if args.local_rank == -1:  # a single process: nothing to wait for
                score(model)
            if args.local_rank in [-1]:
                score(model)


def main():
    args = argparse.Namespace()
    args.local_rank = int(os.environ.get("LOCAL_RANK", -1))
    train(args, torch.nn.Linear(4, 2))
