"""A real SLURM cluster on this one machine, for lesson 10: a controller and two compute nodes.

    python tools/slurm_cluster.py start  [--root build/slurm]   # prints the SLURM_CONF a client needs
    python tools/slurm_cluster.py status [--root build/slurm]   # exit 0 when it runs and both nodes answer
    python tools/slurm_cluster.py stop   [--root build/slurm]
    python tools/slurm_cluster.py install   # only the packages and the hosts line; exit 0 even when impossible

`start` runs munged (authentication), slurmctld (the controller) and two slurmd (node01 and node02, each
on its own port, both at 127.0.0.1) and waits until `sinfo` shows both nodes idle. Everything lives
under the root folder: slurm.conf, the munge key and socket, the controller's state, the nodes' spools,
pid and log files, and cluster.json (which daemons this tool started, by pid). Nothing is written to
/etc except one line in /etc/hosts (`127.0.0.1 node01 node02`, so that a job can reach its head node
by name). Missing packages are installed with `apt-get install -y slurm-wlm munge`. Root is needed only for
that and for the hosts line: the daemons run as whoever starts them (SlurmUser), root in CI. A second
`start` reuses a running, healthy cluster. `stop` ends exactly the daemons `start` started (by the
recorded pid, SIGTERM then SIGKILL), never a process found by name.

A client (sinfo, sbatch, srun, scontrol) finds this cluster through SLURM_CONF=<root>/slurm.conf:
client_env(root) returns os.environ with it set. From Python (tools/ on sys.path):

    import slurm_cluster
    info = slurm_cluster.start(root)                  # raises ClusterError(one-line reason)
    subprocess.run(["sbatch", "--wait", ...], env=slurm_cluster.client_env(root), timeout=...)
    slurm_cluster.requeue(job_id, root)              # scontrol requeue, and run it again now, not in 2 min
    slurm_cluster.release(job_id, root)              # a job that requeued itself: run it again now
    slurm_cluster.stop(root)

Each start is a fresh cluster (slurmctld -c: no jobs kept from the last one; job ids start at a random
number, so two clusters on one machine do not hand 10_slurm.sbatch the same rendezvous port). When the
cluster cannot start (not root, no apt-get, a daemon that fails) the reason is one line, with the last
lines of the failing daemon's log; the command line prints it and exits 1.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import math
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_ROOT = REPO / "build" / "slurm"
NODES = ("node01", "node02")
CPUS_PER_NODE = 2
PACKAGES = ["slurm-wlm", "munge"]
PROGRAMS = ["munged", "slurmctld", "slurmd", "sinfo", "sbatch", "srun", "scontrol"]
HOSTS_FILE = Path("/etc/hosts")
HOSTS_LINE = "127.0.0.1 " + " ".join(NODES)
READY_TIMEOUT = 60  # seconds for both nodes to show idle in sinfo
STOP_TIMEOUT = 10  # seconds between SIGTERM and SIGKILL
SOCKET_PATH_MAX = 107  # sun_path is 108 bytes, with its terminating NUL


class ClusterError(RuntimeError):
    """The cluster cannot start or does not work; the message is one line that says why."""


def client_env(root: str | os.PathLike = DEFAULT_ROOT) -> dict[str, str]:
    """os.environ with SLURM_CONF pointing at this cluster: pass it to sinfo, sbatch, srun, scontrol."""
    return dict(os.environ, SLURM_CONF=str(Path(root).resolve() / "slurm.conf"))


env = client_env


def _paths(root: Path) -> dict[str, Path]:
    return {
        "conf": root / "slurm.conf",
        "record": root / "cluster.json",
        "ports": root / "ports.json",
        "key": root / "munge" / "munge.key",
        "socket": root / "munge" / "munge.socket",
        "log": root / "log",
        "run": root / "run",
        "state": root / "state",
        "spool": root / "spool",
    }


def _log_tail(path: Path, lines: int = 3) -> str:
    try:
        tail = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()][-lines:]
    except OSError:
        return f"(no log at {path})"
    return " | ".join(tail) if tail else f"({path} is empty)"


# ---- what the machine needs: the packages, and node names that resolve -------------------------------

def _missing_programs() -> list[str]:
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/bin", "/sbin"])
    return [name for name in PROGRAMS if shutil.which(name, path=search) is None]


def _program(name: str) -> str:
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/bin", "/sbin"])
    return shutil.which(name, path=search) or name


def _apt(*args: str) -> subprocess.CompletedProcess:
    apt_env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    return subprocess.run(["apt-get", *args], env=apt_env, capture_output=True, text=True, timeout=900)


def install_packages() -> None:
    """Install slurm-wlm and munge with apt-get when a program is missing; ClusterError when impossible."""
    missing = _missing_programs()
    if not missing:
        return
    if shutil.which("apt-get") is None:
        raise ClusterError(f"{', '.join(missing)} missing and apt-get is not available: install slurm-wlm and munge")
    if os.geteuid() != 0:
        raise ClusterError(f"{', '.join(missing)} missing and not root: run `apt-get install -y {' '.join(PACKAGES)}`")
    print(f"slurm_cluster: installing {' '.join(PACKAGES)} with apt-get …", flush=True)
    try:
        result = _apt("install", "-y", *PACKAGES)
        if result.returncode != 0:  # a fresh machine has no package lists yet
            update = _apt("update")
            if update.returncode != 0:
                raise ClusterError(f"apt-get update failed: {update.stderr.strip().splitlines()[-1:]}")
            result = _apt("install", "-y", *PACKAGES)
    except (OSError, subprocess.SubprocessError) as error:
        raise ClusterError(f"apt-get could not run: {error}") from error
    if result.returncode != 0:
        tail = result.stderr.strip().splitlines()[-1:] or [f"exit code {result.returncode}"]
        raise ClusterError(f"apt-get install {' '.join(PACKAGES)} failed: {tail[0]}")
    if _missing_programs():
        raise ClusterError(f"apt-get installed {' '.join(PACKAGES)} but {', '.join(_missing_programs())} not found")


def _resolves(name: str) -> bool:
    try:
        socket.gethostbyname(name)
    except OSError:
        return False
    return True


def ensure_hosts() -> None:
    """A job reaches its head node by name (torchrun's rendezvous endpoint): node01 and node02 must resolve."""
    if all(_resolves(node) for node in NODES):
        return
    if os.geteuid() != 0:
        raise ClusterError(f"{' and '.join(NODES)} do not resolve and not root: add `{HOSTS_LINE}` to {HOSTS_FILE}")
    try:
        text = HOSTS_FILE.read_text() if HOSTS_FILE.exists() else ""
        with HOSTS_FILE.open("a") as hosts:
            hosts.write(("" if text.endswith("\n") or not text else "\n") + HOSTS_LINE + "\n")
    except OSError as error:
        raise ClusterError(f"cannot add `{HOSTS_LINE}` to {HOSTS_FILE}: {error}") from error
    if not all(_resolves(node) for node in NODES):
        raise ClusterError(f"added `{HOSTS_LINE}` to {HOSTS_FILE} but {' and '.join(NODES)} still do not resolve")


# ---- the configuration: ports, munge key, slurm.conf ----------------------------------------------------

def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_ports(count: int) -> list[int]:
    """Ports the kernel has free now (bound and released; a daemon binds them a moment later)."""
    sockets, ports = [], []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
            ports.append(sock.getsockname()[1])
    finally:
        for sock in sockets:
            sock.close()
    return ports


def _choose_ports(paths: dict[str, Path]) -> dict[str, int]:
    """The ports of the first start, while they are free; new ones otherwise."""
    try:
        ports = json.loads(paths["ports"].read_text())
        if sorted(ports) == sorted(["slurmctld", *NODES]) and all(_port_free(p) for p in ports.values()):
            return ports
    except (OSError, ValueError, AttributeError):
        pass
    ports = dict(zip(["slurmctld", *NODES], _free_ports(1 + len(NODES))))
    paths["ports"].write_text(json.dumps(ports, indent=1) + "\n")
    return ports


def _munge_key(path: Path) -> None:
    if path.exists() and path.stat().st_size >= 32:
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as key:
        key.write(os.urandom(1024))


def slurm_conf(root: Path, ports: dict[str, int], first_job_id: int = 1) -> str:
    """slurm.conf of the cluster: all files under root, both nodes in one default partition."""
    paths = _paths(root)
    host = socket.gethostname().split(".")[0]
    user = pwd.getpwuid(os.geteuid()).pw_name
    nodes = "\n".join(
        f"NodeName={node} NodeHostname={host} NodeAddr=127.0.0.1 Port={ports[node]} CPUs={CPUS_PER_NODE} State=UNKNOWN"
        for node in NODES)
    return f"""\
# Written by tools/slurm_cluster.py: a one-machine cluster for lesson 10. Rewritten at every start.
ClusterName=ddp-series
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ports['slurmctld']}
SlurmUser={user}
SlurmdUser={user}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={paths['socket']}
StateSaveLocation={paths['state']}
SlurmdSpoolDir={paths['spool']}/%n
SlurmctldPidFile={paths['run']}/slurmctld.pid
SlurmdPidFile={paths['run']}/slurmd-%n.pid
SlurmctldLogFile={paths['log']}/slurmctld.log
SlurmdLogFile={paths['log']}/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups in containers: track a job's processes through /proc, bind nothing.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
# CPUs are the resource (not whole nodes), so two small jobs can share a node.
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# The nodes' CPUs are what this file says, whatever the machine has.
SlurmdParameters=config_overrides
ReturnToService=2
# A job no node could ever run (say --cpus-per-task=16 here) is refused at sbatch, not left pending for ever.
EnforcePartLimits=ALL
# Batch jobs may be requeued (scontrol requeue, or after a node failure); SlurmUser (who started the cluster,
# root in CI) is an administrator and may requeue any job.
JobRequeue=1
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MailProg=/bin/true
SlurmdTimeout=30
InactiveLimit=0
# Latency, tuned for a lesson that waits on short jobs; each line says what it costs a real cluster.
# A submitted job starts at the controller's next background pass (about once a second). batch_sched_delay=0
# removes the delay batch jobs may get before that pass schedules them (3 s by default, so that a burst of
# submissions is scheduled together); on a busy cluster the controller would then schedule batch jobs more
# often, each pass taking its time from everything else it does.
SchedulerParameters=batch_sched_delay=0
# Seconds between SIGTERM and SIGKILL when a job is cancelled, requeued or reaches its time limit, and when
# a step's tasks are ended (srun --kill-on-bad-exit, scancel) (default 30): the time a job has to save its
# work. The lesson's jobs save on SIGUSR1 before that; a real job that
# checkpoints on SIGTERM needs the full default or more.
KillWait=5
# No Prolog or Epilog scripts run here (a real cluster's often check or clean the node at every job, which
# adds their run time to each job's start and end), and CompleteWait is 0 (the default): the next job
# starts as soon as the last one's nodes are free. MessageTimeout (10 s) only delays failures.
MinJobAge=300
# Job ids start anywhere (not at 1 after every start): 10_slurm.sbatch derives its rendezvous port from the
# job id, and two clusters on one machine (a lesson's and a test's) must not hand out the same ids.
FirstJobId={first_job_id}
{nodes}
PartitionName=debug Nodes={','.join(NODES)} Default=YES MaxTime=INFINITE OverSubscribe=YES State=UP
"""


# ---- processes: start one daemon, know whether it still runs, stop it -------------------------------------

_CHILDREN: dict[int, subprocess.Popen] = {}  # daemons started by this process, reaped when they end


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), or None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):  # a zombie has ended
        return None
    return fields[19]


