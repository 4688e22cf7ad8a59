"""Notebook code in the same style as the library: ``ruff format`` and ``ruff check``.

The book's notebooks are MyST ``.md`` files, which ruff does not read. This tool copies every
notebook's code cells into a temporary ``.ipynb`` per notebook (ruff understands notebooks,
keeps IPython magics and a cell's trailing ``;``), runs ruff there, and maps the results back:

* ``check``: fail if any code cell is not formatted or breaks a lint rule (including E501,
  lines over 100 characters, which would need a horizontal scroll bar in the HTML);
* ``fix``: format the code cells in place. Only the code of each cell is replaced in the
  ``.md`` text; markdown, cell metadata and the jupytext header stay byte for byte.

Usage: ``python -m lib.sphinxext.style {check,fix} [FILE.md ...]`` (default: every notebook).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from lib.records import ROOT
from lib.sphinxext.cache import chapter_notebooks, is_myst_notebook


def _ruff() -> str:
    exe = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(exe).exists():
        raise SystemExit("ruff is not installed in this environment (it is in requirements.txt)")
    return exe


def _code_cells(md_path: Path) -> list[str]:
    import jupytext

    return [c.source for c in jupytext.read(md_path).cells if c.cell_type == "code"]


def _write_ipynb(sources: list[str], path: Path) -> None:
    cells = [
        {
            "cell_type": "code",
            "execution_count": None,
            "metadata": {},
            "outputs": [],
            "source": src.splitlines(keepends=True),
        }
        for src in sources
    ]
    nb = {
        "cells": cells,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb))


def _read_ipynb(path: Path) -> list[str]:
    nb = json.loads(path.read_text())
    return ["".join(c["source"]) for c in nb["cells"]]


def all_notebooks(root: Path = ROOT) -> list[Path]:
    return [nb for nbs in chapter_notebooks(root).values() for nb in nbs]


def _stage(notebooks: list[Path], tmp: Path, root: Path) -> dict[Path, Path]:
    staged = {}
    for nb in notebooks:
        rel = nb.resolve().relative_to(root.resolve())
        target = tmp / rel.with_suffix(".ipynb")
        target.parent.mkdir(parents=True, exist_ok=True)
        _write_ipynb(_code_cells(nb), target)
        staged[nb] = target
    return staged


def check(notebooks: list[Path], root: Path = ROOT) -> int:
    """Run ``ruff format --check`` and ``ruff check`` on the notebooks' code; return the
    number of problems (and print them)."""
    ruff = _ruff()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        _stage(notebooks, tmp, root)
        cfg = ["--config", str(root / "pyproject.toml")]
        fmt = subprocess.run(
            [ruff, "format", "--check", *cfg, "."], cwd=tmp, capture_output=True, text=True
        )
        lint = subprocess.run(
            [ruff, "check", "--output-format", "concise", *cfg, "."],
            cwd=tmp,
            capture_output=True,
            text=True,
        )
    problems = [
        line.replace(".ipynb", ".md")
        for line in (fmt.stdout + lint.stdout).splitlines()
        if line.startswith(("Would reformat", "book/"))
    ]
    for line in problems:
        print(line)
    if problems:
        print("fix the formatting with: python -m lib.sphinxext.style fix")
    return len(problems)


def fix(notebooks: list[Path], root: Path = ROOT) -> int:
    """Format the code cells in place; return how many notebooks changed."""
    ruff = _ruff()
    changed = 0
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        staged = _stage(notebooks, tmp, root)
        cfg = ["--config", str(root / "pyproject.toml")]
        # safe fixes first (import order, modern syntax), then the formatter
        subprocess.run(
            [ruff, "check", "--fix-only", "--select", "I,UP,F401", *cfg, "."],
            cwd=tmp,
            capture_output=True,
        )
        subprocess.run([ruff, "format", *cfg, "."], cwd=tmp, check=True, capture_output=True)
        for nb, ipynb in staged.items():
            old_cells, new_cells = _code_cells(nb), _read_ipynb(ipynb)
            text = nb.read_text(encoding="utf-8")
            out, pos = [], 0
            for old, new in zip(old_cells, new_cells):
                at = text.find(old, pos)
                if at < 0:
                    raise RuntimeError(f"{nb}: cannot locate a code cell's source in the file")
                out.append(text[pos:at])
                out.append(new.rstrip("\n") if not old.endswith("\n") else new)
                pos = at + len(old)
            out.append(text[pos:])
            new_text = "".join(out)
            if new_text != text:
                nb.write_text(new_text, encoding="utf-8")
                changed += 1
    return changed


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ("check", "fix"):
        raise SystemExit("usage: python -m lib.sphinxext.style {check,fix} [FILE.md ...]")
    files = [Path(a).resolve() for a in argv[1:] if is_myst_notebook(Path(a))]
    files = files or all_notebooks()
    if argv[0] == "check":
        n = check(files)
        if n:
            raise SystemExit(f"notebook style: {n} problems")
        print(f"notebook style: {len(files)} notebooks formatted and lint-clean")
    else:
        print(f"formatted {fix(files)} of {len(files)} notebooks")


if __name__ == "__main__":
    main()
