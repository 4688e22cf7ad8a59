"""Build plumbing: execute each notebook once per gate, and keep cached outputs per chapter.

``make test`` runs every chapter notebook under nbval; ``conftest.py`` saves the outputs of
each notebook that passed to :func:`lib.records.executed_dir`. :func:`fill_cache` moves them
into jupyter-book's execution cache (``_build/.jupyter_cache``), keyed exactly as myst-nb keys
the MyST source, so that the strict ``jupyter-book build`` that follows finds every notebook
cached and executes nothing a second time.

Cached outputs also depend on code outside the notebook. A *chapter stamp* hashes what one
chapter's outputs depend on:

* the core of the library (every ``lib/*.py`` at the top level and ``lib/sphinxext/``),
  ``conftest.py``, ``requirements.txt`` and ``pyproject.toml``;
* the paper modules its notebooks import (``from lib.papers import x``,
  ``from lib.papers.x import y``; a subpackage counts whole);
* ``BOOK_SCALE`` and ``BOOK_SEED``.

:func:`invalidate_stale` drops the cached outputs, the executed copies and the claim records
of exactly the chapters whose stamp changed, so a change to one paper module re-runs only the
chapters that import it, and ``make book`` never publishes outputs of an older library.

Usage: ``python -m lib.sphinxext.cache {fill-cache,invalidate-stale,clear-records,check-build}``.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import shutil
import sys
from pathlib import Path

from lib.records import FAIL, ROOT, clear_records, executed_dir, ledger_dir, load_records

CORE_EXTRA = ("conftest.py", "requirements.txt", "pyproject.toml")
_CHAPTER_DIR = re.compile(r"^(\d\d)-")


def _paths(root: Path) -> dict:
    build = root / "_build"
    return {"build": build, "cache": build / ".jupyter_cache", "stamp": build / ".exec-stamp.json"}


def read_like_myst_nb(md_path: Path):
    """Read a MyST notebook exactly as myst-nb does during the build."""
    from myst_nb.core.read import read_myst_markdown_notebook
    from myst_parser.config.main import MdParserConfig

    text = Path(md_path).read_text(encoding="utf-8")
    return read_myst_markdown_notebook(text, MdParserConfig(), path=md_path)


def is_myst_notebook(path: Path) -> bool:
    """True for a ``.md`` file whose front matter is a jupytext header with a kernelspec."""
    text = Path(path).read_text(encoding="utf-8")
    if not text.startswith("---"):
        return False
    header = text.split("---", 2)[1]
    return "jupytext" in header and "kernelspec" in header


def chapter_notebooks(root: Path = ROOT) -> dict[str, list[Path]]:
    """``{"07": [book/07-.../theory.md, ...], ...}``: the MyST notebooks of each chapter."""
    out: dict[str, list[Path]] = {}
    for folder in sorted((root / "book").iterdir()):
        m = _CHAPTER_DIR.match(folder.name)
        if not (folder.is_dir() and m):
            continue
        nbs = [p for p in sorted(folder.glob("*.md")) if is_myst_notebook(p)]
        if nbs:
            out[m.group(1)] = nbs
    return out


def code_cells(md_path: Path) -> list[str]:
    """The sources of a MyST notebook's code cells, in order."""
    import jupytext

    return [c.source for c in jupytext.read(md_path).cells if c.cell_type == "code"]


def paper_modules_imported(md_path: Path, cells: list[str] | None = None) -> set[str]:
    """Names ``x`` of the ``lib.papers.x`` modules or subpackages a notebook imports."""
    names: set[str] = set()
    for source in code_cells(md_path) if cells is None else cells:
        src = "\n".join(
            line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))
        )
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                parts = node.module.split(".")
                if parts[:2] == ["lib", "papers"]:
                    if len(parts) > 2:
                        names.add(parts[2])
                    else:
                        names.update(a.name for a in node.names)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    if parts[:2] == ["lib", "papers"] and len(parts) > 2:
                        names.add(parts[2])
    return names


def _hash_files(h, root: Path, files) -> None:
    for path in sorted(files):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())


def core_files(root: Path = ROOT) -> list[Path]:
    """What every chapter depends on: the core modules, ``lib/sphinxext`` and the stack."""
    lib = root / "lib"
    files = [p for p in lib.glob("*.py")] + list((lib / "sphinxext").rglob("*.py"))
    files += [root / f for f in CORE_EXTRA if (root / f).exists()]
    return files


def paper_files(name: str, root: Path = ROOT) -> list[Path]:
    """The source files of ``lib.papers.<name>`` (a module, or a whole subpackage)."""
    base = root / "lib" / "papers"
    if (base / name).is_dir():
        return list((base / name).rglob("*.py"))
    if (base / f"{name}.py").exists():
        return [base / f"{name}.py"]
    raise FileNotFoundError(f"a notebook imports lib.papers.{name}, which does not exist")


