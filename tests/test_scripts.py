"""Every script in ddp_scripts/ runs under torchrun with 1, 2 and 3 processes on a dataset size that
does not divide evenly, reports the world it ran in (written by rank 0 alone), and rejects bad
arguments with a one-line error and exit code 2."""

import contextlib
import datetime
import functools
import importlib.util
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
import torch
from conftest import SCRIPTS, env_with_bin, run

# How each script is exercised (every ddp_scripts/*.py needs an entry; a test checks it):
#   args   a quick run; use a dataset size that 2 and 3 do not divide (e.g. 101)
#   out    True: the script takes --out FILE and must write JSON there
#   nprocs the process counts to launch with (default 1, 2 and 3; () for single-process scripts,
#          which then run once with plain python)
#   shard  True: the JSON's samples_per_rank must be DistributedSampler's ceil(dataset size / N)
CASES = {
    "00_hello_ranks.py": dict(args=[], out=True),
    "01_single_device.py": dict(args=["--epochs", "1", "--dataset-size", "101"], out=True, nprocs=()),
    "04_ddp_train.py": dict(args=["--epochs", "2", "--dataset-size", "101"], out=True, shard=True),
    # --- lessons 02, 03 ---
    "02_show_ranks.py": dict(args=[], out=True),
    "03_data_parallel.py": dict(args=["--epochs", "1", "--dataset-size", "101"], out=True, nprocs=()),
    # --- lesson 05 ---
    "05_rank_aware.py": dict(args=["--epochs", "2", "--dataset-size", "101", "--val-size", "31",
                                   "--checkpoint", "ckpt.pt"], out=True),
    # --- lessons 06, 07 ---
    "06_ddp_equals_large_batch.py": dict(args=["--epochs", "1", "--dataset-size", "101"], out=True),
    "07_allreduce_bench.py": dict(args=["--max-bytes", "64K", "--iters", "2", "--warmup", "1"], out=True),
    "07_ddp_perf.py": dict(args=["--steps", "2", "--warmup", "1", "--width", "64", "--batch-size", "8",
                                 "--small-layers", "10", "--accumulate", "2", "--threads", "1"], out=True),
    # --- lessons 08, 09 ---
    "08_elastic_train.py": dict(args=["--epochs", "2", "--dataset-size", "101"], out=True, shard=True),
    "09_collective_bugs.py": dict(args=[], out=True),
    # --- lesson 10 ---
    "10_node_report.py": dict(args=[], out=True),
    "10_signal_report.py": dict(args=["--timeout", "0.5", "--events", "signals.jsonl"], out=True),
    # --- lesson 11 ---
    "11_fast_ddp.py": dict(args=["--variants", "fp32,bf16,fp16,compile,bucket-view,fp16-hook,bf16-hook,powersgd",
                                 "--compile-backend", "eager", "--epochs", "1", "--dataset-size", "101", "--batch-size",
                                 "16", "--rounds", "2", "--round-steps", "1", "--accumulate", "2"], out=True),
    # --- lesson 12 ---
    "12_data_loading.py": dict(args=["--dataset-size", "101", "--item-ms", "0.2", "--step-ms", "0.5", "--rounds", "1"],
                               out=True),
    "12_uneven_inputs.py": dict(args=["--dataset-size", "101"], out=True),
    # --- lesson 13 ---
    "13_zero_fsdp.py": dict(args=["--width", "32", "--layers", "2", "--steps", "4", "--rounds", "2",
                                  "--dataset-size", "101"], out=True),
    "13_sharded_checkpoint.py": dict(args=["--save", "ckpt", "--width", "32", "--layers", "2", "--steps", "2",
                                           "--dataset-size", "101"], out=True),
}

LAUNCHES = [(name, n) for name, case in sorted(CASES.items()) for n in case.get("nprocs", (1, 2, 3))]
SINGLE = [name for name, case in sorted(CASES.items()) if case.get("nprocs", (1,)) == ()]


def test_every_script_has_a_case():
    scripts = sorted(p.name for p in SCRIPTS.glob("*.py"))
    assert scripts == sorted(CASES), "add the missing scripts to CASES (or remove stale entries)"


