"""tools/gpu_check.py, the check a user runs on a CUDA machine. CI has no GPU, so these tests run the
check's CPU self-test (--cpu) on a few scripts, its report and README functions directly, and the
"no CUDA here" path. Where a test needs what only a GPU machine has (an NVIDIA device file, nvidia-smi,
a CUDA torch's warning), it uses a stand-in and says so. The check's GPU results come from real GPU runs
only (verified/)."""

import datetime
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import gpu_check
import pytest
import torch
from conftest import REPO, SCRIPTS, run

TOOL = REPO / "tools" / "gpu_check.py"
REPORT_FIELDS = {"format", "date", "mode", "run", "only", "python", "torch", "cuda", "nccl", "gpus", "gpu_count",
                 "host", "world_sizes", "coverage", "timeout_s", "budget_s", "estimate_s", "seconds", "planned",
                 "complete", "checks", "lessons_skipped", "passed", "failed"}
CHECK_FIELDS = {"kind", "name", "processes", "distributed", "ok", "seconds", "exit_code", "last_error_line",
                "backend", "log"}
NO_NVIDIA_HERE = not Path("/dev/nvidia0").exists() and shutil.which("nvidia-smi") is None


def test_quick_covers_exactly_the_scripts():
    assert sorted(gpu_check.QUICK) == sorted(p.name for p in SCRIPTS.glob("*.py")), \
        "add the missing scripts to QUICK in tools/gpu_check.py (or remove stale entries)"


def test_quick_runs_are_the_tests_quick_runs():
    """The check needs no pytest, so it keeps its own table: it must not drift from tests/test_scripts.py's."""
    from test_scripts import CASES
    differing = {name: (args, CASES[name]["args"]) for name, (args, _) in gpu_check.QUICK.items()
                 if args != CASES[name]["args"]}
    assert not differing, f"QUICK's arguments differ from CASES' (QUICK, CASES): {differing}"


def test_every_script_has_a_cpu_timing_for_the_estimate():
    assert sorted(gpu_check.CPU_SECONDS) == sorted(gpu_check.QUICK), \
        "measure the missing scripts' quick runs (--cpu --quick, --nproc 1 and 2) into CPU_SECONDS"


def test_distributed_scripts_are_those_that_form_a_process_group():
    wrong = [name for name, (_, distributed) in gpu_check.QUICK.items()
             if distributed != ("init_process_group" in (SCRIPTS / name).read_text())]
    assert not wrong, f"QUICK says the wrong thing about torchrun for {wrong}"


@pytest.mark.skipif(torch.cuda.is_available() or not NO_NVIDIA_HERE, reason="this machine has an NVIDIA GPU")
@pytest.mark.parametrize("quick", [[], ["--quick"]], ids=["full", "quick"])
def test_without_cuda_it_says_so_and_writes_nothing(tmp_path, quick):
    result = run([sys.executable, str(TOOL), *quick, "--out", str(tmp_path / "out")], cwd=tmp_path, timeout=60)
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    assert result.stdout.startswith("no CUDA here (torch ") and len(result.stdout.splitlines()) == 1, result.stdout
    assert "no NVIDIA GPU found" in result.stdout and "--cpu" in result.stdout, result.stdout
    assert not (tmp_path / "out").exists()


