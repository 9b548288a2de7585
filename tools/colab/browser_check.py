"""Open every chapter as readers see it outside the HTML book, in a real browser, and check it.

``python -m tools.colab.browser_check [--only jupyterlab|colab] [--out DIR] [NN ...]``

1. **JupyterLab** (with jupyterlab-myst, as ``requirements.txt`` installs it): starts a local
   JupyterLab server, opens each chapter in headless Chromium and asserts that every exercise's
   title and every callout's title is visible text, math is typeset (no TeX command left in the
   visible text, code blocks included), no ``:label:`` or ``:class:`` line and no
   ``{directive}``/``{role}`` is visible, every solution's input is collapsed, and the notebook
   shows no unsaved changes once its kernel is idle.
2. **Colab editions** (``colab/``): renders each edition's markdown with a plain CommonMark
   renderer (markdown-it-py, with tables, as Colab's) and MathJax, and asserts the same, plus:
   each exercise's title is bold, each callout is a blockquote headed by its bold title, every
   image loads from the repository path its absolute URL names, the references are listed, and
   every solution is a Colab form with its code hidden.

Screenshots go to ``--out`` (default ``_build/browser_check``). Drives the system Chromium over
the DevTools protocol, offline (no Playwright, no download); exits with status 2 and a message
when no Chromium is found, 1 when a check fails.
"""
from __future__ import annotations

import argparse
import base64
import html
import importlib.metadata
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from tools.colab.edition import ROOT, Repository, chapters, edition_path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
SOLUTION_TITLE = "# @title Solution"


def find_chromium() -> str | None:
    """The system Chromium: ``$CHROMIUM`` if set, else the first of CHROMIUM_NAMES on the PATH."""
    if os.environ.get("CHROMIUM"):
        return os.environ["CHROMIUM"]
    return next((shutil.which(name) for name in CHROMIUM_NAMES if shutil.which(name)), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except Exception:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not answer in {seconds:.0f} s")
            time.sleep(0.3)


# --- a minimal DevTools-protocol client ----------------------------------------------------------
class Page:
    """One browser tab, driven over the DevTools protocol (websocket-client, synchronous)."""

    def __init__(self, ws_url: str):
        import websocket  # websocket-client, installed with jupyter-server

        self._ws = websocket.create_connection(ws_url, timeout=120, suppress_origin=True)
        self._id = 0
        self.console: list[str] = []

    def send(self, method: str, **params):
        self._id += 1
        self._ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv())
            if message.get("id") == self._id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if message.get("method") == "Runtime.exceptionThrown":
                self.console.append(str(message["params"]["exceptionDetails"].get("text")))

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"in the page: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while not self.evaluate(expression):
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {seconds:.0f} s for {what}")
            time.sleep(0.25)

    def goto(self, url: str) -> None:
        self.send("Page.navigate", url=url)

    def screenshot(self, path: Path) -> None:
        height = self.evaluate("Math.min(Math.max(document.documentElement.scrollHeight, 800), 16000)")
        shot = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": 1280, "height": height, "scale": 1})
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        try:
            self.send("Page.close")  # the tab itself, so that its JupyterLab stops too
        except Exception:  # the tab may go before it answers
            pass
        finally:
            self._ws.close()


