"""Claims across seeds, on Dask: ``make sweep`` (outside the gate).

Every (notebook, seed) pair is one Dask task. The task executes the MyST notebook with nbclient
in a fresh kernel whose environment sets ``BOOK_SEED``, ``BOOK_SCALE`` and a private
``BOOK_LEDGER_DIR``, and returns the claim records the notebook wrote, its run time and any
error. A notebook that fails at one seed is recorded as a failure for that seed and never
stops the sweep; a worker that dies mid-task is replaced and its task rerun by Dask's scheduler.

Results go to ``_build/sweep/<scale>/``: one JSON per (claim, seed) under ``claims/`` and one
per (notebook, seed) under ``runs/``. The ledger (:mod:`lib.sphinxext.ledger`) turns them into a
"seeds" column with :func:`robustness`.

``BOOK_DASK_SCHEDULER`` unset: a ``LocalCluster`` sized to this machine (one single-threaded
worker per core). Set to an address (``tcp://host:8786``): that cluster, e.g. one started by
dask-jobqueue on SLURM or by dask-kubernetes.

Usage: ``python -m lib.sphinxext.sweep --seeds 0-9 [--chapters 01,07] [--notebooks PATH ...]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time
from pathlib import Path

from lib.records import FAIL, NOT_REPRODUCED, PASS, ROOT, load_records

SCHEDULER_ENV = "BOOK_DASK_SCHEDULER"
ONE_CORE = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
}


def parse_seeds(text: str) -> list[int]:
    """``"0-9"``, ``"0,3,5"`` or ``"0-3,7"`` -> sorted distinct non-negative integers."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"seeds must be a range like 0-9 or a list like 0,3,5, got {text!r}")
    seeds: set[int] = set()
    for part in text.replace(" ", "").split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise ValueError(f"seeds: cannot read {part!r} (use 0-9 or 0,3,5)")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise ValueError(f"seeds: empty range {part!r}")
        seeds.update(range(lo, hi + 1))
    return sorted(seeds)


def sweep_dir(scale: str, root: Path = ROOT) -> Path:
    return Path(root) / "_build" / "sweep" / scale


def run_notebook(path: str, seed: int, scale: str = "quick", timeout: int = 1800) -> dict:
    """Execute one notebook at one seed in a fresh kernel; never raises for a notebook error."""
    import jupytext
    from nbclient import NotebookClient

    nb_path = Path(path)
    with tempfile.TemporaryDirectory() as ledger:
        env = dict(os.environ, **ONE_CORE)
        env.update(BOOK_SEED=str(seed), BOOK_SCALE=scale, BOOK_LEDGER_DIR=ledger)
        client = NotebookClient(
            jupytext.read(nb_path),
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(nb_path.parent)}},
        )
        t0 = time.perf_counter()
        error = None
        try:
            client.execute(env=env)
        except Exception as exc:  # the failure is the result for this seed
            error = f"{type(exc).__name__}: {str(exc)[-800:]}"
        seconds = time.perf_counter() - t0
        records = load_records(ledger)
    return {
        "notebook": str(nb_path.resolve().relative_to(ROOT)) if nb_path.is_absolute() else path,
        "seed": int(seed),
        "scale": scale,
        "seconds": round(seconds, 2),
        "error": error,
        "records": records,
    }


def _client(scheduler: str | None, n_tasks: int):
    from distributed import Client, LocalCluster

    if scheduler:
        return Client(scheduler)
    n = max(1, min(os.cpu_count() or 1, n_tasks))
    workers = os.environ.get("BOOK_SWEEP_WORKERS", "").strip()
    if workers:  # fewer workers than cores: leave the machine usable during a long sweep
        if not workers.isdigit() or int(workers) < 1:
            raise ValueError(f"BOOK_SWEEP_WORKERS must be a positive integer, got {workers!r}")
        n = min(int(workers), n_tasks)
    # the dashboard (if its dependencies are installed) on :8787, or a free port
    cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True)
    return Client(cluster)