def chapter_stamps(root: Path = ROOT, env=None) -> dict:
    """``{"scale": ..., "seed": ..., "chapters": {"07": sha256, ...}}`` for the current tree."""
    from lib import scale, seed

    core = hashlib.sha256()
    _hash_files(core, root, core_files(root))
    core_hex = core.hexdigest()
    scale_name, book_seed = scale.scale_name(env), seed.book_seed(env)
    chapters = {}
    for ch, notebooks in chapter_notebooks(root).items():
        h = hashlib.sha256(f"{core_hex}|{scale_name}|{book_seed}".encode())
        papers = set().union(*(paper_modules_imported(nb) for nb in notebooks))
        for name in sorted(papers):
            h.update(name.encode())
            _hash_files(h, root, paper_files(name, root))
        chapters[ch] = h.hexdigest()
    return {"scale": scale_name, "seed": book_seed, "chapters": chapters}


def code_fingerprint(source: str) -> str:
    """The Python tokens of ``source``, joined, without comments, blank lines, line breaks
    inside brackets and trailing commas: what a formatter (``ruff format``) or a comment edit
    leaves unchanged does not change the fingerprint; any change to the code does."""
    import io
    import tokenize

    keep = []
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return "\n".join(line.strip() for line in source.splitlines() if line.strip())
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}
    toks = [t for t in toks if t.type not in skip]
    for k, t in enumerate(toks):
        if t.type == tokenize.OP and t.string == "," and k + 1 < len(toks):
            if toks[k + 1].string in (")", "]", "}"):
                continue  # a magic trailing comma is formatting
        if t.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            keep.append(f"<{tokenize.tok_name[t.type]}>")
        else:
            keep.append(t.string)
    return "\x1f".join(keep)


RESULT_CORE = (
    "__init__",
    "claims",
    "device",
    "plotting",
    "records",
    "scale",
    "seed",
    "stats",
    "validate",
)


def result_stamps(root: Path = ROOT, scale_name: str | None = None) -> dict[str, str]:
    """``{"07": sha256, ...}``: what a chapter's *results* depend on, for the published sweep.

    Narrower than :func:`chapter_stamps` (which also keys the build's cached pages): the code
    of the chapter's notebooks (cell by cell, by :func:`code_fingerprint`), the paper modules
    they import, the core modules of ``lib`` a notebook calls (not ``lib/sphinxext``, which
    only builds pages) and the scale. ``BOOK_SEED`` is not part of it (a sweep covers seeds),
    and neither is prose: editing a summary or a formula's text keeps a sweep valid.
    """
    from lib import scale as _scale

    scale_name = scale_name or _scale.scale_name()
    lib = root / "lib"
    core = hashlib.sha256(scale_name.encode())
    for name in RESULT_CORE:
        path = lib / f"{name}.py"
        core.update(name.encode())
        core.update(code_fingerprint(path.read_text(encoding="utf-8")).encode())
    core_hex = core.hexdigest()
    out = {}
    for ch, notebooks in chapter_notebooks(root).items():
        h = hashlib.sha256(core_hex.encode())
        papers = set()
        for nb in notebooks:
            h.update(nb.name.encode())
            cells = code_cells(nb)
            for source in cells:
                h.update(b"\x1e" + code_fingerprint(source).encode())
            papers |= paper_modules_imported(nb, cells)
        for name in sorted(papers):
            h.update(name.encode())
            for path in sorted(paper_files(name, root)):
                h.update(str(path.relative_to(root)).encode())
                h.update(code_fingerprint(path.read_text(encoding="utf-8")).encode())
        out[ch] = h.hexdigest()[:16]
    return out


def write_stamp(root: Path = ROOT, env=None) -> None:
    p = _paths(root)
    p["build"].mkdir(exist_ok=True)
    p["stamp"].write_text(json.dumps(chapter_stamps(root, env), indent=1))


def _drop_cached(root: Path, chapters: set[str]) -> int:
    """Remove jupyter-cache records whose notebook lies in one of ``chapters``."""
    cache_path = _paths(root)["cache"]
    if not cache_path.exists():
        return 0
    from jupyter_cache import get_cache

    cache = get_cache(str(cache_path))
    n = 0
    for rec in cache.list_cache_records():
        rel = Path(rec.uri).resolve()
        try:
            folder = rel.relative_to(root.resolve() / "book").parts[0]
        except ValueError:
            continue
        m = _CHAPTER_DIR.match(folder)
        if m and m.group(1) in chapters:
            cache.remove_cache(rec.pk)
            n += 1
    return n


