# ruff: noqa
import torch.distributed as dist


def main(args):
    dist.init_process_group("gloo")
    if args.local_rank in [-1, 0]:
        dist.barrier()  # expect: DDP011
