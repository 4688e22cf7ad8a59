"""Sphinx extension: what the reader's copy of the book needs.

* **Offline math.** MathJax 3 is served with the book (copied from the PyPI package
  ``django-static-mathjax``, which ships MathJax 3.2.2) instead of being loaded from a
  CDN, so formulas render without internet and a browser test can see them.
* **Notebook downloads with outputs.** Each notebook page's ``.ipynb`` download carries
  the executed outputs (see :func:`_executed_notebook_downloads`).
* **Clean pages.** Repeated inline scripts are dropped (see :func:`_dedupe_inline_scripts`).
* **Numbers per chapter.** Theorem-like boxes and figures are numbered within their chapter
  ("Theorem 12.3", "Fig. 12.1"), not across the book, where "Theorem 31" collided with the
  papers' own numbers (see :func:`_number_per_chapter`).
* **Plain-text titles.** A page title with math (``$1/\\sqrt d$``) is shown as text
  (``1/√d``) wherever the title is reused: the tab title, the navigation, prev/next links,
  claim tables and search results (see :func:`tex_to_text`). The heading keeps its math.
* **Build environment.** ``{book-environment}`` renders the Python and package versions,
  the scale, the seed and the compute device used to build the book (for the status page).
"""

from __future__ import annotations

import importlib.metadata as md
import platform
import shutil
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive

MATHJAX_ENTRY = "mathjax/tex-chtml.js"
_SKIP = shutil.ignore_patterns(
    "sre",
    "*-full*.js",
    "tex-svg*.js",
    "tex-mml-*.js",
    "mml-*.js",
    "svg",
    "node-main.js",
    "latest.js",
)
PACKAGES = (
    "numpy",
    "scipy",
    "torch",
    "matplotlib",
    "jupyter-book",
    "sphinx",
    "myst-nb",
    "sphinx-proof",
    "jupytext",
    "nbval",
    "jupyter-cache",
)


def mathjax_source() -> Path:
    """The ``es5`` folder of the MathJax 3 copy that ships in ``django-static-mathjax``."""
    import mathjax  # the module of django-static-mathjax

    path = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    if not (path / "tex-chtml.js").exists():
        raise FileNotFoundError(
            f"MathJax 3 not found at {path}; is django-static-mathjax installed?"
        )
    return path


def _use_local_mathjax(app, config):
    config.mathjax_path = MATHJAX_ENTRY


def _executed_notebook_downloads(app, exception):
    """Make every ``_sources/<page>.ipynb`` download carry the executed outputs.

    sphinx-book-theme offers ``_build/jupyter_execute/<page>.ipynb`` for download, but
    myst-nb 1.4 writes that file *without* outputs when it takes them from the execution
    cache. Rewrite it from the cache, matched exactly as myst-nb matches it.
    """
    if exception is not None or app.builder.format != "html":
        return
    import nbformat
    from jupyter_cache import get_cache

    from lib.sphinxext.cache import read_like_myst_nb

    cache_path = getattr(app.config, "nb_execution_cache_path", "") or str(
        Path(app.outdir).parent / ".jupyter_cache"
    )
    if not Path(cache_path).exists():
        return
    cache = get_cache(cache_path)
    sources = Path(app.outdir) / "_sources"
    for docname in sorted(app.env.found_docs):
        target = sources / f"{docname}.ipynb"
        src = Path(app.env.doc2path(docname))
        if not target.exists() or src.suffix != ".md":
            continue
        try:
            _, merged = cache.merge_match_into_notebook(read_like_myst_nb(src))
        except KeyError:
            continue  # not cached: the build executed it, and myst-nb wrote the outputs itself
        merged.metadata.pop("source_map", None)
        target.write_text(nbformat.writes(merged), encoding="utf-8")


