"""The two ways the series is used, tested in a real browser (Debian's Chromium driven by Playwright).

(a) Handouts: every build/test/handouts/*.html opened from disk with the network cut. No console
    errors, no request leaves the handouts folder, every embedded widget is drawn. Negative tests:
    the same check fails when the widget renderer is missing, and when a page asks for the network.
(b) JupyterLab live: a real `jupyter lab` server in a temporary copy of notebooks/ and
    ddp_scripts/; lesson 05 runs all its cells, the sampler explorer's world-size slider is moved,
    and the table of shards must follow.

Screenshots go to build/screenshots/. Chromium comes from `tools/ensure_browser.py` (the Makefile
runs it before pytest); without it these tests skip with the reason it recorded.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import BIN, NOTEBOOKS, REPO, SCRIPTS

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run"]
OUT = REPO / "build" / "test"  # shared with tests/test_notebooks.py: the runner caches per notebook there
SHOTS = REPO / "build" / "screenshots"
REASON_FILE = REPO / "build" / "browser-unavailable.txt"
SAMPLER_LESSON = "05_"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

sys.path.insert(0, str(NOTEBOOKS))
import series  # noqa: E402  (tools/ is put on sys.path by conftest)

import translations  # noqa: E402


def _no_browser_reason() -> str | None:
    """Why the browser tests cannot run here (as tools/ensure_browser.py recorded it), or None."""
    if REASON_FILE.exists():
        return f"no usable Chromium: {REASON_FILE.read_text().strip()}"
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing: run `python tools/ensure_browser.py` (as root it installs Debian's chromium)"
    return None


@pytest.fixture(scope="module")
def browser():
    reason = _no_browser_reason()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        yield chromium
        chromium.close()


# ---------------------------------------------------------------------------------------------
# (a) handouts, offline
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def handouts() -> Path:
    """Every lesson executed and exported (cached by the runner, shared with the notebook tests)."""
    records = series.build(out=OUT, overrides={})
    failed = [f"{r['name']}: {r.get('error')}" for r in records if not r["ok"]]
    assert not failed, "lessons failed to execute, so their handouts are missing:\n" + "\n".join(failed)
    return OUT / "handouts"


def check_page(browser, page_path: Path, folder: Path, shot: Path | None = None) -> tuple[list[str], dict]:
    """Open one page from disk with the network cut; return (problems, facts).

    A problem: a request outside `folder` (aborted), a request that failed, a console error or an
    uncaught exception, or an embedded widget view that was not drawn.
    """
    folder_uri = folder.resolve().as_uri() + "/"
    problems: list[str] = []
    context = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})

    def route(route):
        url = route.request.url
        if url.startswith(folder_uri) or url.startswith("data:"):
            route.continue_()
        else:
            problems.append(f"request outside the handouts folder (blocked): {url[:200]}")
            route.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("console", lambda msg: msg.type == "error" and problems.append(f"console error: {msg.text[:300]}"))
    page.on("pageerror", lambda error: problems.append(f"uncaught exception: {str(error)[:300]}"))
    page.on("requestfailed", lambda req: problems.append(f"request failed: {req.url[:200]} ({req.failure})"))
    try:
        page.goto(page_path.resolve().as_uri(), wait_until="load", timeout=30_000)
        has_state = page.locator(f'script[type="{WIDGET_STATE}"]').count() > 0
        views = page.locator(f'script[type="{WIDGET_VIEW}"]').count()
        drawn_js = f"""() => [...document.querySelectorAll('script[type="{WIDGET_VIEW}"]')]
                           .filter(s => s.parentElement.querySelector('.jupyter-widgets')).length"""
        drawn = 0
        if has_state and views:
            deadline = time.monotonic() + 20  # the renderer draws in well under a second when it loads
            while (drawn := page.evaluate(drawn_js)) < views and time.monotonic() < deadline \
                    and not any(p.startswith("request") for p in problems):  # a missing file: no need to wait
                page.wait_for_timeout(250)
            if drawn < views:
                problems.append(f"{views - drawn} of {views} embedded widget views not drawn")
        page.wait_for_timeout(300)  # late console errors (fonts, MathJax) still count
        facts = dict(views=views, drawn=drawn, has_state=has_state,
                     sliders=page.locator(".widget-slider").count(),
                     tables=page.locator(".ddp-shards, .ddp-ring, .ddp-torchrun").count())
        if shot is not None:
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot), full_page=True)
            views_at = page.locator(f'.jp-OutputArea-output:has(> script[type="{WIDGET_VIEW}"])')
            for i, view in enumerate(views_at.all()):
                view.scroll_into_view_if_needed()
                view.screenshot(path=str(shot.with_name(f"{shot.stem}_widget{i}.png")))
    finally:
        context.close()
    return problems, facts


def _handout_names() -> list[str]:
    return ["index"] + [p.stem for p in series.lessons()]


# The first test to ask for `handouts` may execute every lesson (when test_notebooks.py has not yet):
# allow for that, beyond pyproject's per-test 900 s.
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("name", _handout_names())
def test_handout_offline(browser, handouts, name):
    page = handouts / f"{name}.html"
    assert page.exists(), f"{page} was not built"
    problems, facts = check_page(browser, page, handouts, SHOTS / f"handout_{name}.png")
    assert not problems, f"{page.name}:\n" + "\n".join(problems)
    if name == "index":
        links = {link for link in re.findall(r'href="([^"]+\.html)"', page.read_text()) if "/" not in link}
        assert links == {f"{stem}.html" for stem in _handout_names()[1:]}, links  # (zh-*/…: the Chinese editions)
    notebook = NOTEBOOKS / f"{name}.ipynb"
    if notebook.exists() and "_explorer(" in notebook.read_text():
        assert facts["has_state"], f"{page.name}: the lesson shows an explorer but no widget state was embedded"
    if facts["has_state"]:
        assert facts["views"] > 0 and facts["drawn"] == facts["views"], facts
        assert facts["sliders"] > 0, f"{page.name}: widget state embedded but no slider drawn"


def _page_with_widgets(handouts: Path) -> Path:
    pages = sorted(handouts.glob("[0-9][0-9]_*.html"))
    with_state = [p for p in pages if WIDGET_STATE in p.read_text()]
    if not with_state:
        pytest.fail("no handout embeds widget state: the explorers are missing from the lessons")
    preferred = [p for p in with_state if p.name.startswith(SAMPLER_LESSON)]
    return (preferred or with_state)[0]


@pytest.mark.timeout(3600)
def test_handout_without_renderer_fails_the_check(browser, handouts, tmp_path):
    """Negative: with vendor/html-manager renamed, the same check must report undrawn widgets."""
    copy = tmp_path / "handouts"
    shutil.copytree(handouts, copy)
    page = copy / _page_with_widgets(handouts).name
    (copy / "vendor" / "html-manager").rename(copy / "vendor" / "html-manager.missing")
    problems, facts = check_page(browser, page, copy, SHOTS / "negative_no_renderer.png")
    assert facts["views"] > 0 and facts["drawn"] == 0, facts
    assert any("not drawn" in p for p in problems), problems
    assert any("embed-amd.js" in p for p in problems), problems  # the failed request names the renderer


def test_request_leaving_the_folder_fails_the_check(browser, tmp_path):
    """Negative: a page that asks the network (or a file outside its folder) is reported."""
    folder = tmp_path / "site"
    folder.mkdir()
    (tmp_path / "outside.js").write_text("var outside = 1;\n")
    page = folder / "page.html"
    page.write_text('<!DOCTYPE html><html><head><script src="https://cdn.example.org/x.js"></script>'
                    '<script src="../outside.js"></script></head><body>hi</body></html>')
    problems, _ = check_page(browser, page, folder)
    assert any("cdn.example.org" in p for p in problems), problems
    assert any("outside.js" in p for p in problems), problems


# ---------------------------------------------------------------------------------------------
# (a') the Chinese editions' handouts: offline, drawn in CJK glyphs, linked to each other
# ---------------------------------------------------------------------------------------------

CHINESE = ("zh-Hant", "zh-Hans")
CJK = r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]"


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("edition,name", [(e, n) for e in CHINESE for n in ("index", "05_rank_aware")],
                         ids=lambda v: v)
def test_chinese_handout_offline(browser, handouts, edition, name):
    """The same offline check as the English pages': the vendor folder is reached one level up."""
    page = handouts / edition / f"{name}.html"
    assert page.exists(), f"{page} was not built"
    problems, facts = check_page(browser, page, handouts, SHOTS / f"handout_{edition}_{name}.png")
    assert not problems, f"{edition}/{page.name}:\n" + "\n".join(problems)
    if facts["has_state"]:
        assert facts["views"] > 0 and facts["drawn"] == facts["views"], facts


