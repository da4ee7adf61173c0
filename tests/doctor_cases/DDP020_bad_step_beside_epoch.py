# ruff: noqa
# A step count beside the epoch does not make the epoch one in progress when the save runs after the epoch's
# inner loop has finished: the resume trains the stored, finished epoch again.
import os

import torch
import torch.distributed as dist


def fit(net, loader, epochs, where):
    begin, seen = 0, 0
    if os.path.exists(where):
        state = torch.load(where, map_location="cpu", weights_only=True)
        net.load_state_dict(state["net"])
        begin, seen = state["epoch"], state["seen_steps"]
    for epoch in range(begin, epochs):  # expect: DDP020
        for batch in loader:
            seen += 1
        if dist.get_rank() == 0:
            torch.save({"net": net.state_dict(), "epoch": epoch, "seen_steps": seen}, where + ".part")
            os.replace(where + ".part", where)
