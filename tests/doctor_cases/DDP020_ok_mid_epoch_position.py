# ruff: noqa
# Near miss: the checkpoint is written inside the epoch (after each group of shards) and stores the epoch in
# progress with the group to restart from; the resume starts that epoch at that group: nothing runs twice.
import os

import torch
import torch.distributed as dist


def fit(net, shards, epochs, where):
    first_epoch, first_group = 0, 0
    if os.path.exists(where):
        state = torch.load(where, map_location="cpu", weights_only=True)
        net.load_state_dict(state["net"])
        first_epoch, first_group = state["epoch_now"], state["next_group"]
    for epoch in range(first_epoch, epochs):
        for group in range(first_group, len(shards), 4):
            ...  # train on shards[group:group + 4]
            if dist.get_rank() == 0:
                torch.save({"net": net.state_dict(), "epoch_now": epoch, "next_group": group + 4}, where + ".part")
                os.replace(where + ".part", where)
        first_group = 0
