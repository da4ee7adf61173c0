# ruff: noqa
# The pytorch DDP tutorial's launch (-n nodes, -g GPUs per node, -nr this node's index), with the global rank
# computed from -nr and then used as the device.
import argparse
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def train(gpu, args):
    rank = args.nr * args.gpus + gpu
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo", init_method="env://", world_size=args.world_size, rank=rank)
    torch.cuda.set_device(dist.get_rank())  # expect: DDP026


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", "--nodes", default=1, type=int)
    parser.add_argument("-g", "--gpus", default=1, type=int)
    parser.add_argument("-nr", "--nr", default=0, type=int)
    args = parser.parse_args()
    args.world_size = args.gpus * args.nodes
    os.environ["MASTER_ADDR"] = "10.57.23.164"
    mp.spawn(train, nprocs=args.gpus, args=(args,))
