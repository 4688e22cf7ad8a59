"""Build plumbing: execute each notebook once per gate.

``make test`` runs every chapter notebook under nbval; ``conftest.py`` saves the
outputs of each notebook that passed to ``_build/executed/``. This module moves
them into jupyter-book's execution cache (``_build/.jupyter_cache``), keyed exactly
as myst-nb keys the MyST source, so that the strict ``jupyter-book build`` that
follows finds every notebook cached and executes nothing a second time.

A stamp records what the cached outputs depend on besides the code cells (the
library's source, ``BOOK_SCALE``, ``BOOK_SEED``); ``invalidate-stale`` drops the
cache and the claim records when it changes, so ``make book`` never publishes
outputs computed by an older ``lib``.

Usage: ``python -m lib._booktools {fill-cache,invalidate-stale,check-build}``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"
EXECUTED = BUILD / "executed"
CACHE = BUILD / ".jupyter_cache"
STAMP = BUILD / ".exec-stamp.json"
LEDGER = BUILD / "ledger"


def current_stamp() -> dict:
    """What cached outputs depend on beyond the notebooks' own code cells."""
    from . import scale, seed

    h = hashlib.sha256()
    for path in sorted((ROOT / "lib").rglob("*.py")):
        h.update(str(path.relative_to(ROOT)).encode())
        h.update(path.read_bytes())
    for extra in ("requirements.txt", "pyproject.toml"):
        p = ROOT / extra
        if p.exists():
            h.update(p.read_bytes())
    return {"lib": h.hexdigest(), "scale": scale.scale_name(), "seed": seed.book_seed()}


def write_stamp() -> None:
    BUILD.mkdir(exist_ok=True)
    STAMP.write_text(json.dumps(current_stamp(), indent=1))


def invalidate_stale() -> bool:
    """Drop cached outputs and claim records made under another lib/scale/seed."""
    stamp = current_stamp()
    old = json.loads(STAMP.read_text()) if STAMP.exists() else None
    if old == stamp:
        return False
    for path in (CACHE, LEDGER, EXECUTED):
        shutil.rmtree(path, ignore_errors=True)
    write_stamp()
    if old is not None:
        print("lib/, BOOK_SCALE or BOOK_SEED changed: cleared the execution cache and claim records")
    return True


def _read_like_myst_nb(md_path: Path):
    """Read a MyST notebook exactly as myst-nb does during the build."""
    from myst_nb.core.read import read_myst_markdown_notebook
    from myst_parser.config.main import MdParserConfig

    text = md_path.read_text(encoding="utf-8")
    return read_myst_markdown_notebook(text, MdParserConfig(), path=md_path)


def fill_cache(verbose: bool = True) -> int:
    """Copy every nbval-executed notebook into jupyter-book's execution cache."""
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    cache = get_cache(str(CACHE))
    n = 0
    for executed in sorted(EXECUTED.rglob("*.ipynb")):
        import nbformat

        rel = executed.relative_to(EXECUTED).with_suffix(".md")
        md_path = ROOT / rel
        if not md_path.exists():
            continue
        ran = nbformat.read(str(executed), as_version=4)
        nb = _read_like_myst_nb(md_path)
        src_code = [c for c in nb.cells if c.cell_type == "code"]
        ran_code = [c for c in ran.cells if c.cell_type == "code"]
        if [c.source.strip() for c in src_code] != [c.source.strip() for c in ran_code]:
            print(f"skip {rel}: executed copy is out of date with its source")
            continue
        for cell, done in zip(src_code, ran_code):
            cell.outputs = done.outputs
            cell.execution_count = done.execution_count
        seconds = ran.metadata.get("book_execution", {}).get("seconds")
        cache.cache_notebook_bundle(
            CacheBundleIn(nb, str(md_path), data={"execution_seconds": seconds}),
            check_validity=False, overwrite=True)
        n += 1
        if verbose:
            print(f"cached {rel} ({seconds} s under nbval)")
    write_stamp()
    return n


def check_build() -> None:
    """After the build: every notebook came from the cache and the ledger is clean."""
    from .claims import FAIL, load_records
    from .scale import scale_name

    records = load_records(LEDGER)
    if not records:
        raise SystemExit("check-build: no claim records found; were the notebooks executed?")
    bad = [r["id"] for r in records if r.get("verdict") == FAIL]
    if bad:
        raise SystemExit(f"check-build: failing claims in the ledger: {bad}")
    scales = {r.get("scale") for r in records}
    if scales != {scale_name()}:
        raise SystemExit(f"check-build: ledger mixes scales {sorted(scales)}")
    html = BUILD / "html" / "book" / "ledger.html"
    if not html.exists() or "claims-ledger" not in html.read_text(encoding="utf-8"):
        raise SystemExit("check-build: the ledger page was not built with its table")
    print(f"check-build: {len(records)} claim records, none failing, scale {scale_name()}")


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["fill-cache"]:
        print(f"{fill_cache()} executed notebooks copied into {CACHE.relative_to(ROOT)}")
    elif argv == ["invalidate-stale"]:
        invalidate_stale()
    elif argv == ["check-build"]:
        check_build()
    else:
        raise SystemExit("usage: python -m lib._booktools {fill-cache,invalidate-stale,check-build}")


if __name__ == "__main__":
    main()
