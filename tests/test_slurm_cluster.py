"""tools/slurm_cluster.py: a real one-machine SLURM cluster (munged, slurmctld, slurmd node01 and node02)
starts, runs a two-node batch job on both nodes, requeues a job, is reused by a second start, and stops
exactly the daemons it started. Each cluster lives in its own short folder under /tmp with its own ports,
so two test workers (and a lesson's cluster in build/slurm) never share one."""

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import slurm_cluster
from conftest import REPO

TOOL = REPO / "tools" / "slurm_cluster.py"


def _short_root():
    return Path(tempfile.mkdtemp(prefix="slurm-", dir="/tmp"))  # unix socket paths hold at most 107 bytes


def _start_or_skip(root):
    """Start a cluster; skip (with the tool's reason) only where it cannot be installed: not root, no apt."""
    try:
        return slurm_cluster.start(root)
    except slurm_cluster.ClusterError as error:
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            pytest.skip(f"no SLURM cluster here: {error}")
        raise


def _dead(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def _wait_until_idle(root, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = slurm_cluster.node_states(root)
        if all(states.get(node) == "idle" for node in slurm_cluster.NODES):
            return states
        time.sleep(0.25)
    return slurm_cluster.node_states(root)


def _slurm(root, *command, timeout=60, cwd=None):
    return subprocess.run(list(command), env=slurm_cluster.client_env(root), cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def cluster():
    root = _short_root()
    try:
        info = _start_or_skip(root)
        yield root, info
    finally:
        slurm_cluster.stop(root)
        shutil.rmtree(root, ignore_errors=True)


def test_start_shows_two_idle_nodes(cluster):
    root, info = cluster
    assert not info["reused"] and info["ready"]
    assert [d["name"] for d in info["daemons"]] == ["munged", "slurmctld", "slurmd node01", "slurmd node02"]
    assert _wait_until_idle(root) == {"node01": "idle", "node02": "idle"}
    result = _slurm(root, "sinfo", "-h", "-o", "%P %a %l %D %T")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["debug*", "up", "infinite", "2", "idle"]  # MaxTime fits --time=00:30:00
    conf = (root / "slurm.conf").read_text()
    assert f"AuthInfo=socket={root / 'munge' / 'munge.socket'}" in conf and "JobRequeue=1" in conf


def test_two_node_job_runs_on_both_nodes(cluster, tmp_path):
    root, _ = cluster
    job = tmp_path / "nodes.sbatch"
    job.write_text("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n#SBATCH --time=00:30:00\n"
                   "#SBATCH --output=nodes-%j.out\n"
                   "srun bash -c 'echo \"task $SLURM_PROCID of $SLURM_NTASKS on $SLURMD_NODENAME\"'\n")
    result = _slurm(root, "sbatch", "--wait", str(job), cwd=tmp_path, timeout=90)
    assert result.returncode == 0, result.stdout + result.stderr
    [out] = tmp_path.glob("nodes-*.out")
    lines = sorted(out.read_text().splitlines())
    assert lines == ["task 0 of 2 on node01", "task 1 of 2 on node02"], lines


def test_a_job_no_node_can_run_is_refused_at_once(cluster, tmp_path):
    root, _ = cluster
    result = _slurm(root, "sbatch", "--cpus-per-task=16", "--wrap", "true", cwd=tmp_path, timeout=30)
    assert result.returncode != 0 and "More processors requested than permitted" in result.stderr, result


def test_requeue_runs_the_job_again(cluster, tmp_path):
    root, _ = cluster
    job = tmp_path / "requeue.sbatch"
    runs = tmp_path / "runs.txt"
    job.write_text("#!/bin/bash\n#SBATCH --time=00:30:00\n#SBATCH --output=/dev/null\n"
                   f"echo \"run ${{SLURM_RESTART_COUNT:-0}}\" >> {runs}\n"
                   "if [ \"${SLURM_RESTART_COUNT:-0}\" = 0 ]; then sleep 120; fi\n")
    result = _slurm(root, "sbatch", "--parsable", str(job), cwd=tmp_path, timeout=30)
    assert result.returncode == 0, result.stderr
    job_id = result.stdout.strip().split(";")[0]
    try:
        deadline = time.monotonic() + 30
        while not (runs.exists() and runs.read_text()) and time.monotonic() < deadline:
            time.sleep(0.25)
        assert runs.read_text() == "run 0\n"
        slurm_cluster.requeue(job_id, root)
        deadline = time.monotonic() + 30
        while "JobState=COMPLETED" not in _slurm(root, "scontrol", "show", "job", job_id).stdout:
            assert time.monotonic() < deadline, _slurm(root, "scontrol", "show", "job", job_id).stdout
            time.sleep(0.25)
        assert runs.read_text() == "run 0\nrun 1\n"
    finally:
        _slurm(root, "scancel", job_id, timeout=30)


def test_second_start_reuses_the_cluster(cluster):
    root, info = cluster
    again = slurm_cluster.start(root)
    assert again["reused"] and [d["pid"] for d in again["daemons"]] == [d["pid"] for d in info["daemons"]]
    assert slurm_cluster.running(root)
    cli = subprocess.run([sys.executable, str(TOOL), "start", "--root", str(root)], capture_output=True, text=True,
                         timeout=60)
    assert cli.returncode == 0 and "reusing" in cli.stdout, cli.stdout + cli.stderr
    assert f"export SLURM_CONF={root / 'slurm.conf'}" in cli.stdout
    status = subprocess.run([sys.executable, str(TOOL), "status", "--root", str(root)], capture_output=True,
                            text=True, timeout=60)
    assert status.returncode == 0 and "node01" in status.stdout and "node02" in status.stdout, status.stdout


def test_stop_stops_every_daemon_it_started():
    root = _short_root()
    try:
        info = _start_or_skip(root)
        pids = [d["pid"] for d in info["daemons"]]
        assert len(pids) == 4 and not any(_dead(pid) for pid in pids)
        stopped = slurm_cluster.stop(root)
        assert stopped == ["slurmd node02", "slurmd node01", "slurmctld", "munged"]
        assert all(_dead(pid) for pid in pids), [pid for pid in pids if not _dead(pid)]
        assert not (root / "cluster.json").exists() and not slurm_cluster.running(root)
        assert slurm_cluster.stop(root) == []  # a second stop is fine
        cli = subprocess.run([sys.executable, str(TOOL), "stop", "--root", str(root)], capture_output=True,
                             text=True, timeout=60)
        assert cli.returncode == 0 and "nothing runs" in cli.stdout, cli.stdout + cli.stderr
        status = subprocess.run([sys.executable, str(TOOL), "status", "--root", str(root)], capture_output=True,
                                text=True, timeout=60)
        assert status.returncode == 1 and "not running" in status.stdout
    finally:
        slurm_cluster.stop(root)
        shutil.rmtree(root, ignore_errors=True)


def test_a_daemon_that_fails_gives_a_one_line_reason_and_leaves_nothing_running(monkeypatch):
    root = _short_root()
    spawned = []
    real_spawn, real_conf = slurm_cluster._spawn, slurm_cluster.slurm_conf

    def spawn(*args, **kwargs):
        spawned.append(real_spawn(*args, **kwargs))
        return spawned[-1]

    monkeypatch.setattr(slurm_cluster, "_spawn", spawn)
    monkeypatch.setattr(slurm_cluster, "slurm_conf", lambda *a, **k: real_conf(*a, **k) + "NoSuchSetting=1\n")
    try:
        if slurm_cluster._missing_programs() and (os.geteuid() != 0 or shutil.which("apt-get") is None):
            pytest.skip("slurm-wlm and munge are not installed and cannot be here")
        with pytest.raises(slurm_cluster.ClusterError) as error:
            slurm_cluster.start(root, timeout=20)
        message = str(error.value)
        assert "\n" not in message and "exited" in message and "NoSuchSetting" in message, message
        assert spawned and all(_dead(d["pid"]) for d in spawned)
        assert not (root / "cluster.json").exists()
    finally:
        slurm_cluster.stop(root)
        shutil.rmtree(root, ignore_errors=True)


def test_a_root_too_long_for_a_socket_is_refused_first(tmp_path):
    with pytest.raises(slurm_cluster.ClusterError, match="too long for a unix socket"):
        slurm_cluster.start(tmp_path / ("x" * 120))
    cli = subprocess.run([sys.executable, str(TOOL), "start", "--root", str(tmp_path / ("x" * 120))],
                         capture_output=True, text=True, timeout=60)
    assert cli.returncode == 1 and cli.stderr.startswith("slurm_cluster: cannot start:") and cli.stdout == ""
    assert len(cli.stderr.strip().splitlines()) == 1


def test_client_env_points_at_the_cluster(tmp_path):
    env = slurm_cluster.client_env(tmp_path)
    assert env["SLURM_CONF"] == str(tmp_path.resolve() / "slurm.conf")
    assert env["PATH"] == os.environ["PATH"] and slurm_cluster.env is slurm_cluster.client_env