def _reap(pid: int) -> None:
    child = _CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        del _CHILDREN[pid]
        return
    if child is None:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def alive(daemon: dict) -> bool:
    """Whether this daemon of a start() record still runs (its pid, with the same start time: not a reused pid)."""
    _reap(daemon["pid"])
    return daemon["start_time"] is not None and _start_time(daemon["pid"]) == daemon["start_time"]


def _spawn(name: str, command: list[str], log: Path) -> dict:
    """Start a daemon in the foreground of its own session (the tool may exit; the daemon stays)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        try:
            child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True, close_fds=True)
        except OSError as error:
            raise ClusterError(f"{name} could not start: {error}") from error
    _CHILDREN[child.pid] = child
    started = _start_time(child.pid)
    if started is None:  # it ended at once; its log says why
        child.wait(timeout=5)
    return {"name": name, "pid": child.pid, "start_time": started, "log": str(log), "command": command}


def _terminate(daemons: list[dict]) -> list[str]:
    """SIGTERM every daemon still running, SIGKILL what is left after STOP_TIMEOUT; names of those stopped."""
    running = [d for d in daemons if alive(d)]
    for daemon in running:
        try:
            os.kill(daemon["pid"], signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + STOP_TIMEOUT
    while any(alive(d) for d in running) and time.monotonic() < deadline:
        time.sleep(0.1)
    for daemon in running:  # still there: kill it with what it started (slurmscriptd, slurmstepd) in its session
        if alive(daemon):
            try:
                if os.getpgid(daemon["pid"]) == daemon["pid"]:
                    os.killpg(daemon["pid"], signal.SIGKILL)
                else:
                    os.kill(daemon["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 5
    while any(alive(d) for d in running) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [d["name"] for d in running]


def _record(root: Path) -> dict | None:
    try:
        return json.loads(_paths(root)["record"].read_text())
    except (OSError, ValueError):
        return None


def _write_record(root: Path, info: dict) -> None:
    path = _paths(root)["record"]
    path.with_suffix(".tmp").write_text(json.dumps(info, indent=1) + "\n")
    path.with_suffix(".tmp").replace(path)


# ---- the cluster ----------------------------------------------------------------------------------------

def node_states(root: str | os.PathLike = DEFAULT_ROOT, timeout: float = 15) -> dict[str, str]:
    """{node: state} as sinfo reports it ('idle', 'mixed', 'down*', …); {} when sinfo gets no answer."""
    try:
        result = subprocess.run([_program("sinfo"), "-h", "-N", "-o", "%N %T"], env=client_env(root),
                                capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return {}
    if result.returncode != 0:
        return {}
    return dict(line.split(None, 1) for line in result.stdout.splitlines() if len(line.split()) == 2)


HEALTHY_STATES = {"idle", "mixed", "allocated", "completing"}


def running(root: str | os.PathLike = DEFAULT_ROOT) -> bool:
    """True when every daemon this tool started runs and both nodes answer the controller."""
    root = Path(root).resolve()
    info = _record(root)
    if not info or not info.get("ready") or not all(alive(d) for d in info["daemons"]):
        return False
    states = node_states(root)
    return all(states.get(node) in HEALTHY_STATES for node in NODES)


def _fail(root: Path, daemons: list[dict], reason: str, log: str | None = None) -> ClusterError:
    """Stop what was started and return the one-line error, with the failing daemon's log."""
    _terminate(list(reversed(daemons)))
    _paths(root)["record"].unlink(missing_ok=True)
    if log:
        reason += f" — {Path(log).name}: {_log_tail(Path(log))}"
    return ClusterError(reason)