def _stand_in_nvidia_smi(folder):
    """A STAND-IN for nvidia-smi on a machine with one GPU: it prints what `nvidia-smi -L` prints there."""
    smi = folder / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-00000000-stand-in)'\n")
    smi.chmod(0o755)
    return smi


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: torch can use its GPU")
@pytest.mark.parametrize("present_as", ["device file", "nvidia-smi"])
def test_an_nvidia_gpu_that_torch_cannot_use_fails_in_one_line(tmp_path, present_as):
    """This torch really cannot use CUDA (a CPU build); the GPU's presence is a STAND-IN: the check is
    pointed at a plain file instead of /dev/nvidia0, or at a script that answers like nvidia-smi -L."""
    if present_as == "device file":
        (tmp_path / "nvidia0").write_text("")
        env = {gpu_check.DEVICE_FILE_VARIABLE: str(tmp_path / "nvidia0"),
               gpu_check.NVIDIA_SMI_VARIABLE: str(tmp_path / "no-nvidia-smi")}
    else:
        env = {gpu_check.DEVICE_FILE_VARIABLE: str(tmp_path / "no-nvidia0"),
               gpu_check.NVIDIA_SMI_VARIABLE: str(_stand_in_nvidia_smi(tmp_path))}
    result = subprocess.run([sys.executable, str(TOOL), "--quick", "--out", str(tmp_path / "out")], cwd=tmp_path,
                            env={**os.environ, **env}, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == "" and len(result.stderr.splitlines()) == 1, (result.stdout, result.stderr)
    evidence = (f"{tmp_path / 'nvidia0'} exists" if present_as == "device file"
                else "nvidia-smi -L lists GPU 0: NVIDIA H200")
    assert result.stderr.startswith(f"an NVIDIA GPU is present ({evidence}"), result.stderr
    assert "torch.cuda.is_available() is False: this torch (" in result.stderr, result.stderr
    assert "is a CPU build" in result.stderr and result.stderr.rstrip().endswith("Nothing was checked."), result.stderr
    assert not (tmp_path / "out").exists()


def test_the_reason_names_what_hides_the_gpu(monkeypatch):
    """STAND-INS for a CUDA build of torch (torch.version.cuda and is_available replaced): the warning
    that a CUDA build gives when the driver is older than it, and CUDA_VISIBLE_DEVICES hiding the GPUs."""
    driver = ("CUDA initialization: The NVIDIA driver on your system is too old (found version 12020). "
              "Please update your GPU driver.")

    def is_available_with_an_old_driver():
        import warnings
        warnings.warn(driver, UserWarning, stacklevel=1)
        return False

    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.cuda, "is_available", is_available_with_an_old_driver)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    available, said = gpu_check.cuda_status()
    assert (available, said) == (False, driver), (available, said)
    line = gpu_check.unusable_gpu_message("/dev/nvidia0 exists", said)
    assert line == (f"an NVIDIA GPU is present (/dev/nvidia0 exists) but torch.cuda.is_available() is False: "
                    f"torch {torch.__version__} (CUDA 13.0) says: {driver}. Nothing was checked."), line
    assert "driver older than that CUDA" in gpu_check.why_no_cuda("")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpu_check.why_no_cuda(driver) == "CUDA_VISIBLE_DEVICES='' hides every GPU"


def test_a_torch_older_than_2_10_is_refused_in_one_line(monkeypatch, capsys):
    assert gpu_check.too_old_message("2.10.0") is None and gpu_check.too_old_message("2.11.0+cu128") is None
    assert gpu_check.too_old_message("3.0.0") is None
    monkeypatch.setattr(torch, "__version__", "2.9.1+cu126")  # a STAND-IN: the installed torch is newer
    monkeypatch.setattr(sys, "argv", ["gpu_check.py"])
    with pytest.raises(SystemExit) as exited:
        gpu_check.main(["--quick"])
    err = capsys.readouterr().err
    assert exited.value.code == 2, err
    assert err.strip().splitlines()[-1] == ("gpu_check.py: error: torch 2.9.1+cu126 is older than 2.10, the oldest "
                                            "this series supports: run the check with a Python whose torch is "
                                            "2.10 or newer"), err


BAD_ARGUMENTS = [["--timeout", "0"], ["--timeout", "nan"], ["--nproc", "0"], ["--budget", "-1"], ["--only", ","],
                 ["--only", "99"], ["--check"], ["--frobnicate"]]


@pytest.mark.parametrize("bad", BAD_ARGUMENTS, ids=" ".join)
def test_bad_arguments_give_one_line_error(bad, monkeypatch, capsys):
    """After argparse's usage, one line says what is wrong; exit code 2."""
    monkeypatch.setattr(sys, "argv", ["gpu_check.py"])
    monkeypatch.setenv(gpu_check.DEVICE_FILE_VARIABLE, "/nonexistent/nvidia0")
    monkeypatch.setenv(gpu_check.NVIDIA_SMI_VARIABLE, "/nonexistent/nvidia-smi")
    with pytest.raises(SystemExit) as exited:
        gpu_check.main(bad)
    captured = capsys.readouterr()
    assert exited.value.code == 2, (exited.value.code, captured)
    assert captured.err.strip().splitlines()[-1].startswith("gpu_check.py: error: "), captured.err
    assert captured.out == "", captured.out


