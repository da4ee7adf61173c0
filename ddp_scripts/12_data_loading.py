"""12 · Data loading under DDP: DataLoader workers on every rank, each rank × worker seeded apart,
persistent_workers, when loading in workers overlaps the training step (loading that waits, loading
that computes) and when the cores forbid it, and pin_memory on CUDA.

    torchrun --standalone --nproc_per_node=2 12_data_loading.py [--workers 2] [--out report.json]
    python 12_data_loading.py      # also works: a world of one process

One launch. Every rank reads its shard of lesson 04's images through a Dataset that augments each image
at random on every read, then pays a known cost for it: --item-ms of its thread's CPU time (standing for
decoding and resizing) or, in the I/O-like runs, --item-wait-ms asleep (a disk or network read, which
waits without using a core). In the overlap runs each batch is stamped with time.monotonic() once collated:
  seeding      which augmentations each (rank, worker) draws in --epochs epochs: seeded as every DDP
               script seeds (torch.manual_seed(seed) on every rank), then with a DataLoader generator
               seeded apart on every rank (the fix), then the fix with persistent_workers;
  overlap      0 and --workers workers per process: CPU-cost loading with rank 0 alone loading and then
               every rank, and wait-cost loading on every rank; each batch is followed by a training-step
               stand-in of --step-ms CPU time in the main process. Every configuration is warmed up (its
               workers start), then timed over --rounds passes, interleaved (A B C A B C ...). Each pass
               records its seconds, when the main process asked for each batch and how long it waited,
               whether the batch was ready before it asked, which process ran each __getitem__, and the
               main process's CPU time;
  pinned       on CUDA only: batches in pinned memory, copied to the GPU with non_blocking=True.
Rank 0 gathers every rank's records, prints a summary and writes them all to --out.

Devices: NCCL and one GPU per process where CUDA has a GPU for every process on the machine, gloo
and the CPU otherwise or with --device cpu (choose_device). Run by this series' tests on the CPU with
gloo, 1 to 3 processes; the GPU path is checked by tools/gpu_check.py (README, "Verified on").

Written by notebooks/12_real_data.ipynb — edit it there.
"""

import argparse
import collections
import datetime
import gc
import json
import math
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, TensorDataset, default_collate, get_worker_info
from torch.utils.data.distributed import DistributedSampler

try:
    import numpy as np  # optional: where it is installed, DataLoader seeds numpy in every worker too
except ImportError:
    np = None


def spend_cpu(milliseconds):
    """Keep this thread busy for `milliseconds` of its own CPU time: a cost known in advance. On a busy
    machine it takes longer on the clock, but never less than this."""
    end = time.thread_time() + milliseconds / 1000
    while time.thread_time() < end:
        pass


class RandomlyAugmented(Dataset):
    """Lesson 04's images, flipped, shifted and brightened at random on every read, then `item_ms` of CPU
    time spent on each and `wait_ms` asleep (a read that waits for a disk or the network, using no core).
    Each sample also says what was drawn (flip, dx, dy, gain, and one numpy number) and who drew it (the
    worker id, -1 in the main process; its pid; the seed DataLoader gave the worker).

    In a DataLoader worker, torch's and `random`'s RNGs are seeded with base_seed + worker id, numpy's with
    _generate_state(base_seed, worker id) (torch/utils/data/_utils/worker.py); base_seed is drawn from the
    main process's RNG, or from the DataLoader's generator=, each time an iterator starts."""

    def __init__(self, images, item_ms=0.0, wait_ms=0.0):
        self.images, self.item_ms, self.wait_ms = images, item_ms, wait_ms

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        image, label = self.images[index]
        flip = torch.rand(()).item() < 0.5
        dx, dy = torch.randint(-4, 5, (2,)).tolist()
        gain = torch.empty((), dtype=torch.float64).uniform_(0.8, 1.2).item()  # 53 random bits: no repeats by chance
        image = torch.roll(image.flip(2) if flip else image, (dy, dx), dims=(1, 2)) * gain
        spend_cpu(self.item_ms)  # decoding, resizing, ... in a real pipeline
        if self.wait_ms:
            time.sleep(self.wait_ms / 1000)  # reading from a disk or the network: waiting, no CPU
        worker = get_worker_info()  # None in the main process
        drawn_by = torch.tensor([-1, os.getpid(), -1] if worker is None else [worker.id, os.getpid(), worker.seed])
        numpy_draw = float(np.random.random()) if np is not None else math.nan
        return image, label, torch.tensor([flip, dx, dy, gain], dtype=torch.float64), drawn_by, numpy_draw


