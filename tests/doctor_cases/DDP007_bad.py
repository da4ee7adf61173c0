# ruff: noqa
import torch
import torch.distributed as dist


def save_checkpoint(model, optimizer, epoch, path):
    if dist.get_rank() == 0:
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}
        torch.save(state, path)  # expect: DDP007
    dist.barrier()


dist.init_process_group("gloo")
