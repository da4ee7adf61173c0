"""05 · Rank-aware training: global metrics, rank-0 logs, atomic checkpoints with resume, exact evaluation.

    torchrun --standalone --nproc_per_node=2 05_rank_aware.py --epochs 2 --checkpoint ckpt.pt [--out run.json]
    python 05_rank_aware.py --epochs 2      # also works: a world of one process

Devices: NCCL and one GPU per process where CUDA has a GPU for every process on the machine, gloo
and the CPU otherwise or with --device cpu (choose_device). Run by this series' tests on the CPU with
gloo, 1 to 3 processes; the GPU path is checked by tools/gpu_check.py (README, "Verified on").

Written by notebooks/05_rank_aware.ipynb — edit it there.
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
import torch.nn as nn
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


def rank_or_none(text):
    """An argparse type: -1 (no rank) or a rank of this run, 0 .. WORLD_SIZE - 1."""
    value, world_size = int(text), int(os.environ.get("WORLD_SIZE", 1))
    if not -1 <= value < world_size:
        raise argparse.ArgumentTypeError(f"must be -1 (none) or a rank of this run (0..{world_size - 1}), got {text}")
    return value


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=positive_int, default=2, help="train until this many epochs are done")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="per process")
    parser.add_argument("--dataset-size", type=positive_int, default=256, help="training samples")
    parser.add_argument("--val-size", type=positive_int, default=101, help="validation samples")
    parser.add_argument("--num-classes", type=class_count, default=10)
    parser.add_argument("--lr", type=positive_float, default=0.01)
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument("--device", choices=["auto", "cpu"], default="auto",
                        help="auto: NCCL and one GPU per process where CUDA exists, else gloo and the CPU; "
                             "cpu: gloo and the CPU")
    parser.add_argument("--timeout", type=positive_float, default=60.0, help="seconds a collective may wait")
    parser.add_argument("--checkpoint", type=writable_file,
                        help="resume from this file if it exists; save to it each epoch")
    parser.add_argument("--post-log", action="store_true", help="also log like the source post: every rank, every step")
    parser.add_argument("--trap", action="store_true",
                        help="demonstrate the bug: a collective inside `if rank == 0:` when saving")
    parser.add_argument("--slow-save", type=positive_float,
                        help="demonstrate: rank 0 spends this many seconds more on each save (slow storage), "
                             "while the others wait at the barrier")
    parser.add_argument("--nan-rank", type=rank_or_none, default=-1,
                        help="demonstrate: this rank's loss turns nan at its second step (-1: never)")
    parser.add_argument("--out", type=writable_file, help="rank 0 writes what the run measured to this JSON file")
    args = parser.parse_args()
    if (args.trap or args.slow_save) and not args.checkpoint:
        parser.error(f"{'--trap' if args.trap else '--slow-save'} happens when saving: pass --checkpoint too")
    return args


def make_datasets(train_size, val_size, num_classes, seed):
    """Synthetic, learnable data: image = 0.1 * template[label] + noise. Same seed, same data."""
    generator = torch.Generator().manual_seed(seed)
    templates = torch.randn(num_classes, 3, 32, 32, generator=generator)
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


def mean_with_avg_op(value, device):
    """A demonstration: the mean of one number over all ranks with ReduceOp.AVG, the other way to average
    (this series sums with sum_over_ranks, then divides). NCCL has long had AVG, gloo only since 2025:
    where it is missing, this returns the error's first line instead."""
    try:
        mean = torch.tensor([value], dtype=torch.float64, device=device)
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        return mean.item()
    except (RuntimeError, ValueError) as error:
        return f"{type(error).__name__}: {error}".splitlines()[0]


def gather_from_every_rank(record):
    """Every rank's record (a small picklable object), in rank order, on every rank."""
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, record)
    return everyone


# What makes a run this run: a checkpoint written with other values is refused, not mixed in.
# (--epochs may grow: training on for longer is a continuation; so may the number of processes.)
RUN_SETTINGS = ("dataset_size", "val_size", "num_classes", "batch_size", "lr", "seed")


