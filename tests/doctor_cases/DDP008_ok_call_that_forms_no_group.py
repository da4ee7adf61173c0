# ruff: noqa
# A load in one process: train_worker forms the group only under `if distributed:`, and the call that
# load_trained_model reaches passes distributed=False (the other path starts the workers with mp.spawn, and
# this process joins no group), so the load runs outside any group, in the process that saved the file.
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def train_worker(gpu, world, distributed=False):
    if distributed:
        dist.init_process_group("gloo", rank=gpu, world_size=world)
    model = torch.nn.Linear(4, 2).cuda(gpu)
    if gpu == 0:
        torch.save(model.state_dict(), "final.pt")  # ddp-doctor: ignore[DDP007]


def train_model(config):
    if config["distributed"]:
        mp.spawn(train_worker, nprocs=2, args=(2, True))
    else:
        train_worker(0, 1, False)


def load_trained_model():
    config = {"distributed": False}
    train_model(config)
    model = torch.nn.Linear(4, 2)
    model.load_state_dict(torch.load("final.pt"))
    return model


if __name__ == "__main__":
    load_trained_model()
