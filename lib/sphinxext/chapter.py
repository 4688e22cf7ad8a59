"""Run one chapter (or one notebook) as a test, at any seed and scale: ``make chapter``.

``make chapter CH=18 [NB=spectrum] [BOOK_SEED=5] [BOOK_SCALE=full]`` runs the chapter's notebooks
under nbval, as the gate does, with claim records in a scratch folder, and prints the chapter's
claim table at the end (id, kind, verdict, measured value, criterion). The exit status is
nbval's: non-zero when a cell or a claim fails.

Usage: ``python -m lib.sphinxext.chapter CH [NOTEBOOK]``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from lib.records import ROOT, load_records

ONE_CORE = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def chapter_folder(ch: str, root: Path = ROOT) -> Path:
    ch = ch.strip().zfill(2)
    found = sorted((root / "book").glob(f"{ch}-*"))
    if not ch.isdigit() or not found:
        raise SystemExit(f"no chapter {ch!r} under book/ (give its two-digit number, e.g. CH=07)")
    return found[0]


def claim_table(records: list[dict]) -> str:
    rows = [("id", "kind", "verdict", "measured", "criterion")]
    rows += [
        (r["id"], r.get("kind", ""), r["verdict"], r.get("measured_text", ""), r["criterion"])
        for r in records
    ]
    widths = [max(len(str(row[k])) for row in rows) for k in range(4)]
    lines = []
    for row in rows:
        cells = [str(c).ljust(w) for c, w in zip(row[:4], widths)] + [str(row[4])]
        lines.append("  ".join(cells))
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        raise SystemExit("usage: make chapter CH=18 [NB=spectrum] [BOOK_SEED=5] [BOOK_SCALE=full]")
    folder = chapter_folder(argv[0])
    target = folder
    if len(argv) > 1 and argv[1]:
        target = folder / (argv[1] if argv[1].endswith(".md") else argv[1] + ".md")
        if not target.exists():
            raise SystemExit(f"no notebook {target.relative_to(ROOT)}")
    with tempfile.TemporaryDirectory() as ledger:
        env = dict(os.environ, **ONE_CORE, BOOK_LEDGER_DIR=ledger)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax"]
        cmd += ["--nbval-current-env", "--nbval-cell-timeout=3600", str(target)]
        rc = subprocess.call(cmd, cwd=ROOT, env=env)
        records = load_records(ledger)
    seed, scale = env.get("BOOK_SEED", "0") or "0", env.get("BOOK_SCALE", "quick") or "quick"
    print(f"\nclaims of {target.relative_to(ROOT)} at BOOK_SEED={seed}, BOOK_SCALE={scale}:")
    print(claim_table(records) if records else "(no claim was recorded)")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
