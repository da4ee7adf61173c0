"""13 · One model trained three ways, DDP, ZeRO-1 and FSDP2: the bytes each rank holds, the bytes it sends, the time.

    torchrun --standalone --nproc_per_node=2 13_zero_fsdp.py --steps 6 --rounds 12 [--out sharding.json]
    python 13_zero_fsdp.py --steps 6      # also works: a world of one process

From the same initial weights and the same batches, the script trains a deep MLP with Adam for
--steps steps three times: under DDP (every rank holds everything), with ZeroRedundancyOptimizer
(ZeRO-1: each rank keeps the Adam state of its share of the parameters) and with FSDP2's
fully_shard (parameters, gradients and Adam state all sharded; one group per hidden layer). For
each it records what every rank holds (the sum of numel() * element_size() over its parameters,
gradients and optimizer state; for a DTensor, its local shard), the most bytes of unsharded
parameters and gradients FSDP2 held at once, torch.cuda.max_memory_allocated on GPUs, and how far
the parameters are from DDP's: after the first step, against bounds derived from float32 rounding,
and at the end.

Then one more step of each, watched: every collective (the profiler: what the program asked for, what
the backend ran, with its sizes) and the bytes each process wrote to its sockets (Linux's count,
/proc/self/io: gloo's traffic; NCCL's does not pass through it). In the same watch, small extra
phases: FSDP2 with bf16 parameters and fp32 gradient reduction (MixedPrecisionPolicy), FSDP2's
reshard_after_forward left to FSDP2, False and True, and gradient accumulation with
set_requires_gradient_sync(False); then clip_grad_norm_ on sharded gradients against DDP's. Last,
--rounds rounds of one step of each strategy in turn (warmed up, interleaved, the slowest rank's
time per round) time the three, forward, backward and optimizer step apart, with --threads threads
in every process, whatever the number of processes.

Devices: NCCL and one GPU per process where CUDA has a GPU for every process on the machine, gloo
and the CPU otherwise or with --device cpu (choose_device). Run by this series' tests on the CPU with
gloo, 1 to 3 processes; the GPU path is checked by tools/gpu_check.py (README, "Verified on").

Written by notebooks/13_sharding.ipynb — edit it there.
"""

import argparse
import collections
import contextlib
import copy
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
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, record_function
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

STRATEGIES = ("ddp", "zero", "fsdp")
WARMUP_STEPS = 2  # DDP rebuilds its buckets in its second step: the watched and timed steps come later
MICRO_STEPS = 2  # gradient accumulation: micro-batches per optimizer step
MAX_NORM = 0.01  # clip_grad_norm_'s limit, below this model's gradient norm: the clipping really happens
EPS32 = torch.finfo(torch.float32).eps  # 2**-23: float32's relative spacing (one rounding: at most half of it)
LOSS = nn.CrossEntropyLoss()
Event = collections.namedtuple("Event", "name start end shapes dtypes")  # a profiler event; times in ns
PROFILER_DTYPES = {"float": torch.float32, "double": torch.float64, "c10::BFloat16": torch.bfloat16,
                   "c10::Half": torch.float16}  # the profiler's names of the dtypes a collective may carry here


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


def wrap(strategy, model, device, lr, **fsdp_options):
    """The model and the optimizer of one strategy. FSDP2's options (reshard_after_forward, mp_policy) go to
    every group; left out, FSDP2 reshards every group after forward but the root (the head)."""
    device_ids = [device.index] if device.type == "cuda" else None
    if strategy == "fsdp":  # FSDP2: each hidden layer is a group, gathered only while it computes
        mesh = init_device_mesh(device.type, (dist.get_world_size(),))
        for block in model.blocks:
            fully_shard(block, mesh=mesh, **fsdp_options)
        fully_shard(model, mesh=mesh, **fsdp_options)  # the root group: the head
        return model, torch.optim.Adam(model.parameters(), lr=lr)
    # gradient_as_bucket_view: the gradients live in DDP's all-reduce buckets, not in a second copy
    ddp_model = DDP(model, device_ids=device_ids, gradient_as_bucket_view=True)
    if strategy == "zero":  # ZeRO-1: each rank keeps Adam's state for its share of the parameters
        return ddp_model, ZeroRedundancyOptimizer(ddp_model.parameters(), optimizer_class=torch.optim.Adam, lr=lr)
    return ddp_model, torch.optim.Adam(ddp_model.parameters(), lr=lr)


