# ruff: noqa
# Near miss: the mp.spawn worker's first argument is its rank on the machine; `args.gpu = gpu` keeps it, and
# `if args.gpu == 0:` is a rank guard.
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def main_worker(gpu, ngpus, args):
    args.gpu = gpu
    dist.init_process_group("gloo", rank=gpu, world_size=ngpus)
    if args.gpu == 0:
        torch.save(torch.zeros(1), "export.tmp")


if __name__ == "__main__":
    mp.spawn(main_worker, nprocs=2, args=(2, ARGS))