def record_streams(dataset, args, rank, generator, persistent):
    """--epochs epochs over this rank's shard with --workers workers: one row per (epoch, worker), with the
    worker's pid and seed and what it drew, in the order it drew it."""
    sampler = DistributedSampler(dataset, shuffle=True, seed=args.seed)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, num_workers=args.workers,
                        generator=generator, persistent_workers=persistent)
    streams = {}
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for _, _, augmentations, drawn_by, numpy_draws in loader:
            for augmentation, (worker, pid, seed), numpy_draw in zip(augmentations.tolist(), drawn_by.tolist(),
                                                                    numpy_draws.tolist()):
                stream = streams.setdefault((epoch, worker, pid), dict(seed=seed, augmentations=[], numpy=[]))
                stream["augmentations"].append(augmentation)
                stream["numpy"].append(None if math.isnan(numpy_draw) else numpy_draw)
    return [dict(rank=rank, epoch=epoch, worker=worker, pid=pid, **stream)
            for (epoch, worker, pid), stream in streams.items()]


def seeding_runs(dataset, args, rank):
    """The seeding bug, its fix, and the fix with persistent_workers: three runs of record_streams."""
    torch.manual_seed(args.seed)  # as every DDP script does, for the same initial weights on every rank ...
    same_seed = record_streams(dataset, args, rank, generator=None, persistent=False)  # ... and the same workers
    # The fix: the loader's own RNG, seeded apart on every rank. Each epoch's iterator draws its workers'
    # base seed from it, so ranks, workers and epochs all differ, and a rerun repeats them.
    per_rank_seed = record_streams(dataset, args, rank, torch.Generator().manual_seed(args.seed + 1000 * rank),
                                   persistent=False)
    persistent = record_streams(dataset, args, rank, torch.Generator().manual_seed(args.seed + 1000 * rank),
                                persistent=True)
    return dict(same_seed=same_seed, per_rank_seed=per_rank_seed, persistent_workers=persistent)


def collate_and_stamp(samples):
    """DataLoader's default collate, then the moment the batch was ready: time.monotonic(), one clock for
    every process of the machine, so that the main process can tell whether a worker finished the batch
    before it asked for it. Without workers this runs in the main process, after it asked."""
    return (*default_collate(samples), time.monotonic())


def training_step_stand_in(images, milliseconds):
    """The main process's share of a training step: `milliseconds` of CPU time (Python, the optimizer, kernel
    launches). On a GPU it also gives the GPU the batch to work on, queued after the batch's copy."""
    if images.is_cuda:
        images.square().sum()  # on the stream the copy was queued on: it runs after the copy lands
    spend_cpu(milliseconds)


def one_pass(loader, args, device):
    """One pass over `loader`, each batch followed by the step's stand-in: the pass's seconds (and when it
    started and ended, on the machine's monotonic clock, so that ranks' passes can be lined up), the seconds to
    its first batch (worker start-up or resumption included), the seconds the main process waited for each
    batch and that batch's size, whether each batch was ready (collated) before the main process asked for
    it, how many samples each pid loaded, the main process's CPU seconds, and whether every batch arrived in
    pinned memory."""
    waits, sizes, ready_first, loaded_by, pinned = [], [], [], collections.Counter(), True
    cpu_started, started = time.process_time(), time.monotonic()
    first_batch_at = None
    batches = iter(loader)  # the first pass of a persistent loader starts its workers here, later ones resume them
    while True:
        asked = time.monotonic()
        batch = next(batches, None)
        if batch is None:
            break
        waits.append(time.monotonic() - asked)  # without workers: the loading itself
        first_batch_at = first_batch_at or time.monotonic()
        images, _, _, drawn_by, _, ready = batch
        ready_first.append(ready < asked)  # an ordering fact: collated before the main process asked for it
        sizes.append(len(images))
        loaded_by.update(drawn_by[:, 1].tolist())
        pinned = pinned and images.is_pinned()
        # GPU only: from pinned memory the copy is asynchronous, and the step's kernels queue behind it
        images = images.to(device, non_blocking=device.type == "cuda")
        training_step_stand_in(images, args.step_ms)
    if device.type == "cuda":
        torch.cuda.synchronize()  # every copy and kernel of the pass has finished
    ended = time.monotonic()
    return dict(seconds=ended - started, started=started, ended=ended, cpu_seconds=time.process_time() - cpu_started,
                first_batch_seconds=first_batch_at - started,
                waits=waits, batch_sizes=sizes, ready_before_asked=ready_first, pinned=pinned,
                loaded_by={str(pid): n for pid, n in loaded_by.items()})


