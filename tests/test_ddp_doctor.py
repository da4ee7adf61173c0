"""The DDP doctor (tools/ddp_doctor.py, the package tools/ddp_doctor/): each rule on a script that triggers it
and on near misses that must not; the series' own scripts; the command line's exit codes, levels, selection
and formats; notebooks; malformed input; linear cost; the pre-commit hook.

The cases live in tests/doctor_cases/: DDP###_bad*.py and DDP###_ok*.py. A line that must give a finding
ends with `# expect: DDP###` (one per finding); every other line must give none.
"""

import functools
import gc
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
import tomllib

import ddp_doctor
import doctor_bench
import pytest
import yaml
from conftest import NOTEBOOKS, REPO, SCRIPTS
from ddp_doctor import driver
from ddp_doctor.rules import FAMILIES, LEVEL_LINE, codes_of

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


def test_a_rule_is_one_function_in_its_familys_module_with_its_codes_beside_it():
    """A new rule: a rule_* function and its RULES entries in one module of rules/; nothing else to register."""
    for family in FAMILIES:
        functions = [f for name, f in vars(family).items() if name.startswith("rule_")]
        assert sorted(c for f in functions for c in codes_of(f)) == sorted(family.RULES), family.__name__
        assert all(f.__module__ == family.__name__ for f in functions), family.__name__


def test_every_rule_has_a_level_with_its_reason():
    """errors: a hang, a crash, a wrong result or lost work; warnings: likely wrong; advice: portability, style."""
    for rule in ddp_doctor.RULE_FUNCTIONS:
        (level, reason), = LEVEL_LINE.findall(rule.__doc__)  # exactly one level line, with a reason
        assert len(reason) > 20 and all(ddp_doctor.LEVELS[c] == level.lower() for c in codes_of(rule)), rule
    assert list(ddp_doctor.LEVELS) == list(ddp_doctor.RULES)
    advice = {c for c, level in ddp_doctor.LEVELS.items() if level == "advice"}
    assert {"DDP007", "DDP012", "DDP014"} <= advice, advice  # a non-atomic save, NCCL by name, --local_rank
    assert ddp_doctor.LEVELS["DDP011"] == ddp_doctor.LEVELS["DDP000"] == "error"  # a hang; a file not checked
    assert "Level: advice (portability" in doctor("--explain", "DDP012").stdout


def test_the_source_posts_appendix_is_flagged_for_each_mistake_the_series_corrects():
    """README: Softmax before CrossEntropyLoss, get_rank() as local rank, no set_epoch, every rank prints,
    NCCL hard-coded, CUDA_VISIBLE_DEVICES set inside the script (from --gpu_id, whose default is '0,2')."""
    found = {f.code for f in ddp_doctor.check_file(CASES / "post_appendix.py")}
    assert found >= {"DDP019", "DDP001", "DDP002", "DDP006", "DDP012", "DDP013"}, sorted(found)
    assert "DDP026" not in found, sorted(found)


def test_the_series_passes_its_own_doctor():
    """No finding on ddp_scripts/; where a lesson keeps a bug on purpose, an ignore comment says why."""
    result = doctor("--format", "json", "--select", "ALL", SCRIPTS)
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
    advice_only = doctor(CASES / "DDP012_bad.py")  # advice is not reported by default: exit 0
    assert advice_only.returncode == 0 and "no findings" in advice_only.stdout, advice_only
    assert "1 not selected" in advice_only.stdout, advice_only.stdout
    found = doctor("--select", "ALL", CASES / "DDP012_bad.py")
    assert found.returncode == 1, found
    first = found.stdout.splitlines()[0]
    assert re.fullmatch(r"\S+DDP012_bad\.py:4:\d+: DDP012 .+", first), first  # path:line:col: CODE message
    assert "1 finding(s) in 1 file(s), 0 suppressed" in found.stdout.splitlines()[-1], found.stdout
    for bad_usage in (["--no-such-flag"], [tmp_path / "missing.py"], ["--explain", "DDP999"], [],
                      ["--select", "DDP9", CASES / "DDP012_bad.py"], ["--ignore", "E501", CASES / "DDP012_bad.py"]):
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
    result = doctor("--format", "json", "--select", "ALL", script)
    report = json.loads(result.stdout)
    assert result.returncode == 1, result
    assert [(f["line"], f["code"], f["suppressed"]) for f in report["findings"]] == [
        (2, "DDP012", True), (4, "DDP013", False)], report
    assert set(report["findings"][0]) >= {"path", "line", "col", "code", "message", "suppressed", "severity"}, report
    assert [f["severity"] for f in report["findings"]] == ["advice", "advice"], report
    assert report["summary"]["files"] == 1 and report["summary"]["findings"] == 1, report["summary"]
    assert report["summary"]["suppressed"] == 1, report["summary"]
    text = doctor("--select", "ALL", script)
    assert "DDP012" not in text.stdout and "1 suppressed" in text.stdout, text.stdout
    assert "DDP012" in doctor("--select", "ALL", "--show-suppressed", script).stdout


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
    result = doctor("--format", "json", "--select", "ALL", nb)
    places = sorted((f["cell"], f["line"], f["code"]) for f in json.loads(result.stdout)["findings"])
    assert places == [(1, 4, "DDP013"), (2, 3, "DDP012"), (4, 1, "DDP000")], places
    text = doctor("--select", "ALL", nb).stdout
    assert re.search(r"lesson\.ipynb:cell 2:3:\d+: DDP012", text), text


def test_it_never_imports_torch():
    code = ("import sys; sys.path.insert(0, 'tools'); import ddp_doctor; "
            "ddp_doctor.main(['ddp_scripts', '--format', 'json']); print('torch' in sys.modules, file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.stderr.strip().splitlines()[-1] == "False", result.stderr


def test_speed_on_the_whole_repository():
    """Printed, never asserted (two test workers share two cores); test_cost_grows_linearly holds the cost."""
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


def test_command_line_leaves_without_freeing(capsys):
    """The command line leaves with os._exit once its report is flushed (driver.hard_exit), the last program
    model not freed: its report still arrives whole, with its exit status, by either entry (the script, the
    package); main() called as a function returns the same, keeps no model and leaves the collector as it was."""
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # output held until flushed
    script, package = (subprocess.run([sys.executable, *entry, "--format", "json", str(SCRIPTS)], cwd=REPO / "tools",
                                      capture_output=True, text=True, timeout=120, env=buffered)
                       for entry in (["ddp_doctor.py"], ["-m", "ddp_doctor"]))
    collecting = gc.isenabled()
    status = driver.main(["--format", "json", str(SCRIPTS)])
    in_process = capsys.readouterr().out
    assert gc.isenabled() == collecting and driver.Leaving.kept is None and not driver.Leaving.quickly
    strip = functools.partial(re.sub, r'"seconds": [0-9.]+', '"seconds": 0')
    assert json.loads(in_process)["summary"]["files"] == len(list(ddp_doctor.files_under([SCRIPTS])))
    assert (script.returncode, strip(script.stdout)) == (package.returncode, strip(package.stdout)) == \
        (status, strip(in_process)), (script.stderr, package.stderr)


# ---------------------------------------------------------------------------------------------------
# Levels and selection: --select / --ignore / --extend-select, [tool.ddp-doctor], exit codes


def reported(*args):
    result = doctor("--format", "json", *args)
    assert result.returncode in (0, 1), result
    return result.returncode, sorted({f["code"] for f in json.loads(result.stdout)["findings"] if not f["suppressed"]})


def test_default_reports_errors_and_warnings_and_select_adds_advice():
    post = CASES / "post_appendix.py"
    _, everything = reported("--select", "ALL", post)
    exit_code, default = reported(post)
    assert exit_code == 1 and default == [c for c in everything if ddp_doctor.LEVELS[c] != "advice"], default
    assert {"DDP006", "DDP012"} <= set(everything) - set(default), everything
    assert reported("--select", "DDP012", post) == (1, ["DDP012"])
    assert reported("--select", "DDP01", post)[1] == [c for c in everything if c.startswith("DDP01")]
    assert reported("--extend-select", "DDP012", post)[1] == sorted({*default, "DDP012"})
    assert reported("--select", "ALL", "--ignore", "DDP012,DDP006", post)[1] == sorted(
        set(everything) - {"DDP012", "DDP006"})
    assert reported("--select", "DDP012", "--ignore", "DDP0", post)[1] == ["DDP012"]  # the more specific wins
    assert reported("--ignore", "DDP", post) == (0, [])  # nothing reported: exit 0


def test_pyproject_configuration_found_upward_from_the_checked_file(tmp_path):
    project = tmp_path / "project"
    (project / "src" / "deep").mkdir(parents=True)
    shutil.copy(CASES / "DDP012_bad.py", project / "src" / "deep" / "train.py")
    (project / "src" / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n")  # no table: keep looking
    (project / "pyproject.toml").write_text('[tool.ddp-doctor]\nselect = ["ALL"]\nignore = ["DDP013"]\n')
    assert reported(project / "src") == (1, ["DDP012"])
    assert reported("--ignore", "DDP012", project / "src") == (0, [])  # the command line adds to the file's
    (project / "pyproject.toml").write_text('[tool.ddp-doctor]\nselect = "ALL"\n')
    bad = doctor(project / "src")
    assert bad.returncode == 2 and "pyproject.toml: [tool.ddp-doctor] select" in bad.stderr, bad
    (project / "pyproject.toml").write_text('[tool.ddp-doctor]\nselct = ["ALL"]\n')
    assert doctor(project / "src").returncode == 2


def test_github_annotations():
    """::error / ::warning / ::notice (advice), file, line and column, the code as title; a notebook's cell in
    the message; the text escaped as GitHub's workflow commands need."""
    lines = doctor("--format", "github", "--select", "ALL", CASES / "post_appendix.py").stdout.splitlines()
    annotations = [line for line in lines if line.startswith("::")]
    pattern = re.compile(r"::(error|warning|notice) file=[^,:]+post_appendix\.py,line=(\d+),col=(\d+),"
                         r"title=(DDP\d{3})::(DDP\d{3}) (.+)")
    assert annotations and all(pattern.fullmatch(a) for a in annotations), annotations
    kinds = {pattern.fullmatch(a).group(4): pattern.fullmatch(a).group(1) for a in annotations}
    assert kinds["DDP002"] == "error" and kinds["DDP001"] == kinds["DDP012"] == "notice", kinds
    assert lines[-1].startswith("ddp-doctor: ")  # the summary, as a plain log line
    finding = driver.Finding("a,b.ipynb", 3, 5, "DDP005", "100% of\nit", cell=2)
    assert driver.github_line(finding) == \
        "::warning file=a%2Cb.ipynb,title=DDP005::cell 2, line 3: DDP005 100%25 of%0Ait"


def test_pre_commit_hook_installs_and_runs_with_the_standard_library_only(tmp_path):
    """.pre-commit-hooks.yaml names a console script that pyproject.toml installs from tools/ddp_doctor/ with
    no dependencies; installed (offline, as pre-commit's pip would) it checks the files it is given."""
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    hook, = [h for h in hooks if h["id"] == "ddp-doctor"]
    assert hook["language"] == "python" and re.search(hook["files"], "a/train.py") and \
        re.search(hook["files"], "lesson.ipynb") and not re.search(hook["files"], "notes.md"), hook
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project.get("dependencies", []) == [] and hook["entry"] in project["scripts"], project
    source = tmp_path / "source"
    (source / "tools").mkdir(parents=True)
    shutil.copy(REPO / "pyproject.toml", source)
    shutil.copytree(REPO / "tools" / "ddp_doctor", source / "tools" / "ddp_doctor",
                    ignore=shutil.ignore_patterns("__pycache__"))
    install = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                              "--no-build-isolation", "--target", tmp_path / "site", source],
                             capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr[-3000:]
    script = tmp_path / "site" / "bin" / hook["entry"]
    env = {"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, script, *hook.get("args", []), CASES / "DDP011_bad.py",
                          CASES / "DDP011_ok.py"], capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 1 and run.stdout.count(": DDP011 ") == 4, run
    clean = subprocess.run([sys.executable, script, *hook.get("args", []), CASES / "DDP011_ok.py"],
                           capture_output=True, text=True, timeout=120, env=env)
    assert clean.returncode == 0, clean


# ---------------------------------------------------------------------------------------------------
# Malformed input: never a traceback; one DDP000 per bad file; an internal error is exit 3


def notebook_json(cells):
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


CODE_CELL = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}
VISIBLE = "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '1'\n"  # one DDP013 (advice: --select it) on line 2