def _self_test(tmp_path, *args, timeout=240):
    out = tmp_path / "out"
    result = run([sys.executable, str(TOOL), "--cpu", "--out", str(out), *args], cwd=tmp_path, timeout=timeout)
    return result, out


def test_cpu_self_test_reports_every_launch(tmp_path):
    result, out = _self_test(tmp_path, "--only", "00,04", "--no-lessons")
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    report = json.loads((out / "report.json").read_text())
    assert set(report) == REPORT_FIELDS, set(report) ^ REPORT_FIELDS
    assert report["format"] == 2 and report["mode"] == "cpu self-test (not a GPU result)", report["mode"]
    covered = (report["run"], report["only"], report["world_sizes"], report["coverage"], report["timeout_s"],
               report["budget_s"], report["planned"], report["complete"])
    assert covered == ("full", ["00", "04"], [2], "gloo at 2 processes", 300, None, 2, True), covered
    assert datetime.datetime.fromisoformat(report["date"]).utcoffset() == datetime.timedelta(0), report["date"]
    assert (report["torch"], report["cuda"]) == (torch.__version__, torch.version.cuda), report
    assert report["gpu_count"] == len(report["gpus"]) and report["host"], report
    checks = report["checks"]
    assert [(c["kind"], c["name"], c["processes"]) for c in checks] == [
        ("script", "00_hello_ranks.py", 2), ("script", "04_ddp_train.py", 2)], checks
    for check in checks:
        assert set(check) == CHECK_FIELDS, set(check) ^ CHECK_FIELDS
        outcome = (check["ok"], check["exit_code"], check["backend"], check["last_error_line"])
        assert outcome == (True, 0, "gloo", ""), check
        assert (out / check["log"]).is_file(), check["log"]
    assert (report["passed"], report["failed"], report["lessons_skipped"]) == (2, 0, "--no-lessons"), report
    md = (out / "report.md").read_text()
    assert "not a GPU result" in md.splitlines()[0], md
    for check in checks:
        assert f"| `{check['name']}` | 2 | ok (gloo) | {check['seconds']} |" in md, md
    assert "| check | processes | result | seconds |" in result.stdout, result.stdout
    assert result.stdout.strip().splitlines()[-1].startswith("2 passed, 0 failed"), result.stdout


def test_cpu_self_test_runs_a_lesson(tmp_path):
    pytest.importorskip("papermill")
    result, out = _self_test(tmp_path, "--only", "00_setup")
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    report = json.loads((out / "report.json").read_text())
    checks = [(c["kind"], c["name"], c["processes"], c["ok"]) for c in report["checks"]]
    assert checks == [("lesson", "00_setup.ipynb", 2, True)], report
    assert (out / "lessons" / "00_setup.ipynb").is_file() and report["lessons_skipped"] is None, report


