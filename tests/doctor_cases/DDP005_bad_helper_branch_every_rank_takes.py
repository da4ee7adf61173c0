# ruff: noqa
# A save helper that rank 0 calls each epoch and every rank calls once at the end, save_cur=True: the save_cur
# branch runs on every rank (the `elif` beside it runs only from rank 0's calls).
import torch
import torch.distributed as dist


def save_checkpoint(model, epoch, save_every, save_cur=False):
    if save_cur:
        torch.save(model.weight.detach().cpu(), f"weight_{epoch}.pt")  # expect: DDP005
    elif epoch % save_every == 0:
        torch.save(model.weight.detach().cpu(), f"weight_{epoch}.pt")


def main(epochs=4):
    dist.init_process_group("gloo")
    model = torch.nn.Linear(4, 2)
    for epoch in range(epochs):
        if dist.get_rank() == 0:
            save_checkpoint(model, epoch, 2)
    save_checkpoint(model, "last", 2, save_cur=True)


if __name__ == "__main__":
    main()
