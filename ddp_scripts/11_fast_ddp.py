"""11 · Faster DDP: mixed precision, torch.compile and gradient compression, each measured against fp32.

    torchrun --standalone --nproc_per_node=2 11_fast_ddp.py --variants fp32,bf16,compile,powersgd --out fast.json
    torchrun --standalone --nproc_per_node=2 11_fast_ddp.py --variants fp32,fp16,bf16-hook --accumulate 4
    python 11_fast_ddp.py --variants fp32,bf16      # also works: a world of one process

1. Training. Every variant trains lesson 04's model on lesson 04's data from the same initial weights, in the
same order, and changes one thing against fp32:
  bf16, fp16   torch.autocast around the forward and the loss (fp16 with a GradScaler)
  compile      torch.compile(ddp_model): the graph is split at DDP's bucket boundaries
  bucket-view  DDP(gradient_as_bucket_view=True): the gradients are views into DDP's buckets, not copies
  fp16-hook, bf16-hook, powersgd   a DDP communication hook that compresses what is all-reduced
Every variant registers a communication hook (fp32's is allreduce_hook, DDP's own all-reduce in Python), wrapped
so that it records each bucket's dtype and size and the bytes this process hands to dist.all_reduce per step.

2. Timing, on one fixed batch, after the training: every variant is warmed up, then timed in --rounds rounds;
each round runs --round-steps steps of every variant in turn, in an order shuffled anew each round (seeded by
--seed), so that a busy moment of the machine hits every variant alike and no variant always follows the same
one. Each variant's median over the rounds, its spread (min-max) and, against fp32, its time divided by fp32's
in the same round go to the JSON.

3. With --accumulate N: one more model trains with fp16 autocast and a GradScaler, N micro-batches per optimizer
step (no_sync on all but the last), and clip_grad_norm_ after scaler.unscale_.

Devices: NCCL and one GPU per process where CUDA has a GPU for every process on the machine, gloo
and the CPU otherwise or with --device cpu (choose_device). On CUDA, cuDNN is made deterministic while the
variants train (the lesson checks bucket-view against fp32 bit for bit), and left at its defaults for the
timing. Run by this series' tests on the CPU with gloo, 1 to 3 processes; the GPU path is checked by
tools/gpu_check.py.

Written by notebooks/11_faster_ddp.ipynb — edit it there.
"""

import argparse
import contextlib
import datetime
import gc
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

VARIANTS = ["fp32", "bf16", "fp16", "compile", "bucket-view", "fp16-hook", "bf16-hook", "powersgd"]


class CommRecorder:
    """What DDP's communication hooks hand to dist.all_reduce, per step: bytes, dtypes, each bucket's size.

    The hooks call dist.all_reduce by name (default_hooks.py, powerSGD_hook.py), some of them later, from a
    future's callback, so the recorder wraps dist.all_reduce itself while it is installed: it counts, then calls
    the real one."""

    def __init__(self):
        self.bytes_this_step, self.buckets, self.dtypes_sent = 0, [], set()
        self.real_all_reduce = dist.all_reduce

    def all_reduce(self, tensor, *args, **kwargs):
        self.bytes_this_step += tensor.numel() * tensor.element_size()
        self.dtypes_sent.add(str(tensor.dtype).removeprefix("torch."))
        return self.real_all_reduce(tensor, *args, **kwargs)

    def wrap(self, hook):
        def recorded_hook(state, bucket):  # a new name: register_comm_hook checks hooks' names (lesson 11)
            self.buckets.append(dict(dtype=str(bucket.buffer().dtype).removeprefix("torch."),
                                     elements=bucket.buffer().numel(),
                                     tensors=[list(g.shape) for g in bucket.gradients()]))
            return hook(state, bucket)
        return recorded_hook

    def take(self):
        """This step's bytes and buckets; the counts start again from zero."""
        taken = self.bytes_this_step, self.buckets
        self.bytes_this_step, self.buckets = 0, []
        return taken

    def __enter__(self):
        dist.all_reduce = self.all_reduce
        return self

    def __exit__(self, *exc):
        dist.all_reduce = self.real_all_reduce


