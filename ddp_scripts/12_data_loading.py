"""12 · Data loading under DDP: DataLoader workers × processes against the cores, every rank × worker
seeded apart, persistent_workers, and pin_memory on CUDA.

    torchrun --standalone --nproc_per_node=2 12_data_loading.py [--workers 2] [--out report.json]
    python 12_data_loading.py      # also works: a world of one process

One launch, each rank reading its shard of lesson 04's images, randomly augmented on every read:
  seeding      which augmentations each (rank, worker) draws in --epochs epochs: seeded as every DDP
               script seeds (torch.manual_seed(seed) on every rank), then with a DataLoader generator
               seeded apart on every rank (the fix);
  persistent   the worker pids of each epoch, without and with persistent_workers;
  throughput   samples/s of one pass over the data for 0 to --workers workers per process, with one
               process loading and with every rank: processes × (1 + workers) against the cores;
  pinned       on CUDA only: batches in pinned memory, copied to the GPU with non_blocking=True.
Rank 0 gathers every rank's records, prints a summary and writes them all to --out.

Devices: NCCL and one GPU per process where CUDA has a GPU for every process on the machine, gloo
and the CPU otherwise or with --device cpu (choose_device). Run by this series' tests on the CPU with
gloo, 1 to 3 processes; the GPU path is checked by tools/gpu_check.py (README, "Verified on").

Written by notebooks/12_real_data.ipynb — edit it there.
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
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset, get_worker_info
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
    parser.add_argument("--workers", type=positive_int, default=2,
                        help="DataLoader workers per process (the timings try 0 to this many)")
    parser.add_argument("--epochs", type=positive_int, default=2, help="epochs of the seeding runs")
    parser.add_argument("--batch-size", type=positive_int, default=8, help="per process")
    parser.add_argument("--dataset-size", type=positive_int, default=160, help="images")
    parser.add_argument("--blur-passes", type=non_negative_int, default=10,
                        help="the CPU cost of one augmentation: 3x3 blurs per image")
    parser.add_argument("--step-passes", type=non_negative_int, default=30,
                        help="the compute of the training step each batch stands in for: 3x3 blurs per batch")
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument("--device", choices=["auto", "cpu"], default="auto",
                        help="auto: NCCL and one GPU per process where CUDA exists, else gloo and the CPU; "
                             "cpu: gloo and the CPU")
    parser.add_argument("--timeout", type=positive_float, default=60.0, help="seconds a collective may wait")
    parser.add_argument("--out", type=writable_file, help="rank 0 writes every rank's records to this JSON file")
    return parser.parse_args()


def make_datasets(train_size, num_classes, seed):
    """Synthetic, learnable data: image = 0.1 * template[label] + noise. Same seed, same data."""
    generator = torch.Generator().manual_seed(seed)
    templates = torch.randn(num_classes, 3, 32, 32, generator=generator)
    val_size = max(train_size // 4, num_classes)
    labels = torch.randint(num_classes, (train_size + val_size,), generator=generator)
    images = 0.1 * templates[labels] + torch.randn(len(labels), 3, 32, 32, generator=generator)
    return (TensorDataset(images[:train_size], labels[:train_size]),
            TensorDataset(images[train_size:], labels[train_size:]))


class RandomlyAugmented(Dataset):
    """Lesson 04's images, flipped, shifted and brightened at random on every read, then blurred
    --blur-passes times (the CPU cost of a real pipeline: decoding, resizing, ...). Each sample also says
    what was drawn (flip, dx, dy, gain) and who drew it (worker id, -1 in the main process, and pid).

    The draws come from torch's global RNG. In a DataLoader worker that RNG is seeded with base_seed +
    worker id (numpy's and `random`'s too: torch/utils/data/_utils/worker.py), and base_seed is drawn from
    the main process's RNG, or from the DataLoader's generator=, each time an iterator starts."""

    def __init__(self, images, blur_passes):
        self.images, self.blur_passes = images, blur_passes
        self.kernel = torch.full((3, 1, 3, 3), 1 / 9)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        image, label = self.images[index]
        flip = torch.rand(()).item() < 0.5
        dx, dy = torch.randint(-4, 5, (2,)).tolist()
        gain = torch.empty((), dtype=torch.float64).uniform_(0.8, 1.2).item()  # 53 random bits: no repeats by chance
        image = torch.roll(image.flip(2) if flip else image, (dy, dx), dims=(1, 2)) * gain
        for _ in range(self.blur_passes):
            image = F.conv2d(image[None], self.kernel, padding=1, groups=3)[0]
        worker = get_worker_info()  # None in the main process
        drawn_by = torch.tensor([-1 if worker is None else worker.id, os.getpid()])
        return image, label, torch.tensor([flip, dx, dy, gain], dtype=torch.float64), drawn_by


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


def training_step_stand_in(images, passes):
    """The work a training step does with a batch, in the main process, while the workers prepare the next
    batches: on the CPU it competes with them for the cores."""
    kernel = torch.full((3, 1, 3, 3), 1 / 9, device=images.device)
    for _ in range(passes):
        images = F.conv2d(images, kernel, padding=1, groups=3)
    return images


def record_streams(dataset, args, rank, generator, persistent):
    """--epochs epochs over this rank's shard with --workers workers: one row per (epoch, worker), with the
    worker's pid and the augmentations it drew, in the order it drew them."""
    sampler = DistributedSampler(dataset, shuffle=True, seed=args.seed)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, num_workers=args.workers,
                        generator=generator, persistent_workers=persistent)
    streams = {}
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for _, _, augmentations, drawn_by in loader:
            for augmentation, (worker, pid) in zip(augmentations.tolist(), drawn_by.tolist()):
                streams.setdefault((epoch, worker, pid), []).append(augmentation)
    return [dict(rank=rank, epoch=epoch, worker=worker, pid=pid, augmentations=drawn)
            for (epoch, worker, pid), drawn in streams.items()]


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


