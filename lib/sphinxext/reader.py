"""Sphinx extension: what the reader's copy of the book needs.

* **Offline math.** MathJax 3 is served with the book (copied from the PyPI package
  ``django-static-mathjax``, which ships MathJax 3.2.2) instead of being loaded from a
  CDN, so formulas render without internet and a browser test can see them.
* **Notebook downloads with outputs.** Each notebook page's ``.ipynb`` download carries
  the executed outputs (see :func:`_executed_notebook_downloads`).
* **Clean pages.** Repeated inline scripts are dropped (see :func:`_dedupe_inline_scripts`).
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
    app.add_directive("book-environment", BookEnvironment)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