def exit_with_error(message, grace_s=15):
    """One line on stderr, exit code 2: bad input found before any work. Every rank finds the same, and
    rank 0 says it. The others first wait for torchrun to stop them once rank 0 has exited: a rank that
    exited first would get rank 0 stopped, perhaps before its line is out. A rank still running after
    the wait found a problem of its own (a file only it cannot read), and says so itself."""
    rank = int(os.environ.get("RANK", 0))
    if rank != 0:
        time.sleep(grace_s)
    who = "" if rank == 0 else f"[rank {rank}] "
    print(f"{Path(sys.argv[0]).name}: error: {who}{message}", file=sys.stderr, flush=True)
    sys.exit(2)


def why_unreadable(error):
    """A one-line reason. Never PyTorch's advice to retry with weights_only=False: that would run whatever
    code the file holds."""
    if isinstance(error, ValueError):  # our own check of the contents
        return str(error)
    if "weights only load failed" in str(error).lower():
        return "it holds objects that weights_only=True does not load"
    return f"damaged or cut short: {type(error).__name__}"


def save_checkpoint(path, model, optimizer, epoch, settings):
    """Global rank 0 only. Write to a temporary file, then rename: a crash of the process never leaves half a
    file. (Not a power loss: nothing calls fsync, so the data may not be on the disk yet.)"""
    state = dict(model=model.state_dict(), optimizer=optimizer.state_dict(), epoch=epoch, settings=settings,
                 world_size=dist.get_world_size())
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)  # atomic on POSIX and Windows


def read_checkpoint(path, settings):
    """The checkpoint to resume from (on the CPU), or None. Read before the process group forms, so a
    damaged file or another run's checkpoint is a one-line error before any work."""
    if path is None or not path.exists():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)  # load_state_dict copies to the device
        if not isinstance(state, dict) or not {"model", "optimizer", "epoch", "settings"} <= state.keys():
            raise ValueError("not a checkpoint of this script")
    except Exception as error:
        exit_with_error(f"not a valid checkpoint: {path} ({why_unreadable(error)}); delete it or pass another")
    changed = [f"--{k.replace('_', '-')} {state['settings'].get(k)} there, {v} here"
               for k, v in settings.items() if state["settings"].get(k) != v]
    if changed:
        exit_with_error(f"{path} belongs to a run with other settings ({'; '.join(changed)}): pass the same "
                        "ones, or start fresh with another --checkpoint")
    return state


def resume(state, model, optimizer):
    """Load the checkpoint (None: start from scratch) into model and optimizer; returns the epoch to start at.
    Every rank loads the same file, onto its own device, before the model is wrapped in DDP."""
    if state is None:
        return 0
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return state["epoch"] + 1


def stop_if_not_finite(loss, model, epoch, step):
    """Stop at the first nan or inf, before optimizer.step() writes it into the weights. One rank's nan
    is every rank's: backward all-reduced the gradients, so every rank stops here, at the same step."""
    checks = [loss.isfinite()] + [p.grad.isfinite().all() for p in model.parameters() if p.grad is not None]
    if not torch.stack(checks).all():  # one device sync per step, not one per parameter
        what = "loss" if not loss.isfinite() else "gradients (averaged over all ranks)"
        raise SystemExit(f"[rank {dist.get_rank()}] stopping: non-finite {what} at epoch {epoch}, step {step} "
                         f"(loss on this rank {loss.item():.4g}); try a smaller --lr")


def train_one_epoch(model, loader, loss_fn, optimizer, device, epoch):
    """One pass over this rank's shard; returns loss and accuracy averaged over all ranks."""
    model.train()
    total_loss, correct, seen = 0.0, 0, 0
    for step, (images, labels) in enumerate(loader):
        images, labels = images.to(device), labels.to(device)
        logits = model(images)
        loss = loss_fn(logits, labels)
        optimizer.zero_grad()
        loss.backward()  # DDP averages the gradients across ranks here
        stop_if_not_finite(loss, model, epoch, step)
        optimizer.step()
        total_loss += loss.item() * len(labels)
        correct += (logits.argmax(1) == labels).sum().item()
        seen += len(labels)
    total_loss, correct, seen = sum_over_ranks(total_loss, correct, seen, device=device)  # global numbers
    return total_loss / seen, correct / seen


def print_like_the_post(data_device, model, step, loss):
    """The --post-log demonstration: the source post's log, printed by every rank at every step."""
    print(f"data: {data_device}, model: {next(model.parameters()).device}\n"
          f"Step: {step}, Loss: {loss.item()}", flush=True)