def _command(name, tmp_path):
    case = CASES[name]
    args = [str(SCRIPTS / name), *case["args"]]
    if case.get("out"):
        args += ["--out", str(tmp_path / "out.json")]
    return args


# Who writes --out: an audit hook (PEP 578), loaded into every process through sitecustomize, logs the
# RANK of each process that opens the file for writing. It sees any write, however the script does it.
WRITE_HOOK = """import os, sys
_out, _log = os.environ["WATCH_OUT"], os.environ["WATCH_LOG"]
def _hook(event, args):
    if event == "open" and isinstance(args[1], str) and set(args[1]) & set("wax+"):
        try:
            path = os.path.abspath(os.fspath(args[0]))
        except TypeError:  # a file descriptor
            return
        if path == _out:
            with open(_log, "a") as log:  # another path: the hook ignores this open
                log.write(os.environ.get("RANK", "none") + "\\n")
sys.addaudithook(_hook)
"""


def _run_watched(cmd, tmp_path):
    """Run cmd with the write hook; returns (result, the ranks that opened out.json for writing)."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(WRITE_HOOK)
    log = tmp_path / "writers.log"
    env = dict(env_with_bin(), PYTHONPATH=str(hook), WATCH_OUT=str(tmp_path / "out.json"), WATCH_LOG=str(log))
    result = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    return result, (log.read_text().split() if log.exists() else [])


def _check(result, name, tmp_path, nprocs=None, writers=None):
    assert result.returncode == 0, f"{name} failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    assert "terminate called" not in result.stderr, "unclean shutdown"
    case = CASES[name]
    if not case.get("out"):
        return
    report = json.loads((tmp_path / "out.json").read_text())
    assert sorted(p.name for p in tmp_path.glob("*.json")) == ["out.json"], sorted(tmp_path.glob("*.json"))
    if writers is not None:  # rank 0 alone wrote it (plain python: the one process, no RANK)
        assert writers and set(writers) == {"0" if nprocs else "none"}, f"opened for writing by ranks {writers}"
    world = nprocs or 1
    if "world_size" in report:
        assert report["world_size"] == world, (report["world_size"], world)
    if "ranks" in report:  # one entry per process, gathered by rank 0 (02 names them as its calls do)
        ranks = report["ranks"]
        assert [r["rank"] if "rank" in r else r["get_rank"] for r in ranks] == list(range(world)), ranks
        assert all(r.get("world_size", r.get("get_world_size", world)) == world for r in ranks), ranks
    if case.get("shard"):
        size = int(case["args"][case["args"].index("--dataset-size") + 1])
        assert report["samples_per_rank"] == math.ceil(size / world), (report["samples_per_rank"], size, world)


def test_scripts_report_what_the_checks_read():
    """The checks above are not vacuous: these scripts do report a world size or per-rank entries."""
    reporting = [name for name in CASES if CASES[name].get("out")
                 and re.search(r"world_size=|ranks=", (SCRIPTS / name).read_text())]
    assert {"00_hello_ranks.py", "02_show_ranks.py", "04_ddp_train.py", "08_elastic_train.py",
            "09_collective_bugs.py", "10_node_report.py"} <= set(reporting), reporting


@pytest.mark.parametrize("name,nprocs", LAUNCHES, ids=[f"{n}-{p}proc" for n, p in LAUNCHES])
def test_runs_under_torchrun(name, nprocs, tmp_path):
    cmd = ["torchrun", "--standalone", f"--nproc_per_node={nprocs}", *_command(name, tmp_path)]
    result, writers = _run_watched(cmd, tmp_path)
    _check(result, name, tmp_path, nprocs, writers)


@pytest.mark.parametrize("name", SINGLE)
def test_runs_as_plain_python(name, tmp_path):
    result, writers = _run_watched([sys.executable, *_command(name, tmp_path)], tmp_path)
    _check(result, name, tmp_path, None, writers)


# Bad input a learner can type, for every script: each must be refused before any work, in one line
# (argparse's "NAME: error: ..."), with exit code 2. BLOCKED_OUT is replaced by a path under a file,
# which cannot be created even as root.
COMMON_BAD = {
    "--timeout": (["nan"], ["inf"], ["0"], ["-5"], ["soon"]),
    "--out": (["BLOCKED_OUT"], ["."]),
    "--epochs": (["0"], ["1.5"]),
    "--batch-size": (["-1"],),
    "--dataset-size": (["0"],),
    "--lr": (["nan"], ["inf"], ["-0.1"], ["0"]),
    "--num-classes": (["1"],),
    "--seed": (["-1"],),
    "--device": (["gpu"], ["cuda:0"]),
}
SPECIFIC_BAD = {
    "00_hello_ranks.py": [["--fail-rank", "3"], ["--fail-rank", "-2"]],
    "05_rank_aware.py": [["--val-size", "0"], ["--trap"], ["--nan-rank", "1"], ["--checkpoint", "BLOCKED_OUT"]],
    "06_ddp_equals_large_batch.py": [["--dataset-size", "4", "--batch-size", "8"]],
    "07_allreduce_bench.py": [["--max-bytes", "3x"], ["--max-bytes", "inf"], ["--min-bytes", "nan"],
                              ["--min-bytes", "8M", "--max-bytes", "4K"], ["--iters", "0"], ["--warmup", "-1"]],
    "07_ddp_perf.py": [["--steps", "0"], ["--threads", "0"], ["--bucket-caps", "nan"], ["--bucket-caps", "1,inf"],
                       ["--threads", "1,x"], ["--data-parallel", "99"], ["--warmup", "-1"]],
    "08_elastic_train.py": [["--fail-at-step", "-2"], ["--fail-at-step", "3", "--fail-rank", "1"],
                            ["--snapshot-dir", "BLOCKED_OUT"], ["--signal-at-step", "0"], ["--signal-at-step", "x"],
                            ["--pause-at-step", "-1"]],
    "09_collective_bugs.py": [["--bug", "typo"]],
    "10_signal_report.py": [[], ["--events", "BLOCKED_OUT"], ["--events", "e.jsonl", "--save", "0"],
                            ["--events", "e.jsonl", "--save", "nan"]],
    "11_fast_ddp.py": [["--variants", "fp32,turbo"], ["--variants", "fp32,fp32"], ["--variants", ""],
                       ["--compile-backend", "no-such-backend"], ["--bucket-cap-mb", "0"], ["--powersgd-rank", "0"],
                       ["--rounds", "0"], ["--round-steps", "x"], ["--warmup-steps", "-1"], ["--accumulate", "-1"],
                       ["--clip-norm", "nan"], ["--variants", "fp32,compile", "--bucket-cap-mb", "0.25"]],
    "12_data_loading.py": [["--workers", "0"], ["--workers", "x"], ["--item-ms", "-1"], ["--step-ms", "nan"],
                           ["--rounds", "0"], ["--dataset-size", "4"], ["--item-wait-ms", "0"]],
    "12_uneven_inputs.py": [["--even-files", "--dataset-size", "0"], ["--divide-by-remaining", "--lr", "inf"],
                            ["--bug", "no-join"]],
    "13_zero_fsdp.py": [["--steps", "1"], ["--steps", "x"], ["--width", "0"], ["--layers", "-1"], ["--rounds", "0"],
                        ["--threads", "0"]],
    "13_sharded_checkpoint.py": [[], ["--load", "nowhere"], ["--save", "BLOCKED_OUT"], ["--steps", "0"],
                                 ["--save", "ckpt", "--load", "ckpt"]],
}


def _options(name):
    text = (SCRIPTS / name).read_text()
    return [option for option in COMMON_BAD if f'"{option}"' in text]


BAD = [(name, [option, *values]) for name in sorted(CASES) for option in _options(name)
       for values in COMMON_BAD[option]] + [(name, args) for name, cases in SPECIFIC_BAD.items() for args in cases]


def test_every_script_refuses_something():
    assert {name for name, _ in BAD} == set(CASES), "every script needs bad-argument cases"


@functools.cache
def _load(name):
    """Import a script as a module (its main() does not run), to call its parse_args() in this process."""
    spec = importlib.util.spec_from_file_location(name[:-3], SCRIPTS / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name,bad", BAD, ids=[f"{n}:{' '.join(b)}" for n, b in BAD])
def test_bad_arguments_give_one_line_error(name, bad, tmp_path, monkeypatch, capsys):
    """In this process, for speed: the script's own parse_args() on the bad arguments."""
    (tmp_path / "a_file").write_text("")
    bad = [str(tmp_path / "a_file" / "out.json") if arg == "BLOCKED_OUT" else arg for arg in bad]
    monkeypatch.chdir(tmp_path)
    for variable in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(sys, "argv", [name, *bad])
    with pytest.raises(SystemExit) as exited:
        _load(name).parse_args()
    captured = capsys.readouterr()
    assert exited.value.code == 2, (exited.value.code, captured.err)
    assert captured.err.strip().splitlines()[-1].startswith(f"{name}: error: "), captured.err
    assert captured.out == "", captured.out


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_argument_stops_the_script_before_any_work(name, tmp_path):
    """As a learner runs it: exit code 2, one line of error after the usage, no traceback, no output."""
    (tmp_path / "a_file").write_text("")
    option = "--out" if "--out" in _options(name) else _options(name)[0]
    bad = [option, str(tmp_path / "a_file" / "out.json") if option == "--out" else COMMON_BAD[option][0][0]]
    result = run([sys.executable, str(SCRIPTS / name), *bad], cwd=tmp_path, timeout=60)
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(f"{name}: error: argument {option}: "), result.stderr
    assert result.stdout == "", f"no work before the error: {result.stdout[-2000:]}"