def fresh(strategy, args, device, **fsdp_options):
    """A strategy's model and optimizer, from the seed's initial weights (the same for every strategy and rank)."""
    torch.manual_seed(args.seed)
    return wrap(strategy, DeepMLP(args.width, args.layers, args.num_classes).to(device), device, args.lr,
                **fsdp_options)


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


def unsharded_bytes(model):
    """Bytes of the parameters FSDP2 holds whole right now (gathered: plain tensors, not DTensor shards), and of
    their gradients."""
    whole = [p for p in model.parameters() if not isinstance(p, DTensor)]
    return nbytes(whole) + nbytes(p.grad for p in whole if p.grad is not None and not isinstance(p.grad, DTensor))


class UnshardedBytes:
    """The most bytes of unsharded (gathered) parameters and their gradients FSDP2 holds at once.

    While a group computes, FSDP2 puts its gathered parameters on the module in place of the DTensor
    shards. We look before and after every layer's forward, and in backward when the gradients of a
    layer's output and of its input arrive (tensor hooks), and sum what is unsharded then."""

    def __init__(self, model):
        self.model, self.peak, self.dtypes = model, 0, set()
        self.hooks = [hook for module in model.modules() if isinstance(module, nn.Linear)
                      for hook in (module.register_forward_pre_hook(self.before_forward),
                                   module.register_forward_hook(self.after_forward))]

    def before_forward(self, module, inputs):
        self.look()
        if inputs[0].requires_grad:
            inputs[0].register_hook(self.look)  # in backward: after this layer's backward

    def after_forward(self, module, inputs, output):
        self.look()
        output.register_hook(self.look)  # in backward: before this layer's backward

    def look(self, *_):
        self.peak = max(self.peak, unsharded_bytes(self.model))
        self.dtypes |= {str(p.dtype) for p in self.model.parameters() if not isinstance(p, DTensor)}

    def remove(self):
        """Stop looking (the hooks cost time: they are removed before anything is timed)."""
        for hook in self.hooks:
            hook.remove()


