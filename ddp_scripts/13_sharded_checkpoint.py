"""13 · Sharded checkpoints with torch.distributed.checkpoint (DCP): save from N ranks, load into M.

    torchrun --standalone --nproc_per_node=2 13_sharded_checkpoint.py --save ckpt      # train, then save
    torchrun --standalone --nproc_per_node=4 13_sharded_checkpoint.py --load ckpt      # load into 4 ranks
    python 13_sharded_checkpoint.py --load ckpt                                        # or into one

--save trains the FSDP2 model of 13_zero_fsdp.py for --steps Adam steps, then saves its model and
optimizer twice: with DCP, each rank writing its own shards in parallel (ckpt/dcp/), and as lesson 05
does, gathered into one full copy on rank 0 and written with torch.save (ckpt/full.pt, atomic).
--load builds the model on however many ranks it runs on, from other initial weights, loads ckpt/dcp/
(DCP reshards: any number of ranks can read what any number wrote), gathers the result and compares it
with ckpt/full.pt, tensor by tensor, for equality.

Devices: NCCL and one GPU per process where CUDA has a GPU for every process on the machine, gloo
and the CPU otherwise or with --device cpu (choose_device). Run by this series' tests on the CPU with
gloo, 1 to 3 processes; the GPU path is checked by tools/gpu_check.py (README, "Verified on").

Written by notebooks/13_sharding.ipynb — edit it there.
"""

import argparse
import datetime
import gc
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)  # everything gathered, on rank 0's CPU


def positive_int(text):
    """An argparse type: a whole number > 0. A bad value is a one-line error and exit code 2."""
    value = int(text)  # not a whole number: argparse says "invalid positive_int value"
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, got {text}")
    return value


def non_negative_int(text):
    """An argparse type: a whole number >= 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


def class_count(text):
    """An argparse type: a number of classes, at least 2."""
    value = int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"must be at least 2, got {text}")
    return value


def positive_float(text):
    """An argparse type: a finite number > 0. (A check `value <= 0` lets nan through: nan <= 0 is False.)"""
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite positive number, got {text}")
    return value


def writable_file(text):
    """An argparse type: a file we can create, checked at start-up, not after the training it would save."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text}: it is a folder")
    blocking = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocking:
        raise argparse.ArgumentTypeError(f"cannot write {text}: {blocking} is a file, not a folder")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}."):
            pass  # a file can be created there (and is removed again)
    except OSError as error:
        raise argparse.ArgumentTypeError(f"cannot write {text}: {error.strerror or error}") from None
    return path


def writable_folder(text):
    """An argparse type: a folder we can create files in, checked at start-up."""
    path = Path(text)
    blocking = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)
    if blocking:
        raise argparse.ArgumentTypeError(f"cannot write to {text}: {blocking} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".probe."):
            pass  # a file can be created there (and is removed again)
    except OSError as error:
        raise argparse.ArgumentTypeError(f"cannot write to {text}: {error.strerror or error}") from None
    return path


def saved_checkpoint(text):
    """An argparse type: a folder written by --save: its DCP metadata and its full copy are there."""
    path = Path(text)
    missing = [str(p) for p in (path / "dcp" / ".metadata", path / "full.pt") if not p.is_file()]
    if missing:
        raise argparse.ArgumentTypeError(f"{text} holds no checkpoint saved by --save (missing {', '.join(missing)})")
    return path


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--save", type=writable_folder, metavar="DIR", help="train, then save into DIR")
    what.add_argument("--load", type=saved_checkpoint, metavar="DIR", help="load DIR/dcp and compare with DIR/full.pt")
    parser.add_argument("--width", type=positive_int, default=256, help="features of every hidden layer")
    parser.add_argument("--layers", type=positive_int, default=8, help="hidden layers, one FSDP2 group each")
    parser.add_argument("--steps", type=positive_int, default=3, help="training steps before --save")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="per process")
    parser.add_argument("--dataset-size", type=positive_int, default=1024, help="training samples")
    parser.add_argument("--num-classes", type=class_count, default=10)
    parser.add_argument("--lr", type=positive_float, default=1e-3, help="Adam's learning rate")
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument("--device", choices=["auto", "cpu"], default="auto",
                        help="auto: NCCL and one GPU per process where CUDA exists, else gloo and the CPU; "
                             "cpu: gloo and the CPU")
    parser.add_argument("--timeout", type=positive_float, default=60.0, help="seconds a collective may wait")
    parser.add_argument("--out", type=writable_file, help="rank 0 writes what it measured to this JSON file")
    return parser.parse_args()


