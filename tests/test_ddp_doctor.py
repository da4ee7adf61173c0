"""The DDP doctor (tools/ddp_doctor.py): each rule on a script that triggers it and on near misses that
must not; the series' own scripts; the command line's exit codes and formats; notebooks; speed.

The cases live in tests/doctor_cases/: DDP###_bad*.py and DDP###_ok*.py. A line that must give a finding
ends with `# expect: DDP###` (one per finding); every other line must give none.
"""

import json
import re
import resource
import subprocess
import sys
import time

import ddp_doctor
import pytest
from conftest import NOTEBOOKS, REPO, SCRIPTS

CASES = REPO / "tests" / "doctor_cases"
CASE_FILES = sorted(CASES.glob("*.py"))
EXPECT = re.compile(r"expect: (DDP\d{3})")
DOCTOR = [sys.executable, str(REPO / "tools" / "ddp_doctor.py")]


def expected_findings(text):
    return sorted((i + 1, code) for i, line in enumerate(text.splitlines()) for code in EXPECT.findall(line))


def doctor(*args, cwd=REPO):
    return subprocess.run([*DOCTOR, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("path", CASE_FILES, ids=[p.stem for p in CASE_FILES])
def test_each_case_gives_exactly_its_expected_findings(path):
    text = path.read_text()
    found = sorted((f.line, f.code) for f in ddp_doctor.check_source(text, path.name) if not f.suppressed)
    assert found == expected_findings(text), (path.name, found)


def test_every_rule_has_a_case_that_triggers_it_and_a_near_miss():
    codes = [code for code in ddp_doctor.RULES if code != "DDP000"]
    for code in codes:
        bad = [p for p in CASE_FILES if p.name.startswith(f"{code}_bad")]
        ok = [p for p in CASE_FILES if p.name.startswith(f"{code}_ok")]
        assert bad and ok, f"{code}: needs tests/doctor_cases/{code}_bad.py and {code}_ok.py"
        assert any(code in EXPECT.findall(p.read_text()) for p in bad), f"{code}: its bad case expects nothing"
        assert not any(EXPECT.search(p.read_text()) for p in ok), f"{code}: a near miss must expect nothing"
    produced = {f.code for p in CASE_FILES for f in ddp_doctor.check_source(p.read_text(), p.name)}
    assert produced >= set(codes), sorted(set(codes) - produced)


def test_rules_are_small_named_functions_with_documented_codes():
    for rule in ddp_doctor.RULE_FUNCTIONS:
        assert rule.__name__.startswith("rule_") and rule.__doc__ and re.match(r"DDP\d{3}", rule.__doc__), rule
    documented = [re.findall(r"DDP\d{3}", rule.__doc__.split(":")[0]) for rule in ddp_doctor.RULE_FUNCTIONS]
    assert sorted(c for codes in documented for c in codes) == [c for c in ddp_doctor.RULES if c != "DDP000"]
    for code, (name, message, why, fix, lesson) in ddp_doctor.RULES.items():
        assert re.fullmatch(r"[a-z0-9-]+", name) and message and why and fix and lesson, code


def test_the_source_posts_appendix_is_flagged_for_each_mistake_the_series_corrects():
    """README: Softmax before CrossEntropyLoss, get_rank() as local rank, no set_epoch, every rank prints,
    NCCL hard-coded, CUDA_VISIBLE_DEVICES set inside the script."""
    found = {f.code for f in ddp_doctor.check_file(CASES / "post_appendix.py")}
    assert found >= {"DDP019", "DDP001", "DDP002", "DDP006", "DDP012", "DDP013"}, sorted(found)


def test_the_series_passes_its_own_doctor():
    """No finding on ddp_scripts/; where a lesson keeps a bug on purpose, an ignore comment says why."""
    result = doctor("--format", "json", SCRIPTS)
    report = json.loads(result.stdout)
    active = [f for f in report["findings"] if not f["suppressed"]]
    assert result.returncode == 0 and not active, active
    for f in report["findings"]:
        lines = (REPO / f["path"]).read_text().splitlines()
        around = "\n".join(lines[max(f["line"] - 3, 0):f["line"]])
        reason = re.search(rf"ddp-doctor: ignore\[[^\]]*{f['code']}[^\]]*\]\s*(\S.*)", around)
        assert reason and len(reason.group(1)) > 10, f"say why the lesson keeps {f['code']}: {f['path']}:{f['line']}"
    assert report["summary"]["suppressed"] == len(report["findings"]) > 0, report["summary"]


def test_exit_codes_and_text_format(tmp_path):
    clean = doctor(CASES / "DDP012_ok.py")
    assert clean.returncode == 0 and "no findings in 1 file(s)" in clean.stdout, clean
    found = doctor(CASES / "DDP012_bad.py")
    assert found.returncode == 1, found
    first = found.stdout.splitlines()[0]
    assert re.fullmatch(r"\S+DDP012_bad\.py:4:\d+: DDP012 .+", first), first  # path:line:col: CODE message
    assert "1 finding(s) in 1 file(s), 0 suppressed" in found.stdout.splitlines()[-1], found.stdout
    for bad_usage in (["--no-such-flag"], [tmp_path / "missing.py"], ["--explain", "DDP999"], []):
        result = doctor(*bad_usage)
        assert result.returncode == 2 and result.stdout == "", (bad_usage, result)
        assert result.stderr.strip().splitlines()[-1].startswith("ddp_doctor.py: error:"), result.stderr


def test_explain_and_list():
    explained = doctor("--explain", "ddp011")
    assert explained.returncode == 0, explained
    for part in ("DDP011 collective-in-rank-branch", "Why:", "Fix:", "Lesson: 05 · Rank-aware training"):
        assert part in explained.stdout, explained.stdout
    listed = doctor("--list").stdout.splitlines()
    assert [line.split()[0] for line in listed] == list(ddp_doctor.RULES), listed


def test_json_format_and_suppression(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch.distributed as dist\n"
                      "dist.init_process_group('nccl')  # ddp-doctor: ignore[DDP012] a GPU-only cluster job\n"
                      "import os\n"
                      "os.environ['CUDA_VISIBLE_DEVICES'] = '0'\n")
    result = doctor("--format", "json", script)
    report = json.loads(result.stdout)
    assert result.returncode == 1, result
    assert [(f["line"], f["code"], f["suppressed"]) for f in report["findings"]] == [
        (2, "DDP012", True), (4, "DDP013", False)], report
    assert set(report["findings"][0]) >= {"path", "line", "col", "code", "message", "suppressed"}, report
    assert report["summary"]["files"] == 1 and report["summary"]["findings"] == 1, report["summary"]
    assert report["summary"]["suppressed"] == 1, report["summary"]
    text = doctor(script)
    assert "DDP012" not in text.stdout and "1 suppressed" in text.stdout, text.stdout
    assert "DDP012" in doctor("--show-suppressed", script).stdout


def test_a_file_that_does_not_parse_is_DDP000_and_exit_1(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n    pass\n")
    result = doctor(broken, CASES / "DDP012_ok.py")
    assert result.returncode == 1, result
    assert re.search(r"broken\.py:1:\d+: DDP000 cannot parse this file", result.stdout), result.stdout
    assert "in 2 file(s)" in result.stdout, result.stdout  # the other file is still checked


def test_notebooks_code_cells_and_writefile_cells(tmp_path):
    """Plain code cells are one program (shell and magic lines skipped); a %%writefile cell is the file it
    writes; places are `path:cell N:line:col` with N the cell's index and line counted in the cell."""
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# a title\n"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": ["import os\n", "!nvidia-smi\n", "%time x = 1\n", "os.environ['CUDA_VISIBLE_DEVICES'] = '1'\n"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": ["%%writefile train.py\n", "import torch.distributed as dist\n",
                    "dist.init_process_group('nccl')\n"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": ["%%bash\n", "os.environ['CUDA_VISIBLE_DEVICES'] = '1'\n"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": ["files = !ls\n"]},  # IPython syntax: this cell alone is DDP000, the others still checked
    ]
    nb = tmp_path / "lesson.ipynb"
    nb.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    result = doctor("--format", "json", nb)
    places = sorted((f["cell"], f["line"], f["code"]) for f in json.loads(result.stdout)["findings"])
    assert places == [(1, 4, "DDP013"), (2, 3, "DDP012"), (4, 1, "DDP000")], places
    assert re.search(r"lesson\.ipynb:cell 2:3:\d+: DDP012", doctor(nb).stdout), doctor(nb).stdout


def test_it_never_imports_torch():
    code = ("import sys; sys.path.insert(0, 'tools'); import ddp_doctor; "
            "ddp_doctor.main(['ddp_scripts', '--format', 'json']); print('torch' in sys.modules, file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.stderr.strip().splitlines()[-1] == "False", result.stderr


def test_speed_on_the_whole_repository():
    """Printed, not asserted tightly (two test workers share two cores): the bound is generous."""
    files = list(ddp_doctor.files_under([REPO]))
    cpu_before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    result = doctor("--format", "json", REPO)
    seconds, cpu_after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = cpu_after.ru_utime + cpu_after.ru_stime - cpu_before.ru_utime - cpu_before.ru_stime
    summary = json.loads(result.stdout)["summary"]
    print(f"\nddp-doctor on the whole repository: {summary['files']} files in {summary['seconds']:.2f} s "
          f"({seconds:.2f} s with the interpreter's start, {cpu:.2f} s of CPU: the rest is waiting for a core)")
    assert summary["files"] == len(files) and len(files) > len(list(SCRIPTS.glob("*.py"))), (summary, len(files))
    assert any(p.suffix == ".ipynb" for p in files) and any(p.parent == NOTEBOOKS for p in files), files[:5]
    assert seconds < 20, seconds
