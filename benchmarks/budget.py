"""The time budget of the book, measured (``make bench``; outside the gate).

For every chapter notebook this runs the MyST notebook top to bottom in a fresh kernel, alone
and on one core (``OMP_NUM_THREADS=1`` and friends, nothing else running from this script),
at ``BOOK_SCALE=quick``, ``--repeats`` times, and reports the median wall time and the peak
resident memory of the kernel. It compares each figure with the budget:

* 30 s per notebook and 60 s per chapter of one core,
* 2 GiB peak RSS per notebook,

and marks what is over. It then prints the wall time of every phase of the last ``make test``
(install, lint, unit tests, nbval, Binder, build, browser), which the Makefile records in
``_build/gate-times.json``, against the gate's budget.

The results go to ``book/_data/budget-quick.json`` (committed, so that the published status
page shows an idle measurement): each notebook's median, CPU time, peak memory, the 1-minute
load average before its runs (a bench is meant to run on an idle machine; it says so when
the load was above ``--max-load``) and its chapter's result stamp, by which the status page
marks a row stale once the chapter's code changes.

Usage::

    python benchmarks/budget.py [--repeats 3] [--chapters 01,07] [--notebooks PATH ...]

Claim records written while benchmarking go to a scratch folder (``BOOK_LEDGER_DIR``), so a
benchmark never changes the ledger of a build.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lib.sphinxext.cache import chapter_notebooks  # noqa: E402

NOTEBOOK_S, CHAPTER_S, RSS_GIB = 30.0, 60.0, 2.0
GATE_S = {"9 chapters": 7 * 60.0, "19 chapters": 15 * 60.0}
ONE_CORE = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "BOOK_SCALE": "quick",
}
OUT = ROOT / "book" / "_data" / "budget-quick.json"
GATE_TIMES = ROOT / "_build" / "gate-times.json"


def run_one(path: Path) -> dict:
    """Execute one notebook in a fresh kernel (this process's child); return its numbers."""
    import resource

    import jupytext
    from nbclient import NotebookClient

    nb = jupytext.read(path)
    client = NotebookClient(
        nb,
        timeout=1200,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    t0 = time.perf_counter()
    error = None
    try:
        client.execute()
    except Exception as exc:  # recorded, not raised: the table says which notebook broke
        error = f"{type(exc).__name__}: {str(exc)[:300]}"
    wall = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_gib": usage.ru_maxrss / 2**20,  # ru_maxrss is in KiB on Linux
        "error": error,
    }


def measure(path: Path, repeats: int) -> dict:
    runs = []
    load_before = os.getloadavg()[0]
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as ledger:
            env = dict(os.environ, **ONE_CORE, BOOK_LEDGER_DIR=ledger)
            res = subprocess.run(
                [sys.executable, __file__, "--run-one", str(path)],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
        try:
            runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
        except (IndexError, json.JSONDecodeError):
            runs.append(
                {
                    "wall_s": float("nan"),
                    "cpu_s": float("nan"),
                    "peak_rss_gib": 0.0,
                    "error": res.stderr[-300:],
                }
            )
    return {
        "notebook": str(path.relative_to(ROOT)),
        "wall_s": statistics.median(r["wall_s"] for r in runs),
        "cpu_s": statistics.median(r["cpu_s"] for r in runs),
        "peak_rss_gib": max(r["peak_rss_gib"] for r in runs),
        "runs_s": [round(r["wall_s"], 2) for r in runs],
        "load_before": round(load_before, 2),
        "error": next((r["error"] for r in runs if r["error"]), None),
    }


def _mark(value: float, budget: float) -> str:
    return "OVER" if value > budget else "ok"


def report(results: list[dict]) -> list[str]:
    lines = [f"{'notebook':58s} {'median s':>9s} {'cpu s':>7s} {'RSS GiB':>8s}  budget"]
    by_chapter: dict[str, float] = {}
    for r in results:
        ch = Path(r["notebook"]).parts[1][:2]
        by_chapter[ch] = by_chapter.get(ch, 0.0) + r["wall_s"]
        time_ok = _mark(r["wall_s"], NOTEBOOK_S)
        mem_ok = _mark(r["peak_rss_gib"], RSS_GIB)
        flag = "ERROR " + r["error"] if r["error"] else f"{time_ok} (30 s), {mem_ok} (2 GiB)"
        lines.append(
            f"{r['notebook']:58s} {r['wall_s']:9.1f} {r['cpu_s']:7.1f} "
            f"{r['peak_rss_gib']:8.2f}  {flag}"
        )
    lines.append("")
    lines.append(f"{'chapter':10s} {'total s':>8s}  budget")
    for ch, total in sorted(by_chapter.items()):
        lines.append(f"{ch:10s} {total:8.1f}  {_mark(total, CHAPTER_S)} (60 s)")
    total = sum(by_chapter.values())
    lines.append(f"{'all':10s} {total:8.1f}  (one core; about {total / 2:.0f} s of nbval on two)")
    return lines


def gate_report() -> list[str]:
    if not GATE_TIMES.exists():
        return ["no gate phases recorded yet: run `make test` (it writes _build/gate-times.json)"]
    data = json.loads(GATE_TIMES.read_text())
    lines = [f"phases of the last `make test` (recorded {data.get('started', '?')}):"]
    total = 0.0
    for name, secs in data.get("phases", {}).items():
        total += secs
        lines.append(f"  {name:12s} {secs:7.1f} s")
    lines.append(f"  {'total':12s} {total:7.1f} s  (budget: 7 min with 9 chapters, 15 with 19)")
    return lines


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3, help="runs per notebook (median)")
    ap.add_argument("--chapters", default="", help="comma-separated chapter numbers")
    ap.add_argument("--notebooks", nargs="*", default=None, help="notebook paths")
    # The bench's own previous run keeps the 1-minute load average near 1 for a minute after it
    # ends (one busy core), so only a load above 1.5 means another process was running.
    ap.add_argument(
        "--max-load", type=float, default=1.5, help="warn when the load before a run is higher"
    )
    ap.add_argument("--run-one", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.run_one:
        print(json.dumps(run_one(Path(args.run_one).resolve())))
        return
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    if args.notebooks:
        paths = [Path(p).resolve() for p in args.notebooks]
    else:
        wanted = {c.strip() for c in args.chapters.split(",") if c.strip()}
        paths = [
            nb
            for ch, nbs in chapter_notebooks(ROOT).items()
            if not wanted or ch in wanted
            for nb in nbs
        ]
    from lib.sphinxext.cache import result_stamps
    from lib.sphinxext.sweep import git_output, machine_description

    stamps = result_stamps(ROOT, "quick")
    results = []
    for path in paths:
        r = measure(path, args.repeats)
        r["stamp"] = stamps.get(Path(r["notebook"]).parts[1][:2], "")
        results.append(r)
        load = r["load_before"]
        busy = f" (NOT IDLE: load {load:.2f})" if load > args.max_load else ""
        print(f"  {r['notebook']}: {r['wall_s']:.1f} s {r['runs_s']}{busy}", flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    merged = {}
    if OUT.exists():
        merged = {r["notebook"]: r for r in json.loads(OUT.read_text()).get("notebooks", [])}
    merged.update({r["notebook"]: r for r in results})
    for r in merged.values():
        r["wall_s"], r["cpu_s"] = round(r["wall_s"], 2), round(r["cpu_s"], 2)
        r["peak_rss_gib"] = round(r["peak_rss_gib"], 3)
    OUT.write_text(
        json.dumps(
            {
                "repeats": args.repeats,
                "recorded": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "commit": git_output(ROOT, "rev-parse", "--short=10", "HEAD"),
                "machine": machine_description(),
                "notebooks": sorted(merged.values(), key=lambda r: r["notebook"]),
            },
            indent=1,
        )
        + "\n"
    )
    loads = [r["load_before"] for r in results]
    if loads and max(loads) > args.max_load:
        print(f"\nwarning: the machine was not idle (load up to {max(loads):.2f}); rerun idle")
    print()
    print("\n".join(report(results)))
    print()
    print("\n".join(gate_report()))
    print(f"\nwritten to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
