# ruff: noqa
# The script's own resume file: saved from the GPU model (the path built in one place, the file name the
# same, or one that the saved name's pattern matches), read back on every rank without map_location.
import os

import torch
import torch.distributed as dist


def train(args, net, opt):
    dist.init_process_group("gloo")
    if args.restart_from:
        blob = torch.load(os.path.join(args.restart_from, "last_state.pth"))  # expect: DDP008
        net.load_state_dict(blob["weights"])
        opt.load_state_dict(blob["opt"])
    teacher = torch.load("runs/net_epoch_0.pth")  # expect: DDP008
    for epoch in range(args.epochs):
        blob = {"weights": net.state_dict(), "opt": opt.state_dict(), "epoch": epoch + 1}
        if dist.get_rank() == 0:
            torch.save(blob, os.path.join(args.out, "last_state.pth.tmp"))
            os.replace(os.path.join(args.out, "last_state.pth.tmp"), os.path.join(args.out, "last_state.pth"))
            torch.save(net.state_dict(), "runs/net_epoch_{}.pth".format(epoch))
    return teacher