def _ink(png: bytes):
    import io

    import numpy
    from PIL import Image

    return numpy.asarray(Image.open(io.BytesIO(png)).convert("L")).astype(int)


def _differing(a, b) -> float:
    """The share of pixels that differ clearly between two screenshots (1.0 when their sizes differ)."""
    return 1.0 if a.shape != b.shape else float((abs(a - b) > 64).mean())


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("edition", CHINESE)
def test_chinese_text_is_drawn_not_boxes(browser, handouts, edition):
    """A page's title and first paragraph, screenshot as rendered, then with every CJK character replaced by a
    code point no font has (U+0378, unassigned): the missing-glyph boxes. Negative control: two different
    missing code points draw the same boxes, so a page whose CJK text were boxes would match the second
    screenshot. The rendered text must differ from it clearly."""
    context = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    try:
        page.goto((handouts / edition / "02_ranks.html").resolve().as_uri(), wait_until="load")
        shots = {}
        for label, missing in [("text", None), ("boxes", "\u0378"), ("other boxes", "\u0379\u0380\u0381")]:
            page.reload(wait_until="load")
            if missing:
                page.evaluate("""([pattern, missing]) => {
                    const re = new RegExp(pattern, "g");
                    for (const el of document.querySelectorAll("h1, h1 + p")) {
                        const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
                        let i = 0;
                        for (let n = walk.nextNode(); n; n = walk.nextNode())
                            n.textContent = n.textContent.replace(re, () => missing[(i++) % missing.length]);
                    }}""", [CJK, missing])
            heading = page.locator("h1").first
            assert bool(re.search(CJK, heading.inner_text())) == (missing is None), heading.inner_text()
            shots[label] = (_ink(heading.screenshot()), _ink(page.locator("h1 + p").first.screenshot()))
            if label == "text":
                SHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SHOTS / f"handout_{edition}_glyphs.png"))
        for i, part in enumerate(("title", "first paragraph")):
            control = _differing(shots["boxes"][i], shots["other boxes"][i])
            assert control < 0.001, f"{edition} {part}: two missing-glyph renderings differ ({control:.4f})"
            drawn = _differing(shots["text"][i], shots["boxes"][i])
            assert drawn > 0.02, f"{edition} {part}: the CJK text looks like missing-glyph boxes ({drawn:.4f})"
    finally:
        context.close()


