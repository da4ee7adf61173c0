"""11 · Faster DDP: mixed precision, torch.compile and gradient compression, each measured against fp32.

    torchrun --standalone --nproc_per_node=2 11_fast_ddp.py --variants fp32,bf16,compile,powersgd --out fast.json
    torchrun --standalone --nproc_per_node=2 11_fast_ddp.py --variants fp32,fp16,bf16-hook   # on GPUs (NCCL)
    python 11_fast_ddp.py --variants fp32,bf16      # also works: a world of one process

Every variant trains lesson 04's model on lesson 04's data from the same initial weights, in the same order,
and changes one thing against fp32:
  bf16, fp16   torch.autocast around the forward (fp16 with a GradScaler); the loss is computed in fp32
  compile      torch.compile(ddp_model): the graph is split at DDP's bucket boundaries
  bucket-view  DDP(gradient_as_bucket_view=True): the gradients are views into DDP's buckets, not copies
  fp16-hook, bf16-hook, powersgd   a DDP communication hook that compresses what is all-reduced
Every variant registers a communication hook (fp32's is allreduce_hook, DDP's own all-reduce in Python), wrapped
so that it records each bucket's dtype and size and the bytes this process hands to dist.all_reduce per step.

Devices: NCCL and one GPU per process where CUDA has a GPU for every process on the machine, gloo
and the CPU otherwise or with --device cpu (choose_device). bf16-hook needs NCCL. Run by this series'
tests on the CPU with gloo, 1 to 3 processes; the GPU path is checked by tools/gpu_check.py.

Written by notebooks/11_faster_ddp.ipynb — edit it there.
"""

import argparse
import datetime
import gc
import json
import math
import os
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
                        help="DDP's bucket size (default 25); at least 1 (the first bucket's size) for torch.compile")
    parser.add_argument("--compile-backend", type=compile_backend, default="inductor")
    parser.add_argument("--powersgd-rank", type=positive_int, default=1, help="PowerSGD's matrix approximation rank")
    parser.add_argument("--device", choices=["auto", "cpu"], default="auto",
                        help="auto: NCCL and one GPU per process where CUDA exists, else gloo and the CPU; "
                             "cpu: gloo and the CPU")
    parser.add_argument("--timeout", type=positive_float, default=60.0, help="seconds a collective may wait")
    parser.add_argument("--out", type=writable_file, help="rank 0 writes every variant's measurements here (JSON)")
    args = parser.parse_args()
    if "bf16-hook" in args.variants and (args.device == "cpu" or not torch.cuda.is_available()):
        parser.error("bf16-hook needs NCCL and CUDA; this run uses gloo (leave bf16-hook out on the CPU)")
    return args


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


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    correct, seen = 0, 0
    for images, labels in loader:
        correct += (model(images.to(device)).argmax(1) == labels.to(device)).sum().item()
        seen += len(labels)
    return correct / seen


class CommRecorder:
    """What DDP's communication hooks hand to dist.all_reduce, per step: bytes, and each bucket's dtype and size.

    The hooks call dist.all_reduce by name (default_hooks.py, powerSGD_hook.py), some of them later, from a
    future's callback, so the recorder wraps dist.all_reduce itself while it is installed: it counts, then calls
    the real one."""

    def __init__(self):
        self.bytes_this_step, self.buckets = 0, []
        self.real_all_reduce = dist.all_reduce

    def all_reduce(self, tensor, *args, **kwargs):
        self.bytes_this_step += tensor.numel() * tensor.element_size()
        return self.real_all_reduce(tensor, *args, **kwargs)

    def wrap(self, hook):
        def recorded_hook(state, bucket):
            self.buckets.append(dict(dtype=str(bucket.buffer().dtype).removeprefix("torch."),
                                     elements=bucket.buffer().numel(),
                                     tensors=[list(g.shape) for g in bucket.gradients()]))
            return hook(state, bucket)
        return recorded_hook

    def __enter__(self):
        dist.all_reduce = self.all_reduce
        return self

    def __exit__(self, *exc):
        dist.all_reduce = self.real_all_reduce


def comm_hook(variant, start_powersgd_at, powersgd_rank):
    """(state, hook) for register_comm_hook: DDP's all-reduce written in Python, or one that compresses."""
    if variant == "fp16-hook":  # cast each bucket to fp16, all-reduce, cast back: half the bytes
        return None, default_hooks.fp16_compress_hook
    if variant == "bf16-hook":  # the same in bf16 (NCCL only)
        return None, default_hooks.bf16_compress_hook
    if variant == "powersgd":  # each gradient matrix M (n x m) sent as two low-rank factors P (n x r), Q (m x r)
        state = powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=powersgd_rank,
                                       start_powerSGD_iter=start_powersgd_at, min_compression_rate=2)
        return state, powersgd.powerSGD_hook
    return None, default_hooks.allreduce_hook  # what DDP does without a hook: all-reduce, divide by world size


def counting_backend(name, compiled_graphs):
    """A torch.compile backend that hands every graph to `name` (inductor, ...) and appends its node count."""
    from torch._dynamo.backends.registry import lookup_backend

    compile_with = lookup_backend(name)

    def backend(graph_module, example_inputs):
        compiled_graphs.append(len(graph_module.graph.nodes))
        return compile_with(graph_module, example_inputs)
    return backend


