"""Lesson 07's analysis cells, run on the records its script writes on a GPU machine, without a GPU.

On CUDA, 07_ddp_perf.py times no thread counts (its configurations have threads=None), reports NCCL
and cuda:N, measures memory, and a second, single-process launch times nn.DataParallel. A cell that
assumed CPU-shaped records (a 1-thread row, say) would crash on the first machine with 2 GPUs. Here
the script runs for real on the CPU, and its records are turned into the shape its own code writes on
CUDA (`cuda_shaped`, a stand-in derived from the script: the values are CPU measurements, only the
shape is CUDA's); then every code cell of the lesson after its launches runs on them, with the
lesson's device variables set as on a 2-GPU machine.
"""

import importlib.util
import json
import sys

import pytest
from conftest import NOTEBOOKS, SCRIPTS, run
from test_hygiene import cells, lesson_code  # a code cell as Python, shell lines as `pass`

LESSON = NOTEBOOKS / "07_performance.ipynb"


def load_script(name):
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py").replace(".", "_"), SCRIPTS / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cuda_shaped(ddp, perf):
    """The scaling rows as the script writes them on CUDA: one configuration set, threads=None (the script
    loops over `[None]` there), names from the script's own config_name, memory in MiB; NCCL on cuda:0."""
    base = min(row["threads"] for row in ddp["scaling"])
    rows = []
    for row in ddp["scaling"]:
        if row["threads"] == base:
            row = dict(row, threads=None, memory_mb=100.0 * row["processes"], idle_cpu_share=None)
            row["name"] = perf.config_name(row)
            rows.append(row)
    names = [row["name"] for row in rows]
    return dict(ddp, scaling=rows, backend="nccl", device="cuda:0", cuda_devices=2,
                scaling_rounds=dict(ddp["scaling_rounds"], orders=[names[::-1], names] * 2 + [names]))


def data_parallel_record(ddp):
    """single.json from `07_ddp_perf.py --data-parallel 2` on 2 GPUs: the keys of data_parallel() (stand-in values)."""
    return dict(ddp, world_size=1, data_parallel=[
        dict(kind="single device", devices=1, global_batch=ddp["batch_size"], ms_per_step=2.0,
             memory_mb_per_device=[120.0]),
        dict(kind="DataParallel", devices=2, global_batch=ddp["batch_size"], ms_per_step=3.0,
             memory_mb_per_device=[150.0, 90.0])])


@pytest.fixture(scope="module")
def cpu_records(tmp_path_factory):
    folder = tmp_path_factory.mktemp("07")
    small = ["--device", "cpu", "--timeout", "60", "--steps", "2", "--warmup", "1", "--batch-size", "8",
             "--small-layers", "10", "--accumulate", "2", "--rounds", "3"]  # the MLP's width as the lesson's (buckets)
    for launch in ([SCRIPTS / "07_ddp_perf.py", *small, "--threads", "1,2", "--out", "ddp.json"],
                   [SCRIPTS / "07_allreduce_bench.py", "--device", "cpu", "--max-bytes", "64K", "--iters", "2",
                    "--warmup", "1", "--out", "allreduce.json"]):
        result = run(["torchrun", "--standalone", "--nproc_per_node=2", *launch], cwd=folder)
        assert result.returncode == 0, result.stderr[-3000:]
    return {name: json.loads((folder / name).read_text()) for name in ("ddp.json", "allreduce.json")}


def test_lesson_07_cells_run_on_cuda_shaped_records(cpu_records, tmp_path, monkeypatch):
    perf = load_script("07_ddp_perf.py")
    ddp = cuda_shaped(cpu_records["ddp.json"], perf)
    assert {row["threads"] for row in ddp["scaling"]} == {None} and len(ddp["scaling"]) == 3, ddp["scaling"]
    runs = tmp_path / "runs" / "07"
    runs.mkdir(parents=True)
    (runs / "ddp.json").write_text(json.dumps(ddp))
    (runs / "single.json").write_text(json.dumps(data_parallel_record(ddp)))
    (runs / "allreduce.json").write_text(json.dumps(dict(cpu_records["allreduce.json"], backend="nccl")))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.syspath_prepend(str(NOTEBOOKS))  # the lesson imports devices.py and explorers.py from there
    namespace = dict(get_ipython=lambda: type("Shell", (), {})())
    as_on_two_gpus = dict(device="cuda:0", backend="nccl", cuda_devices=2, data_parallel_devices=2, ddp_processes=2)
    printed = []
    namespace["print"] = lambda *args, **kwargs: printed.append(" ".join(map(str, args)))
    for number, cell in enumerate(cells(LESSON)):
        source = lesson_code(cell)  # "" for markdown and %%writefile cells
        exec(compile(source, f"{LESSON.name}, cell {number}", "exec"), namespace)
        if "data_parallel_devices =" in source:  # the cell that looks at this machine's devices
            namespace.update(as_on_two_gpus)
    text = "\n".join(printed)
    assert "1 proc" in text and "2 procs, b/proc" in text, text  # the scaling table, CUDA-shaped
    assert "DataParallel, 2 GPUs" in text, text  # the DataParallel comparison ran
    assert "Not measured here" not in text, text


def test_cuda_shaped_rows_match_the_scripts_gpu_branch():
    """cuda_shaped() follows the script: on CUDA its scaling() builds one configuration set with threads=None."""
    source = (SCRIPTS / "07_ddp_perf.py").read_text()
    assert 'for threads in (args.threads if device.type == "cpu" else [None]):' in source


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))

