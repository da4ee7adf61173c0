"""Every script in ddp_scripts/ runs under torchrun with 1, 2 and 3 processes on a dataset size that
does not divide evenly, and rejects bad arguments with a one-line error and exit code 2."""

import json
import sys

import pytest
from conftest import SCRIPTS, run

# How each script is exercised (every ddp_scripts/*.py needs an entry; a test checks it):
#   args   a quick run; use a dataset size that 2 and 3 do not divide (e.g. 101)
#   out    True: the script takes --out FILE and must write JSON there
#   nprocs the process counts to launch with (default 1, 2 and 3; () for single-process scripts,
#          which then run once with plain python)
#   bad    arguments the script must reject: exit code 2, one line of error, no traceback
CASES = {
    "00_hello_ranks.py": dict(args=[], out=True, bad=["--timeout", "0"]),
    "01_single_device.py": dict(args=["--epochs", "1", "--dataset-size", "101"], out=True, nprocs=(),
                                bad=["--epochs", "0"]),
    "04_ddp_train.py": dict(args=["--epochs", "2", "--dataset-size", "101"], out=True,
                            bad=["--batch-size", "-1"]),
    # --- lessons 02, 03 ---
    "02_show_ranks.py": dict(args=[], out=True, bad=["--timeout", "0"]),
    "03_data_parallel.py": dict(args=["--epochs", "1", "--dataset-size", "101"], out=True, nprocs=(),
                                bad=["--batch-size", "0"]),
    # --- lesson 05 ---
    "05_rank_aware.py": dict(args=["--epochs", "2", "--dataset-size", "101", "--val-size", "31",
                                   "--checkpoint", "ckpt.pt"], out=True, bad=["--val-size", "0"]),
    # --- lessons 06, 07 ---
    "06_ddp_equals_large_batch.py": dict(args=["--epochs", "1", "--dataset-size", "101"], out=True,
                                         bad=["--epochs", "0"]),
    "07_allreduce_bench.py": dict(args=["--max-bytes", "64K", "--iters", "2", "--warmup", "1"], out=True,
                                  bad=["--max-bytes", "3x"]),
    "07_ddp_perf.py": dict(args=["--steps", "2", "--warmup", "1", "--width", "64", "--batch-size", "8",
                                 "--small-layers", "10", "--accumulate", "2", "--threads", "1"], out=True,
                           bad=["--steps", "0"]),
    # --- lessons 08, 09 ---
    "08_elastic_train.py": dict(args=["--epochs", "2", "--dataset-size", "101"], out=True,
                                bad=["--fail-at-step", "-2"]),
    "09_collective_bugs.py": dict(args=[], out=True, bad=["--timeout", "0"]),
    # --- lesson 10 ---
    "10_node_report.py": dict(args=[], out=True, bad=["--timeout", "0"]),
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


def _check(result, name, tmp_path):
    assert result.returncode == 0, f"{name} failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    assert "terminate called" not in result.stderr, "unclean shutdown"
    if CASES[name].get("out"):
        json.loads((tmp_path / "out.json").read_text())


@pytest.mark.parametrize("name,nprocs", LAUNCHES, ids=[f"{n}-{p}proc" for n, p in LAUNCHES])
def test_runs_under_torchrun(name, nprocs, tmp_path):
    cmd = ["torchrun", "--standalone", f"--nproc_per_node={nprocs}", *_command(name, tmp_path)]
    _check(run(cmd, cwd=tmp_path), name, tmp_path)


@pytest.mark.parametrize("name", SINGLE)
def test_runs_as_plain_python(name, tmp_path):
    _check(run([sys.executable, *_command(name, tmp_path)], cwd=tmp_path), name, tmp_path)


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_arguments_give_one_line_error(name, tmp_path):
    result = run([sys.executable, str(SCRIPTS / name), *CASES[name]["bad"]], cwd=tmp_path, timeout=60)
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{name}: error: "), last
