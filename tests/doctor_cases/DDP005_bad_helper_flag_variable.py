# ruff: noqa
# Near miss of the constant flag: the call that every rank makes passes a variable, so both of the helper's
# saves may run on every rank.
import torch
import torch.distributed as dist


def save_checkpoint(model, epoch, save_every, save_cur=False):
    if save_cur:
        torch.save(model.weight.detach().cpu(), f"weight_{epoch}.pt")  # expect: DDP005
    elif epoch % save_every == 0:
        torch.save(model.weight.detach().cpu(), f"weight_{epoch}.pt")  # expect: DDP005


def main(epochs=4, final=True):
    dist.init_process_group("gloo")
    model = torch.nn.Linear(4, 2)
    for epoch in range(epochs):
        if dist.get_rank() == 0:
            save_checkpoint(model, epoch, 2)
    save_checkpoint(model, "last", 2, final)


if __name__ == "__main__":
    main()
