# ruff: noqa
# Near misses: the transformers-style guard `local_rank in [-1, 0]`; one file per rank, on purpose;
# a function decorated to run on rank 0 only.
import os

import torch
import torch.distributed as dist


def rank_zero_only(fn):
    def wrapped(*args, **kwargs):
        if dist.get_rank() == 0:
            return fn(*args, **kwargs)
    return wrapped


@rank_zero_only
def save_final(model):
    torch.save(model.state_dict(), "final.tmp")
    os.replace("final.tmp", "final.pt")


def main(args):
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    if args.local_rank in [-1, 0]:
        torch.save(model.state_dict(), "model.tmp")
        os.replace("model.tmp", "model.pt")
    torch.save(optimizer.state_dict(), f"optimizer_rank{rank}.tmp")  # each rank its own shard
    os.replace(f"optimizer_rank{rank}.tmp", f"optimizer_rank{rank}.pt")
    save_final(model)


if __name__ == "__main__":
    main(None)
