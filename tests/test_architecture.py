"""The library's layout and rules, checked (import-linter checks the import contracts in
``make lint``; these tests check what it cannot see)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from lib.sphinxext.cache import chapter_notebooks, paper_modules_imported

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "lib"
CORE = {"__init__", "claims", "scale", "seed", "stats", "plotting", "device", "validate", "records"}


def test_only_the_core_sits_at_the_top_of_lib():
    top = {p.stem for p in LIB.glob("*.py")}
    assert top == CORE, f"move paper modules to lib/papers/: {sorted(top - CORE)}"
    assert {p.name for p in LIB.iterdir() if p.is_dir() and p.name != "__pycache__"} == {
        "papers",
        "sphinxext",
    }


def _paper_modules():
    papers = LIB / "papers"
    for p in sorted(papers.iterdir()):
        if p.suffix == ".py" and p.stem != "__init__":
            yield p.stem, [p]
        elif p.is_dir() and (p / "__init__.py").exists():
            yield p.name, sorted(p.rglob("*.py"))


def test_every_chapter_imports_an_existing_paper_module_and_every_module_has_a_chapter():
    used = {}
    for ch, notebooks in chapter_notebooks(ROOT).items():
        for nb in notebooks:
            for name in paper_modules_imported(nb):
                used.setdefault(name, set()).add(ch)
    modules = dict(_paper_modules())
    assert set(used) <= set(modules), (
        f"notebooks import missing modules: {set(used) - set(modules)}"
    )
    assert set(modules) <= set(used), f"paper modules no chapter uses: {set(modules) - set(used)}"


@pytest.mark.parametrize("name", [n for n, _ in _paper_modules()])
def test_paper_module_docstring_cites_paper_and_chapter_folder(name):
    files = dict(_paper_modules())[name]
    texts = [ast.get_docstring(ast.parse(f.read_text())) or "" for f in files]
    assert all(texts), f"{name}: every file needs a module docstring"
    combined = "\n".join(texts)
    chapters = {
        ch
        for ch, nbs in chapter_notebooks(ROOT).items()
        if any(name in paper_modules_imported(nb) for nb in nbs)
    }
    for ch in chapters:
        folder = next((ROOT / "book").glob(f"{ch}-*")).name
        assert f"book/{folder}/" in combined, f"{name}: docstring must name book/{folder}/"
    assert re.search(r"arXiv|OpenReview", combined), f"{name}: docstring must cite the paper"


def _code_files():
    yield from (p for p in LIB.rglob("*.py") if p.name != "seed.py")
    yield from (ROOT / "benchmarks").glob("*.py")
    for nbs in chapter_notebooks(ROOT).values():
        yield from nbs


def test_nothing_seeds_torchs_global_generator_except_lib_seed():
    pattern = re.compile(r"torch\.(random\.)?manual_seed\(|torch\.cuda\.manual_seed")
    offenders = [str(p.relative_to(ROOT)) for p in _code_files() if pattern.search(p.read_text())]
    assert not offenders, f"use lib.seed.torch_seeded instead of torch.manual_seed in {offenders}"


def test_sphinxext_modules_do_not_reach_into_each_others_privates():
    for path in (LIB / "sphinxext").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and "sphinxext" in node.module:
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert not private, f"{path.name} imports private {private} from {node.module}"
