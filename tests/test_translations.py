"""The Chinese editions (tools/translations.py): never out of date, terms held, zh-Hans derived, and run.

Fast: everything but the last test works on temporary copies of notebooks/ and translations/ and runs no
lesson. The last one runs the zh-Hant edition of lesson 00 live under papermill, as a learner would.
"""

import json
import re
import shutil
import subprocess
import sys

import nbformat
import pytest
import series
from conftest import NOTEBOOKS, REPO

import translations

LESSON = "06_ddp_equals_large_batch"
CELL = "06-00"  # the title cell of LESSON: code spans, links, and the term "gradient"


def test_check_passes_on_the_repository():
    problems = translations.check()
    # one line per problem, the first one shown in pytest's short summary
    assert not problems, "\n".join(problems) + f"\n({len(problems)} problem(s) in the Chinese editions)"
    assert translations.translated_lessons(), "no lesson has a catalog"


@pytest.fixture
def copy(tmp_path, monkeypatch):
    """notebooks/ (English lessons), translations/ and tools/translations.py copied under tmp_path, and the
    module pointed at the copies."""
    (tmp_path / "notebooks").mkdir()
    for notebook in translations.lesson_notebooks():
        shutil.copy(notebook, tmp_path / "notebooks")
    shutil.copytree(REPO / "translations", tmp_path / "translations")
    (tmp_path / "tools").mkdir()
    shutil.copy(REPO / "tools" / "translations.py", tmp_path / "tools")
    for name, value in [("ROOT", tmp_path), ("NOTEBOOKS", tmp_path / "notebooks"),
                        ("TRANSLATIONS", tmp_path / "translations"),
                        ("CATALOGS", tmp_path / "translations" / "zh-Hant"),
                        ("TERMS", tmp_path / "translations" / "terms.tsv"),
                        ("T2S_REVIEWED", tmp_path / "translations" / "t2s_reviewed.tsv"),
                        ("INDEX_CATALOG", tmp_path / "translations" / "zh-Hant" / "index.po")]:
        monkeypatch.setattr(translations, name, value)
    translations.linked_anchors.cache_clear()
    yield tmp_path
    translations.linked_anchors.cache_clear()


def edit_english(root, cell_id, change):
    path = root / "notebooks" / f"{LESSON}.ipynb"
    nb = json.loads(path.read_text())
    cells = nb["cells"]
    for i, cell in enumerate(cells):
        if cell.get("id") == cell_id:
            result = change(cells, i)
            break
    else:
        raise AssertionError(f"no cell {cell_id}")
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return result


def edit_translation(root, cell_id, change):
    path = root / "translations" / "zh-Hant" / f"{LESSON}.po"
    catalog = translations.load(path)
    entry = next(e for e in catalog if e.msgctxt == cell_id)
    entry.msgstr = change(entry.msgstr)
    catalog.save(str(path))
    return entry


def cli(root, *args):
    return subprocess.run([sys.executable, str(root / "tools" / "translations.py"), *args], cwd=root,
                          capture_output=True, text=True, timeout=120)


def test_an_english_edit_without_its_translation_fails_in_one_line(copy):
    def append(cells, i):
        cells[i]["source"][-1] += " One more English sentence."
    edit_english(copy, CELL, append)
    problems = translations.check()
    assert len(problems) == 1, problems
    line = problems[0]
    assert "\n" not in line
    assert line.startswith(f"{LESSON} cell {CELL}: stale"), line
    assert "python tools/translations.py update 06" in line, line
    # the command line says the same and fails
    result = cli(copy, "check")
    assert result.returncode == 1, result
    assert result.stdout.strip() == line, result.stdout


def test_update_merges_like_msgmerge(copy):
    old = {e.msgctxt: e for e in translations.load(copy / "translations" / "zh-Hant" / f"{LESSON}.po")}
    ids = [cell_id for cell_id, _ in translations.markdown_cells(copy / "notebooks" / f"{LESSON}.ipynb")]
    changed, removed = ids[1], ids[2]

    def change(cells, i):
        cells[i]["source"][-1] += " (changed)"
    edit_english(copy, changed, change)

    def remove(cells, i):
        del cells[i]
    edit_english(copy, removed, remove)

    def add(cells, i):
        cells.insert(i, nbformat.v4.new_markdown_cell("A new paragraph.", id="brand-new-cell"))
    edit_english(copy, ids[3], add)

    result = cli(copy, "update", "06")
    assert result.returncode == 0, result.stderr
    merged = {e.msgctxt: e for e in translations.load(copy / "translations" / "zh-Hant" / f"{LESSON}.po")}
    assert "fuzzy" in merged[changed].flags
    assert merged[changed].previous_msgid == old[changed].msgid  # the old English, for the translator's diff
    assert merged[changed].msgstr == old[changed].msgstr  # the old translation is the starting point
    assert merged[changed].msgid.endswith(" (changed)")
    assert merged[removed].obsolete and merged[removed].msgstr == old[removed].msgstr
    assert merged["brand-new-cell"].msgstr == "" and not merged["brand-new-cell"].obsolete
    unchanged = ids[4]
    assert merged[unchanged].msgstr == old[unchanged].msgstr and not merged[unchanged].flags

    problems = translations.check(["06"])
    assert any(p.startswith(f"{LESSON} cell {changed}: fuzzy") for p in problems), problems
    assert any(p.startswith(f"{LESSON} cell brand-new-cell: untranslated") for p in problems), problems
    assert not any(f"cell {removed}:" in p for p in problems), problems  # obsolete is not a problem
    assert all("python tools/translations.py update 06" in p for p in problems), problems
    assert len(problems) == 2, problems