# A loss that turns nan or inf stops the run with a message naming the epoch and the step. --lr 1e6 makes
# the loss of these small runs overflow within a few steps.
DIVERGING = {
    "01_single_device.py": ["--dataset-size", "256", "--epochs", "2"],
    "03_data_parallel.py": ["--dataset-size", "256", "--epochs", "2"],
    "04_ddp_train.py": ["--dataset-size", "256", "--epochs", "2"],
    "05_rank_aware.py": ["--dataset-size", "256", "--epochs", "2"],
    "06_ddp_equals_large_batch.py": ["--dataset-size", "96", "--epochs", "2"],
    "08_elastic_train.py": ["--dataset-size", "256", "--epochs", "2", "--snapshot-dir", "snap"],
}


@pytest.mark.parametrize("name", sorted(DIVERGING))
def test_non_finite_loss_stops_the_run(name, tmp_path):
    result = run([sys.executable, str(SCRIPTS / name), *DIVERGING[name], "--lr", "1e6", "--out", "out.json"],
                 cwd=tmp_path, timeout=120)
    assert result.returncode == 1, (result.returncode, result.stdout[-2000:], result.stderr[-3000:])
    last = result.stderr.strip().splitlines()[-1]
    assert re.search(r"stopping: non-finite (loss|gradients).* at epoch \d+, step \d+ ", last), last
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert not (tmp_path / "out.json").exists(), "no results from a diverged run"