@pytest.mark.timeout(3600)
def test_language_links_resolve(browser, handouts):
    """Every page's language bar, and every link between handouts, reaches an existing page; a link to an anchor
    (the glossary) lands on an element, as Chromium resolves it."""
    from urllib.parse import unquote

    pages = [*handouts.glob("*.html"), *(p for e in CHINESE for p in (handouts / e).glob("*.html"))]
    assert {p.parent.name for p in pages} >= set(CHINESE), "no Chinese handouts"
    anchors = []
    for page in pages:
        text = page.read_text()
        bar = re.search(r'<nav class="ddp-languages".*?</nav>', text, re.S)
        assert bar, f"{page}: no language bar"
        folder = page.parent.name if page.parent != handouts else "en"
        translated = page.stem == "index" or translations.catalog_path(page.stem).exists()
        for name in ("English", "繁體中文", "简体中文") if translated else ("English",):
            assert name in bar.group(0), f"{folder}/{page.name}: the language bar lacks {name}"
        for href in re.findall(r'href="([^":]+?\.html)(#[^"]*)?"', text):
            target = (page.parent / href[0]).resolve()
            assert target.exists(), f"{folder}/{page.name} links to {href[0]}, which does not exist"
            if href[1] and target.parent.name in CHINESE:
                anchors.append((target, href[1]))
    assert anchors, "no Chinese page links to an anchor (the glossary)"
    context = browser.new_context(offline=True)
    page = context.new_page()
    try:
        for target, fragment in sorted(set(anchors)):
            page.goto(target.as_uri() + fragment, wait_until="load")
            found = page.evaluate("() => !!document.querySelector(':target')")
            assert found, f"{target.parent.name}/{target.name}{unquote(fragment)}: no element has that id"
    finally:
        context.close()


