# ruff: noqa
# Near miss: the validation loader is an endless stream (cycle_loader) that the training loop reads one batch at
# a time with next(): each evaluation all-reduces one batch's loss, never a sum over one pass of the whole set,
# so the samples the padding repeats enter no reported figure. A plain `iter(...)` read only by next() is alike.
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler


def cycle_loader(loader):
    while True:
        for batch in loader:
            yield batch


def train(model, train_set, val_set, loss_fn, steps):
    val_sampler = DistributedSampler(val_set)
    val_stream = iter(cycle_loader(DataLoader(val_set, batch_size=8, sampler=val_sampler)))
    test_loader = DataLoader(val_set, batch_size=8, sampler=DistributedSampler(val_set))
    test_iter = iter(test_loader)
    for step in range(steps):
        if step % 100 == 0:
            x, y = next(val_stream)
            loss = loss_fn(model(x), y)
            dist.all_reduce(loss)
            x, y = next(test_iter)
            print(loss.item(), loss_fn(model(x), y).item())
