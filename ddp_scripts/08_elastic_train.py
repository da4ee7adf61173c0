"""08 · Elastic DDP training: a complete snapshot every epoch, resumed after a restart, nothing lost.

    torchrun --standalone --nproc_per_node=2 --max-restarts=1 08_elastic_train.py --snapshot-dir snap \
        --fail-at-step 12 --fail-rank 1      # rank 1 fails once at step 12; torchrun restarts everyone
    torchrun --standalone --nproc_per_node=2 08_elastic_train.py --snapshot-dir snap --signal-at-step 12
                                              # preempted at step 12; the same command again resumes there
    python 08_elastic_train.py --epochs 3     # also works: a world of one process

Preemption. SLURM warns a job before it stops it with a signal: `sbatch --signal=USR1@120` sends SIGUSR1
120 s before the time limit, `scancel --signal=USR1 JOBID` sends it now. The handler only sets a flag; at
the next step boundary every rank learns, in one small all-reduce, whether any rank got the signal (it
may reach only some), then rank 0 saves a snapshot as it does every epoch, with the position inside the
epoch, logs {"event": "preempted", "attempt": A, "epoch": E, "step": S} to events.jsonl, prints
"preempted at epoch E step S: snapshot saved, exit to be requeued", and every rank exits with code 0. The
same command (same --snapshot-dir and settings), e.g. in the requeued job, resumes at step S, bit for bit
as if never stopped (2 processes on the CPU; more: to float32 rounding, lesson 08). Why 0: the work is
safe, so this is no failure; a non-zero exit would make torchrun restart the workers (--max-restarts)
inside an allocation about to end and print a failure report, and SLURM requeues a job (scontrol
requeue, or its preemption policy) whatever its exit code. What tells a preempted run from a finished
one: the last line of events.jsonl ("preempted" or "finish"), and --out, written only by a finished run.
Who gets the signal: started by `srun` directly (one task per process, RANK / LOCAL_RANK / WORLD_SIZE set
from SLURM_PROCID / SLURM_LOCALID / SLURM_NTASKS, MASTER_ADDR / MASTER_PORT: lesson 10) every process
gets it. torchrun's agent (torch 2.13) handles only --signals-to-handle (default
SIGTERM,SIGINT,SIGHUP,SIGQUIT): a SIGUSR1 sent to the agent alone kills it by default and does not reach
the workers (they run in sessions of their own); a cluster may signal every process of the step
(lesson 10). With --signals-to-handle=SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1 the agent
sends it on to every worker and waits up to --shutdown-timeout (30 s) for them; they save and exit 0, and
torchrun itself then exits non-zero (SignalException).

Devices: NCCL and one GPU per process where CUDA has a GPU for every process on the machine, gloo
and the CPU otherwise or with --device cpu (choose_device). Run by this series' tests on the CPU with
gloo, 1 to 3 processes; the GPU path is checked by tools/gpu_check.py (README, "Verified on").

Written by notebooks/08_fault_tolerance.ipynb — edit it there.
"""

import argparse
import datetime
import gc
import hashlib
import itertools
import json
import math
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.elastic.multiprocessing.errors import record
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