def train_variant(variant, args, device, train_set, val_set):
    """Train from the same weights and data order as every other variant; returns its measurements."""
    torch.manual_seed(args.seed)  # the same initial weights in every variant (and DDP broadcasts rank 0's)
    sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)
    model = Model(args.num_classes).to(device)
    # PowerSGD gets one bucket (DDP's default cap): with several, its hook hung on gloo here (torch 2.13), beyond
    # the reach of --timeout, every rank waiting in two of the hook's callbacks at once (seen with py-spy).
    bucket_cap_mb = 25 if variant == "powersgd" else args.bucket_cap_mb
    ddp_model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None,
                    bucket_cap_mb=bucket_cap_mb, gradient_as_bucket_view=variant == "bucket-view")
    recorder = CommRecorder()
    state, hook = comm_hook(variant, start_powersgd_at=2, powersgd_rank=args.powersgd_rank)
    ddp_model.register_comm_hook(state, recorder.wrap(hook))
    compiled_graphs = []
    if variant == "compile":
        ddp_model = torch.compile(ddp_model, backend=counting_backend(args.compile_backend, compiled_graphs))
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(variant)
    scaler = torch.amp.GradScaler(device.type, enabled=variant == "fp16")  # fp16's small gradients underflow
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=args.lr, momentum=0.9)

    losses, seconds, bytes_sent, buckets, graphs_after_step, logits_dtype = [], [], [], [], [], None
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            started = time.perf_counter()
            with recorder:
                with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                    logits = ddp_model(images)  # matmuls and convolutions in 16 bits, under autocast
                loss = loss_fn(logits.float(), labels)  # the loss in fp32, outside autocast
                optimizer.zero_grad()
                scaler.scale(loss).backward()  # DDP's hook all-reduces the (fp32) gradients here
                scaler.step(optimizer)
                scaler.update()
            if device.type == "cuda":
                torch.cuda.synchronize()  # CUDA returns before the work is done
            seconds.append(time.perf_counter() - started)
            losses.append(loss.item())
            bytes_sent.append(recorder.bytes_this_step)
            buckets.append(recorder.buckets)
            recorder.bytes_this_step, recorder.buckets = 0, []
            graphs_after_step.append(len(compiled_graphs))
            logits_dtype = str(logits.dtype).removeprefix("torch.")

    # The mean loss of every step over the ranks, and each step's time on the slowest rank.
    step_losses = [total / dist.get_world_size() for total in sum_over_ranks(*losses, device=device)]
    times = torch.tensor(seconds, device=device)
    dist.all_reduce(times, op=dist.ReduceOp.MAX)  # a timing, not a metric: a step ends when the slowest rank is done
    times = times.tolist()
    grads = [p.grad for p in model.parameters()]
    steps_per_epoch = len(loader)
    return dict(
        variant=variant, logits_dtype=logits_dtype, grad_dtypes=sorted({str(g.dtype).removeprefix("torch.")
                                                                         for g in grads}),
        buckets_first_step=buckets[0], buckets_last_step=buckets[-1],  # DDP rebuilds its buckets after step 1
        grad_storages=len({g.untyped_storage().data_ptr() for g in grads}), parameter_tensors=len(grads),
        bytes_per_step=bytes_sent, step_losses=step_losses, step_seconds=times,
        first_step_s=times[0], median_step_s=statistics.median(times[1:]) if len(times) > 1 else times[0],
        compiled_graphs=compiled_graphs, graphs_after_step=graphs_after_step,
        parameters=[p.detach().cpu().flatten() for p in model.parameters()],
        val_accuracy=evaluate(model, DataLoader(val_set, batch_size=256), device),
        steps_per_epoch=steps_per_epoch)


def train(args, device):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    train_set, val_set = make_datasets(args.dataset_size, args.num_classes, args.seed)
    if rank == 0:
        print(f"{world_size} process(es), backend {dist.get_backend()}, device {device}, "
              f"variants {', '.join(args.variants)}", flush=True)
    results, baseline = [], None
    for variant in args.variants:
        result = train_variant(variant, args, device, train_set, val_set)
        parameters = torch.cat(result.pop("parameters"))
        baseline = parameters if baseline is None else baseline
        result["max_parameter_difference_vs_first"] = (parameters - baseline).abs().max().item()
        results.append(result)
        if rank == 0:
            print(f"{variant:12s} loss {result['step_losses'][-1]:.4f}  val accuracy {result['val_accuracy']:.1%}  "
                  f"first step {result['first_step_s'] * 1e3:8.1f} ms, then {result['median_step_s'] * 1e3:6.2f} ms "
                  f"(median)  {result['bytes_per_step'][-1] / 1024:7.1f} KiB all-reduced per step", flush=True)
    if rank == 0 and args.out:
        args.out.write_text(json.dumps(dict(
            world_size=world_size, backend=dist.get_backend(), device=str(device), torch=torch.__version__,
            compile_backend=args.compile_backend, bucket_cap_mb=args.bucket_cap_mb, batch_size=args.batch_size,
            powersgd_rank=args.powersgd_rank, powersgd_starts_at_step=2, omp_threads=torch.get_num_threads(),
            variants=results), indent=1))


def main():
    args = parse_args()
    device = setup_distributed(args.timeout, args.device)
    try:
        train(args, device)
    except BaseException:
        dist.destroy_process_group()  # no barrier here: the other ranks may be gone
        raise
    clean_exit()


if __name__ == "__main__":
    main()
