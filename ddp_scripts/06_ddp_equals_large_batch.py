"""06 · DDP equals large-batch training: N processes x batch b versus one process x batch N*b.

    torchrun --standalone --nproc_per_node=2 06_ddp_equals_large_batch.py [--out equal.json]
    python 06_ddp_equals_large_batch.py     # also works: a world of one process

Every rank trains with DDP on its share of each global batch; rank 0 also trains a plain copy of
the model on the whole global batch (N*b samples, the same samples in the same steps) and compares
the parameters. The claim needs equal per-rank batches and no padding: DistributedSampler with
drop_last=True, which drops nothing when N divides the dataset size (it pads otherwise, and a padded
run is one of the controls). Then: what the DDP constructor and backward() do, five negative
controls that must NOT match, and a model whose branch is unused in some steps (find_unused_parameters).

Devices: NCCL and one GPU per process where CUDA has a GPU for every process on the machine, gloo
and the CPU otherwise or with --device cpu (choose_device). Run by this series' tests on the CPU with
gloo, 1 to 3 processes; the GPU path is checked by tools/gpu_check.py (README, "Verified on").

Written by notebooks/06_ddp_equals_large_batch.ipynb — edit it there.
"""

import argparse
import copy
import datetime
import gc
import hashlib
import itertools
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
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


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


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=positive_int, default=2, help="at least 2 shows the set_epoch control")
    parser.add_argument("--batch-size", type=positive_int, default=8, help="per process (b)")
    parser.add_argument("--dataset-size", type=positive_int, default=96, help="training samples")
    parser.add_argument("--num-classes", type=class_count, default=10)
    parser.add_argument("--lr", type=positive_float, default=0.01, help="SGD's; Adam uses lr / 10")
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument("--device", choices=["auto", "cpu"], default="auto",
                        help="auto: NCCL and one GPU per process where CUDA exists, else gloo and the CPU; "
                             "cpu: gloo and the CPU")
    parser.add_argument("--timeout", type=positive_float, default=60.0, help="seconds a collective may wait")
    parser.add_argument("--out", type=writable_file, help="rank 0 writes every comparison to this JSON file")
    args = parser.parse_args()
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    if args.dataset_size < args.batch_size * world_size:
        parser.error(f"--dataset-size must be at least batch size x processes = {args.batch_size * world_size}")
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
    """The series' model; optionally with BatchNorm or Dropout, for the negative controls."""

    def __init__(self, num_classes, batch_norm=False, dropout=0.0):
        super().__init__()
        self.conv2d = nn.Conv2d(3, 16, 3)
        self.norm = nn.BatchNorm2d(16) if batch_norm else nn.Identity()
        self.drop = nn.Dropout(dropout) if dropout else nn.Identity()
        self.fc = nn.Linear(30 * 30 * 16, num_classes)

    def forward(self, x):
        return self.fc(self.drop(self.norm(self.conv2d(x))).flatten(1))


class BranchModel(nn.Module):
    """A small network whose `extra` block is used only when asked (an auxiliary branch)."""

    def __init__(self, num_classes):
        super().__init__()
        self.body = nn.Linear(3 * 32 * 32, 64)
        self.extra = nn.Linear(64, 64)
        self.head = nn.Linear(64, num_classes)

    def forward(self, x, use_extra=True):
        h = torch.relu(self.body(x.flatten(1)))
        if use_extra:
            h = h + torch.relu(self.extra(h))
        return self.head(h)


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


def clean_exit():
    """Leave the process group so that every rank exits 0. With gloo, a bare destroy_process_group() can
    abort the process ("terminate called without an active exception") after the work is done: collect
    what still holds the group (DDP's reducer), wait for every rank, then destroy."""
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


def wrap(model, device, **kwargs):
    return DDP(model, device_ids=[device.index] if device.type == "cuda" else None, **kwargs)


def flat(model, grads=False):
    """All parameters (or their gradients) of a model as one float64 CPU vector."""
    tensors = [p.grad if grads else p for p in model.parameters()]
    return torch.cat([t.detach().reshape(-1).double().cpu() for t in tensors])


def fingerprint(vector):
    return hashlib.sha1(vector.numpy().tobytes()).hexdigest()[:12]


def compare(model, reference):
    """max |difference| over all parameters, absolute and relative to the largest reference value."""
    diff = (flat(model) - flat(reference)).abs().max().item()
    return dict(max_abs=diff, max_rel=diff / flat(reference).abs().max().item())


def gather(obj):
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, obj)
    return everyone