def step_or_never(text):
    """An argparse type: -1 (never) or a global step number, 0 or more."""
    value = int(text)
    if value < -1:
        raise argparse.ArgumentTypeError(f"must be -1 (never) or a step number, got {text}")
    return value


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=positive_int, default=3)
    parser.add_argument("--batch-size", type=positive_int, default=32, help="per process")
    parser.add_argument("--dataset-size", type=positive_int, default=1024, help="training samples")
    parser.add_argument("--num-classes", type=class_count, default=10)
    parser.add_argument("--lr", type=positive_float, default=0.01)
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument("--device", choices=["auto", "cpu"], default="auto",
                        help="auto: NCCL and one GPU per process where CUDA exists, else gloo and the CPU; "
                             "cpu: gloo and the CPU")
    parser.add_argument("--timeout", type=positive_float, default=60.0, help="seconds a collective may wait")
    parser.add_argument("--snapshot-dir", type=writable_folder, default="snapshot",
                        help="where snapshot.pt lives; storage that every node can read")
    parser.add_argument("--fail-at-step", type=step_or_never, default=-1,
                        help="inject a fault (once) before this global step; -1: never")
    parser.add_argument("--fail-rank", type=int, default=1, help="the global rank that fails")
    parser.add_argument("--signal-at-step", type=positive_int,
                        help="a preemption drill: the last rank sends itself SIGUSR1 before this global step, "
                             "in a run that reaches the step (not in one resumed there)")
    parser.add_argument("--pause-at-step", type=positive_int,
                        help="a drill: before this global step every rank logs its pid to events.jsonl and "
                             "waits, up to --timeout seconds, for a SIGUSR1 sent to any rank")
    parser.add_argument("--out", type=writable_file, help="rank 0 writes the metrics and a parameter hash here")
    args = parser.parse_args()
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    if args.fail_at_step >= 0 and not 0 <= args.fail_rank < world_size:
        parser.error(f"--fail-rank must be a rank of this run (0..{world_size - 1}), got {args.fail_rank}")
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
    """Join the process group: NCCL and one GPU per process, or gloo and the CPU. Restart-safe."""
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
    if "RANK" not in os.environ:  # plain `python`: a group of one, no network needed
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout,
                                device_id=bound)
    elif os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        # A WORKAROUND for torchrun's shared store (torch 2.13; upstream: pytorch/pytorch#135712). The
        # agent of rendezvous rank 0 creates the workers' TCPStore once and hands the same one to every
        # attempt (DynamicRendezvousHandler.next_rendezvous in torch/distributed/elastic/rendezvous/
        # dynamic_rendezvous.py keeps it in _shared_tcp_store_server), so the failed attempt's addresses
        # are still in it and a restarted worker may read them ("Gloo connectFullMesh failed ...
        # Connection refused"). Give every attempt its own keys. That holds where every agent counts the
        # same restarts: on one node, or where every node's workers fail together. The count is each agent's
        # own (failures only), and an agent whose workers are healthy re-joins without counting (for a
        # new node, or after another node's failure: agent/server/api.py, _invoke_run), so across nodes
        # the prefixes can differ and the group does not form (lesson 08, at a restart). With several nodes,
        # launch with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: a fresh store per attempt (the `else` below).
        attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
        if int(os.environ.get("GROUP_WORLD_SIZE", 1)) > 1 and os.environ["RANK"] == "0":
            print(f"{Path(sys.argv[0]).name}: warning: {os.environ['GROUP_WORLD_SIZE']} nodes on torchrun's shared "
                  "store, keys per attempt from TORCHELASTIC_RESTART_COUNT, which each node counts on its own: "
                  "after a restart the group may not form; launch with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 "
                  "(pytorch/pytorch#135712)", file=sys.stderr, flush=True)
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                              is_master=False, timeout=timeout)
        dist.init_process_group(backend, store=dist.PrefixStore(f"attempt_{attempt}", store),
                                rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]),
                                timeout=timeout, device_id=bound)
    else:  # e.g. TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: a fresh store per attempt already
        dist.init_process_group(backend, timeout=timeout, device_id=bound)
    return device


# What makes a run this run: a snapshot written with other values is refused, not mixed in.
# (--epochs may grow: training on for longer is a continuation. The world size may change: see restore.)
RUN_SETTINGS = ("dataset_size", "num_classes", "batch_size", "lr", "seed")
SNAPSHOT_KEYS = {"model", "optimizer", "epoch", "step", "rng", "history", "world_size", "settings", "in_epoch"}


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


def log_event(folder, **event):
    """Append one line to folder/events.jsonl: when an attempt starts, fails on purpose, is preempted or
    finishes. The log outlives the processes (like the snapshots), so the lesson can draw every attempt of
    a job."""
    with open(folder / "events.jsonl", "a") as log:
        log.write(json.dumps(event) + "\n")


