"""The GPU check: run every script and lesson on this machine's GPUs, with NCCL, and write a report.

    python3 tools/gpu_check.py --quick [--out DIR]   # every script once at the GPU count: minutes, not an hour
    python3 tools/gpu_check.py [--only 00,04] [--no-lessons] [--nproc N] [--timeout 300] [--out build/gpu-check]
    python3 tools/gpu_check.py --cpu ...          # a self-test of this check on a machine without GPUs
    python3 tools/gpu_check.py --readme [--check] # the README's "Verified on" table, from verified/*.json

CI has no GPU: it runs every script and lesson on the CPU, with gloo. This check is what a user runs on
a CUDA machine to show that the NCCL path works as well. The full check launches each distributed
script with min(2, GPUs) processes and again with one process per GPU (once where the two are the
same number), the two single-process scripts once, and each lesson under papermill when papermill can
be imported. --quick launches each distributed script once, with one process per GPU and a 90 s
timeout, and the two single-process scripts; it runs no lesson, prints an estimate of its time before
it starts, and starts no launch after 600 s (--budget). Results: OUT/report.json and OUT/report.md
(rewritten after every launch, so a run cut short still leaves one), one log per launch in OUT/logs/,
the executed lessons in OUT/lessons/. Exit code 0 when every check passed; 1 when one failed, when
--budget ran out before every check ran, or when an NVIDIA GPU is present but this torch cannot use
it; 2 for bad arguments or a torch older than 2.10.

It needs the standard library and torch only, and installs nothing: a GPU machine may have no network
and its own CUDA build of torch, so any Python with torch >= 2.10 can run it.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime
import importlib.util
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

try:
    import torch
except ImportError:
    sys.exit("gpu_check.py needs torch (>= 2.10): run it with the Python that has your CUDA torch")

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "ddp_scripts"
NOTEBOOKS = REPO / "notebooks"
sys.path.insert(0, str(REPO / "tools"))
import series  # noqa: E402  (the lesson runner: which files are lessons, and their parameters; stdlib only)

# How each script is checked: its quick arguments (those of CASES in tests/test_scripts.py; the check
# adds --out) and whether it is distributed (launched by torchrun) or one plain process.
QUICK = {
    "00_hello_ranks.py": ([], True),
    "01_single_device.py": (["--epochs", "1", "--dataset-size", "101"], False),
    "02_show_ranks.py": ([], True),
    "03_data_parallel.py": (["--epochs", "1", "--dataset-size", "101"], False),
    "04_ddp_train.py": (["--epochs", "2", "--dataset-size", "101"], True),
    "05_rank_aware.py": (["--epochs", "2", "--dataset-size", "101", "--val-size", "31",
                          "--checkpoint", "ckpt.pt"], True),
    "06_ddp_equals_large_batch.py": (["--epochs", "1", "--dataset-size", "101"], True),
    "07_allreduce_bench.py": (["--max-bytes", "64K", "--iters", "2", "--warmup", "1"], True),
    "07_ddp_perf.py": (["--steps", "2", "--warmup", "1", "--width", "64", "--batch-size", "8",
                        "--small-layers", "10", "--accumulate", "2", "--threads", "1"], True),
    "08_elastic_train.py": (["--epochs", "2", "--dataset-size", "101"], True),
    "09_collective_bugs.py": ([], True),
    "10_node_report.py": ([], True),
    "10_signal_report.py": (["--timeout", "0.5", "--events", "signals.jsonl"], False),  # no process group
    "11_fast_ddp.py": (["--variants", "fp32,bf16,fp16,compile,bucket-view,fp16-hook,bf16-hook,powersgd",
                        "--compile-backend", "eager", "--epochs", "1", "--dataset-size", "101", "--batch-size", "16",
                        "--rounds", "2", "--round-steps", "1", "--accumulate", "2"], True),
    "12_data_loading.py": (["--dataset-size", "101", "--item-ms", "0.2", "--step-ms", "0.5", "--rounds", "1"], True),
    "12_uneven_inputs.py": (["--dataset-size", "101"], True),
    "13_zero_fsdp.py": (["--width", "32", "--layers", "2", "--steps", "4", "--rounds", "2",
                         "--dataset-size", "101"], True),
    "13_sharded_checkpoint.py": (["--save", "ckpt", "--width", "32", "--layers", "2", "--steps", "2",
                                  "--dataset-size", "101"], True),
}

# What --quick's estimate is made of. Seconds per launch of each script's quick run above, on the CPU
# with gloo (torch 2.13.0+cpu, Python 3.11), measured by this check's self-test (--cpu, no lessons) on
# 2026-12-02 on 2 x86_64 cores that other jobs shared: the first number with --nproc 1, the second with
# 2 processes (01 and 03 are one process in both). Each is the fastest of 2 runs (4 for 01 and 03): the
# GPU machine is not shared, and the other jobs (load average 4-8 during three of the four runs) made
# the slower runs up to 2.5 times longer: whole runs of 156 and 280 s at 1 process, 160 and 249 s at 2.
# The times include Python's start, `import torch` and torchrun's own start, which a GPU machine also pays.
QUICK_TIMINGS_RUNS = "2 shared x86_64 cores, the fastest of 2 runs each, 2026-12-02"
CPU_SECONDS = {
    "00_hello_ranks.py": (5.5, 3.3),
    "01_single_device.py": (3.0, 3.0),
    "02_show_ranks.py": (10.2, 3.5),
    "03_data_parallel.py": (2.8, 2.8),
    "04_ddp_train.py": (14.8, 7.2),
    "05_rank_aware.py": (13.1, 12.1),
    "06_ddp_equals_large_batch.py": (14.4, 12.7),
    "07_allreduce_bench.py": (5.8, 7.1),
    "07_ddp_perf.py": (6.0, 10.2),
    "08_elastic_train.py": (8.3, 11.7),
    "09_collective_bugs.py": (5.6, 12.6),
    "10_node_report.py": (3.5, 7.8),
    "10_signal_report.py": (0.6, 0.6),  # one plain process, no torch import: 0.53-0.55 s in 3 runs, 2026-12-02
    "11_fast_ddp.py": (7.2, 11.1),
    "12_data_loading.py": (6.1, 11.1),
    "12_uneven_inputs.py": (13.6, 8.2),
    "13_sharded_checkpoint.py": (10.1, 5.9),
    "13_zero_fsdp.py": (9.2, 5.5),
}
# What a GPU launch adds to that: loading the CUDA libraries, a CUDA context per process, NCCL's
# communicator, cuDNN/cuBLAS handles. AN ASSUMPTION, NOT A MEASUREMENT (no GPU run has been made yet):
# a generous allowance per launch, so that the estimate errs long. A real run's report holds the times.
CUDA_START_ALLOWANCE_S = 15.0
QUICK_TIMEOUT_S = 90.0
FULL_TIMEOUT_S = 300.0
QUICK_BUDGET_S = 600.0  # --quick starts no launch after this long: a run that hangs still ends in ~12 min
TERMINATE_GRACE_S = 15.0  # after a timeout, torchrun gets this long to stop its workers (launch())
OLDEST_TORCH = (2, 10)

MODE_CUDA = "cuda"
MODE_CPU = "cpu self-test (not a GPU result)"
REPORT_FORMAT = 2
VERIFIED = REPO / "verified"
README = REPO / "README.md"
START_MARKER = "<!-- verified-on:start -->"
END_MARKER = "<!-- verified-on:end -->"


class UsageError(Exception):
    """A bad command-line value or a report that cannot be used: one line, exit code 2."""


# --- The machine ------------------------------------------------------------------------------------

def nccl_version() -> str | None:
    """NCCL's version as '2.x.y', or None where this torch has no NCCL (a CPU build)."""
    try:
        version = torch.cuda.nccl.version()
    except Exception:  # AttributeError on CPU builds, RuntimeError where NCCL cannot load
        return None
    return ".".join(map(str, version)) if isinstance(version, tuple) else str(version)


