# ruff: noqa
# `if local_rank in [-1, 0]:` lets rank 0 of a distributed run in, alone: its collective waits for ranks that
# never call it.
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
            score(model)  # expect: DDP011


def main():
    args = argparse.Namespace()
    args.local_rank = int(os.environ.get("LOCAL_RANK", -1))
    train(args, torch.nn.Linear(4, 2))