def measure_overlap(datasets, args, rank, world_size, device):
    """Every (cost, loading ranks, workers) configuration, each with 0 and --workers workers: CPU-cost loading
    with 1 rank alone (the others wait at a barrier) and with every rank, wait-cost loading with every rank.
    Round 0 warms each configuration up (its persistent workers start there); rounds 1 to --rounds are timed,
    the configurations interleaved so that a busy moment of the machine hits them all alike. Returns this
    rank's rows, one per (round, configuration)."""
    configurations = [("cpu", loaders, workers) for loaders in sorted({1, world_size}) for workers in (0, args.workers)]
    configurations += [("wait", world_size, workers) for workers in (0, args.workers)]
    loaders_of, warned = {}, {}
    for cost, loaders, workers in configurations:
        dataset = datasets[cost]
        if rank < loaders:
            with warnings.catch_warnings(record=True) as caught:  # DataLoader checks the worker count as it is built
                warnings.simplefilter("always")
                loaders_of[cost, loaders, workers] = DataLoader(
                    dataset, batch_size=args.batch_size, num_workers=workers, persistent_workers=workers > 0,
                    collate_fn=collate_and_stamp,
                    sampler=DistributedSampler(dataset, num_replicas=loaders, rank=rank, shuffle=False),
                    drop_last=True,  # every batch full: each costs exactly batch_size x the item's cost
                    pin_memory=device.type == "cuda")  # GPU only: a thread pins each batch
            warned[cost, loaders, workers] = any("worker processes" in str(w.message) for w in caught)
    rows = []
    for round_ in range(args.rounds + 1):
        for cost, loaders, workers in configurations:
            dist.barrier()  # the configuration starts on every rank together
            if rank < loaders:
                row = one_pass(loaders_of[cost, loaders, workers], args, device)
                row.update(warned=warned[cost, loaders, workers])
            else:  # waits for the loading ranks at the barrier below: is that wait free?
                cpu_started, started = time.process_time(), time.monotonic()
            dist.barrier()
            if rank >= loaders:
                row = dict(idle_seconds=time.monotonic() - started,
                           idle_cpu_seconds=time.process_time() - cpu_started)
            rows.append(dict(round=round_, cost=cost, loaders=loaders, workers=workers, rank=rank, pid=os.getpid(),
                             **row))
    return rows


def summarise(rows):
    """Per configuration, over the timed rounds: milliseconds per batch of the job (from the first loading
    rank's start to the last one's end, over the batches of one rank: no configuration can run faster than
    its CPU demand allows) and the main process's wait per batch after the first (whose wait includes the
    workers' resumption, slowest loading rank), as median, min and max over the rounds; and how many batches
    of all timed passes were ready before the main process asked for them."""
    table = []
    for cost, loaders, workers in dict.fromkeys((r["cost"], r["loaders"], r["workers"]) for r in rows):
        timed = [r for r in rows if (r["cost"], r["loaders"], r["workers"]) == (cost, loaders, workers)
                 and r["round"] > 0 and r["rank"] < loaders]
        per_round = collections.defaultdict(list)
        for r in timed:
            per_round[r["round"]].append(r)
        ms_per_batch = [1000 * (max(r["ended"] for r in rs) - min(r["started"] for r in rs)) / len(rs[0]["waits"])
                        for rs in per_round.values()]
        wait_ms = [1000 * max(statistics.mean(r["waits"][1:] or r["waits"]) for r in rs) for rs in per_round.values()]
        table.append(dict(cost=cost, loaders=loaders, workers=workers,
                          ms_per_batch=spread(ms_per_batch), wait_ms_per_batch=spread(wait_ms),
                          ready_before_asked=sum(sum(r["ready_before_asked"]) for r in timed),
                          batches=sum(len(r["ready_before_asked"]) for r in timed)))
    return table


def spread(values):
    """The median of some values, their range, and the values themselves in round order: a comparison of two
    configurations pairs their values round by round (the rounds are interleaved)."""
    return dict(median=statistics.median(values), min=min(values), max=max(values), n=len(values),
                per_round=list(values))


def print_summary(report):
    cores = report["usable_cores"]
    print(f"{report['world_size']} process(es) on {cores} usable cores ({report['cpu_count']} on the machine), "
          f"load average {report['load_average']}, torch threads per process "
          f"{sorted({r['torch_threads'] for r in report['ranks']})}, workers started by {report['start_method']}")
    for name, rows in report["seeding"].items():
        distinct = len({json.dumps(row["augmentations"]) for row in rows})
        print(f"{name:>18}: {len(rows)} (rank, epoch, worker) streams, {distinct} distinct")
    overlap = report["overlap"]
    print(f"each sample costs {overlap['item_ms']} ms of CPU (cost cpu) or {overlap['item_wait_ms']} ms asleep "
          f"(cost wait) to load, each step {overlap['step_ms']} ms of CPU; median [min-max] over "
          f"{overlap['rounds']} interleaved rounds:")
    print("cost  loaders  workers  ms per batch          waited, ms per batch   ready before asked")
    for row in overlap["summary"]:
        t, w = row["ms_per_batch"], row["wait_ms_per_batch"]
        print(f"{row['cost']:4}  {row['loaders']:7}  {row['workers']:7}  {t['median']:6.2f} "
              f"[{t['min']:.2f}-{t['max']:.2f}]  {w['median']:6.2f} [{w['min']:.2f}-{w['max']:.2f}]   "
              f"{row['ready_before_asked']}/{row['batches']}", flush=True)