def comm_hook(variant, start_powersgd_at, powersgd_rank):
    """(state, hook) for register_comm_hook: DDP's all-reduce written in Python, or one that compresses."""
    if variant == "fp16-hook":  # cast each bucket to fp16, all-reduce, cast back: half the bytes
        return None, default_hooks.fp16_compress_hook
    if variant == "bf16-hook":  # the same in bf16
        return None, default_hooks.bf16_compress_hook
    if variant == "powersgd":  # each gradient matrix M (n x m) sent as two low-rank factors P (n x r), Q (m x r)
        state = powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=powersgd_rank,
                                       start_powerSGD_iter=start_powersgd_at, min_compression_rate=2)
        return state, powersgd.powerSGD_hook
    return None, default_hooks.allreduce_hook  # what DDP does without a hook: all-reduce, divide by world size


def bf16_hook_by_its_own_name(device):
    """What register_comm_hook says to PyTorch's bf16_compress_hook itself: None (accepted) or its error.
    Tried on a throwaway DDP model, since a DDP model takes one communication hook only."""
    probe = DDP(nn.Linear(1, 1).to(device), device_ids=[device.index] if device.type == "cuda" else None)
    try:
        probe.register_comm_hook(None, default_hooks.bf16_compress_hook)
    except TypeError as error:
        return f"TypeError: {error}"
    return None


def counting_backend(name, compiled_graphs):
    """A torch.compile backend that hands every graph to `name` (inductor, ...) and notes its node count and
    whether its inputs have a symbolic (dynamic) size."""
    from torch._dynamo.backends.registry import lookup_backend

    compile_with = lookup_backend(name)

    def backend(graph_module, example_inputs):
        sizes = [s for x in example_inputs if isinstance(x, torch.Tensor) for s in x.shape]
        dynamic = any(isinstance(x, torch.SymInt) for x in [*example_inputs, *sizes])
        compiled_graphs.append(dict(nodes=len(graph_module.graph.nodes), dynamic=dynamic))
        return compile_with(graph_module, example_inputs)
    return backend


