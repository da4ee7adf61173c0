"""07 · All-reduce benchmark in the style of nccl-tests: latency, algbw and busbw over message sizes.

    torchrun --standalone --nproc_per_node=2 07_allreduce_bench.py --min-bytes 4K --max-bytes 256M
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv-backend=c10d --rdzv-endpoint=HOST:PORT 07_allreduce_bench.py

Sizes double from --min-bytes to --max-bytes. For each size: --warmup untimed all-reduces, then
--iters timed ones; time is the mean per all-reduce of the slowest rank. As in nccl-tests,
algbw = bytes / time and busbw = algbw * 2 (n - 1) / n, the traffic each link of a ring carries,
comparable across process counts. NCCL and GPU tensors where CUDA exists, gloo and CPU otherwise.

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
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist

UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}


def size(text):
    """An argparse type: '4096', '4K', '256M', '1G' -> a positive number of bytes."""
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = text[-1] if text and text[-1] in UNITS else ""
    try:
        value = int(float(text[:len(text) - len(unit)]) * UNITS[unit])  # nan and inf raise here too
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (try 4096, 4K, 256M)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"sizes must be positive, got {text!r}")
    return value


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
    parser.add_argument("--min-bytes", type=size, default=size("4K"), help="smallest message, e.g. 4K")
    parser.add_argument("--max-bytes", type=size, default=size("256M"), help="largest message, e.g. 256M")
    parser.add_argument("--iters", type=positive_int, default=20, help="timed all-reduces per size")
    parser.add_argument("--warmup", type=non_negative_int, default=5, help="untimed all-reduces per size")
    parser.add_argument("--device", choices=["auto", "cpu"], default="auto",
                        help="auto: NCCL and one GPU per process where CUDA exists, else gloo and the CPU; "
                             "cpu: gloo and the CPU")
    parser.add_argument("--timeout", type=positive_float, default=60.0, help="seconds a collective may wait")
    parser.add_argument("--out", type=writable_file, help="rank 0 writes the table to this JSON file")
    args = parser.parse_args()
    if args.min_bytes > args.max_bytes:
        parser.error(f"--min-bytes ({args.min_bytes}) must not exceed --max-bytes ({args.max_bytes})")
    return args


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


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench_one(nbytes, iters, warmup, device):
    """Mean seconds per all-reduce of nbytes of float32, on the slowest rank."""
    tensor = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device=device)
    for _ in range(warmup):
        dist.all_reduce(tensor)
    sync(device)
    dist.barrier()
    started = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(tensor)
    sync(device)
    seconds = torch.tensor([(time.perf_counter() - started) / iters], dtype=torch.float64, device=device)
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
    return tensor.numel(), seconds.item()


def benchmark(args, device):
    """One row per message size, --min-bytes to --max-bytes doubling; rank 0 prints the table and writes --out."""
    rank, n = dist.get_rank(), dist.get_world_size()
    sizes, nbytes = [], args.min_bytes
    while nbytes <= args.max_bytes:
        sizes.append(nbytes)
        nbytes *= 2
    rows = []
    if rank == 0:
        print(f"# all_reduce, {n} processes, backend {dist.get_backend()}, device {device}, "
              f"float32, sum, {args.iters} iterations (+{args.warmup} warm-up), slowest rank")
        print(f"# {'size':>12} {'count':>12} {'time':>10} {'algbw':>8} {'busbw':>8}")
        print(f"# {'(B)':>12} {'(elements)':>12} {'(us)':>10} {'(GB/s)':>8} {'(GB/s)':>8}", flush=True)
    for nbytes in sizes:
        count, seconds = bench_one(nbytes, args.iters, args.warmup, device)
        algbw = count * 4 / seconds / 1e9
        busbw = algbw * 2 * (n - 1) / n
        rows.append(dict(bytes=count * 4, count=count, time_us=seconds * 1e6, algbw_gbps=algbw, busbw_gbps=busbw))
        if rank == 0:
            print(f"  {count * 4:>12} {count:>12} {seconds * 1e6:>10.1f} {algbw:>8.3f} {busbw:>8.3f}", flush=True)
    if rank == 0:
        large = [r["busbw_gbps"] for r in rows if r["bytes"] >= 2**20] or [rows[-1]["busbw_gbps"]]
        print(f"# avg busbw over sizes >= 1 MiB: {sum(large) / len(large):.3f} GB/s")
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(dict(world_size=n, backend=dist.get_backend(), device=str(device),
                                                iters=args.iters, rows=rows), indent=1))


def main():
    args = parse_args()
    device = setup_distributed(args.timeout, args.device)
    try:
        benchmark(args, device)
    except BaseException:
        dist.destroy_process_group()  # no barrier here: the other ranks may be gone
        raise
    clean_exit()


if __name__ == "__main__":
    main()