def save_snapshot(folder, model, optimizer, epoch, step, history, device, settings, progress=None):
    """Everything needed to continue exactly: written by rank 0, atomically; the others wait. The
    previous snapshot is kept as snapshot.prev.pt, so one damaged file never blocks a restart. `epoch` is
    the epoch to continue with; `progress` (preempted mid-epoch) how far this rank got in it."""
    rng = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        rng["cuda"] = torch.cuda.get_rng_state(device)
    rng_per_rank = [None] * dist.get_world_size()
    dist.all_gather_object(rng_per_rank, rng)  # every rank's random stream, not only rank 0's
    in_epoch = None  # the snapshot of a finished epoch
    if progress is not None:  # stopped inside an epoch: the steps done in it, every rank's running totals
        progress_per_rank = [None] * dist.get_world_size()
        dist.all_gather_object(progress_per_rank, progress["totals"])
        in_epoch = dict(steps_done=progress["steps_done"], totals=progress_per_rank)
    if dist.get_rank() == 0:
        snapshot = dict(model=model.state_dict(), optimizer=optimizer.state_dict(), epoch=epoch, step=step,
                        rng=rng_per_rank, history=history, world_size=dist.get_world_size(), settings=settings,
                        in_epoch=in_epoch)
        path, tmp = folder / "snapshot.pt", folder / "snapshot.tmp"
        torch.save(snapshot, tmp)
        if path.exists():
            os.replace(path, folder / "snapshot.prev.pt")  # the last good one stays
        os.replace(tmp, path)  # atomic: a crash of the process leaves a whole snapshot (no fsync: not a power loss)
    dist.barrier()  # nobody runs ahead before the snapshot is written


def read_snapshot(folder, settings):
    """The newest valid snapshot in folder (on the CPU), or None to start fresh. Called before the process
    group forms, so a damaged file or another run's snapshot is a one-line error before any work."""
    damaged = []
    for path in (folder / "snapshot.pt", folder / "snapshot.prev.pt"):
        if not path.exists():
            continue
        try:
            snapshot = torch.load(path, map_location="cpu", weights_only=True)
            if not isinstance(snapshot, dict) or not SNAPSHOT_KEYS <= snapshot.keys():
                raise ValueError("not a snapshot of this script")
        except Exception as error:  # damaged, truncated, or not ours: try the one before it
            damaged.append(f"{path} ({why_unreadable(error)})")
            if os.environ.get("RANK", "0") == "0":
                print(f"not a valid snapshot: {damaged[-1]}"
                      + ("; trying the one before it" if path.name == "snapshot.pt" else ""), flush=True)
            continue
        changed = [f"--{k.replace('_', '-')} {snapshot['settings'].get(k)} there, {v} here"
                   for k, v in settings.items() if snapshot["settings"].get(k) != v]
        if changed:
            exit_with_error(f"{path} belongs to a run with other settings ({'; '.join(changed)}): "
                            f"pass the same ones, or start fresh with another --snapshot-dir")
        return snapshot
    if damaged:
        exit_with_error(f"no valid snapshot in {folder}: {', '.join(damaged)}; delete them or pass another "
                        "--snapshot-dir")
    return None


def restore(snapshot, model, optimizer, device):
    """Continue from a snapshot (or from scratch: None); returns (next epoch, global step, history, and
    this rank's progress in that epoch: None, or where a preempted run stopped in it)."""
    if snapshot is None:
        return 0, 0, [], None
    model.load_state_dict(snapshot["model"])
    optimizer.load_state_dict(snapshot["optimizer"])  # moves the momentum buffers to the model's device
    if snapshot["world_size"] == dist.get_world_size():  # same world: continue each rank's stream
        rng = snapshot["rng"][dist.get_rank()]
        torch.set_rng_state(rng["cpu"])
        if device.type == "cuda" and "cuda" in rng:
            torch.cuda.set_rng_state(rng["cuda"], device)
    elif dist.get_rank() == 0:  # an elastic restart with fewer or more processes: correct, not identical
        print(f"world size changed ({snapshot['world_size']} -> {dist.get_world_size()}): continuing from "
              f"epoch {snapshot['epoch']} with the new sharding and effective batch size; the data order and "
              "random streams differ from an uninterrupted run", flush=True)
    progress, in_epoch = None, snapshot["in_epoch"]
    if in_epoch is not None:  # preempted mid-epoch: continue this rank's running totals (another world: on rank 0)
        totals = in_epoch["totals"]
        if snapshot["world_size"] == dist.get_world_size():
            mine = totals[dist.get_rank()]
        else:
            mine = [sum(column) for column in zip(*totals)] if dist.get_rank() == 0 else [0.0, 0, 0]
        progress = dict(steps_done=in_epoch["steps_done"], totals=mine)
    return snapshot["epoch"], snapshot["step"], snapshot["history"], progress