class Variant:
    """One way to train: its own DDP model from the same initial weights, its optimizer and its recorder."""

    def __init__(self, name, args, device):
        self.name = name
        torch.manual_seed(args.seed)  # the same initial weights in every variant (and DDP broadcasts rank 0's)
        self.model = Model(args.num_classes).to(device)
        # PowerSGD gets one bucket: an explicit 25 MiB, which also lifts the 1 MiB first bucket (left at None, DDP
        # caps its first bucket at 1 MiB: two buckets here). With several, its hook hung on gloo here (torch 2.13),
        # beyond the reach of --timeout, every rank waiting in two of the hook's callbacks at once (seen with py-spy).
        bucket_cap_mb = 25 if name == "powersgd" else args.bucket_cap_mb
        self.ddp_model = DDP(self.model, device_ids=[device.index] if device.type == "cuda" else None,
                             bucket_cap_mb=bucket_cap_mb, gradient_as_bucket_view=name == "bucket-view")
        self.recorder = CommRecorder()
        state, hook = comm_hook(name, start_powersgd_at=2, powersgd_rank=args.powersgd_rank)
        self.ddp_model.register_comm_hook(state, self.recorder.wrap(hook))
        self.compiled_graphs = []
        self.forward = self.ddp_model
        if name == "compile":
            self.forward = torch.compile(self.ddp_model, backend=counting_backend(args.compile_backend,
                                                                                  self.compiled_graphs))
        self.amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(name)
        self.scaler = torch.amp.GradScaler(device.type, enabled=name == "fp16")  # fp16's small gradients underflow
        self.loss_fn = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(self.ddp_model.parameters(), lr=args.lr, momentum=0.9)

    def step(self, images, labels):
        """One training step, PyTorch's AMP recipe: forward and loss under autocast, backward and step outside."""
        with self.recorder:
            with torch.autocast(images.device.type, dtype=self.amp_dtype, enabled=self.amp_dtype is not None):
                logits = self.forward(images)  # convolutions and matmuls in 16 bits, under autocast
                loss = self.loss_fn(logits, labels)  # cross_entropy is on autocast's fp32 list: a float32 loss
            self.optimizer.zero_grad()
            self.scaler.scale(loss).backward()  # DDP's hook all-reduces the (fp32) gradients here
            self.scaler.step(self.optimizer)  # fp16: unscales first, and skips the step if a gradient is inf or nan
            self.scaler.update()  # fp16: a skipped step halves the scale
        return logits, loss


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_variant(variant, args, device, train_set, val_set):
    """Train --epochs epochs; returns what the lesson checks: losses, bytes, buckets, dtypes, graphs, accuracy."""
    sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)
    # Each module's output dtype in the first step, seen by forward hooks (not under compile: Dynamo would trace them)
    module_dtypes = {}

    def note_dtype(module, inputs, output):  # returns None: a forward hook that returns a value replaces the output
        module_dtypes[f"{names[module]} ({type(module).__name__})"] = str(output.dtype).removeprefix("torch.")
    names = {module: name for name, module in variant.model.named_children()}
    hooks = [] if variant.name == "compile" else [module.register_forward_hook(note_dtype) for module in names]
    losses, bytes_sent, buckets, graphs_after_step, batch_sizes, first_step_s = [], [], [], [], [], None
    skipped_steps, scaler = 0, variant.scaler
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            scale = scaler.get_scale() if scaler.is_enabled() else None
            started = time.perf_counter()
            logits, loss = variant.step(images, labels)
            sync(device)
            skipped_steps += scale is not None and scaler.get_scale() < scale  # a skipped step halved the scale
            if first_step_s is None:
                first_step_s, logits_dtype, loss_dtype = time.perf_counter() - started, logits.dtype, loss.dtype
                for hook in hooks:
                    hook.remove()
            losses.append(loss.item())
            step_bytes, step_buckets = variant.recorder.take()
            bytes_sent.append(step_bytes)
            buckets.append(step_buckets)
            graphs_after_step.append(len(variant.compiled_graphs))
            batch_sizes.append(len(labels))
    # The mean loss of every step over the ranks
    step_losses = [total / dist.get_world_size() for total in sum_over_ranks(*losses, device=device)]
    grads = [p.grad for p in variant.model.parameters()]
    result = dict(
        variant=variant.name, module_dtypes=module_dtypes, logits_dtype=str(logits_dtype).removeprefix("torch."),
        loss_dtype=str(loss_dtype).removeprefix("torch."),
        grad_dtypes=sorted({str(g.dtype).removeprefix("torch.") for g in grads}),
        sent_dtypes=sorted(variant.recorder.dtypes_sent),
        buckets_first_step=buckets[0], buckets_last_step=buckets[-1],  # DDP rebuilds its buckets after step 1
        grad_storages=len({g.untyped_storage().data_ptr() for g in grads}), parameter_tensors=len(grads),
        buffer_tensors=len(list(variant.model.buffers())),
        bytes_per_step=bytes_sent, step_losses=step_losses, first_step_s=slowest(first_step_s, device),
        batch_sizes=batch_sizes, compiled_graphs=list(variant.compiled_graphs), graphs_after_step=graphs_after_step,
        skipped_steps=int(skipped_steps), steps_per_epoch=len(loader),
        val_accuracy=evaluate(variant.model, DataLoader(val_set, batch_size=256), device))
    variant.model.train()  # evaluate() left it in eval mode
    return result


@contextlib.contextmanager
def deterministic_cudnn(device):
    """On CUDA, cuDNN's deterministic convolutions while the variants train, so that bucket-view and fp32 can be
    compared bit for bit (cuDNN's default kernels may add in a different order from run to run); its defaults
    again afterwards, so that the timing measures the kernels a real run uses. Nothing to do on the CPU."""
    if device.type != "cuda":
        yield
        return
    cudnn = torch.backends.cudnn
    saved = cudnn.deterministic, cudnn.benchmark
    cudnn.deterministic, cudnn.benchmark = True, False
    try:
        yield
    finally:
        cudnn.deterministic, cudnn.benchmark = saved