def test_one_ranks_nan_stops_every_rank_at_the_same_step(tmp_path):
    cmd = ["torchrun", "--standalone", "--nproc_per_node=3", "--monitor-interval", "2",
           str(SCRIPTS / "05_rank_aware.py"), "--epochs", "1", "--dataset-size", "192", "--nan-rank", "2"]
    result = run(cmd, cwd=tmp_path)
    # the ranks share torchrun's stderr: two messages can land on one line, so find messages, not lines
    stops = sorted(re.findall(r"\[rank (\d)\] stopping: non-finite (loss|gradients).*? at epoch (\d+), step (\d+) ",
                              result.stderr))
    assert result.returncode != 0 and [rank for rank, *_ in stops] == ["0", "1", "2"], result.stderr[-4000:]
    assert {(epoch, step) for *_, epoch, step in stops} == {("0", "1")}, stops
    assert [what for _, what, *_ in stops] == ["gradients", "gradients", "loss"], stops


# Checkpoints and snapshots: a damaged file is one line and exit code 2 (never PyTorch's advice to retry
# with weights_only=False); another run's file is refused; lesson 08 falls back to the snapshot before.
def _train(name, tmp_path, *args):
    return run([sys.executable, str(SCRIPTS / name), "--dataset-size", "64", *args], cwd=tmp_path, timeout=120)


