"""tools/gpu_check.py, the check a user runs on a CUDA machine. CI has no GPU, so these tests run the
check's CPU self-test (--cpu) on a few scripts, its report and README functions directly, and the
"no CUDA here" path. The check's GPU results come from real GPU runs only (verified/)."""

import datetime
import json
import shutil
import sys

import gpu_check
import pytest
import torch
from conftest import REPO, SCRIPTS, run

TOOL = REPO / "tools" / "gpu_check.py"
REPORT_FIELDS = {"format", "date", "mode", "python", "torch", "cuda", "nccl", "gpus", "gpu_count", "host",
                 "checks", "lessons_skipped", "passed", "failed"}
CHECK_FIELDS = {"kind", "name", "processes", "ok", "seconds", "exit_code", "last_error_line", "backend", "log"}


def test_quick_covers_exactly_the_scripts():
    assert sorted(gpu_check.QUICK) == sorted(p.name for p in SCRIPTS.glob("*.py")), \
        "add the missing scripts to QUICK in tools/gpu_check.py (or remove stale entries)"


def test_quick_runs_are_the_tests_quick_runs():
    """The check needs no pytest, so it keeps its own table: it must not drift from tests/test_scripts.py's."""
    from test_scripts import CASES
    differing = {name: (args, CASES[name]["args"]) for name, (args, _) in gpu_check.QUICK.items()
                 if args != CASES[name]["args"]}
    assert not differing, f"QUICK's arguments differ from CASES' (QUICK, CASES): {differing}"


def test_distributed_scripts_are_those_that_form_a_process_group():
    wrong = [name for name, (_, distributed) in gpu_check.QUICK.items()
             if distributed != ("init_process_group" in (SCRIPTS / name).read_text())]
    assert not wrong, f"QUICK says the wrong thing about torchrun for {wrong}"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the check would run")
def test_without_cuda_it_says_so_and_writes_nothing(tmp_path):
    result = run([sys.executable, str(TOOL), "--out", str(tmp_path / "out")], cwd=tmp_path, timeout=60)
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    assert result.stdout.startswith("no CUDA here (torch ") and len(result.stdout.splitlines()) == 1, result.stdout
    assert "--cpu" in result.stdout, result.stdout
    assert not (tmp_path / "out").exists()


def _self_test(tmp_path, *args, timeout=240):
    out = tmp_path / "out"
    result = run([sys.executable, str(TOOL), "--cpu", "--out", str(out), *args], cwd=tmp_path, timeout=timeout)
    return result, out


def test_cpu_self_test_reports_every_launch(tmp_path):
    result, out = _self_test(tmp_path, "--only", "00,04", "--no-lessons")
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    report = json.loads((out / "report.json").read_text())
    assert set(report) == REPORT_FIELDS, set(report) ^ REPORT_FIELDS
    assert report["format"] == 1 and report["mode"] == "cpu self-test (not a GPU result)", report["mode"]
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


def test_lessons_without_papermill_are_skipped_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_check, "papermill_module", lambda: None)
    monkeypatch.setattr(gpu_check, "plan_scripts", lambda only: [])
    report = gpu_check.run_checks(gpu_check.MODE_CPU, 2, ["00"], True, 60, tmp_path)
    assert (report["checks"], report["lessons_skipped"]) == ([], "papermill not installed"), report
    assert "Lessons skipped (papermill not installed)." in (tmp_path / "report.md").read_text()


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


def _record(name, ok, error="", backend="nccl"):
    return dict(kind="script", name=name, processes=2, ok=ok, seconds=1.5, exit_code=0 if ok else 1,
                last_error_line=error, backend=backend, log=f"logs/{name[:-3]}-2.log")


GPU_MACHINE = dict(python="3.11.9", torch="2.11.0+cu128", cuda="12.8", nccl="2.27.3",
                   gpus=["NVIDIA H100 80GB HBM3"] * 2, gpu_count=2, host="gpu01")


def _gpu_report(checks, date=datetime.datetime(2026, 12, 1, 9, 30, tzinfo=datetime.timezone.utc)):  # noqa: UP017
    return gpu_check.build_report(GPU_MACHINE, gpu_check.MODE_CUDA, checks, None, date=date)


def test_the_report_shows_a_failed_check_and_its_last_error_line():
    report = _gpu_report([_record("00_hello_ranks.py", True),
                          _record("04_ddp_train.py", False, "[rank1]: RuntimeError: NCCL error: unhandled")])
    assert (report["passed"], report["failed"]) == (1, 1), report
    md = gpu_check.render_markdown(report)
    assert md.startswith("# GPU check, 2026-12-01 09:30 UTC\n"), md
    assert "torch 2.11.0+cu128, CUDA 12.8, NCCL 2.27.3, 2 × NVIDIA H100 80GB HBM3" in md, md
    assert "| `00_hello_ranks.py` | 2 | ok (nccl) | 1.5 |" in md, md
    assert "| `04_ddp_train.py` | 2 | **failed** | 1.5 |" in md, md
    assert "- `04_ddp_train.py`, 2 processes: [rank1]: RuntimeError: NCCL error: unhandled" in md, md


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
    cpu_report = gpu_check.build_report(gpu_check.machine_facts(), gpu_check.MODE_CPU, [], "--no-lessons")
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
    assert ("| 2026-12-01 | 2 × NVIDIA H100 80GB HBM3 | 2.11.0+cu128 | 12.8 | 2.27.3 | 3.11.9 "
            "| 1/2 passed; failed: 04_ddp_train.py |") in text, text
    assert gpu_check.update_readme(readme, verified, check_only=True) == 0
    outside = text.split(gpu_check.START_MARKER)[0] + text.split(gpu_check.END_MARKER)[1]
    committed = (REPO / "README.md").read_text()
    assert outside == committed.split(gpu_check.START_MARKER)[0] + committed.split(gpu_check.END_MARKER)[1]


def test_check_goes_with_readme():
    with pytest.raises(SystemExit) as exited:
        gpu_check.main(["--check"])
    assert exited.value.code == 2


def test_on_cuda_a_distributed_script_is_launched_twice_and_a_single_process_one_once(tmp_path):
    cuda, cpu = gpu_check.MODE_CUDA, gpu_check.MODE_CPU
    assert gpu_check.script_launches("04_ddp_train.py", cuda, 2) == [2, "gpu"]
    assert gpu_check.script_launches("04_ddp_train.py", cpu, 2) == [2]
    assert gpu_check.script_launches("01_single_device.py", cuda, 2) == [1]
    command = gpu_check.script_command("04_ddp_train.py", "gpu", tmp_path, cuda)
    assert command[:5] == [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=gpu"]
    assert command[-2:] == ["--out", str(tmp_path / "04_ddp_train.json")] and "--device" not in command, command
    plain = gpu_check.script_command("01_single_device.py", 1, tmp_path, cuda)
    assert plain[:2] == [sys.executable, str(SCRIPTS / "01_single_device.py")], plain


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
