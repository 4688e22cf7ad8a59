"""The built HTML in a real headless browser (Debian's chromium driven by playwright).

Runs after the book build (marker ``built``): for every page in the table of contents,
no console errors, math rendered by MathJax, every image loaded, theorem/proof boxes
rendered and no unresolved cross-reference, launch and download links of the expected
form; search finds a chapter word; figures are opaque; a screenshot is saved.
"""

from __future__ import annotations

import functools
import http.server
import re
import shutil
import threading
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
pytestmark = pytest.mark.built

# Console messages we accept, each with its reason.
ALLOWED_CONSOLE = {
    # sphinx-book-theme reads an empty theme mode from localStorage on first visit.
    "Got invalid theme mode": "theme default on a fresh profile",
}
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
]


def toc_docnames() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    names = [toc["root"]]

    def walk(entries):
        for e in entries or []:
            if "file" in e:
                names.append(e["file"])
            walk(e.get("sections"))
            walk(e.get("chapters"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return names


def source_of(docname: str) -> str:
    return (ROOT / f"{docname}.md").read_text(encoding="utf-8")


def is_notebook(docname: str) -> bool:
    text = source_of(docname)
    return text.startswith("---") and "jupytext" in text.split("---", 2)[1]


def repo_settings() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]


@pytest.fixture(scope="module")
def site():
    if not (HTML / "index.html").exists():
        pytest.fail("no built HTML in _build/html: run the book build first (make test does)")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(HTML))
    handler.log_message = lambda *a, **k: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("Debian's chromium is not installed (make test installs it with apt-get)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        yield b
        b.close()


def open_page(browser, url):
    """Open ``url``; return the page and the list of console errors and failed requests."""
    page = browser.new_page(viewport={"width": 1280, "height": 1800})
    errors = []

    def on_console(msg):
        if msg.type == "error" and not any(k in msg.text for k in ALLOWED_CONSOLE):
            errors.append(f"console: {msg.text}")

    page.on("console", on_console)
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    page.on("requestfailed", lambda req: errors.append(f"request failed: {req.url}"))
    page.on(
        "response",
        lambda r: errors.append(f"HTTP {r.status} for {r.url}") if r.status >= 400 else None,
    )
    page.goto(url, wait_until="load")
    return page, errors


def wait_for_math(page):
    if not page.evaluate("() => !!document.querySelector('script[src*=\"mathjax\"]')"):
        return  # Sphinx loads MathJax only on pages that have math
    page.wait_for_function(
        "() => window.MathJax && window.MathJax.startup && window.MathJax.startup.promise",
        timeout=20000,
    )
    page.evaluate("() => window.MathJax.startup.promise")


VISIBLE_TEXT_JS = """() => {
  const clone = document.querySelector('main').cloneNode(true);
  clone.querySelectorAll('pre, code, script, style, mjx-container, .highlight')
    .forEach(e => e.remove());
  return clone.innerText;
}"""


# A TAB in place of "\t" leaves "imes" (\times) or "ext{" (\text{) behind; "\n" eats "\nabla".
LOST_BACKSLASH_TEXT = (r"\bimes\b", r"(?<![A-Za-z])ext\{", r"\babla\b")
LOST_BACKSLASH_MATH = (r"(?<![tT])imes", r"(?<![tT])ext\{", r"(?<![nN])abla")
MATH_TEXT_JS = """() => Array.from(document.querySelectorAll('main mjx-assistive-mml, main .math'))
  .map(e => e.textContent).join(' ')"""


def check_page(browser, site, docname) -> list[str]:
    problems = []
    page, errors = open_page(browser, f"{site}/{docname}.html")
    try:
        wait_for_math(page)
        page.wait_for_timeout(200)
        problems += errors
        # -- math: every math node typeset, no raw TeX left in the visible text
        n_math = page.locator("main .math").count()
        n_mjx = page.locator("main mjx-container").count()
        if n_math and n_mjx < n_math:
            problems.append(f"math not rendered: {n_mjx} MathJax outputs for {n_math} math nodes")
        text = page.evaluate(VISIBLE_TEXT_JS)
        for raw in ("$$", "\\begin{", "\\(", "\\["):
            if raw in text:
                problems.append(f"raw math {raw!r} visible")
        # -- MathJax errors, and the traces of a lost backslash (\t of \times or \text eaten)
        n_err = page.locator("main mjx-merror").count()
        if n_err:
            problems.append(f"{n_err} MathJax error nodes (mjx-merror)")
        math_text = page.evaluate(MATH_TEXT_JS)
        traces = [t for t in LOST_BACKSLASH_TEXT if re.search(t, text)]
        traces += [t for t in LOST_BACKSLASH_MATH if re.search(t, math_text)]
        problems += [f"text matching {t!r} left by a lost backslash" for t in traces]
        # -- images: every <img> loaded
        broken = page.evaluate("""() => Array.from(document.querySelectorAll('main img'))
            .filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src'))""")
        problems += [f"broken image {src}" for src in broken]
        # -- theorem and proof boxes, cross-references
        src = source_of(docname)
        n_prf = len(
            re.findall(
                r"```\{prf:(theorem|lemma|proposition|definition|assumption|proof|corollary)\}", src
            )
        )
        n_boxes = page.locator("main div.proof").count()
        if n_boxes < n_prf:
            problems.append(f"only {n_boxes} of {n_prf} theorem/proof boxes rendered")
        if "???" in text:
            problems.append("unresolved reference shown as ???")
        unresolved = page.evaluate("""() => Array.from(
                document.querySelectorAll('main .xref, main .missing-reference'))
            .filter(e => !e.closest('a')).map(e => e.textContent)""")
        problems += [f"unresolved cross-reference {t!r}" for t in unresolved]
        # -- launch (Binder) and .ipynb download links on notebook pages
        if is_notebook(docname):
            repo = repo_settings()
            m = re.match(r"https://github.com/([^/]+)/([^/]+)", repo["url"])
            expected = (
                f"https://mybinder.org/v2/gh/{m.group(1)}/{m.group(2)}/{repo['branch']}"
                f"?urlpath=tree/{docname}.md"
            )
            hrefs = page.evaluate(
                "() => Array.from(document.querySelectorAll('a')).map(a => a.href)"
            )
            if expected not in hrefs:
                problems.append(f"no Binder link {expected}")
            ipynb = [h for h in hrefs if h.endswith(f"{Path(docname).name}.ipynb")]
            if not ipynb:
                problems.append("no .ipynb download link")
            else:
                resp = page.request.get(ipynb[0])
                nb = resp.json() if resp.ok else {}
                if not any(
                    c.get("outputs") for c in nb.get("cells", []) if c.get("cell_type") == "code"
                ):
                    problems.append(f"the .ipynb download {ipynb[0]} has no executed outputs")
    finally:
        page.close()
    return problems


@pytest.mark.parametrize("docname", toc_docnames())
def test_page_renders(browser, site, docname):
    problems = check_page(browser, site, docname)
    assert not problems, f"{docname}: " + "; ".join(problems)


def test_search_finds_a_chapter_word(browser, site):
    page, errors = open_page(browser, f"{site}/search.html?q=Ruppert")
    try:
        page.wait_for_selector("#search-results li a", timeout=20000)
        links = page.evaluate(
            "() => Array.from(document.querySelectorAll('#search-results li a')).map(a => a.href)"
        )
    finally:
        page.close()
    assert any("07-q-learning-pd2z" in h for h in links), links
    assert not errors, errors


def test_screenshot_of_a_chapter_page(browser, site):
    out = ROOT / "_build" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    page, errors = open_page(browser, f"{site}/book/07-q-learning-pd2z/rates.html")
    try:
        wait_for_math(page)
        page.screenshot(path=str(out / "07-rates.png"), full_page=False)
    finally:
        page.close()
    assert (out / "07-rates.png").stat().st_size > 10_000


def test_figures_are_opaque_on_white():
    """Dark mode: figures keep an opaque white background."""
    from PIL import Image

    pngs = sorted((HTML / "_images").glob("*.png"))
    assert pngs, "no figures in the built book"
    for png in pngs:
        img = Image.open(png).convert("RGBA")
        alpha = img.getchannel("A")
        assert alpha.getextrema()[0] == 255, f"{png.name} has transparent pixels"
        corner = img.getpixel((1, 1))[:3]
        assert min(corner) >= 250, f"{png.name} corner is {corner}, not white"


LEDGER_CHECK_JS = """() => {
  document.querySelectorAll('details.ledger-chapter').forEach(d => { d.open = true; });
  const w = window.innerWidth;
  const badges = Array.from(document.querySelectorAll('.ledger-table .ledger-badge'));
  const hidden = badges.filter(b => {
    const r = b.getBoundingClientRect();
    return !(r.width > 0 && r.height > 0 && r.left >= 0 && r.right <= w);
  }).map(b => b.closest('tr').querySelector('code').textContent);
  return {n: badges.length, hidden: hidden,
          pageWidth: document.documentElement.scrollWidth, viewport: w};
}"""


@pytest.mark.parametrize("viewport", [(1280, 800), (390, 844)], ids=["desktop", "phone"])
def test_ledger_is_readable(browser, site, viewport):
    """Every verdict badge visible without scrolling the page sideways; the filter works;
    the downloads hold the same records; a screenshot of each viewport is saved."""
    width, height = viewport
    page = browser.new_page(viewport={"width": width, "height": height})
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(f"{site}/book/ledger.html", wait_until="load")
        records = page.request.get(f"{site}/_static/ledger.json").json()
        csv_text = page.request.get(f"{site}/_static/ledger.csv").text()
        state = page.evaluate(LEDGER_CHECK_JS)
        assert state["n"] == len(records) > 0
        assert not state["hidden"], (
            f"verdict badges off screen at {viewport}: {state['hidden'][:5]}"
        )
        assert state["pageWidth"] <= width + 1, f"the page scrolls sideways: {state}"
        assert len(csv_text.strip().splitlines()) == len(records) + 1
        out = ROOT / "_build" / "screenshots"
        out.mkdir(parents=True, exist_ok=True)
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(out / f"ledger-{width}x{height}.png"), full_page=False)
        page.locator("details.ledger-chapter").first.scroll_into_view_if_needed()
        page.screenshot(path=str(out / f"ledger-{width}x{height}-tables.png"), full_page=False)
        # the filter: one claim id leaves exactly one row; a verdict filter leaves only it
        target = records[0]["id"]
        page.fill("#ledger-q", target)
        rows = page.evaluate(
            "() => Array.from(document.querySelectorAll('.ledger-table tbody tr'))"
            ".filter(tr => !tr.hidden).map(tr => tr.querySelector('code').textContent)"
        )
        assert target in rows and all(target in r for r in rows)
        page.fill("#ledger-q", "")
        page.select_option("#ledger-verdict", "not reproduced")
        verdicts = page.evaluate(
            "() => Array.from(document.querySelectorAll('.ledger-table tbody tr'))"
            ".filter(tr => !tr.hidden).map(tr => tr.dataset.verdict)"
        )
        expected = sum(r["verdict"] == "not reproduced" for r in records)
        assert len(verdicts) == expected and set(verdicts) <= {"not reproduced"}
    finally:
        page.close()
    assert not errors, errors