def test_a_lost_code_span_is_reported(copy):
    english = dict(translations.markdown_cells(copy / "notebooks" / f"{LESSON}.ipynb"))[CELL]
    span = re.search(r"`[^`\n]+`", english).group(0)
    edit_translation(copy, CELL, lambda text: text.replace(span, span.strip("`")))
    problems = translations.check(["06"])
    assert problems and all(f"{LESSON} cell {CELL}: code span {span!r} lost" in p for p in problems), problems


def test_a_term_violation_is_reported(copy):
    english = dict(translations.markdown_cells(copy / "notebooks" / f"{LESSON}.ipynb"))[CELL]
    assert translations.uses_term(translations.prose_of(english), "gradient")
    edit_translation(copy, CELL, lambda text: text.replace("梯度", "斜率"))
    problems = translations.check(["06"])
    assert any(f"{LESSON} cell {CELL}: the English says 'gradient'" in p and "'梯度'" in p for p in problems), \
        problems


def test_term_rule_ignores_code_and_environment_variables():
    prose = translations.prose_of("Set `world_size` and read WORLD_SIZE, see [x](02_ranks.ipynb#world_size).")
    assert not translations.uses_term(prose, "world_size")
    assert translations.uses_term(translations.prose_of("the world_size of the job"), "world_size")
    assert translations.uses_term("Each Node runs", "node") and not translations.uses_term("two nodes", "node")


def test_t2s_phrase_conversions_are_reported_unless_reviewed(copy):
    edit_translation(copy, CELL, lambda text: text + "\n\n它等於單進程的結果，反覆驗證。")
    problems = translations.check(["06"])
    assert len(problems) == 1 and "OpenCC t2s turns '於單' into '於单', not '于单'" in problems[0], problems
    assert ("反覆", "反复") in translations.reviewed_t2s()  # reviewed: not reported


def test_zh_hans_is_t2s_of_the_prose_only():
    text = ('進程組的`數據`與 <span lang="zh-Hant">原帖的話</span>，見[術語表](02_ranks.ipynb#Glossary-術語表)。\n\n'
            '```python\nprint("訓練")\n```\n<img alt="圖" src="figures/x.svg">')
    hans = translations.to_hans(text)
    assert hans.startswith("进程组的`數據`与 ")
    assert '<span lang="zh-Hant">原帖的話</span>' in hans  # the post's own words, in its own script
    assert "[术语表](02_ranks.ipynb#Glossary-術語表)" in hans  # link target kept, link text converted
    assert 'print("訓練")' in hans and '<img alt="圖" src="figures/x.svg">' in hans


def test_index_catalog_is_checked(copy):
    catalog = translations.load(translations.INDEX_CATALOG)
    catalog.remove(next(e for e in catalog if e.msgctxt == "column-lesson"))
    catalog.save(str(translations.INDEX_CATALOG))
    problems = translations.check()
    assert problems == ["index column-lesson: untranslated: run python tools/translations.py update, then "
                        "translate it in translations/zh-Hant/index.po"], problems


def test_generated_notebooks_keep_the_code_and_link_to_chinese_lessons(copy):
    folder = copy / "notebooks"
    written = translations.write_notebooks(folder=folder)
    assert {p.name for p in written} >= {f"{LESSON}.zh-Hant.ipynb", f"{LESSON}.zh-Hans.ipynb"}
    english = nbformat.read(folder / f"{LESSON}.ipynb", as_version=4)
    for edition in translations.EDITIONS:
        zh = nbformat.read(folder / f"{LESSON}.{edition}.ipynb", as_version=4)
        assert [c.source for c in zh.cells if c.cell_type != "markdown"] == \
               [c.source for c in english.cells if c.cell_type != "markdown"]  # code stays English, byte for byte
        markdown = "\n".join(c.source for c in zh.cells if c.cell_type == "markdown")
        assert f"(05_rank_aware.{edition}.ipynb)" in markdown and "(05_rank_aware.ipynb)" not in markdown
        assert f"(02_ranks.{edition}.ipynb#Glossary-術語表)" in markdown
        assert zh.metadata["ddp_series"]["edition"] == edition
    glossary = nbformat.read(folder / "02_ranks.zh-Hans.ipynb", as_version=4)
    anchors = set().union(*(translations.anchors_in(c.source) for c in glossary.cells if c.cell_type == "markdown"))
    assert "Glossary-術語表" in anchors  # the zh-Hans heading (术语表) keeps the id every lesson links to
    # nothing takes them for lessons
    assert all(".zh-" not in p.name for p in translations.lesson_notebooks())
    assert not any(series.LESSON_NAME.match(p.name) for p in written)