@contextmanager
def chromium(executable: str):
    """A headless Chromium; yields a function that opens a new tab (a Page)."""
    port = _free_port()
    profile = tempfile.mkdtemp(prefix="browser-check-")
    process = subprocess.Popen(
        [executable, "--headless=new", f"--remote-debugging-port={port}", f"--user-data-dir={profile}",
         "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
         "--allow-file-access-from-files", "--window-size=1280,1000", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_http(f"http://127.0.0.1:{port}/json/version", 60)

        def new_page() -> Page:
            request = urllib.request.Request(f"http://127.0.0.1:{port}/json/new?about:blank", method="PUT")
            with urllib.request.urlopen(request, timeout=30) as answer:
                page = Page(json.loads(answer.read())["webSocketDebuggerUrl"])
            page.send("Page.enable")
            page.send("Runtime.enable")
            page.send("Emulation.setDeviceMetricsOverride", width=1280, height=1000, deviceScaleFactor=1,
                      mobile=False)
            return page

        yield new_page
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        shutil.rmtree(profile, ignore_errors=True)


# --- what each chapter should show ---------------------------------------------------------------
def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def expectations(chapter: Path) -> dict:
    """Exercise titles, and the indices of solution code cells, from the chapter's file."""
    cells = json.loads(chapter.read_text(encoding="utf-8"))["cells"]
    titles = [m.strip() for c in cells if c["cell_type"] == "markdown"
              for m in re.findall(r"\{exercise\}[ \t]*(.*)", _source(c))]
    callouts = [m.strip().replace("`", "") for c in cells if c["cell_type"] == "markdown"
                for m in re.findall(r"\{admonition\}[ \t]*(.*)", _source(c))]
    solutions = [n for n, c in enumerate(cells) if c["cell_type"] == "code" and _source(c).startswith(SOLUTION_TITLE)]
    return {"titles": titles, "callouts": callouts, "solutions": solutions, "cells": len(cells)}


# JavaScript shared by both checks: the visible text of rendered markdown, without math and code
VISIBLE_TEXT_JS = r"""
function visibleText(root, keepCode) {
  const copy = root.cloneNode(true);
  copy.querySelectorAll('mjx-container, .katex, .MathJax, script, style, annotation, math' +
                        (keepCode ? '' : ', code, pre')).forEach(e => e.remove());
  return copy.textContent;
}
"""

LEFTOVER_CHECKS = r"""
function leftovers(roots) {
  const problems = [];
  roots.forEach((root, n) => {
    const withCode = visibleText(root, true), prose = visibleText(root, false);
    for (const m of withCode.matchAll(/^\s*:(label|class):.*$/gm)) problems.push(`a visible option line: ${m[0].trim()}`);
    for (const m of withCode.matchAll(/\{(exercise|solution-start|solution-end|admonition|footbibliography|footcite|ref|numref|note|warning)\}/g))
      problems.push(`visible MyST: ${m[0]}`);
    // TeX commands outside typeset math, code blocks included (a garbled exercise is one)
    for (const m of withCode.matchAll(/\\(frac|sqrt|operatorname|mathrm|mathbb|top|sum|exp|begin|left|cdot|qquad|in)\b/g))
      problems.push(`TeX not typeset: ${withCode.substr(Math.max(0, m.index - 30), 70).replace(/\s+/g, ' ')}`);
    for (const m of prose.matchAll(/\$[^$\s][^$]*\$/g)) problems.push(`dollar math left: ${m[0].slice(0, 60)}`);
  });
  return problems;
}
"""


def _plain_quotes(text: str) -> str:
    """Renderers turn ' and " into typographic quotes (MyST's smartquotes); compare without."""
    return text.translate(str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'}))


# --- 1. JupyterLab --------------------------------------------------------------------------------
@contextmanager
def jupyterlab():
    """A JupyterLab server on the repository, in a throw-away configuration; yields its base URL."""
    port = _free_port()
    home = Path(tempfile.mkdtemp(prefix="browser-check-lab-"))
    config, settings, workspaces = home / "config", home / "settings", home / "workspaces"
    (config / "labconfig").mkdir(parents=True)
    # no "news" toast over the notebook; every cell rendered (no windowing) so that all are checked
    (config / "labconfig" / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}))
    (settings / "@jupyterlab" / "notebook-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings").write_text(
        json.dumps({"windowingMode": "none"}))
    # never write a notebook: no autosave, and the server sees a copy of the chapters
    (settings / "@jupyterlab" / "docmanager-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "docmanager-extension" / "plugin.jupyterlab-settings").write_text(
        json.dumps({"autosave": False}))
    shutil.copytree(ROOT / "chapters", home / "root" / "chapters")
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(config), "JUPYTER_RUNTIME_DIR": str(home / "runtime")}
    log = open(home / "lab.log", "w")
    process = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
         "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={home / 'root'}",
         f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={workspaces}",
         "--ServerApp.disable_check_xsrf=True", "--allow-root"],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_http(f"{url}/api", 120)
        except TimeoutError:
            log.flush()
            raise RuntimeError("JupyterLab did not start:\n" + (home / "lab.log").read_text()[-3000:]) from None
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
        shutil.rmtree(home, ignore_errors=True)


