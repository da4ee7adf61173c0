"""Lesson 10: the SLURM batch scripts (syntax, directives, what each launches, dry runs with stand-ins for
srun and scontrol), the lesson's fallback to the dry run where no cluster starts, and the socket reader of
10_node_report.py. No cluster needed: tests/test_notebooks.py runs lesson 10 on the real one."""

import json
import os
import re
import runpy
import socket
import subprocess
import sys

import pytest
import series
from clean_notebooks import text_of
from conftest import NOTEBOOKS, SCRIPTS

SBATCH = SCRIPTS / "10_slurm.sbatch"
TASKS = SCRIPTS / "10_slurm_tasks.sbatch"
REQUEUE = SCRIPTS / "10_slurm_requeue.sbatch"
SIGNALS = SCRIPTS / "10_slurm_signals.sbatch"
ALL_SBATCH = [SBATCH, TASKS, REQUEUE]
NODES = ["gpu-a17", "gpu-b03"]
JOB_ID = 123456


@pytest.mark.parametrize("script", [*ALL_SBATCH, SIGNALS], ids=lambda p: p.name)
def test_sbatch_syntax(script):
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr


def directives(script):
    """The #SBATCH lines, after checking that they all come before the first command (sbatch stops there)."""
    lines = script.read_text().splitlines()
    assert lines[0] == "#!/bin/bash"
    first_command = next(i for i, line in enumerate(lines) if line.strip() and not line.startswith("#"))
    found = [i for i, line in enumerate(lines) if line.startswith("#SBATCH")]
    assert found and max(found) < first_command, script.name
    return "\n".join(lines[i] for i in found)


@pytest.mark.parametrize("script", [*ALL_SBATCH, SIGNALS], ids=lambda p: p.name)
def test_sbatch_directives_come_before_any_command(script):
    text = directives(script)
    assert "--nodes=" in text and "--ntasks-per-node=" in text and "--time=" in text
    if script == SBATCH:
        assert "--ntasks-per-node=1" in text  # one task (one torchrun agent) per node


def test_requeue_sbatch_asks_for_the_signal_and_the_requeue():
    text = directives(REQUEUE)
    assert "#SBATCH --requeue" in text and "#SBATCH --open-mode=append" in text  # a requeued job appends
    warning = re.search(r"^#SBATCH --signal=USR1@(\d+)$", text, re.M)  # to every task, not B: (the shell only)
    assert warning and int(warning.group(1)) >= 60, text


@pytest.mark.parametrize("script", ALL_SBATCH, ids=lambda p: p.name)
def test_sbatch_passes_cpus_and_a_production_timeout(script):
    text = script.read_text()
    assert re.search(r'^srun .*--cpus-per-task="\$cpus_per_task"', text, re.M), "srun does not inherit it"
    assert "export OMP_NUM_THREADS=" in text
    assert re.search(r'--timeout "\$collective_timeout"', text), "a production --timeout"
    assert "29500" not in text and "--master-port" not in text and "--standalone" not in text


def test_sbatch_runs_04_with_torchrun_and_c10d():
    text = SBATCH.read_text()
    command = re.search(r"^srun .*?torchrun(.*?)04_ddp_train\.py", text, re.S | re.M)
    assert command, "an `srun ... torchrun ... 04_ddp_train.py` command"
    flags = command.group(1)
    for flag in ("--nnodes=\"$SLURM_NNODES\"", "--rdzv-backend=c10d", "--rdzv-id=\"$SLURM_JOB_ID\"",
                 "--rdzv-endpoint=\"$head_node:$rdzv_port\"", "--nproc_per_node="):
        assert flag in flags, flag
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1' in text
    assert re.search(r'04_ddp_train\.py .*--timeout "\$collective_timeout"', text), "a production --timeout"


@pytest.mark.parametrize("script", [TASKS, REQUEUE], ids=lambda p: p.name)
def test_task_scripts_run_without_torchrun(script):
    text = script.read_text()
    commands = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    assert not any("torchrun" in line for line in commands), "one SLURM task per process: no agent"
    assert "RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID" in text and "WORLD_SIZE=$SLURM_NTASKS" in text