def choose_device(cuda_available, gpu_count, local_rank, local_world_size, wanted="auto"):
    """The device policy, a pure function of the machine: (backend, device) for this process.

    NCCL and cuda:LOCAL_RANK where CUDA has a GPU for every process on this machine; gloo and the CPU
    where there is no CUDA or --device cpu asks for it. Fewer GPUs than processes is an error said in
    one line, not "invalid device ordinal" from deep inside CUDA. Every rank of a machine sees the same
    inputs (only local_rank differs), so no rank picks NCCL while another picks gloo.
    """
    if wanted == "cpu" or not cuda_available or gpu_count == 0:
        return "gloo", "cpu"
    if gpu_count < local_world_size:
        raise ValueError(f"{local_world_size} processes on this machine but {gpu_count} GPU(s): launch with "
                         f"--nproc_per_node=gpu, or fewer processes (at most {gpu_count}), or add --device cpu")
    return "nccl", f"cuda:{local_rank}"


def setup_distributed(timeout_s, wanted_device):
    """Join the process group. NCCL and one GPU per process, or gloo and the CPU."""
    local_rank = int(os.environ.get("LOCAL_RANK", 0))  # this process's index on this machine
    local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", 1))  # processes on this machine
    try:
        backend, device = choose_device(torch.cuda.is_available(), torch.cuda.device_count(),
                                        local_rank, local_world_size, wanted_device)
    except ValueError as error:  # too few GPUs: one line and exit code 2, before any CUDA work
        if local_rank == 0:
            print(f"{Path(sys.argv[0]).name}: error: {error}", file=sys.stderr)
        sys.exit(2)
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.set_device(device)  # without it every process would also start a CUDA context on GPU 0
    timeout = datetime.timedelta(seconds=timeout_s)
    if "RANK" in os.environ:  # started by torchrun: join the group it prepared
        dist.init_process_group(backend, timeout=timeout)
    else:  # plain `python`: a group of one, no network needed
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
    return device


def clean_exit():
    """Leave the process group so that every rank exits 0. With gloo, a bare destroy_process_group() can
    abort the process ("terminate called without an active exception") after the work is done: collect
    what still holds the group (DDP's reducer), wait for every rank, then destroy."""
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


def gather_from_every_rank(record):
    """Every rank's record (a small picklable object), in rank order, on every rank."""
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, record)
    return everyone


def make_vectors(size, width, num_classes, seed):
    """Synthetic, learnable data: x = 0.5 * template[label] + noise, in `width` features. Same seed, same data."""
    generator = torch.Generator().manual_seed(seed)
    templates = torch.randn(num_classes, width, generator=generator)
    labels = torch.randint(num_classes, (size,), generator=generator)
    return TensorDataset(0.5 * templates[labels] + torch.randn(size, width, generator=generator), labels)


class DeepMLP(nn.Module):
    """`layers` equal hidden layers (the parameters of a large model, in equal slices) and a small head."""

    def __init__(self, width, layers, num_classes):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(layers))
        self.head = nn.Linear(width, num_classes)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def batches(dataset, batch_size, seed):
    """This rank's batches, epoch after epoch (set_epoch each time), the same for every strategy."""
    sampler = DistributedSampler(dataset, shuffle=True, seed=seed)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler)
    for epoch in range(sys.maxsize):
        sampler.set_epoch(epoch)
        yield from loader


def sharded_model(args, device, seed):
    """The FSDP2 model of 13_zero_fsdp.py (a group per hidden layer) and its Adam, on this world's ranks."""
    torch.manual_seed(seed)
    model = DeepMLP(args.width, args.layers, args.num_classes).to(device)
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, torch.optim.Adam(model.parameters(), lr=args.lr)


