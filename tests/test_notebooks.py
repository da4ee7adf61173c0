"""Every lesson executes under papermill with its CI parameters (the defaults in its parameters
cell), through the same runner that builds the handouts; a failing launch fails its lesson."""

import json
import re
import sys

import pytest
import series
from clean_notebooks import text_of
from conftest import NOTEBOOKS, REPO, run

# Shared with tests/test_browser.py, which builds the handouts from the same executions.
OUT = REPO / "build" / "test"
LESSONS = series.lessons()


@pytest.mark.parametrize("notebook", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_executes(notebook):
    record = series.execute(notebook, OUT, params={})
    assert record["ok"], (f"{notebook.name} failed at {record.get('error')}\n"
                          f"partially executed notebook: {OUT / 'executed' / notebook.name}")
    handout = (OUT / "handouts" / f"{notebook.stem}.html").read_text()
    assert not re.search(r'href="\d\d_[a-z0-9_]+\.ipynb', handout), "handouts link to handouts, not notebooks"


# The lessons most sensitive to the number of processes, at counts other than the default 2: lesson 08's
# resume claim depends on the order of the all-reduce's additions (3 processes); 05 launches
# demonstrations that need two ranks, and so does 09 (1 process). `make handouts NPROC=N` runs the
# whole series at N.
OTHER_COUNTS = [("08_fault_tolerance", 3), ("05_rank_aware", 1), ("09_debugging", 1)]


@pytest.mark.parametrize("stem,nproc", OTHER_COUNTS, ids=[f"{s}-{n}proc" for s, n in OTHER_COUNTS])
def test_lesson_executes_with_other_process_counts(stem, nproc, tmp_path):
    record = series.execute(NOTEBOOKS / f"{stem}.ipynb", tmp_path, params={"nproc_per_node": nproc}, force=True)
    assert record["ok"], (f"{stem} with nproc_per_node={nproc} failed at {record.get('error')}\n"
                          f"partially executed notebook: {tmp_path / 'executed' / (stem + '.ipynb')}")


def test_unchanged_lesson_is_not_executed_again():
    notebook = NOTEBOOKS / "00_setup.ipynb"
    first = series.execute(notebook, OUT, params={})
    again = series.execute(notebook, OUT, params={})
    assert first["ok"] and again["cached"] and again["key"] == first["key"]
    assert series.cache_key(notebook, {"nproc_per_node": 3}) != first["key"]


def test_a_change_inside_a_tool_package_executes_the_lesson_again(tmp_path, monkeypatch):
    """A lesson that runs a tool package (14: tools/ddp_doctor/) must not reuse an execution of the old tool."""
    package = tmp_path / "tools" / "ddp_doctor"
    package.mkdir(parents=True)
    (package / "rules.py").write_text("RULES = 1\n")
    monkeypatch.setattr(series, "REPO", tmp_path)
    monkeypatch.setattr(series, "SANDBOX_TOOLS", ["ddp_doctor"])
    notebook = NOTEBOOKS / "14_ddp_doctor.ipynb"
    before = series.cache_key(notebook, {})
    (package / "rules.py").write_text("RULES = 2\n")
    assert series.cache_key(notebook, {}) != before


def test_failing_launch_fails_the_lesson(tmp_path):
    """One rank raises: papermill must fail, at the launch cell, with that rank's traceback shown."""
    record = series.execute(NOTEBOOKS / "00_setup.ipynb", tmp_path, params={"fail_rank": 1}, force=True)
    assert not record["ok"]
    assert "CalledProcessError" in record["error"], record["error"]
    cells = json.loads((tmp_path / "executed" / "00_setup.ipynb").read_text())["cells"]
    launch = next(c for c in cells if "".join(c["source"]).startswith("!torchrun"))
    shown = "".join("".join(o.get("text", "")) + "".join(o.get("traceback", [])) for o in launch["outputs"])
    assert "RuntimeError: rank 1 fails on purpose" in shown, shown[-3000:]
    after = cells[cells.index(launch) + 1:]
    assert not any(c.get("outputs") for c in after if c["cell_type"] == "code"), "cells ran after the failure"


def test_runner_rejects_bad_parameters(tmp_path):
    runner = [sys.executable, str(REPO / "tools" / "series.py"), "build", "--out", str(tmp_path)]
    for bad in (["-p", "no_such_parameter=1"], ["-p", "nproc_per_node=two"], ["-p", "=3"], ["-p", "nproc_per_node=0"],
                ["-p", "nproc_per_node=2.5"], ["-p", "epochs=-1"], ["-p", "lr=nan"], ["-p", "lr=0"],
                ["-p", "check_timings=yes"], ["-p", "timeout_s=1e400"]):
        result = run(runner + bad, cwd=tmp_path, timeout=60)
        assert result.returncode == 2, (bad, result.stdout, result.stderr)
        assert result.stderr.strip().splitlines()[-1].startswith("series.py: error:"), result.stderr


def edited(notebook, folder, change):
    """A copy of a lesson (same file name, so the same cache entry) with change(cells) applied."""
    folder.mkdir(parents=True, exist_ok=True)
    nb = json.loads(notebook.read_text())
    change(nb["cells"])
    copy = folder / notebook.name
    copy.write_text(text_of(nb))
    return copy


def code_outputs(executed):
    return [(c["source"], c["outputs"]) for c in json.loads(executed.read_text())["cells"] if c["cell_type"] == "code"]


def test_prose_edit_is_exported_without_executing_and_code_edit_executes(tmp_path):
    """A one-word prose edit merges the new markdown into the cached execution (no cell runs again);
    an edit to a code cell executes the lesson again."""
    lesson = NOTEBOOKS / "00_setup.ipynb"
    first = series.execute(lesson, tmp_path / "out", params={}, force=True)
    assert first["ok"], first.get("error")
    executed = tmp_path / "out" / "executed" / lesson.name
    ran = code_outputs(executed)

    def reword(cells):
        prose = next(c for c in cells[2:] if c["cell_type"] == "markdown")
        prose["source"][0] = "Reworded. " + prose["source"][0]

    copy = edited(lesson, tmp_path / "prose", reword)
    assert series.cache_key(copy, {}) == first["key"] and series.source_hash(copy) != first["source_hash"]
    merged = series.execute(copy, tmp_path / "out", params={})
    assert merged["merged"] and not merged["cached"], merged
    assert code_outputs(executed) == ran, "the merge changed an executed cell"
    assert "Reworded. " in (tmp_path / "out" / "handouts" / f"{lesson.stem}.html").read_text()
    assert series.execute(copy, tmp_path / "out", params={})["cached"]

    def recode(cells):
        code = next(c for c in cells[2:] if c["cell_type"] == "code")
        code["source"][-1] += "\nprint('a new line of code')"

    recoded = series.execute(edited(copy, tmp_path / "code", recode), tmp_path / "out", params={})
    assert recoded["ok"] and not recoded["cached"] and not recoded["merged"], recoded
    assert "a new line of code\n" in "".join(
        "".join(o.get("text", "")) for c in json.loads(executed.read_text())["cells"] for o in c.get("outputs", []))


def test_kernel_runs_over_ipc(tmp_path, capfd):
    """The runner's kernel talks over local IPC sockets, so ipykernel has no unencrypted TCP to warn about."""
    import nbformat

    probe = tmp_path / "probe.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "from ipykernel.kernelapp import IPKernelApp\nprint(IPKernelApp.instance().transport)")]), probe)
    series.run_papermill(probe, tmp_path / "ran.ipynb", {}, tmp_path, "probe")
    printed = nbformat.read(tmp_path / "ran.ipynb", as_version=4).cells[0].outputs[0]["text"]
    assert printed.strip() == "ipc"
    assert "without encryption" not in capfd.readouterr().err


def test_vendor_files_are_fetched_once_per_build(tmp_path, monkeypatch, capfd):
    """Without npm the build warns once, not once per lesson (vendor() is not called per export)."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no npm here
    monkeypatch.setattr(series, "_vendor_urls", {})
    handouts = tmp_path / "handouts"
    assert series.vendor_urls(handouts) == {} and series.vendor_urls(handouts) == {}
    assert capfd.readouterr().err.count("npm is not installed") == 1


def test_parameters_are_read_by_papermill():
    declared = series.declared_parameters(NOTEBOOKS / "04_ddp_train.ipynb")
    assert declared["nproc_per_node"] == 2 and isinstance(declared["lr"], float), declared