def slowest(seconds, device):
    """The largest value over all ranks: a step is as slow as its slowest rank."""
    t = torch.tensor([seconds], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def time_variants(variants, images, labels, args, device):
    """Seconds per step of every variant on one batch: warmed up, then interleaved in rounds.

    Every round runs --round-steps steps of each variant, in an order shuffled anew each round (the same on every
    rank: one seeded generator), so that no variant always runs first or always after the same neighbour, and a
    busy moment of the machine hits every variant alike. Returns the seconds (one list of rounds per variant) and
    each round's order."""
    for variant in variants:  # warm-up: caches, allocator, and any compiling happen here, untimed
        for _ in range(args.warmup_steps):
            variant.step(images, labels)
    seconds = torch.zeros(args.rounds, len(variants), dtype=torch.float64)
    shuffler = random.Random(args.seed)
    orders = [shuffler.sample(range(len(variants)), len(variants)) for _ in range(args.rounds)]
    for r, order in enumerate(orders):
        for i in order:
            sum_over_ranks(0.0, device=device)  # every rank starts the block together
            sync(device)
            started = time.perf_counter()
            for _ in range(args.round_steps):
                variants[i].step(images, labels)
            sync(device)  # CUDA returns before the work is done
            seconds[r, i] = (time.perf_counter() - started) / args.round_steps
    seconds = seconds.to(device)
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX)  # a step is as slow as its slowest rank
    for variant in variants:
        variant.recorder.take()  # what the timed steps sent is not part of the training's record
    return seconds.cpu().T.tolist(), [[variants[i].name for i in order] for order in orders]


def train_accumulating(args, device, train_set, val_set):
    """fp16 autocast + GradScaler, --accumulate micro-batches per optimizer step (no_sync on all but the last),
    clip_grad_norm_ after scaler.unscale_. Returns each micro-step's bytes and each optimizer step's norms."""
    torch.manual_seed(args.seed)
    model = Model(args.num_classes).to(device)
    ddp_model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None,
                    bucket_cap_mb=args.bucket_cap_mb)
    recorder = CommRecorder()
    ddp_model.register_comm_hook(None, recorder.wrap(default_hooks.allreduce_hook))
    scaler = torch.amp.GradScaler(device.type)  # fp16: without it, small gradients underflow to zero
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)
    micro_bytes, optimizer_steps = [], []
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for i, (images, labels) in enumerate(loader):
            first = i - i % args.accumulate
            group = min(args.accumulate, len(loader) - first)  # micro-batches in this group (the last may be short)
            last = i == first + group - 1
            with recorder, (contextlib.nullcontext() if last else ddp_model.no_sync()):
                with torch.autocast(device.type, dtype=torch.float16):
                    loss = loss_fn(ddp_model(images.to(device)), labels.to(device)) / group  # the group's mean
                scaler.scale(loss).backward()  # inside no_sync: the gradients add up locally, nothing is sent
            micro_bytes.append(recorder.take()[0])
            if not last:
                continue
            params = list(model.parameters())
            scale, scaled_norm = scaler.get_scale(), nn.utils.get_total_norm([p.grad for p in params]).item()
            scaler.unscale_(optimizer)  # FIRST: the gradients at their true size, and inf/nan found
            norm = nn.utils.clip_grad_norm_(params, args.clip_norm).item()  # the same on every rank: after the sync
            clipped_norm = nn.utils.get_total_norm([p.grad for p in params]).item()
            scaler.step(optimizer)  # skipped if unscale_ found inf or nan
            scaler.update()
            optimizer.zero_grad()
            optimizer_steps.append(dict(scale=scale, scaled_norm=scaled_norm, norm=norm, clipped_norm=clipped_norm,
                                        skipped=scaler.get_scale() < scale))
    norms = torch.tensor([s["norm"] for s in optimizer_steps], dtype=torch.float64, device=device)
    lowest, highest = norms.clone(), norms.clone()
    dist.all_reduce(lowest, op=dist.ReduceOp.MIN)
    dist.all_reduce(highest, op=dist.ReduceOp.MAX)
    finite = [math.isfinite(n) for n in highest.tolist()]
    return dict(accumulate=args.accumulate, clip_norm=args.clip_norm, micro_batch_bytes=micro_bytes,
                optimizer_steps=optimizer_steps,
                norm_spread_over_ranks=max([h - lo for h, lo, ok in zip(highest.tolist(), lowest.tolist(), finite)
                                            if ok], default=0.0),
                val_accuracy=evaluate(model, DataLoader(val_set, batch_size=256), device))


