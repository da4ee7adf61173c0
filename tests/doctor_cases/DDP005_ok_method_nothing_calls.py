# ruff: noqa
# Code that nothing runs: State.save and export() are never referred to in a program with an entry point
# (`torch.save` names no method of the program), so their saves are not reported.
import torch
import torch.distributed as dist


class State:
    def __init__(self, model):
        self.model = model

    def save(self, f):
        torch.save(self.model.weight, f)


def export(model):
    torch.save(model.weight, "export.pt")


def main():
    dist.init_process_group("gloo")
    holder = State(torch.nn.Linear(4, 2))
    if dist.get_rank() == 0:
        torch.save(holder.model.weight, "weights.pt")
    torch.save(holder.model.weight, f"weights_{dist.get_rank()}.pt")  # a file per rank


if __name__ == "__main__":
    main()