def myst_installed() -> bool:
    result = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"],
                            capture_output=True, text=True)
    return "jupyterlab-myst" in result.stdout + result.stderr


JUPYTERLAB_STATE_JS = VISIBLE_TEXT_JS + LEFTOVER_CHECKS + r"""
(() => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  const cells = [...panel.querySelectorAll('.jp-Notebook > .jp-Cell, .jp-WindowedPanel-viewport > .jp-Cell')];
  const markdown = cells.filter(c => c.classList.contains('jp-MarkdownCell'))
                        .map(c => c.querySelector('.myst, .jp-RenderedMarkdown') || c);
  const text = markdown.map(m => m.innerText).join('\n');
  const collapsed = cells.map(c => !!c.querySelector('.jp-InputPlaceholder') &&
                                   !(c.querySelector('.jp-InputArea-editor') || {}).offsetParent);
  const tab = document.querySelector('#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current');
  return {cells: cells.length, text, collapsed, leftovers: leftovers(markdown),
          math: panel.querySelectorAll('.katex, mjx-container').length,
          unknown: [...text.matchAll(/(\S+) - Unknown (Directive|Role)/g)].map(m => `${m[1]} (${m[2].toLowerCase()})`),
          dirty: !!(tab && tab.classList.contains('jp-mod-dirty')),
          kernel: (document.querySelector('.jp-Notebook-ExecutionIndicator') || {}).dataset?.status || '',
          placeholders: cells.map(c => (c.querySelector('.jp-InputPlaceholder') || {}).innerText || '')};
})()
"""


def check_jupyterlab(new_page, chapter: Path, base: str, out: Path) -> list[str]:
    expect = expectations(chapter)
    page = new_page()
    try:
        page.goto(f"{base}/lab/tree/chapters/{chapter.name}?reset")
        page.wait_for(f"document.querySelectorAll('.jp-NotebookPanel .jp-Cell').length >= {expect['cells']}", 120,
                      "every cell of the notebook")
        # rendered: no markdown cell still waiting, and the kernel has started and gone idle
        page.wait_for("[...document.querySelectorAll('.jp-MarkdownCell')].every(c => "
                      "c.querySelector('.myst, .jp-RenderedMarkdown'))", 60, "rendered markdown")
        page.wait_for("(document.querySelector('.jp-Notebook-ExecutionIndicator') || {}).dataset?.status === 'idle'"
                      " || document.body.innerText.includes('Kernel status: Idle')", 90, "an idle kernel")
        time.sleep(2)
        state = page.evaluate(JUPYTERLAB_STATE_JS)
        # JupyterLab scrolls inside the notebook: one screenshot at the first exercise, one at the end
        for where, cell in (("exercise", "[...cells].find(c => /Exercise/.test(c.innerText) && "
                                          "c.classList.contains('jp-MarkdownCell'))"),
                            ("end", "cells[cells.length - 1]")):
            page.evaluate(f"(() => {{ const cells = document.querySelectorAll('.jp-NotebookPanel .jp-Cell'); "
                          f"const c = {cell}; if (c) c.scrollIntoView({{block: 'start'}}); }})()")
            time.sleep(1)
            page.screenshot(out / f"jupyterlab_{chapter.stem}_{where}.png")
    finally:
        page.close()
    problems = [f"{p}" for p in state["leftovers"]]
    shown = _plain_quotes(" ".join(state["text"].split()))
    for title in expect["titles"]:
        if _plain_quotes(title) not in shown:
            problems.append(f"exercise title not visible: {title!r}")
    for title in expect["callouts"]:
        if _plain_quotes(title) not in shown:
            problems.append(f"callout title not visible: {title!r}")
    if state["math"] == 0:
        problems.append("no typeset math")
    for n in expect["solutions"]:
        if n >= len(state["collapsed"]) or not state["collapsed"][n]:
            problems.append(f"cell {n}: the solution's input is not collapsed")
    if state["dirty"]:
        problems.append("the notebook shows unsaved changes right after opening")
    if state["unknown"]:  # not a failure: jupyterlab-myst has no footnote citations (see How to use)
        print(f"  note: jupyterlab-myst does not know: {', '.join(sorted(set(state['unknown'])))}", flush=True)
    return [f"JupyterLab {chapter.name}: {p}" for p in problems]