def _copy_mathjax(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    dest = Path(app.outdir) / "_static" / "mathjax"
    if (dest / "tex-chtml.js").exists():
        return
    shutil.copytree(mathjax_source(), dest, ignore=_SKIP, dirs_exist_ok=True)


def _dedupe_inline_scripts(app, pagename, templatename, context, doctree):
    """Drop repeated inline <script> bodies (sphinx-thebe's config script is registered
    twice under jupyter-book 1.0.4, which redeclares a const and raises a page error)."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for js in scripts:
        attrs = getattr(js, "attributes", None)
        if not attrs or "body" not in attrs:
            kept.append(js)  # only inline scripts are de-duplicated (files already are)
            continue
        key = repr(sorted(attrs.items()))
        if key in seen:
            continue
        seen.add(key)
        kept.append(js)
    context["script_files"] = kept


# --- plain-text titles --------------------------------------------------------------------

_TEX_SYMBOLS = {
    "alpha": "α",
    "beta": "β",
    "gamma": "γ",
    "delta": "δ",
    "epsilon": "ε",
    "varepsilon": "ε",
    "zeta": "ζ",
    "eta": "η",
    "theta": "θ",
    "kappa": "κ",
    "lambda": "λ",
    "mu": "μ",
    "nu": "ν",
    "xi": "ξ",
    "pi": "π",
    "rho": "ρ",
    "sigma": "σ",
    "tau": "τ",
    "phi": "φ",
    "varphi": "φ",
    "chi": "χ",
    "psi": "ψ",
    "omega": "ω",
    "Gamma": "Γ",
    "Delta": "Δ",
    "Theta": "Θ",
    "Lambda": "Λ",
    "Sigma": "Σ",
    "Phi": "Φ",
    "Psi": "Ψ",
    "Omega": "Ω",
    "sqrt": "√",
    "infty": "∞",
    "le": "≤",
    "leq": "≤",
    "ge": "≥",
    "geq": "≥",
    "neq": "≠",
    "approx": "≈",
    "sim": "∼",
    "cdot": "·",
    "times": "×",
    "to": "→",
    "in": "∈",
    "ell": "ℓ",
    "nabla": "∇",
    "partial": "∂",
    "sum": "Σ",
    "prod": "∏",
    "pm": "±",
    "ldots": "…",
    "dots": "…",
    ",": "\u2009",
    ";": " ",
    ":": " ",
    "!": "",
    " ": " ",
    "quad": " ",
    "qquad": "  ",
    "{": "{",
    "}": "}",
    "|": "‖",
    "%": "%",
    "_": "_",
}
_TEX_DROP = {
    "left",
    "right",
    "big",
    "Big",
    "bigl",
    "bigr",
    "Bigl",
    "Bigr",
    "displaystyle",
    "mathcal",
    "mathbb",
    "mathrm",
    "mathbf",
    "mathit",
    "text",
    "textrm",
    "operatorname",
    "boldsymbol",
    "bm",
    "mathsf",
    "mathscr",
}
_SUPERSCRIPT = str.maketrans("0123456789-+()n", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺⁽⁾ⁿ")


def tex_to_text(tex: str) -> str:
    """A readable plain-text rendering of inline TeX for titles: ``1/\\sqrt d`` -> ``1/√d``,
    ``|\\mathcal T|\\,w\\log A`` -> ``|T| w log A`` (a thin space). Unknown commands lose
    their backslash; a simple superscript becomes Unicode superscripts; braces are dropped."""
    import re

    def command(m):
        name = m.group(1)
        if name in _TEX_SYMBOLS:
            return _TEX_SYMBOLS[name]
        return f" {name} "  # \\log, \\exp, \\max, ...: the operator's name

    drop = "|".join(sorted(_TEX_DROP, key=len, reverse=True))
    text = re.sub(rf"\\({drop})\b\s*", "", tex)  # \\mathcal T -> T
    text = re.sub(r"\\([A-Za-z]+|[,;:! {}|%_])", command, text)
    text = re.sub(
        r"\^\{?([0-9n+\-().]+)\}?",
        lambda m: (
            m.group(1).translate(_SUPERSCRIPT)
            if all(c in "0123456789-+()n" for c in m.group(1))
            else "^" + m.group(1)
        ),
        text,
    )
    text = text.replace("{", "").replace("}", "")
    text = re.sub(r"[ \t\n]+", " ", text)
    return re.sub(r"(?<=[√(]) | (?=\))", "", text).strip()


def _plain_math(node) -> None:
    """Replace every math node under ``node`` by its plain-text rendering."""
    for math in list(node.findall(nodes.math)):
        math.replace_self(nodes.Text(tex_to_text(math.astext())))


def _plain_titles(app, doctree) -> None:
    """The title of the page (and its entries in the table of contents) as plain text: the
    tab title, the navigation, prev/next and search results show ``1/√d``, not TeX."""
    env = app.env
    docname = env.docname
    for store in (env.titles, env.longtitles):
        if docname in store:
            _plain_math(store[docname])
    if docname in getattr(env, "tocs", {}):
        for ref in env.tocs[docname].findall(nodes.reference):
            _plain_math(ref)


# --- numbers per chapter ------------------------------------------------------------------


def _number_per_chapter(app, env) -> list[str]:
    """Renumber theorem-like boxes and figures within each chapter.

    Sphinx numbers every enumerable node (figures; sphinx-proof's theorem, lemma, ...) across
    the whole book in table-of-contents order. Runs after Sphinx's own numbering (on
    ``env-get-updated``) and rewrites each number of a page in ``book/NN-*/`` as ``(NN, k)``,
    k counting that kind of box in the chapter in the same order. References ({prf:ref},
    {numref}) read the same numbers. Returns the pages whose numbers changed."""
    import re

    groups: dict[tuple[int, str], list] = {}
    for docname, kinds in env.toc_fignumbers.items():
        m = re.match(r"book/(\d\d)-[^/]+/", docname)
        if not m:
            continue
        for figtype, numbers in kinds.items():
            for target, number in numbers.items():
                groups.setdefault((int(m.group(1)), figtype), []).append(
                    (tuple(number), docname, target)
                )
    changed = set()
    for (chapter, figtype), items in groups.items():
        items.sort(key=lambda item: item[0])
        for k, (old, docname, target) in enumerate(items, start=1):
            if old != (chapter, k):
                env.toc_fignumbers[docname][figtype][target] = (chapter, k)
                changed.add(docname)
    return sorted(changed)


def _commit() -> str:
    """The commit the book was built from, with a note when the tree has uncommitted changes."""
    import subprocess

    from lib.records import ROOT

    def git(*args):
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True, timeout=20
        ).stdout.strip()

    try:
        commit = git("log", "-1", "--format=%h (%cs)")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout)"
    return commit + (" with uncommitted changes" if dirty else "")


def environment_rows() -> list[tuple[str, str]]:
    """(name, value) rows describing the build environment."""
    import time

    from lib import scale, seed

    rows = [
        ("built", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())),
        ("commit", _commit()),
        ("Python", platform.python_version()),
        ("platform", platform.platform(terse=True)),
    ]
    for pkg in PACKAGES:
        try:
            rows.append((pkg, md.version(pkg)))
        except md.PackageNotFoundError:
            rows.append((pkg, "not installed"))
    try:
        from lib.device import default_device

        rows.append(("compute device", str(default_device())))
    except Exception as exc:  # torch missing: still build the page
        rows.append(("compute device", f"unavailable ({exc.__class__.__name__})"))
    rows += [("BOOK_SCALE", scale.scale_name()), ("BOOK_SEED", str(seed.book_seed()))]
    return rows


class BookEnvironment(Directive):
    has_content = False

    def run(self):
        table = nodes.table(classes=["book-environment"])
        tgroup = nodes.tgroup(cols=2)
        table += tgroup
        tgroup += nodes.colspec(colwidth=1)
        tgroup += nodes.colspec(colwidth=2)
        tbody = nodes.tbody()
        for name, value in environment_rows():
            row = nodes.row()
            for text in (name, value):
                entry = nodes.entry()
                entry += nodes.paragraph(text=text)
                row += entry
            tbody += row
        tgroup += tbody
        return [table]


def setup(app):
    app.connect("config-inited", _use_local_mathjax)
    app.connect("build-finished", _copy_mathjax)
    app.connect("build-finished", _executed_notebook_downloads)
    app.connect("html-page-context", _dedupe_inline_scripts, priority=900)
    app.connect("doctree-read", _plain_titles, priority=900)
    app.connect("env-get-updated", _number_per_chapter, priority=900)
    app.add_directive("book-environment", BookEnvironment)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
