# ruff: noqa
# FSDP2 on a model built whole on every rank: each rank allocates and initialises every parameter, then keeps
# its shard.
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard


class Block(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.ff = torch.nn.Linear(dim, dim)

    def forward(self, x):
        return x + self.ff(x)


class Net(torch.nn.Module):
    def __init__(self, dim, depth):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(dim) for _ in range(depth))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def main():
    dist.init_process_group("gloo")
    model = Net(4096, 48)
    model = model.to(torch.device("cpu"))
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)  # expect: DDP023
    return model