# --- 2. Colab editions, rendered as plain CommonMark + MathJax -----------------------------------
MATH = re.compile(r"(?<!\\)\$\$(.+?)\$\$|(?<![\\$])\$(?!\s)([^$\n]+?)(?<![\s\\])\$(?!\d)", re.S)


def _markdown_html(text: str) -> str:
    """CommonMark (with tables, like Colab's renderer); math kept away from the markdown parser
    and handed to MathJax, as Colab and JupyterLab do."""
    from markdown_it import MarkdownIt

    maths: list[str] = []

    def stash(match: re.Match) -> str:
        maths.append(match.group(0))
        return f"@@{len(maths) - 1}@@"

    code_free = re.split(r"(^ {0,3}`{3,}.*?^ {0,3}`{3,}\s*$|`[^`\n]*`)", text, flags=re.M | re.S)
    protected = "".join(part if i % 2 else MATH.sub(stash, part) for i, part in enumerate(code_free))
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough").render(protected)
    return re.sub(r"@@(\d+)@@", lambda m: html.escape(maths[int(m.group(1))]), rendered)


def mathjax_script() -> Path:
    dist = importlib.metadata.distribution("sphinx-mathjax-offline")
    return Path(dist.locate_file("sphinx-mathjax-offline/static/mathjax/tex-svg-full.js"))


def edition_html(edition: Path, repository: Repository) -> str:
    notebook = json.loads(edition.read_text(encoding="utf-8"))
    raw = repository.raw("")
    parts = []
    for n, cell in enumerate(notebook["cells"]):
        text = _source(cell)
        if cell["cell_type"] == "markdown":
            body = _markdown_html(text).replace(raw, (ROOT.as_uri() + "/"))  # the repository, offline
            parts.append(f'<div class="cell markdown" data-n="{n}">{body}</div>')
        elif cell["cell_type"] == "code":
            meta = cell.get("metadata", {})
            hidden = meta.get("cellView") == "form" and meta.get("jupyter", {}).get("source_hidden") is True
            if hidden and text.startswith("# @title "):
                title = html.escape(text.splitlines()[0].removeprefix("# @title "))
                parts.append(f'<div class="cell code form" data-n="{n}"><b>{title}</b> '
                             f'<a>Show code</a></div>')
            else:
                parts.append(f'<div class="cell code" data-n="{n}"><pre>{html.escape(text)}</pre></div>')
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>{edition.name}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:20px auto;line-height:1.45}}
.cell{{border-left:3px solid #ddd;padding:2px 12px;margin:10px 0}} .code pre{{background:#f6f6f6;max-height:8em;
overflow:hidden;font-size:11px}} .form{{background:#eef}} blockquote{{border-left:4px solid #fa0;margin-left:0;
padding-left:12px}} img{{max-width:100%}}</style>
<script>window.MathJax = {{tex: {{inlineMath: [['$', '$']], displayMath: [['$$', '$$']],
  processEscapes: true}}, startup: {{typeset: true}}}};</script>