def machine_facts(cuda: bool) -> dict:
    """What the report says about where it ran: the versions and GPUs a result depends on."""
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else []
    return dict(python=platform.python_version(), torch=torch.__version__, cuda=torch.version.cuda,
                nccl=nccl_version() if cuda else None, gpus=gpus, gpu_count=len(gpus), host=platform.node())


def torch_release(version: str) -> tuple[int, int] | None:
    """'2.11.0+cu128' -> (2, 11); None for a version string that does not start with two numbers."""
    found = re.match(r"(\d+)\.(\d+)", version)
    return (int(found[1]), int(found[2])) if found else None


def too_old_message(version: str) -> str | None:
    """One line when this torch is older than the series supports (requirements.txt: torch>=2.10)."""
    release = torch_release(version)
    if release is not None and release >= OLDEST_TORCH:
        return None
    oldest = ".".join(map(str, OLDEST_TORCH))
    return (f"torch {version} is older than {oldest}, the oldest this series supports: "
            f"run the check with a Python whose torch is {oldest} or newer")


def cuda_status() -> tuple[bool, str]:
    """torch.cuda.is_available(), and the first warning it gave: where a CUDA build of torch finds no
    usable GPU, torch warns why (e.g. "The NVIDIA driver on your system is too old (found version
    12020)"). Call it before anything else asks CUDA: torch gives that warning once."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        available = torch.cuda.is_available()
    said = next((str(w.message).strip().splitlines()[0] for w in caught if str(w.message).strip()), "")
    return available, said


# Where the check looks for an NVIDIA GPU that torch might not see. The environment variables exist for
# the tests, which have no GPU: they point these at stand-ins (a plain file, a small script).
DEVICE_FILE_VARIABLE = "GPU_CHECK_NVIDIA_DEVICE_FILE"
NVIDIA_SMI_VARIABLE = "GPU_CHECK_NVIDIA_SMI"


def nvidia_device_present() -> str | None:
    """How we know this machine has an NVIDIA GPU (its device file, or nvidia-smi -L listing one), else None."""
    device_file = Path(os.environ.get(DEVICE_FILE_VARIABLE, "/dev/nvidia0"))
    if device_file.exists():
        return f"{device_file} exists"
    smi = os.environ.get(NVIDIA_SMI_VARIABLE, "nvidia-smi")
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    gpus = [line.strip() for line in listed.splitlines() if line.startswith("GPU ")]
    return f"nvidia-smi -L lists {gpus[0]}" + (f" and {len(gpus) - 1} more" if len(gpus) > 1 else "") if gpus else None


def why_no_cuda(torch_said: str) -> str:
    """The likeliest reason torch.cuda.is_available() is False on a machine with an NVIDIA GPU."""
    if torch.version.cuda is None:
        return (f"this torch ({torch.__version__}) is a CPU build; run the check with a Python whose torch is "
                f"a CUDA build")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU"
    if torch_said:
        return f"torch {torch.__version__} (CUDA {torch.version.cuda}) says: {torch_said}"
    return (f"torch {torch.__version__} is built for CUDA {torch.version.cuda} and finds no usable GPU "
            f"(is the driver older than that CUDA? nvidia-smi shows the driver's CUDA version)")


def unusable_gpu_message(evidence: str, torch_said: str) -> str:
    return (f"an NVIDIA GPU is present ({evidence}) but torch.cuda.is_available() is False: "
            f"{why_no_cuda(torch_said)}. Nothing was checked.")


def no_cuda_message() -> str:
    return (f"no CUDA here (torch {torch.__version__}, CUDA build: {torch.version.cuda or 'none'}) and no NVIDIA "
            f"GPU found: nothing to check; run this on a machine with NVIDIA GPUs (or --cpu to test the check "
            f"itself on the CPU)")


def gpu_summary(gpus: list[str]) -> str:
    """['H100', 'H100'] -> '2 × H100'; different models are listed one after the other."""
    return ", ".join(f"{n} × {name}" for name, n in collections.Counter(gpus).items()) or "no GPU"


# --- Running one launch ------------------------------------------------------------------------------

def takes_device_option(script: str) -> bool:
    """Whether a script has --device {auto,cpu}: the self-test then asks for the CPU by argument."""
    return '"--device"' in (SCRIPTS / script).read_text()


# torchrun ends a failure with its own report (a traceback of the launcher, then a box of "=" and "-"
# lines with exit codes), and its agent logs lines like "E1201 21:25:15.653 ... failed (exitcode: 1)".
# The line that says what went wrong is the last one a worker wrote before all that.
LAUNCHER_SUMMARY = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError"
LAUNCHER_LOG_LINE = re.compile(r"^[WEI]\d{4} \d\d:\d\d:\d\d|^[=*-]+$")


def last_error_line(stderr: str, stdout: str) -> str:
    """The last line that says what failed: stderr's, else stdout's, without torchrun's own report."""
    lines = stderr.splitlines()
    if any(LAUNCHER_SUMMARY in line for line in lines):
        tracebacks = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
        lines = lines[:tracebacks[-1]] if tracebacks else lines
    for text in (lines, stdout.splitlines()):
        meaningful = [line.strip() for line in text if line.strip() and not LAUNCHER_LOG_LINE.match(line.strip())]
        if meaningful:
            return meaningful[-1]
    return ""


