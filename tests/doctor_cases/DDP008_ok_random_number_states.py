# ruff: noqa
# A file of random-number states: rng.pt holds (torch.cuda.get_rng_state(), torch.get_rng_state()), CPU
# ByteTensors wherever the generator runs, so its load needs no map_location, though the model's state_dict is
# saved beside it (each through `with open(...) as f`) and both paths are built from one `args`.
import os

import torch
import torch.distributed as dist

args = make_parser().parse_args()
dist.init_process_group("gloo")
model = torch.nn.Linear(2, 2).cuda()
if args.load:
    model.load_state_dict(torch.load(args.load, map_location="cpu"))
    rng = torch.load(os.path.join(os.path.dirname(args.load), "rng.pt"))
    torch.cuda.set_rng_state(rng[0])
    torch.set_rng_state(rng[1])
for epoch in range(10):
    train(model)
    if dist.get_rank() == 0:
        with open(os.path.join(args.save, "e%d.pt" % epoch), "wb") as f:  # ddp-doctor: ignore[DDP007]
            torch.save(model.state_dict(), f)  # ddp-doctor: ignore[DDP007]
        with open(os.path.join(args.save, "rng.pt"), "wb") as f:
            torch.save((torch.cuda.get_rng_state(), torch.get_rng_state()), f)  # ddp-doctor: ignore[DDP007]
if dist.get_rank() == 0:
    torch.save(model.state_dict(), args.save)  # ddp-doctor: ignore[DDP007]