def test_an_untranslated_cell_stops_the_chinese_notebook(copy):
    def add(cells, i):
        cells.insert(i, nbformat.v4.new_markdown_cell("Untranslated.", id="not-yet"))
    edit_english(copy, CELL, add)
    with pytest.raises(ValueError, match=f"{LESSON} cell not-yet: no translation"):
        translations.edition_notebook(copy / "notebooks" / f"{LESSON}.ipynb", "zh-Hant")
    result = cli(copy, "notebooks")  # the other lessons are written; this one is named and left out
    assert result.returncode == 0 and f"{LESSON} cell not-yet: no translation" in result.stderr, result.stderr
    assert not (copy / "notebooks" / f"{LESSON}.zh-Hant.ipynb").exists()
    assert (copy / "notebooks" / "05_rank_aware.zh-Hant.ipynb").exists()


def test_chinese_handouts_are_exported_from_the_english_execution(tmp_path):
    """Lesson 00's Chinese pages from an 'execution' (the lesson itself stands in: no kernel runs here):
    language bars that resolve, links to the Chinese lessons, the vendor folder one level up, CJK fonts."""
    out = tmp_path / "build"
    (out / "executed").mkdir(parents=True)
    lesson = NOTEBOOKS / "00_setup.ipynb"
    shutil.copy(lesson, out / "executed" / lesson.name)
    handouts = out / "handouts"
    series._vendor_urls[str(handouts)] = {"require_js_url": "vendor/requirejs/require.js"}  # no npm here
    series.export_html(out / "executed" / lesson.name, handouts / "00_setup.html")
    seconds = series.export_editions(lesson, out)
    assert seconds is not None and series.export_editions(lesson, out) is None  # up to date: nothing redone
    for edition in series.EDITIONS:
        page = handouts / ("" if edition == "en" else edition) / "00_setup.html"
        body = page.read_text()
        bar = re.search(r'<nav class="ddp-languages".*?</nav>', body, re.S).group(0)
        targets = re.findall(r'href="([^"#]+)"', bar)
        assert len(targets) == 3, bar  # the two other editions and the index
        for target in targets:
            if not target.endswith("index.html"):
                assert (page.parent / target).resolve().exists(), f"{page}: {target}"
        if edition != "en":
            assert f'<html lang="{edition}">' in body and "WenQuanYi Zen Hei" in body
            assert 'src="../vendor/requirejs/require.js"' in body
            assert 'href="01_single_device.html"' in body  # this edition's lesson 01
            assert "中文版" in body  # lesson 00 says, once, that code and output stay English
            assert "Find out what this machine has" not in body
    hans = (handouts / "zh-Hans" / "00_setup.html").read_text()
    assert "这台机器" in hans and "這臺機器" in (handouts / "zh-Hant" / "00_setup.html").read_text()


@pytest.mark.timeout(600)
def test_a_chinese_lesson_runs_live_under_papermill(tmp_path):
    """The zh-Hant lesson 00, generated as `make lab EDITION=zh-Hant` does, executed cell by cell beside the
    English (same %%writefile targets, same runs/), under papermill."""
    workdir = series.make_sandbox(tmp_path / "sandbox")
    lesson = NOTEBOOKS / "00_setup.ipynb"
    notebook = workdir / "00_setup.zh-Hant.ipynb"
    nbformat.write(translations.edition_notebook(lesson, "zh-Hant"), notebook)
    executed = tmp_path / "executed.ipynb"
    series.run_papermill(notebook, executed, {}, workdir, "00_setup.zh-Hant")
    ran = nbformat.read(executed, as_version=4)
    code = [c for c in ran.cells if c.cell_type == "code" and "injected-parameters" not in c.metadata.get("tags", [])]
    assert all(c.execution_count for c in code), "every code cell ran"
    assert not any(o.get("output_type") == "error" for c in code for o in c.outputs)
    assert ran.cells[0].source.startswith("# 00 · 環境準備")
    # the same %%writefile target and runs/ as the English lesson: the script written equals the committed one
    script = "00_hello_ranks.py"
    assert (workdir.parent / "ddp_scripts" / script).read_text() == (REPO / "ddp_scripts" / script).read_text()
    assert (workdir / "runs" / "00" / "hello.json").exists()