def test_quick_self_test_prints_its_estimate_and_writes_report_and_logs(tmp_path):
    """--quick on two scripts: the whole quick self-test takes 2.5-5 minutes on 2 cores, too long for a test
    (its times are CPU_SECONDS). One process per launch, as on a one-GPU machine."""
    result, out = _self_test(tmp_path, "--quick", "--only", "00,01", "--nproc", "1", timeout=200)
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    lines = result.stdout.splitlines()
    assert lines[0] == ("plan (quick, cpu self-test (not a GPU result)): 2 launches (1 distributed × 1 process, "
                        "1 single-process), timeout 90 s each; no lessons (--quick runs the scripts only)"), lines
    expected = sum(gpu_check.CPU_SECONDS[name][0] for name in ("00_hello_ranks.py", "01_single_device.py"))
    assert lines[1].startswith(f"estimate: about {expected / 60:.1f} min for the scripts = {expected:.0f} s of these "
                               f"launches on the CPU ({gpu_check.QUICK_TIMINGS_RUNS})"), lines
    assert "(no launch starts after 600 s: --budget)" in lines[1], lines
    report = json.loads((out / "report.json").read_text())
    assert set(report) == REPORT_FIELDS, set(report) ^ REPORT_FIELDS
    covered = (report["run"], report["world_sizes"], report["coverage"], report["timeout_s"], report["budget_s"],
               report["estimate_s"], report["complete"], report["lessons_skipped"])
    assert covered == ("quick", [1], "single-process gloo only", 90, 600, round(expected), True,
                       "--quick runs the scripts only"), covered
    checks = [(c["name"], c["processes"], c["distributed"], c["ok"]) for c in report["checks"]]
    assert checks == [("00_hello_ranks.py", 1, True, True), ("01_single_device.py", 1, False, True)], checks
    logs = sorted(p.name for p in (out / "logs").iterdir())
    assert logs == ["00_hello_ranks-1.log", "01_single_device-1.log"], logs
    assert all((out / c["log"]).read_text().startswith("$ ") for c in report["checks"])
    md = (out / "report.md").read_text()
    assert md.splitlines()[0].endswith(": single-process gloo only, cpu self-test (not a GPU result)"), md
    assert "A quick run (every script once, no lesson; 90 s timeout per launch). World sizes (processes per " \
           "process group): 1." in md, md
    assert "covered: single-process gloo only (world sizes: 1)" in result.stdout, result.stdout


def test_a_spent_budget_leaves_an_incomplete_report_and_exit_code_1(tmp_path):
    # a budget of one nanosecond is spent before the first launch on any machine (no wall-clock race)
    result, out = _self_test(tmp_path, "--quick", "--only", "00", "--budget", "1e-9", timeout=60)
    assert result.returncode == 1, (result.returncode, result.stdout[-3000:], result.stderr[-3000:])
    report = json.loads((out / "report.json").read_text())
    assert (report["checks"], report["planned"], report["complete"], report["failed"]) == ([], 1, False, 0), report
    assert "--budget 1e-09 s spent: 1 checks not run" in result.stdout, result.stdout
    assert result.stdout.strip().splitlines()[-1] == "incomplete: 0 of 1 checks ran", result.stdout
    assert "**Incomplete**: 0 of 1 checks ran" in (out / "report.md").read_text()


def test_lessons_without_papermill_are_skipped_in_one_line(tmp_path, monkeypatch):
    """A STAND-IN for a Python without papermill (this one has it): papermill_module answers None."""
    monkeypatch.setattr(gpu_check, "papermill_module", lambda: None)
    monkeypatch.setattr(gpu_check, "plan_scripts", lambda only: [])
    plan = gpu_check.make_plan(gpu_check.MODE_CPU, 2, 0, ["00"], True, False, 60)
    assert plan["lessons_skipped"] == f"papermill is not installed for {sys.executable}", plan
    assert "no lessons (papermill is not installed for " in gpu_check.describe_plan(plan).splitlines()[0]
    report = gpu_check.run_checks(plan, gpu_check.machine_facts(False), tmp_path)
    assert (report["checks"], report["lessons_skipped"]) == ([], plan["lessons_skipped"]), report
    assert f"Lessons skipped (papermill is not installed for {sys.executable})." in (tmp_path / "report.md").read_text()


def test_a_failing_rank_is_reported_with_its_own_error_line(tmp_path, monkeypatch):
    """torchrun ends with its own summary; the line reported is the one the failing rank wrote."""
    monkeypatch.setitem(gpu_check.QUICK, "00_hello_ranks.py", (["--fail-rank", "0"], True))
    check = gpu_check.check_script("00_hello_ranks.py", 1, gpu_check.MODE_CPU, 120, tmp_path)
    assert not check["ok"] and check["exit_code"] not in (0, None), check
    assert check["last_error_line"].endswith("RuntimeError: rank 0 fails on purpose (--fail-rank 0)"), check


