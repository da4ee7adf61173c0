"""The series' house rules (../shared/CONVENTIONS.md), checked on every committed lesson and script."""

import ast
import json
import os
import re
import subprocess
import sys

import nbformat
import pytest
from clean_notebooks import text_of
from conftest import BIN, NOTEBOOKS, REPO, SCRIPTS
from sync_scripts import writefile_cells as writefile_cells_of

LESSONS = sorted(p for p in NOTEBOOKS.glob("*.ipynb") if ".zh-" not in p.name)  # not the generated Chinese editions
IDS = [p.stem for p in LESSONS]

# Every lesson parameter, with its type. The same name means the same thing in every lesson;
# add a new name here (with its meaning) when a lesson needs one.
KNOWN_PARAMETERS = {
    "nproc_per_node": int,  # processes torchrun starts per machine
    "epochs": int,  # passes over the training set
    "batch_size": int,  # samples per step, per process
    "dataset_size": int,  # training samples
    "seed": int,  # data, initial weights, shuffling
    "lr": float,  # learning rate
    "timeout_s": int,  # seconds a collective may wait (init_process_group timeout)
    "fail_rank": int,  # rank that raises on purpose, -1 for none
    "launch_timeout_s": int,  # seconds a whole demo launch may take before the lesson stops it
    "hang_timeout_s": int,  # the short collective timeout of a demo that would otherwise hang
    "val_size": int,  # validation samples
    "world_sizes": list,  # process counts compared in one lesson, one launch each
    "replicas": int,  # model copies in the hand-built DataParallel step
    "bench_steps": int,  # timed steps of a measurement
    "bench_batch_size": int,  # samples per step of a measurement
    "check_timings": bool,  # also assert timing claims (make bench); off by default: a busy machine says nothing
    "slurm_cluster": bool,  # lesson 10 submits to a real SLURM cluster on this machine; False: its dry run
    "compile_backend": str,  # torch.compile backend of a lesson (aot_eager: no code generation, seconds; inductor: C++)
    "width": int,  # features of each hidden layer of a lesson's MLP
    "layers": int,  # hidden layers of a lesson's MLP
    "steps": int,  # training steps of each run
}

FIXED_PORT = re.compile(r"(master[-_]port|MASTER_PORT|rdzv[-_]endpoint)\S*[ =:]\S*29500", re.I)
ABSOLUTE_PATH = re.compile(r"(?<![\w.:/])(/(home|work|tmp|root|Users|opt|mnt)/|[A-Za-z]:\\\\)")


def fixed_ports(code):
    """Lines that set port 29500 (lines that assert it is absent do not count)."""
    return [line for line in code.splitlines() if FIXED_PORT.search(line) and "assert" not in line]


def cells(path):
    return json.loads(path.read_text())["cells"]


def source(cell):
    return "".join(cell["source"])


@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_valid_notebook_without_outputs(path):
    nbformat.validate(nbformat.read(path, as_version=4))
    for cell in cells(path):
        if cell["cell_type"] == "code":
            assert not cell["outputs"] and cell["execution_count"] is None, \
                "commit notebooks without outputs: run `make clean-notebooks`"
    assert json.loads(path.read_text())["metadata"]["kernelspec"]["name"] == "python3"


def test_numbering_without_gaps():
    numbers = [p.name[:2] for p in LESSONS]
    assert all(re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", p.name) for p in LESSONS), [p.name for p in LESSONS]
    assert numbers == [f"{i:02d}" for i in range(len(LESSONS))], numbers


@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_title_and_one_parameters_cell(path):
    all_cells = cells(path)
    assert all_cells[0]["cell_type"] == "markdown"
    assert source(all_cells[0]).startswith(f"# {path.name[:2]} · "), "title must read '# NN · Title'"
    tagged = [i for i, c in enumerate(all_cells) if "parameters" in c["metadata"].get("tags", [])]
    assert tagged == [1], "exactly one cell tagged 'parameters', right after the title"


@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_parameters_are_named_consistently(path):
    tree = ast.parse(source(cells(path)[1]))
    lines = source(cells(path)[1]).splitlines()
    for node in tree.body:
        assert isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name), ast.dump(node)
        name, value = node.targets[0].id, ast.literal_eval(node.value)
        assert name in KNOWN_PARAMETERS, f"unknown parameter {name}: add it to KNOWN_PARAMETERS with its meaning"
        assert type(value) is KNOWN_PARAMETERS[name], f"{name} must be {KNOWN_PARAMETERS[name].__name__}"
        assert "#" in lines[node.lineno - 1], f"say what {name} means in a comment"


@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_setup_cell_makes_failures_fail(path):
    setup = source(next(c for c in cells(path)[2:] if c["cell_type"] == "code"))  # first code cell after
    assert "get_ipython().system_raise_on_error = True" in setup
    assert "Path(sys.executable).parent" in setup


