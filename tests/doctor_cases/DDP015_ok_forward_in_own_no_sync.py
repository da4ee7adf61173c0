# ruff: noqa
# Near miss: the accumulation steps run their forward inside one `with model.no_sync():` block and their
# backward inside another, under the same test: DDP decides in the forward that the backward does not reduce.
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
        if holding:
            with model.no_sync():
                out = model(x)
        else:
            out = model(x)
        loss = out.square().mean()
        if holding:
            with model.no_sync():
                loss.backward()
        else:
            loss.backward()
            opt.step()
            opt.zero_grad()


if __name__ == "__main__":
    main()