def test_malformed_files_are_one_DDP000_each_and_the_run_goes_on(tmp_path):
    bad = {
        "list.ipynb": "[1, 2]",
        "cells_a_string.ipynb": json.dumps({"cells": "x = 1", "metadata": {}}),
        "no_source.ipynb": notebook_json([CODE_CELL]),
        "null_source.ipynb": notebook_json([{**CODE_CELL, "source": None}]),
        "number_in_source.ipynb": notebook_json([{**CODE_CELL, "source": ["x = 1\n", 2]}]),
        "not_json.ipynb": "{cells: [",
        "deep_json.ipynb": "[" * 100_000 + "]" * 100_000,
        "not_utf8.py": b"x = '\xff\xfe'\n",
        "unknown_coding.py": b"# -*- coding: no-such-codec -*-\nx = 1\n",
        "null_byte.py": b"x = 1\x00\n",
        "syntax.py": "def f(:\n",
    }
    for name, content in bad.items():
        (tmp_path / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    good = {
        "bom.py": b"\xef\xbb\xbf" + VISIBLE.encode(),
        "latin1.py": ("# -*- coding: latin-1 -*-\n# caf\u00e9, na\u00efve\n" + VISIBLE).encode("latin-1"),
        "notebook.ipynb": notebook_json([{**CODE_CELL, "source": VISIBLE}]).encode(),
        "deep_but_valid.py": ("x = " + "+".join(["1"] * 2000) + "\n" + VISIBLE).encode(),
    }
    for name, content in good.items():
        (tmp_path / name).write_bytes(content)
    deep = "x = " + "+".join(["1"] * 3000) + "\n" + VISIBLE
    (tmp_path / "deep_3000.py").write_text(deep)
    try:
        compile(deep, "deep_3000.py", "exec")
        good["deep_3000.py"] = deep  # a Python whose compiler takes it: the doctor reads it too
    except RecursionError:
        bad["deep_3000.py"] = deep  # CPython cannot compile it either: DDP000
    result = doctor("--format", "json", "--select", "DDP013", tmp_path)
    assert "Traceback" not in result.stderr and result.returncode == 1, result
    report = json.loads(result.stdout)
    codes = {name: [f["code"] for f in report["findings"] if f["path"].endswith("/" + name)]
             for name in [*bad, *good]}
    assert {name: codes[name] for name in bad} == {name: ["DDP000"] for name in bad}, codes
    assert {name: codes[name] for name in good} == {name: ["DDP013"] for name in good}, codes
    lines = {f["path"].rpartition("/")[2]: f["line"] for f in report["findings"] if f["code"] == "DDP013"}
    assert lines["bom.py"] == 2 and lines["latin1.py"] == 4 and lines["deep_but_valid.py"] == 3, lines
    assert report["summary"]["files"] == len(bad) + len(good) and report["summary"]["internal_errors"] == 0
    assert "null_source.ipynb:1:0: DDP000 cannot parse this file: not a notebook (code cell 0 has no source" in \
        doctor(tmp_path / "null_source.ipynb").stdout


def test_an_internal_error_names_the_file_exits_3_and_the_run_goes_on(tmp_path, monkeypatch, capsys):
    def rule_that_fails(m):
        """DDP999: a rule with a bug, for this test."""
        if "explode" in m.call_names:
            raise KeyError("a bug")
        return []

    monkeypatch.setattr(driver, "RULE_FUNCTIONS", [rule_that_fails, *driver.RULE_FUNCTIONS])
    (tmp_path / "a_fails.py").write_text("explode()\n")
    (tmp_path / "b_fine.py").write_text(VISIBLE)
    exit_code = ddp_doctor.main(["--select", "DDP013", str(tmp_path)])
    out, err = capsys.readouterr()
    assert exit_code == 3, (out, err)
    assert re.search(r"internal error while checking \S+a_fails\.py: rule_that_fails: KeyError", err), err
    assert re.search(r"b_fine\.py:2:1: DDP013", out) and "in 2 file(s)" in out, out


def function_calls(source, lines=False):
    """The work the doctor does on source (a count, the same on a loaded machine), and its findings: the Python
    function calls it makes, or with lines=True every line it runs and every call, traced, so that each turn of a
    comprehension's loop counts too (a set built from every function of the file, for every test, is quadratic
    work in one call)."""
    count = 0

    def profile(frame, event, arg):
        nonlocal count
        count += event in ("call", "c_call")

    def trace(frame, event, arg):
        nonlocal count
        count += 1
        return trace

    watch, counter = (sys.settrace, trace) if lines else (sys.setprofile, profile)
    watch(counter)
    try:
        findings = ddp_doctor.check_source(source, "generated.py")
    finally:
        watch(None)
    return count, findings


def test_cost_grows_linearly(monkeypatch):
    """A count, not a time: the Python function calls the doctor makes on a generated script of n and 4n lines
    (tools/doctor_bench.py times 10k to 200k lines). A rule that rescans a scope for every print makes
    this ratio grow with n (about 16 for 4 times the lines); a linear doctor keeps it near 4."""
    def calls_made(lines):
        count, findings = function_calls(doctor_bench.generate(lines))
        assert findings  # it checked something: the prints of a shard's loss
        return count

    small, large = calls_made(1000), calls_made(4000)
    print(f"\nfunction calls: {small} for 1,000 lines, {large} for 4,000 ({large / small:.2f} times)")
    assert large / small < 4.6, (small, large)


def test_cost_grows_linearly_with_rank_branches():
    """A count, not a time: one function with n and 4n `if rank == 0: dist.barrier()`, each a DDP011 finding
    whose twin `if` (`if rank != 0: dist.barrier()`) is looked for in the function. Searching the function
    for every finding makes the ratio about 16; an index of the function's `if`s, built once, keeps it near 4."""
    def calls_made(branches):
        source = ("import torch.distributed as dist\n\n\ndef main(x):\n    rank = dist.get_rank()\n"
                  + "    if rank == 0:\n        dist.barrier()\n" * branches)
        count, findings = function_calls(source)
        assert [f.code for f in findings].count("DDP011") == branches, findings
        return count

    small, large = calls_made(100), calls_made(400)
    print(f"\nfunction calls: {small} for 100 rank branches, {large} for 400 ({large / small:.2f} times)")
    assert large / small < 5, (small, large)


def test_cost_grows_linearly_with_helpers_in_tests():
    """A count, not a time: n helpers without arguments and n saves, each under `if helper_i():` (the shape of
    `if is_first_worker():`), then 4n. Reading the file's helpers again for every test made the ratio about 6.6
    here (and a 200k-line file take 25 s instead of 6); read once, it stays near 4."""
    def work(n):
        source = ("import torch\nimport torch.distributed as dist\n\n\n"
                  + "".join(f"def ready_{i}():\n    return torch.cuda.is_available()\n\n\n" for i in range(n))
                  + "def main(model):\n    dist.init_process_group('gloo')\n"
                  + "    model = torch.nn.parallel.DistributedDataParallel(model)\n"
                  + "".join(f"    if ready_{i}():\n        torch.save(model.state_dict(), 'm.pt')\n" for i in range(n)))
        count, findings = function_calls(source, lines=True)
        assert [f.code for f in findings].count("DDP007") == n, findings  # each save was read (written in place)
        return count

    small, large = work(250), work(1000)
    print(f"\nlines run: {small} for 250 helpers, {large} for 1,000 ({large / small:.2f} times)")
    assert large / small < 4.6, (small, large)


def test_a_long_chain_of_helpers_is_read_without_a_recursion_error(tmp_path):
    """3,000 helpers, each calling the next, the last a barrier, and rank 0 alone calling the first: DDP011 on
    that call, and no internal error (DDP011 reads a chain of helpers to a bounded depth, and past it counts
    the call as one that may sync, as it counts any call it cannot read)."""
    n = 3000
    helpers = "".join(f"def helper_{i}(x):\n    return helper_{i + 1}(x)\n\n\n" for i in range(n))
    source = ("import torch.distributed as dist\n\n\n" + helpers
              + f"def helper_{n}(x):\n    dist.barrier()\n    return x\n\n\n"
              + "def main():\n    if dist.get_rank() == 0:\n        helper_0(1)\n")
    (tmp_path / "chain.py").write_text(source)
    result = doctor("--format", "json", tmp_path / "chain.py")
    report = json.loads(result.stdout)
    assert report["internal_errors"] == [] and result.returncode == 1, (result.returncode, report["internal_errors"])
    assert [(f["code"], f["line"]) for f in report["findings"]] == [("DDP011", source.count("\n"))], report


def test_evaluation_record_totals_agree_with_its_tables():
    """tools/ddp_doctor/evaluation.md: each round's Totals line is what its table of verdicts gives, every
    verdict is true, false or debatable, and every judged script is named with its repository and commit."""
    from ddp_doctor import evaluation
    rounds = evaluation.rounds()
    assert rounds and all(r["total"] for r in rounds), rounds
    assert evaluation.problems(rounds) == [], evaluation.problems(rounds)
    made_up = "## Round 9\n| script | place | rule | verdict | why |\n|---|---|---|---|---|\n" \
              "| a | a.py:1 | DDP005 | true | x |\n" \
              "Totals: 1 findings: 0 true, 1 false, 0 debatable; precision 0 % (0/1)\n"
    assert len(evaluation.problems(evaluation.rounds(made_up))) == 2  # wrong totals, script not listed


def findings_at(path, *options):
    """The doctor's findings (default selection, or options') on a file or a folder, as (file name, line, code)."""
    result = doctor("--format", "json", *options, path)
    assert result.returncode in (0, 1), result
    return [(f["path"].rpartition("/")[2], f["line"], f["code"]) for f in json.loads(result.stdout)["findings"]]


def test_a_folder_is_read_as_one_program_for_the_gather_of_an_evaluation(tmp_path):
    """DDP018 in a folder run: an evaluation over a padded DistributedSampler in main.py is silent when another
    file of the folder gathers (results keyed by sample id can be merged), and fires when main.py is alone."""
    (tmp_path / "main.py").write_text(
        "import torch.distributed as dist\nfrom torch.utils.data import DataLoader, DistributedSampler\n"
        "dist.init_process_group('gloo')\n"
        "val_loader = DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False))\n"
        "counts = sum(len(batch) for batch in val_loader)\ndist.all_reduce(counts)\n")
    alone = findings_at(tmp_path / "main.py", "--extend-select", "DDP018")
    assert [code for _, _, code in alone] == ["DDP018"], alone
    (tmp_path / "evaluator.py").write_text("import torch.distributed as dist\n\n\ndef merge(results):\n"
                                           "    every = [None] * dist.get_world_size()\n"
                                           "    dist.all_gather_object(every, results)\n    return every\n")
    folder = findings_at(tmp_path, "--extend-select", "DDP018")
    assert folder == [], folder


def test_a_folder_shows_the_random_augmentation_that_workers_seeded_alike_repeat(tmp_path):
    """DDP022 in a folder run: main.py seeds every rank alike and starts workers, and the random crops are made
    in transforms.py: silent for main.py alone (no augmentation in sight), a finding for the folder; silent
    again once another file's helper reseeds (it may add the rank)."""
    (tmp_path / "main.py").write_text(
        "import torch\nimport torch.distributed as dist\nfrom torch.utils.data import DataLoader, DistributedSampler\n"
        "from transforms import train_set\n"
        "dist.init_process_group('gloo')\ntorch.manual_seed(0)\n"
        "loader = DataLoader(train_set, sampler=DistributedSampler(train_set), num_workers=4)\n")
    alone = findings_at(tmp_path / "main.py")
    assert alone == [], alone
    (tmp_path / "transforms.py").write_text("from torchvision import datasets, transforms as T\n"
                                            "train_set = datasets.CIFAR10('data', transform=T.RandomCrop(32, 4))\n")
    folder = findings_at(tmp_path)
    assert folder == [("main.py", 7, "DDP022")], folder
    main = (tmp_path / "main.py").read_text()
    reseed = "torch.manual_seed(0)\nutils.seed_all(0)\n"
    (tmp_path / "main.py").write_text(main.replace("torch.manual_seed(0)\n", reseed))
    reseeded = findings_at(tmp_path)
    assert reseeded == [], reseeded


def test_a_folder_shows_the_buffers_that_make_a_ddp_forward_a_collective(tmp_path):
    """DDP011 in a folder run: a rank-0 forward through a DDP model whose class, in models.py, builds a class
    with a BatchNorm: silent for train.py alone (no buffers in sight), a finding for the folder; silent again
    when the layer holds no buffers (LayerNorm)."""
    (tmp_path / "train.py").write_text(
        "import torch.distributed as dist\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
        "from models import Net\n\n\ndef main(x):\n    dist.init_process_group('gloo')\n    model = DDP(Net())\n"
        "    if dist.get_rank() == 0:\n        model(x)\n\n\nmain(None)\n")
    alone = findings_at(tmp_path / "train.py")
    assert alone == [], alone
    models = ("import torch.nn as nn\n\n\nclass Stem(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              "        self.norm = nn.BatchNorm2d(3)\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
              "        super().__init__()\n        self.stem = Stem()\n")
    (tmp_path / "models.py").write_text(models)
    folder = findings_at(tmp_path)
    assert folder == [("train.py", 10, "DDP011")], folder
    (tmp_path / "models.py").write_text(models.replace("nn.BatchNorm2d(3)", "nn.LayerNorm(3)"))
    no_buffers = findings_at(tmp_path)
    assert no_buffers == [], no_buffers


def test_a_folder_shows_the_rank_tests_that_its_helpers_define(tmp_path):
    """DDP011 in a folder run: `is_leader()` and `args.rank` are rank tests because another file of the folder
    says so (`return get_rank() == 0`, `args.rank = int(os.environ["RANK"])`): silent for train.py alone (no
    name is taken for a rank by its spelling), two findings for the folder."""
    (tmp_path / "train.py").write_text(
        "import torch.distributed as dist\nimport utils\n\n\ndef main(args):\n    utils.setup(args)\n"
        "    if utils.is_leader():\n        dist.barrier()\n    if args.rank == 0:\n        dist.barrier()\n")
    alone = findings_at(tmp_path / "train.py")
    assert alone == [], alone
    (tmp_path / "utils.py").write_text(
        "import os\n\nimport torch.distributed as dist\n\n\ndef is_leader():\n    \"\"\"Rank 0.\"\"\"\n"
        "    return dist.get_rank() == 0\n\n\ndef setup(args):\n    args.rank = int(os.environ[\"RANK\"])\n"
        "    dist.init_process_group('gloo')\n")
    folder = findings_at(tmp_path)
    assert folder == [("train.py", 8, "DDP011"), ("train.py", 10, "DDP011")], folder


def test_a_folder_shows_a_rank_test_helper_to_a_script_in_a_subfolder(tmp_path):
    """DDP005 in a folder run: drivers/train.py imports `primary()` from common/helpers.py at the folder's root
    (`sys.path += ['../']`); its return is a rank test (`not dist.is_initialized() or dist.get_rank() == 0`), so
    the save under it is rank 0's alone: a finding for train.py alone, silent for the folder; a finding again
    when the helper returns what every rank passes (`dist.get_rank() >= 0`)."""
    (tmp_path / "drivers").mkdir()
    (tmp_path / "common").mkdir()
    (tmp_path / "drivers" / "train.py").write_text(
        "import sys\nsys.path += ['../']\nimport torch\nimport torch.distributed as dist\n"
        "from common.helpers import (\n    primary,\n)\n\n\ndef main():\n    dist.init_process_group('gloo')\n"
        "    losses = torch.zeros(3)\n    if primary() and losses.sum() >= 0:\n"
        "        torch.save(losses, 'losses.pt')\n\n\nmain()\n")
    alone = findings_at(tmp_path / "drivers" / "train.py")
    assert alone == [("train.py", 14, "DDP005")], alone
    helper = "import torch.distributed as dist\n\n\ndef primary():\n    return {}\n"
    (tmp_path / "common" / "helpers.py").write_text(helper.format(
        "not dist.is_available() or not dist.is_initialized() or dist.get_rank() == 0"))
    folder = findings_at(tmp_path)
    assert folder == [], folder
    (tmp_path / "common" / "helpers.py").write_text(helper.format("dist.get_rank() >= 0"))
    every_rank = findings_at(tmp_path)
    assert every_rank == [("train.py", 14, "DDP005")], every_rank


def test_a_folder_shows_that_it_joins_its_group_as_the_local_rank(tmp_path):
    """DDP001 in a folder run: trainer.py uses the global rank as a device; comm.py joins the group with
    rank=local_rank (from LOCAL_RANK), which only one node can do: a finding for trainer.py alone, silent for
    the folder; a finding again when comm.py joins with the global rank."""
    (tmp_path / "trainer.py").write_text(
        "import torch\nimport torch.distributed as dist\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
        "\n\ndef wrap(model):\n    return DDP(model, device_ids=[dist.get_rank()])\n")
    alone = findings_at(tmp_path / "trainer.py", "--extend-select", "DDP001")
    assert alone == [("trainer.py", 7, "DDP001")], alone
    comm = ("import os\n\nimport torch.distributed as dist\n\n\ndef init():\n"
            "    local_rank = int(os.getenv('{}', 0))\n    dist.init_process_group('gloo', rank=local_rank)\n")
    (tmp_path / "comm.py").write_text(comm.format("LOCAL_RANK"))
    folder = findings_at(tmp_path, "--extend-select", "DDP001")
    assert folder == [], folder
    (tmp_path / "comm.py").write_text(comm.format("RANK"))
    global_rank = findings_at(tmp_path, "--extend-select", "DDP001")
    assert global_rank == [("trainer.py", 7, "DDP001")], global_rank


def test_a_folder_shows_that_it_runs_on_one_node_and_saves_cpu_tensors(tmp_path):
    """DDP001 and DDP008 in a folder run: a device chosen by get_rank() and a load without map_location in
    worker.py fire alone; silent once launch.py points MASTER_ADDR at localhost and starts the workers with
    mp.spawn (one machine: the global rank is the local rank); the load fires again when another file saves
    tensors that are not moved to the CPU."""
    (tmp_path / "worker.py").write_text(
        "import torch\nimport torch.distributed as dist\n\n\ndef save(model, path):\n"
        "    torch.save({k: v.cpu() for k, v in model.state_dict().items()}, path)\n\n\n"
        "def run(index, world, model, path):\n    dist.init_process_group('gloo', rank=index, world_size=world)\n"
        "    torch.cuda.set_device(dist.get_rank())\n    model.load_state_dict(torch.load(path))\n")
    alone = findings_at(tmp_path / "worker.py", "--extend-select", "DDP001")
    assert alone == [("worker.py", 11, "DDP001")], alone
    (tmp_path / "launch.py").write_text(
        "import os\n\nimport torch\nimport torch.multiprocessing as mp\n\nfrom worker import run\n\n"
        "os.environ['MASTER_ADDR'] = 'localhost'\nos.environ['MASTER_PORT'] = '29500'\n"
        "mp.spawn(run, args=(torch.cuda.device_count(), None, 'w.pt'), nprocs=torch.cuda.device_count())\n")
    folder = findings_at(tmp_path, "--extend-select", "DDP001")
    assert folder == [], folder
    (tmp_path / "export.py").write_text("import torch\n\n\ndef export(model):\n"
                                        "    torch.save(model.state_dict(), 'w.pt')\n")
    saved_on_gpu = findings_at(tmp_path, "--extend-select", "DDP001")
    assert saved_on_gpu == [("worker.py", 12, "DDP008")], saved_on_gpu


# dfix17a: code that nothing runs (a function or method nothing in the program refers to), saves into memory


def test_a_function_is_referred_to_by_a_call_a_callback_a_dict_a_string_an_attribute_or_its_place():
    """Which functions of a program with an entry point count as code that nothing runs: only those whose
    name nothing uses (torch.save names no method save); a callback, a dict entry, a string (getattr
    dispatch), `obj.name`, a decorator, a dunder, a method of a class built on one outside the program refer."""
    import ast

    from ddp_doctor.program import Module
    source = (
        "import torch\nimport torch.nn as nn\n\n\n"
        "def called(): pass\ndef callback(): pass\ndef in_dict(): pass\ndef by_string(): pass\n"
        "def by_attribute(): pass\ndef dead(): pass\ndef save(): pass\n"
        "@torch.no_grad()\ndef decorated(): pass\n\n\n"
        "class Plain:\n    def __init__(self): pass\n    def used(self): pass\n    def unused(self): pass\n\n\n"
        "class Net(nn.Module):\n    def forward(self, x): return x\n\n\n"
        "class Child(Plain):\n    def hook(self): pass\n\n\n"
        "TABLE = {'a': in_dict}\n\n\n"
        "def main():\n    called()\n    run(callback)\n    getattr(object, 'by_string')\n"
        "    Plain().used()\n    x.by_attribute\n    torch.save(1, 'f')\n\n\n"
        "if __name__ == '__main__':\n    main()\n")
    module = Module(ast.parse(source))
    unreferred = sorted(f.name for f in module.functions_flat() if module.in_unreferred_function(f.body[0]))
    assert unreferred == ["dead", "hook", "save", "unused"], unreferred
    library = Module(ast.parse(source.replace("if __name__ == '__main__':\n    main()\n", "torch.manual_seed(0)\n")))
    assert not any(library.in_unreferred_function(f.body[0]) for f in library.functions_flat())
    script = Module(ast.parse(source.replace("if __name__ == '__main__':\n    main()\n", "main()\n")))
    assert script.has_entry_point()


def test_a_folder_reads_what_its_files_refer_to_for_code_that_nothing_runs(tmp_path):
    """DDP008 in a folder run: util/utils.py defines load(), which nothing calls (the script's own torch.load
    names no function load of the folder): silent; reported once the script calls utils.load (a module of the
    folder, whose attributes name its functions)."""
    (tmp_path / "util").mkdir()
    (tmp_path / "util" / "utils.py").write_text(
        "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n\n\n"
        "def wrap(model):\n    return DDP(model)\n\n\n"
        "def save(model, path):\n    torch.save(model.state_dict(), path)\n\n\n"
        "def load(model, path):\n    model.load_state_dict(torch.load(path))\n")
    script = ("import torch\nimport torch.distributed as dist\nfrom util import utils\n\n\ndef main():\n"
              "    dist.init_process_group('gloo')\n    model = torch.nn.Linear(2, 2)\n"
              "    if dist.get_rank() == 0:\n        utils.save(model, 'm.pt')\n"
              "    model.load_state_dict(torch.load('m.pt', map_location='cpu'))\n{}\n\n"
              "if __name__ == '__main__':\n    main()\n")
    (tmp_path / "train.py").write_text(script.format(""))
    assert findings_at(tmp_path) == [], findings_at(tmp_path)
    (tmp_path / "train.py").write_text(script.format("    utils.load(model, 'm.pt')"))
    assert findings_at(tmp_path) == [("utils.py", 14, "DDP008")], findings_at(tmp_path)
# dfix17b: DDP002 for samplers that leave the function that builds them


def test_a_sampler_that_leaves_its_helper_is_judged_by_the_whole_folder(tmp_path):
    """DDP002 in a folder run: data.py returns a loader that holds a DistributedSampler; train.py loops over
    epochs. Silent while train.py calls set_epoch (through the loader the doctor does not follow), a finding in
    data.py once no file calls set_epoch, and silent for data.py alone (no loop over epochs in that program)."""
    (tmp_path / "data.py").write_text(
        "from torch.utils.data import DataLoader, DistributedSampler\n\n\n"
        "def make(dataset, distributed):\n"
        "    return DataLoader(dataset, sampler=DistributedSampler(dataset) if distributed else None)\n")
    train = ("from data import make\n\n\ndef train(dataset, epochs):\n    loader = make(dataset, True)\n"
             "    for epoch in range(epochs):\n        {}\n        for batch in loader:\n            pass\n")
    (tmp_path / "train.py").write_text(train.format("loader.sampler.set_epoch(epoch)"))
    assert findings_at(tmp_path) == []
    (tmp_path / "train.py").write_text(train.format("pass"))
    untold = findings_at(tmp_path)
    assert untold == [("data.py", 5, "DDP002")], untold
    alone = findings_at(tmp_path / "data.py")
    assert alone == [], alone
    (tmp_path / "train.py").write_text(train.format("pass").replace("for epoch in range(epochs):", "while True:"))
    by_steps = findings_at(tmp_path)
    assert by_steps == [("data.py", 5, "DDP002")], by_steps
# DDP011: a syncing function passed to a call (a callback) is reached where that call runs


def test_a_callback_is_read_where_the_call_that_receives_it_runs():
    """DDP011 on a syncing function handed to a call under `if rank == 0:` names the call that receives it; a
    call that runs none of its arguments (print) reaches nothing; the other ranks reaching the same function as
    a callback balance a direct call on rank 0."""
    head = ("import torch.distributed as dist\nfrom concurrent.futures import ThreadPoolExecutor\n\n\n"
            "def step(x):\n    dist.all_reduce(x)\n\n\ndef main(pool, x):\n    dist.init_process_group('gloo')\n")
    submitted = ddp_doctor.check_source(head + "    if dist.get_rank() == 0:\n        pool.submit(step, x)\n", "t.py")
    assert [(f.line, f.code) for f in submitted] == [(12, "DDP011")], submitted
    assert "step(), which calls a collective and is passed to submit()," in submitted[0].message, submitted[0].message
    printed = ddp_doctor.check_source(head + "    if dist.get_rank() == 0:\n        print(step)\n", "t.py")
    assert printed == [], printed
    balanced = ddp_doctor.check_source(head + "    if dist.get_rank() == 0:\n        step(x)\n    else:\n"
                                       "        pool.map(step, [x])\n", "t.py")
    assert balanced == [], balanced


# dfix18a: a rank test kept in an attribute that another file of the folder sets; a group joined as args.local_rank


def test_a_folder_shows_a_rank_flag_that_another_file_sets(tmp_path):
    """DDP005 in a folder run: env.py sets `opt.log = True` only under `if opt.rank == 0:` (False elsewhere), so
    `if opt.log:` in train.py is a rank test: a finding for train.py alone, silent for the folder; a finding again
    when another function of the folder also sets opt.log True on every rank."""
    env = ("import torch.distributed as dist\n\n\ndef init(opt):\n    opt.rank = dist.get_rank()\n"
           "    if opt.rank == 0:\n        opt.log = True\n    else:\n        opt.log = False\n")
    (tmp_path / "env.py").write_text(env)
    (tmp_path / "train.py").write_text(
        "import torch\nimport torch.distributed as dist\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
        "\nfrom env import init\n\n\ndef train(opt, net):\n    dist.init_process_group('gloo')\n    init(opt)\n"
        "    model = DDP(net)\n    if opt.log:\n        torch.save(model.state_dict(), 'm.pt')\n\n\n"
        "if __name__ == '__main__':\n    train(None, None)\n")
    alone = findings_at(tmp_path / "train.py")
    assert alone == [("train.py", 13, "DDP005")], alone
    folder = findings_at(tmp_path)
    assert folder == [], folder
    (tmp_path / "env.py").write_text(env + "\n\ndef init_quiet(opt):\n    opt.log = True\n")
    every_rank = findings_at(tmp_path)
    assert every_rank == [("train.py", 13, "DDP005")], every_rank


def test_a_folder_shows_that_it_joins_its_group_as_the_launchers_local_rank(tmp_path):
    """DDP001 in a folder run: trainer.py uses the global rank as a device; comm.py joins the group with
    rank=local_rank taken from args.local_rank, the --local_rank option main.py declares (one node only): a
    finding for trainer.py alone, silent for the folder; a finding again when comm.py joins with args.rank."""
    (tmp_path / "trainer.py").write_text(
        "import torch\nimport torch.distributed as dist\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
        "\n\ndef wrap(model):\n    return DDP(model, device_ids=[dist.get_rank()])\n")
    alone = findings_at(tmp_path / "trainer.py", "--extend-select", "DDP001")
    assert alone == [("trainer.py", 7, "DDP001")], alone
    (tmp_path / "main.py").write_text(
        "import argparse\n\nparser = argparse.ArgumentParser()\n"
        "parser.add_argument('--local_rank', type=int, default=-1)\nparser.add_argument('--rank', type=int)\n")
    comm = ("import torch.distributed as dist\n\n\ndef init(args):\n    local_rank = args.local_rank\n"
            "    dist.init_process_group('nccl', init_method='env://', rank={})\n")
    (tmp_path / "comm.py").write_text(comm.format("local_rank"))
    folder = findings_at(tmp_path, "--extend-select", "DDP001")
    assert folder == [], folder
    (tmp_path / "comm.py").write_text(comm.format("args.local_rank"))
    direct = findings_at(tmp_path, "--extend-select", "DDP001")
    assert direct == [], direct
    (tmp_path / "comm.py").write_text(comm.format("args.rank"))
    global_rank = findings_at(tmp_path, "--extend-select", "DDP001")
    assert global_rank == [("trainer.py", 7, "DDP001")], global_rank


# dfix18b: DDP002 on DistributedSampler under other names and under `while True:`; DDP011 through a helper


def test_a_distributed_sampler_is_known_by_every_name_it_is_made_by():
    """DDP002 finds the sampler whatever spells it: a module path (`tud.distributed.DistributedSampler`), a class
    of that name from another package (torchft's), read again by `while True:`, and a subclass of a subclass of
    the file; a loader read once, outside any loop, stays silent."""
    spelled = ("import torch.utils.data as tud\n\n\ndef train(dataset, epochs):\n"
               "    sampler = tud.distributed.DistributedSampler(dataset)\n"
               "    loader = tud.DataLoader(dataset, sampler=sampler)\n"
               "    for epoch in range(epochs):\n        for batch in loader:\n            pass\n")
    found = [(f.line, f.code) for f in ddp_doctor.check_source(spelled, "t.py")]
    assert found == [(5, "DDP002")], found
    steps = ("from torchft import DistributedSampler\nfrom torchdata.stateful_dataloader import StatefulDataLoader"
             "\n\n\ndef main(trainset):\n    sampler = DistributedSampler(trainset, replica_rank=0, shuffle=True)\n"
             "    trainloader = StatefulDataLoader(trainset, batch_size=64, sampler=sampler)\n"
             "    while True:\n        for i, batch in enumerate(trainloader):\n            pass\n")
    found = [(f.line, f.code) for f in ddp_doctor.check_source(steps, "t.py")]
    assert found == [(6, "DDP002")], found
    once = steps.replace("    while True:\n        for i, batch in enumerate(trainloader):\n            pass\n",
                         "    for i, batch in enumerate(trainloader):\n        pass\n    while True:\n        pass\n")
    assert ddp_doctor.check_source(once, "t.py") == []
    deep = ("from torch.utils.data import DataLoader, DistributedSampler\n\n\n"
            "class B(A):\n    pass\n\n\nclass A(DistributedSampler):\n    pass\n\n\n"
            "def train(dataset, epochs):\n    loader = DataLoader(dataset, sampler=B(dataset))\n"
            "    for epoch in range(epochs):\n        for batch in loader:\n            pass\n")
    found = [(f.line, f.code) for f in ddp_doctor.check_source(deep, "t.py")]
    assert found == [(13, "DDP002")], found


# dfix19b: DDP002 is silent for a sampler over a dataset that the same pass of the epoch loop shuffles


def test_a_sampler_over_a_dataset_shuffled_each_epoch_repeats_nothing():
    """DDP002: a new DistributedSampler each epoch, no set_epoch, over a dataset rebuilt in the same epoch by a call
    passed shuffle=True (rank 0 shuffles, then broadcasts): a new order each epoch, silent. The same rebuild without
    the shuffle, or with shuffle=args.shuffle (not known to shuffle), or a loop that reseeds each epoch to the
    same value: the same order each epoch, a finding."""
    shuffled = ("import random\nfrom torch.utils.data import DataLoader\n"
                "from torch.utils.data.distributed import DistributedSampler\n\n\n"
                "def main(args, base, get_dataset):\n"
                "    for epoch in range(args.resume, args.num_epochs):\n"
                "        dataset_train = get_dataset(base, args, shuffle=True)\n"
                "        train_dataloader = DataLoader(dataset_train, shuffle=False,\n"
                "                                      sampler=DistributedSampler(dataset_train, shuffle=True))\n"
                "        for batch in train_dataloader:\n            pass\n\n\n"
                "if __name__ == '__main__':\n    main(None, None, None)\n")
    assert [f.code for f in ddp_doctor.check_source(shuffled, "t.py")] == []
    for change in (("shuffle=True)\n", ")\n"), ("shuffle=True)\n", "shuffle=args.shuffle)\n"),
                   ("        dataset_train =", "        random.seed(args.seed)\n        dataset_train =")):
        repeated = shuffled.replace(*change)
        found = [(f.line, f.code) for f in ddp_doctor.check_source(repeated, "t.py")]
        assert [code for _, code in found] == ["DDP002"], (change, found)


# dfix19a: DDP005 reads a save helper with the constant arguments of its unguarded calls


def test_a_save_helper_is_read_with_the_constants_of_its_unguarded_calls():
    """A save under the `elif` of `if save_cur:` is silent when the only call outside a rank test passes
    save_cur=True (by keyword, or by position), and fires when that call passes a variable, or when another file
    of the folder imports the helper (calls the doctor cannot read); the save_cur branch fires either way."""
    src = ("import torch\nimport torch.distributed as dist\n\n\n"
           "def save_checkpoint(model, epoch, save_cur=False):\n"
           "    if save_cur:\n        torch.save(model.weight.detach().cpu(), 'last.pt')\n"
           "    elif epoch % 2 == 0:\n        torch.save(model.weight.detach().cpu(), 'w.pt')\n\n\n"
           "def main(final):\n    dist.init_process_group('gloo')\n    model = torch.nn.Linear(4, 2)\n"
           "    if dist.get_rank() == 0:\n        save_checkpoint(model, 2)\n    {}\n\n\n"
           "if __name__ == '__main__':\n    main(True)\n")

    def found(call, folder=None):
        return sorted((f.line, f.code) for f in ddp_doctor.check_source(src.format(call), "t.py", folder=folder))

    assert found("save_checkpoint(model, 'last', save_cur=True)") == [(7, "DDP005")]
    assert found("save_checkpoint(model, 'last', True)") == [(7, "DDP005")]
    assert found("save_checkpoint(model, 'last', final)") == [(7, "DDP005"), (9, "DDP005")]
    assert found("save_checkpoint(model, 'last')") == [(9, "DDP005")]
    imported = ddp_doctor.driver.FolderFacts({"save_checkpoint"})
    imported.imported = frozenset({"save_checkpoint"})
    assert found("save_checkpoint(model, 'last', save_cur=True)", imported) == [(7, "DDP005"), (9, "DDP005")]


# dfix20b: a function handed to a call as a callback (tune.run(partial(trial, ...))) runs where its holder runs


def test_a_callback_runs_where_the_function_that_hands_it_runs():
    """trial, handed to tune.run by tune_setup, runs in the job only where tune_setup does: silent when only the
    branch that does not tune starts the DDP workers; the load fires when the holder forms the group (even
    after the hand-over: a callback may run later), when the holder also starts processes (mp.spawn: the doctor
    cannot tell where the callback runs), and when trial is stored in a dict."""
    src = ("import os\n\nimport torch\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\n"
           "from functools import partial\nfrom ray import tune\n"
           "from torch.nn.parallel import DistributedDataParallel as DDP\n\n\n"
           "def worker(rank, world_size):\n    dist.init_process_group('gloo', rank=rank, world_size=world_size)\n"
           "    DDP(torch.nn.Linear(4, 2))\n\n\n"
           "def trial(config):\n    model = torch.nn.Linear(4, 2).to('cuda')\n"
           "    model.load_state_dict(torch.load('checkpoint'))\n"
           "    torch.save(model.state_dict(), 'checkpoint.tmp')\n"
           "    os.replace('checkpoint.tmp', 'checkpoint')\n\n\n"
           "def tune_setup():\n    {}\n\n\n"
           "if __name__ == '__main__':\n    tune_setup()\n    mp.spawn(worker, args=(2,), nprocs=2)\n")

    def found(body):
        return sorted((f.line, f.code) for f in ddp_doctor.check_source(src.format(body), "t.py"))

    assert found("tune.run(partial(trial, data_path='d'))") == []
    assert found("tune.run(tune.with_parameters(trial, data='d'))") == []
    assert found("tune.run(trial)\n    dist.init_process_group('gloo')") == [(18, "DDP008")]
    assert found("tune.run(partial(trial))\n    mp.spawn(worker, args=(2,), nprocs=2)") == [(18, "DDP008")]
    assert found("tune.run({'f': trial})") == [(18, "DDP008")]


# dfix21a: DDP018 only for an evaluation that passes over the whole set


def test_padded_evaluation_read_only_as_a_stream_of_batches():
    """A validation loader read only by next() (through iter(), itertools.cycle or an endless generator of the
    file) sums no pass over the whole set: silent. A `for` over the loader, a call the doctor cannot read, a
    `cycle` that is not itertools', or a generator that ends after one pass keeps the finding."""
    src = ("import itertools\nimport torch.distributed as dist\n"
           "from torch.utils.data import DataLoader, DistributedSampler\n{}\n\n"
           "def train(model, val_set, steps):\n    sampler = DistributedSampler(val_set)\n"
           "    val_loader = DataLoader(val_set, sampler=sampler)\n    {}\n"
           "    for step in range(steps):\n        loss = model(next(stream))\n        dist.all_reduce(loss)\n")
    cycle = "\ndef cycle_loader(dl):\n    while True:\n        for x in dl:\n            yield x\n"
    once = "\ndef once(dl):\n    for x in dl:\n        yield x\n"

    def found(helpers, read):
        text = src.format(helpers, read)
        line = text[:text.index("DistributedSampler(val_set)")].count("\n") + 1
        return [(f.line - line, f.code) for f in ddp_doctor.check_source(text, "t.py")]

    assert found("", "stream = iter(val_loader)") == []
    assert found("", "stream = itertools.cycle(val_loader)") == []
    assert found(cycle, "stream = cycle_loader(val_loader)") == []
    assert found("from itertools import cycle", "stream = cycle(val_loader)") == []
    assert found("", "stream = iter(val_loader)\n    print(sum(len(b) for b in val_loader))") == [(0, "DDP018")]
    assert found("", "stream = iter(val_loader)\n    report(val_loader)") == [(0, "DDP018")]
    assert found("", "stream = cycle(val_loader)") == [(0, "DDP018")]
    assert found(once, "stream = once(val_loader)") == [(0, "DDP018")]
    assert found("", "stream = iter(val_loader)\n    batches = list(stream)") == [(0, "DDP018")]


# dfix22a: DDP002 and DDP018 silent for a dataset whose items do not depend on the index


def test_sampler_over_dataset_that_ignores_the_index():
    """Every class the sampler's dataset can be (the names bound to it in its function, `val_set = train_set`
    followed) defines a __getitem__ that never reads its index: each item is a fresh random draw, the sampler's
    order carries no data, so neither a missing set_epoch (DDP002) nor padding (DDP018) repeats a sample. The
    same datasets reading the index, a class inheriting __getitem__, or a dataset the doctor cannot see fire."""
    src = ("import torch\nimport torch.distributed as dist\n"
           "from torch.utils.data import DataLoader, Dataset, DistributedSampler\n\n\n"
           "class RandomCrops(Dataset):\n    def __len__(self):\n        return 100\n\n"
           "    def __getitem__(self, idx):\n        return {}\n\n\n"
           "class Noise(RandomCrops):\n{}\n\n"
           "def loaders(synthetic):\n    if synthetic:\n        train_set = Noise()\n        val_set = train_set\n"
           "    else:\n        train_set, val_set = RandomCrops(), {}\n"
           "    train_sampler = DistributedSampler(train_set)\n    val_sampler = DistributedSampler(val_set)\n"
           "    return (DataLoader(train_set, sampler=train_sampler), DataLoader(val_set, sampler=val_sampler))\n\n\n"
           "def main(model):\n    train, val = loaders(False)\n    for epoch in range(10):\n"
           "        for x in train:\n            model(x).sum().backward()\n"
           "        loss = sum(model(x).sum() for x in val)\n        dist.all_reduce(loss)\n")
    own = "    def __getitem__(self, index):\n        return torch.randn(3)"

    def found(item, noise=own, val="RandomCrops()"):
        text = src.format(item, noise, val)
        line = text[:text.index("DistributedSampler(train_set)")].count("\n") + 1
        return sorted((f.line - line, f.code) for f in ddp_doctor.check_source(text, "t.py")
                      if f.code in ("DDP002", "DDP018"))

    both = [(0, "DDP002"), (1, "DDP018")]
    assert found("torch.rand(3)") == []
    assert found("torch.rand(3) + idx") == both  # the index read
    assert found("self.load(idx)") == both  # the index passed on
    assert found("torch.rand(3)", own.replace("randn(3)", "randn(index)")) == both  # one class of the two reads it
    assert found("torch.rand(3)", "    pass") == both  # Noise inherits __getitem__: not judged
    assert found("torch.rand(3)", val="make_val_set()") == [(1, "DDP018")]  # a dataset the doctor cannot see


# dfix24b: DDP008 for a file of random-number states and a class nothing uses; DDP002 for a loader handed to a
# wrapper that sets the epoch, or to a class of the project's own package that the doctor cannot read


def test_a_file_of_random_number_states_holds_no_gpu_tensor():
    """DDP008: rng.pt holds (torch.cuda.get_rng_state(), torch.get_rng_state()), CPU tensors wherever the
    generator runs: its load needs no map_location, though the same run saves a model's state_dict beside it
    (through `with open(...) as f`, one `args` for both paths). A load of the model's file fires; so does the
    rng file's when it also holds a state_dict; and two paths built from one `args` are not one file."""
    src = ("import os\nimport random\nimport numpy as np\nimport torch\nimport torch.distributed as dist\n\n"
           "parser = make_parser()\nargs = parser.parse_args()\ndist.init_process_group('nccl')\n"
           "model = torch.nn.Linear(2, 2).cuda()\n"
           "if args.load:\n    rng = torch.load(os.path.join(os.path.dirname(args.load), 'rng.pt'))\n"
           "    torch.cuda.set_rng_state(rng[0])\n{}\n"
           "for epoch in range(10):\n    train(model)\n    if dist.get_rank() == 0:\n"
           "        with open(os.path.join(args.save, 'e%d.pt' % epoch), 'wb') as f:\n"
           "            torch.save(model.state_dict(), f)\n"
           "        with open(os.path.join(args.save, 'rng.pt'), 'wb') as f:\n            torch.save({}, f)\n"
           "torch.save(model.state_dict(), args.save)\n")

    def found(rng, more=""):
        text = src.format(more, rng)
        return [text.splitlines()[f.line - 1].strip() for f in ddp_doctor.check_source(text, "t.py")
                if f.code == "DDP008"]

    pair = "(torch.cuda.get_rng_state(), torch.get_rng_state())"
    assert found(pair) == []
    assert found("{'cuda': torch.cuda.get_rng_state_all(), 'np': np.random.get_state(), 'py': random.getstate()}") == []
    assert found("(torch.cuda.get_rng_state(), model.state_dict())") == [
        "rng = torch.load(os.path.join(os.path.dirname(args.load), 'rng.pt'))"]  # a state_dict in it
    assert found(pair, "    model.load_state_dict(torch.load(args.save))") == [
        "model.load_state_dict(torch.load(args.save))"]  # the model's own file
    assert found(pair, "    extra = torch.load(os.path.join(args.load, 'extra.pt'))") == []  # built from one args


def test_a_load_in_a_class_that_nothing_uses_is_not_reported():
    """egovlp's shape: BaseTrainer._resume_checkpoint loads without map_location, but the entry point builds
    DistTrainer, a class of its own with a load that maps: nothing refers to BaseTrainer (a class's own name in
    `class BaseTrainer:` is no reference), so its methods never run. Fires when a class is based on it, when the
    entry point builds it, or in a library file read alone (no entry point)."""
    src = ("import torch\nimport torch.distributed as dist\n\n\nclass BaseTrainer:\n"
           "    def __init__(self, model, resume):\n        self.model = model\n        self._resume(resume)\n\n"
           "    def _save(self, path):\n        torch.save({{'state_dict': self.model.state_dict()}}, path)\n\n"
           "    def _resume(self, path):\n        checkpoint = torch.load(path)\n"
           "        self.model.load_state_dict(checkpoint['state_dict'])\n\n\n"
           "class DistTrainer({}):\n    def __init__(self, model, resume, rank):\n        self.model = model\n"
           "        checkpoint = torch.load(resume, map_location=f'cuda:{{rank}}')\n"
           "        self.model.load_state_dict(checkpoint['state_dict'])\n\n\n"
           "def main(model, resume, rank):\n    dist.init_process_group('nccl')\n    {}\n{}")
    entry = "\n\nif __name__ == '__main__':\n    main(build(), 'last.pth', 0)\n"

    def found(base="", built="DistTrainer(model, resume, rank).train()", tail=entry):
        text = src.format(base, built, tail)
        return [text.splitlines()[f.line - 1].strip() for f in ddp_doctor.check_source(text, "t.py")
                if f.code == "DDP008"]

    load = ["checkpoint = torch.load(path)"]
    assert found() == []
    assert found(base="BaseTrainer") == load  # DistTrainer is a BaseTrainer
    assert found(built="BaseTrainer(model, resume).train()") == load
    assert found(built="trainers = {'base': BaseTrainer, 'dist': DistTrainer}") == load  # referred to
    assert found(tail="") == load  # a library file read alone keeps its findings


def test_a_loader_wrapped_by_a_class_that_sets_the_epoch_in_another_file(tmp_path):
    """DDP002 in a folder run: main.py wraps its loader in IterLoader from loaders.py, whose __next__ calls
    self._dataloader.sampler.set_epoch(...) at the end of each pass (LAVIS's, MiniGPT-4's): the epoch is set.
    Fires when the wrapper sets the epoch of something else (its dataset), and when the loader only goes to
    enumerate/tqdm."""
    main = ("import torch.distributed as dist\nfrom torch.utils.data import DataLoader, DistributedSampler\n"
            "from loaders import IterLoader\n\n\ndef main(dataset, model):\n    dist.init_process_group('gloo')\n"
            "    sampler = DistributedSampler(dataset)\n    loader = DataLoader(dataset, sampler=sampler)\n"
            "    loader = {}\n    for epoch in range(10):\n        for step in range(100):\n"
            "            model(next(loader)).backward()\n\n\nif __name__ == '__main__':\n    main(make(), net())\n")
    wrapper = ("class IterLoader:\n    def __init__(self, dataloader):\n        self._dataloader = dataloader\n"
               "        self._epoch = 0\n        self._iter = iter(dataloader)\n\n    def __next__(self):\n"
               "        try:\n            return next(self._iter)\n        except StopIteration:\n"
               "            self._epoch += 1\n            self._dataloader.{}.set_epoch(self._epoch)\n"
               "            self._iter = iter(self._dataloader)\n            return next(self._iter)\n")
    (tmp_path / "main.py").write_text(main.format("IterLoader(loader)"))
    (tmp_path / "loaders.py").write_text(wrapper.format("sampler"))
    assert findings_at(tmp_path) == []
    (tmp_path / "loaders.py").write_text(wrapper.format("dataset"))
    assert findings_at(tmp_path) == [("main.py", 8, "DDP002")]
    (tmp_path / "loaders.py").write_text(wrapper.format("sampler"))
    (tmp_path / "main.py").write_text(main.format("iter(enumerate(loader))"))
    assert findings_at(tmp_path) == [("main.py", 8, "DDP002")]


def test_a_loader_handed_to_a_class_of_the_projects_package_that_the_doctor_cannot_read(tmp_path):
    """DDP002: a loader that goes into a class imported from the project's own package (a relative import, or a
    top-level package that is a folder of the program) whose file the doctor does not hold: a name it cannot
    follow, silent. A class of a library outside the project, tqdm, or a class of the package that the doctor
    reads and that sets no epoch, keeps the finding."""
    src = ("import torch.distributed as dist\nfrom torch.utils.data import DataLoader, DistributedSampler\n{}\n\n\n"
           "def build(dataset):\n    sampler = DistributedSampler(dataset)\n"
           "    loader = DataLoader(dataset, sampler=sampler)\n    return {}\n\n\n"
           "def main(model):\n    dist.init_process_group('gloo')\n    loader = build(make())\n"
           "    for epoch in range(10):\n        for batch in loader:\n            model(batch).backward()\n\n\n"
           "if __name__ == '__main__':\n    main(net())\n")
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "common.py").write_text("class Other:\n    pass\n")

    def found(imports, wrapped):
        (tmp_path / "train.py").write_text(src.format(imports, wrapped))
        return findings_at(tmp_path)

    fires = [("train.py", 7, "DDP002")]
    assert found("from mypkg.datasets.dataloader_utils import IterLoader, PrefetchLoader",
                 "IterLoader(PrefetchLoader(loader))") == []
    assert found("from .dataloader_utils import IterLoader", "IterLoader(loader)") == []
    assert found("from prefetch_generator import BackgroundGenerator", "BackgroundGenerator(loader)") == fires
    assert found("from tqdm import tqdm", "tqdm(loader)") == fires
    assert found("from mypkg.common import Other", "Other(loader)") == fires  # read: it sets no epoch
    assert found("from mypkg.dataloader_utils import make_loader", "make_loader(loader)") == fires  # not a class