class ShardLoss:
    """CrossEntropyLoss that also counts this rank's own loss and accuracy, the numbers a log of this rank
    alone would show (train_one_epoch returns those of all ranks). The lesson's per-step demonstrations
    hook in here too, so that the training loop stays 04's: --post-log and --nan-rank."""

    def __init__(self, model, post_log=False, nan_rank=-1):
        self.cross_entropy = nn.CrossEntropyLoss()
        self.model, self.post_log, self.nan_rank = model, post_log, nan_rank
        self.start_epoch()

    def start_epoch(self):
        self.step, self.total_loss, self.correct, self.seen = 0, 0.0, 0, 0

    def __call__(self, logits, labels):
        loss = self.cross_entropy(logits, labels)
        if dist.get_rank() == self.nan_rank and self.step == 1:  # the demonstration: one rank's loss turns nan
            loss = loss * float("nan")
        if self.post_log:
            print_like_the_post(labels.device, self.model, self.step, loss)
        self.total_loss += loss.item() * len(labels)
        self.correct += (logits.argmax(1) == labels).sum().item()
        self.seen += len(labels)
        self.step += 1
        return loss

    def this_ranks_numbers(self):
        return dict(loss=self.total_loss / self.seen, accuracy=self.correct / self.seen)


@torch.no_grad()
def correct_per_sample(model, dataset, indices, device):
    """1 where the model is right on dataset[i], 0 where it is wrong, for each i in indices."""
    model.eval()
    results = [torch.zeros(0, dtype=torch.int64, device=device)]
    for chunk in torch.split(torch.as_tensor(indices, dtype=torch.int64), 256):
        images, labels = dataset[chunk]
        results.append((model(images.to(device)).argmax(1) == labels.to(device)).long())
    return torch.cat(results)


def evaluate_three_ways(model, val_set, device):
    """Correct predictions on the validation set, counted three ways; only the last two are exact."""
    rank, world_size, n = dist.get_rank(), dist.get_world_size(), len(val_set)
    # 1. DistributedSampler pads: it repeats indices until every rank has the same number.
    padded = torch.tensor(list(DistributedSampler(val_set, shuffle=False)), device=device)
    correct = correct_per_sample(model, val_set, padded.tolist(), device)
    naive = sum_over_ranks(correct.sum().item(), len(correct), device=device)
    # 2. Gather (index, correct) from every rank, and count each index once.
    all_indices = [torch.empty_like(padded) for _ in range(world_size)]
    all_correct = [torch.empty_like(correct) for _ in range(world_size)]
    dist.all_gather(all_indices, padded)
    dist.all_gather(all_correct, correct)
    unique = dict(zip(torch.cat(all_indices).tolist(), torch.cat(all_correct).tolist()))
    # 3. Shard without padding: rank r takes r, r + N, r + 2N, ... (shards may differ in size by one).
    mine = correct_per_sample(model, val_set, range(rank, n, world_size), device)
    exact = sum_over_ranks(mine.sum().item(), len(mine), device=device)
    return dict(
        padded=dict(correct=int(naive[0]), samples=int(naive[1])),
        gathered=dict(correct=sum(unique.values()), samples=len(unique)),
        unpadded=dict(correct=int(exact[0]), samples=int(exact[1])))


def evaluate_on_rank_0_only(model, val_set, device):
    """The --trap demonstration, WRONG on purpose: rank 0 alone calls evaluate_three_ways(), whose
    collectives the other ranks never join. Rank 0 waits in them, the others at the barrier, until
    --timeout ends it."""
    print("[rank 0] computing the validation accuracy for the checkpoint...", flush=True)
    evaluate_three_ways(model, val_set, device)


def save_to_slow_storage(seconds):
    """The --slow-save demonstration: correct code, slow storage. Rank 0 takes this much longer to save,
    and the other ranks wait at the barrier meanwhile (at most --timeout)."""
    print(f"[rank 0] saving takes {seconds:g} s (slow storage)...", flush=True)
    time.sleep(seconds)