<script src="{mathjax_script().as_uri()}"></script></head><body>{''.join(parts)}</body></html>"""


COLAB_STATE_JS = VISIBLE_TEXT_JS + LEFTOVER_CHECKS + r"""
(async () => {
  await MathJax.startup.promise;
  await Promise.all([...document.images].map(i => i.complete ? 0 : new Promise(r => { i.onload = i.onerror = r; })));
  const markdown = [...document.querySelectorAll('.cell.markdown')];
  const refs = [...document.querySelectorAll('h2')].find(h => h.textContent.trim() === 'References');
  return {text: markdown.map(m => m.innerText).join('\n'),
          bold: [...document.querySelectorAll('.cell.markdown strong')].map(b => b.textContent),
          quoted: [...document.querySelectorAll('.cell.markdown blockquote > p:first-child > strong')].map(b => b.textContent),
          leftovers: leftovers(markdown),
          math: document.querySelectorAll('mjx-container').length,
          mathErrors: document.querySelectorAll('mjx-merror, [data-mjx-error]').length,
          brokenImages: [...document.images].filter(i => !i.naturalWidth).map(i => i.src),
          images: document.images.length,
          references: refs && refs.nextElementSibling ? refs.nextElementSibling.querySelectorAll('li').length : 0,
          forms: [...document.querySelectorAll('.cell.form')].map(f => +f.dataset.n),
          solutionsShown: [...document.querySelectorAll('.cell.code pre')].filter(p => p.textContent.startsWith('# @title Solution')).length};
})()
"""


def check_edition(new_page, chapter: Path, out: Path, workdir: Path, edition: Path | None = None) -> list[str]:
    """Problems of ``chapter``'s Colab edition (``edition``: another file to check in its place)."""
    expect = expectations(chapter)
    edition = edition or edition_path(chapter)
    page_file = workdir / f"{edition.stem}.html"
    page_file.write_text(edition_html(edition, Repository.from_config()), encoding="utf-8")
    page = new_page()
    try:
        page.goto(page_file.as_uri())
        page.wait_for("document.readyState === 'complete' && !!window.MathJax && !!MathJax.startup", 60, "MathJax")
        state = page.evaluate(COLAB_STATE_JS)
        page.screenshot(out / f"colab_{chapter.stem}.png")
    finally:
        page.close()
    problems = list(state["leftovers"])
    number = int(chapter.name[:2])
    for k, title in enumerate(expect["titles"], start=1):
        if f"Exercise {number}.{k}: {title}" not in state["bold"]:
            problems.append(f"exercise title not shown in bold: 'Exercise {number}.{k}: {title}'")
    for title in expect["callouts"]:
        if title not in state["quoted"]:
            problems.append(f"callout not shown as a titled quote: {title!r}")
    if state["math"] == 0 or state["mathErrors"]:
        problems.append(f"math: {state['math']} typeset, {state['mathErrors']} errors")
    problems += [f"image does not load: {src}" for src in state["brokenImages"]]
    if not state["references"]:
        problems.append("no references listed after the References heading")
    if len(state["forms"]) != len(expect["solutions"]) or state["solutionsShown"]:
        problems.append(f"{len(state['forms'])} solution forms with hidden code, expected "
                        f"{len(expect['solutions'])}; {state['solutionsShown']} solutions shown")
    return [f"Colab edition {edition.name}: {p}" for p in problems]


# --- the command ----------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("numbers", nargs="*", help="chapter numbers (default: all), e.g. 03 06")
    parser.add_argument("--only", choices=("jupyterlab", "colab"))
    parser.add_argument("--plain-jupyterlab", action="store_true",
                        help="check JupyterLab even without jupyterlab-myst (shows what it garbles; fails)")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "browser_check")
    args = parser.parse_args(argv)
    executable = find_chromium()
    if executable is None:
        print("SKIPPED: no Chromium found (install Debian's chromium, or set CHROMIUM=/path/to/chrome); "
              "the JupyterLab and Colab renderings were not checked", file=sys.stderr)
        return 2
    selected = [c for c in chapters() if not args.numbers or c.name[:2] in args.numbers]
    args.out.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    with chromium(executable) as new_page:
        if args.only in (None, "colab"):
            with tempfile.TemporaryDirectory(prefix="browser-check-colab-") as workdir:
                for chapter in selected:
                    found = check_edition(new_page, chapter, args.out, Path(workdir))
                    print(f"Colab edition {chapter.name}: " + ("ok" if not found else f"{len(found)} problems"),
                          flush=True)
                    problems += found
        if args.only in (None, "jupyterlab"):
            if not myst_installed() and not args.plain_jupyterlab:
                problems.append("JupyterLab: the jupyterlab-myst extension is not installed "
                                "(pip install -r requirements.txt)")
            else:
                with jupyterlab() as base:
                    for chapter in selected:
                        found = check_jupyterlab(new_page, chapter, base, args.out)
                        print(f"JupyterLab {chapter.name}: " + ("ok" if not found else f"{len(found)} problems"),
                              flush=True)
                        problems += found
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"screenshots: {args.out}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
