# ruff: noqa
# Not a guard: a test on a value that every rank receives (validate() returns its result on every path, or
# under `gpu == 0 or epoch > 3`, which other ranks pass too), and the side of `if scores is None:` that the
# ranks without the value take: those saves run on more than one rank.
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def validate(model, loader, gpu):
    total = torch.zeros(2)
    for x, y in loader:
        total += torch.stack([(model(x) - y).abs().sum(), torch.tensor(float(len(y)))])
    dist.all_reduce(total)
    if gpu == 0:
        print("validation error", (total[0] / total[1]).item())
        return total[0] / total[1]
    return total[0] / total[1]


def validate_late(model, loader, gpu, epoch):
    if gpu == 0 or epoch > 3:
        return model(loader).mean()
    return None


def validate_first(model, loader, gpu):
    if gpu == 0:
        return model(loader).mean()
    return None


def worker(gpu, ngpus, args):
    dist.init_process_group("gloo", rank=gpu, world_size=ngpus)
    model = torch.nn.Linear(4, 1)
    for epoch in range(args.epochs):
        scores = validate(model, args.loader, gpu)
        if scores is not None:
            torch.save(model.weight.detach(), "best.pt")  # expect: DDP005
        late = validate_late(model, args.loader, gpu, epoch)
        if late is not None:
            torch.save(model.weight.detach(), "late.pt")  # expect: DDP005
        first = validate_first(model, args.loader, gpu)
        if first is None:
            torch.save(model.weight.detach(), "others.pt")  # expect: DDP005


if __name__ == "__main__":
    mp.spawn(worker, nprocs=2, args=(2, ARGS))