def checkpoint_epoch(args, model, optimizer, epoch, settings, val_set, device):
    """Global rank 0 saves; every rank waits at the barrier, so nobody reads or overwrites the checkpoint
    before it is complete (the barrier waits at most --timeout)."""
    if dist.get_rank() == 0:
        if args.trap:
            evaluate_on_rank_0_only(model, val_set, device)  # ddp-doctor: ignore[DDP011] the --trap demonstration
        if args.slow_save:
            save_to_slow_storage(args.slow_save)
        save_checkpoint(args.checkpoint, model, optimizer, epoch, settings)
    dist.barrier()


def evaluate_and_report(args, model, val_set, device, training):
    """Every rank evaluates (the counts take collectives); rank 0 adds the count of one process that sees
    all the data, prints them, and writes what the run measured to --out."""
    val_accuracy = evaluate_three_ways(model, val_set, device)
    if dist.get_rank() == 0:
        reference = correct_per_sample(model, val_set, range(len(val_set)), device)  # one process, all data
        val_accuracy["single_process"] = dict(correct=int(reference.sum()), samples=len(reference))
        print("[rank 0] validation accuracy: " + ", ".join(f"{name} {r['correct']}/{r['samples']}"
                                                           for name, r in val_accuracy.items()), flush=True)
        if args.out:
            report = dict(world_size=dist.get_world_size(), backend=dist.get_backend(), device=str(device),
                          **training, val_accuracy=val_accuracy)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(report, indent=1))


def train(args, settings, state, device):
    """Resume or start, train with a log from rank 0 and a checkpoint each epoch, then evaluate."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    train_set, val_set = make_datasets(args.dataset_size, args.val_size, args.num_classes, args.seed)
    sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)
    model = Model(args.num_classes).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    start_epoch = resume(state, model, optimizer)
    ddp_model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    loss_fn = ShardLoss(ddp_model, post_log=args.post_log, nan_rank=args.nan_rank)
    if rank == 0:
        print(f"[rank 0] {world_size} process(es), backend {dist.get_backend()}, "
              + (f"resuming at epoch {start_epoch}" if start_epoch else "starting from scratch"), flush=True)

    history, orders = [], {}
    for epoch in range(start_epoch, args.epochs):
        started = time.perf_counter()
        sampler.set_epoch(epoch)  # a new shuffle each epoch
        order = list(sampler)  # the indices this rank will train on, in order (the loader draws the same)
        loss_fn.start_epoch()
        loss, accuracy = train_one_epoch(ddp_model, train_loader, loss_fn, optimizer, device, epoch)  # over all ranks
        if args.post_log:
            print(f"Epoch {epoch} Finished !", flush=True)  # ddp-doctor: ignore[DDP006] the post's log (--post-log)
        mine = loss_fn.this_ranks_numbers()  # this rank's shard alone: what the post's log shows
        avg_op_loss = mean_with_avg_op(mine["loss"], device)  # the same mean with ReduceOp.AVG, to compare
        everyone = gather_from_every_rank(dict(mine, order=order))
        orders[epoch] = [e.pop("order") for e in everyone]
        if args.checkpoint:
            checkpoint_epoch(args, model, optimizer, epoch, settings, val_set, device)
        if rank == 0:  # one log line per epoch, with numbers that describe all ranks
            history.append(dict(epoch=epoch, loss=loss, accuracy=accuracy, avg_op_loss=avg_op_loss,
                                ranks=everyone, seconds=time.perf_counter() - started))
            print(f"[rank 0] epoch {epoch}  loss {loss:.4f} (rank 0 alone: {mine['loss']:.4f})  "
                  f"accuracy {accuracy:.1%} (rank 0 alone: {mine['accuracy']:.1%})", flush=True)

    evaluate_and_report(args, model, val_set, device, dict(start_epoch=start_epoch, history=history, orders=orders))


def clean_exit():
    """Leave the process group so that every rank exits 0. With gloo, a bare destroy_process_group() can
    abort the process ("terminate called without an active exception") after the work is done: collect
    what still holds the group (DDP's reducer), wait for every rank, then destroy."""
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


def main():
    args = parse_args()
    settings = {name: getattr(args, name) for name in RUN_SETTINGS}
    state = read_checkpoint(args.checkpoint, settings)  # before any work: a bad file is an error now
    device = setup_distributed(args.timeout, args.device)
    try:
        train(args, settings, state, device)
    except BaseException:
        dist.destroy_process_group()  # no barrier here: the other ranks may be gone
        raise
    clean_exit()


if __name__ == "__main__":
    main()