def measure(args, device):
    """Every rank measures; rank 0 gathers all the records, prints a summary and writes --out."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    # One thread per process, as DataLoader sets in each worker (and torchrun, through OMP_NUM_THREADS, when it
    # starts more than one process): then processes x (1 + workers) counts every thread that computes.
    torch.set_num_threads(1)
    load_average = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
    images, _ = make_datasets(args.dataset_size, num_classes=10, seed=args.seed)
    records = dict(rank=rank, pid=os.getpid(), torch_threads=torch.get_num_threads(),
                   seeding=seeding_runs(RandomlyAugmented(images), args, rank),  # the draws alone, no cost
                   overlap=measure_overlap(dict(cpu=RandomlyAugmented(images, item_ms=args.item_ms),
                                                wait=RandomlyAugmented(images, wait_ms=args.item_wait_ms)),
                                           args, rank, world_size, device))
    gathered = [None] * world_size
    dist.all_gather_object(gathered, records)  # every rank's records, in rank order
    if rank != 0:
        return
    usable_cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    overlap_rows = [row for r in gathered for row in r["overlap"]]
    report = dict(
        world_size=world_size, backend=dist.get_backend(), device=str(device), cpu_count=os.cpu_count(),
        usable_cores=usable_cores, load_average=load_average, start_method=multiprocessing.get_start_method(),
        numpy=np is not None, workers=args.workers, epochs=args.epochs, batch_size=args.batch_size,
        dataset_size=args.dataset_size, seed=args.seed,
        ranks=[dict(rank=r["rank"], pid=r["pid"], torch_threads=r["torch_threads"]) for r in gathered],
        seeding={name: [row for r in gathered for row in r["seeding"][name]] for name in gathered[0]["seeding"]},
        overlap=dict(item_ms=args.item_ms, item_wait_ms=args.item_wait_ms, step_ms=args.step_ms, rounds=args.rounds,
                     rows=overlap_rows, summary=summarise(overlap_rows)))
    print_summary(report)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=positive_int, default=2,
                        help="DataLoader workers per process (the timings try 0 and this many)")
    parser.add_argument("--epochs", type=positive_int, default=2, help="epochs of the seeding runs")
    parser.add_argument("--batch-size", type=positive_int, default=8, help="per process")
    parser.add_argument("--dataset-size", type=positive_int, default=64, help="images")
    parser.add_argument("--item-ms", type=positive_float, default=0.5,
                        help="CPU milliseconds each __getitem__ spends (decoding, resizing, ... in a real pipeline)")
    parser.add_argument("--item-wait-ms", type=positive_float, default=0.5,
                        help="milliseconds each __getitem__ of the I/O-like runs sleeps (a disk or network read)")
    parser.add_argument("--step-ms", type=positive_float, default=4.0,
                        help="CPU milliseconds the main process spends on each batch (its share of a training step)")
    parser.add_argument("--rounds", type=positive_int, default=5,
                        help="timed passes of each configuration (5: all rounds agree by chance 1 time in 16)")
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument("--device", choices=["auto", "cpu"], default="auto",
                        help="auto: NCCL and one GPU per process where CUDA exists, else gloo and the CPU; "
                             "cpu: gloo and the CPU")
    parser.add_argument("--timeout", type=positive_float, default=60.0, help="seconds a collective may wait")
    parser.add_argument("--out", type=writable_file, help="rank 0 writes every rank's records to this JSON file")
    args = parser.parse_args()
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    if args.dataset_size < args.batch_size * world_size:
        parser.error(f"--dataset-size must be at least --batch-size x {world_size} process(es): a full batch per rank")
    return args


def main():
    args = parse_args()
    device = setup_distributed(args.timeout, args.device)
    try:
        measure(args, device)
    except BaseException:
        dist.destroy_process_group()  # no barrier here: the other ranks may be gone
        raise
    clean_exit()


# ---- Plumbing shared with lesson 04's script (explained there): arguments, data, device, process group, exit ----

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


if __name__ == "__main__":
    main()
