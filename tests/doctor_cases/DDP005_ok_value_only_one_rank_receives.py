# ruff: noqa
# Near miss: validate() sums the scores on every rank, then hands them back on the first process of the
# machine only (`gpu` is the mp.spawn index) and None to the others, so the code under `if scores is not
# None:`, `if scores:` or after `if scores is None: continue` runs on that one process: its saves are guarded.
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def validate(model, loader, gpu, spawned):
    total = torch.zeros(2)
    for x, y in loader:
        total += torch.stack([(model(x) - y).abs().sum(), torch.tensor(float(len(y)))])
    if spawned:
        dist.all_reduce(total)
    if not spawned or gpu == 0:
        result = total[0] / total[1]
        print("validation error", result.item())
        return result
    return None


def worker(gpu, ngpus, args):
    dist.init_process_group("gloo", rank=gpu, world_size=ngpus)
    model = torch.nn.Linear(4, 1)
    best = None
    for epoch in range(args.epochs):
        scores = validate(model, args.loader, gpu, True)
        if scores is not None:
            if best is None or scores < best:
                best = scores
                torch.save(model.weight.detach(), "best.pt")
        if scores:
            torch.save(scores, "scores.pt")
        if scores is None:
            continue
        torch.save(model.weight.detach(), "last.pt")


if __name__ == "__main__":
    mp.spawn(worker, nprocs=2, args=(2, ARGS))
