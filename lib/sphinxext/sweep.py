"""Claims across seeds, on Dask: ``make sweep`` (outside the gate).

Every (notebook, seed) pair is one Dask task. The task executes the MyST notebook with nbclient
in a fresh kernel whose environment sets ``BOOK_SEED``, ``BOOK_SCALE`` and a private
``BOOK_LEDGER_DIR``, and returns the claim records the notebook wrote, its run time and any
error. A notebook that fails at one seed is recorded as a failure for that seed and never
stops the sweep; a worker that dies mid-task is replaced and its task rerun by Dask's scheduler.

Results go to ``_build/sweep/<scale>/``: one JSON per (claim, seed) under ``claims/`` and one
per (notebook, seed) under ``runs/``, each carrying the chapter's *result stamp*
(:func:`lib.sphinxext.cache.result_stamps`: the code its results depend on) at the time of the
sweep. :func:`publish` then folds them into the committed summary
``book/_data/sweep-<scale>.json``, one entry per chapter keyed by that stamp, which the build
reads (:func:`published_robustness`): the ledger's "seeds" column shows a chapter's sweep only
while its stamp matches the code being built, and says "stale" otherwise.

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

from lib.records import FAIL, NOT_REPRODUCED, PASS, ROOT, VERDICTS, load_records

VERDICTS_KNOWN = VERDICTS

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


def _chapter_of(notebook: str | Path) -> str:
    """``"07"`` for ``book/07-slug/x.md`` (absolute or relative); ``""`` outside a chapter."""
    for part in Path(notebook).parts:
        m = re.match(r"^(\d\d)-", part)
        if m:
            return m.group(1)
    return ""


def _book_relative(path: Path) -> str:
    """``book/07-slug/x.md`` for a notebook of any tree (the path from its ``book`` folder on);
    other paths as given."""
    parts = Path(path).parts
    if "book" in parts:
        return str(Path(*parts[len(parts) - 1 - parts[::-1].index("book") :]))
    return str(path)


def sweep_dir(scale: str, root: Path = ROOT) -> Path:
    return Path(root) / "_build" / "sweep" / scale


def run_notebook(
    path: str, seed: int, scale: str = "quick", timeout: int = 1800, stamp: str = ""
) -> dict:
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
        "notebook": _book_relative(nb_path),
        "seed": int(seed),
        "scale": scale,
        "seconds": round(seconds, 2),
        "error": error,
        "stamp": stamp,
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
        rec = dict(rec, notebook=result["notebook"], stamp=result.get("stamp", ""))
        (folder / f"seed-{result['seed']}.json").write_text(json.dumps(rec, indent=1))


def _done(run: dict | None, stamp: str | None) -> bool:
    return bool(run and stamp and run.get("stamp") == stamp and not run.get("error"))


def sweep(
    notebooks: list[Path],
    seeds: list[int],
    scale: str = "quick",
    scheduler: str | None = None,
    root: Path = ROOT,
    client=None,
    progress: bool = True,
    stamps: dict[str, str] | None = None,
    skip_done: bool = False,
) -> list[dict]:
    """Run every (notebook, seed) pair as one Dask task; write and return the results."""
    from distributed import as_completed

    stamps = stamps or {}
    tasks = [(str(nb), s) for nb in notebooks for s in seeds]
    if skip_done:  # resume: a clean run of the same code at the same seed is not repeated
        runs = load_runs(scale, root)
        tasks = [
            (nb, s)
            for nb, s in tasks
            if not _done(runs.get(_book_relative(Path(nb)), {}).get(s), stamps.get(_chapter_of(nb)))
        ]
        if progress:
            print(f"{len(notebooks) * len(seeds) - len(tasks)} runs already done at this code")
    if not tasks:
        return []
    own = client is None
    if own:
        client = _client(scheduler, len(tasks))
    try:
        link = getattr(client, "dashboard_link", None)
        if progress and link and "None" not in str(link):
            print(f"Dask dashboard: {link}")
        futures = [
            client.submit(
                run_notebook,
                nb,
                s,
                scale,
                stamp=stamps.get(_chapter_of(nb), ""),
                key=f"nb-{i}-{Path(nb).stem}-seed{s}",
                pure=False,
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


# ----------------------------------------------------------------------------- publishing
def published_path(scale: str, root: Path = ROOT) -> Path:
    """The committed summary of the sweep at ``scale``: ``book/_data/sweep-<scale>.json``."""
    return Path(root) / "book" / "_data" / f"sweep-{scale}.json"


def load_published(scale: str, root: Path = ROOT) -> dict:
    """The committed summary (``{"scale", "chapters": {"07": entry}}``), empty if none."""
    try:
        data = json.loads(published_path(scale, root).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {"scale": scale, "chapters": {}}
    data.setdefault("chapters", {})
    return data


def _measured_range(rec: dict) -> list[float] | None:
    from lib.sphinxext.prose import measured_values

    vals = measured_values(rec)
    return [float(f"{min(vals):.4g}"), float(f"{max(vals):.4g}")] if vals else None


def git_output(root: Path, *args: str) -> str:
    import subprocess

    try:
        out = subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, check=True, timeout=20
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip()


def machine_description() -> str:
    import platform

    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.machine()} {cpu or platform.processor()}, {os.cpu_count()} cores".strip()


def chapter_entry(ch: str, stamp: str, scale: str, root: Path = ROOT) -> dict | None:
    """The published entry of chapter ``ch`` from this tree's raw sweep results at ``stamp``.

    ``None`` unless every notebook of the chapter was run at ``stamp`` at one common set of
    seeds (a partial sweep publishes nothing for that chapter). A claim missing at a seed
    whose notebook ran there is "not reached".
    """
    from lib.sphinxext.cache import chapter_notebooks

    notebooks = [str(nb.relative_to(root)) for nb in chapter_notebooks(root).get(ch, [])]
    runs = load_runs(scale, root)
    seeds_by_nb = {
        nb: {s for s, run in runs.get(nb, {}).items() if run.get("stamp") == stamp}
        for nb in notebooks
    }
    if not notebooks or any(not seeds for seeds in seeds_by_nb.values()):
        return None
    seeds = sorted(set.intersection(*seeds_by_nb.values()))
    if not seeds:
        return None
    claims: dict[str, dict] = {}
    for cid, per_seed in sorted(load_sweep(scale, root).items()):
        if _chapter_of_claim(cid) != ch:
            continue
        recs = {s: r for s, r in per_seed.items() if s in seeds and r.get("stamp") == stamp}
        if not recs:
            continue
        nb = next(iter(recs.values())).get("notebook")
        claims[cid] = {
            "notebook": nb,
            "verdict": {
                str(s): recs[s].get("verdict", "?") if s in recs else "not reached" for s in seeds
            },
            "measured": {str(s): _measured_range(recs[s]) for s in seeds if s in recs},
        }
    nb_info = {}
    for nb in notebooks:
        at = [runs[nb][s] for s in seeds]
        secs = sorted(r["seconds"] for r in at)
        errors = {str(r["seed"]): r["error"][:300] for r in at if r.get("error")}
        nb_info[nb] = {"median_s": secs[len(secs) // 2], "max_s": secs[-1], "errors": errors}
    return {
        "stamp": stamp,
        "seeds": seeds,
        "swept": time.strftime("%Y-%m-%d", time.gmtime()),
        "commit": git_output(root, "rev-parse", "--short=10", "HEAD"),
        "machine": machine_description(),
        "notebooks": nb_info,
        "claims": claims,
    }


def _chapter_of_claim(claim_id: str) -> str:
    return claim_id[:2]


def publish(scale: str, chapters: list[str] | None = None, root: Path = ROOT) -> dict:
    """Fold the raw results of this tree into ``book/_data/sweep-<scale>.json``.

    A chapter's entry is replaced only when every one of its notebooks has results at the
    chapter's *current* result stamp; entries of other chapters are kept as they were
    (the build marks them stale if their code has changed since). Returns
    ``{"published": [...], "skipped": {ch: reason}}``.
    """
    import fcntl

    from lib.sphinxext.cache import result_stamps

    stamps = result_stamps(root, scale)
    wanted = sorted(stamps) if chapters is None else sorted(chapters)
    path = published_path(scale, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    done, skipped = [], {}
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # sweeps of different chapters may finish together
        data = load_published(scale, root)
        for ch in wanted:
            entry = chapter_entry(ch, stamps.get(ch, ""), scale, root)
            if entry is None:
                skipped[ch] = "no complete sweep of its current code in this tree"
                continue
            data["chapters"][ch] = entry
            done.append(ch)
        data.update(
            scale=scale,
            format=1,
            about="Per-claim results of `make sweep` (lib/sphinxext/sweep.py), one entry per "
            "chapter, keyed by the chapter's result stamp; committed so the published book "
            "shows them.",
        )
        data["chapters"] = dict(sorted(data["chapters"].items()))
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n", encoding="utf-8")
        tmp.replace(path)
    return {"published": done, "skipped": skipped}


def _seed_span(seeds: list[int]) -> str:
    """``"0–9"`` for a contiguous run, else ``"0, 3, 5"``."""
    if seeds and seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
        return f"{seeds[0]}\u2013{seeds[-1]}"
    return ", ".join(map(str, seeds))


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def entry_robustness(entry: dict) -> dict[str, dict]:
    """``{claim_id: {"text", "n", "n_pass", "failing", "range"}}`` from one published entry."""
    seeds = entry.get("seeds", [])
    span = _seed_span(seeds)
    out = {}
    for cid, c in entry.get("claims", {}).items():
        v = {int(s): x for s, x in c.get("verdict", {}).items()}
        fails = sorted(s for s, x in v.items() if x == FAIL)
        missing = sorted(s for s, x in v.items() if x not in VERDICTS_KNOWN)
        n_pass = sum(x in (PASS, NOT_REPRODUCED) for x in v.values())
        nr = all(x == NOT_REPRODUCED for x in v.values()) and v
        ranges = [r for r in c.get("measured", {}).values() if r]
        rng = [min(r[0] for r in ranges), max(r[1] for r in ranges)] if ranges else None
        if nr:
            text = f"not reproduced at {len(v)}/{len(seeds)} seeds ({span})"
        else:
            text = f"{n_pass}/{len(seeds)} seeds ({span})"
        notes = []
        if fails:
            notes.append("fails at " + ", ".join(map(str, fails)))
        if missing:
            notes.append("not reached at " + ", ".join(map(str, missing)))
        if notes:
            text += "; " + "; ".join(notes)
        if rng is not None:
            text += (
                f"; measured {_fmt(rng[0])}"
                if rng[0] == rng[1]
                else f"; measured {_fmt(rng[0])} to {_fmt(rng[1])}"
            )
        out[cid] = {
            "text": text,
            "n": len(seeds),
            "n_pass": 0 if nr else n_pass,
            "failing": sorted(fails + missing),
            "range": rng,
        }
    return out


def published_robustness(
    records: list[dict], root: Path = ROOT, stamps: dict[str, str] | None = None
) -> tuple[dict[str, dict], dict[str, dict]]:
    """What the build shows: ``(per-claim robustness, per-chapter sweep state)``.

    The per-chapter state is ``{"state": "current" | "stale" | "none", "entry": ...}``. A claim
    of a stale chapter reads "sweep stale (...)"; a claim the sweep never saw reads "not swept".
    """
    from lib.sphinxext.cache import result_stamps

    scales = {r.get("scale") for r in records}
    if len(scales) != 1:
        return {}, {}
    scale = scales.pop()
    data = load_published(scale, root)
    stamps = result_stamps(root, scale) if stamps is None else stamps
    robust: dict[str, dict] = {}
    state: dict[str, dict] = {}
    for ch in sorted({r.get("chapter", "") for r in records}):
        entry = data["chapters"].get(ch)
        if entry is None:
            state[ch] = {"state": "none", "entry": None}
            continue
        if entry.get("stamp") != stamps.get(ch):
            state[ch] = {"state": "stale", "entry": entry}
            for r in records:
                if r.get("chapter") == ch:
                    robust[r["id"]] = {
                        "text": f"sweep stale (code changed since the sweep of "
                        f"{entry.get('swept', '?')})",
                        "n": 0,
                        "n_pass": 0,
                        "failing": [],
                        "stale": True,
                    }
            continue
        state[ch] = {"state": "current", "entry": entry}
        robust.update(entry_robustness(entry))
    return robust, state


def main(argv=None) -> None:
    from lib.scale import scale_name
    from lib.sphinxext.cache import chapter_notebooks

    ap = argparse.ArgumentParser(description="Run chapter notebooks over seeds on Dask.")
    ap.add_argument("--seeds", default="0-9")
    ap.add_argument("--chapters", default="", help="comma-separated chapter numbers")
    ap.add_argument("--notebooks", nargs="*", default=None)
    ap.add_argument(
        "--force", action="store_true", help="rerun (notebook, seed) pairs already run cleanly"
    )
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
    from lib.sphinxext.cache import result_stamps

    stamps = result_stamps(ROOT, scale)
    t0 = time.time()
    results = sweep(notebooks, seeds, scale, scheduler, stamps=stamps, skip_done=not args.force)
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
    after = result_stamps(ROOT, scale)
    swept = sorted({_chapter_of(nb) for nb in notebooks} - {""})
    changed = [ch for ch in swept if after.get(ch) != stamps.get(ch)]
    if changed:
        print(
            f"not published: the code of chapter(s) {', '.join(changed)} changed during the sweep"
        )
    out = publish(scale, [ch for ch in swept if ch not in changed])
    path = published_path(scale).relative_to(ROOT)
    if out["published"]:
        print(f"published chapter(s) {', '.join(out['published'])} to {path} (commit it)")
    for ch, why in out["skipped"].items():
        print(f"  chapter {ch} not published: {why}")


if __name__ == "__main__":
    main()
