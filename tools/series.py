"""The series runner: execute the lessons with papermill, export offline HTML handouts, index them.

    python tools/series.py build [-p NAME=VALUE ...] [--force] [--only 04] [--out build]
    python tools/series.py time-editions [--out build] [--repeat 3]   # what the Chinese export costs

For each notebooks/NN_slug.ipynb, in reading order:
  1. execute it with papermill in a fresh sandbox (build/sandbox/NN_slug/notebooks as the working
     directory, with a copy of ddp_scripts/ beside it), so lessons never touch the checkout and
     two lessons can run at the same time;
  2. write build/executed/NN_slug.ipynb (kept, partially executed, when a cell fails);
  3. export build/handouts/NN_slug.html with nbconvert's lab template, the widget renderer,
     require.js and MathJax served from build/handouts/vendor/ (fetched from the npm registry);
  4. write build/handouts/index.html: titles, summaries, run times, torch, backend, devices;
  5. for a lesson with a Chinese catalog (translations/zh-Hant/NN_slug.po), export
     build/handouts/zh-Hant/NN_slug.html and zh-Hans/NN_slug.html from the same execution with the
     translated markdown merged in (export time only, never a second execution), and an index for each.
     Every page has a language bar linking the same lesson in the three editions.

A lesson is executed again only when what it runs changes: its code cells (and the tags papermill acts
on), the parameters it receives, the torch version, ddp_scripts/, notebooks/figures/, notebooks/*.py and
this file. A lesson whose prose alone changed is not executed again: its new markdown is merged into the
cached execution and exported. --force re-executes.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import datetime
import fcntl
import hashlib
import html
import importlib.metadata
import json
import math
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import translations  # noqa: E402  (tools/translations.py: the Chinese editions)

NOTEBOOKS = REPO / "notebooks"
SCRIPTS = REPO / "ddp_scripts"
FIGURES = NOTEBOOKS / "figures"
LESSON_NAME = re.compile(r"^(\d\d)_[a-z0-9_]+\.ipynb$")

# npm packages copied into build/handouts/vendor/ so that handouts load nothing from a CDN.
VENDOR_PACKAGES = {
    "html-manager": "@jupyter-widgets/html-manager@1",
    "requirejs": "requirejs@2",
    "mathjax": "mathjax@2",
}
# The part of MathJax 2 that the lab template's "TeX-AMS_CHTML-full" configuration loads.
MATHJAX_PARTS = ["MathJax.js", "config", "extensions", "jax/input/TeX", "jax/output/CommonHTML",
                 "jax/element", "fonts/HTML-CSS/TeX/woff", "localization/en"]


class UsageError(Exception):
    """A bad command-line value: reported on one line, exit code 2."""


def lessons(only: list[str] | None = None) -> list[Path]:
    """The lesson notebooks in reading order, optionally only those whose name starts with one of `only`."""
    found = sorted(p for p in NOTEBOOKS.glob("*.ipynb") if LESSON_NAME.match(p.name))
    if only:
        found = [p for p in found if any(p.name.startswith(o) for o in only)]
        if not found:
            raise UsageError(f"no lesson matches --only {' '.join(only)}")
    return found


def title_and_summary(nb_path: Path) -> tuple[str, str]:
    """The '# NN · Title' heading of the first cell and the first paragraph after it."""
    first = json.loads(nb_path.read_text())["cells"][0]
    return title_and_summary_of("".join(first["source"]))


def title_and_summary_of(text: str) -> tuple[str, str]:
    """The '# NN · Title' heading of a first cell's text and the first paragraph after it, plain."""
    heading, _, rest = text.strip().partition("\n")
    paragraph = rest.strip().split("\n\n")[0]
    plain = re.sub(r"\*\*?|`|\[([^\]]*)\]\([^)]*\)", r"\1", paragraph).replace("\n", " ")
    heading = re.sub(r"<[^>]+>", "", heading)  # an anchor kept for links (<a id=…>)
    return heading.lstrip("# ").strip(), plain