def _wait_for(condition, daemons: list[dict], timeout: float):
    """Poll condition() until true or timeout; None when true, else the daemon that died (or {})."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return None
        dead = next((d for d in daemons if not alive(d)), None)
        if dead is not None:
            return dead
        time.sleep(0.25)
    return {}


@contextlib.contextmanager
def _locked(root: Path, timeout: float = 2 * READY_TIMEOUT):
    """One start or stop at a time per root (two lessons or tests may share build/slurm)."""
    root.mkdir(parents=True, exist_ok=True)
    with (root / "cluster.lock").open("a") as lock:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ClusterError(f"another start or stop held {lock.name} for {timeout:.0f} s") from None
                time.sleep(0.25)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def start(root: str | os.PathLike = DEFAULT_ROOT, timeout: float = READY_TIMEOUT) -> dict:
    """Start the cluster (or reuse the one that runs); return its record; ClusterError with a reason if not."""
    root = Path(root).resolve()
    if len(str(_paths(root)["socket"]).encode()) > SOCKET_PATH_MAX:
        raise ClusterError(f"root {root} is too long for a unix socket path (at most {SOCKET_PATH_MAX} bytes)")
    with _locked(root):
        return _start(root, timeout)


def _start(root: Path, timeout: float) -> dict:
    began = time.monotonic()
    paths = _paths(root)
    if running(root):
        return dict(_record(root), reused=True)
    _stop(root)  # what is left of a cluster that died or never became ready
    install_packages()
    ensure_hosts()
    for folder in ("log", "run", "state", "spool"):
        paths[folder].mkdir(parents=True, exist_ok=True)
    for node in NODES:
        (paths["spool"] / node).mkdir(exist_ok=True)
    paths["key"].parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    paths["key"].parent.chmod(0o700)
    _munge_key(paths["key"])
    ports = _choose_ports(paths)
    paths["conf"].write_text(slurm_conf(root, ports, first_job_id=random.randrange(10_000, 100_000)))
    info = {"root": str(root), "slurm_conf": str(paths["conf"]), "ports": ports, "nodes": list(NODES),
            "daemons": [], "ready": False}
    daemons = info["daemons"]

    munge_dir = paths["key"].parent
    daemons.append(_spawn("munged", [
        _program("munged"), "--foreground", "--force", f"--key-file={paths['key']}", f"--socket={paths['socket']}",
        f"--pid-file={munge_dir / 'munged.pid'}", f"--seed-file={munge_dir / 'munged.seed'}"],
        paths["log"] / "munged.out"))
    _write_record(root, info)
    dead = _wait_for(paths["socket"].exists, daemons, 15)
    if dead is not None:
        raise _fail(root, daemons, "munged exited" if dead else "munged made no socket in 15 s",
                    paths["log"] / "munged.out")

    daemons.append(_spawn("slurmctld", [_program("slurmctld"), "-D", "-c", "-f", str(paths["conf"])],
                          paths["log"] / "slurmctld.out"))
    for node in NODES:
        daemons.append(_spawn(f"slurmd {node}", [_program("slurmd"), "-D", "-N", node, "-f", str(paths["conf"])],
                              paths["log"] / f"slurmd-{node}.out"))
    _write_record(root, info)

    def both_idle():
        states = node_states(root, timeout=5)
        return all(states.get(node) == "idle" for node in NODES)

    dead = _wait_for(both_idle, daemons, timeout)
    if dead is not None:
        if dead:  # its stderr: what it said before its log file opened, and after
            raise _fail(root, daemons, f"{dead['name']} exited", dead["log"])
        states = node_states(root, timeout=5)
        raise _fail(root, daemons, f"the nodes did not become idle in {timeout:.0f} s (sinfo: {states or 'no answer'})",
                    paths["log"] / "slurmctld.out")
    info.update(ready=True, started_at=time.strftime("%Y-%m-%d %H:%M:%S"),
                start_seconds=round(time.monotonic() - began, 1))
    _write_record(root, info)
    return dict(info, reused=False)


def stop(root: str | os.PathLike = DEFAULT_ROOT) -> list[str]:
    """Stop the daemons start() recorded (slurmd, then slurmctld, then munged); the names of those stopped."""
    root = Path(root).resolve()
    if not root.is_dir():
        return []
    with _locked(root):
        return _stop(root)


def _stop(root: Path) -> list[str]:
    info = _record(root)
    stopped = _terminate(list(reversed(info["daemons"]))) if info else []
    _paths(root)["record"].unlink(missing_ok=True)
    return stopped


def _scontrol(root, timeout: float, *args: str) -> str:
    result = subprocess.run([_program("scontrol"), *args], env=client_env(root), capture_output=True, text=True,
                            timeout=timeout)
    if result.returncode != 0:
        raise ClusterError(f"scontrol {' '.join(args)} failed: {(result.stderr or result.stdout).strip()}")
    return result.stdout


def requeue(job_id: int | str, root: str | os.PathLike = DEFAULT_ROOT, timeout: float = 30) -> None:
    """`scontrol requeue` a batch job and make it eligible at once (release). ClusterError if refused or slow."""
    _scontrol(root, timeout, "requeue", str(job_id))
    release(job_id, root, timeout)


def release(job_id: int | str, root: str | os.PathLike = DEFAULT_ROOT, timeout: float = 30) -> None:
    """Start a requeued job now. SLURM holds a requeued job back until its credential has expired
    (BeginTime = now + AuthInfo's cred_expire + 1 s, 120 s by default), which a lesson need not wait for.
    Waits until the job is pending (its processes end first), then sets StartTime=now."""
    deadline = time.monotonic() + timeout
    while "JobState=PENDING" not in _scontrol(root, timeout, "show", "job", str(job_id)):
        if time.monotonic() > deadline:
            raise ClusterError(f"job {job_id} was requeued but is not pending after {timeout:.0f} s")
        time.sleep(0.1)
    # slurmd revoked the job's credential as the run ended and refuses a new start from that same second
    # ("Job credential revoked": it counts whole seconds). The run has ended by now: let this second pass.
    time.sleep(max(0.0, math.floor(time.time()) + 1.2 - time.time()))
    _scontrol(root, timeout, "update", f"JobId={job_id}", "StartTime=now")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["install", "start", "stop", "status"],
                        help="install: only the packages and the hosts line (what make test does first)")
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT,
                        help=f"the cluster's folder (default {DEFAULT_ROOT})")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if args.command == "install":  # never fails the caller: without SLURM, lesson 10 runs its dry run
        try:
            install_packages()
            ensure_hosts()
        except ClusterError as error:
            print(f"slurm_cluster: no SLURM cluster on this machine: {error}", file=sys.stderr, flush=True)
            return 0
        print("slurm_cluster: slurm-wlm and munge installed; node01 and node02 resolve")
        return 0
    if args.command == "start":
        try:
            info = start(root)
        except ClusterError as error:
            print(f"slurm_cluster: cannot start: {error}", file=sys.stderr, flush=True)
            return 1
        pids = ", ".join(f"{d['name']} {d['pid']}" for d in info["daemons"])
        if info["reused"]:
            print(f"slurm_cluster: reusing the cluster that runs under {root} ({pids})")
        else:
            print(f"slurm_cluster: started {', '.join(NODES)} in {info['start_seconds']} s ({pids})")
        print(f"export SLURM_CONF={info['slurm_conf']}")
        return 0
    if args.command == "stop":
        stopped = stop(root)
        print(f"slurm_cluster: stopped {', '.join(stopped)}" if stopped else
              f"slurm_cluster: nothing runs under {root}")
        return 0
    if running(root):
        states = node_states(root)
        print(f"slurm_cluster: running under {root}: " + ", ".join(f"{n} {s}" for n, s in states.items()))
        print(f"export SLURM_CONF={_paths(root)['conf']}")
        return 0
    print(f"slurm_cluster: not running under {root}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
