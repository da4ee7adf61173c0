# ruff: noqa
# mp.spawn starts the processes of one machine, but the rendezvous is another machine's address: on the
# second node the global rank (node * GPUs + index) is past the local GPU count.
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(index, args):
    rank = args.node * torch.cuda.device_count() + index
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo", rank=rank, world_size=args.world)
    torch.cuda.set_device(dist.get_rank())  # expect: DDP001


def main(args):
    os.environ["MASTER_ADDR"] = args.master
    os.environ["MASTER_PORT"] = "29500"
    mp.spawn(worker, args=(args,), nprocs=torch.cuda.device_count())
