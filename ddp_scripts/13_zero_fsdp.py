"""13 · One model trained three ways, DDP, ZeRO-1 and FSDP2, with each rank's bytes counted exactly.

    torchrun --standalone --nproc_per_node=2 13_zero_fsdp.py --steps 6 [--out sharding.json]
    python 13_zero_fsdp.py --steps 6      # also works: a world of one process

From the same initial weights and the same batches, the script trains a deep MLP with Adam for
--steps steps three times: under DDP (every rank holds everything), with ZeroRedundancyOptimizer
(ZeRO-1: each rank keeps the Adam state of its share of the parameters) and with FSDP2's
fully_shard (parameters, gradients and Adam state all sharded; one group per hidden layer). For
each it records what every rank holds (the sum of numel() * element_size() over its parameters,
gradients and optimizer state; for a DTensor, its local shard), the most bytes of unsharded
parameters and gradients FSDP2 held at once, torch.cuda.max_memory_allocated on GPUs, every
collective of one step (seen by the profiler) with the size of its tensor, the median step time, and
how far the final parameters are from DDP's.

Devices: NCCL and one GPU per process where CUDA has a GPU for every process on the machine, gloo
and the CPU otherwise or with --device cpu (choose_device). Run by this series' tests on the CPU with
gloo, 1 to 3 processes; the GPU path is checked by tools/gpu_check.py (README, "Verified on").

Written by notebooks/13_sharding.ipynb — edit it there.
"""

import argparse
import contextlib
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
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

STRATEGIES = ("ddp", "zero", "fsdp")
WARMUP_STEPS = 2  # DDP rebuilds its buckets in its second step; the third step is the one profiled


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


def step_count(text):
    """An argparse type: at least WARMUP_STEPS + 2 steps: the warm-up, one profiled step, one timed."""
    value = int(text)
    if value < WARMUP_STEPS + 2:
        raise argparse.ArgumentTypeError(f"must be at least {WARMUP_STEPS + 2} (warm-up, profiled, timed), got {text}")
    return value


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=positive_int, default=256, help="features of every hidden layer")
    parser.add_argument("--layers", type=positive_int, default=8, help="hidden layers, one FSDP2 group each")
    parser.add_argument("--steps", type=step_count, default=8, help="training steps of each strategy")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="per process")
    parser.add_argument("--dataset-size", type=positive_int, default=1024, help="training samples")
    parser.add_argument("--num-classes", type=class_count, default=10)
    parser.add_argument("--lr", type=positive_float, default=1e-3, help="Adam's learning rate")
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument("--device", choices=["auto", "cpu"], default="auto",
                        help="auto: NCCL and one GPU per process where CUDA exists, else gloo and the CPU; "
                             "cpu: gloo and the CPU")
    parser.add_argument("--timeout", type=positive_float, default=60.0, help="seconds a collective may wait")
    parser.add_argument("--out", type=writable_file, help="rank 0 writes the measurements to this JSON file")
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


def sum_over_ranks(*numbers, device):
    """Each number summed over all ranks in one all_reduce: every rank gets the same global totals."""
    totals = torch.tensor(numbers, dtype=torch.float64, device=device)
    dist.all_reduce(totals, op=dist.ReduceOp.SUM)
    return totals.tolist()


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


def wrap(strategy, model, device, lr):
    """The model and the optimizer of one strategy. The model is the same module, with the same weights."""
    device_ids = [device.index] if device.type == "cuda" else None
    if strategy == "fsdp":  # FSDP2: each hidden layer is a group, gathered only while it computes
        mesh = init_device_mesh(device.type, (dist.get_world_size(),))
        for block in model.blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)  # the root group: the head
        return model, torch.optim.Adam(model.parameters(), lr=lr)
    # gradient_as_bucket_view: the gradients live in DDP's all-reduce buckets, not in a second copy
    ddp_model = DDP(model, device_ids=device_ids, gradient_as_bucket_view=True)
    if strategy == "zero":  # ZeRO-1: each rank keeps Adam's state for its share of the parameters
        return ddp_model, ZeroRedundancyOptimizer(ddp_model.parameters(), optimizer_class=torch.optim.Adam, lr=lr)
    return ddp_model, torch.optim.Adam(ddp_model.parameters(), lr=lr)


def local(tensor):
    """What this rank holds of a tensor: a DTensor's local shard, or the whole tensor."""
    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


def nbytes(tensors):
    return sum(local(t).numel() * local(t).element_size() for t in tensors)


def bytes_held(model, optimizer):
    """Exactly what this rank holds: its parameters, its gradients and its optimizer state, in bytes."""
    state = optimizer.optim.state if isinstance(optimizer, ZeroRedundancyOptimizer) else optimizer.state
    return dict(parameters=nbytes(model.parameters()),
                gradients=nbytes(p.grad for p in model.parameters() if p.grad is not None),
                optimizer_state=nbytes(t for s in state.values() for t in s.values() if torch.is_tensor(t)),
                adam_step_counters=sum(1 for s in state.values() if "step" in s))


class UnshardedBytes:
    """The most bytes of unsharded (gathered) parameters and their gradients FSDP2 holds at once.

    While a group computes, FSDP2 puts its gathered parameters on the module in place of the DTensor
    shards. We look before and after every layer's forward, and in backward when the gradients of a
    layer's output and of its input arrive (tensor hooks), and sum what is unsharded then."""

    def __init__(self, model):
        self.model, self.peak = model, 0
        for module in model.modules():
            if isinstance(module, nn.Linear):
                module.register_forward_pre_hook(self.before_forward)
                module.register_forward_hook(self.after_forward)

    def before_forward(self, module, inputs):
        self.look()
        if inputs[0].requires_grad:
            inputs[0].register_hook(self.look)  # in backward: after this layer's backward

    def after_forward(self, module, inputs, output):
        self.look()
        output.register_hook(self.look)  # in backward: before this layer's backward

    def look(self, *_):
        full = [p for p in self.model.parameters() if not isinstance(p, DTensor)]
        grads = [p.grad for p in full if p.grad is not None and not isinstance(p.grad, DTensor)]
        self.peak = max(self.peak, nbytes(full) + nbytes(grads))