def bytes_written():
    """Bytes this process has written so far, by Linux's count (/proc/self/io, wchar): every write to a
    file or a socket, so gloo's sends; NCCL's traffic does not pass through it. None where it cannot be read."""
    try:
        with open("/proc/self/io") as io:
            return int(next(line.split()[1] for line in io if line.startswith("wchar:")))
    except (OSError, StopIteration, ValueError, IndexError):
        return None


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Watch:
    """One profiler session, in which steps are marked by name: for each marked step, the bytes this process
    wrote while it ran (bytes_written; on gloo only) and, once the session has ended, the events that started
    inside it."""

    def __init__(self, device):
        self.device, self.sent, self.events = device, {}, None
        self.counting = dist.get_backend() == "gloo"  # gloo sends through sockets; NCCL through its own transports
        self.profiler = profile(activities=[ProfilerActivity.CPU], record_shapes=True)

    def __enter__(self):
        self.profiler.__enter__()
        return self

    def __exit__(self, *exc):
        result = self.profiler.__exit__(*exc)
        # The raw events: names, times (ns), input shapes and dtypes. (profiler.events() would first build a
        # Python tree of all of them: seconds for the few thousand events of these steps.)
        self.events = sorted((Event(e.name(), e.start_ns(), e.start_ns() + e.duration_ns(), e.shapes(), e.dtypes())
                              for e in self.profiler.profiler.kineto_results.events()), key=lambda e: e.start)
        return result

    @contextlib.contextmanager
    def step(self, name):
        sync(self.device)
        before = bytes_written()
        with record_function(name):
            yield
            sync(self.device)  # on a GPU, its collectives done too: the step ends when its last byte is sent
        after = bytes_written()
        self.sent[name] = None if before is None or after is None or not self.counting else after - before

    def inside(self, name):
        """The events that started while step `name` ran (on any thread: gloo works on threads of its own)."""
        spans = [(e.start, e.end) for e in self.events if e.name == name]
        return [e for e in self.events if e.name != name and any(a <= e.start <= b for a, b in spans)]

    def collectives(self, name, world_size):
        """Every collective of step `name`: the c10d op the program asked for, the backend operation that
        carried it out ("gloo:all_reduce", ...), and the bytes of its whole tensor, from the shape and dtype
        the profiler recorded for that backend operation's input (the whole tensor, except for an
        all-gather, whose input is one rank's shard)."""
        events = self.inside(name)
        asked = [e.name.removeprefix("c10d::") for e in events if e.name.startswith("c10d::")]
        done = [e for e in events if e.name.startswith(("gloo:", "nccl:"))]
        if len(done) != len(asked) or any(e.dtypes[0] not in PROFILER_DTYPES for e in done):  # sizes unknown
            return [dict(op=op, backend_op=None, dtype=None, bytes=None) for op in asked]
        found = []
        for op, work in zip(asked, done):
            dtype = PROFILER_DTYPES[work.dtypes[0]]
            whole = math.prod(work.shapes[0]) * dtype.itemsize * (world_size if "allgather" in op else 1)
            found.append(dict(op=op, backend_op=work.name, dtype=str(dtype), bytes=whole))
        return found

    def time_in(self, name):
        """Where step `name`'s time went (profiled, so slower than unwatched): its seconds, those inside FSDP2's
        own hooks (its FSDP:: ranges) and, outside them, those dispatching DTensor operations (PythonSubclass)."""
        events = self.inside(name)
        hooks = [(e.start, e.end) for e in events if e.name.startswith("FSDP::")]
        dtensor = [(e.start, e.end) for e in events if e.name == "PythonSubclass"
                   and not any(a <= e.start <= b for a, b in hooks)]
        step = [(e.start, e.end) for e in self.events if e.name == name]
        return dict(step_s=union_seconds(step), fsdp_hooks=len(hooks), fsdp_hooks_s=union_seconds(hooks),
                    dtensor_dispatches=len(dtensor), dtensor_s=union_seconds(dtensor))


def union_seconds(spans):
    """The seconds covered by (start, end) spans in nanoseconds, overlaps counted once."""
    total, reached = 0.0, -math.inf
    for start, end in sorted(spans):
        if end > reached:
            total += end - max(start, reached)
            reached = end
    return total / 1e9


def clock(device):
    sync(device)  # on a GPU, the time of the work, not of queueing it
    return time.perf_counter()


def train_step(model, optimizer, images, labels, device):
    """One step; returns its loss and the seconds of its three parts: zero_grad + forward + loss, backward,
    optimizer step."""
    marks = [clock(device)]
    optimizer.zero_grad()
    loss = LOSS(model(images), labels)
    marks.append(clock(device))
    loss.backward()
    marks.append(clock(device))
    optimizer.step()
    marks.append(clock(device))
    return loss, [b - a for a, b in zip(marks, marks[1:])]


def full(tensors):
    """{name: the whole tensor, on the CPU}; a DTensor is gathered (a collective: every rank calls this)."""
    return {name: (t.full_tensor() if isinstance(t, DTensor) else t).detach().cpu().clone() for name, t in tensors}