def test_a_class_nothing_uses_in_a_file_the_program_uses(tmp_path):
    """The unused class is judged only in a file the program visibly uses (another file imports a name it
    defines, or it runs something itself): base_trainer.py, whose DistTrainer main.py imports, leaves BaseTrainer
    unused (silent); when no file imports from base_trainer.py, it is a library read for a program the doctor
    does not see (a trainer whose user is not in the folder): BaseTrainer's load fires."""
    trainers = ("import torch\n\n\nclass BaseTrainer:\n    def __init__(self, model, resume):\n"
                "        self.model = model\n        self._resume(resume)\n\n    def _resume(self, path):\n"
                "        checkpoint = torch.load(path)\n"
                "        self.model.load_state_dict(checkpoint['state_dict'])\n\n"
                "    def _save(self, path):\n        torch.save({'state_dict': self.model.state_dict()}, path)\n\n\n"
                "class DistTrainer:\n    def __init__(self, model, resume, rank):\n"
                "        self.model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])\n"
                "        checkpoint = torch.load(resume, map_location=f'cuda:{rank}')\n"
                "        self.model.load_state_dict(checkpoint['state_dict'])\n")
    main = ("import torch.distributed as dist\n{}\n\n\ndef main(model):\n    dist.init_process_group('gloo')\n"
            "    {}(model, 'last.pth', dist.get_rank())\n\n\nif __name__ == '__main__':\n    main(build())\n")
    (tmp_path / "base_trainer.py").write_text(trainers)
    (tmp_path / "main.py").write_text(main.format("from base_trainer import DistTrainer", "DistTrainer"))
    assert [f for f in findings_at(tmp_path) if f[2] == "DDP008"] == []
    (tmp_path / "main.py").write_text(main.format("from trainers import Trainer", "Trainer"))
    assert [f for f in findings_at(tmp_path) if f[2] == "DDP008"] == [("base_trainer.py", 10, "DDP008")]
