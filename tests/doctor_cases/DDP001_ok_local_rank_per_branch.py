# ruff: noqa
# Near miss: an if/elif chain that sets local_rank per platform. One branch sets it from get_rank() and uses
# it only to label a log line; the other branches set it from a real local rank (Horovod's, the launcher's,
# MPI's, SLURM's), and their device uses are reached by those assignments only.
import os

import torch
import torch.distributed as dist


def setup(args, hvd):
    if args.platform == "single_node":
        dist.init_process_group("gloo")
        local_rank = dist.get_rank()
        print("process", local_rank)
    elif args.platform == "horovod":
        local_rank = hvd.local_rank()
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    elif args.platform == "launcher":
        local_rank = args.local_rank
        torch.cuda.set_device(local_rank)
    elif args.platform == "mpi":
        local_rank = int(os.environ["OMPI_COMM_WORLD_LOCAL_RANK"])
        torch.cuda.set_device(local_rank)
        device = f"cuda:{local_rank}"
    else:
        local_rank = int(os.environ["SLURM_LOCALID"])
        torch.cuda.set_device(local_rank)
