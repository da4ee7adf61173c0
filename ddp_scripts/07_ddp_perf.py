"""07 · DDP performance: step time and throughput, gradient buckets, and no_sync accumulation.

    python 07_ddp_perf.py --threads 1,2 --out single.json                    # one process: the baseline
    torchrun --standalone --nproc_per_node=2 07_ddp_perf.py --out ddp.json   # DDP, + buckets and no_sync

Scaling: one process alone and DDP, each with every --threads count, warmed up, then timed in --rounds
rounds of --steps steps in an order shuffled each round; each time is the median over the rounds, of the
slowest rank. Buckets and no_sync: the median of --steps timed steps after warm-up. Synthetic inputs held
in memory (no data loading). On CUDA: NCCL and one GPU per process; a single process
with --data-parallel N also times nn.DataParallel over N GPUs.

Devices: NCCL and one GPU per process where CUDA has a GPU for every process on the machine, gloo
and the CPU otherwise or with --device cpu (choose_device). Run by this series' tests on the CPU with
gloo, 1 to 3 processes; the GPU path is checked by tools/gpu_check.py (README, "Verified on").

Written by notebooks/07_performance.ipynb — edit it there.
"""

import argparse
import datetime
import gc
import json
import math
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP


def number_list(kind):
    """An argparse type: positive numbers separated by commas, e.g. '1,2' or '0.1,25'."""
    def parse(text):
        try:
            values = [kind(v) for v in text.split(",") if v.strip()]
        except ValueError:
            values = []
        if not values or not all(math.isfinite(v) and v > 0 for v in values):
            raise argparse.ArgumentTypeError(f"expected positive numbers separated by commas, got {text!r}")
        return values
    return parse


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


def gpus_here(text):
    """An argparse type: a number of GPUs, 0 up to as many as this machine has."""
    value = non_negative_int(text)
    if value > torch.cuda.device_count():
        raise argparse.ArgumentTypeError(f"needs {value} GPUs; this machine has {torch.cuda.device_count()}")
    return value


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-size", type=positive_int, default=64, help="per process, for the scaling runs")
    parser.add_argument("--steps", type=positive_int, default=10, help="timed steps per measurement")
    parser.add_argument("--rounds", type=positive_int, default=5, help="shuffled rounds of the scaling runs")
    parser.add_argument("--warmup", type=non_negative_int, default=2, help="untimed steps before each measurement")
    parser.add_argument("--threads", type=number_list(int), default=[1], help="CPU threads per process, e.g. 1,2")
    parser.add_argument("--width", type=positive_int, default=512, help="hidden width of the MLP")
    parser.add_argument("--bucket-caps", type=number_list(float), default=[0.001, 0.01, 0.1, 1.0, 25.0],
                        help="bucket_cap_mb values to sweep (DDP only)")
    parser.add_argument("--small-layers", type=positive_int, default=100, help="layers of the many-small-tensors model")
    parser.add_argument("--accumulate", type=positive_int, default=8, help="micro-steps per optimizer step (no_sync)")
    parser.add_argument("--micro-batch", type=positive_int, default=16, help="samples per process per micro-step")
    parser.add_argument("--data-parallel", type=gpus_here, default=0, help="also time nn.DataParallel on N GPUs")
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument("--device", choices=["auto", "cpu"], default="auto",
                        help="auto: NCCL and one GPU per process where CUDA exists, else gloo and the CPU; "
                             "cpu: gloo and the CPU")
    parser.add_argument("--timeout", type=positive_float, default=60.0, help="seconds a collective may wait")
    parser.add_argument("--out", type=writable_file, help="rank 0 writes every measurement to this JSON file")
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