def launch(command: list[str], cwd: Path, env: dict[str, str], timeout_s: float) -> dict:
    """Run one command to the end or to its timeout; its output goes to files, so a stuck worker that
    still holds a pipe cannot block the check. On timeout torchrun gets SIGTERM (it stops its workers)
    and, 15 s later, SIGKILL."""
    started = time.perf_counter()
    with open(cwd / ".stdout", "w+") as out, open(cwd / ".stderr", "w+") as err:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=err)
        try:
            exit_code, timed_out = process.wait(timeout=timeout_s), False
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            exit_code, timed_out = None, True
        out.seek(0)
        err.seek(0)
        return dict(exit_code=exit_code, timed_out=timed_out, seconds=round(time.perf_counter() - started, 1),
                    stdout=out.read(), stderr=err.read())


def write_log(path: Path, command: list[str], result: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"$ {' '.join(command)}\nexit code: {result['exit_code']}, {result['seconds']} s"
                    f"{', timed out' if result['timed_out'] else ''}\n"
                    f"--- stdout ---\n{result['stdout']}\n--- stderr ---\n{result['stderr']}")


# --- Script checks -----------------------------------------------------------------------------------

def script_launches(script: str, mode: str, nproc: int, gpu_count: int, quick: bool) -> list[int]:
    """The process counts a script is launched with: 1 for a single-process script. A distributed one:
    nproc; in the full check on CUDA also one process per GPU. Never the same count twice: on one GPU
    that would be two identical single-process runs."""
    if not QUICK[script][1]:
        return [1]
    if mode == MODE_CUDA and not quick:
        return sorted({nproc, gpu_count})
    return [nproc]


def script_command(script: str, processes: int, workdir: Path, mode: str) -> list[str]:
    args, distributed = QUICK[script]
    program = [str(SCRIPTS / script), *args, "--out", str(workdir / script.replace(".py", ".json"))]
    if mode == MODE_CPU and takes_device_option(script):
        program += ["--device", "cpu"]
    if not distributed:
        return [sys.executable, *program]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}", *program]