def test_a_timeout_fails_the_check_and_the_run(tmp_path):
    result, out = _self_test(tmp_path, "--only", "00", "--no-lessons", "--timeout", "0.5", timeout=60)
    assert result.returncode == 1, (result.returncode, result.stdout[-3000:], result.stderr[-3000:])
    md = (out / "report.md").read_text()
    assert "| `00_hello_ranks.py` | 2 | **failed** |" in md, md
    assert "- `00_hello_ranks.py`, 2 processes: timed out after 0.5 s" in md, md
    assert json.loads((out / "report.json").read_text())["failed"] == 1


def _record(name, ok, error="", backend="nccl", processes=2):
    """A check's record as check_script writes it, made up for the report's functions (no GPU here)."""
    distributed = gpu_check.QUICK[name][1]
    return dict(kind="script", name=name, processes=processes, distributed=distributed, ok=ok, seconds=1.5,
                exit_code=0 if ok else 1, last_error_line=error, backend=backend if distributed else None,
                log=f"logs/{name[:-3]}-{processes}.log")


GPU_MACHINE = dict(python="3.11.9", torch="2.11.0+cu128", cuda="12.8", nccl="2.27.3",
                   gpus=["NVIDIA H100 80GB HBM3"] * 2, gpu_count=2, host="gpu01")


def _gpu_report(checks, date=datetime.datetime(2026, 12, 1, 9, 30, tzinfo=datetime.timezone.utc),  # noqa: UP017
                machine=GPU_MACHINE, **kwargs):
    return gpu_check.build_report(machine, gpu_check.MODE_CUDA, checks, None, date=date, **kwargs)


def test_the_report_shows_a_failed_check_and_its_last_error_line():
    report = _gpu_report([_record("00_hello_ranks.py", True),
                          _record("04_ddp_train.py", False, "[rank1]: RuntimeError: NCCL error: unhandled")])
    assert (report["passed"], report["failed"]) == (1, 1), report
    md = gpu_check.render_markdown(report)
    assert md.startswith("# GPU check, 2026-12-01 09:30 UTC: NCCL at 2 processes\n"), md
    assert "torch 2.11.0+cu128, CUDA 12.8, NCCL 2.27.3, 2 × NVIDIA H100 80GB HBM3" in md, md
    assert "| `00_hello_ranks.py` | 2 | ok (nccl) | 1.5 |" in md, md
    assert "| `04_ddp_train.py` | 2 | **failed** | 1.5 |" in md, md
    assert "- `04_ddp_train.py`, 2 processes: [rank1]: RuntimeError: NCCL error: unhandled" in md, md


ONE_GPU = dict(GPU_MACHINE, gpus=["NVIDIA H200"], gpu_count=1, host="gpu02")


def test_on_one_gpu_the_report_says_single_process_nccl_only():
    names = ("00_hello_ranks.py", "01_single_device.py", "04_ddp_train.py")
    records = [_record(name, True, processes=1) for name in names]
    report = _gpu_report(records, machine=ONE_GPU, run="quick", timeout_s=90)
    assert (report["world_sizes"], report["coverage"]) == ([1], "single-process NCCL only"), report
    md = gpu_check.render_markdown(report)
    assert md.startswith("# GPU check, 2026-12-01 09:30 UTC: single-process NCCL only\n"), md
    assert "A quick run (every script once, no lesson; 90 s timeout per launch). World sizes (processes per " \
           "process group): 1." in md, md
    eight = _gpu_report([_record("00_hello_ranks.py", True, processes=n) for n in (2, 8)])
    assert (eight["world_sizes"], eight["coverage"]) == ([2, 8], "NCCL at 2 and 8 processes"), eight
    alone = _gpu_report([_record("01_single_device.py", True, processes=1)])
    assert (alone["world_sizes"], alone["coverage"]) == ([], "no process group formed"), alone