def collectives(profiler, world_size):
    """Every collective of the profiled step: the c10d op asked for, and the bytes of its whole tensor.

    Each c10d:: op (what the program asked for: the same names on gloo and NCCL) is carried out by one
    backend operation ("gloo:all_reduce", ...), which the profiler records with its input's shape and
    dtype. That input is the whole tensor, except for an all-gather, whose input is one rank's shard."""
    events = sorted(profiler.events(), key=lambda e: e.time_range.start)
    asked = [e.name.removeprefix("c10d::") for e in events if e.name.startswith("c10d::")]
    done = [e for e in events if e.name.startswith(("gloo:", "nccl:"))]
    if len(done) != len(asked):  # not one backend operation per c10d op: name them, sizes unknown
        return [dict(op=op, backend_op=None, bytes=None) for op in asked]
    found = []
    for op, work in zip(asked, done):
        numel = math.prod(work.input_shapes[0])
        size = torch.empty((), dtype=getattr(torch, work.input_dtypes[0])).element_size()
        whole = numel * size * (world_size if "allgather" in op else 1)
        found.append(dict(op=op, backend_op=work.name, bytes=whole))
    return found


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_with(strategy, args, device):
    """--steps steps of one strategy from the seed's weights and batches; what it held, sent and reached."""
    torch.manual_seed(args.seed)  # the same initial weights for every strategy and every rank
    model = DeepMLP(args.width, args.layers, args.num_classes).to(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    model, optimizer = wrap(strategy, model, device, args.lr)
    unsharded = UnshardedBytes(model) if strategy == "fsdp" else None
    loss_fn = nn.CrossEntropyLoss()
    data = batches(make_vectors(args.dataset_size, args.width, args.num_classes, args.seed), args.batch_size,
                   args.seed)
    seconds = []
    for step in range(args.steps):
        images, labels = next(data)
        images, labels = images.to(device), labels.to(device)
        profiling = step == WARMUP_STEPS
        watching = profile(activities=[ProfilerActivity.CPU], record_shapes=True) if profiling else None
        with watching or contextlib.nullcontext() as prof:
            sync(device)
            started = time.perf_counter()
            loss = loss_fn(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            sync(device)
        if profiling:
            step_collectives = collectives(prof, dist.get_world_size())
        elif step > WARMUP_STEPS:  # the profiler slows the step it watches: not timed
            seconds.append(time.perf_counter() - started)
    final_loss, seen = sum_over_ranks(loss.item() * len(labels), len(labels), device=device)  # the last step's
    held = bytes_held(model, optimizer)  # after the last step: gradients and optimizer state present
    final = {name: (p.full_tensor() if isinstance(p, DTensor) else p).detach().cpu().clone()
             for name, p in (model.module if strategy != "fsdp" else model).named_parameters()}
    mine = dict(held, unsharded_peak=unsharded.peak if unsharded else 0,
                max_memory_allocated=torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None,
                median_step_s=sorted(seconds)[len(seconds) // 2])
    return dict(ranks=gather_from_every_rank(mine), collectives=step_collectives, final_loss=final_loss / seen), final


def measure(args, device):
    """The three strategies in turn; rank 0 compares their parameters with DDP's and writes --out."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    shapes = [list(p.shape) for p in DeepMLP(args.width, args.layers, args.num_classes).parameters()]
    if rank == 0:
        print(f"{world_size} process(es), backend {dist.get_backend()}, device {device}: a {args.layers}-layer MLP "
              f"of {sum(map(math.prod, shapes)):,} parameters, Adam, {args.steps} steps per strategy")
    results, finals = {}, {}
    for strategy in STRATEGIES:
        results[strategy], finals[strategy] = train_with(strategy, args, device)
        if rank == 0:
            differences = [(finals[strategy][name] - reference).abs().max().item()
                           for name, reference in finals["ddp"].items()]
            results[strategy].update(max_abs_difference_from_ddp=max(differences),
                                     identical_to_ddp=all(torch.equal(finals[strategy][n], r)
                                                          for n, r in finals["ddp"].items()))
            held = results[strategy]["ranks"][0]
            print(f"{strategy:>5}: rank 0 holds {held['parameters']:>9,} B parameters, {held['gradients']:>9,} B "
                  f"gradients, {held['optimizer_state']:>9,} B optimizer state; "
                  f"{len(results[strategy]['collectives'])} collectives per step; "
                  f"{held['median_step_s'] * 1e3:.1f} ms per step; "
                  f"max |parameter - DDP's| {results[strategy]['max_abs_difference_from_ddp']:.1e}", flush=True)
    if rank == 0 and args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(dict(
            world_size=world_size, backend=dist.get_backend(), device=str(device), width=args.width,
            layers=args.layers, steps=args.steps, batch_size=args.batch_size, parameter_shapes=shapes,
            parameters=sum(map(math.prod, shapes)), strategies=results), indent=1))


def main():
    args = parse_args()
    device = setup_distributed(args.timeout, args.device)
    try:
        measure(args, device)
    except BaseException:
        dist.destroy_process_group()  # no barrier here: the other ranks may be gone
        raise
    clean_exit()


if __name__ == "__main__":
    main()
