# ruff: noqa
# The finished epoch saved through a helper (save_on_master), resumed as it is: fires.
import torch


def train(model, args, utils):
    start_epoch = 0
    if args.resume:
        checkpoint = torch.load(args.resume, map_location="cpu", weights_only=True)
        start_epoch = checkpoint["epoch"]
    for epoch in range(start_epoch, args.epochs):  # expect: DDP020
        utils.save_on_master({"model": model.module.state_dict(), "epoch": epoch}, args.path + ".tmp")
