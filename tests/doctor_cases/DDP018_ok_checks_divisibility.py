# ruff: noqa
# Near miss: the script tests whether the evaluation set divides by the world size and says what it costs.
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler

dist.init_process_group("gloo")
world = dist.get_world_size()
if len(val_set) % world != 0:
    print("the evaluation set does not divide by the world size: a few samples count twice")
val_loader = DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False))
