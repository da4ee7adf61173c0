# ruff: noqa
# Near miss of code that nothing runs: the same State.save, called once (on every rank), is reported.
import torch
import torch.distributed as dist


class State:
    def __init__(self, model):
        self.model = model

    def save(self, f):
        torch.save(self.model.weight, f)  # expect: DDP005


def main():
    dist.init_process_group("gloo")
    holder = State(torch.nn.Linear(4, 2))
    holder.save("weights.pt")


if __name__ == "__main__":
    main()