def time_one_pass(dataset, args, loaders, rank, workers, device):
    """This rank's share of one pass over the dataset, split over `loaders` processes, with `workers`
    workers, each batch followed by a training step's stand-in: its seconds (worker start-up included), the
    pids that loaded, and what DataLoader warned."""
    sampler = DistributedSampler(dataset, num_replicas=loaders, rank=rank, shuffle=False)
    pin = device.type == "cuda"  # page-locked batches: their copy to the GPU can overlap the computation
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, num_workers=workers,
                            pin_memory=pin)
        batches = iter(loader)  # starts the workers
    samples, pids, pinned, first_batch_s = 0, set(), True, None
    for images, _, _, drawn_by in batches:
        if first_batch_s is None:
            first_batch_s = time.perf_counter() - started  # the workers' start-up shows here
        pinned = pinned and images.is_pinned()
        images = images.to(device, non_blocking=pin)  # asynchronous only from pinned memory
        training_step_stand_in(images, args.step_passes)
        samples += len(images)
        pids.update(drawn_by[:, 1].tolist())
    if device.type == "cuda":
        torch.cuda.synchronize()  # the last copies have landed
    return dict(rank=rank, loaders=loaders, workers=workers, samples=samples, pids=sorted(pids), pinned=pinned,
                seconds=time.perf_counter() - started, first_batch_seconds=first_batch_s,
                warned=[str(w.message) for w in warned if "worker processes" in str(w.message)])


def time_loading(dataset, args, rank, world_size, device):
    """time_one_pass for 0 to --workers workers, with rank 0 alone loading (the other ranks wait at the
    barrier), then with every rank: the same data on the same cores, by 1 or by world_size processes."""
    rows = []
    for loaders in sorted({1, world_size}):
        for workers in range(args.workers + 1):
            if rank < loaders:
                rows.append(time_one_pass(dataset, args, loaders, rank, workers, device))
            dist.barrier()  # the next configuration starts together
    return rows


def summarise_timings(rows, usable_cores):
    """One row per (loaders, workers), over the ranks that loaded: the job's samples/s is its samples over
    the slowest rank's seconds."""
    table = []
    for loaders, workers in sorted({(row["loaders"], row["workers"]) for row in rows}):
        share = [row for row in rows if (row["loaders"], row["workers"]) == (loaders, workers)]
        samples, seconds = sum(row["samples"] for row in share), max(row["seconds"] for row in share)
        table.append(dict(loaders=loaders, workers=workers, processes=loaders * (1 + workers),
                          usable_cores=usable_cores, samples=samples, seconds=seconds,
                          samples_per_s=samples / seconds,
                          first_batch_seconds=max(row["first_batch_seconds"] for row in share),
                          pids=sorted({pid for row in share for pid in row["pids"]}),
                          pinned=all(row["pinned"] for row in share), warned=any(row["warned"] for row in share)))
    return table


def distinct(rows):
    """How many different augmentation streams these (rank, epoch, worker) rows drew."""
    return len({json.dumps(row["augmentations"]) for row in rows})


def print_summary(report):
    cores = report["usable_cores"]
    threads = sorted({r["torch_threads"] for r in report["ranks"]})
    print(f"{report['world_size']} process(es) on {cores} usable cores ({report['cpu_count']} on the machine), "
          f"torch threads per process {threads}, DataLoader workers 1 each")
    for name, rows in report["seeding"].items():
        print(f"{name:>18}: {len(rows)} (rank, epoch, worker) streams, {distinct(rows)} distinct")
    print("loaders  workers  processes  samples/s  first batch")
    for row in report["timings"]:
        over = f"  over-subscribed: {row['processes']} processes on {cores} cores" if row["processes"] > cores else ""
        print(f"{row['loaders']:7}  {row['workers']:7}  {row['processes']:9}  {row['samples_per_s']:9.0f}  "
              f"{row['first_batch_seconds']:9.2f} s{over}", flush=True)


def measure(args, device):
    """Every rank measures; rank 0 gathers all the records, prints a summary and writes --out."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    # One thread per process, as DataLoader sets in each worker (and torchrun, through OMP_NUM_THREADS, when it
    # starts more than one process): then processes x (1 + workers) counts every thread that loads.
    torch.set_num_threads(1)
    images, _ = make_datasets(args.dataset_size, num_classes=10, seed=args.seed)
    records = dict(rank=rank, pid=os.getpid(), torch_threads=torch.get_num_threads(),
                   seeding=seeding_runs(RandomlyAugmented(images, blur_passes=0), args, rank),  # the draws alone
                   timings=time_loading(RandomlyAugmented(images, args.blur_passes), args, rank, world_size, device))
    gathered = [None] * world_size
    dist.all_gather_object(gathered, records)  # every rank's records, in rank order
    if rank != 0:
        return
    usable_cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    report = dict(
        world_size=world_size, backend=dist.get_backend(), device=str(device), cpu_count=os.cpu_count(),
        usable_cores=usable_cores, workers=args.workers, epochs=args.epochs, batch_size=args.batch_size,
        dataset_size=args.dataset_size, seed=args.seed,
        ranks=[dict(rank=r["rank"], pid=r["pid"], torch_threads=r["torch_threads"]) for r in gathered],
        seeding={name: [row for r in gathered for row in r["seeding"][name]] for name in gathered[0]["seeding"]},
        timings=summarise_timings([row for r in gathered for row in r["timings"]], usable_cores))
    print_summary(report)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1))


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
