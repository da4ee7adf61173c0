# ruff: noqa
# Near miss: it names a node count, but it points the rendezvous at this machine and starts its processes
# with mp.spawn: single-node by construction, the global rank is the local rank (neither DDP001 nor DDP026).
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(index, num_nodes):
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo", rank=index, world_size=torch.cuda.device_count() * num_nodes)
    torch.cuda.set_device(dist.get_rank())


if __name__ == "__main__":
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = "29500"
    mp.spawn(worker, args=(1,), nprocs=torch.cuda.device_count())