# ---------------------------------------------------------------------------------------------
# (b) JupyterLab, live
# ---------------------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab_server(tmp_path):
    """`jupyter lab` on 127.0.0.1 with a random token in a copy of notebooks/ and ddp_scripts/."""
    root = tmp_path / "root"
    shutil.copytree(NOTEBOOKS, root / "notebooks", ignore=shutil.ignore_patterns("runs", ".ipynb_checkpoints"))
    shutil.copytree(SCRIPTS, root / "ddp_scripts")
    news = tmp_path / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True)
    news.write_text('{"fetchNews": "false"}\n')  # no "official Jupyter news?" prompt over the screenshots
    token, port = secrets.token_hex(16), _free_port()
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
               JUPYTER_CONFIG_DIR=str(tmp_path / "config"), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
               JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"))
    log = open(tmp_path / "lab.log", "w")
    server = subprocess.Popen(
        [str(BIN / "jupyter"), "lab", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--ServerApp.port_retries=0",
         "--LabApp.expose_app_in_browser=True", *(["--allow-root"] if os.geteuid() == 0 else [])],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail("jupyter lab did not start:\n" + (tmp_path / "lab.log").read_text()[-3000:])
            time.sleep(0.5)
        yield dict(base=base, token=token, root=root, log=tmp_path / "lab.log")
    finally:
        server.send_signal(signal.SIGINT)  # Jupyter's clean stop: shuts its kernels down
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)  # the session this fixture started: server and kernels
            server.wait(timeout=10)
        log.close()


# After "run all": the first error output if a cell raised; 'done' once every code cell has run
# (an execution count, kernel idle) and the sampler explorer is drawn; else false (still running).
DONE_OR_ERROR = """() => {
    const nb = window.jupyterapp.shell.currentWidget;
    let pending = 0;
    for (const [i, cell] of nb.content.widgets.entries()) {
        if (cell.model.type !== 'code') continue;
        for (const out of cell.model.outputs.toJSON()) {
            if (out.output_type === 'error') return `cell ${i}: ${out.ename}: ${out.evalue}`;
        }
        if (cell.model.executionCount == null && cell.model.sharedModel.getSource().trim()) pending += 1;
    }
    const idle = nb.sessionContext.kernelDisplayStatus === 'idle';
    return pending === 0 && idle && document.querySelector('.jp-Notebook .ddp-shards') ? 'done' : false;
}"""


