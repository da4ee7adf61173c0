# ruff: noqa
# Near miss of a helper nothing calls: the same helper, called once, loads the GPU tensors it saved.
import torch
import torch.distributed as dist


def save(model, path):
    torch.save(model.state_dict(), path)  # ddp-doctor: ignore[DDP007]


def load(model, path):
    model.load_state_dict(torch.load(path))  # expect: DDP008


def main():
    dist.init_process_group("gloo")
    model = torch.nn.Linear(4, 2)
    if dist.get_rank() == 0:
        save(model, "model.pt")
    load(model, "model.pt")


if __name__ == "__main__":
    main()