def global_batches(dataset_size, global_batch, steps, seed, epoch, used=None):
    """The samples of each global step of one process: DistributedSampler's permutation, cut into global
    batches. `used`: how many of the permutation's samples an epoch trains on (all of them, unless
    drop_last=True made the sampler drop the tail that N does not divide)."""
    order = torch.randperm(dataset_size, generator=torch.Generator().manual_seed(seed + epoch)).tolist()
    order = order[:used]
    return [order[s * global_batch:(s + 1) * global_batch] for s in range(steps)]


def make_optimizer(name, params, lr):
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    return torch.optim.Adam(params, lr=lr / 10)


def stop_if_not_finite(loss, model, epoch, step):
    """Stop at the first nan or inf, before optimizer.step() writes it into the weights. One rank's nan
    is every rank's: backward all-reduced the gradients, so every rank stops here, at the same step."""
    checks = [loss.isfinite()] + [p.grad.isfinite().all() for p in model.parameters() if p.grad is not None]
    if not torch.stack(checks).all():  # one device sync per step, not one per parameter
        what = "loss" if not loss.isfinite() else "gradients (averaged over all ranks)"
        raise SystemExit(f"[rank {dist.get_rank()}] stopping: non-finite {what} at epoch {epoch}, step {step} "
                         f"(loss on this rank {loss.item():.4g}); try a smaller --lr")


def experiment(args, device, train_set, optimizer="sgd", dtype=torch.float64, batch_norm=False, dropout=0.0,
               loss_sum=False, set_epoch=True, sync_bn=False, drop_last=True):
    """Train with DDP on N ranks and, on rank 0, a plain copy on the global batches; compare.

    drop_last=True: the sampler drops the tail of each epoch's permutation that N does not divide, so that
    no rank is padded (nothing is dropped when N divides the dataset). drop_last=False is the sampler's
    default: it pads every rank to ceil(size / N) samples by repeating the permutation's first indices."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    model = Model(args.num_classes, batch_norm, dropout).to(device, dtype)
    reference = copy.deepcopy(model)  # same initial weights; trained by rank 0 only
    if sync_bn:
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    ddp_model = wrap(model, device)
    opt = make_optimizer(optimizer, ddp_model.parameters(), args.lr)
    loss_fn = nn.CrossEntropyLoss(reduction="sum" if loss_sum else "mean")
    sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed, drop_last=drop_last)
    # The loader's own generator: each epoch's iterator draws a seed from it (DataLoader's _base_seed). From the
    # global generator, that draw would shift dropout's stream against the reference's, which has no loader.
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler, drop_last=drop_last,
                        generator=torch.Generator().manual_seed(args.seed))
    masks, orders, first_grads = [], [], None
    if dropout:  # record which activations dropout zeroed in the first step, on every rank
        ddp_model.module.drop.register_forward_hook(
            lambda mod, inp, out: masks.append(fingerprint((out == 0).cpu().to(torch.uint8))) if not masks else None)
    torch.manual_seed(args.seed + 1)  # dropout's random stream: the same on every rank
    for epoch in range(args.epochs):
        if set_epoch:
            sampler.set_epoch(epoch)
        orders.append(list(sampler))
        for step, (images, labels) in enumerate(loader):
            loss = loss_fn(ddp_model(images.to(device, dtype)), labels.to(device))
            opt.zero_grad()
            loss.backward()
            stop_if_not_finite(loss, ddp_model, epoch, step)
            if first_grads is None:
                first_grads = flat(ddp_model.module, grads=True)
            opt.step()
    steps = args.epochs * len(loader)
    masks, orders = gather(masks), gather(orders)
    result = dict(steps=steps, dtype=str(dtype), first_masks=masks, epoch_orders_rank0=orders[0],
                  dataset_size=len(train_set), drop_last=drop_last, samples_per_rank=sampler.num_samples,
                  padded=max(0, sampler.total_size - len(train_set)),
                  dropped=max(0, len(train_set) - sampler.total_size))
    if rank == 0:  # the reference: one process, batch N*b, the same samples in the same steps
        images, labels = train_set.tensors
        ref_opt = make_optimizer(optimizer, reference.parameters(), args.lr)
        ref_loss = nn.CrossEntropyLoss(reduction="sum" if loss_sum else "mean")
        torch.manual_seed(args.seed + 1)
        ref_first_grads = None
        for epoch in range(args.epochs):
            for idx in global_batches(len(train_set), args.batch_size * world_size, len(loader), args.seed, epoch,
                                      used=min(len(train_set), sampler.total_size)):
                loss = ref_loss(reference(images[idx].to(device, dtype)), labels[idx].to(device))
                ref_opt.zero_grad()
                loss.backward()
                if ref_first_grads is None:
                    ref_first_grads = flat(reference, grads=True)
                ref_opt.step()
        result.update(compare(ddp_model.module, reference), param_norm=flat(reference).norm().item())
        # reference gradient / DDP gradient in the very first step (same weights, same samples)
        result["first_grad_ratio"] = (ref_first_grads.norm() / first_grads.norm()).item()
    return result


def anatomy(args, device, train_set):
    """Different seeds per rank -> DDP broadcasts rank 0's weights; gradients averaged in backward."""
    rank = dist.get_rank()
    torch.manual_seed(args.seed + rank)  # deliberately different initial weights on every rank
    model = Model(args.num_classes).to(device)
    before = flat(model)
    ddp_model = wrap(model, device)  # the constructor broadcasts rank 0's parameters and buffers
    after = flat(model)
    local = Model(args.num_classes).to(device)  # a plain copy with the broadcast weights, outside DDP
    local.load_state_dict(model.state_dict())
    phase, calls = ["forward"], []

    def counting_hook(state, bucket):  # DDP's default all-reduce, plus a note of when it ran
        calls.append(phase[0])
        return default_hooks.allreduce_hook(state, bucket)

    ddp_model.register_comm_hook(None, counting_hook)
    opt = torch.optim.SGD(ddp_model.parameters(), lr=args.lr)
    images, labels = train_set.tensors
    idx = slice(rank * args.batch_size, (rank + 1) * args.batch_size)  # this rank's samples
    x, y = images[idx].to(device), labels[idx].to(device)
    loss_fn = nn.CrossEntropyLoss()
    loss_fn(local(x), y).backward()
    local_grad = flat(local, grads=True)  # this rank's own gradient, as a single process sees it
    loss = loss_fn(ddp_model(x), y)
    phase[0] = "backward"
    loss.backward()
    grad_after_backward = flat(model, grads=True)
    phase[0] = "step"
    opt.step()  # plain SGD: w <- w - lr * grad, with the gradient backward() left, nothing more
    step_minus_local_sgd = (flat(model) - (after - args.lr * grad_after_backward)).abs().max().item()
    local_grads = torch.stack(gather(local_grad))
    return dict(
        before=gather(fingerprint(before)), after=gather(fingerprint(after)),
        after_equals_rank0_before=gather(fingerprint(after) == gather(fingerprint(before))[0]),
        grads_after_backward=gather(fingerprint(grad_after_backward)),
        grad_minus_mean_of_local=gather((grad_after_backward - local_grads.mean(0)).abs().max().item()),
        grad_minus_own_local=gather((grad_after_backward - local_grad).abs().max().item()),
        step_minus_local_sgd=gather(step_minus_local_sgd),
        weights_after_step=gather(fingerprint(flat(model))),
        hook_calls=gather(calls))


