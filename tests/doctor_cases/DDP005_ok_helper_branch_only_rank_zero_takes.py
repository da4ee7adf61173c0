# ruff: noqa
# The calls that every rank makes pass constants that skip the helper's save (save_cur=True by keyword, False
# by position, `if not quiet:` with its default); only rank 0's calls reach it: no finding.
import torch
import torch.distributed as dist


def save_checkpoint(model, epoch, save_every, save_cur=False, quiet=True):
    if save_cur:
        print("last epoch", epoch)
    elif epoch % save_every == 0:
        torch.save(model.weight.detach().cpu(), f"weight_{epoch}.pt")


def export(model, final):
    if final:
        torch.save(model.weight.detach().cpu(), "final.pt")


def report(model, quiet=True):
    if not quiet:
        torch.save(model.weight.detach().cpu(), "report.pt")


def main(epochs=4):
    dist.init_process_group("gloo")
    model = torch.nn.Linear(4, 2)
    for epoch in range(epochs):
        if dist.get_rank() == 0:
            save_checkpoint(model, epoch, 2)
            export(model, True)
            report(model, quiet=False)
    save_checkpoint(model, "last", 2, save_cur=True)
    export(model, False)
    report(model)


if __name__ == "__main__":
    main()