def train(args, device):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    train_set, val_set = make_datasets(args.dataset_size, args.num_classes, args.seed)
    if rank == 0:
        print(f"{world_size} process(es), backend {dist.get_backend()}, device {device}, "
              f"variants {', '.join(args.variants)}", flush=True)
    name_check = bf16_hook_by_its_own_name(device) if "bf16-hook" in args.variants else None
    variants = [Variant(name, args, device) for name in args.variants]  # all built up front, for the timing
    results, final_parameters = [], {}
    with deterministic_cudnn(device):
        for variant in variants:
            result = train_variant(variant, args, device, train_set, val_set)
            final_parameters[variant.name] = torch.cat([p.detach().cpu().flatten() for p in variant.model.parameters()])
            results.append(result)
            if rank == 0:
                print(f"{variant.name:12s} loss {result['step_losses'][-1]:.4f}  "
                      f"val accuracy {result['val_accuracy']:.1%}  "
                      f"{result['bytes_per_step'][-1] / 1024:7.1f} KiB all-reduced per step", flush=True)
    for result in results:  # against fp32 (None without it), whatever the order of --variants
        fp32 = final_parameters.get("fp32")
        result["max_parameter_difference_vs_fp32"] = (
            None if fp32 is None else (final_parameters[result["variant"]] - fp32).abs().max().item())
    # The timing batch: this rank's first batch, a shape every variant (and the compiled one) has already run
    sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed)
    images, labels = next(iter(DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)))
    rounds, orders = time_variants(variants, images.to(device), labels.to(device), args, device)
    fp32_rounds = rounds[args.variants.index("fp32")] if "fp32" in args.variants else None
    for result, variant, seconds in zip(results, variants, rounds):
        # Paired: each round's time over fp32's in the same round, so a busy round cancels out of the ratio
        ratios = None if fp32_rounds is None else [t / b for t, b in zip(seconds, fp32_rounds)]
        result.update(round_step_s=seconds, median_step_s=statistics.median(seconds), min_step_s=min(seconds),
                      max_step_s=max(seconds), round_ratio_vs_fp32=ratios,
                      graphs_after_timing=len(variant.compiled_graphs))
        if rank == 0:
            paired = "" if ratios is None or variant.name == "fp32" else (
                f"; {statistics.median(ratios):.2f}x fp32's time in the same round "
                f"({min(ratios):.2f}-{max(ratios):.2f})")
            print(f"{variant.name:12s} {result['median_step_s'] * 1e3:7.2f} ms per step (median of {args.rounds} "
                  f"rounds; {result['min_step_s'] * 1e3:.2f}-{result['max_step_s'] * 1e3:.2f}){paired}", flush=True)
    accumulated = train_accumulating(args, device, train_set, val_set) if args.accumulate else None
    if rank == 0 and accumulated:
        print(f"accumulate   {args.accumulate} micro-batches per step, fp16 + GradScaler, clip at {args.clip_norm}: "
              f"val accuracy {accumulated['val_accuracy']:.1%}", flush=True)
    if rank == 0 and args.out:
        args.out.write_text(json.dumps(dict(
            world_size=world_size, backend=dist.get_backend(), device=str(device), torch=torch.__version__,
            compile_backend=args.compile_backend, bucket_cap_mb=args.bucket_cap_mb, batch_size=args.batch_size,
            num_classes=args.num_classes,
            powersgd_rank=args.powersgd_rank, powersgd_starts_at_step=2, omp_threads=torch.get_num_threads(),
            timing=dict(rounds=args.rounds, round_steps=args.round_steps, warmup_steps=args.warmup_steps,
                        batch=len(labels), round_orders=orders),
            bf16_hook_by_its_own_name=name_check, variants=results, accumulate=accumulated), indent=1))


def variant_list(text):
    """An argparse type: variants separated by commas, each one of VARIANTS, none twice."""
    names = text.split(",")
    unknown = [name for name in names if name not in VARIANTS]
    if unknown or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"expected distinct names from {','.join(VARIANTS)}, got {text}")
    return names