def sum_over_ranks(*numbers, device):
    """Each number summed over all ranks in one all_reduce: every rank gets the same global totals."""
    totals = torch.tensor(numbers, dtype=torch.float64, device=device)
    dist.all_reduce(totals, op=dist.ReduceOp.SUM)
    return totals.tolist()


def stop_if_not_finite(loss, model, epoch, step):
    """Stop at the first nan or inf, before optimizer.step() writes it into the weights. One rank's nan
    is every rank's: backward all-reduced the gradients, so every rank stops here, at the same step."""
    checks = [loss.isfinite()] + [p.grad.isfinite().all() for p in model.parameters() if p.grad is not None]
    if not torch.stack(checks).all():  # one device sync per step, not one per parameter
        what = "loss" if not loss.isfinite() else "gradients (averaged over all ranks)"
        raise SystemExit(f"[rank {dist.get_rank()}] stopping: non-finite {what} at epoch {epoch}, step {step} "
                         f"(loss on this rank {loss.item():.4g}); try a smaller --lr")


class InjectedFault:
    """The demonstration: --fail-at-step K --fail-rank R makes rank R raise before global step K, once. A
    marker file in the snapshot folder remembers it, so the restarted attempt passes that step."""

    def __init__(self, step, rank, folder, attempt):
        self.step, self.folder, self.attempt = step, folder, attempt
        self.marker = folder / f"fault_injected_at_step_{step}"
        self.armed = step >= 0 and rank == dist.get_rank() and not self.marker.exists()

    def before_step(self, step, epoch):
        if self.armed and step == self.step:
            self.marker.touch()
            log_event(self.folder, event="fault", attempt=self.attempt, rank=dist.get_rank(), step=step)
            raise RuntimeError(f"injected fault: rank {dist.get_rank()} fails at step {step} (epoch {epoch})")


class PreemptionSignal:
    """SIGUSR1, SLURM's warning before it stops the job. The handler only sets a flag: Python runs it
    between two bytecodes of the main thread, maybe inside a collective or a torch.save, where starting
    another collective would deadlock or corrupt. The ranks act on it together, at a step boundary."""

    def __init__(self):
        self.received = False
        self.check_seconds, self.step_seconds = [], []  # the price of agreeing, measured: --out reports both
        signal.signal(signal.SIGUSR1, self.on_signal)  # before the group forms: a signal then is kept too

    def on_signal(self, signum, frame):
        self.received = True

    def agreed(self, device):
        """Did any rank get the signal? Every rank asks at every step boundary: one all-reduce of one number.
        Its time is kept (check_seconds) next to each whole step's (step_seconds), so every run measures the
        price. With NCCL (not measured here) it is also one device sync a step, as loss.item() is."""
        started = time.perf_counter()
        (ranks_signalled,) = sum_over_ranks(float(self.received), device=device)
        self.check_seconds.append(time.perf_counter() - started)
        return ranks_signalled > 0


class Preempted(Exception):
    """Raised at a step boundary once every rank knows that one got the signal: where this rank stopped."""

    def __init__(self, step, progress):
        super().__init__(f"preempted before global step {step}")
        self.step, self.progress = step, progress


