"""Copies that cannot drift. Each script in ddp_scripts/ can be copied alone, so the helpers they share
(the argument types, the data, the model, the device policy, joining the group, one epoch, the clean
exit) are repeated in every script that needs them, on purpose. This test holds every copy equal to the
reference copy, source text and comments included, except where a script differs on purpose: those
differences are listed below with their reason, and a listed difference that has disappeared fails too.

Edit a shared helper in every script that has it (then `python tools/sync_scripts.py`), or add the
script to DIFFERENT_ON_PURPOSE with the reason.
"""

import ast
import difflib
import json
import textwrap

import pytest
from conftest import NOTEBOOKS, SCRIPTS
from sync_scripts import writefile_cells

# The shared helpers. The reference copy is 04_ddp_train.py's in the scripts that join a process group,
# 01_single_device.py's in the single-process ones (their epoch has nothing to reduce across ranks).
SHARED = {name: "04_ddp_train.py" for name in (
    "positive_int", "non_negative_int", "class_count", "positive_float", "writable_file",
    "make_datasets", "Model", "choose_device", "setup_distributed", "stop_if_not_finite",
    "sum_over_ranks", "train_one_epoch", "evaluate", "clean_exit")}
SHARED.update(exit_with_error="05_rank_aware.py", why_unreadable="05_rank_aware.py")  # checkpoint readers: 05, 08
SHARED.update(writable_folder="08_elastic_train.py", gather_from_every_rank="05_rank_aware.py", sync="07_ddp_perf.py",
              slowest="07_ddp_perf.py")
SHARED.update({name: "13_zero_fsdp.py" for name in ("DeepMLP", "make_vectors", "batches")})  # lesson 13's two scripts

# (script, helper): why this copy differs from the reference.
DIFFERENT_ON_PURPOSE = {
    ("05_rank_aware.py", "make_datasets"): "a --val-size of its own: exact evaluation needs a validation set that "
                                           "N ranks do not divide evenly (101)",
    ("06_ddp_equals_large_batch.py", "Model"): "batch_norm= and dropout= options, for lesson 06's negative controls",
    ("08_elastic_train.py", "setup_distributed"): "restart-safe: a PrefixStore per attempt on torchrun's shared store "
                                                 "(pytorch/pytorch#135712), taught in lesson 08",
}

SCRIPT_NAMES = sorted(p.name for p in SCRIPTS.glob("*.py"))


def is_distributed(script):
    return "init_process_group(" in (SCRIPTS / script).read_text()


def reference(script, name):
    return SHARED[name] if is_distributed(script) else "01_single_device.py"


def definitions(script):
    """{top-level function or class name: its source text}."""
    text = (SCRIPTS / script).read_text()
    tree = ast.parse(text)
    return {node.name: textwrap.dedent(ast.get_source_segment(text, node, padded=True))
            for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}


COPIES = [(script, name) for script in SCRIPT_NAMES for name in definitions(script)
          if name in SHARED and script != reference(script, name)]


def test_every_listed_difference_names_a_real_copy():
    for script, name in DIFFERENT_ON_PURPOSE:
        assert (script, name) in COPIES, f"{script} has no {name}(): remove it from DIFFERENT_ON_PURPOSE"


@pytest.mark.parametrize("script,name", COPIES, ids=[f"{s}:{n}" for s, n in COPIES])
def test_shared_helper_equals_the_reference(script, name):
    reference_script = reference(script, name)
    ours, theirs = definitions(script)[name], definitions(reference_script)[name]
    if (script, name) in DIFFERENT_ON_PURPOSE:
        assert ours != theirs, (f"{script}'s {name}() now equals {reference_script}'s: "
                                f"remove ({script!r}, {name!r}) from DIFFERENT_ON_PURPOSE")
        return
    diff = "".join(difflib.unified_diff(theirs.splitlines(True), ours.splitlines(True),
                                        f"{reference_script}:{name}", f"{script}:{name}"))
    assert ours == theirs, (f"{script}'s copy of {name}() has drifted from {reference_script}'s. Change every copy "
                            f"(or list it in DIFFERENT_ON_PURPOSE with the reason):\n{diff}")


def writing_lessons():
    """{script name: the lessons whose %%writefile cells write it}."""
    found = {}
    for notebook in sorted(p for p in NOTEBOOKS.glob("*.ipynb") if ".zh-" not in p.name):  # not the Chinese editions
        for _, _, _, target, _ in writefile_cells(json.loads(notebook.read_text())):
            found.setdefault(target.rsplit("/", 1)[-1], set()).add(notebook.name)
    return found


@pytest.mark.parametrize("script", sorted(p.name for p in SCRIPTS.iterdir() if p.is_file()))
def test_script_says_which_lesson_writes_it(script):
    lessons = writing_lessons().get(script)
    assert lessons and len(lessons) == 1, f"{script} must be written by exactly one lesson, found {lessons}"
    line = f"Written by notebooks/{lessons.pop()} — edit it there."
    text = (SCRIPTS / script).read_text()
    if script.endswith(".py"):
        docstring = ast.get_docstring(ast.parse(text), clean=True)
        assert docstring.rstrip().split("\n\n")[-1] == line, f"{script}'s docstring must end with: {line}"
    else:
        assert f"# {line}" in text.splitlines(), f"{script} must say: # {line}"


def test_every_distributed_script_ends_with_the_clean_exit():
    """main() of every script that joins a process group ends by calling clean_exit()."""
    for script in SCRIPT_NAMES:
        if not is_distributed(script):
            continue
        helpers = definitions(script)
        main = next(n for n in ast.parse((SCRIPTS / script).read_text()).body
                    if isinstance(n, ast.FunctionDef) and n.name == "main")
        last = main.body[-1]
        assert "clean_exit" in helpers and isinstance(last, ast.Expr) and ast.unparse(last) == "clean_exit()", \
            f"{script}: main() must end with clean_exit()"