def declared_parameters(nb_path: Path) -> dict[str, object]:
    """Names and default values in the cell tagged `parameters`, as papermill reads them."""
    import papermill

    return {name: ast.literal_eval(p["default"]) for name, p in papermill.inspect_notebook(str(nb_path)).items()}


def parse_overrides(pairs: list[str]) -> dict[str, object]:
    """['nproc_per_node=4', 'note=hi'] -> {'nproc_per_node': 4, 'note': 'hi'}."""
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.isidentifier():
            raise UsageError(f"parameter must look like NAME=VALUE, got {pair!r}")
        try:
            out[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[name] = value
    return out


# Parameters that count or measure something: a value below 1 (or 0 for lr) can only break a lesson.
AT_LEAST_ONE = {"nproc_per_node", "epochs", "batch_size", "dataset_size", "val_size", "timeout_s",
                "launch_timeout_s", "hang_timeout_s", "replicas", "bench_steps", "bench_batch_size"}


def check_value(lesson: str, name: str, default: object, value: object) -> None:
    """A value of the default's type (a whole number for an int, True/False for a bool), in range."""
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise UsageError(f"{lesson}: parameter {name} must be True or False, got {value!r}")
    elif isinstance(default, int):
        if not isinstance(value, int) or isinstance(value, bool):
            raise UsageError(f"{lesson}: parameter {name} must be a whole number, got {value!r}")
    elif isinstance(default, float):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise UsageError(f"{lesson}: parameter {name} must be a finite number, got {value!r}")
    if name in AT_LEAST_ONE and value < 1 or name == "lr" and value <= 0:
        raise UsageError(f"{lesson}: parameter {name} must be {'positive' if name == 'lr' else 'at least 1'}, "
                         f"got {value!r}")


def parameters_for(nb_path: Path, overrides: dict[str, object]) -> dict[str, object]:
    """The overrides this lesson declares, type-checked against its defaults."""
    declared = declared_parameters(nb_path)
    chosen = {}
    for name, value in overrides.items():
        if name in declared:
            check_value(nb_path.name, name, declared[name], value)
            chosen[name] = value
    return chosen


# Cell tags that change what papermill runs (the rest, e.g. remove-input, only change the handout).
EXECUTION_TAGS = {"parameters", "raises-exception", "skip-execution"}


def code_of(nb_path: Path) -> list[tuple[str, list[str]]]:
    """What executing a lesson depends on in the notebook itself: each code cell's source and execution tags."""
    return [("".join(cell["source"]), sorted(EXECUTION_TAGS & set(cell.get("metadata", {}).get("tags", []))))
            for cell in json.loads(nb_path.read_text())["cells"] if cell["cell_type"] == "code"]


def source_hash(nb_path: Path) -> str:
    """The whole notebook: any edit, prose included, changes it."""
    return hashlib.sha256(nb_path.read_bytes()).hexdigest()


def cache_key(nb_path: Path, params: dict[str, object]) -> str:
    """Changes when executing the lesson could give a different result; not when only its prose changed."""
    digest = hashlib.sha256()
    digest.update(json.dumps(code_of(nb_path)).encode())
    digest.update(json.dumps(params, sort_keys=True).encode())
    digest.update(importlib.metadata.version("torch").encode())
    tools = REPO / "tools"
    tool_files = [f for tool in SANDBOX_TOOLS for f in sorted((tools / tool).rglob("*")) or [tools / tool]]
    for path in [Path(__file__), *sorted(SCRIPTS.glob("*")), *sorted(FIGURES.glob("*")),
                 *sorted(NOTEBOOKS.glob("*.py")), *tool_files]:  # a tool package's files too (14: the doctor)
        if path.is_file() and "__pycache__" not in path.parts:
            name = path.relative_to(tools) if path.is_relative_to(tools) else path.name
            digest.update(str(name).encode() + path.read_bytes())
    return digest.hexdigest()


@contextlib.contextmanager
def locked(lock_path: Path):
    """Serialise work on one lesson between processes (parallel tests, two builds)."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


_machine: dict[str, object] = {}


def machine() -> dict[str, object]:
    """Torch version, backend and device count of this environment (computed once, when needed)."""
    if not _machine:
        import torch
        cuda = torch.cuda.is_available()
        _machine.update(torch=torch.__version__, backend="nccl" if cuda else "gloo",
                        devices=f"{torch.cuda.device_count()} × CUDA" if cuda else "CPU only")
    return _machine


CELL_TIMEOUT_S = 600  # a lesson cell that runs longer than this has hung
SANDBOX_TOOLS = ["slurm_cluster.py", "ddp_doctor.py", "ddp_doctor"]  # lesson 10: a SLURM cluster; 14: the doctor


def make_sandbox(root: Path) -> Path:
    """notebooks/ with a copy of ddp_scripts/ beside it, under root, so that a lesson's %%writefile cells
    never touch the checkout. Returns the lesson's working directory (root/notebooks)."""
    (root / "notebooks").mkdir(parents=True)
    shutil.copytree(SCRIPTS, root / "ddp_scripts")
    if FIGURES.exists():
        shutil.copytree(FIGURES, root / "notebooks" / "figures")
    for helper in NOTEBOOKS.glob("*.py"):  # small helper modules a lesson imports
        shutil.copy(helper, root / "notebooks")
    (root / "tools").mkdir()
    for tool in SANDBOX_TOOLS:  # tools a lesson runs, at the same relative path as in a checkout
        if (REPO / "tools" / tool).is_dir():  # a package (the doctor's)
            shutil.copytree(REPO / "tools" / tool, root / "tools" / tool, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(REPO / "tools" / tool, root / "tools")
    return root / "notebooks"


@contextlib.contextmanager
def ipc_kernel():
    """A traitlets config that runs the kernel over local IPC sockets (in a private temporary folder)
    rather than TCP on localhost, as ipykernel's "running over TCP without encryption" warning asks."""
    from traitlets.config import Config

    with tempfile.TemporaryDirectory(prefix="kernel-") as sockets:
        config = Config()
        config.KernelManager.transport = "ipc"
        config.KernelManager.ip = str(Path(sockets) / "ipc")  # socket files ipc-1 … ipc-5, removed afterwards
        yield config


def run_papermill(nb_path: Path, executed: Path, params: dict[str, object], workdir: Path, desc: str) -> None:
    """papermill as the series runs it: in workdir, saved after every cell, over IPC, each cell bounded."""
    import papermill

    with ipc_kernel() as config:
        papermill.execute_notebook(
            str(nb_path), str(executed), parameters=params, cwd=str(workdir), kernel_name="python3",
            progress_bar={"desc": f"  {desc}", "unit": "cell"}, request_save_on_cell_execute=True,
            execution_timeout=CELL_TIMEOUT_S, config=config)


def merge_prose(nb_path: Path, executed: Path) -> None:
    """Put the lesson's current cells into its cached execution, keeping the executed code cells' outputs.

    Only called when the code cells are unchanged (same cache key), so the i-th code cell of the lesson is
    the i-th executed code cell, not counting the cell papermill injected after `parameters`.
    """
    import nbformat

    lesson = nbformat.read(nb_path, as_version=4)
    ran = nbformat.read(executed, as_version=4)
    injected = [c for c in ran.cells if "injected-parameters" in c.metadata.get("tags", [])]
    ran_code = iter(c for c in ran.cells if c.cell_type == "code" and c not in injected)
    cells = []
    for cell in lesson.cells:
        if cell.cell_type == "code":
            done = next(ran_code)
            assert done.source == cell.source, "merge_prose needs unchanged code cells"
            cell.outputs, cell.execution_count = done.outputs, done.execution_count
            kept = {k: v for k, v in done.metadata.items() if k in ("papermill", "execution")}  # timings
            cell.metadata = nbformat.from_dict({**cell.metadata, **kept})
        cells.append(cell)
        if "parameters" in cell.metadata.get("tags", []):
            cells.extend(injected)
    ran.cells = cells
    nbformat.write(ran, executed)


def execute(nb_path: Path, out: Path, params: dict[str, object], force: bool = False) -> dict:
    """Execute one lesson (unless cached) and export its handout. Returns its record.

    record["cached"]: nothing was done; record["merged"]: only the prose changed, so it was merged into
    the cached execution and exported again, without running a cell.
    """
    stem = nb_path.stem
    executed = out / "executed" / f"{stem}.ipynb"
    record_path = out / "executed" / f"{stem}.json"
    handout = out / "handouts" / f"{stem}.html"
    key, notebook_hash = cache_key(nb_path, params), source_hash(nb_path)
    with locked(out / "locks" / f"{stem}.lock"):
        if not force and record_path.exists() and handout.exists() and executed.exists():
            record = json.loads(record_path.read_text())
            if record.get("key") == key and record.get("ok"):
                if record.get("source_hash") == notebook_hash:
                    return {**record, "cached": True, "merged": False}
                started = time.perf_counter()
                merge_prose(nb_path, executed)
                export_html(executed, handout)
                title, summary = title_and_summary(nb_path)  # the index shows the new title and summary
                record.update(title=title, summary=summary, source_hash=notebook_hash)
                record_path.write_text(json.dumps(record, indent=1))
                return {**record, "cached": False, "merged": True,
                        "merge_seconds": round(time.perf_counter() - started, 1)}

        import papermill

        sandbox = out / "sandbox" / stem
        shutil.rmtree(sandbox, ignore_errors=True)
        workdir = make_sandbox(sandbox)
        executed.parent.mkdir(parents=True, exist_ok=True)
        title, summary = title_and_summary(nb_path)
        record = dict(name=stem, title=title, summary=summary, params=params, key=key,
                      source_hash=notebook_hash, **machine(), ok=False, cached=False, merged=False,
                      date=datetime.datetime.now().isoformat(timespec="seconds"))
        started = time.perf_counter()
        try:
            run_papermill(nb_path, executed, params, workdir, stem)
        except papermill.PapermillExecutionError as error:
            record.update(seconds=round(time.perf_counter() - started, 1),
                          error=f"cell {error.cell_index} (execution count {error.exec_count}): "
                                f"{error.ename}: {error.evalue}".strip())
            record_path.write_text(json.dumps(record, indent=1))
            return record
        record.update(seconds=round(time.perf_counter() - started, 1), ok=True,
                      launch_seconds=launch_seconds(executed))
        export_html(executed, handout)
        record_path.write_text(json.dumps(record, indent=1))
        return record


def launch_seconds(executed: Path) -> float:
    """Time spent in cells that start processes (torchrun, python, Popen): what a learner waits on."""
    launching = re.compile(r"torchrun|Popen|subprocess\.run|\blaunch\w*\(|^!", re.M)
    cells = [c for c in json.loads(executed.read_text())["cells"]
             if c["cell_type"] == "code" and launching.search("".join(c["source"]))]
    return round(sum(c["metadata"].get("papermill", {}).get("duration") or 0 for c in cells), 1)


def _npm_pack(spec: str, into: Path) -> Path:
    """Download one npm package tarball and unpack it; returns the package folder."""
    into.mkdir(parents=True, exist_ok=True)
    name = subprocess.run(["npm", "pack", spec, "--silent"], cwd=into, check=True,
                          capture_output=True, text=True, timeout=300).stdout.split()[-1]
    with tarfile.open(into / name) as tar:
        tar.extractall(into / "unpacked", filter="data")
    return into / "unpacked" / "package"


def vendor(handouts: Path) -> dict[str, str]:
    """Put the widget renderer, require.js and MathJax into handouts/vendor/; return their URLs.

    Without npm the handouts fall back to the CDN (they then need a network to show widgets
    and formulas): the build says so.
    """
    target = handouts / "vendor"
    urls = {"widget_renderer_url": "vendor/html-manager/embed-amd.js",
            "require_js_url": "vendor/requirejs/require.js",
            "mathjax_url": "vendor/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe"}
    with locked(handouts.parent / "locks" / "vendor.lock"):  # one fetch, even from parallel builds
        if (target / ".complete").exists():
            return urls
        return _fetch_vendor(target, urls)


def _fetch_vendor(target: Path, urls: dict[str, str]) -> dict[str, str]:
    if shutil.which("npm") is None:
        print("WARNING: npm is not installed: handouts will load the widget renderer, require.js and "
              "MathJax from a CDN, and need a network to show widgets and formulas.", file=sys.stderr)
        return {}
    print("Fetching the widget renderer, require.js and MathJax from the npm registry …", flush=True)
    shutil.rmtree(target, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            packages = {name: _npm_pack(spec, Path(tmp) / name) for name, spec in VENDOR_PACKAGES.items()}
        except (subprocess.SubprocessError, OSError) as error:
            print(f"WARNING: npm pack failed ({error}): handouts fall back to the CDN.", file=sys.stderr)
            return {}
        shutil.copytree(packages["html-manager"] / "dist", target / "html-manager",
                        ignore=shutil.ignore_patterns("*.map"))
        (target / "requirejs").mkdir(parents=True)
        shutil.copy(packages["requirejs"] / "require.js", target / "requirejs")
        for part in MATHJAX_PARTS:
            source, dest = packages["mathjax"] / part, target / "mathjax" / part
            if source.is_dir():
                shutil.copytree(source, dest)
            else:
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(source, dest)
    (target / ".complete").write_text("\n".join(VENDOR_PACKAGES.values()) + "\n")
    return urls


_vendor_urls: dict[str, dict[str, str]] = {}  # handouts folder -> URLs: one fetch (or one warning) per build


def vendor_urls(handouts: Path) -> dict[str, str]:
    """vendor(handouts), called once per folder per build: a failed fetch is not retried for every lesson."""
    if str(handouts) not in _vendor_urls:
        _vendor_urls[str(handouts)] = vendor(handouts)
    return _vendor_urls[str(handouts)]


EDITIONS = ("en", *translations.EDITIONS)
# The Chinese pages' fonts: the system's CJK fonts first (WenQuanYi Zen Hei is what tools/ensure_browser.py
# installs on Debian), for each script its own; the lab template's own stack otherwise.
CJK_FONTS = {
    "zh-Hant": '"Noto Sans CJK TC", "Source Han Sans TC", "PingFang TC", "Microsoft JhengHei", "WenQuanYi Zen Hei"',
    "zh-Hans": '"Noto Sans CJK SC", "Source Han Sans SC", "PingFang SC", "Microsoft YaHei", "WenQuanYi Zen Hei"',
}


def page_of(stem: str, edition: str, here: str) -> str:
    """The relative URL of a lesson's (or the index's) page in an edition, from a page of edition `here`."""
    folder = "" if edition == "en" else f"{edition}/"
    up = "" if here == "en" else "../"
    return f"{up}{folder}{stem}.html"


def language_bar(stem: str, edition: str, editions: tuple[str, ...]) -> str:
    """A line of links to the same page in the other editions (and to the edition's index)."""
    words = translations.index_strings(edition)
    links = [f'<b lang="{e}">{translations.LANGUAGE_NAMES[e]}</b>' if e == edition else
             f'<a lang="{e}" hreflang="{e}" href="{page_of(stem, e, edition)}">{translations.LANGUAGE_NAMES[e]}</a>'
             for e in editions]
    index = "" if stem == "index" else f' · <a href="index.html">{html.escape(words["index-link"])}</a>'
    label = "index-language-bar" if stem == "index" else "language-bar"
    return (f'<nav class="ddp-languages" style="font: .9rem system-ui, sans-serif; padding: .4rem 1rem; '
            f'border-bottom: 1px solid #ddd; background: #fafafa">{html.escape(words[label])} '
            f'{" · ".join(links)}{index}</nav>')


def editions_of(nb_path: Path) -> tuple[str, ...]:
    """The editions a lesson has: English, and the two Chinese ones where it has a catalog."""
    return EDITIONS if translations.catalog_path(nb_path).exists() else ("en",)


def export_html(executed: Path, handout: Path, edition: str = "en", nb=None,
                editions: tuple[str, ...] | None = None) -> None:
    """nbconvert's lab template, offline, with the remove-input/-output/-cell tags honoured.

    A Chinese edition (`edition` zh-Hant or zh-Hans, `nb` the execution with the translated markdown) goes
    to handouts/<edition>/: the vendor folder is the English pages' (one level up), links to lessons go to
    that edition's pages, and the page asks for CJK fonts."""
    import nbformat
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    handout.parent.mkdir(parents=True, exist_ok=True)
    root = handout.parent if edition == "en" else handout.parent.parent
    urls = {k: ("" if edition == "en" else "../") + v for k, v in vendor_urls(root).items()}
    config = Config()
    config.TagRemovePreprocessor.enabled = True
    config.TagRemovePreprocessor.remove_cell_tags = ("remove-cell",)
    config.TagRemovePreprocessor.remove_input_tags = ("remove-input",)
    config.TagRemovePreprocessor.remove_all_outputs_tags = ("remove-output",)
    exporter = HTMLExporter(config=config, template_name="lab", embed_images=True, **urls)
    nb = nbformat.read(executed, as_version=4) if nb is None else nb
    body, _ = exporter.from_notebook_node(nb)
    # Links between lessons ("Next: 02 · …") point at notebooks; in the handouts, at handouts.
    if edition == "en":
        body = re.sub(r'href="(\d\d_[a-z0-9_]+)\.ipynb', r'href="\1.html', body)
    else:  # NN_x.zh-Hant.ipynb: this edition's page; NN_x.ipynb (a lesson not translated yet): the English one
        body = re.sub(rf'href="(\d\d_[a-z0-9_]+)\.{edition}\.ipynb', r'href="\1.html', body)
        body = re.sub(r'href="(\d\d_[a-z0-9_]+)\.ipynb', r'href="../\1.html', body)
        body = body.replace('<html lang="en">', f'<html lang="{edition}">', 1)
        style = (f"<style>body, .jp-RenderedHTMLCommon, .jp-Notebook {{ font-family: system-ui, -apple-system, "
                 f'"Segoe UI", {CJK_FONTS[edition]}, sans-serif; }}</style>')
        body = body.replace("</head>", style + "\n</head>", 1)
    first = next((c for c in nb.cells if c.cell_type == "markdown"), None)
    if first is not None:
        title = html.escape(title_and_summary_of(first.source)[0])
        body = body.replace("<title>Notebook</title>", f"<title>{title}</title>", 1)
    stem = handout.stem
    bar = language_bar(stem, edition, editions or (EDITIONS if (NOTEBOOKS / f"{stem}.ipynb").exists()
                                                    and translations.catalog_path(stem).exists() else ("en",)))
    body = re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + "\n" + bar, body, count=1)
    handout.write_text(body)


def export_editions(nb_path: Path, out: Path, force: bool = False) -> float | None:
    """The Chinese handouts of one lesson, from its English execution with the translated markdown merged in.

    Returns the seconds it took, or None when there was nothing to do (no catalog, or the pages are up to
    date with the execution, the catalog and the tools). A catalog that misses a cell raises ValueError."""
    import nbformat

    if editions_of(nb_path) == ("en",):
        return None
    stem = nb_path.stem
    executed = out / "executed" / f"{stem}.ipynb"
    stamp = out / "executed" / f"{stem}.editions-key"
    pages = [out / "handouts" / edition / f"{stem}.html" for edition in translations.EDITIONS]
    digest = hashlib.sha256()
    for path in [executed, nb_path, translations.catalog_path(nb_path), translations.INDEX_CATALOG,
                 Path(__file__), Path(translations.__file__), translations.T2S_REVIEWED]:
        if path.is_file():
            digest.update(path.read_bytes())
    key = digest.hexdigest()
    if not force and stamp.exists() and all(p.exists() for p in pages) and json.loads(stamp.read_text()) == key:
        return None
    started = time.perf_counter()
    for edition, page in zip(translations.EDITIONS, pages):
        nb = translations.edition_notebook(nb_path, edition, nbformat.read(executed, as_version=4))
        export_html(executed, page, edition=edition, nb=nb, editions=EDITIONS)
    english = out / "handouts" / f"{stem}.html"  # exported before the lesson had a catalog: give it the bar
    if english.exists():
        text = english.read_text()
        text = re.sub(r'<nav class="ddp-languages".*?</nav>', lambda _: language_bar(stem, "en", EDITIONS), text,
                      count=1, flags=re.S)
        english.write_text(text)
    stamp.write_text(json.dumps(key))
    return time.perf_counter() - started


def write_index(records: list[dict], handouts: Path, edition: str = "en") -> Path:
    """index.html of an edition (in handouts/ for English, handouts/<edition>/ for a Chinese one). A
    Chinese index shows the lessons' translated titles and summaries, and links a lesson that has no
    Chinese page yet to its English one."""
    words = translations.index_strings(edition)
    folder = handouts if edition == "en" else handouts / edition
    rows = []
    for r in records:
        name = html.escape(r["name"])
        title, summary = r["title"], r["summary"]
        translated = edition != "en" and (folder / f"{r['name']}.html").exists() and r.get("ok")
        if translated:
            title, summary = title_and_summary_of(
                translations.edition_notebook(NOTEBOOKS / f"{r['name']}.ipynb", edition).cells[0].source)
        href = f"{name}.html" if edition == "en" or translated else f"../{name}.html"
        link = f'<a href="{href}">{html.escape(title)}</a>' if r.get("ok") else html.escape(title)
        names = translations.LANGUAGE_NAMES
        others = " · ".join(f'<a lang="{e}" href="{page_of(r["name"], e, edition)}">{names[e]}</a>'
                            for e in EDITIONS if e != edition and r.get("ok")
                            and (e == "en" or (handouts / e / f"{r['name']}.html").exists()))
        status = ("" if r.get("ok") else
                  f'<br><b class="failed">{html.escape(words["failed"])}: {html.escape(r.get("error", ""))}</b>')
        params = ", ".join(f"{k}={v}" for k, v in r.get("params", {}).items()) or words["defaults"]
        rows.append(f"<tr><td>{link}{status}<div class=summary>{html.escape(summary)}</div>"
                    f"<div class=summary>{others}</div></td>"
                    f"<td>{r.get('seconds', '–')} s"
                    f"<div class=summary>{html.escape(words['launches'])} {r.get('launch_seconds', '–')} s</div></td>"
                    f"<td>{html.escape(r.get('torch', ''))}</td>"
                    f"<td>{html.escape(r.get('backend', ''))}</td><td>{html.escape(str(r.get('devices', '')))}</td>"
                    f"<td>{html.escape(params)}</td><td>{html.escape(r.get('date', ''))}</td></tr>")
    columns = "".join(f"<th>{html.escape(words['column-' + c])}</th>" for c in
                      ("lesson", "run-time", "torch", "backend", "devices", "parameters", "executed"))
    fonts = f"{CJK_FONTS[edition]}, " if edition != "en" else ""
    page = f"""<!DOCTYPE html>
<html lang="{edition}"><head><meta charset="utf-8"><title>{html.escape(words["page-title"])}</title>
<style>
body {{ font-family: system-ui, {fonts}sans-serif; max-width: 70rem; margin: 2rem auto; padding: 0 1rem; color: #222; }}
table {{ border-collapse: collapse; width: 100%; }}
th, td {{ border-bottom: 1px solid #ddd; padding: .5rem; text-align: left; vertical-align: top; }}
th {{ background: #f4f4f4; }} .summary {{ color: #555; font-size: .9rem; margin-top: .25rem; }}
.failed {{ color: #b00; }}
</style></head><body>
{language_bar("index", edition, EDITIONS)}
<h1>{html.escape(words["heading"])}</h1>
<p>{html.escape(words["intro"])}</p>
<table><thead><tr>{columns}</tr></thead><tbody>
{chr(10).join(rows)}
</tbody></table></body></html>
"""
    folder.mkdir(parents=True, exist_ok=True)
    index = folder / "index.html"
    index.write_text(page)
    return index


def build(out: Path, overrides: dict[str, object], force: bool = False,
          only: list[str] | None = None) -> list[dict]:
    selected = lessons(only)
    known = set().union(*(declared_parameters(p) for p in selected))
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise UsageError(f"no lesson has a parameter named {', '.join(unknown)} "
                         f"(known: {', '.join(sorted(known))})")
    plans = [(p, parameters_for(p, overrides)) for p in selected]
    records = []
    for i, (nb_path, params) in enumerate(plans, 1):
        shown = " ".join(f"{k}={v}" for k, v in params.items())
        print(f"[{i}/{len(plans)}] {nb_path.name} {shown}".rstrip(), flush=True)
        record = execute(nb_path, out, params, force=force)
        if record.get("cached"):
            print("  unchanged: cached result reused", flush=True)
        elif record.get("merged"):
            print(f"  only the prose changed: re-exported from the cached execution in {record['merge_seconds']} s",
                  flush=True)
        elif record["ok"]:
            print(f"  done in {record['seconds']} s (cells that launch processes: {record['launch_seconds']} s)",
                  flush=True)
        else:
            print(f"  FAILED {nb_path.relative_to(REPO)}, {record['error']}\n"
                  f"  partially executed notebook: {out / 'executed' / nb_path.name}", flush=True)
        if record["ok"]:
            try:
                with locked(out / "locks" / f"{nb_path.stem}.lock"):
                    seconds = export_editions(nb_path, out, force=force)
            except ValueError as error:  # a catalog that misses a cell: `make test` names it too
                print(f"  WARNING: no Chinese handouts of {nb_path.stem}: {error}", flush=True)
            else:
                if seconds is not None:
                    print(f"  Chinese handouts (zh-Hant, zh-Hans) exported in {seconds:.1f} s", flush=True)
                    record["editions_seconds"] = round(seconds, 2)
        records.append(record)
    if only is None:
        for edition in EDITIONS:
            write_index(records, out / "handouts", edition)
    exported = [r["editions_seconds"] for r in records if "editions_seconds" in r]
    if exported:
        print(f"Chinese editions: {len(exported)} lessons exported in {sum(exported):.1f} s "
              "(export only: the numbers are the English execution's)", flush=True)
    return records


def time_editions(out: Path, repeat: int) -> list[float]:
    """Export the Chinese handouts of every lesson executed in out/executed/, `repeat` times; the seconds
    of each round (what the Chinese editions add to a build)."""
    import statistics

    done = [p for p in lessons() if (out / "executed" / f"{p.stem}.ipynb").exists() and editions_of(p) != ("en",)]
    rounds = []
    for _ in range(repeat):
        rounds.append(sum(export_editions(p, out, force=True) or 0 for p in done))
    spread = f"{min(rounds):.1f}–{max(rounds):.1f}" if rounds else "–"
    print(f"Chinese export of {len(done)} lessons × 2 editions: median {statistics.median(rounds):.1f} s "
          f"(range {spread} s, {repeat} rounds)", flush=True)
    return rounds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="execute the lessons and export the handouts")
    b.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a papermill parameter, passed to every lesson that declares it")
    b.add_argument("--force", action="store_true", help="re-execute even when the cache is valid")
    b.add_argument("--only", nargs="+", metavar="NN", help="only lessons whose name starts with these")
    b.add_argument("--out", type=Path, default=REPO / "build", help="output folder (default: build/)")
    t = sub.add_parser("time-editions", help="export the Chinese handouts of the executed lessons again, "
                       "timed (median of --repeat rounds)")
    t.add_argument("--out", type=Path, default=REPO / "build", help="output folder (default: build/)")
    t.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    if args.command == "time-editions":
        time_editions(args.out.resolve(), args.repeat)
        return 0
    try:
        started = time.perf_counter()
        records = build(args.out.resolve(), parse_overrides(args.param), args.force, args.only)
    except UsageError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    failed = [r["name"] for r in records if not r["ok"]]
    print(f"{len(records) - len(failed)}/{len(records)} lessons ok in {time.perf_counter() - started:.1f} s; "
          f"handouts in {args.out / 'handouts'}", flush=True)
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
