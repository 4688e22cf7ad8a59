"""Which results are bit-reproducible on another machine (``make portability``; outside the gate).

Floating-point results depend on the instruction set a library picks at run time: OpenBLAS,
numpy's SIMD loops and torch's ATen kernels each dispatch on the CPU (SSE, AVX2, AVX-512), and
the summation order, hence the last bits, changes with the kernel. A second machine is
emulated here by forcing other kernels on this one:

* ``ATEN_CPU_CAPABILITY=default``: torch's scalar (non-vectorised) kernels;
* ``NPY_DISABLE_CPU_FEATURES=X86_V3``: numpy's loops without AVX2/FMA;
* ``OPENBLAS_CORETYPE=Nehalem``, ``MKL_ENABLE_INSTRUCTIONS=SSE4_2``: SSE BLAS kernels.

Every chapter notebook runs at ``BOOK_SEED=0`` under that environment (as a seed-sweep task,
so the build's own outputs are untouched) and its claim records are compared with those of
the last ``make test`` (``_build/ledger``, also seed 0, default kernels). For each chapter
the script prints how many claims measured bit-identical values, how many differ only in
the last digits (relative difference below 1e-6), how many differ more (a trajectory that
the float differences redirected: sampling, training), and whether every verdict agrees.

Usage: ``python benchmarks/portability.py [--chapters 01,07] [--out _build/portability]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lib.records import ledger_dir, load_records  # noqa: E402
from lib.sphinxext.cache import chapter_notebooks  # noqa: E402

OTHER_CPU = {
    "ATEN_CPU_CAPABILITY": "default",
    "NPY_DISABLE_CPU_FEATURES": "X86_V3",
    "OPENBLAS_CORETYPE": "Nehalem",
    "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
}


def _values(rec: dict) -> list[float]:
    m = rec.get("measured")
    if isinstance(m, dict):
        m = [m.get("min"), m.get("max")]
    if not isinstance(m, list):
        m = [m]
    out = []
    for v in m:
        try:
            out.append(float(v))
        except (TypeError, ValueError):
            out.append(float("nan"))
    return out


def compare(a: dict, b: dict) -> str:
    """``identical``, ``last digits`` (relative difference < 1e-6) or ``different``."""
    va, vb = _values(a), _values(b)
    if len(va) != len(vb):
        return "different"
    worst = 0.0
    for x, y in zip(va, vb):
        if x == y or (math.isnan(x) and math.isnan(y)):
            continue
        scale = max(abs(x), abs(y), 1e-300)
        worst = max(worst, abs(x - y) / scale)
    if worst == 0.0:
        return "identical"
    return "last digits" if worst < 1e-6 else "different"


def table(base: list[dict], other: list[dict]) -> dict[str, dict]:
    by_id = {r["id"]: r for r in other}
    out: dict[str, dict] = {}
    for rec in base:
        ch = out.setdefault(
            rec["chapter"],
            {"identical": 0, "last digits": 0, "different": 0, "missing": 0, "verdicts": []},
        )
        twin = by_id.get(rec["id"])
        if twin is None:
            ch["missing"] += 1
            continue
        ch[compare(rec, twin)] += 1
        if twin.get("verdict") != rec.get("verdict"):
            ch["verdicts"].append(f"{rec['id']}: {rec['verdict']} -> {twin['verdict']}")
    return out


def main(argv=None) -> None:
    from lib.sphinxext import sweep as sw

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chapters", default="")
    ap.add_argument("--out", default=str(ROOT / "_build" / "portability"))
    args = ap.parse_args(argv)
    base = [r for r in load_records(ledger_dir()) if str(r.get("seed")) == "0"]
    if not base:
        raise SystemExit("no seed-0 records in _build/ledger: run `make test` first")
    wanted = {c.strip() for c in args.chapters.split(",") if c.strip()}
    notebooks = [
        nb
        for ch, nbs in chapter_notebooks(ROOT).items()
        if not wanted or ch in wanted
        for nb in nbs
    ]
    os.environ.update(OTHER_CPU)  # inherited by the Dask workers and their kernels
    results = sw.sweep(notebooks, [0], "quick", root=Path(args.out), progress=True)
    other = [rec for res in results for rec in res["records"]]
    errors = [f"{r['notebook']}: {r['error'][:200]}" for r in results if r["error"]]
    chapters = {r["chapter"] for r in other}
    base = [r for r in base if r["chapter"] in chapters]
    rows = table(base, other)
    out = Path(args.out) / "portability.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"env": OTHER_CPU, "chapters": rows, "errors": errors}, indent=1))
    print(f"\n{'chapter':8s} {'identical':>9s} {'last digits':>11s} {'different':>9s}  verdicts")
    for ch, r in sorted(rows.items()):
        agree = "all agree" if not r["verdicts"] else "; ".join(r["verdicts"])
        print(f"{ch:8s} {r['identical']:9d} {r['last digits']:11d} {r['different']:9d}  {agree}")
    tot = {k: sum(r[k] for r in rows.values()) for k in ("identical", "last digits", "different")}
    print(f"{'all':8s} {tot['identical']:9d} {tot['last digits']:11d} {tot['different']:9d}")
    for e in errors:
        print("error:", e)
    print(f"written to {out}")


if __name__ == "__main__":
    main()
