"""The built HTML in a real headless browser (Debian's chromium driven by playwright).

Runs after the book build (marker ``built``): for every page in the table of contents,
no console errors, math rendered by MathJax, every image loaded, theorem/proof boxes
rendered and no unresolved cross-reference, launch and download links of the expected
form; search finds a chapter word; figures are opaque; a screenshot is saved.

The reader's checks (#39): navigation opens on phones and tablets; claim tables fit their
container with the statement given most of the width; no display equation is clipped at
1280 px; theorem and figure numbers restart in each chapter; no raw TeX in titles, links or
printed outputs; figures stay on white and notes stay readable in dark mode; the ledger's
filter matches all words.
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

    class QuietHandler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # one line per request would bury the test report
            pass

    handler = functools.partial(QuietHandler, directory=str(HTML))
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


# A display equation is clipped when its rendered content is wider than its box and the box
# does not show a scrollbar at all times (overflow-x: scroll), or when the box itself sticks
# out of the article. Headless chromium hides auto scrollbars, as overlay scrollbars do.
# #39 item 6: at 1280 px a code cell's input never scrolls sideways, and the code column holds
# at least CODE_COLUMNS characters of code (the lint's line length); a printed output scrolls
# only when one of its lines is longer than that.
CODE_COLUMNS = 100
CODE_WIDTH_JS = """() => Array.from(document.querySelectorAll('main div.highlight pre')).map(p => {
  const probe = document.createElement('span');
  probe.textContent = 'x'.repeat(100);
  p.appendChild(probe);
  const charWidth = probe.getBoundingClientRect().width / 100;
  probe.remove();
  const style = getComputedStyle(p);
  const inner = p.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  const longest = Math.max(0, ...p.textContent.split('\\n').map(l => l.length));
  return {input: !!p.closest('.cell_input'), scrolls: p.scrollWidth > p.clientWidth + 1,
          columns: Math.floor(inner / charWidth), longest: longest,
          first: p.textContent.split('\\n')[0].slice(0, 40)};
})"""


CLIPPED_MATH_JS = """() => {
  const art = (document.querySelector('main article') || document.querySelector('main'))
    .getBoundingClientRect();
  const out = [];
  document.querySelectorAll('main mjx-container[display="true"]').forEach(m => {
    const r = m.getBoundingClientRect();
    const wide = m.scrollWidth > m.clientWidth + 1 && getComputedStyle(m).overflowX !== 'scroll';
    if (r.width > 0 && (wide || r.right > art.right + 1)) {
      const tex = m.querySelector('mjx-assistive-mml');
      out.push(Math.round(m.scrollWidth) + 'px in ' + Math.round(m.clientWidth) + 'px: ' +
               (tex ? tex.textContent.slice(0, 50) : '?'));
    }
  });
  return out;
}"""

# Numbers shown on theorem-like boxes and figure captions ("Theorem 12.3", "Fig. 12.1").
CAPTION_NUMBERS_JS = """() => Array.from(document.querySelectorAll(
    'main div.proof > p.admonition-title > span.caption-number, main figcaption .caption-number'))
  .map(e => e.textContent.trim())"""

# Text a reader sees as a title or a link name: the tab title, the navigation, prev/next,
# the links inside the page (claim tables' "checked in", toctrees).
TITLE_TEXTS_JS = """() => [document.title].concat(Array.from(document.querySelectorAll(
    'nav a, .prev-next-area a, main a:not(.headerlink)'))
  .filter(a => !a.querySelector('mjx-container'))
  .map(a => a.textContent.trim()))"""
RAW_TEX = re.compile(r"\\[A-Za-z]+|\$[^$\s]|\\\(")

# Printed outputs (stdout, text/plain) of the notebooks: no TeX source left for the reader.
OUTPUT_TEXT_JS = """() => Array.from(document.querySelectorAll(
    'main .cell_output .output.stream, main .cell_output .output.text_plain'))
  .map(e => e.textContent).join('\\n')"""

# Dark mode: the first opaque background behind every figure, and the contrast of notes.
DARK_MODE_JS = """() => {
  const rgb = s => (s.match(/[\\d.]+/g) || []).map(Number);
  const bgOf = el => {
    for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.9)) return c.slice(0, 3);
    }
    return rgb(getComputedStyle(document.body).backgroundColor).slice(0, 3);
  };
  const lum = c => {
    const f = v => { v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
  };
  const contrast = (a, b) => { const x = lum(a), y = lum(b);
    return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
  const figures = Array.from(document.querySelectorAll('main img, main svg.ledger-figure-svg'))
    .filter(i => !i.closest('.bd-header-article, .header-article-items'))
    .filter(i => i.getBoundingClientRect().width > 40)
    .filter(i => Math.min(...bgOf(i)) < 250 || getComputedStyle(i).filter !== 'none')
    .map(i => (i.getAttribute('src') || i.getAttribute('class') || '?').slice(-40));
  const notes = Array.from(document.querySelectorAll(
      'main .ledger-note, main details.ledger-chapter summary small, main .finding-claim, ' +
      'main .ledger-summary, main .ledger-sweep'))
    .filter(e => e.getBoundingClientRect().width > 0)
    .map(e => [e.className || e.tagName, contrast(rgb(getComputedStyle(e).color), bgOf(e))])
    .filter(x => x[1] < 4.5).map(x => x[0] + ' ' + x[1].toFixed(2));
  return {figures: figures, notes: notes};
}"""


def chapter_of(docname: str) -> int | None:
    m = re.match(r"book/(\d\d)-", docname)
    return int(m.group(1)) if m else None


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
        # -- display equations: none clipped at 1280 px (#39 item 3)
        clipped = page.evaluate(CLIPPED_MATH_JS)
        problems += [f"clipped display equation ({c})" for c in clipped]
        # -- code: inputs never scroll sideways at 1280 px; the column holds 100 characters
        for c in page.evaluate(CODE_WIDTH_JS):
            if c["input"] and c["scrolls"]:
                problems.append(
                    f"code input scrolls sideways ({c['longest']} characters in a"
                    f" {c['columns']}-character column): {c['first']!r}"
                )
            elif c["columns"] < CODE_COLUMNS:
                problems.append(f"code column holds {c['columns']} < {CODE_COLUMNS} characters")
            elif c["scrolls"] and c["longest"] <= CODE_COLUMNS:
                problems.append(f"output of {c['longest']} characters scrolls: {c['first']!r}")
        # -- theorem and figure numbers restart in each chapter: "Theorem 12.3" (#39 item 4)
        ch = chapter_of(docname)
        if ch is not None:
            for label in page.evaluate(CAPTION_NUMBERS_JS):
                m = re.search(r"(\d+(?:\.\d+)*)$", label)
                if not m or not m.group(1).startswith(f"{ch}."):
                    problems.append(f"{label!r} is not numbered within chapter {ch}")
        # -- no raw TeX in the tab title, the navigation or link names (#39 item 5)
        titles = page.evaluate(TITLE_TEXTS_JS)
        problems += sorted(
            {f"raw TeX in a title or link: {t!r}" for t in titles if RAW_TEX.search(t)}
        )
        outputs = page.evaluate(OUTPUT_TEXT_JS)
        for m in re.finditer(r"\$\\{1,2}[A-Za-z]+|\\\\[A-Za-z]+", outputs):
            problems.append(
                f"raw TeX in a printed output: {outputs[max(0, m.start() - 20) : m.end() + 20]!r}"
            )
        # -- dark mode: figures on white, notes readable (#39 item 10)
        page.evaluate("() => { document.documentElement.dataset.theme = 'dark'; }")
        page.wait_for_timeout(50)
        dark = page.evaluate(DARK_MODE_JS)
        problems += [f"dark mode: figure not on white: {f}" for f in dark["figures"]]
        problems += [f"dark mode: low contrast note: {n}" for n in dark["notes"]]
        page.evaluate("() => { document.documentElement.dataset.theme = 'light'; }")
        light = page.evaluate(DARK_MODE_JS)
        problems += [f"light mode: low contrast note: {n}" for n in light["notes"]]
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


VISIBLE_ROWS_JS = """() => Array.from(document.querySelectorAll('.ledger-table tbody tr'))
  .filter(tr => !tr.hidden).map(tr => tr.querySelector('code').textContent)"""


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
        # all words, in any order, not one substring (#39 item 10): two words of a statement,
        # reversed, keep its row; a word no record has empties the table
        page.select_option("#ledger-verdict", "")
        rec = next(r for r in records if len(re.findall(r"[a-z]{4,}", r["statement"])) >= 3)
        words = re.findall(r"[a-z]{4,}", rec["statement"])
        page.fill("#ledger-q", f"{words[-1]} {words[0]}")
        rows = page.evaluate(VISIBLE_ROWS_JS)
        assert rec["id"] in rows, f"'{words[-1]} {words[0]}' hides {rec['id']}"
        page.fill("#ledger-q", f"{words[0]} zzqqxyzzy")
        assert page.evaluate(VISIBLE_ROWS_JS) == []
    finally:
        page.close()
    assert not errors, errors


# -- #39 item 1: navigation on phones and tablets ------------------------------------------


@pytest.mark.parametrize("width", [390, 900, 1280], ids=["phone", "tablet", "laptop"])
def test_navigation_opens_on_narrow_screens(browser, site, width):
    """A tap on the visible hamburger opens the chapter list; a tap on the visible
    "Contents" button opens the page's contents (at 1280 px too, where the "on this page"
    sidebar gives its width to the code, #39 item 6)."""
    page = browser.new_page(viewport={"width": width, "height": 844})
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(f"{site}/book/07-q-learning-pd2z/rates.html", wait_until="load")
        page.wait_for_timeout(300)
        if width < 1200:  # wider, the chapter list is always shown
            page.locator("button.primary-toggle:visible").first.click()
            page.wait_for_timeout(300)
            links = page.evaluate(
                """() => { const d = document.getElementById('pst-primary-sidebar-modal');
                  return d && d.open ? Array.from(d.querySelectorAll('a'))
                    .filter(a => a.getBoundingClientRect().width > 0).map(a => a.href) : []; }"""
            )
            chapters = {h for h in links if re.search(r"/book/\d\d-[^/]+/index\.html", h)}
            assert len(chapters) >= 10, f"at {width} px the hamburger opened {len(chapters)}"
            page.keyboard.press("Escape")
            page.wait_for_timeout(200)
        page.locator("button.secondary-toggle:visible").first.click()
        page.wait_for_timeout(300)
        anchors = page.evaluate(
            """() => { const d = document.getElementById('pst-secondary-sidebar-modal');
              return d && d.open ? Array.from(d.querySelectorAll('a[href^="#"]'))
                .filter(a => a.getBoundingClientRect().width > 0).length : 0; }"""
        )
        assert anchors > 0, f"at {width} px the Contents button opened no in-page contents"
    finally:
        page.close()
    assert not errors, errors


# -- #39 item 2: claim tables ---------------------------------------------------------------

TABLE_GEOMETRY_JS = """() => {
  document.querySelectorAll('details.ledger-chapter').forEach(d => { d.open = true; });
  const article = document.querySelector('main article').getBoundingClientRect();
  return Array.from(document.querySelectorAll('table.ledger-table')).map(t => {
    const box = t.parentElement.getBoundingClientRect();
    const rows = Array.from(t.querySelectorAll('tbody tr'))
      .map(r => r.getBoundingClientRect().height);
    const heads = Array.from(t.querySelectorAll('thead th')).map(th => th.textContent.trim());
    const claimCol = heads.indexOf('claim');
    const first = t.querySelector('tbody tr');
    const claimCell = first && claimCol >= 0 ? first.children[claimCol] : null;
    return {width: t.getBoundingClientRect().width, box: box.width, article: article.width,
            boxRight: box.right, articleRight: article.right,
            claimWidth: claimCell ? claimCell.getBoundingClientRect().width : 0,
            maxRow: Math.max(0, ...rows), rows: rows.length,
            height: t.getBoundingClientRect().height};
  });
}"""


def claim_table_pages() -> list[str]:
    return ["book/ledger"] + [
        d for d in toc_docnames() if re.fullmatch(r"book/\d\d-[^/]+/index", d)
    ]


@pytest.mark.parametrize("width", [1280, 390], ids=["desktop", "phone"])
def test_claim_tables_fit(browser, site, width):
    """On the ledger and every chapter index: no claim table wider than its container or the
    article; at 1280 px the statement gets most of the width and no row is taller than
    400 px (the ids wrap instead of widening the table)."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    problems = []
    try:
        for doc in claim_table_pages():
            page.goto(f"{site}/{doc}.html", wait_until="load")
            for k, t in enumerate(page.evaluate(TABLE_GEOMETRY_JS)):
                where = f"{doc} table {k}"
                if t["width"] > t["box"] + 1 or t["boxRight"] > t["articleRight"] + 1:
                    problems.append(f"{where}: {t['width']:.0f} px in a {t['box']:.0f} px box")
                if width >= 1200:
                    if t["claimWidth"] < 0.4 * t["width"]:
                        problems.append(
                            f"{where}: claim column {t['claimWidth']:.0f} of {t['width']:.0f} px"
                        )
                    if t["maxRow"] > 400:
                        problems.append(f"{where}: a row {t['maxRow']:.0f} px tall")
    finally:
        page.close()
    assert not problems, "; ".join(problems[:12]) + f" ({len(problems)} problems)"


# -- #39 item 5: raw TeX in the search index --------------------------------------------------


def test_no_raw_tex_in_search_titles():
    """The search index's page titles (shown as search results) carry no TeX source."""
    text = (HTML / "searchindex.js").read_text(encoding="utf-8")
    import json

    index = json.loads(text[text.index("(") + 1 : text.rindex(")")])
    bad = [t for t in index["titles"] if RAW_TEX.search(t)]
    assert not bad, bad