def compile_backend(text):
    """An argparse type: a torch.compile backend this torch has (inductor, aot_eager, eager, ...)."""
    import torch._dynamo  # imported here: only a run that compiles pays for it

    if text not in torch._dynamo.list_backends(exclude_tags=()):
        raise argparse.ArgumentTypeError(f"unknown backend {text}; this torch has "
                                         f"{', '.join(torch._dynamo.list_backends())}")
    return text


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", type=variant_list, default=["fp32", "bf16", "fp16-hook"],
                        help=f"comma-separated, from {','.join(VARIANTS)}")
    parser.add_argument("--epochs", type=positive_int, default=2)
    parser.add_argument("--batch-size", type=positive_int, default=32, help="per process")
    parser.add_argument("--dataset-size", type=positive_int, default=2048, help="training samples")
    parser.add_argument("--num-classes", type=class_count, default=20,
                        help="20: the last layer's 1.1 MB of gradients fill more than DDP's 1 MiB first bucket")
    parser.add_argument("--lr", type=positive_float, default=0.01)
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument("--bucket-cap-mb", type=positive_float, default=1.0,
                        help="DDP's bucket size in MiB; at least 1 (DDP's first bucket) with the compile variant")
    parser.add_argument("--compile-backend", type=compile_backend, default="inductor")
    parser.add_argument("--powersgd-rank", type=positive_int, default=2, help="PowerSGD's matrix approximation rank")
    parser.add_argument("--warmup-steps", type=non_negative_int, default=2, help="untimed steps of each variant")
    parser.add_argument("--rounds", type=positive_int, default=5, help="timing rounds (each runs every variant)")
    parser.add_argument("--round-steps", type=positive_int, default=4, help="timed steps of each variant per round")
    parser.add_argument("--accumulate", type=non_negative_int, default=0,
                        help="also train with fp16, a GradScaler and this many micro-batches per step (0: no)")
    parser.add_argument("--clip-norm", type=positive_float, default=3.0,
                        help="clip_grad_norm_'s max_norm (with --accumulate)")
    parser.add_argument("--device", choices=["auto", "cpu"], default="auto",
                        help="auto: NCCL and one GPU per process where CUDA exists, else gloo and the CPU; "
                             "cpu: gloo and the CPU")
    parser.add_argument("--timeout", type=positive_float, default=60.0, help="seconds a collective may wait")
    parser.add_argument("--out", type=writable_file, help="rank 0 writes every variant's measurements here (JSON)")
    args = parser.parse_args()
    if "compile" in args.variants and args.bucket_cap_mb < 1:  # Dynamo's DDP optimizer asserts on it, mid-compile
        parser.error(f"argument --bucket-cap-mb: must be at least 1 with the compile variant (Dynamo's DDP "
                     f"optimizer needs buckets no smaller than DDP's 1 MiB first bucket), got {args.bucket_cap_mb:g}")
    return args


def main():
    args = parse_args()
    device = setup_distributed(args.timeout, args.device)
    try:
        train(args, device)
    except BaseException:
        dist.destroy_process_group()  # no barrier here: the other ranks may be gone
        raise
    clean_exit()


# ---- Plumbing shared with lesson 04's script (explained there): arguments, data, model, device, group, exit ----


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


def make_datasets(train_size, num_classes, seed):
    """Synthetic, learnable data: image = 0.1 * template[label] + noise. Same seed, same data."""
    generator = torch.Generator().manual_seed(seed)
    templates = torch.randn(num_classes, 3, 32, 32, generator=generator)
    val_size = max(train_size // 4, num_classes)
    labels = torch.randint(num_classes, (train_size + val_size,), generator=generator)
    images = 0.1 * templates[labels] + torch.randn(len(labels), 3, 32, 32, generator=generator)
    return (TensorDataset(images[:train_size], labels[:train_size]),
            TensorDataset(images[train_size:], labels[train_size:]))


class Model(nn.Module):
    """The source post's model, without the Softmax: CrossEntropyLoss wants raw logits."""

    def __init__(self, num_classes):
        super().__init__()
        self.conv2d = nn.Conv2d(3, 16, 3)
        self.fc = nn.Linear(30 * 30 * 16, num_classes)

    def forward(self, x):
        return self.fc(self.conv2d(x).flatten(1))


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


def clean_exit():
    """Leave the process group so that every rank exits 0. With gloo, a bare destroy_process_group() can
    abort the process ("terminate called without an active exception") after the work is done: collect
    what still holds the group (DDP's reducer), wait for every rank, then destroy."""
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    correct, seen = 0, 0
    for images, labels in loader:
        correct += (model(images.to(device)).argmax(1) == labels.to(device)).sum().item()
        seen += len(labels)
    return correct / seen


if __name__ == "__main__":
    main()
