# ruff: noqa
# Near miss: the script points the rendezvous at this machine itself and starts one process per local GPU
# with mp.spawn: every process runs here, so the global rank is the local rank.
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(index, world):
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo", rank=index, world_size=world)
    torch.cuda.set_device(dist.get_rank())


def main():
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29500"
    world = torch.cuda.device_count()
    mp.spawn(worker, args=(world,), nprocs=world)


def worker_tcp(index, world):
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo", init_method="tcp://localhost:23456", rank=index, world_size=world)
    model = torch.nn.Linear(2, 2).to(dist.get_rank())