# dfix24a: errors and warnings for mistakes wrong on every launch the program allows; DDP001 / DDP026


def test_a_mistake_that_shows_only_on_some_launches_is_advice_unless_the_program_shows_such_a_launch():
    """DDP001 (a second node), DDP013 (another GPU list) and DDP018 (a set that does not divide by the world
    size) are advice; DDP026, DDP001's use in a program that shows several nodes, is an error."""
    levels = ddp_doctor.LEVELS
    assert levels["DDP001"] == levels["DDP013"] == levels["DDP018"] == "advice", levels
    assert levels["DDP026"] == "error" and list(levels)[-1] == "DDP026", levels
    assert "second node" in ddp_doctor.message("DDP001", "rank")
    explained = doctor("--explain", "DDP026").stdout
    for fact in ("NODE_RANK", "GROUP_RANK", "SLURM_NODEID", "SLURM_NNODES", "SLURM_JOB_NUM_NODES", "nnodes",
                 "num_nodes", "n_nodes", "node_rank", "node_id", "machine_rank", "num_machines", "-nr"):
        assert fact in explained, fact


@pytest.mark.parametrize("fact", [
    "node_rank = int(os.environ['NODE_RANK'])", "nodes = os.environ.get('SLURM_NNODES')",
    "n = os.getenv('SLURM_JOB_NUM_NODES', '1')", "group = os.environ['GROUP_RANK']",
    "parser.add_argument('--num-nodes', type=int)", "parser.add_argument('-nr', '--nr', type=int)",
    "world = args.nnodes * 8", "world = cfg.machine_rank", "def setup(rank, num_machines): pass",
    "print(args.nodes)"])