def train_with(strategy, args, device, first):
    """--steps steps of one strategy from the seed's weights and batches: what it held and reached. The first
    step's gradients (before the optimizer step) and parameters (after it) go into `first`."""
    if device.type == "cuda":
        sync(device)
        torch.cuda.reset_peak_memory_stats(device)
        resident = torch.cuda.memory_allocated(device)  # the strategies trained before are still there
    torch.manual_seed(args.seed)  # the same initial weights for every strategy and every rank
    plain = DeepMLP(args.width, args.layers, args.num_classes).to(device)
    alone = copy.deepcopy(plain) if strategy == "ddp" else None  # this rank's own gradient, unreduced
    model, optimizer = wrap(strategy, plain, device, args.lr)
    module = model.module if isinstance(model, DDP) else model
    unsharded = UnshardedBytes(model) if strategy == "fsdp" else None
    data = batches(make_vectors(args.dataset_size, args.width, args.num_classes, args.seed), args.batch_size,
                   args.seed)
    for step in range(args.steps):
        images, labels = next(data)
        images, labels = images.to(device), labels.to(device)
        optimizer.zero_grad()
        loss = LOSS(model(images), labels)
        loss.backward()
        if step == 0 and strategy != "zero":  # ZeRO's gradients are DDP's own all-reduce
            first[strategy] = dict(gradients=full((n, p.grad) for n, p in module.named_parameters()))
            if alone is not None:  # the sizes of what was reduced: sum over ranks of |this rank's gradient|
                LOSS(alone(images), labels).backward()
                sizes = torch.cat([p.grad.abs().flatten() for p in alone.parameters()])
                dist.all_reduce(sizes, op=dist.ReduceOp.SUM)
                first["sum_of_sizes"] = sizes.cpu()
        optimizer.step()
        if step == 0 and strategy != "zero":
            first[strategy]["parameters"] = full(module.named_parameters())
    final_loss, seen = sum_over_ranks(loss.item() * len(labels), len(labels), device=device)  # the last step's
    if unsharded:
        unsharded.remove()
    held = bytes_held(model, optimizer)  # after the last step: gradients and optimizer state present
    if device.type == "cuda":
        sync(device)
        held["max_memory_allocated"] = torch.cuda.max_memory_allocated(device) - resident
    else:
        held["max_memory_allocated"] = None
    held["unsharded_peak"] = unsharded.peak if unsharded else 0
    report = dict(ranks=gather_from_every_rank(held), final_loss=final_loss / seen)
    return report, full(module.named_parameters()), (model, optimizer)


def first_step_bounds(first, world_size, lr, adam_eps):
    """FSDP2's first step against DDP's, from the same weights on the same batch, and the bounds that float32
    rounding allows (rank 0; the derivation is the lesson's).

    Gradients: each rank's own gradient g_r is identical under both (the same weights, the same kernels on the
    same shapes);
    only their reduction differs: DDP all-reduces g_r / N, FSDP2 reduce-scatters g_r with ReduceOp.AVG.
    Any order of summing N numbers is within (N - 1) * u * sum_r |g_r| of the exact sum (u = EPS32 / 2),
    and dividing by N adds a rounding at most, so the two results differ by at most
    delta = (N + 1) * EPS32 * sum_r |g_r| / N, element by element.
    Parameters: Adam's first update is lr * g / (|g| + eps); its slope is at most lr * eps / (|g| - delta + eps)^2
    over [g - delta, g + delta], so the two updates differ by at most lr * delta * eps / (|g| - delta + eps)^2,
    plus a float32 rounding of each of Adam's few operations (4 * EPS32 * lr) and of the parameter (EPS32 * |p|)."""
    n, sizes, offset = world_size, first["sum_of_sizes"].double(), 0
    gradient_units, parameter_bound = 0.0, 0.0
    for name, g in first["ddp"]["gradients"].items():
        size = sizes[offset:offset + g.numel()].view_as(g)  # sum over ranks of |g_r|, element by element
        offset += g.numel()
        unit = EPS32 * size / n  # one float32 spacing at the mean size of what was reduced
        gap = (first["fsdp"]["gradients"][name].double() - g.double()).abs()
        in_units = torch.where(unit > 0, gap / unit.clamp_min(1e-300), torch.where(gap > 0, math.inf, 0.0))
        gradient_units = max(gradient_units, in_units.max().item())
        delta = (n + 1) * unit
        slope = lr * adam_eps / ((g.double().abs() - delta).clamp_min(0) + adam_eps) ** 2
        p = first["ddp"]["parameters"][name].double().abs()
        parameter_bound = max(parameter_bound, (slope * delta + 4 * EPS32 * lr + EPS32 * p).max().item())
    parameters = first["ddp"]["parameters"]
    parameter_gap = max((first["fsdp"]["parameters"][k] - v).abs().max().item() for k, v in parameters.items())
    return dict(gradient_gap_in_units=gradient_units, gradient_bound_in_units=n + 1, parameter_gap=parameter_gap,
                parameter_bound=parameter_bound, adam_eps=adam_eps,
                max_abs_parameter=max(p.abs().max().item() for p in parameters.values()))


