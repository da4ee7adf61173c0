# ruff: noqa
# A helper that every rank passes alike (a rank is never negative) guards nothing: every rank writes.
import torch
import torch.distributed as dist


def writes_files():
    return dist.get_rank() >= 0


def main():
    dist.init_process_group("gloo")
    model = torch.nn.Linear(4, 2)
    if writes_files():
        torch.save(model.weight.detach().cpu(), "weight.pt")  # expect: DDP005


if __name__ == "__main__":
    main()
