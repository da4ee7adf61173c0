# ruff: noqa
# In an if/elif chain, the uses reached by `local_rank = dist.get_rank()` are the global rank: its own branch,
# and the code after the chain (which that branch reaches). The other branches' uses are not.
import os

import torch
import torch.distributed as dist


def setup(args, hvd):
    if args.platform == "local":
        dist.init_process_group("gloo")
        local_rank = dist.get_rank()
        torch.cuda.set_device(local_rank)  # expect: DDP001
        device = torch.device("cuda", local_rank)  # expect: DDP001
    elif args.platform == "horovod":
        local_rank = hvd.local_rank()
        torch.cuda.set_device(local_rank)
    else:
        local_rank = int(os.environ["LOCAL_RANK"])
    model = torch.nn.Linear(4, 2).cuda(local_rank)  # expect: DDP001
    return model
