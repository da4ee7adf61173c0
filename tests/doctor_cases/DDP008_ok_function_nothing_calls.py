# ruff: noqa
# A helper that nothing in the program calls: its load runs nowhere (torch.load in main names no function
# load of the program), so it is not reported.
import torch
import torch.distributed as dist


def save(model, path):
    torch.save(model.state_dict(), path)  # ddp-doctor: ignore[DDP007]


def load(model, path):
    model.load_state_dict(torch.load(path))


def main():
    dist.init_process_group("gloo")
    model = torch.nn.Linear(4, 2)
    if dist.get_rank() == 0:
        save(model, "model.pt")
    model.load_state_dict(torch.load("model.pt", map_location="cpu"))


if __name__ == "__main__":
    main()