def test_last_error_line_skips_torchrun_s_own_summary():
    stderr = "\n".join([
        "[rank0]: RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1, unhandled cuda error",
        "E1201 21:25:15.653000 1637 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1)",
        "Traceback (most recent call last):", '  File "run.py", line 1, in <module>',
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", "=" * 60, "Failures:", "=" * 60, ""])
    assert gpu_check.last_error_line(stderr, "") == \
        "[rank0]: RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1, unhandled cuda error"
    assert gpu_check.last_error_line("", "step 1\nstopping: non-finite loss\n\n") == "stopping: non-finite loss"


def test_more_processes_than_gpus_is_refused():
    args = gpu_check.make_parser().parse_args(["--nproc", "3"])
    with pytest.raises(gpu_check.UsageError, match="needs 3 GPUs; this machine has 2"):
        gpu_check.processes_per_launch(args, gpu_count=2)


def test_readme_check_passes_on_the_committed_readme(tmp_path):
    """The "Verified on" table is what verified/*.json gives: nobody fills it in by hand."""
    result = run([sys.executable, str(TOOL), "--readme", "--check"], cwd=tmp_path, timeout=60)
    assert result.returncode == 0, (result.stdout, result.stderr)


def _readme_copy(tmp_path):
    readme = tmp_path / "README.md"
    shutil.copy(REPO / "README.md", readme)
    (tmp_path / "verified").mkdir()
    return readme, tmp_path / "verified"


def test_readme_refuses_a_report_that_is_not_from_a_gpu(tmp_path):
    readme, verified = _readme_copy(tmp_path)
    cpu_report = gpu_check.build_report(gpu_check.machine_facts(False), gpu_check.MODE_CPU, [], "--no-lessons")
    (verified / "2026-12-01-cpu.json").write_text(json.dumps(cpu_report))
    before = readme.read_text()
    result = run([sys.executable, str(TOOL), "--readme", "--verified", str(verified), "--readme-file", str(readme)],
                 cwd=tmp_path, timeout=60)
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert 'only reports of a GPU run (mode "cuda") are accepted' in result.stderr, result.stderr
    assert readme.read_text() == before


def test_readme_table_comes_from_the_reports(tmp_path, capsys):
    readme, verified = _readme_copy(tmp_path)
    report = _gpu_report([_record("00_hello_ranks.py", True), _record("04_ddp_train.py", False, "boom")])
    (verified / "2026-12-01-h100.json").write_text(json.dumps(report))
    assert gpu_check.update_readme(readme, verified, check_only=True) == 1, "the table is not there yet"
    assert gpu_check.update_readme(readme, verified, check_only=False) == 0
    text = readme.read_text()
    assert ("| 2026-12-01 | 2 × NVIDIA H100 80GB HBM3 | 2.11.0+cu128 | 12.8 | 2.27.3 | 3.11.9 | full | 2 "
            "| NCCL at 2 processes | 1/2 passed; failed: 04_ddp_train.py |") in text, text
    quick = _gpu_report([_record("00_hello_ranks.py", True, processes=1)], machine=ONE_GPU, run="quick",
                        only=["00"], planned=17, date=datetime.datetime(2026, 12, 2, tzinfo=datetime.timezone.utc))  # noqa: UP017
    (verified / "2026-12-02-h200.json").write_text(json.dumps(quick))
    assert gpu_check.update_readme(readme, verified, check_only=False) == 0
    text = readme.read_text()
    header = "| date | GPUs | torch | CUDA | NCCL | Python | run | world sizes | covered | checks |"
    rows = text.split(header)[1].split(gpu_check.END_MARKER)[0].strip().splitlines()[1:]
    assert rows == ["| 2026-12-02 | 1 × NVIDIA H200 | 2.11.0+cu128 | 12.8 | 2.27.3 | 3.11.9 | quick (--only 00) | 1 "
                    "| single-process NCCL only | 1/1 passed; incomplete: 1 of 17 ran |",
                    "| 2026-12-01 | 2 × NVIDIA H100 80GB HBM3 | 2.11.0+cu128 | 12.8 | 2.27.3 | 3.11.9 | full | 2 "
                    "| NCCL at 2 processes | 1/2 passed; failed: 04_ddp_train.py |"], rows
    assert gpu_check.update_readme(readme, verified, check_only=True) == 0
    outside = text.split(gpu_check.START_MARKER)[0] + text.split(gpu_check.END_MARKER)[1]
    committed = (REPO / "README.md").read_text()
    assert outside == committed.split(gpu_check.START_MARKER)[0] + committed.split(gpu_check.END_MARKER)[1]


def test_check_goes_with_readme():
    with pytest.raises(SystemExit) as exited:
        gpu_check.main(["--check"])
    assert exited.value.code == 2


def test_each_process_count_is_launched_once(tmp_path):
    """The full check adds one process per GPU to min(2, GPUs), unless they are the same number: on one GPU
    each script runs once, with one process. --quick launches each distributed script once, at the GPU count."""
    cuda, cpu, launches = gpu_check.MODE_CUDA, gpu_check.MODE_CPU, gpu_check.script_launches
    assert launches("04_ddp_train.py", cuda, 1, 1, quick=False) == [1]
    assert launches("04_ddp_train.py", cuda, 2, 2, quick=False) == [2]
    assert launches("04_ddp_train.py", cuda, 2, 8, quick=False) == [2, 8]
    assert launches("04_ddp_train.py", cuda, 8, 8, quick=True) == [8]
    assert launches("04_ddp_train.py", cpu, 2, 0, quick=False) == [2]
    assert launches("01_single_device.py", cuda, 2, 8, quick=False) == [1]
    for gpus in (1, 2, 8):
        quick = gpu_check.make_parser().parse_args(["--quick"])
        assert gpu_check.processes_per_launch(quick, gpus) == gpus
        assert gpu_check.processes_per_launch(gpu_check.make_parser().parse_args([]), gpus) == min(2, gpus)
    command = gpu_check.script_command("04_ddp_train.py", 8, tmp_path, cuda)
    assert command[:5] == [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=8"]
    assert command[-2:] == ["--out", str(tmp_path / "04_ddp_train.json")] and "--device" not in command, command
    plain = gpu_check.script_command("01_single_device.py", 1, tmp_path, cuda)
    assert plain[:2] == [sys.executable, str(SCRIPTS / "01_single_device.py")], plain


def test_the_quick_estimate_on_one_gpu_is_under_8_minutes():
    """From the measured CPU table and the assumed CUDA start-up per launch (a table lookup, not a timing)."""
    plan = gpu_check.make_plan(gpu_check.MODE_CUDA, 1, 1, None, True, True, gpu_check.QUICK_TIMEOUT_S,
                               gpu_check.QUICK_BUDGET_S)
    assert len(plan["launches"]) == len(gpu_check.QUICK) and {n for _, n in plan["launches"]} == {1}, plan
    measured = sum(first for first, _ in gpu_check.CPU_SECONDS.values())
    assert plan["estimate_s"] == measured + len(gpu_check.QUICK) * gpu_check.CUDA_START_ALLOWANCE_S
    assert plan["estimate_s"] < 8 * 60, plan["estimate_s"]
    first, second = gpu_check.describe_plan(plan).splitlines()
    assert first.startswith(f"plan (quick, cuda): {len(gpu_check.QUICK)} launches (15 distributed × 1 process, "
                            f"3 single-process), timeout 90 s each; no lessons"), first
    assert f"about {plan['estimate_s'] / 60:.1f} min" in second and "CUDA start-up per launch (assumed)" in second
    assert "at most 11.8 min if launches ran into their timeout" in second, second


def test_on_cuda_a_run_on_gloo_fails(tmp_path):
    """Here there is no GPU, so a CUDA-mode launch runs on gloo: exactly what the check must not accept."""
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the script would run on NCCL")
    check = gpu_check.check_script("00_hello_ranks.py", 1, gpu_check.MODE_CUDA, 120, tmp_path)
    assert (check["ok"], check["exit_code"], check["backend"]) == (False, 0, "gloo"), check
    assert check["last_error_line"] == "ran on gloo, expected nccl", check


def test_a_failed_launch_in_a_lesson_is_reported_with_its_workers_error(tmp_path):
    """!torchrun raises CalledProcessError, which says only the exit status; the workers' line says why."""
    papermill = pytest.importorskip("papermill")
    executed = tmp_path / "04_ddp_train.ipynb"
    outputs = [dict(output_type="stream", name="stdout", text=["[rank1]: RuntimeError: NCCL error: unhandled\r\n",
                                                                "E1201 21:25:15.653000 1 api.py:1] failed\n"]),
               dict(output_type="error", ename="CalledProcessError", evalue="...", traceback=[])]
    executed.write_text(json.dumps(dict(cells=[dict(cell_type="code", source="", outputs=outputs)])))
    error = papermill.PapermillExecutionError(7, 6, "!torchrun ...", "CalledProcessError",
                                              "Command 'torchrun ...' returned non-zero exit status 1.", [])
    assert gpu_check.lesson_error(papermill, error, executed) == \
        "cell 7: [rank1]: RuntimeError: NCCL error: unhandled (CalledProcessError)"
    error = papermill.PapermillExecutionError(3, 2, "assert x", "AssertionError", "(3, 2)", [])
    assert gpu_check.lesson_error(papermill, error, executed) == "cell 3: AssertionError: (3, 2)"


MAKE = shutil.which("make")


def _stand_in_python(path, body):
    """A STAND-IN interpreter for make to find: a shell script (exec this Python, or fail like one without torch)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


@pytest.mark.skipif(MAKE is None, reason="no make on this machine")
@pytest.mark.skipif(torch.cuda.is_available() or not NO_NVIDIA_HERE, reason="this machine has an NVIDIA GPU")
def test_make_gpu_check_runs_with_a_python_that_has_torch_and_builds_no_venv(tmp_path):
    """VENV names a folder whose python is this one (wrapped); make runs the check with it, builds nothing."""
    venv = tmp_path / "venv"
    python = _stand_in_python(venv / "bin" / "python", f'exec {sys.executable} "$@"')
    result = subprocess.run([MAKE, "-s", "-C", str(REPO), "gpu-check", f"VENV={venv}", "QUICK=1"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    lines = result.stdout.splitlines()
    assert lines[0] == f"make gpu-check: {python} tools/gpu_check.py --quick", lines
    assert lines[1].startswith("no CUDA here (torch ") and len(lines) == 2, lines
    assert sorted(p.name for p in venv.iterdir()) == ["bin"] and not (venv / ".ready").exists()


@pytest.mark.skipif(MAKE is None, reason="no make on this machine")
def test_make_gpu_check_without_a_suitable_python_says_how_in_one_line(tmp_path):
    """No python in VENV, and the machine's python3 is a STAND-IN that cannot import torch."""
    _stand_in_python(tmp_path / "bin" / "python3", "exit 1")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin"}
    result = subprocess.run([MAKE, "-s", "-C", str(REPO), "gpu-check", f"VENV={tmp_path / 'no-venv'}"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and result.stdout == "", (result.returncode, result.stdout, result.stderr)
    first, *rest = result.stderr.splitlines()
    assert first == ("make gpu-check: no Python here has torch >= 2.10; run python3 tools/gpu_check.py --quick with "
                     "the Python that has your CUDA torch (or GPU_PYTHON=/path/to/python make gpu-check)"), first
    # make's own "Error 2" line ("make[1]: ***" when this test itself runs under `make test`)
    assert all(re.match(r"make(\[\d+\])?: \*\*\* ", line) for line in rest), rest
    assert not (tmp_path / "no-venv").exists()


def test_the_documented_device_command_is_quick_and_its_time_is_the_estimate():
    """verified/README.md's one line parses as a quick run with an --out folder, and the time it states is
    the estimate the check prints on one GPU (so the two cannot drift apart)."""
    text = (REPO / "verified" / "README.md").read_text()
    line = text.split("```bash\n")[1].split("\n```")[0]
    assert "\n" not in line and line.startswith("python3 tools/gpu_check.py "), line
    args = gpu_check.make_parser().parse_args(line.replace('"${OUT:-build/gpu-check}"', "build/gpu-check").split()[2:])
    assert args.quick and args.out is not None and not args.cpu, args
    plan = gpu_check.make_plan(gpu_check.MODE_CUDA, 1, 1, None, True, True, gpu_check.QUICK_TIMEOUT_S,
                               gpu_check.QUICK_BUDGET_S)
    assert f"estimate ({plan['estimate_s'] / 60:.1f} min" in text, plan["estimate_s"]
    assert f"about {round(plan['estimate_s'] / 60)} minutes" in text, plan["estimate_s"]