def test_each_node_fact_makes_the_global_rank_as_device_DDP026(fact):
    source = ("import os\nimport argparse\nimport torch\nimport torch.distributed as dist\n"
              "parser = argparse.ArgumentParser()\nargs = cfg = parser.parse_args()\n"
              f"{fact}\ntorch.cuda.set_device(dist.get_rank())\n")
    assert [(f.line, f.code) for f in ddp_doctor.check_source(source, "train.py")] == [(8, "DDP026")], fact


@pytest.mark.parametrize("not_a_fact", [
    "os.environ['NODE_RANK'] = '0'", "print('NODE_RANK')", "graph_nodes = len(g.nodes)", "print(args.node)",
    "# args.nnodes in a comment"])
def test_what_is_not_a_node_fact_leaves_DDP001(not_a_fact):
    source = ("import os\nimport torch\nimport torch.distributed as dist\n"
              f"{not_a_fact}\ntorch.cuda.set_device(dist.get_rank())\n")
    assert [(f.line, f.code) for f in ddp_doctor.check_source(source, "train.py")] == [(5, "DDP001")], not_a_fact


def test_a_folder_shows_that_it_runs_on_several_nodes(tmp_path):
    """DDP026 in a folder run: trainer.py uses the global rank as a device (DDP001's advice alone); launch.py
    reads --nnodes and NODE_RANK: the folder runs on several nodes, the same use is DDP026 (reported by
    default); single-node by construction silences both."""
    (tmp_path / "trainer.py").write_text(
        "import torch\nimport torch.distributed as dist\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
        "\n\ndef wrap(model):\n    return DDP(model, device_ids=[dist.get_rank()])\n")
    assert findings_at(tmp_path / "trainer.py") == []
    assert findings_at(tmp_path / "trainer.py", "--select", "ALL") == [("trainer.py", 7, "DDP001")]
    (tmp_path / "launch.py").write_text("# a comment that says --nnodes is not enough\nimport os\n")
    assert findings_at(tmp_path, "--select", "ALL") == [("trainer.py", 7, "DDP001")]
    (tmp_path / "launch.py").write_text(
        "import argparse\nimport os\n\nparser = argparse.ArgumentParser()\n"
        "parser.add_argument('--nnodes', type=int, default=1)\nnode = int(os.environ.get('NODE_RANK', 0))\n")
    assert findings_at(tmp_path) == [("trainer.py", 7, "DDP026")]
    assert findings_at(tmp_path, "--select", "ALL") == [("trainer.py", 7, "DDP026")]  # one of the two, never both
    (tmp_path / "spawn.py").write_text(
        "import os\n\nimport torch.multiprocessing as mp\n\nos.environ['MASTER_ADDR'] = 'localhost'\n"
        "mp.spawn(print, nprocs=2)\n")
    assert findings_at(tmp_path, "--select", "ALL") == []