def train(model, optimizer, args, device):
    loss_fn = nn.CrossEntropyLoss()
    data = batches(make_vectors(args.dataset_size, args.width, args.num_classes, args.seed), args.batch_size,
                   args.seed)
    for _ in range(args.steps):
        images, labels = next(data)
        loss = loss_fn(model(images.to(device)), labels.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def tensors_in(tree):
    """Every tensor in a nested state dict, with its path: ("optim/state/blocks.0.0.weight/exp_avg", t), ..."""
    if torch.is_tensor(tree):
        yield "", tree
    elif isinstance(tree, dict):
        for key, value in tree.items():
            for path, tensor in tensors_in(value):
                yield f"{key}/{path}".rstrip("/"), tensor
    elif isinstance(tree, (list, tuple)):
        for i, value in enumerate(tree):
            for path, tensor in tensors_in(value):
                yield f"{i}/{path}".rstrip("/"), tensor


def local_bytes(tree):
    """Bytes this rank holds of a state dict: a DTensor's local shard, or the whole tensor."""
    held = (t.to_local() if isinstance(t, DTensor) else t for _, t in tensors_in(tree))
    return sum(t.numel() * t.element_size() for t in held)


def timed(work, device):
    """work()'s result, and its seconds on the slowest rank (a save ends when the last rank has written)."""
    dist.barrier()
    started = time.perf_counter()
    result = work()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    took = torch.tensor([time.perf_counter() - started], dtype=torch.float64, device=device)
    dist.all_reduce(took, op=dist.ReduceOp.MAX)  # a timing, not a metric: the slowest rank's
    return result, took.item()


def save_full_on_rank_0(model, optimizer, path):
    """Lesson 05's way: gather everything into one process (collectives: every rank calls this), which
    writes it to a temporary file and renames it; the others wait. Returns the bytes this rank held."""
    model_full, optimizer_full = get_state_dict(model, optimizer, options=FULL)  # empty on ranks > 0
    full = {"model": model_full, "optim": optimizer_full}
    if dist.get_rank() == 0:
        temporary = path.with_name(path.name + ".tmp")
        torch.save(full, temporary)
        os.replace(temporary, path)  # atomic: never half a file
    dist.barrier()
    return local_bytes(full)


def save(args, device):
    """Train, save with DCP (every rank its own shards), then as lesson 05 does (rank 0, everything)."""
    model, optimizer = sharded_model(args, device, args.seed)
    train(model, optimizer, args, device)
    model_state, optimizer_state = get_state_dict(model, optimizer)  # DTensors: each rank's shards
    sharded = {"model": model_state, "optim": optimizer_state}
    _, dcp_s = timed(lambda: dcp.save(sharded, checkpoint_id=args.save / "dcp"), device)
    full_bytes, full_s = timed(lambda: save_full_on_rank_0(model, optimizer, args.save / "full.pt"), device)
    held = gather_from_every_rank(dict(sharded=local_bytes(sharded), full=full_bytes))
    files = {p.name: p.stat().st_size for p in sorted((args.save / "dcp").iterdir())}
    return dict(mode="save", dcp_seconds=dcp_s, full_seconds=full_s, bytes_held=held, dcp_files=files,
                full_file_bytes=(args.save / "full.pt").stat().st_size)


def load(args, device):
    """Load DIR/dcp into this world's shards (other initial weights first), then compare with DIR/full.pt."""
    model, optimizer = sharded_model(args, device, args.seed + 1)  # other weights: the load must replace them
    model_state, optimizer_state = get_state_dict(model, optimizer)
    sharded = {"model": model_state, "optim": optimizer_state}
    _, dcp_s = timed(lambda: dcp.load(sharded, checkpoint_id=args.load / "dcp"), device)  # in place
    set_state_dict(model, optimizer, model_state_dict=sharded["model"], optim_state_dict=sharded["optim"])
    model_full, optimizer_full = get_state_dict(model, optimizer, options=FULL)
    held = gather_from_every_rank(dict(sharded=local_bytes(sharded)))
    report = dict(mode="load", dcp_seconds=dcp_s, bytes_held=held)
    if dist.get_rank() == 0:
        saved = dict(tensors_in(torch.load(args.load / "full.pt", map_location="cpu", weights_only=True)))
        loaded = dict(tensors_in({"model": model_full, "optim": optimizer_full}))
        unequal = [name for name in saved if name not in loaded or not torch.equal(saved[name], loaded[name])]
        report.update(tensors=len(saved), same_names=sorted(saved) == sorted(loaded), unequal=unequal)
    return report


def run(args, device):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    report = save(args, device) if args.save else load(args, device)
    if rank == 0:
        if args.save:
            print(f"{world_size} rank(s) saved {args.save}/dcp in {report['dcp_seconds']:.2f} s "
                  f"({len(report['dcp_files'])} files); rank 0 gathered and saved full.pt in "
                  f"{report['full_seconds']:.2f} s, holding {report['bytes_held'][0]['full']:,} B at once")
        else:
            print(f"{world_size} rank(s) loaded {args.load}/dcp in {report['dcp_seconds']:.2f} s: "
                  f"{report['tensors'] - len(report['unequal'])} of {report['tensors']} tensors equal full.pt's")
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(dict(report, world_size=world_size, backend=dist.get_backend(),
                                                device=str(device)), indent=1))


def main():
    args = parse_args()
    device = setup_distributed(args.timeout, args.device)
    try:
        run(args, device)
    except BaseException:
        dist.destroy_process_group()  # no barrier here: the other ranks may be gone
        raise
    clean_exit()


if __name__ == "__main__":
    main()