def unused_parameters(args, device, train_set, warmup=3, rounds=15):
    """A branch used only on odd steps: the real DDP error, the fix, and static_graph. Then the cost of each
    setting on a model that uses every parameter: warmed up, then timed one step at a time, interleaved."""
    rank = dist.get_rank()
    images, labels = train_set.tensors
    idx = slice(rank * args.batch_size, (rank + 1) * args.batch_size)
    x, y = images[idx].to(device), labels[idx].to(device)
    loss_fn = nn.CrossEntropyLoss()

    def build(**ddp_kwargs):
        torch.manual_seed(args.seed)
        ddp_model = wrap(BranchModel(args.num_classes).to(device), device, **ddp_kwargs)
        return ddp_model, torch.optim.SGD(ddp_model.parameters(), lr=args.lr)

    def step(ddp_model, opt, use_extra):
        loss = loss_fn(ddp_model(x, use_extra=use_extra), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    def run(steps, use_extra, **ddp_kwargs):
        ddp_model, opt = build(**ddp_kwargs)
        try:
            for s in range(steps):
                step(ddp_model, opt, use_extra(s))
        except RuntimeError as error:  # every rank raises at the same step, so nothing is left waiting
            return dict(error=str(error), failed_at_step=s)
        return dict(error=None, weights=gather(fingerprint(flat(ddp_model.module))))

    def cost():
        """ms per step of each setting, every round timing one step of each in turn (A B C A B C ...), so a
        busy moment of the machine falls on all three alike; each step starts with the ranks together."""
        settings = dict(default={}, find_unused=dict(find_unused_parameters=True),
                        static_graph=dict(static_graph=True))
        built = {name: build(**kwargs) for name, kwargs in settings.items()}
        for name in settings:  # warm-up: the first steps allocate, and rebuild the buckets (static_graph: records)
            for _ in range(warmup):
                step(*built[name], True)
        ms = {name: [] for name in settings}
        for _ in range(rounds):
            for name in settings:
                dist.barrier()  # not timed: no rank's step includes waiting for a late one
                started = time.perf_counter()
                step(*built[name], True)
                if device.type == "cuda":
                    torch.cuda.synchronize(device)  # the GPU's work done, not only queued
                ms[name].append(1000 * (time.perf_counter() - started))
        return dict(ms=ms, warmup=warmup, rounds=rounds)

    odd = lambda step: step % 2 == 1  # noqa: E731  (the branch is skipped on even steps)
    return dict(
        default=run(4, odd),  # DDP expects every parameter to get a gradient in every step
        find_unused=run(4, odd, find_unused_parameters=True),
        static_graph_changing=run(4, odd, static_graph=True),
        cost=cost())  # the cost, on a model that does use every parameter (so all three settings are valid)


def run_experiments(args, device):
    """Every comparison and demonstration of lesson 06, in one launch; rank 0 prints them and writes --out."""
    # On recent GPUs float32 convolutions may use TF32 (about 3 significant digits): it would swamp
    # the rounding differences this script measures, so the comparison runs without it.
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    rank, world_size = dist.get_rank(), dist.get_world_size()
    train_set, _ = make_datasets(args.dataset_size, args.num_classes, args.seed)
    started = time.perf_counter()
    results = dict(world_size=world_size, backend=dist.get_backend(), device=str(device),
                   batch_size=args.batch_size, global_batch=args.batch_size * world_size)
    results["anatomy"] = anatomy(args, device, train_set)
    results["sgd"] = experiment(args, device, train_set, "sgd")
    results["adam"] = experiment(args, device, train_set, "adam")
    results["sgd_float32"] = experiment(args, device, train_set, "sgd", torch.float32)
    results["adam_float32"] = experiment(args, device, train_set, "adam", torch.float32)
    results["loss_sum"] = experiment(args, device, train_set, "sgd", loss_sum=True)
    results["batch_norm"] = experiment(args, device, train_set, "sgd", batch_norm=True)
    if device.type == "cuda":  # SyncBatchNorm: statistics over the global batch (GPU only)
        results["sync_batch_norm"] = experiment(args, device, train_set, "sgd", batch_norm=True, sync_bn=True)
    else:
        try:
            wrap(nn.SyncBatchNorm.convert_sync_batchnorm(Model(args.num_classes, batch_norm=True)), device)
        except ValueError as error:
            results["sync_batch_norm"] = dict(error=str(error))
    results["no_set_epoch"] = experiment(args, device, train_set, "sgd", set_epoch=False)
    if world_size > 1:  # a dataset size N does not divide: padded (the default), then drop_last=True
        ragged_size = next(n for n in itertools.count(args.dataset_size + 1) if n % world_size)
        ragged_set, _ = make_datasets(ragged_size, args.num_classes, args.seed)
        results["padded"] = experiment(args, device, ragged_set, "sgd", drop_last=False)
        results["padded_drop_last"] = experiment(args, device, ragged_set, "sgd", drop_last=True)
    results["dropout"] = experiment(args, device, train_set, "sgd", dropout=0.5)
    results["unused"] = unused_parameters(args, device, train_set)
    results["seconds"] = time.perf_counter() - started
    if rank == 0:
        for name in ("sgd", "adam", "sgd_float32", "adam_float32", "loss_sum", "batch_norm",
                     "sync_batch_norm", "no_set_epoch", "padded", "padded_drop_last", "dropout"):
            r = results.get(name, {})
            if "max_rel" in r:
                print(f"N={world_size} {name:16s} {r['steps']:3d} steps  max |Δ| {r['max_abs']:.2e}  "
                      f"relative {r['max_rel']:.2e}", flush=True)
            elif r:
                print(f"N={world_size} {name:16s} {r['error']}", flush=True)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(results, indent=1))


def main():
    args = parse_args()
    device = setup_distributed(args.timeout, args.device)
    try:
        run_experiments(args, device)
    except BaseException:
        dist.destroy_process_group()  # no barrier here: the other ranks may be gone
        raise
    clean_exit()


if __name__ == "__main__":
    main()
