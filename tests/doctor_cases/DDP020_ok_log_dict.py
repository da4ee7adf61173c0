# ruff: noqa
# Near miss: the log line's dict holds the epoch as it is; the checkpoint stores the next epoch, epoch + 1.
import json

import torch
import torch.distributed as dist


def train(model, optimizer, args):
    start_epoch = 0
    if args.resume:
        ckpt = torch.load(args.resume, map_location="cpu", weights_only=True)
        start_epoch = ckpt["epoch"]
    for epoch in range(start_epoch, args.epochs):
        stats = dict(epoch=epoch, loss=0.0)
        print(json.dumps(stats))
        if dist.get_rank() == 0:
            state = dict(epoch=epoch + 1, model=model.module.state_dict())
            torch.save(state, args.path + ".tmp")