class PreemptionDrill:
    """The demonstrations, in a run that reaches global step N (a run resumed at step N passes it):
    --signal-at-step N: the last rank sends itself SIGUSR1 before step N, the others get nothing;
    --pause-at-step N: every rank logs {"event": "paused", "rank": R, "pid": P, "step": N} and waits, up to
    --timeout seconds, for a SIGUSR1 from outside (kill -USR1 P, scancel --signal=USR1): no race with a
    run that would otherwise finish first."""

    def __init__(self, signal_at_step, pause_at_step, start_step, folder, timeout_s):
        self.signal_at_step = signal_at_step if signal_at_step and signal_at_step > start_step else None
        self.pause_at_step = pause_at_step if pause_at_step and pause_at_step > start_step else None
        self.folder, self.timeout_s = folder, timeout_s

    def before_step(self, step, preemption, device):
        if step == self.signal_at_step and dist.get_rank() == dist.get_world_size() - 1:
            signal.raise_signal(signal.SIGUSR1)  # the same handler as a real signal
        if step == self.pause_at_step:
            log_event(self.folder, event="paused", rank=dist.get_rank(), pid=os.getpid(), step=step)
            deadline = time.monotonic() + self.timeout_s
            while True:  # every rank loops the same number of times: the decision is all-reduced
                signalled, expired = sum_over_ranks(float(preemption.received), float(time.monotonic() > deadline),
                                                    device=device)
                if signalled:
                    return
                if expired:
                    raise SystemExit(f"[rank {dist.get_rank()}] paused at step {step}: no SIGUSR1 within "
                                     f"{self.timeout_s:g} s (--timeout)")
                time.sleep(0.05)


# Not 04's train_one_epoch: this loop must also count the global step (the snapshot stores it), add noise
# (augmentation, so that the random state matters), fail on purpose mid-epoch, before a given step, stop
# there when preempted, and continue an epoch a preempted run left half done.
def train_one_epoch_with_faults(model, loader, loss_fn, optimizer, device, epoch, step, fault, preemption,
                                drill, progress=None):
    """One pass over this rank's shard from global step `step` (or the rest of it: `progress`, from a
    snapshot); returns loss and accuracy averaged over all ranks, and the global step after the pass. Raises
    Preempted at the first step boundary after a rank got SIGUSR1."""
    model.train()
    steps_done, (total_loss, correct, seen) = (0, (0.0, 0, 0)) if progress is None else \
        (progress["steps_done"], progress["totals"])
    # the batches this epoch already trained on are read and dropped: cheap here (a large dataset would
    # skip them in the sampler); the shuffle is the same, a function of (seed, epoch)
    for images, labels in itertools.islice(loader, steps_done, None):
        started = time.perf_counter()
        drill.before_step(step, preemption, device)
        if preemption.agreed(device):
            raise Preempted(step, dict(steps_done=steps_done, totals=[total_loss, correct, seen]))
        fault.before_step(step, epoch)
        images, labels = images.to(device), labels.to(device)
        images = images + 0.05 * torch.randn_like(images)  # augmentation: needs the RNG state
        logits = model(images)
        loss = loss_fn(logits, labels)
        optimizer.zero_grad()
        loss.backward()  # DDP averages the gradients across ranks here
        stop_if_not_finite(loss, model, epoch, step)
        optimizer.step()
        step += 1
        steps_done += 1
        total_loss += loss.item() * len(labels)
        correct += (logits.argmax(1) == labels).sum().item()
        seen += len(labels)
        preemption.step_seconds.append(time.perf_counter() - started)  # the whole step, the check included
    total_loss, correct, seen = sum_over_ranks(total_loss, correct, seen, device=device)  # global numbers
    return total_loss / seen, correct / seen, step


def parameter_hash(model):
    digest = hashlib.sha256()
    for tensor in model.state_dict().values():
        digest.update(bytes(tensor.detach().cpu().contiguous().flatten().view(torch.uint8).tolist()))
    return digest.hexdigest()


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    correct, seen = 0, 0
    for images, labels in loader:
        correct += (model(images.to(device)).argmax(1) == labels.to(device)).sum().item()
        seen += len(labels)
    return correct / seen


def write_json(path, report):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1))


