"""Per-chapter invalidation of cached outputs (lib.sphinxext.cache), on a two-chapter toy tree.

A change to one chapter's paper module must drop the cached outputs, executed copies and claim
records of the chapters that import it and of no other; a change to the core, to
``lib/sphinxext`` or to the scale or seed drops every chapter.
"""

from __future__ import annotations

import json

import nbformat
import pytest

from lib import records
from lib.sphinxext import cache

HEADER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  name: python3
---

"""


def _notebook(imports: str) -> str:
    return HEADER + f"# A page\n\n```{{code-cell}} ipython3\n{imports}\nx = 1\n```\n"


@pytest.fixture
def tree(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    (root / "lib" / "papers" / "gamma").mkdir(parents=True)
    (root / "lib" / "sphinxext").mkdir()
    (root / "lib" / "claims.py").write_text("# core\n")
    (root / "lib" / "sphinxext" / "ledger.py").write_text("# extension\n")
    (root / "lib" / "papers" / "alpha.py").write_text("A = 1\n")
    (root / "lib" / "papers" / "beta.py").write_text("B = 1\n")
    (root / "lib" / "papers" / "gamma" / "core.py").write_text("C = 1\n")
    for ch, imports in {
        "01-first": "from lib.papers import alpha as a",
        "02-second": "import numpy as np\nfrom lib.papers import beta",
        "03-third": "from lib.papers.gamma import core",
    }.items():
        (root / "book" / ch).mkdir(parents=True)
        (root / "book" / ch / "nb.md").write_text(_notebook(imports))
        (root / "book" / ch / "index.md").write_text("# not a notebook\n")
    monkeypatch.setenv("BOOK_LEDGER_DIR", str(tmp_path / "ledger"))
    return root


ENV0 = {"BOOK_SCALE": "quick", "BOOK_SEED": "0"}


def test_notebooks_and_their_paper_modules(tree):
    nbs = cache.chapter_notebooks(tree)
    assert sorted(nbs) == ["01", "02", "03"] and all(len(v) == 1 for v in nbs.values())
    assert cache.paper_modules_imported(nbs["01"][0]) == {"alpha"}
    assert cache.paper_modules_imported(nbs["02"][0]) == {"beta"}
    assert cache.paper_modules_imported(nbs["03"][0]) == {"gamma"}


def test_stamps_follow_dependencies(tree):
    s0 = cache.chapter_stamps(tree, ENV0)["chapters"]
    (tree / "lib" / "papers" / "alpha.py").write_text("A = 2\n")
    s1 = cache.chapter_stamps(tree, ENV0)["chapters"]
    assert s1["01"] != s0["01"] and s1["02"] == s0["02"] and s1["03"] == s0["03"]
    (tree / "lib" / "papers" / "gamma" / "core.py").write_text("C = 2\n")
    s2 = cache.chapter_stamps(tree, ENV0)["chapters"]
    assert s2["03"] != s1["03"] and s2["01"] == s1["01"] and s2["02"] == s1["02"]
    (tree / "lib" / "sphinxext" / "ledger.py").write_text("# changed\n")
    s3 = cache.chapter_stamps(tree, ENV0)["chapters"]
    assert all(s3[ch] != s2[ch] for ch in s3)
    s4 = cache.chapter_stamps(tree, {"BOOK_SCALE": "quick", "BOOK_SEED": "1"})["chapters"]
    assert all(s4[ch] != s3[ch] for ch in s4)


def test_missing_paper_module_is_an_error(tree):
    (tree / "book" / "01-first" / "nb.md").write_text(_notebook("from lib.papers import nope"))
    with pytest.raises(FileNotFoundError, match="lib.papers.nope"):
        cache.chapter_stamps(tree, ENV0)


def _populate(tree):
    """Cache both notebooks, write their executed copies and one claim record per chapter."""
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    jc = get_cache(str(tree / "_build" / ".jupyter_cache"))
    for ch in ("01-first", "02-second", "03-third"):
        md = tree / "book" / ch / "nb.md"
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"# {ch}")])
        jc.cache_notebook_bundle(CacheBundleIn(nb, str(md)), check_validity=False, overwrite=True)
        out = records.executed_dir(tree) / "book" / ch / "nb.ipynb"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("{}")
        rec = {f: "" for f in records.RECORD_FIELDS} | {"id": f"{ch[:2]}/x", "chapter": ch[:2]}
        records.write_record(rec)
    return jc


def _state(tree, jc):
    uris = sorted(r.uri.split("/book/")[1][:2] for r in jc.list_cache_records())
    executed = sorted(p.name[:2] for p in (records.executed_dir(tree) / "book").iterdir())
    recs = sorted(r["chapter"] for r in records.load_records())
    return uris, executed, recs


def test_touching_one_paper_module_drops_only_its_chapter(tree):
    assert cache.invalidate_stale(tree, ENV0, verbose=False) == {"01", "02", "03"}
    jc = _populate(tree)
    assert cache.invalidate_stale(tree, ENV0, verbose=False) == set()
    assert _state(tree, jc) == (["01", "02", "03"],) * 3

    (tree / "lib" / "papers" / "beta.py").write_text("B = 3  # touched\n")
    assert cache.invalidate_stale(tree, ENV0, verbose=False) == {"02"}
    assert _state(tree, jc) == (["01", "03"],) * 3
    stamp = json.loads((tree / "_build" / ".exec-stamp.json").read_text())
    assert stamp["chapters"] == cache.chapter_stamps(tree, ENV0)["chapters"]


def test_touching_the_core_drops_every_chapter(tree):
    cache.invalidate_stale(tree, ENV0, verbose=False)
    jc = _populate(tree)
    (tree / "lib" / "claims.py").write_text("# core, touched\n")
    assert cache.invalidate_stale(tree, ENV0, verbose=False) == {"01", "02", "03"}
    assert _state(tree, jc) == ([], [], [])
