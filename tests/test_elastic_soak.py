"""Lesson 08's promise, soaked: a fault injected under `torchrun --max-restarts=1` is survived every
time, and the final parameters equal those of an uninterrupted run (20 consecutive runs).

    pytest -m slow tests/test_elastic_soak.py      # a few minutes
"""

import json
import time

import pytest
from conftest import SCRIPTS, run

SCRIPT = str(SCRIPTS / "08_elastic_train.py")
# 128 samples on 2 ranks, batch 32: 2 steps per epoch; the fault hits rank 1 in the middle of epoch 1.
ARGS = ["--epochs", "3", "--batch-size", "32", "--dataset-size", "128", "--seed", "0", "--timeout", "60"]
RUNS = 20


def _launch(tmp_path, name, *extra, max_restarts=0):
    out = tmp_path / f"{name}.json"
    cmd = ["torchrun", "--standalone", "--nproc_per_node=2", f"--max-restarts={max_restarts}", SCRIPT, *ARGS,
           "--snapshot-dir", str(tmp_path / name), "--out", str(out), *extra]
    result = run(cmd, cwd=tmp_path, timeout=300)
    return result, (json.loads(out.read_text()) if out.exists() else None)


@pytest.mark.slow
@pytest.mark.timeout(RUNS * 300)
def test_fault_injection_survives_20_consecutive_runs(tmp_path):
    result, reference = _launch(tmp_path, "reference")
    assert result.returncode == 0, result.stderr[-4000:]
    failures, seconds = [], []
    for i in range(RUNS):
        started = time.perf_counter()
        result, faulty = _launch(tmp_path, f"faulty_{i}", "--fail-at-step", "3", "--fail-rank", "1",
                                 max_restarts=1)
        seconds.append(time.perf_counter() - started)
        problem = None
        if result.returncode != 0:
            problem = f"exit code {result.returncode}: {result.stderr[-2000:]}"
        elif "injected fault: rank 1 fails at step 3" not in result.stderr:
            problem = "the fault was not injected"
        elif faulty["attempt"] != 1 or faulty["resumed_from_epoch"] != 1:
            problem = f"attempt {faulty['attempt']}, resumed from epoch {faulty['resumed_from_epoch']}"
        elif faulty["params_sha256"] != reference["params_sha256"] or faulty["steps"] != reference["steps"]:
            problem = "final parameters differ from the uninterrupted run"
        if problem:
            failures.append(f"run {i}: {problem}")
    print(f"{RUNS - len(failures)}/{RUNS} runs passed; {min(seconds):.1f}-{max(seconds):.1f} s per run")
    assert not failures, "\n".join(failures)
