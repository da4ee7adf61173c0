"""`make bench`: lesson 07's measurements outside the notebooks, with larger sizes.

    python tools/bench.py [--nproc 2] [--max-bytes 256M] [--steps 20] [--out-dir build/bench]

Runs, with this interpreter's torch:
  1. ddp_scripts/07_allreduce_bench.py under torchrun (nccl-tests style: latency, algbw, busbw);
  2. on >= 2 GPUs only, ddp_scripts/07_ddp_perf.py as one plain process, for nn.DataParallel (the table's
     one-process rows come from the next launch, timed in the same rounds as DDP);
  3. ddp_scripts/07_ddp_perf.py under torchrun (scaling, bucket_cap_mb sweep, no_sync);
  4. ddp_scripts/11_fast_ddp.py under torchrun (lesson 11: mixed precision, torch.compile with inductor,
     compression hooks; each variant warmed up, then timed in interleaved rounds: median and min-max).
and writes OUT_DIR/results.json (everything, with the machine) and OUT_DIR/results.md (tables to
paste into the README), plus each run's raw JSON and log. Every number is measured in this run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "ddp_scripts"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nproc", type=int, default=2, help="processes for the torchrun launches")
    parser.add_argument("--min-bytes", default="4K", help="smallest all-reduce message (4K, 1M, ...)")
    parser.add_argument("--max-bytes", default="256M", help="largest all-reduce message")
    parser.add_argument("--iters", type=int, default=20, help="timed all-reduces per size")
    parser.add_argument("--batch-size", type=int, default=64, help="per process, scaling runs")
    parser.add_argument("--width", type=int, default=512, help="hidden width of the timed MLP")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per measurement")
    parser.add_argument("--threads", default="1,2", help="threads per process to sweep (CPU)")
    parser.add_argument("--fast-epochs", type=int, default=4, help="epochs of each lesson 11 variant")
    parser.add_argument("--fast-rounds", type=int, default=10, help="timing rounds of lesson 11's variants")
    parser.add_argument("--timeout", type=int, default=600, help="seconds each launch may take")
    parser.add_argument("--out-dir", type=Path, default=REPO / "build" / "bench")
    args = parser.parse_args(argv)
    for name in ("min_bytes", "max_bytes"):
        if not re.fullmatch(r"\d+(\.\d+)?[KMG]?(I?B)?", getattr(args, name).strip().upper()):
            parser.error(f"--{name.replace('_', '-')} must be a size like 4096, 4K or 256M, "
                         f"got {getattr(args, name)!r}")
    if not re.fullmatch(r"[1-9]\d*(,[1-9]\d*)*", args.threads):
        parser.error(f"--threads must be positive integers separated by commas, got {args.threads!r}")
    for name in ("nproc", "iters", "batch_size", "width", "steps", "fast_epochs", "fast_rounds", "timeout"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    return args


def launch(cmd, log, timeout):
    """Run one measurement, echo and keep its output; a failure stops the benchmark with its log."""
    print("$ " + " ".join(str(c) for c in cmd), flush=True)
    started = time.perf_counter()
    result = subprocess.run([str(c) for c in cmd], cwd=REPO, capture_output=True, text=True, timeout=timeout)
    log.write_text(result.stdout + result.stderr)
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    print("\n".join("  " + line for line in lines[-25:]), flush=True)
    if result.returncode != 0:
        sys.exit(f"bench: {cmd[1] if len(cmd) > 1 else cmd[0]} failed (exit {result.returncode}); see {log}\n"
                 + result.stderr[-3000:])
    return time.perf_counter() - started


def machine():
    import torch
    cuda = torch.cuda.is_available()
    return dict(date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                host=platform.node(), platform=platform.platform(),
                processor=platform.processor() or platform.machine(),
                cpu_cores=os.cpu_count(), python=platform.python_version(), torch=torch.__version__,
                backend="nccl" if cuda else "gloo", cuda_devices=torch.cuda.device_count(),
                gpus=[torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])


def markdown(results):
    m = results["machine"]
    hardware = f"{m['cuda_devices']} × {m['gpus'][0]}" if m["gpus"] else "no GPU"
    out = [f"Measured {m['date']} on {m['cpu_cores']} CPU cores ({m['processor']}), {hardware}, "
           f"Python {m['python']}, torch {m['torch']}, backend {m['backend']}, {results['nproc']} processes "
           f"(`make bench`, {results['seconds']:.0f} s).", ""]
    scaling = results["ddp"]["scaling"]  # one process (rank 0 alone) and DDP, timed in the same shuffled rounds
    share = min((r["cpu_share"] for r in scaling if r["threads"] in (1, None)), default=1.0)  # None: a GPU run
    if share < 0.6:  # single-threaded processes got well under a core each: other work shared the machine
        out += [f"> **The machine was busy during this run** (lowest CPU share of a single-threaded process "
                f"{share:.2f}, about 1 when quiet): the times are inflated; rerun `make bench` on a quiet machine.", ""]
    out += ["**All-reduce** (float32, sum; time = mean of the slowest rank; busbw = algbw · 2(n−1)/n)", "",
            "| size | time (µs) | algbw (GB/s) | busbw (GB/s) |", "|---:|---:|---:|---:|"]
    for r in results["allreduce"]["rows"]:
        size = r["bytes"]
        label = f"{size // 2**20} MiB" if size >= 2**20 else f"{size // 2**10} KiB"
        out.append(f"| {label} | {r['time_us']:.1f} | {r['algbw_gbps']:.3f} | {r['busbw_gbps']:.3f} |")
    out += ["", f"**Scaling** (MLP, {results['ddp']['mlp_parameters'] / 1e6:.1f} M parameters; median step, "
                "slowest rank; CPU share ≈ 1 per thread on a quiet machine)", "",
            "| processes × threads | regime | batch/process | global batch | ms/step | samples/s | CPU share "
            "| CPU µs/sample |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in scaling:
        threads = r["threads"] if r["threads"] else "–"
        regime = "one process (rank 0 alone, same rounds)" if r["processes"] == 1 else r["regime"]
        out.append(f"| {r['processes']} × {threads} | {regime} | {r['per_process_batch']} | {r['global_batch']} | "
                   f"{r['ms_per_step']:.1f} | {r['samples_per_s']:.0f} | {r['cpu_share']:.2f} | "
                   f"{r['cpu_us_per_sample']:.0f} |")
    for r in results["single"].get("data_parallel", []):
        out.append(f"| {r['kind']}, {r['devices']} GPU(s) | same global batch | – | {r['global_batch']} | "
                   f"{r['ms_per_step']:.1f} | {r['global_batch'] / r['ms_per_step'] * 1000:.0f} | – | – |")
    out += ["", f"**Gradient buckets** ({results['ddp']['buckets'][0]['tensors']} small gradient tensors)", "",
            "| bucket_cap_mb | all-reduces per step | ms/step |", "|---:|---:|---:|"]
    for r in results["ddp"]["buckets"]:
        out.append(f"| {r['bucket_cap_mb']:g} | {r['allreduce_calls_per_step']} | {r['ms_per_step']:.1f} |")
    out += ["", f"**Gradient accumulation** ({results['ddp']['no_sync'][0]['micro_steps']} micro-steps per "
                "optimizer step)", "", "| variant | all-reduces per optimizer step | ms per optimizer step |",
            "|---|---:|---:|"]
    for r in results["ddp"]["no_sync"]:
        out.append(f"| {r['variant']} | {r['allreduce_calls_per_optimizer_step']} | {r['ms_per_optimizer_step']:.1f} |")
    fast = results["fast"]
    timing = fast["timing"]
    out += ["", f"**Faster DDP** (lesson 11: {fast['world_size']} processes, {fast['device']}, torch.compile backend "
                f"{fast['compile_backend']}; step of the slowest rank, each variant warmed up, then timed in "
                f"{timing['rounds']} interleaved rounds of {timing['round_steps']} steps: median and min–max over the "
                "rounds; the first step includes any compiling)",
            "", "| variant | ms/step (median) | min–max | first step (s) | KiB all-reduced per step | val accuracy |",
            "|---|---:|---:|---:|---:|---:|"]
    for r in fast["variants"]:
        out.append(f"| {r['variant']} | {r['median_step_s'] * 1e3:.2f} | {r['min_step_s'] * 1e3:.2f}–"
                   f"{r['max_step_s'] * 1e3:.2f} | {r['first_step_s']:.2f} | {r['bytes_per_step'][-1] / 1024:.1f} | "
                   f"{r['val_accuracy']:.1%} |")
    return "\n".join(out) + "\n"


def main(argv=None):
    args = parse_args(argv)
    out = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={args.nproc}"]
    info = machine()
    started = time.perf_counter()
    launch([*torchrun, SCRIPTS / "07_allreduce_bench.py", "--min-bytes", args.min_bytes, "--max-bytes",
            args.max_bytes, "--iters", args.iters, "--out", out / "allreduce.json"],
           out / "allreduce.log", args.timeout)
    perf = ["--batch-size", args.batch_size, "--width", args.width, "--steps", args.steps]
    data_parallel = min(args.nproc, info["cuda_devices"]) if info["cuda_devices"] >= 2 else 0
    if data_parallel:  # nn.DataParallel: one process driving the GPUs (the table's one-process rows come next)
        launch([sys.executable, SCRIPTS / "07_ddp_perf.py", *perf, "--data-parallel", data_parallel,
                "--out", out / "single.json"], out / "single.log", args.timeout)
    launch([*torchrun, SCRIPTS / "07_ddp_perf.py", *perf, "--threads", args.threads, "--out", out / "ddp.json"],
           out / "ddp.log", args.timeout)
    sys.path.insert(0, str(REPO / "notebooks"))
    from devices import device_for  # the scripts' own device policy (lesson 04), as the lessons use it

    device = device_for(args.nproc)  # "auto" where there is a GPU for every process; else "cpu", said out loud
    launch([*torchrun, SCRIPTS / "11_fast_ddp.py", "--device", device, "--variants",
            "fp32,bf16,fp16,compile,fp16-hook,bf16-hook,powersgd", "--compile-backend", "inductor", "--epochs",
            args.fast_epochs, "--rounds", args.fast_rounds, "--out", out / "fast.json"], out / "fast.log", args.timeout)
    results = dict(machine=info, nproc=args.nproc, seconds=time.perf_counter() - started,
                   allreduce=json.loads((out / "allreduce.json").read_text()),
                   single=json.loads((out / "single.json").read_text()) if data_parallel else {},
                   ddp=json.loads((out / "ddp.json").read_text()),
                   fast=json.loads((out / "fast.json").read_text()))
    (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "results.md").write_text(markdown(results))
    print(f"\nwrote {out / 'results.json'} and {out / 'results.md'} in {results['seconds']:.0f} s")


if __name__ == "__main__":
    main()
