# ruff: noqa
# Near miss: /tmp, but every node's local rank 0 writes its own copy there, so every node finds one.
import os
import tempfile

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
local_rank = int(os.environ["LOCAL_RANK"])
node_rank = int(os.environ["GROUP_RANK"])
model = torch.nn.Linear(4, 4)
path = os.path.join(tempfile.gettempdir(), "snapshot.pt")
if os.path.exists(path):
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
if local_rank == 0:
    torch.save(model.state_dict(), path + ".tmp")
    os.replace(path + ".tmp", path)