def test_a_folder_that_sets_NODE_RANK_does_not_read_it(tmp_path):
    """The folder's text is read as the file's tree is: os.environ["NODE_RANK"] = "0" names no launch on
    several nodes; reading it does."""
    (tmp_path / "trainer.py").write_text("import torch\nimport torch.distributed as dist\n\n\n"
                                         "def setup():\n    torch.cuda.set_device(dist.get_rank())\n")
    (tmp_path / "env.py").write_text("import os\n\nos.environ['NODE_RANK'] = '0'\n")
    assert findings_at(tmp_path, "--select", "ALL") == [("trainer.py", 6, "DDP001")]
    (tmp_path / "env.py").write_text("import os\n\nnode = os.environ['NODE_RANK']\n")
    assert findings_at(tmp_path, "--select", "ALL") == [("trainer.py", 6, "DDP026")]


# dfix24c: DDP013 (advice) reports a GPU list from an option's default again, as in the source post


def test_DDP013_reports_a_gpu_list_from_an_option_and_is_silent_where_it_cannot_read_one():
    def found(line, option="parser.add_argument('--gpu_id', type=str, default='0,2')"):
        source = f"import os\nimport argparse\nparser = argparse.ArgumentParser()\n{option}\nargs = config = " \
                 f"parser.parse_args()\n{line}\n"
        return [(f.line, f.code) for f in ddp_doctor.check_source(source, "train.py")]
    for option in ("args.gpu_id", "config.gpu_id"):
        assert found(f"os.environ['CUDA_VISIBLE_DEVICES'] = {option}") == [(6, "DDP013")], option
        assert found(f"os.environ.setdefault('CUDA_VISIBLE_DEVICES', {option})") == [(6, "DDP013")], option
        assert found(f"os.environ.update(CUDA_VISIBLE_DEVICES={option})") == [(6, "DDP013")], option
    assert found("os.environ['CUDA_VISIBLE_DEVICES'] = args.gpu", "parser.add_argument('--gpu', dest='gpu', "
                 "default='1')") == [(6, "DDP013")]
    assert found("os.environ['CUDA_VISIBLE_DEVICES'] = '0,1'") == [(6, "DDP013")]
    for silent in ("parser.add_argument('--gpu_id', type=str)", "parser.add_argument('--gpu_id', default='-1')",
                   "parser.add_argument('--gpu_id', default='')"):
        assert found("os.environ['CUDA_VISIBLE_DEVICES'] = args.gpu_id", silent) == [], silent
    for unread in ("str(cfg.gpus)", "cfg['gpus']", "','.join(cfg.gpus)", "str(args.rank % 8)"):
        assert found(f"os.environ['CUDA_VISIBLE_DEVICES'] = {unread}") == [], unread
    spawn = "os.environ['CUDA_VISIBLE_DEVICES'] = args.gpu_id\nimport torch.multiprocessing as mp\nmp.spawn(print)"
    assert found(spawn) == []  # set before the script starts its workers itself: the person chose them
    assert ddp_doctor.LEVELS["DDP013"] == "advice"
    explained = doctor("--explain", "DDP013").stdout
    assert "argparse default" in explained and "--gpu_id" in explained and "Level: advice" in explained, explained
