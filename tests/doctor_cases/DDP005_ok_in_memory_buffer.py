# ruff: noqa
# torch.save into an in-memory buffer (io.BytesIO, io.StringIO) writes no file: every rank serialises its
# snapshot to broadcast it, inline, through `with io.BytesIO() as f`, or a name assigned from one.
import io

import torch
import torch.distributed as dist


def broadcast_snapshot(model):
    with io.BytesIO() as f:
        torch.save(model.state_dict(), f)
        blob = torch.frombuffer(bytearray(f.getvalue()), dtype=torch.uint8)
    dist.broadcast(blob, src=0)
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    torch.save(model.state_dict(), io.BytesIO())
    return blob


def main():
    dist.init_process_group("gloo")
    broadcast_snapshot(torch.nn.Linear(4, 2))


if __name__ == "__main__":
    main()