def invalidate_stale(root: Path = ROOT, env=None, verbose: bool = True) -> set[str]:
    """Drop cached outputs, executed copies and claim records of chapters whose stamp changed.

    Returns the set of chapters dropped.
    """
    p = _paths(root)
    new = chapter_stamps(root, env)
    try:
        old = json.loads(p["stamp"].read_text())
        old_chapters = old.get("chapters", {}) if isinstance(old, dict) else {}
    except (OSError, json.JSONDecodeError):
        old = None
        old_chapters = {}
    stale = {ch for ch, h in new["chapters"].items() if old_chapters.get(ch) != h}
    if stale:
        _drop_cached(root, stale)
        for folder in (executed_dir(root) / "book").glob("*"):
            m = _CHAPTER_DIR.match(folder.name)
            if m and m.group(1) in stale:
                shutil.rmtree(folder, ignore_errors=True)
        clear_records(stale, ledger_dir(root=root))
    write_stamp(root, env)
    if stale and old is not None and verbose:
        print(f"stale cached outputs dropped for chapters {', '.join(sorted(stale))}")
    return stale


def clear_run_outputs(root: Path = ROOT) -> None:
    """Before a full nbval run: drop every claim record and executed copy (not the cache)."""
    clear_records(None, ledger_dir(root=root))
    shutil.rmtree(executed_dir(root), ignore_errors=True)


def fill_cache(root: Path = ROOT, verbose: bool = True) -> int:
    """Copy every nbval-executed notebook into jupyter-book's execution cache."""
    import nbformat
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    cache = get_cache(str(_paths(root)["cache"]))
    executed = executed_dir(root)
    n = 0
    for path in sorted(executed.rglob("*.ipynb")):
        rel = path.relative_to(executed).with_suffix(".md")
        md_path = root / rel
        if not md_path.exists():
            continue
        ran = nbformat.read(str(path), as_version=4)
        nb = read_like_myst_nb(md_path)
        src_code = [c for c in nb.cells if c.cell_type == "code"]
        ran_code = [c for c in ran.cells if c.cell_type == "code"]
        if [c.source.strip() for c in src_code] != [c.source.strip() for c in ran_code]:
            print(f"skip {rel}: executed copy is out of date with its source")
            continue
        for cell, done in zip(src_code, ran_code):
            cell.outputs = done.outputs
            cell.execution_count = done.execution_count
        run = ran.metadata.get("book_execution", {})
        seconds = run.get("seconds")
        data = {"execution_seconds": seconds}
        data.update({k: run[k] for k in ("cpu_seconds", "peak_rss_gib") if k in run})
        cache.cache_notebook_bundle(
            CacheBundleIn(nb, str(md_path), data=data),
            check_validity=False,
            overwrite=True,
        )
        n += 1
        if verbose:
            print(f"cached {rel} ({seconds} s under nbval)")
    write_stamp(root)
    return n


def check_build(root: Path = ROOT) -> None:
    """After the build: the ledger is clean, of one scale, every claim has a kind, no summary
    types a number a claim measured (:mod:`lib.sphinxext.prose`), and the ledger page was built."""
    from lib.scale import scale_name

    records = load_records(ledger_dir(root=root))
    if not records:
        raise SystemExit("check-build: no claim records found; were the notebooks executed?")
    bad = [r["id"] for r in records if r.get("verdict") == FAIL]
    if bad:
        raise SystemExit(f"check-build: failing claims in the ledger: {bad}")
    unkinded = [r["id"] for r in records if not r.get("kind")]
    if unkinded:
        raise SystemExit(f"check-build: claims without a kind: {unkinded}")
    from lib.sphinxext.prose import check_pages

    typed = check_pages(root, records)
    if typed:
        raise SystemExit("check-build: numbers typed instead of glued:\n" + "\n".join(typed))
    scales = {r.get("scale") for r in records}
    if scales != {scale_name()}:
        raise SystemExit(f"check-build: ledger mixes scales {sorted(scales)}")
    html = root / "_build" / "html" / "book" / "ledger.html"
    if not html.exists() or "claims-ledger" not in html.read_text(encoding="utf-8"):
        raise SystemExit("check-build: the ledger page was not built with its table")
    print(f"check-build: {len(records)} claim records, none failing, scale {scale_name()}")


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["fill-cache"]:
        print(f"{fill_cache()} executed notebooks copied into _build/.jupyter_cache")
    elif argv == ["invalidate-stale"]:
        invalidate_stale()
    elif argv == ["clear-records"]:
        clear_run_outputs()
    elif argv == ["check-build"]:
        check_build()
    else:
        raise SystemExit(
            "usage: python -m lib.sphinxext.cache "
            "{fill-cache,invalidate-stale,clear-records,check-build}"
        )


if __name__ == "__main__":
    main()