def write_result(result: dict, root: Path = ROOT) -> None:
    out = sweep_dir(result["scale"], root)
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    key = result["notebook"].replace("/", "__")
    summary = {k: v for k, v in result.items() if k != "records"}
    summary["claims"] = [r["id"] for r in result["records"]]
    (runs / f"{key}__seed-{result['seed']}.json").write_text(json.dumps(summary, indent=1))
    for rec in result["records"]:
        folder = out / "claims" / rec["id"].replace("/", "__")
        folder.mkdir(parents=True, exist_ok=True)
        rec = dict(rec, notebook=result["notebook"])
        (folder / f"seed-{result['seed']}.json").write_text(json.dumps(rec, indent=1))


def sweep(
    notebooks: list[Path],
    seeds: list[int],
    scale: str = "quick",
    scheduler: str | None = None,
    root: Path = ROOT,
    client=None,
    progress: bool = True,
) -> list[dict]:
    """Run every (notebook, seed) pair as one Dask task; write and return the results."""
    from distributed import as_completed

    tasks = [(str(nb), s) for nb in notebooks for s in seeds]
    own = client is None
    if own:
        client = _client(scheduler, len(tasks))
    try:
        link = getattr(client, "dashboard_link", None)
        if progress and link and "None" not in str(link):
            print(f"Dask dashboard: {link}")
        futures = [
            client.submit(
                run_notebook, nb, s, scale, key=f"nb-{i}-{Path(nb).stem}-seed{s}", pure=False
            )
            for i, (nb, s) in enumerate(tasks)
        ]
        done = as_completed(futures)
        if progress:
            from tqdm.auto import tqdm

            done = tqdm(done, total=len(futures), desc=f"sweep ({scale})")
        results = []
        for fut in done:
            res = fut.result()
            write_result(res, root)
            results.append(res)
            if progress and res["error"]:
                print(f"  {res['notebook']} failed at seed {res['seed']}: {res['error'][:200]}")
        return results
    finally:
        if own:
            cluster = getattr(client, "cluster", None)
            client.close()
            if cluster is not None:
                cluster.close()


# ----------------------------------------------------------------------------- reading back
def load_sweep(scale: str, root: Path = ROOT) -> dict[str, dict[int, dict]]:
    """``{claim_id: {seed: record}}`` for one scale (empty when nothing was swept)."""
    base = sweep_dir(scale, root) / "claims"
    out: dict[str, dict[int, dict]] = {}
    if not base.is_dir():
        return out
    for folder in base.iterdir():
        for path in folder.glob("seed-*.json"):
            try:
                rec = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            out.setdefault(rec["id"], {})[int(path.stem.split("-", 1)[1])] = rec
    return out


def load_runs(scale: str, root: Path = ROOT) -> dict[str, dict[int, dict]]:
    """``{notebook: {seed: run summary}}``: which seeds each notebook was run at, and errors."""
    base = sweep_dir(scale, root) / "runs"
    out: dict[str, dict[int, dict]] = {}
    if not base.is_dir():
        return out
    for path in base.glob("*.json"):
        try:
            run = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        out.setdefault(run["notebook"], {})[int(run["seed"])] = run
    return out