# A stand-in for srun: it runs its command once per task, one after the other, with the variables srun
# gives each task, and prefixes each output line with the task number (as srun --label does).
FAKE_SRUN = """#!{python}
import os, subprocess, sys
args = sys.argv[1:]
first = next(i for i, a in enumerate(args) if not a.startswith("-"))
options, command = args[:first], args[first:]
per_node = int(next((o.split("=", 1)[1] for o in options if o.startswith("--ntasks-per-node=")), "1"))
print("srun", *options, flush=True)
for node_id, node in enumerate(os.environ["FAKE_NODES"].split()):
    for local in range(per_node):
        rank = node_id * per_node + local
        env = dict(os.environ, SLURM_PROCID=str(rank), SLURM_LOCALID=str(local), SLURM_NODEID=str(node_id),
                   SLURMD_NODENAME=node)
        result = subprocess.run(command, env=env, capture_output=True, text=True)
        sys.stderr.write(result.stderr)
        for line in result.stdout.splitlines():
            print(f"{{rank}}: {{line}}", flush=True)
        if result.returncode:
            sys.exit(result.returncode)
"""
# Stand-ins for the programs a task starts: they print their arguments and the variables they were given.
FAKE_PROGRAM = """#!/bin/sh
echo "$(basename "$0") $* | RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE \
LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT OMP_NUM_THREADS=$OMP_NUM_THREADS"
"""
CLEARED = ("RDZV_PORT", "NPROC_PER_NODE", "COLLECTIVE_TIMEOUT", "MASTER_ADDR", "MASTER_PORT", "SNAPSHOT_DIR",
           "OMP_NUM_THREADS", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")


def _dry_env(tmp_path):
    """The environment of a dry run: stand-ins for srun, scontrol, torchrun and python first on PATH (in
    tmp_path/bin; scontrol logs its arguments to tmp_path/scontrol.log), and the variables of a 2-node job."""
    fake = tmp_path / "bin"
    fake.mkdir(parents=True, exist_ok=True)
    (fake / "scontrol").write_text('#!/bin/sh\necho "$*" >> "$FAKE_SCONTROL_LOG"\nprintf "%s\\n" $FAKE_NODES\n')
    (fake / "srun").write_text(FAKE_SRUN.format(python=sys.executable))
    for program in ("torchrun", "python"):
        (fake / program).write_text(FAKE_PROGRAM)
    for tool in fake.iterdir():
        tool.chmod(0o755)
    base = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_") and k not in CLEARED}
    base.update(PATH=f"{fake}{os.pathsep}{os.environ['PATH']}", FAKE_NODES=" ".join(NODES),
                FAKE_SCONTROL_LOG=str(tmp_path / "scontrol.log"),
                SLURM_JOB_ID=str(JOB_ID), SLURM_JOB_NODELIST="gpu-a17,gpu-b03", SLURM_NNODES="2")
    return base


def dry_run(tmp_path, script, *args, **env):
    """Run a batch script with the stand-ins; (srun's options, {task number: what it printed, as lines})."""
    base = dict(_dry_env(tmp_path), **env)
    result = subprocess.run(["bash", str(script), *args], env=base, cwd=tmp_path, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    options = next(line.split()[1:] for line in lines if line.startswith("srun "))
    tasks = {}
    for line in lines:
        match = re.match(r"^(\d+): (.*)$", line)
        if match:
            tasks.setdefault(int(match.group(1)), []).append(match.group(2))
    return options, tasks, lines[0]


def launched(task_lines, program):
    """(arguments, {variable: value}) of the program line a task printed."""
    line = next(text for text in task_lines if text.startswith(program + " ") and " | " in text)
    command, variables = line.split(" | ")
    return command.split()[1:], dict(pair.split("=", 1) for pair in variables.split())


def test_sbatch_dry_run_builds_the_torchrun_command(tmp_path):
    options, tasks, first_line = dry_run(tmp_path, SBATCH, SLURM_GPUS_ON_NODE="8", SLURM_CPUS_PER_TASK="16")
    assert options[:2] == ["--ntasks-per-node=1", "--cpus-per-task=16"] and "--label" in options, options
    assert sorted(tasks) == [0, 1], tasks  # one task, one agent, per node
    assert [lines[0] for lines in tasks.values()] == [f"torchrun agent on {node}" for node in NODES], tasks
    for lines in tasks.values():
        args, variables = launched(lines, "torchrun")
        assert "--nnodes=2" in args and "--nproc_per_node=8" in args and f"--rdzv-id={JOB_ID}" in args
        endpoint = next(a for a in args if a.startswith("--rdzv-endpoint="))
        host, port = endpoint.split("=", 1)[1].rsplit(":", 1)
        assert host == "gpu-a17"  # the head node: the first of the allocation
        assert 20000 <= int(port) <= 29999 and int(port) == 20000 + JOB_ID % 10000
        assert args[args.index("04_ddp_train.py") + 1:][-2:] == ["--out", f"runs/slurm-{JOB_ID}.json"], args
        # a production collective timeout, not the scripts' 60 s: at least NCCL's default of 10 minutes
        timeout = float(args[args.index("--timeout") + 1])
        assert args.index("--timeout") > args.index("04_ddp_train.py") and timeout >= 600, args
        assert variables["OMP_NUM_THREADS"] == "2", variables  # 16 CPUs of the task / 8 workers
    assert first_line == f"head node gpu-a17:{20000 + JOB_ID % 10000}, 2 nodes x 8 processes, OMP_NUM_THREADS=2"


def test_sbatch_dry_run_overrides(tmp_path):
    _, tasks, _ = dry_run(tmp_path, SBATCH, "--epochs", "7", RDZV_PORT="31337", NPROC_PER_NODE="3",
                          COLLECTIVE_TIMEOUT="900", SLURM_CPUS_PER_TASK="2")
    args, variables = launched(tasks[0], "torchrun")
    assert "--rdzv-endpoint=gpu-a17:31337" in args and "--nproc_per_node=3" in args
    assert args[args.index("--timeout") + 1] == "900", args
    assert args[-2:] == ["--epochs", "7"], args  # the script's arguments go to 04_ddp_train.py, last: they win
    assert variables["OMP_NUM_THREADS"] == "1", variables  # 2 CPUs / 3 workers: at least 1


@pytest.mark.parametrize("gpus", [None, "0"])
def test_sbatch_dry_run_without_gpus_starts_one_process(tmp_path, gpus):
    env = {} if gpus is None else {"SLURM_GPUS_ON_NODE": gpus}
    options, tasks, _ = dry_run(tmp_path, SBATCH, **env)
    args, variables = launched(tasks[0], "torchrun")
    assert "--nproc_per_node=1" in args and variables["OMP_NUM_THREADS"] == "1", (args, variables)
    assert "--cpus-per-task=1" in options, options  # no --cpus-per-task given: SLURM's default, 1


def test_tasks_sbatch_dry_run_sets_the_ranks_from_slurm(tmp_path):
    options, tasks, first_line = dry_run(tmp_path, TASKS, SLURM_NTASKS="8", SLURM_NTASKS_PER_NODE="4",
                                         SLURM_CPUS_PER_TASK="4")
    assert options[:2] == ["--ntasks-per-node=4", "--cpus-per-task=4"], options
    assert sorted(tasks) == list(range(8)), tasks
    for task, lines in tasks.items():
        node_id, local = divmod(task, 4)
        assert lines[0] == f"rank {task} (local rank {local}) on {NODES[node_id]}", lines
        args, variables = launched(lines, "python")
        assert args[0] == "04_ddp_train.py" and args[-2:] == ["--out", f"runs/slurm-tasks-{JOB_ID}.json"], args
        assert float(args[args.index("--timeout") + 1]) >= 600, args
        assert variables == dict(RANK=str(task), LOCAL_RANK=str(local), WORLD_SIZE="8", LOCAL_WORLD_SIZE="4",
                                 MASTER_ADDR="gpu-a17", MASTER_PORT=str(20000 + JOB_ID % 10000),
                                 OMP_NUM_THREADS="4"), variables  # one task, one process: all its CPUs
    assert first_line.startswith(f"MASTER_ADDR=gpu-a17 MASTER_PORT={20000 + JOB_ID % 10000}, 2 nodes x 4 tasks")


def test_requeue_sbatch_dry_run_resumes_from_the_jobs_snapshot(tmp_path):
    _, tasks, first_line = dry_run(tmp_path, REQUEUE, "--epochs", "9", SLURM_NTASKS="2",
                                   SLURM_NTASKS_PER_NODE="1", SLURM_CPUS_PER_TASK="1", SLURM_RESTART_COUNT="1")
    assert sorted(tasks) == [0, 1], tasks
    for task, lines in tasks.items():
        args, variables = launched(lines, "python")
        assert args[0] == "08_elastic_train.py", args
        # the job id survives a requeue: the same folder, so the requeued job finds its snapshot
        assert args[args.index("--snapshot-dir") + 1] == f"runs/snapshot-{JOB_ID}", args
        assert args[-4:] == ["--out", f"runs/requeue-{JOB_ID}.json", "--epochs", "9"], args
        assert float(args[args.index("--timeout") + 1]) >= 600, args
        assert variables["RANK"] == str(task) and variables["WORLD_SIZE"] == "2", variables
    assert first_line == f"job {JOB_ID}, run 1 (requeues so far), snapshots in runs/snapshot-{JOB_ID}", first_line


def test_requeue_sbatch_requeues_its_job_when_preempted(tmp_path):
    """After srun: "preempted" as the last event of the snapshot folder -> scontrol requeue $SLURM_JOB_ID."""
    env = dict(SLURM_NTASKS="2", SLURM_NTASKS_PER_NODE="1", SLURM_CPUS_PER_TASK="1")
    dry_run(tmp_path, REQUEUE, **env)  # no snapshot folder yet
    assert "requeue" not in (tmp_path / "scontrol.log").read_text()
    for last, requeued in (('{"event": "finish", "attempt": 0}', False), ('{"event": "preempted", "step": 6}', True)):
        run = tmp_path / last[11:17]
        (run / "runs" / f"snapshot-{JOB_ID}").mkdir(parents=True)
        (run / "runs" / f"snapshot-{JOB_ID}" / "events.jsonl").write_text('{"event": "start"}\n' + last + "\n")
        result = subprocess.run(["bash", str(REQUEUE)], cwd=run, capture_output=True, text=True, timeout=60,
                                env=dict(_dry_env(tmp_path), **env))
        assert result.returncode == 0, result.stdout + result.stderr
        calls = (tmp_path / "scontrol.log").read_text().splitlines()
        assert (f"requeue {JOB_ID}" in calls) == requeued, (last, calls)
        assert (f"job {JOB_ID} preempted: snapshot saved, requeued" in result.stdout) == requeued, result.stdout


def test_signals_sbatch_warns_the_batch_shell_and_lets_the_agents_handle_sigusr1(tmp_path):
    text = directives(SIGNALS)
    assert re.search(r"^#SBATCH --signal=B:USR1@\d+$", text, re.M), text  # the batch shell only
    script = SIGNALS.read_text()
    assert "trap pass_it_on USR1" in script and 'scancel --signal=USR1 "$SLURM_JOB_ID"' in script
    assert re.search(r"^srun .*--kill-on-bad-exit=1", script, re.M) and 'wait "$srun_pid"' in script
    options, tasks, first_line = dry_run(tmp_path, SIGNALS, "--timeout", "30", NPROC_PER_NODE="2")
    assert "--kill-on-bad-exit=1" in options and sorted(tasks) == [0, 1], (options, tasks)
    for lines in tasks.values():
        args, _ = launched(lines, "torchrun")
        assert "--signals-to-handle=SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1" in args and "--nproc_per_node=2" in args
        assert args[args.index("10_signal_report.py"):] == [
            "10_signal_report.py", "--events", f"runs/signals-{JOB_ID}.jsonl", "--timeout", "30"], args
    assert first_line.startswith("agents handle SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"), first_line
    _, tasks, _ = dry_run(tmp_path / "default", SIGNALS, AGENT_SIGNALS="SIGTERM,SIGINT,SIGHUP,SIGQUIT")
    args, _ = launched(tasks[0], "torchrun")
    assert "--signals-to-handle=SIGTERM,SIGINT,SIGHUP,SIGQUIT" in args, args


STUB_CLUSTER = '''"""A stand-in for tools/slurm_cluster.py on a machine where no cluster can start."""


class ClusterError(RuntimeError):
    pass


def start(root):
    raise ClusterError("stand-in: slurmctld cannot start here")
'''


def test_lesson_falls_back_to_the_dry_run(tmp_path):
    """Where the cluster cannot start, lesson 10's SLURM section says why in one line and runs the dry run.
    Cheaper than the whole lesson: its SLURM section alone (setup, imports, and every cell from the cluster's
    start to its stop), in a sandbox whose tools/slurm_cluster.py cannot start a cluster."""
    lesson = json.loads((NOTEBOOKS / "10_multi_node.ipynb").read_text())
    cells = lesson["cells"]
    text = ["".join(c["source"]) for c in cells]
    first = next(i for i, t in enumerate(text) if t.startswith("## A real SLURM cluster on this machine"))
    last = next(i for i, t in enumerate(text) if "stop_cluster()" in t and t.startswith("if cluster:"))
    imports = dict(cell_type="code", id="imports", execution_count=None, metadata={}, outputs=[],
                   source=["import json\n", "import subprocess\n", "import time"])
    lesson["cells"] = cells[:3] + [imports] + cells[first:last + 1]  # title, parameters, setup
    notebook = tmp_path / "10_multi_node.ipynb"
    notebook.write_text(text_of(lesson))
    workdir = series.make_sandbox(tmp_path / "sandbox")
    (workdir.parent / "tools" / "slurm_cluster.py").write_text(STUB_CLUSTER)
    executed = tmp_path / "executed.ipynb"
    series.run_papermill(notebook, executed, {}, workdir, "10 fallback")
    outputs = ["".join("".join(o.get("text", "")) for o in c.get("outputs", []))
               for c in json.loads(executed.read_text())["cells"] if c["cell_type"] == "code"]
    said = "\n".join(outputs)
    assert "no SLURM cluster: stand-in: slurmctld cannot start here\n" in said, said
    assert "DRY RUN with stand-ins for srun and scontrol" in said, said
    assert "--rdzv-endpoint=node01:" in said and "collective timeout 1800 s" in said, said
    assert said.count("no cluster: nothing submitted") == 4, said  # the torchrun, tasks, signals and requeue jobs
    assert not (workdir / "runs" / "10" / "slurm").exists(), "nothing was submitted"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")
def test_listening_sockets_reads_proc():
    listening_sockets = runpy.run_path(str(SCRIPTS / "10_node_report.py"))["listening_sockets"]
    opened, expected = [], []
    try:
        for family, address in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
            sock = socket.socket(family)
            opened.append(sock)
            try:
                sock.bind((address, 0))
            except OSError:  # no IPv6 on this machine
                continue
            sock.listen()
            expected.append((address, sock.getsockname()[1]))
        found = listening_sockets(os.getpid())
    finally:
        for sock in opened:
            sock.close()
    assert len(expected) >= 2 and all(e in found for e in expected), (expected, found)
    assert listening_sockets(2**22 + 12345) is None  # no such process: "unknown", not a guess