def launch_environment(script: str, mode: str) -> dict[str, str]:
    """This environment; in the self-test, a script that cannot be told --device cpu sees no GPU."""
    env = dict(os.environ)
    if mode == MODE_CPU and not takes_device_option(script):
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def backend_of(result_file: Path) -> str | None:
    """The backend a script reports in its --out JSON (None when it wrote none or has no such key)."""
    try:
        written = json.loads(result_file.read_text())
    except (OSError, ValueError):
        return None
    return written.get("backend") if isinstance(written, dict) else None


def check_script(script: str, processes: int, mode: str, timeout_s: float, out: Path) -> dict:
    """Launch one script in a fresh folder; it passes when it exits 0, cleanly, on the expected backend."""
    distributed = QUICK[script][1]
    log = out / "logs" / f"{script[:-3]}-{processes}.log"
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        workdir = Path(tmp)
        command = script_command(script, processes, workdir, mode)
        result = launch(command, workdir, launch_environment(script, mode), timeout_s)
        backend = backend_of(workdir / script.replace(".py", ".json")) if distributed else None
    write_log(log, command, result)
    expected = "nccl" if mode == MODE_CUDA else "gloo"
    if result["timed_out"]:
        error = f"timed out after {timeout_s:g} s"
    elif result["exit_code"] != 0:
        error = last_error_line(result["stderr"], result["stdout"]) or f"exit code {result['exit_code']}, no output"
    elif "terminate called" in result["stderr"]:
        error = "unclean shutdown: " + next(line for line in result["stderr"].splitlines()
                                            if "terminate called" in line)
    elif distributed and backend not in (None, expected):
        error = f"ran on {backend}, expected {expected}"
    else:
        error = ""
    return dict(kind="script", name=script, processes=processes, distributed=distributed, ok=not error,
                seconds=result["seconds"], exit_code=result["exit_code"], last_error_line=error, backend=backend,
                log=str(log.relative_to(out)))


# --- Lesson checks -----------------------------------------------------------------------------------

def papermill_module():
    """papermill if this Python has it, else None: the check installs nothing."""
    if importlib.util.find_spec("papermill") is None:
        return None
    import papermill
    return papermill


