"""The GPU check: run every script and lesson on this machine's GPUs, with NCCL, and write a report.

    python tools/gpu_check.py [--only 00,04] [--no-lessons] [--nproc N] [--timeout 300] [--out build/gpu-check]
    python tools/gpu_check.py --cpu ...          # a self-test of this check on a machine without GPUs
    python tools/gpu_check.py --readme [--check] # the README's "Verified on" table, from verified/*.json

CI has no GPU: it runs every script and lesson on the CPU, with gloo. This check is what a user runs on
a CUDA machine to show that the NCCL path works as well. Each distributed script is launched with
min(2, GPUs) processes and again with --nproc_per_node=gpu (one process per GPU); the two
single-process scripts run once; each lesson runs under papermill when papermill can be imported.
Results: OUT/report.json and OUT/report.md, one log per launch in OUT/logs/, the executed lessons in
OUT/lessons/. Exit code 0 when every check passed, 1 when one failed, 2 for bad arguments.

It needs the standard library and torch only, and installs nothing: a GPU machine may have no network
and its own CUDA build of torch, so any Python with torch can run it.
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
from pathlib import Path

try:
    import torch
except ImportError:
    sys.exit("gpu_check.py needs torch: run it with the Python of the environment that has your CUDA torch")

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

MODE_CUDA = "cuda"
MODE_CPU = "cpu self-test (not a GPU result)"
REPORT_FORMAT = 1
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


def machine_facts() -> dict:
    """What the report says about where it ran: the versions and GPUs a result depends on."""
    cuda = torch.cuda.is_available()
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else []
    return dict(python=platform.python_version(), torch=torch.__version__, cuda=torch.version.cuda,
                nccl=nccl_version() if cuda else None, gpus=gpus, gpu_count=len(gpus), host=platform.node())


def no_cuda_message() -> str:
    return (f"no CUDA here (torch {torch.__version__}, CUDA build: {torch.version.cuda or 'none'}): nothing to "
            f"check; run this on a machine with NVIDIA GPUs (or --cpu to test the check itself on the CPU)")


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

def script_launches(script: str, mode: str, nproc: int) -> list[int | str]:
    """The process counts a script is launched with: 1 for a single-process script; for a distributed
    one nproc, and on CUDA also 'gpu' (torchrun's one process per GPU, whatever their number)."""
    if not QUICK[script][1]:
        return [1]
    return [nproc, "gpu"] if mode == MODE_CUDA else [nproc]


def script_command(script: str, processes: int | str, workdir: Path, mode: str) -> list[str]:
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


def check_script(script: str, processes: int | str, mode: str, timeout_s: float, out: Path) -> dict:
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
    return dict(kind="script", name=script, processes=processes, ok=not error, seconds=result["seconds"],
                exit_code=result["exit_code"], last_error_line=error, backend=backend,
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
    return dict(kind="lesson", name=notebook.name, processes=nproc, ok=not error,
                seconds=round(time.perf_counter() - started, 1), exit_code=None, last_error_line=error,
                backend=None, log=str(executed.relative_to(out)))


# --- The report --------------------------------------------------------------------------------------

def build_report(facts: dict, mode: str, checks: list[dict], lessons_skipped: str | None,
                 date: datetime.datetime | None = None) -> dict:
    date = date or datetime.datetime.now(datetime.timezone.utc)  # noqa: UP017 (datetime.UTC needs Python 3.11)
    passed = sum(c["ok"] for c in checks)
    return dict(format=REPORT_FORMAT, date=date.isoformat(timespec="seconds"), mode=mode, **facts,
                checks=checks, lessons_skipped=lessons_skipped, passed=passed, failed=len(checks) - passed)


def check_label(check: dict) -> str:
    return f"`{check['name']}`" + (" (lesson)" if check["kind"] == "lesson" else "")


def processes_label(processes: int | str) -> str:
    if processes == "gpu":
        return "one process per GPU"
    return f"{processes} process" + ("" if processes == 1 else "es")


def result_label(check: dict) -> str:
    if not check["ok"]:
        return "**failed**"
    return f"ok ({check['backend']})" if check.get("backend") else "ok"


def markdown_table(report: dict) -> str:
    rows = [f"| {check_label(c)} | {c['processes']} | {result_label(c)} | {c['seconds']} |" for c in report["checks"]]
    return "\n".join(["| check | processes | result | seconds |", "|---|---:|---|---:|", *rows])


def render_markdown(report: dict) -> str:
    """report.md: where it ran, one row per check, then what each failed check said last."""
    date = datetime.datetime.fromisoformat(report["date"]).strftime("%Y-%m-%d %H:%M UTC")
    title = f"# GPU check, {date}" + ("" if report["mode"] == MODE_CUDA else f": {report['mode']}")
    machine = (f"torch {report['torch']}, CUDA {report['cuda'] or 'none'}, NCCL {report['nccl'] or 'none'}, "
               f"{gpu_summary(report['gpus'])}; Python {report['python']} on {report['host']}.")
    parts = [title, machine, markdown_table(report)]
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


def announce(i: int, total: int, check: dict) -> None:
    result = result_label(check).strip("*")
    detail = f": {check['last_error_line']}" if not check["ok"] else ""
    print(f"[{i}/{total}] {check['name']} × {check['processes']}: {result} in {check['seconds']} s{detail}",
          flush=True)


def run_checks(mode: str, nproc: int, only: list[str] | None, lessons: bool, timeout_s: float,
               out: Path) -> dict:
    """Every selected script, then every selected lesson; returns the report (already written)."""
    scripts = [(s, p) for s in plan_scripts(only) for p in script_launches(s, mode, nproc)]
    papermill = papermill_module() if lessons else None
    notebooks = plan_lessons(only) if papermill else []
    lessons_skipped = None if papermill else ("--no-lessons" if not lessons else "papermill not installed")
    total = len(scripts) + len(notebooks)
    clear_previous_results(out)
    checks = []
    for script, processes in scripts:
        checks.append(check_script(script, processes, mode, timeout_s, out))
        announce(len(checks), total, checks[-1])
    for notebook in notebooks:
        checks.append(check_lesson(papermill, notebook, mode, nproc, out))
        announce(len(checks), total, checks[-1])
    report = build_report(machine_facts(), mode, checks, lessons_skipped)
    write_report(report, out)
    return report


# --- The README's "Verified on" table ----------------------------------------------------------------

REQUIRED_FIELDS = ("format", "date", "mode", "python", "torch", "cuda", "nccl", "gpus", "gpu_count", "checks",
                   "lessons_skipped", "passed", "failed")


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
    failed = sorted({c["name"] for c in report["checks"] if not c["ok"]})
    if failed:
        cell += f"; failed: {', '.join(failed)}"
    if report["lessons_skipped"]:
        cell += f"; lessons skipped ({report['lessons_skipped']})"
    return cell


def verified_section(reports: list[dict]) -> str:
    """The text between the README's markers: a row per GPU report, or a plain 'none yet'."""
    if not reports:
        return ("No GPU run has been recorded yet. What CI runs is the CPU path, with gloo: every lesson with\n"
                "`nproc_per_node = 2` (lesson 08 again at 3, lessons 05 and 09 again at 1), and every script under\n"
                "torchrun with 1, 2 and 3 processes (01 and 03, single-process, with python). To record a GPU run,\n"
                "run the check below on a machine with NVIDIA GPUs and follow "
                "[verified/README.md](verified/README.md).")
    rows = [f"| {r['date'][:10]} | {gpu_summary(r['gpus'])} | {r['torch']} | {r['cuda']} | {r['nccl'] or '–'} "
            f"| {r['python']} | {checks_cell(r)} |" for r in reports]
    return "\n".join(["Each row is a report of the GPU check in [verified/](verified/); "
                      "`python tools/gpu_check.py --readme` writes this table from them.", "",
                      "| date | GPUs | torch | CUDA | NCCL | Python | checks |",
                      "|---|---|---|---|---|---|---|", *rows])


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
    parser.add_argument("--cpu", action="store_true",
                        help="self-test of the check on the CPU (gloo, --device cpu): not a GPU result")
    parser.add_argument("--only", type=prefixes, metavar="NN,NN", help="only scripts and lessons with these prefixes")
    parser.add_argument("--no-lessons", action="store_true", help="check the scripts only")
    parser.add_argument("--nproc", type=positive_int,
                        help="processes per launch (default: min(2, GPUs); 2 with --cpu)")
    parser.add_argument("--timeout", type=positive_number, default=300.0, help="seconds each launch may take")
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
    return args.nproc or min(2, gpu_count)


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.check and not args.readme:
        parser.error("--check goes with --readme")
    try:
        if args.readme:
            return update_readme(args.readme_file, args.verified, args.check)
        if not args.cpu and not torch.cuda.is_available():
            print(no_cuda_message())
            return 0
        if args.only and not plan_scripts(args.only) and not plan_lessons(args.only):
            raise UsageError(f"nothing matches --only {','.join(args.only)}")
        mode = MODE_CPU if args.cpu else MODE_CUDA
        nproc = processes_per_launch(args, torch.cuda.device_count())
    except UsageError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    out = args.out.resolve()
    started = time.perf_counter()
    report = run_checks(mode, nproc, args.only, not args.no_lessons, args.timeout, out)
    print("\n" + markdown_table(report) + "\n")
    if report["lessons_skipped"]:
        print(f"lessons skipped ({report['lessons_skipped']})")
    print(f"{report['passed']} passed, {report['failed']} failed in {time.perf_counter() - started:.0f} s "
          f"({report['mode']}); report: {out / 'report.md'}", flush=True)
    return 1 if report["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
