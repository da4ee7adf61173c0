# ruff: noqa
# The accumulation steps run their backward inside `with model.no_sync():`, but the forward runs outside any
# no_sync() (or inside one under another test): the forward has already set up the reduction.
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(8):
        x = torch.randn(3, 4)
        holding = (i + 1) % 4 != 0
        if i > 100:
            with model.no_sync():
                out = model(x)
        out = model(x)
        loss = out.square().mean()
        if holding:
            with model.no_sync():  # expect: DDP015
                loss.backward()
        else:
            loss.backward()
            opt.step()
            opt.zero_grad()


if __name__ == "__main__":
    main()