def one_batch(args, device, seed_offset=0):
    return tuple(t.to(device) for t in next(batches(make_vectors(
        args.dataset_size, args.width, args.num_classes, args.seed), args.batch_size, args.seed + seed_offset)))


def whole_after_forward(model, found):
    """Hooks the root module: after FSDP2's own post-forward hook (registered first, so run first), the bytes
    of parameters still whole, i.e. kept from forward for backward. Returns the hook's handle."""
    return model.register_forward_hook(lambda module, inputs, output: found.append(unsharded_bytes(module)))


def watched(models, args, device):
    """One more step of each strategy, and the extra phases, under one Watch. Models are built and warmed up
    (FSDP2 initialises itself in its first forward) before the watch starts: only the steps are watched."""
    images, labels = one_batch(args, device, seed_offset=1)
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)  # bf16 compute, fp32 reduce
    extras = {"fsdp-bf16": fresh("fsdp", args, device, mp_policy=policy),
              "reshard-never": fresh("fsdp", args, device, reshard_after_forward=False),  # ZeRO-2's trade
              "reshard-always": fresh("fsdp", args, device, reshard_after_forward=True)}  # the root too
    bf16_unsharded = UnshardedBytes(extras["fsdp-bf16"][0])
    for model, optimizer in extras.values():
        train_step(model, optimizer, images, labels, device)
    micro = [one_batch(args, device, seed_offset=2 + k) for k in range(MICRO_STEPS)]
    accumulated, _ = fresh("fsdp", args, device)
    between = {"reshard-default": [], "reshard-never": [], "reshard-always": []}
    hooks = [whole_after_forward(models["fsdp"][0], between["reshard-default"])]
    hooks += [whole_after_forward(extras[name][0], between[name]) for name in ("reshard-never", "reshard-always")]
    with Watch(device) as watch:
        for name, (model, optimizer) in {**models, **extras}.items():
            with watch.step(f"13:{name}"):
                train_step(model, optimizer, images, labels, device)
        for k, (x, y) in enumerate(micro):  # accumulation: the reduce-scatter on the last micro-step only
            accumulated.set_requires_gradient_sync(k == MICRO_STEPS - 1)
            with watch.step(f"13:micro-step-{k}"):
                (LOSS(accumulated(x), y) / MICRO_STEPS).backward()  # the mean over all micro-batches
    for hook in hooks:
        hook.remove()
    bf16_unsharded.remove()
    whole, _ = fresh("fsdp", args, device)  # the same samples as one batch
    LOSS(whole(torch.cat([x for x, _ in micro])), torch.cat([y for _, y in micro])).backward()
    a = full((n, p.grad) for n, p in accumulated.named_parameters())
    b = full((n, p.grad) for n, p in whole.named_parameters())
    bf16 = dict(bytes_held(*extras["fsdp-bf16"]), unsharded_peak=bf16_unsharded.peak,
                unsharded_dtypes=sorted(bf16_unsharded.dtypes),
                held_dtypes=sorted({str(local(p).dtype) for p in extras["fsdp-bf16"][0].parameters()}))
    accumulation = dict(micro_steps=MICRO_STEPS, samples_per_rank=sum(len(y) for _, y in micro),
                        gap=max((a[n] - b[n]).abs().max().item() for n in b),
                        largest=max(g.abs().max().item() for g in b.values()))
    return watch, bf16, {name: found[0] for name, found in between.items()}, accumulation


def clipping(args, device):
    """clip_grad_norm_ on FSDP2's sharded (DTensor) gradients and on DDP's, from the same weights and batch."""
    images, labels = one_batch(args, device)
    found = {}
    for strategy in ("ddp", "fsdp"):
        model, _ = fresh(strategy, args, device)
        LOSS(model(images), labels).backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)  # the norm before clipping
        grads = full((n, p.grad) for n, p in (model.module if isinstance(model, DDP) else model).named_parameters())
        found[strategy] = dict(norm=(norm.full_tensor() if isinstance(norm, DTensor) else norm).item(),
                               returned=type(norm).__name__,
                               placements=[str(p) for p in norm.placements] if isinstance(norm, DTensor) else None,
                               clipped_norm=torch.cat([g.flatten() for g in grads.values()]).norm().item(),
                               grads=grads)
    gap = max((found["fsdp"]["grads"][n] - g).abs().max().item() for n, g in found["ddp"]["grads"].items())
    for record in found.values():
        del record["grads"]
    return dict(found, max_norm=MAX_NORM, clipped_gradient_gap=gap)