def _one_line_error(result, *fragments):
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr[-3000:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert all(fragment in lines[0] for fragment in fragments), lines[0]
    assert "weights_only=False" not in result.stderr + result.stdout


def test_damaged_checkpoint_is_one_line(tmp_path):
    assert _train("05_rank_aware.py", tmp_path, "--epochs", "1", "--checkpoint", "ckpt.pt").returncode == 0
    good = (tmp_path / "ckpt.pt").read_bytes()
    for damaged in (good[: len(good) // 2], b"", b"not a checkpoint at all"):
        (tmp_path / "ckpt.pt").write_bytes(damaged)
        result = _train("05_rank_aware.py", tmp_path, "--epochs", "2", "--checkpoint", "ckpt.pt")
        _one_line_error(result, "not a valid checkpoint: ckpt.pt", "delete it or pass another")
    torch.save({"model": {}, "when": datetime.datetime.now()}, tmp_path / "ckpt.pt")  # not plain tensors
    result = _train("05_rank_aware.py", tmp_path, "--epochs", "2", "--checkpoint", "ckpt.pt")
    _one_line_error(result, "not a valid checkpoint", "weights_only=True does not load")


def test_another_runs_checkpoint_is_refused(tmp_path):
    assert _train("05_rank_aware.py", tmp_path, "--epochs", "1", "--checkpoint", "ckpt.pt").returncode == 0
    before = (tmp_path / "ckpt.pt").read_bytes()
    result = _train("05_rank_aware.py", tmp_path, "--epochs", "2", "--checkpoint", "ckpt.pt", "--lr", "0.05")
    _one_line_error(result, "belongs to a run with other settings", "--lr 0.01 there, 0.05 here")
    assert (tmp_path / "ckpt.pt").read_bytes() == before
    longer = _train("05_rank_aware.py", tmp_path, "--epochs", "2", "--checkpoint", "ckpt.pt", "--out", "out.json")
    assert longer.returncode == 0, longer.stderr[-3000:]  # more epochs: a continuation
    assert json.loads((tmp_path / "out.json").read_text())["start_epoch"] == 1


def test_another_runs_snapshot_is_refused(tmp_path):
    """The exact case found by hand: --epochs 2 --dataset-size 64, then other settings in the same folder."""
    first = run([sys.executable, str(SCRIPTS / "08_elastic_train.py"), "--epochs", "2", "--dataset-size", "64"],
                cwd=tmp_path, timeout=120)
    assert first.returncode == 0, first.stderr[-3000:]
    result = run([sys.executable, str(SCRIPTS / "08_elastic_train.py"), "--epochs", "3", "--dataset-size", "2048",
                  "--lr", "0.05"], cwd=tmp_path, timeout=120)
    _one_line_error(result, "snapshot/snapshot.pt belongs to a run with other settings",
                    "--dataset-size 64 there, 2048 here", "--lr 0.01 there, 0.05 here", "another --snapshot-dir")


def test_damaged_snapshot_falls_back_to_the_one_before(tmp_path):
    args = ["--snapshot-dir", "snap", "--out", "out.json"]
    assert _train("08_elastic_train.py", tmp_path, "--epochs", "2", *args).returncode == 0
    newest = tmp_path / "snap" / "snapshot.pt"
    newest.write_bytes(newest.read_bytes()[:500])
    resumed = _train("08_elastic_train.py", tmp_path, "--epochs", "3", *args)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "not a valid snapshot: snap/snapshot.pt (damaged or cut short" in resumed.stdout, resumed.stdout
    assert json.loads((tmp_path / "out.json").read_text())["resumed_from_epoch"] == 1  # the one before: epoch 0 done
    for name in ("snapshot.pt", "snapshot.prev.pt"):
        (tmp_path / "snap" / name).write_bytes(b"garbage")
    result = _train("08_elastic_train.py", tmp_path, "--epochs", "4", *args)
    _one_line_error(result, "no valid snapshot in snap", "delete them or pass another --snapshot-dir")


# Preemption (08): SIGUSR1 (SLURM's warning before it stops a job) makes every rank stop at the next step
# boundary; rank 0 saves a snapshot, logs "preempted", every rank exits 0; the same command resumes there,
# and the final parameters equal an uninterrupted run's bit for bit (2 processes, gloo). 128 samples, batch
# 16, 2 ranks: 4 steps per epoch, 12 in all; the signal comes before step 6, in the middle of epoch 1.
PREEMPT_ARGS = ["--epochs", "3", "--dataset-size", "128", "--batch-size", "16", "--timeout", "30"]
PREEMPT_STEP = 6


def _preempt_cmd(name, *extra):
    return [str(SCRIPTS / "08_elastic_train.py"), *PREEMPT_ARGS, "--snapshot-dir", name, "--out", f"{name}.json",
            *extra]


def _events(folder):
    path = folder / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The yardstick: the same run under torchrun with 2 processes, never signalled."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    result = run(["torchrun", "--standalone", "--nproc_per_node=2", *_preempt_cmd("reference")], cwd=folder,
                 timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads((folder / "reference.json").read_text())


def _check_preempted_then_resumed(tmp_path, name, stopped, resume, reference):
    """stopped: the signalled run's result. Its snapshot and log say where it stopped; resume() continues it
    to the end, with the parameters and per-epoch metrics of the uninterrupted run."""
    assert stopped.returncode == 0, (stopped.returncode, stopped.stdout[-2000:], stopped.stderr[-4000:])
    assert "terminate called" not in stopped.stderr, "unclean shutdown"
    line = f"preempted at epoch 1 step {PREEMPT_STEP}: snapshot saved, exit to be requeued"
    assert stopped.stdout.count(line) == 1, stopped.stdout[-2000:]  # printed by rank 0 alone
    assert _events(tmp_path / name)[-1] == dict(event="preempted", attempt=0, epoch=1, step=PREEMPT_STEP), \
        _events(tmp_path / name)
    assert not (tmp_path / f"{name}.json").exists(), "a preempted run writes no results"
    snapshot = torch.load(tmp_path / name / "snapshot.pt", map_location="cpu", weights_only=True)
    assert (snapshot["epoch"], snapshot["step"], snapshot["in_epoch"]["steps_done"]) == (1, PREEMPT_STEP, 2), \
        (snapshot["epoch"], snapshot["step"], snapshot["in_epoch"])
    resumed = resume()
    assert resumed.returncode == 0, (resumed.stdout[-2000:], resumed.stderr[-4000:])
    assert f"starting from snapshot: epoch 1, step {PREEMPT_STEP}" in resumed.stdout, resumed.stdout[-2000:]
    report = json.loads((tmp_path / f"{name}.json").read_text())
    assert report["resumed_from_epoch"] == 1 and report["steps"] == reference["steps"] == 12, \
        (report["resumed_from_epoch"], report["steps"], reference["steps"])
    assert report["params_sha256"] == reference["params_sha256"], "final parameters differ from the uninterrupted run"
    assert report["history"] == reference["history"], (report["history"], reference["history"])
    assert [(e["event"], e["step"]) for e in report["events"] if e["event"] != "paused"] == \
        [("start", 0), ("preempted", PREEMPT_STEP), ("start", PREEMPT_STEP), ("finish", 12)], report["events"]


def test_08_preempted_at_a_step_by_signal_resumes_bit_for_bit(tmp_path, uninterrupted):
    """--signal-at-step: the last rank (1) sends itself SIGUSR1, rank 0 gets nothing, and both stop. The same
    command again resumes at that step and passes it (the drill fires only in a run that reaches it)."""
    cmd = ["torchrun", "--standalone", "--nproc_per_node=2", *_preempt_cmd("snap", "--signal-at-step",
                                                                           str(PREEMPT_STEP))]
    stopped = run(cmd, cwd=tmp_path, timeout=120)
    _check_preempted_then_resumed(tmp_path, "snap", stopped, lambda: run(cmd, cwd=tmp_path, timeout=120),
                                  uninterrupted)


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _paused(folder):
    """The "paused" events so far; complete lines only (a rank may be writing the last one)."""
    path = folder / "events.jsonl"
    lines = path.read_text().split("\n")[:-1] if path.exists() else []
    return [event for event in map(json.loads, lines) if event["event"] == "paused"]


def test_08_preempt_kill_usr1_one_process_started_like_srun(tmp_path, uninterrupted):
    """As `srun` starts it (lesson 10): one plain python per rank, RANK/LOCAL_RANK/WORLD_SIZE/MASTER_ADDR/
    MASTER_PORT in the environment, no torchrun. --pause-at-step holds every rank before the step (bounded by
    --timeout) and logs its pid; a real `kill -USR1` of rank 1 alone stops both there: no
    guess at how long anything takes."""
    def launch(*extra):
        env = dict(env_with_bin(), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), WORLD_SIZE="2",
                   LOCAL_WORLD_SIZE="2",
                   OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))  # as torchrun sets it
        return [subprocess.Popen([sys.executable, *_preempt_cmd("snap", *extra)], cwd=tmp_path, text=True,
                                 env=dict(env, RANK=str(rank), LOCAL_RANK=str(rank)), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE) for rank in (0, 1)]

    def finish(processes):
        try:
            outputs = [p.communicate(timeout=60) for p in processes]
        finally:
            for p in processes:
                if p.poll() is None:
                    p.kill()
        return subprocess.CompletedProcess("srun-like", max(p.returncode for p in processes),
                                           "".join(out for out, _ in outputs), "".join(err for _, err in outputs))

    processes = launch("--pause-at-step", str(PREEMPT_STEP))
    try:  # wait (bounded) until both ranks have paused and said their pids
        deadline = time.monotonic() + 60
        while len(paused := _paused(tmp_path / "snap")) < 2:
            assert time.monotonic() < deadline and all(p.poll() is None for p in processes), \
                [p.poll() for p in processes]
            time.sleep(0.1)
        assert sorted((e["rank"], e["step"]) for e in paused) == [(0, PREEMPT_STEP), (1, PREEMPT_STEP)], paused
        assert {e["pid"] for e in paused} == {p.pid for p in processes}, (paused, [p.pid for p in processes])
        os.kill(next(e["pid"] for e in paused if e["rank"] == 1), signal.SIGUSR1)  # rank 0 gets nothing
    except BaseException:
        for p in processes:
            p.kill()
        raise
    finally:
        stopped = finish(processes)
    _check_preempted_then_resumed(tmp_path, "snap", stopped, lambda: finish(launch()), uninterrupted)


def test_08_preempt_torchrun_passes_usr1_on_only_when_asked(tmp_path):
    """torchrun's agent (torch 2.13) handles only --signals-to-handle. With SIGUSR1 added, a SIGUSR1 sent to
    the agent reaches every worker; they save and exit 0, and the agent exits 1 (SignalException). Without
    it the agent dies of the signal and the workers never see it (checked by hand: it takes --timeout)."""
    cmd = ["torchrun", "--standalone", "--nproc_per_node=2",
           "--signals-to-handle=SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1",
           *_preempt_cmd("snap", "--pause-at-step", str(PREEMPT_STEP))]
    agent = subprocess.Popen(cmd, cwd=tmp_path, env=env_with_bin(), text=True, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while len(_paused(tmp_path / "snap")) < 2:
            assert time.monotonic() < deadline and agent.poll() is None, agent.poll()
            time.sleep(0.1)
        agent.send_signal(signal.SIGUSR1)
        out, err = agent.communicate(timeout=60)
    finally:
        if agent.poll() is None:
            agent.kill()
        for event in _paused(tmp_path / "snap"):  # the workers live in sessions of their own
            with contextlib.suppress(ProcessLookupError):
                os.kill(event["pid"], signal.SIGKILL)
    assert agent.returncode == 1 and "SignalException: Process" in err, (agent.returncode, err[-3000:])
    assert f"preempted at epoch 1 step {PREEMPT_STEP}: snapshot saved, exit to be requeued" in out, out[-2000:]
    assert _events(tmp_path / "snap")[-1] == dict(event="preempted", attempt=0, epoch=1, step=PREEMPT_STEP)
    assert "terminate called" not in err and "[rank" not in err, err[-3000:]  # no worker complained