def mlp(width, num_classes=10):
    """Compute-heavy: three large matrices (1.8 M parameters at width 512, 4.2 M at 1024)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, width), nn.ReLU(),
                         nn.Linear(width, width), nn.ReLU(), nn.Linear(width, num_classes))


def many_small(layers, width=32, num_classes=10):
    """Communication-heavy: 2 * layers + 2 tiny tensors, each a few KiB."""
    blocks = [nn.Sequential(nn.Linear(width, width), nn.Tanh()) for _ in range(layers)]
    return nn.Sequential(*blocks, nn.Linear(width, num_classes))


def wrap(model, device, **kwargs):
    return DDP(model, device_ids=[device.index] if device.type == "cuda" else None, **kwargs)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def slowest(seconds, device):
    """The largest value over all ranks: a step is as slow as its slowest rank."""
    t = torch.tensor([seconds], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def timed(step, steps, warmup, device, cpu=None):
    """Median seconds per call of step() on the slowest rank, and the CPU share this rank got.

    The CPU share (CPU seconds of this process per wall-clock second, lowest over the ranks) tells a
    quiet machine (about 1 per busy thread) from one shared with other work (much less than 1).
    If cpu is a list, the CPU seconds per call summed over all ranks are appended to it: the work
    done, which other programs on the machine hardly change.
    """
    for _ in range(warmup):
        step()
    sync(device)
    dist.barrier()
    times, cpu_started, wall_started = [], time.process_time(), time.perf_counter()
    for _ in range(steps):
        started = time.perf_counter()
        step()
        sync(device)
        times.append(time.perf_counter() - started)
    cpu_seconds = time.process_time() - cpu_started
    cpu_share = cpu_seconds / (time.perf_counter() - wall_started)
    if cpu is not None:
        cpu.append(sum_over_ranks(cpu_seconds / steps, device=device)[0])
    return slowest(median(times), device), -slowest(-cpu_share, device)


def counting(ddp_model, counter):
    """Register DDP's default all-reduce as a comm hook that also counts its calls (one per bucket)."""
    def hook(state, bucket):
        counter[0] += 1
        return default_hooks.allreduce_hook(state, bucket)
    ddp_model.register_comm_hook(None, hook)
    return ddp_model


def batch(n, device, shape=(3, 32, 32)):
    return torch.randn(n, *shape, device=device), torch.randint(10, (n,), device=device)


def train_step(model, x, y):
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
    return step


def memory_mb(device):
    return torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None


