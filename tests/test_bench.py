"""The benchmark target of lessons 07 and 11: tools/bench.py validates its arguments and renders its tables."""

import bench
import pytest

ROW = dict(processes=1, threads=1, regime="fixed per-process batch", per_process_batch=64, global_batch=64,
           ms_per_step=10.0, samples_per_s=6400.0, cpu_share=0.95, cpu_us_per_sample=150.0, memory_mb=None)


def fake_results():
    allreduce = [dict(bytes=4096 * 2**i, count=1024 * 2**i, time_us=300.0 * (i + 1), algbw_gbps=0.1 * (i + 1),
                      busbw_gbps=0.1 * (i + 1)) for i in range(3)]
    return dict(
        machine=dict(date="2026-11-30 09:00 UTC", cpu_cores=2, processor="x86_64", gpus=[], cuda_devices=0,
                     python="3.11.7", torch="2.13.0+cpu", backend="gloo"),
        nproc=2, seconds=42.0,
        allreduce=dict(world_size=2, rows=allreduce),
        single=dict(scaling=[ROW]),
        ddp=dict(mlp_parameters=1_800_000,
                 scaling=[dict(ROW), dict(ROW, processes=2, global_batch=128, samples_per_s=9000.0)],
                 buckets=[dict(bucket_cap_mb=0.001, allreduce_calls_per_step=101, tensors=202, ms_per_step=100.0),
                          dict(bucket_cap_mb=25.0, allreduce_calls_per_step=1, tensors=202, ms_per_step=20.0)],
                 no_sync=[dict(variant="no_sync", micro_steps=8, allreduce_calls_per_optimizer_step=2,
                               ms_per_optimizer_step=70.0)]),
        fast=dict(world_size=2, device="cpu", compile_backend="inductor", timing=dict(rounds=10, round_steps=4),
                  variants=[dict(variant="compile", median_step_s=0.0125, min_step_s=0.011, max_step_s=0.0155,
                                 first_step_s=34.0, bytes_per_step=[2048, 1024], val_accuracy=0.908)]))


def test_markdown_names_the_machine_and_every_table():
    md = bench.markdown(fake_results())
    first = md.splitlines()[0]
    for fact in ("2 CPU cores", "torch 2.13.0+cpu", "backend gloo", "2026-11-30", "2 processes"):
        assert fact in first, (fact, first)
    for heading in ("**All-reduce**", "**Scaling**", "**Gradient buckets**", "**Gradient accumulation**",
                    "**Faster DDP**"):
        assert heading in md
    assert "| 4 KiB | 300.0 | 0.100 | 0.100 |" in md
    assert "| 0.001 | 101 | 100.0 |" in md
    assert "| compile | 12.50 | 11.00–15.50 | 34.00 | 1.0 | 90.8% |" in md
    assert "10 interleaved rounds of 4 steps" in md
    assert "busy" not in md
    assert "| 1 × 1 | one process (rank 0 alone, same rounds) | 64 | 64 | 10.0 | 6400 |" in md
    # every table row has as many cells as its header
    for block in md.split("\n\n"):
        rows = [line for line in block.splitlines() if line.startswith("|")]
        if rows:
            assert len({row.count("|") for row in rows}) == 1, block


@pytest.mark.parametrize("argv", [["--nproc", "0"], ["--max-bytes", "3x"], ["--threads", "0,1"], ["--steps", "-1"]])
def test_bad_arguments_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(argv)
    assert exit_info.value.code == 2
    assert ": error: " in capsys.readouterr().err.strip().splitlines()[-1]


def test_good_arguments():
    args = bench.parse_args(["--max-bytes", "64M", "--threads", "1,2", "--nproc", "4"])
    assert (args.max_bytes, args.threads, args.nproc) == ("64M", "1,2", 4)


def test_markdown_warns_when_the_machine_was_busy():
    results = fake_results()
    results["ddp"]["scaling"][0]["cpu_share"] = 0.3
    assert "The machine was busy during this run" in bench.markdown(results)


def test_markdown_of_a_gpu_run_has_no_thread_counts():
    """On CUDA the scaling rows have threads=None: the table says '–', and the busy check does not crash."""
    results = fake_results()
    for row in results["ddp"]["scaling"]:
        row["threads"] = None
    md = bench.markdown(results)
    assert "| 1 × – | one process" in md and "busy" not in md, md