@contextlib.contextmanager
def environment(**variables: str):
    """Set environment variables for what starts inside the block (papermill's kernel inherits them)."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def failed_cell_output(executed: Path) -> str:
    """What the failed cell of an executed lesson printed (a !torchrun cell shows its workers' errors)."""
    try:
        cells = json.loads(executed.read_text())["cells"]
    except (OSError, ValueError, KeyError):
        return ""
    for cell in cells:
        outputs = cell.get("outputs", [])
        if any(o.get("output_type") == "error" for o in outputs):
            texts = [o.get("text", "") for o in outputs if o.get("output_type") == "stream"]
            return "".join("".join(t) if isinstance(t, list) else t for t in texts)
    return ""


def lesson_error(papermill, error: Exception, executed: Path) -> str:
    """One line for a failed lesson. A failed !torchrun only raises "CalledProcessError: Command ...
    returned non-zero exit status 1": the line that says why is the last one its workers printed."""
    if not isinstance(error, papermill.PapermillExecutionError):
        return last_error_line(f"{type(error).__name__}: {error}", "")
    said = " ".join(f"{error.ename}: {error.evalue}".split())
    if error.ename == "CalledProcessError":
        launched = last_error_line(failed_cell_output(executed), "")
        said = f"{launched} ({error.ename})" if launched else said
    return f"cell {error.cell_index}: {said}"


def check_lesson(papermill, notebook: Path, mode: str, nproc: int, out: Path) -> dict:
    """Execute one lesson with papermill in a sandbox, with nproc_per_node processes per launch."""
    params = {"nproc_per_node": nproc} if "nproc_per_node" in series.declared_parameters(notebook) else {}
    executed = out / "lessons" / notebook.name
    executed.parent.mkdir(parents=True, exist_ok=True)
    hidden = dict(CUDA_VISIBLE_DEVICES="") if mode == MODE_CPU else {}  # the self-test's lessons see no GPU
    started = time.perf_counter()
    error = ""
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp, environment(**hidden):
        try:
            series.run_papermill(notebook, executed, params, series.make_sandbox(Path(tmp)), notebook.stem)
        except Exception as failure:  # a failed cell, a dead kernel, a missing kernel: all are results
            error = lesson_error(papermill, failure, executed)
    return dict(kind="lesson", name=notebook.name, processes=nproc, distributed=True, ok=not error,
                seconds=round(time.perf_counter() - started, 1), exit_code=None, last_error_line=error,
                backend=None, log=str(executed.relative_to(out)))


# --- The report --------------------------------------------------------------------------------------

def world_sizes(checks: list[dict]) -> list[int]:
    """The process counts that formed a process group in these checks (single-process scripts form none)."""
    return sorted({c["processes"] for c in checks if c["distributed"]})


def coverage(mode: str, checks: list[dict]) -> str:
    """What the run exercised, in words: one process per group tests NCCL's setup and the scripts on CUDA,
    but no collective ever crosses a process, so it is labelled as such."""
    backend = "NCCL" if mode == MODE_CUDA else "gloo"
    sizes = world_sizes(checks)
    if not sizes:
        return "no process group formed"
    if max(sizes) == 1:
        return f"single-process {backend} only"
    counts = ", ".join(map(str, sizes[:-1])) + (" and " if len(sizes) > 1 else "") + str(sizes[-1])
    return f"{backend} at {counts} processes"


def build_report(facts: dict, mode: str, checks: list[dict], lessons_skipped: str | None,
                 date: datetime.datetime | None = None, run: str = "full", planned: int | None = None,
                 estimate_s: float | None = None, seconds: float | None = None,
                 timeout_s: float = FULL_TIMEOUT_S, only: list[str] | None = None,
                 budget_s: float | None = None) -> dict:
    """The report: where it ran, what it covered, each check. planned is the number of checks the run was
    to make; fewer checks than that means the run was cut short (the report is rewritten after each)."""
    date = date or datetime.datetime.now(datetime.timezone.utc)  # noqa: UP017 (datetime.UTC needs Python 3.11)
    passed = sum(c["ok"] for c in checks)
    planned = len(checks) if planned is None else planned
    return dict(format=REPORT_FORMAT, date=date.isoformat(timespec="seconds"), mode=mode, run=run, only=only, **facts,
                world_sizes=world_sizes(checks), coverage=coverage(mode, checks), timeout_s=timeout_s,
                budget_s=budget_s, estimate_s=estimate_s, seconds=seconds, planned=planned,
                complete=len(checks) == planned, checks=checks, lessons_skipped=lessons_skipped, passed=passed,
                failed=len(checks) - passed)


def check_label(check: dict) -> str:
    return f"`{check['name']}`" + (" (lesson)" if check["kind"] == "lesson" else "")


def processes_label(processes: int) -> str:
    return f"{processes} process" + ("" if processes == 1 else "es")


def result_label(check: dict) -> str:
    if not check["ok"]:
        return "**failed**"
    return f"ok ({check['backend']})" if check.get("backend") else "ok"


def markdown_table(report: dict) -> str:
    rows = [f"| {check_label(c)} | {c['processes']} | {result_label(c)} | {c['seconds']} |" for c in report["checks"]]
    return "\n".join(["| check | processes | result | seconds |", "|---|---:|---|---:|", *rows])


def run_label(report: dict) -> str:
    """E.g. 'quick run (every script once, no lesson; 90 s timeout per launch)'."""
    scope = "every script once, no lesson" if report["run"] == "quick" else "scripts and lessons"
    return f"{report['run']} run ({scope}; {report['timeout_s']:g} s timeout per launch)"


def render_markdown(report: dict) -> str:
    """report.md: where it ran, what it covered, one row per check, then what each failed check said last."""
    date = datetime.datetime.fromisoformat(report["date"]).strftime("%Y-%m-%d %H:%M UTC")
    title = f"# GPU check, {date}: {report['coverage']}"
    title += "" if report["mode"] == MODE_CUDA else f", {report['mode']}"
    machine = (f"torch {report['torch']}, CUDA {report['cuda'] or 'none'}, NCCL {report['nccl'] or 'none'}, "
               f"{gpu_summary(report['gpus'])}; Python {report['python']} on {report['host']}.")
    sizes = ", ".join(map(str, report["world_sizes"])) or "none"
    covered = f"A {run_label(report)}. World sizes (processes per process group): {sizes}."
    if report["seconds"] is not None:
        estimate = f" (estimated {report['estimate_s']:.0f} s)" if report["estimate_s"] is not None else ""
        covered += f" Took {report['seconds']:.0f} s{estimate}."
    parts = [title, machine, covered, markdown_table(report)]
    if not report["complete"]:
        parts.append(f"**Incomplete**: {len(report['checks'])} of {report['planned']} checks ran (the --budget "
                     f"was spent, or the run was stopped or is still running).")
    failed = [c for c in report["checks"] if not c["ok"]]
    if failed:
        parts.append("Failed:\n\n" + "\n".join(f"- {check_label(c)}, {processes_label(c['processes'])}: "
                                               f"{c['last_error_line']} (see {c['log']})" for c in failed))
    if report["lessons_skipped"]:
        parts.append(f"Lessons skipped ({report['lessons_skipped']}).")
    parts.append(f"{report['passed']} passed, {report['failed']} failed.")
    return "\n\n".join(parts) + "\n"


def write_report(report: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "report.md").write_text(render_markdown(report))


def clear_previous_results(out: Path) -> None:
    """Remove what an earlier check wrote there (only that: --out may name a folder with other files)."""
    for name in ("report.json", "report.md"):
        (out / name).unlink(missing_ok=True)
    for name in ("logs", "lessons"):
        shutil.rmtree(out / name, ignore_errors=True)


# --- The whole check ---------------------------------------------------------------------------------

def selected(names: list[str], only: list[str] | None) -> list[str]:
    """The names that start with one of the --only prefixes (all of them without --only)."""
    return [n for n in names if not only or any(n.startswith(prefix) for prefix in only)]


def plan_scripts(only: list[str] | None) -> list[str]:
    return selected(sorted(QUICK), only)


def plan_lessons(only: list[str] | None) -> list[Path]:
    lessons = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb") if series.LESSON_NAME.match(p.name))
    return [NOTEBOOKS / name for name in selected(lessons, only)]


def make_plan(mode: str, nproc: int, gpu_count: int, only: list[str] | None, lessons: bool, quick: bool,
              timeout_s: float, budget_s: float | None = None) -> dict:
    """What the run will do, decided before it starts: the launches, the lessons (or why none), the limits."""
    launches = [(s, n) for s in plan_scripts(only) for n in script_launches(s, mode, nproc, gpu_count, quick)]
    papermill = papermill_module() if lessons and not quick else None
    if quick:
        lessons_skipped = "--quick runs the scripts only"
    elif not lessons:
        lessons_skipped = "--no-lessons"
    elif papermill is None:
        lessons_skipped = f"papermill is not installed for {sys.executable}"
    else:
        lessons_skipped = None
    notebooks = plan_lessons(only) if papermill else []
    return dict(mode=mode, run="quick" if quick else "full", only=only, nproc=nproc, launches=launches,
                papermill=papermill, notebooks=notebooks, lessons_skipped=lessons_skipped, timeout_s=timeout_s,
                budget_s=budget_s, estimate_s=estimate_seconds(launches, mode))


def estimate_seconds(launches: list[tuple[str, int]], mode: str) -> float:
    """The launches' time: CPU_SECONDS (1 process, or 2 for any larger count: each rank has its own GPU),
    plus CUDA_START_ALLOWANCE_S per launch on CUDA. A script missing from the table counts as the slowest."""
    slowest = max(max(times) for times in CPU_SECONDS.values())
    measured = sum(CPU_SECONDS.get(script, (slowest, slowest))[0 if n == 1 else 1] for script, n in launches)
    return measured + (CUDA_START_ALLOWANCE_S * len(launches) if mode == MODE_CUDA else 0.0)


def describe_plan(plan: dict) -> str:
    """Printed before the first launch: what will run, how long it should take, how long it can take."""
    launches = plan["launches"]
    by_count = collections.Counter(n for s, n in launches if QUICK[s][1])
    single = sum(not QUICK[s][1] for s, _ in launches)
    parts = [f"{count} distributed × {n} process{'' if n == 1 else 'es'}" for n, count in sorted(by_count.items())]
    parts += [f"{single} single-process"] if single else []
    lines = [f"plan ({plan['run']}, {plan['mode']}): {len(launches)} launches ({', '.join(parts) or 'none'}), "
             f"timeout {plan['timeout_s']:g} s each; "
             + (f"{len(plan['notebooks'])} lessons" if plan["notebooks"] else
                f"no lessons ({plan['lessons_skipped']})")]
    cpu = estimate_seconds(launches, MODE_CPU)
    how = f"{cpu:.0f} s of these launches on the CPU ({QUICK_TIMINGS_RUNS})"
    if plan["mode"] == MODE_CUDA:
        how += f" + {len(launches)} × {CUDA_START_ALLOWANCE_S:g} s of CUDA start-up per launch (assumed)"
    worst = len(launches) * (plan["timeout_s"] + TERMINATE_GRACE_S)
    if plan["budget_s"] is not None:
        worst = min(worst, plan["budget_s"] + plan["timeout_s"] + TERMINATE_GRACE_S)
    lines.append(f"estimate: about {plan['estimate_s'] / 60:.1f} min for the scripts = {how}"
                 + (", lessons not estimated" if plan["notebooks"] else "")
                 + f"; at most {worst / 60:.1f} min if launches ran into their timeout"
                 + (f" (no launch starts after {plan['budget_s']:g} s: --budget)" if plan["budget_s"] else ""))
    return "\n".join(lines)


def announce(i: int, total: int, check: dict) -> None:
    result = result_label(check).strip("*")
    detail = f": {check['last_error_line']}" if not check["ok"] else ""
    print(f"[{i}/{total}] {check['name']} × {check['processes']}: {result} in {check['seconds']} s{detail}",
          flush=True)


def run_checks(plan: dict, facts: dict, out: Path) -> dict:
    """Every planned launch, then every planned lesson; the report is rewritten after each check, so a
    run that is cut short (a machine taken back) still leaves one. Returns the final report."""
    total = len(plan["launches"]) + len(plan["notebooks"])
    clear_previous_results(out)
    started = time.perf_counter()
    checks: list[dict] = []

    def report() -> dict:
        return build_report(facts, plan["mode"], checks, plan["lessons_skipped"], run=plan["run"], planned=total,
                            estimate_s=round(plan["estimate_s"]), seconds=round(time.perf_counter() - started, 1),
                            timeout_s=plan["timeout_s"], only=plan["only"], budget_s=plan["budget_s"])

    def out_of_time() -> bool:
        if plan["budget_s"] is None or time.perf_counter() - started < plan["budget_s"]:
            return False
        print(f"--budget {plan['budget_s']:g} s spent: {total - len(checks)} checks not run", flush=True)
        return True

    write_report(report(), out)
    for script, processes in plan["launches"]:
        if out_of_time():
            break
        checks.append(check_script(script, processes, plan["mode"], plan["timeout_s"], out))
        announce(len(checks), total, checks[-1])
        write_report(report(), out)
    for notebook in plan["notebooks"] if len(checks) == len(plan["launches"]) else []:
        if out_of_time():
            break
        checks.append(check_lesson(plan["papermill"], notebook, plan["mode"], plan["nproc"], out))
        announce(len(checks), total, checks[-1])
        write_report(report(), out)
    final = report()
    write_report(final, out)
    return final


# --- The README's "Verified on" table ----------------------------------------------------------------

REQUIRED_FIELDS = ("format", "date", "mode", "run", "only", "python", "torch", "cuda", "nccl", "gpus", "gpu_count",
                   "world_sizes", "coverage", "timeout_s", "planned", "complete", "checks", "lessons_skipped",
                   "passed", "failed")


def load_verified(folder: Path) -> list[dict]:
    """The committed reports, newest first. Only reports of a real GPU run count: a CPU self-test in the
    "Verified on" table would claim a GPU result nobody measured."""
    reports = []
    for path in sorted(folder.glob("*.json")):
        try:
            report = json.loads(path.read_text())
        except ValueError as error:
            raise UsageError(f"{path}: not JSON ({error})") from None
        missing = [f for f in REQUIRED_FIELDS if not isinstance(report, dict) or f not in report]
        if missing:
            raise UsageError(f"{path}: not a gpu_check report (missing {', '.join(missing)})")
        if report["format"] != REPORT_FORMAT:
            raise UsageError(f"{path}: report format {report['format']}, this tool reads format {REPORT_FORMAT}")
        if report["mode"] != MODE_CUDA or not report["gpus"]:
            raise UsageError(f"{path}: mode {report['mode']!r}: only reports of a GPU run (mode \"cuda\") "
                             f"are accepted")
        reports.append(report)
    return sorted(reports, key=lambda r: r["date"], reverse=True)


def checks_cell(report: dict) -> str:
    total = report["passed"] + report["failed"]
    cell = f"{report['passed']}/{total} passed"
    if not report["complete"]:
        cell += f"; incomplete: {total} of {report['planned']} ran"
    failed = sorted({c["name"] for c in report["checks"] if not c["ok"]})
    if failed:
        cell += f"; failed: {', '.join(failed)}"
    if report["lessons_skipped"]:
        cell += f"; lessons skipped ({report['lessons_skipped']})"
    return cell


def run_cell(report: dict) -> str:
    """'quick' or 'full', and the --only selection where the run did not cover every script and lesson."""
    return report["run"] + (f" (--only {','.join(report['only'])})" if report["only"] else "")


VERIFIED_HEADER = ["| date | GPUs | torch | CUDA | NCCL | Python | run | world sizes | covered | checks |",
                   "|---|---|---|---|---|---|---|---|---|---|"]


def verified_section(reports: list[dict]) -> str:
    """The text between the README's markers: what each GPU report covered, a row each (none yet: a header)."""
    if not reports:
        return "\n".join([
            "No GPU run has been recorded yet, so the table is empty. What CI runs is the CPU path, with gloo:",
            "every lesson with `nproc_per_node = 2` (lesson 08 again at 3, lessons 05 and 09 again at 1), and every",
            "script under torchrun with 1, 2 and 3 processes (01 and 03, single-process, with python). To record a",
            "GPU run, run the check below on a machine with NVIDIA GPUs and follow "
            "[verified/README.md](verified/README.md).", "", *VERIFIED_HEADER])
    rows = [f"| {r['date'][:10]} | {gpu_summary(r['gpus'])} | {r['torch']} | {r['cuda']} | {r['nccl'] or '–'} "
            f"| {r['python']} | {run_cell(r)} | {', '.join(map(str, r['world_sizes'])) or '–'} | {r['coverage']} "
            f"| {checks_cell(r)} |" for r in reports]
    return "\n".join(["Each row is a report of the GPU check in [verified/](verified/); "
                      "`python3 tools/gpu_check.py --readme` writes this table from them. *World sizes*: the",
                      "processes per process group it launched; *covered*: \"single-process NCCL only\" where no",
                      "collective crossed a process.", "", *VERIFIED_HEADER, *rows])


def with_verified_section(readme: str, section: str) -> str:
    start, end = readme.find(START_MARKER), readme.find(END_MARKER)
    if start < 0 or end < start:
        raise UsageError(f"the README has no {START_MARKER} ... {END_MARKER} section")
    return readme[:start + len(START_MARKER)] + "\n" + section + "\n" + readme[end:]


def update_readme(readme_file: Path, verified: Path, check_only: bool) -> int:
    """Write the "Verified on" table from the reports; with check_only, exit 1 where it differs instead."""
    current = readme_file.read_text()
    wanted = with_verified_section(current, verified_section(load_verified(verified)))
    if wanted == current:
        print(f"{readme_file.name}: the Verified-on table matches {verified}/*.json")
        return 0
    if check_only:
        print(f"{readme_file.name}: the Verified-on table is not what {verified}/*.json gives; "
              f"run python tools/gpu_check.py --readme", file=sys.stderr)
        return 1
    readme_file.write_text(wanted)
    print(f"{readme_file.name}: Verified-on table written from {verified}/*.json")
    return 0


# --- Command line ------------------------------------------------------------------------------------

def prefixes(text: str) -> list[str]:
    """An argparse type: '00,04' -> ['00', '04']."""
    found = [p.strip() for p in text.split(",") if p.strip()]
    if not found:
        raise argparse.ArgumentTypeError(f"expected lesson prefixes like 00,04, got {text!r}")
    return found


def positive_number(text: str) -> float:
    """An argparse type: a finite number > 0 (float() also accepts 'nan' and 'inf')."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite positive number, got {text}")
    return value


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text}")
    return int(text)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"every script once, one process per GPU, --timeout {QUICK_TIMEOUT_S:g}, no lessons")
    parser.add_argument("--cpu", action="store_true",
                        help="self-test of the check on the CPU (gloo, --device cpu): not a GPU result")
    parser.add_argument("--only", type=prefixes, metavar="NN,NN", help="only scripts and lessons with these prefixes")
    parser.add_argument("--no-lessons", action="store_true", help="check the scripts only")
    parser.add_argument("--nproc", type=positive_int,
                        help="processes per launch (default: min(2, GPUs), with --quick the GPUs; 2 with --cpu)")
    parser.add_argument("--timeout", type=positive_number,
                        help=f"seconds each launch may take (default {FULL_TIMEOUT_S:g}; {QUICK_TIMEOUT_S:g} with "
                             f"--quick)")
    parser.add_argument("--budget", type=positive_number,
                        help=f"seconds after which no launch starts (default: {QUICK_BUDGET_S:g} with --quick, "
                             f"none otherwise); the checks left are reported as not run")
    parser.add_argument("--out", type=Path, default=REPO / "build" / "gpu-check", help="report folder")
    parser.add_argument("--readme", action="store_true", help="write the README's Verified-on table from --verified")
    parser.add_argument("--check", action="store_true",
                        help="with --readme: write nothing, exit 1 if the README differs")
    parser.add_argument("--verified", type=Path, default=VERIFIED, help="folder of GPU reports (default verified/)")
    parser.add_argument("--readme-file", type=Path, default=README, help="the README to write or check")
    return parser


def processes_per_launch(args: argparse.Namespace, gpu_count: int) -> int:
    if args.cpu:
        return args.nproc or 2
    if args.nproc and args.nproc > gpu_count:
        raise UsageError(f"--nproc {args.nproc} needs {args.nproc} GPUs; this machine has {gpu_count}")
    return args.nproc or (gpu_count if args.quick else min(2, gpu_count))


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.check and not args.readme:
        parser.error("--check goes with --readme")
    try:
        if args.readme:
            return update_readme(args.readme_file, args.verified, args.check)
        if args.only and not plan_scripts(args.only) and not plan_lessons(args.only):
            raise UsageError(f"nothing matches --only {','.join(args.only)}")
        too_old = too_old_message(torch.__version__)
        if too_old:
            raise UsageError(too_old)
        cuda, torch_said = cuda_status()
        if not args.cpu and not cuda:
            evidence = nvidia_device_present()
            if evidence:  # never report "nothing to check" on a machine whose GPU this torch cannot use
                print(unusable_gpu_message(evidence, torch_said), file=sys.stderr)
                return 1
            print(no_cuda_message())
            return 0
        mode = MODE_CPU if args.cpu else MODE_CUDA
        facts = machine_facts(cuda)
        nproc = processes_per_launch(args, facts["gpu_count"])
    except UsageError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    timeout_s = args.timeout or (QUICK_TIMEOUT_S if args.quick else FULL_TIMEOUT_S)
    budget_s = args.budget or (QUICK_BUDGET_S if args.quick else None)
    plan = make_plan(mode, nproc, facts["gpu_count"], args.only, not args.no_lessons, args.quick, timeout_s, budget_s)
    print(describe_plan(plan), flush=True)
    out = args.out.resolve()
    report = run_checks(plan, facts, out)
    print("\n" + markdown_table(report) + "\n")
    if report["lessons_skipped"]:
        print(f"lessons skipped ({report['lessons_skipped']})")
    print(f"covered: {report['coverage']} (world sizes: {', '.join(map(str, report['world_sizes'])) or 'none'})")
    print(f"{report['passed']} passed, {report['failed']} failed in {report['seconds']:.0f} s "
          f"(estimated {report['estimate_s']:.0f} s; {report['mode']}); report: {out / 'report.md'}", flush=True)
    if not report["complete"]:
        print(f"incomplete: {len(report['checks'])} of {report['planned']} checks ran", flush=True)
    return 1 if report["failed"] or not report["complete"] else 0


if __name__ == "__main__":
    sys.exit(main())