def robustness(
    claim_id: str, per_seed: dict[int, dict], seeds_run: list[int] | None = None
) -> dict:
    """Summarise one claim over swept seeds.

    ``per_seed``: the claim's record at each seed where it was reached; ``seeds_run``: every seed
    its notebook was run at (a seed where the notebook stopped before the claim counts as a
    failure, "not reached"). Returns ``text`` (e.g. ``"seeds: 9/10 (fails at 8)"``),
    ``n``, ``n_pass`` and ``failing`` (the seeds that fail or were not reached).
    """
    seeds = sorted(set(seeds_run or []) | set(per_seed))
    if not seeds:
        return {"text": "not swept", "n": 0, "n_pass": 0, "failing": []}
    fails = [s for s in seeds if s in per_seed and per_seed[s].get("verdict") == FAIL]
    missing = [s for s in seeds if s not in per_seed]
    verdicts = {per_seed[s].get("verdict") for s in per_seed}
    if verdicts == {NOT_REPRODUCED} and not missing:
        held = sum(per_seed[s].get("n_failing", 1) == 0 for s in seeds)
        text = f"not reproduced at {len(seeds)}/{len(seeds)} (criterion held at {held})"
        return {"text": text, "n": len(seeds), "n_pass": 0, "failing": []}
    n_pass = sum(per_seed[s].get("verdict") in (PASS, NOT_REPRODUCED) for s in per_seed)
    text = f"seeds: {n_pass}/{len(seeds)}"
    notes = []
    if fails:
        notes.append("fails at " + ", ".join(map(str, fails)))
    if missing:
        notes.append("not reached at " + ", ".join(map(str, missing)))
    if notes:
        text += " (" + "; ".join(notes) + ")"
    return {"text": text, "n": len(seeds), "n_pass": n_pass, "failing": sorted(fails + missing)}


def robustness_table(scale: str, root: Path = ROOT) -> dict[str, dict]:
    """``{claim_id: robustness(...)}`` for every swept claim of ``scale``."""
    claims = load_sweep(scale, root)
    runs = load_runs(scale, root)
    out = {}
    for cid, per_seed in claims.items():
        notebooks = {rec.get("notebook") for rec in per_seed.values()}
        seeds_run = sorted({s for nb in notebooks for s in runs.get(nb, {})})
        out[cid] = robustness(cid, per_seed, seeds_run)
    return out


def main(argv=None) -> None:
    from lib.scale import scale_name
    from lib.sphinxext.cache import chapter_notebooks

    ap = argparse.ArgumentParser(description="Run chapter notebooks over seeds on Dask.")
    ap.add_argument("--seeds", default="0-9")
    ap.add_argument("--chapters", default="", help="comma-separated chapter numbers")
    ap.add_argument("--notebooks", nargs="*", default=None)
    args = ap.parse_args(argv)
    seeds = parse_seeds(args.seeds)
    if args.notebooks:
        notebooks = [Path(p).resolve() for p in args.notebooks]
    else:
        wanted = {c.strip() for c in args.chapters.split(",") if c.strip()}
        notebooks = [
            nb
            for ch, nbs in chapter_notebooks(ROOT).items()
            if not wanted or ch in wanted
            for nb in nbs
        ]
    scale = scale_name()
    scheduler = os.environ.get(SCHEDULER_ENV, "").strip() or None
    print(
        f"sweep: {len(notebooks)} notebooks x {len(seeds)} seeds at BOOK_SCALE={scale} on "
        f"{scheduler or 'a LocalCluster on this machine'}"
    )
    t0 = time.time()
    results = sweep(notebooks, seeds, scale, scheduler)
    failed = [(r["notebook"], r["seed"]) for r in results if r["error"]]
    table = robustness_table(scale)
    bad = {cid: r for cid, r in table.items() if r["failing"]}
    print(
        f"\nsweep finished in {time.time() - t0:.0f} s: {len(results)} runs, {len(failed)} failed"
    )
    by_chapter: dict[str, list[int]] = {}
    for cid, r in table.items():
        tally = by_chapter.setdefault(cid[:2], [0, 0])
        tally[0] += r["n_pass"] == r["n"] or r["text"].startswith("not reproduced")
        tally[1] += 1
    for ch, (ok, n) in sorted(by_chapter.items()):
        print(f"  chapter {ch}: {ok} of {n} claims hold at every swept seed")
    for cid, r in sorted(bad.items()):
        print(f"  {cid}: {r['text']}")
    print(f"results in {sweep_dir(scale).relative_to(ROOT)}")


if __name__ == "__main__":
    main()