def _shown_shards(page) -> tuple[dict, list[list[int]], list[list[bool]]]:
    """The sampler explorer's table as shown: its parameters and each rank's indices."""
    data = page.evaluate("""() => {
        const box = document.querySelector('.jp-Notebook .ddp-shards');
        const rows = [...box.querySelectorAll('tr.ddp-rank')].map(tr =>
            [...tr.querySelectorAll('td.ddp-index')].map(td => [Number(td.textContent),
                                                            td.classList.contains('ddp-padding')]));
        return {attrs: {...box.dataset}, rows};
    }""")
    a = data["attrs"]
    params = dict(dataset_size=int(a["datasetSize"]), world_size=int(a["worldSize"]), shuffle=a["shuffle"] == "1",
                  seed=int(a["seed"]), epoch=int(a["epoch"]), drop_last=a["dropLast"] == "1")
    return params, [[i for i, _ in row] for row in data["rows"]], [[p for _, p in row] for row in data["rows"]]


@pytest.mark.timeout(600)
def test_jupyterlab_live_sampler_explorer(browser, lab_server):
    from explorers import sampler_shards

    lessons = sorted(p for p in NOTEBOOKS.glob(f"{SAMPLER_LESSON}*.ipynb") if ".zh-" not in p.name)
    assert lessons, f"no lesson {SAMPLER_LESSON}*.ipynb"
    nb = lessons[0]
    assert "sampler_explorer" in nb.read_text(), f"{nb.name} does not use the sampler explorer"
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    context.route("**/*", lambda r: r.continue_() if r.request.url.startswith(lab_server["base"]) else r.abort())
    page = context.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)[:300]))
    try:
        page.goto(f"{lab_server['base']}/lab/tree/notebooks/{nb.name}?token={lab_server['token']}",
                  timeout=90_000)
        page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
                               " && window.jupyterapp.shell.currentWidget.sessionContext"
                               " && window.jupyterapp.shell.currentWidget.sessionContext.session", timeout=120_000)
        page.wait_for_function("() => window.jupyterapp.shell.currentWidget.sessionContext.kernelDisplayStatus"
                               " === 'idle'", timeout=120_000)
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        # The whole lesson runs (launches included) before the slider moves: a busy kernel would
        # only queue the widget's messages. Stop early if a cell raises.
        outcome = page.wait_for_function(DONE_OR_ERROR, timeout=420_000, polling=500).json_value()
        assert outcome == "done", f"{nb.name} failed in JupyterLab: {outcome}"
        before, shards, padding = _shown_shards(page)
        expected = sampler_shards(**before)
        assert (shards, padding) == (expected.indices, expected.padding), (before, shards)
        explorer = page.locator(".jp-Notebook .jupyter-widgets.widget-vbox:has(.ddp-shards)").first
        explorer.scroll_into_view_if_needed()
        SHOTS.mkdir(parents=True, exist_ok=True)
        explorer.screenshot(path=str(SHOTS / "lab_05_sampler_before.png"))

        slider = explorer.locator(".widget-slider:has(label:text-is('world size'))")
        handle = slider.locator(".noUi-handle")
        handle.focus()
        target = before["world_size"] + 1 if before["world_size"] < 8 else before["world_size"] - 1
        page.keyboard.press("ArrowRight" if target > before["world_size"] else "ArrowLeft")
        page.wait_for_selector(f".jp-Notebook .ddp-shards[data-world-size='{target}']", timeout=30_000)
        after, shards, padding = _shown_shards(page)
        assert after == {**before, "world_size": target}, (before, after)
        expected = sampler_shards(**after)
        assert len(shards) == target
        assert (shards, padding) == (expected.indices, expected.padding), (after, shards)
        assert slider.locator(".widget-readout").inner_text().strip() == str(target)
        explorer.screenshot(path=str(SHOTS / "lab_05_sampler_after.png"))
        page.screenshot(path=str(SHOTS / "lab_05_page.png"))
        assert not errors, errors
    finally:
        context.close()