def train(args, settings, snapshot, device, preemption):
    """Continue from the snapshot (or start), save a snapshot after every epoch and when preempted, log
    every attempt."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0))  # 0, then 1 after a restart, ...
    torch.manual_seed(args.seed)  # the same initial weights everywhere
    train_set, val_set = make_datasets(args.dataset_size, args.num_classes, args.seed)
    sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed)
    # The loader's own generator: each epoch's iterator draws a seed (for worker processes) from it, not
    # from the augmentation's stream, so a snapshot taken mid-epoch holds that stream exactly.
    train_loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler,
                              generator=torch.Generator().manual_seed(args.seed))
    val_loader = DataLoader(val_set, batch_size=256)
    model = Model(args.num_classes).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    torch.manual_seed(args.seed + 1000 * rank)  # a different augmentation stream per rank
    start_epoch, step, history, progress = restore(snapshot, model, optimizer, device)
    ddp_model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    loss_fn = nn.CrossEntropyLoss()
    fault = InjectedFault(args.fail_at_step, args.fail_rank, args.snapshot_dir, attempt)
    drill = PreemptionDrill(args.signal_at_step, args.pause_at_step, step, args.snapshot_dir, args.timeout)
    if rank == 0:
        source = f"snapshot: epoch {start_epoch}, step {step}" if snapshot else "scratch"
        print(f"attempt {attempt}: {world_size} process(es), backend {dist.get_backend()}, "
              f"starting from {source}", flush=True)
        log_event(args.snapshot_dir, event="start", attempt=attempt, step=step, epoch=start_epoch)

    started = time.perf_counter()
    for epoch in range(start_epoch, args.epochs):
        sampler.set_epoch(epoch)  # the shuffle is a function of (seed, epoch): replayable
        try:
            loss, accuracy, step = train_one_epoch_with_faults(ddp_model, train_loader, loss_fn, optimizer,
                                                               device, epoch, step, fault, preemption, drill,
                                                               progress)
        except Preempted as stop:  # every rank is here, at the same step: save, and leave to be requeued
            save_snapshot(args.snapshot_dir, model, optimizer, epoch, stop.step, history, device, settings,
                          stop.progress)
            if rank == 0:
                log_event(args.snapshot_dir, event="preempted", attempt=attempt, epoch=epoch, step=stop.step)
                print(f"preempted at epoch {epoch} step {stop.step}: snapshot saved, exit to be requeued",
                      flush=True)
            return
        progress = None  # the next epoch starts at its beginning
        history.append(dict(epoch=epoch, attempt=attempt, loss=loss, accuracy=accuracy,
                            val_accuracy=evaluate(model, val_loader, device) if rank == 0 else None))
        save_snapshot(args.snapshot_dir, model, optimizer, epoch + 1, step, history, device, settings)
        if rank == 0:
            print(f"epoch {epoch}  step {step}  loss {loss:.4f}  accuracy {accuracy:.1%}  val accuracy "
                  f"{history[-1]['val_accuracy']:.1%}  (attempt {attempt}, snapshot saved)", flush=True)

    if rank == 0:
        log_event(args.snapshot_dir, event="finish", attempt=attempt, step=step, epoch=args.epochs)
    if rank == 0 and args.out:
        events = [json.loads(line) for line in (args.snapshot_dir / "events.jsonl").read_text().splitlines()]
        write_json(args.out, dict(
            world_size=world_size, backend=dist.get_backend(), attempt=attempt, resumed_from_epoch=start_epoch,
            steps=step, steps_per_epoch=len(train_loader), samples_per_rank=len(sampler),
            seconds=time.perf_counter() - started, params_sha256=parameter_hash(model),
            history=history, events=events, check_ms=[1000 * s for s in preemption.check_seconds],
            step_ms=[1000 * s for s in preemption.step_seconds]))


def clean_exit():
    """Leave the process group so that every rank exits 0. With gloo, a bare destroy_process_group() can
    abort the process ("terminate called without an active exception") after the work is done: collect
    what still holds the group (DDP's reducer), wait for every rank, then destroy."""
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


@record  # if this process dies of an exception, torchrun's failure report shows it
def main():
    args = parse_args()
    preemption = PreemptionSignal()  # first: from now on a SIGUSR1 is kept for the next step boundary
    settings = {name: getattr(args, name) for name in RUN_SETTINGS}
    snapshot = read_snapshot(args.snapshot_dir, settings)  # before any work: a bad file is an error now
    device = setup_distributed(args.timeout, args.device)
    if device.type == "cuda":  # bit for bit needs kernels that add in a fixed order: cuDNN's default choice
        torch.backends.cudnn.deterministic = True  # of convolution backward may not (lesson 08, "Bit for bit")
        torch.backends.cudnn.benchmark = False
    try:
        train(args, settings, snapshot, device, preemption)
    except BaseException:
        dist.destroy_process_group()  # no barrier here: the other ranks may be gone
        raise
    clean_exit()


if __name__ == "__main__":
    main()