def time_rounds(models, args, device):
    """--rounds rounds, each one step of every strategy, in an order that turns each round (A B C, B C A, ...):
    all warmed up, all under the same load. Per round and strategy: the slowest rank's three parts (a step of
    a synchronous job ends when its last rank ends)."""
    data = batches(make_vectors(args.dataset_size, args.width, args.num_classes, args.seed), args.batch_size,
                   args.seed + 2)
    mine = {strategy: [] for strategy in STRATEGIES}
    for r in range(args.rounds):
        images, labels = (t.to(device) for t in next(data))
        turn = r % len(STRATEGIES)
        for strategy in STRATEGIES[turn:] + STRATEGIES[:turn]:
            model, optimizer = models[strategy]
            if device.type == "cuda":  # every rank starts the step together
                dist.barrier(device_ids=[device.index])
            else:
                dist.barrier()
            mine[strategy].append(train_step(model, optimizer, images, labels, device)[1])
    everyone = gather_from_every_rank(mine)
    return {s: [max((ranks[s][r] for ranks in everyone), key=sum) for r in range(args.rounds)] for s in STRATEGIES}


def median(values):
    ordered, middle = sorted(values), len(values) // 2
    return ordered[middle] if len(values) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def measure(args, device):
    """Everything above, in order; rank 0 prints a summary and writes --out."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    shapes = [list(p.shape) for p in DeepMLP(args.width, args.layers, args.num_classes).parameters()]
    if rank == 0:
        print(f"{world_size} process(es), backend {dist.get_backend()}, device {device}, {torch.get_num_threads()} "
              f"thread(s) each on {os.cpu_count()} CPU cores: a {args.layers}-layer MLP of "
              f"{sum(map(math.prod, shapes)):,} parameters, Adam, {args.steps} steps per strategy", flush=True)
    results, finals, models, first = {}, {}, {}, {}
    for strategy in STRATEGIES:
        results[strategy], finals[strategy], models[strategy] = train_with(strategy, args, device, first)
    for strategy in STRATEGIES:
        reference = finals["ddp"]
        results[strategy].update(
            max_abs_difference_from_ddp=max((finals[strategy][n] - r).abs().max().item() for n, r in reference.items()),
            identical_to_ddp=all(torch.equal(finals[strategy][n], r) for n, r in reference.items()))
    adam_eps = models["ddp"][1].param_groups[0]["eps"]
    first_step = first_step_bounds(first, world_size, args.lr, adam_eps) if rank == 0 else None
    watch, bf16, between, accumulated = watched(models, args, device)
    clipped = clipping(args, device)
    for strategy in STRATEGIES:
        name = f"13:{strategy}"
        results[strategy].update(collectives=watch.collectives(name, world_size),
                                 sent=gather_from_every_rank(watch.sent[name]), time_in=watch.time_in(name))
    bf16_report = dict(ranks=gather_from_every_rank(bf16), collectives=watch.collectives("13:fsdp-bf16", world_size),
                       sent=gather_from_every_rank(watch.sent["13:fsdp-bf16"]))
    reshard = {}
    for name, held in between.items():
        step = "13:fsdp" if name == "reshard-default" else f"13:{name}"
        reshard[name.removeprefix("reshard-")] = dict(held_between=gather_from_every_rank(held),
                                                       collectives=watch.collectives(step, world_size),
                                                       sent=gather_from_every_rank(watch.sent[step]))
    accumulated["collectives"] = [watch.collectives(f"13:micro-step-{k}", world_size) for k in range(MICRO_STEPS)]
    timings = time_rounds(models, args, device)
    for strategy in STRATEGIES:
        results[strategy]["rounds"] = timings[strategy]
    if rank == 0:
        for strategy, result in results.items():
            held, steps = result["ranks"][0], [sum(parts) * 1e3 for parts in result["rounds"]]
            sent = result["sent"][0]
            print(f"{strategy:>5}: rank 0 holds {held['parameters']:>9,} B parameters, {held['gradients']:>9,} B "
                  f"gradients, {held['optimizer_state']:>9,} B optimizer state; {len(result['collectives'])} "
                  f"collectives per step, {'?' if sent is None else f'{sent:,}'} B sent by rank 0; "
                  f"{median(steps):.1f} ms per step (median of {len(steps)} rounds, slowest rank); "
                  f"max |parameter - DDP's| {result['max_abs_difference_from_ddp']:.1e}", flush=True)
        bf16_total = sum(bf16[k] for k in ("parameters", "gradients", "optimizer_state"))
        print(f"extra phases: FSDP2 in bf16 holds {bf16_total:,} B on rank 0; "
              f"reshard_after_forward default/False/True keeps "
              f"{'/'.join(f'{held:,}' for held in between.values())} B whole between forward and backward; "
              f"clip_grad_norm_ {clipped['fsdp']['norm']:.6f} (FSDP2) vs {clipped['ddp']['norm']:.6f} (DDP); "
              f"accumulated gradient {accumulated['gap']:.1e} from one batch's", flush=True)
    if rank == 0 and args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(dict(
            world_size=world_size, backend=dist.get_backend(), device=str(device), threads=torch.get_num_threads(),
            cpu_cores=os.cpu_count(), width=args.width, layers=args.layers, steps=args.steps, rounds=args.rounds,
            batch_size=args.batch_size, lr=args.lr, parameter_shapes=shapes, parameters=sum(map(math.prod, shapes)),
            strategies=results, first_step=first_step, mixed_precision=bf16_report, reshard=reshard,
            clipping=clipped, accumulation=accumulated), indent=1))


def step_count(text):
    """An argparse type: at least WARMUP_STEPS steps, so that the watched and timed steps come after them."""
    value = int(text)
    if value < WARMUP_STEPS:
        raise argparse.ArgumentTypeError(f"must be at least {WARMUP_STEPS} (the warm-up), got {text}")
    return value


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=positive_int, default=256, help="features of every hidden layer")
    parser.add_argument("--layers", type=positive_int, default=8, help="hidden layers, one FSDP2 group each")
    parser.add_argument("--steps", type=step_count, default=8, help="training steps of each strategy")
    parser.add_argument("--rounds", type=positive_int, default=10, help="timed rounds, one step of each strategy")
    parser.add_argument("--threads", type=positive_int, default=1,
                        help="torch threads in every process, whatever the number of processes")
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


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)  # torchrun sets OMP_NUM_THREADS=1 only when it starts more than one process
    device = setup_distributed(args.timeout, args.device)
    try:
        measure(args, device)
    except BaseException:
        dist.destroy_process_group()  # no barrier here: the other ranks may be gone
        raise
    clean_exit()


# ---- Plumbing shared with lesson 04's script (explained there): arguments, device, process group, exit ----


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
    bound = device if device.type == "cuda" else None  # NCCL: connect now, and barrier() knows its GPU
    if "RANK" in os.environ:  # started by torchrun: join the group it prepared
        dist.init_process_group(backend, timeout=timeout, device_id=bound)
    else:  # plain `python`: a group of one, no network needed
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout,
                                device_id=bound)
    return device

def sum_over_ranks(*numbers, device):
    """Each number summed over all ranks in one all_reduce: every rank gets the same global totals."""
    totals = torch.tensor(numbers, dtype=torch.float64, device=device)
    dist.all_reduce(totals, op=dist.ReduceOp.SUM)
    return totals.tolist()

def gather_from_every_rank(record):
    """Every rank's record (a small picklable object), in rank order, on every rank."""
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, record)
    return everyone

def clean_exit():
    """Leave the process group so that every rank exits 0. With gloo, a bare destroy_process_group() can
    abort the process ("terminate called without an active exception") after the work is done: collect
    what still holds the group (DDP's reducer), wait for every rank, then destroy."""
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