@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_relative_paths_only(path):
    for cell in cells(path):
        text = source(cell)
        assert not ABSOLUTE_PATH.search(text), f"absolute path in {path.name}: {ABSOLUTE_PATH.search(text)[0]}"
        if cell["cell_type"] == "code":
            assert not fixed_ports(text), f"never a fixed port 29500: {fixed_ports(text)}"


def lesson_code(cell):
    """A code cell as Python: shell (!) and magic (%) lines become `pass`; %%writefile cells are scripts."""
    text = source(cell)
    if cell["cell_type"] != "code" or text.startswith("%%"):
        return ""
    return "\n".join(line[:len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("!", "%")) else line
                     for line in text.splitlines())  # a shell line inside a block keeps its indentation


@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_every_assert_explains_itself(path):
    """A failing assert in a log must say what was measured: `assert x == y, (x, y)`, never a bare `assert`."""
    bare = [f"cell {i}: {ast.unparse(node)[:100]}" for i, cell in enumerate(cells(path))
            for node in ast.walk(ast.parse(lesson_code(cell))) if isinstance(node, ast.Assert) and node.msg is None]
    assert not bare, "give these asserts a message with the measured values:\n" + "\n".join(bare)


def writefile_cells():
    for path in LESSONS:
        all_cells = cells(path)
        for i, _, _, target, body in writefile_cells_of({"cells": all_cells}):
            yield path, target, body, all_cells[i + 1:]


WRITTEN = list(writefile_cells())


@pytest.mark.parametrize("lesson,target,body,later", WRITTEN, ids=[w[1] for w in WRITTEN])
def test_writefile_cell_equals_committed_file(lesson, target, body, later):
    assert target.startswith("../ddp_scripts/"), target
    committed = (NOTEBOOKS / target).resolve()
    assert committed.name[:2] == lesson.name[:2], "a script keeps the prefix of the lesson that writes it"
    expected = body if body.endswith("\n") else body + "\n"  # %%writefile ends the file with a newline
    assert committed.read_text() == expected, f"{committed.name} differs from its %%writefile cell in {lesson.name}"
    assert any(committed.name in source(c) for c in later if c["cell_type"] == "code"), "written but never run"


def test_every_script_is_written_by_a_lesson():
    written = {(NOTEBOOKS / t).resolve().name for _, t, _, _ in WRITTEN}
    for script in SCRIPTS.iterdir():
        assert script.name in written, f"{script.name} is not written by any %%writefile cell"
        assert not fixed_ports(script.read_text()), "never a fixed port 29500"


def requirement_lines(lines):
    return [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]


def test_environment_yml_agrees_with_requirements():
    pip = requirement_lines((REPO / "requirements.txt").read_text().splitlines())
    yml = (REPO / "environment.yml").read_text().split("- pip:\n", 1)[1]
    conda_pip = requirement_lines(line.strip().removeprefix("- ") for line in yml.splitlines())
    assert conda_pip == pip
    assert "python=3.11" in (REPO / "environment.yml").read_text()


def test_ruff_is_clean():
    ruff = BIN / "ruff"
    result = subprocess.run([str(ruff) if ruff.exists() else "ruff", "check", "ddp_scripts", "notebooks", "tests",
                             "tools"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    assert "make test" in readme and "make handouts" in readme
    assert (REPO / ".ci" / "run").read_text().strip().endswith("make test")
    assert os.access(REPO / ".ci" / "run", os.X_OK) or sys.platform == "win32"


def test_make_clean_notebooks_fixes_a_lesson_saved_with_outputs(tmp_path):
    """What JupyterLab saves after a run (outputs, counts, widget state, cell timings) is removed; the
    result is the committed file, byte for byte. The committed lessons are already clean."""
    tool = [sys.executable, str(REPO / "tools" / "clean_notebooks.py")]
    assert subprocess.run(tool + ["--check"], capture_output=True, text=True, timeout=60).returncode == 0
    lesson = NOTEBOOKS / "04_ddp_train.ipynb"
    nb = json.loads(lesson.read_text())
    nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    for i, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
        cell["execution_count"] = i + 1
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["ran\n"]}]
        cell["metadata"]["execution"] = {"iopub.execute_input": "2026-12-02T00:00:00Z"}
    dirty = tmp_path / lesson.name
    dirty.write_text(text_of(nb))
    checked = subprocess.run(tool + ["--check", str(dirty)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 1 and "not clean" in checked.stdout, checked
    assert subprocess.run(tool + [str(dirty)], capture_output=True, text=True, timeout=60).returncode == 0
    assert dirty.read_text() == lesson.read_text()