def scaling(args, device, world_size):
    """Throughput of one process and of DDP, every configuration timed in the same shuffled rounds.

    The configurations: one process alone (rank 0 trains a plain, unwrapped model while the other ranks wait
    at a barrier, so it has the machine to itself) and DDP at a fixed per-process batch and at a fixed global
    batch, each with every --threads count. All are built and warmed up first; then --rounds rounds time
    --steps steps of each, in an order shuffled anew each round (one seeded generator: the same on every
    rank), so that a busy moment of the machine hits every configuration alike rather than one of them.
    """
    rank, threads_before = dist.get_rank(), torch.get_num_threads()
    configs = []
    for threads in (args.threads if device.type == "cpu" else [None]):  # threads are a CPU setting
        configs.append(dict(processes=1, threads=threads, regime="fixed per-process batch",
                            per_process_batch=args.batch_size))
        if world_size > 1:
            configs.append(dict(processes=world_size, threads=threads, regime="fixed per-process batch",
                                per_process_batch=args.batch_size))
            configs.append(dict(processes=world_size, threads=threads, regime="fixed global batch",
                                per_process_batch=max(1, args.batch_size // world_size)))
    steps = []
    for config in configs:
        torch.manual_seed(args.seed)
        model = mlp(args.width).to(device)
        model = wrap(model, device) if config["processes"] > 1 else model  # one process: the plain program
        steps.append(train_step(model, *batch(config["per_process_batch"], device)))
        works = config["processes"] > 1 or rank == 0
        if config["threads"]:
            torch.set_num_threads(config["threads"])
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        for _ in range(args.warmup if works else 0):
            steps[-1]()
        sync(device)
        config["memory_mb"] = memory_mb(device) if works else None
        dist.barrier()
    shuffler = random.Random(args.seed)
    orders = [shuffler.sample(range(len(configs)), len(configs)) for _ in range(args.rounds)]
    rounds = [[None] * len(configs) for _ in orders]
    for r, order in enumerate(orders):
        for i in order:
            if configs[i]["threads"]:
                torch.set_num_threads(configs[i]["threads"])
            rounds[r][i] = timed_block(steps[i], args.steps, device, works=configs[i]["processes"] > 1 or rank == 0)
    torch.set_num_threads(threads_before)  # what torchrun's OMP_NUM_THREADS gave, for what follows
    rows = []
    for i, config in enumerate(configs):
        blocks = [timings[i] for timings in rounds]
        global_batch = config["per_process_batch"] * config["processes"]
        round_ms = [1000 * b["seconds"] for b in blocks]
        round_cpu = [1e6 * b["cpu_seconds"] / global_batch for b in blocks]
        alone = config["processes"] < world_size  # rank 0 worked alone while the other ranks waited
        rows.append(dict(config, name=config_name(config), global_batch=global_batch,
                         ms_per_step=median(round_ms), round_ms=round_ms,
                         samples_per_s=1000 * global_batch / median(round_ms),
                         cpu_share=median([b["cpu_share"] for b in blocks]),
                         idle_cpu_share=max(b["idle_cpu_share"] for b in blocks) if alone else None,
                         cpu_us_per_sample=median(round_cpu), round_cpu_us_per_sample=round_cpu))
    return rows, [[rows[i]["name"] for i in order] for order in orders]


def config_name(config):
    """'1 proc × 2 threads', '2 procs × 1 thread, b/proc' (fixed per-process batch), '…, b total' (fixed global)."""
    processes, threads = config["processes"], config["threads"]
    name = f"{processes} proc{'s' if processes > 1 else ''}"
    name += f" × {threads} thread{'s' if threads > 1 else ''}" if threads else ""
    if processes > 1:
        name += ", b/proc" if config["regime"] == "fixed per-process batch" else ", b total"
    return name


def median(values):
    return sorted(values)[len(values) // 2]


def timed_block(step, steps, device, works):
    """One timed block of steps: seconds per step of the slowest working rank, and what the CPUs did.

    Returns the same numbers on every rank: seconds per step; the CPU share (CPU seconds per wall-clock
    second) of the working ranks, the lowest of them; the CPU share of the ranks that only wait, the highest
    of them (None if all work); and the CPU seconds per step summed over every rank, waiting ones included.
    """
    sync(device)
    dist.barrier()
    cpu_started, wall_started = time.process_time(), time.perf_counter()
    if works:
        for _ in range(steps):
            step()
        sync(device)  # CUDA returns before the work is done
    work_seconds = time.perf_counter() - wall_started
    dist.barrier()  # a waiting rank waits here, while the working ones finish
    cpu_seconds, wall_seconds = time.process_time() - cpu_started, time.perf_counter() - wall_started
    table = torch.zeros(dist.get_world_size(), 4, dtype=torch.float64, device=device)
    table[dist.get_rank()] = torch.tensor([float(works), work_seconds, cpu_seconds, wall_seconds],
                                          dtype=torch.float64)
    dist.all_reduce(table)  # every rank fills its own row: all rows, on every rank
    working, idle = table[table[:, 0] == 1], table[table[:, 0] == 0]
    return dict(seconds=working[:, 1].max().item() / steps,
                cpu_share=(working[:, 2] / working[:, 3]).min().item(),
                idle_cpu_share=(idle[:, 2] / idle[:, 3]).max().item() if len(idle) else None,
                cpu_seconds=table[:, 2].sum().item() / steps)


def data_parallel(args, device):
    """nn.DataParallel over N GPUs versus one GPU, the same global batch (single process only)."""
    rows = []
    for n in (1, args.data_parallel):
        torch.manual_seed(args.seed)
        model = mlp(args.width).to(device)
        if n > 1:
            model = nn.DataParallel(model, device_ids=list(range(n)))
        for i in range(n):
            torch.cuda.reset_peak_memory_stats(i)
        seconds, _ = timed(train_step(model, *batch(args.batch_size, device)), args.steps, args.warmup, device)
        rows.append(dict(kind="single device" if n == 1 else "DataParallel", devices=n,
                         global_batch=args.batch_size, ms_per_step=1000 * seconds,
                         memory_mb_per_device=[torch.cuda.max_memory_allocated(i) / 2**20 for i in range(n)]))
    return rows


def buckets(args, device, rounds=3):
    """Step time and all-reduce calls per step over bucket_cap_mb, on a model of many small tensors."""
    x, y = batch(32, device, shape=(32,))
    timed_steps, counts, cap_bytes = {}, {}, {}
    for cap in args.bucket_caps:
        torch.manual_seed(args.seed)
        counter = [0]
        counted = train_step(counting(wrap(many_small(args.small_layers).to(device), device, bucket_cap_mb=cap),
                                      counter), x, y)
        for _ in range(2):  # DDP rebuilds its buckets after the first step; count from then on
            counted()
        counter[0] = 0
        counted()
        counts[cap] = counter[0]
        torch.manual_seed(args.seed)
        capped = wrap(many_small(args.small_layers).to(device), device, bucket_cap_mb=cap)
        cap_bytes[cap] = capped.bucket_bytes_cap  # what DDP made of the cap: bucket_cap_mb * 1024 * 1024, MiB
        timed_steps[cap] = train_step(capped, x, y)
    times = {cap: [] for cap in args.bucket_caps}
    for _ in range(rounds):  # interleaved, so that a noisy moment hits every setting alike
        for cap in args.bucket_caps:
            times[cap].append(timed(timed_steps[cap], max(1, args.steps // rounds), 1, device)[0])
    tensors = len(list(many_small(args.small_layers).parameters()))
    return [dict(bucket_cap_mb=cap, bucket_bytes_cap=cap_bytes[cap], allreduce_calls_per_step=counts[cap],
                 tensors=tensors, ms_per_step=1000 * median(times[cap])) for cap in args.bucket_caps]


def bucket_layout(args, device, iterations=3):
    """Which gradients each bucket held, iteration by iteration, as DDP's comm hook receives them.

    As read in torch 2.13's source: the first iteration's buckets come from
    _BucketCapacityConfig.compute_bucket_size_limits (torch/nn/parallel/distributed.py). With
    find_unused_parameters=False (or static_graph=True) that is ONE bucket for every gradient. Before the
    second forward, Reducer::rebuild_buckets (torch/csrc/distributed/c10d/reducer.cpp; the condition,
    should_rebuild_buckets, in reducer.hpp) rebuilds them once, in the order the gradients became ready,
    the first one capped at dist._DEFAULT_FIRST_BUCKET_BYTES (1 MiB) when bucket_cap_mb is left at its
    default. static_graph=True records no order in its first iteration (it all-reduces everything after
    backward), so it rebuilds one iteration later, before the third forward. With
    find_unused_parameters=True it never rebuilds: buckets in reverse order of model.parameters(), the
    first-defined parameters' bucket capped likewise.
    """
    x, y = batch(8, device)
    layouts = {}
    for setting in ("default", "find_unused_parameters", "static_graph"):
        torch.manual_seed(args.seed)
        model = mlp(args.width).to(device)
        names = {id(p): name for name, p in model.named_parameters()}
        ddp_model = wrap(model, device, **({} if setting == "default" else {setting: True}))
        seen = []

        def hook(state, bucket, seen=seen, names=names):
            seen[-1].append(dict(index=bucket.index(), names=[names[id(p)] for p in bucket.parameters()],
                                 bytes=sum(p.numel() * p.element_size() for p in bucket.parameters())))
            return default_hooks.allreduce_hook(state, bucket)
        ddp_model.register_comm_hook(None, hook)
        step = train_step(ddp_model, x, y)
        for _ in range(iterations):
            seen.append([])
            step()
        layouts[setting] = seen
    parameters = list(mlp(args.width).named_parameters())
    return dict(layouts=layouts, parameter_order=[name for name, _ in parameters],
                parameter_bytes={name: p.numel() * p.element_size() for name, p in parameters},
                first_bucket_cap_bytes=dist._DEFAULT_FIRST_BUCKET_BYTES, torch=torch.__version__)


def accumulate(model, opt, x, y, micro_steps, variant):
    """One optimizer step of gradient accumulation over micro_steps, synchronised the way variant says."""
    loss_fn = nn.CrossEntropyLoss()
    opt.zero_grad(set_to_none=True)
    for i in range(micro_steps):
        last = i == micro_steps - 1
        if variant == "sync every micro-step" or last:  # the last micro-step always synchronises
            (loss_fn(model(x), y) / micro_steps).backward()
        elif variant == "no_sync":  # forward AND backward inside: nothing is all-reduced
            with model.no_sync():
                (loss_fn(model(x), y) / micro_steps).backward()
        else:  # the trap: the forward pass outside no_sync() has already armed the all-reduce
            loss = loss_fn(model(x), y) / micro_steps
            with model.no_sync():  # ddp-doctor: ignore[DDP015] the trap this measurement shows
                loss.backward()


def accumulation(args, device):
    """All-reduce calls and time per optimizer step, with and without no_sync()."""
    x, y = batch(args.micro_batch, device)
    rows, reference = [], None
    for variant in ("sync every micro-step", "no_sync", "no_sync around backward() only"):
        torch.manual_seed(args.seed)
        counter = [0]
        model = counting(wrap(mlp(args.width).to(device), device), counter)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        accumulate(model, opt, x, y, args.accumulate, variant)  # no step: compare the accumulated gradients
        grads = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).double().cpu()
        reference = grads if reference is None else reference
        counter[0] = 0
        accumulate(model, opt, x, y, args.accumulate, variant)
        calls = counter[0]

        def optimizer_step(model=model, opt=opt, variant=variant):
            accumulate(model, opt, x, y, args.accumulate, variant)
            opt.step()
        seconds, _ = timed(optimizer_step, max(2, args.steps // 3), 1, device)
        rows.append(dict(variant=variant, micro_steps=args.accumulate, allreduce_calls_per_optimizer_step=calls,
                         ms_per_optimizer_step=1000 * seconds,
                         max_grad_difference=(grads - reference).abs().max().item()))
    return rows


def measure(args, device):
    """Every measurement of lesson 07 in one launch; rank 0 prints them and writes --out."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    results = dict(world_size=world_size, backend=dist.get_backend(), device=str(device),
                   cpu_count=os.cpu_count(), torch=torch.__version__,
                   omp_num_threads=os.environ.get("OMP_NUM_THREADS"),
                   cuda_devices=torch.cuda.device_count(), batch_size=args.batch_size,
                   mlp_parameters=sum(p.numel() for p in mlp(args.width).parameters()))
    results["scaling"], orders = scaling(args, device, world_size)
    results["scaling_rounds"] = dict(rounds=args.rounds, steps_per_round=args.steps, warmup=args.warmup, orders=orders)
    if world_size == 1 and device.type == "cuda" and args.data_parallel >= 2:
        results["data_parallel"] = data_parallel(args, device)
    if world_size > 1:  # communication needs someone to talk to
        results["buckets"] = buckets(args, device)
        results["bucket_layout"] = bucket_layout(args, device)
        results["no_sync"] = accumulation(args, device)
    if rank == 0:
        for row in results["scaling"]:
            print(f"{row['name']}: batch {row['per_process_batch']}/process, {row['ms_per_step']:.1f} ms/step "
                  f"({min(row['round_ms']):.1f}-{max(row['round_ms']):.1f} over {args.rounds} rounds), "
                  f"{row['samples_per_s']:.0f} samples/s, CPU share {row['cpu_share']:.2f}", flush=True)
        for row in results.get("data_parallel", []):
            print(f"{row['kind']} on {row['devices']} GPU(s): {row['ms_per_step']:.1f} ms/step, "
                  f"memory {[round(m) for m in row['memory_mb_per_device']]} MiB", flush=True)
        for row in results.get("buckets", []):
            print(f"bucket_cap_mb {row['bucket_cap_mb']:>7}: {row['allreduce_calls_per_step']:>3} all-reduces "
                  f"per step, {row['ms_per_step']:.1f} ms/step", flush=True)
        for row in results.get("no_sync", []):
            print(f"{row['variant']:32s}: {row['allreduce_calls_per_optimizer_step']:>2} all-reduces, "
                  f"{row['ms_per_optimizer_step']:.1f} ms per optimizer step", flush=True)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(results, indent=1))


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
