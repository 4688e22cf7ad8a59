"""Sphinx extension: the status page's tables of time, memory and seeds.

* ``{budget-table}``: one table of every notebook and one of every chapter, against the
  book's budget (30 s per notebook and 60 s per chapter of one core at quick scale, 2 GiB of
  memory). Each row shows two measurements side by side:

  - **this build**: the notebook's run under nbval in this build (``make test``): CPU seconds
    and peak resident memory of its kernel (read from ``/proc`` when it finished, see
    ``conftest.py``) and wall seconds (two notebooks at a time on two cores), from the
    execution cache;
  - **idle bench**: the committed results of ``make bench`` (``book/_data/budget-<scale>.json``:
    each notebook alone on an idle machine, one core, median of repeats), shown only while the
    chapter's code is the code that was benchmarked (its result stamp,
    :func:`lib.sphinxext.cache.result_stamps`), and marked stale otherwise.

  The verdict uses the idle bench where it is current, else this build's CPU seconds; a cell
  over its budget carries the class ``budget-over`` (highlighted by ``book.css``).
* ``{gate-phases}``: the wall time of each phase of the last ``make test`` in this build tree.
* ``{sweep-status}``: one row per chapter: when its seed sweep ran, at which commit and seeds,
  how many claims hold at every seed, and whether the sweep is current or stale.

It never shows a number that was not measured: an empty cell reads "-".
"""

from __future__ import annotations

import json
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive

from lib.records import BUILD, ROOT

NOTEBOOK_S, CHAPTER_S, RSS_GIB = 30.0, 60.0, 2.0
GATE_TIMES = BUILD / "gate-times.json"


def bench_path(scale: str, root: Path = ROOT) -> Path:
    """The committed results of ``make bench``: ``book/_data/budget-<scale>.json``."""
    return Path(root) / "book" / "_data" / f"budget-{scale}.json"


def load_bench(scale: str, root: Path = ROOT) -> dict:
    try:
        return json.loads(bench_path(scale, root).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}


def build_times(cache_path: Path, root: Path = ROOT) -> dict[str, dict]:
    """``{notebook: {"wall_s", "cpu_s", "peak_rss_gib"}}`` of this build's nbval runs."""
    from jupyter_cache import get_cache

    rows = {}
    if not cache_path.exists():
        return rows
    for rec in get_cache(str(cache_path)).list_cache_records():
        data = rec.data or {}
        if data.get("execution_seconds") is None:
            continue
        try:
            rel = str(Path(rec.uri).resolve().relative_to(Path(root).resolve()))
        except ValueError:
            continue
        rows[rel] = {
            "wall_s": float(data["execution_seconds"]),
            "cpu_s": data.get("cpu_seconds"),
            "peak_rss_gib": data.get("peak_rss_gib"),
        }
    return rows


def _chapter(notebook: str) -> str:
    parts = Path(notebook).parts
    return parts[1][:2] if len(parts) > 1 else "?"


def _fmt(x, spec=".1f") -> str:
    return "-" if x is None else format(float(x), spec)


def budget_rows(build: dict, bench: dict, stamps: dict[str, str]):
    """Rows of the notebook and chapter tables as ``(cells, over)`` pairs, where ``over`` is
    the set of column indices whose value is over budget."""
    bench_rows = {r["notebook"]: r for r in bench.get("notebooks", [])}
    nb_rows, per_chapter = [], {}
    for name in sorted(set(build) | set(bench_rows)):
        ch = _chapter(name)
        b, idle = build.get(name, {}), bench_rows.get(name)
        current = idle is not None and idle.get("stamp") == stamps.get(ch)
        idle_s = idle.get("wall_s") if current else None
        rss = b.get("peak_rss_gib")
        if rss is None and current:
            rss = idle.get("peak_rss_gib")
        basis = idle_s if idle_s is not None else b.get("cpu_s")
        if basis is None:
            basis = b.get("wall_s")
        over = set()
        if basis is not None and basis > NOTEBOOK_S:
            over.add(4 if idle_s is not None else 1)
        if rss is not None and rss > RSS_GIB:
            over.add(3)
        verdict = "OVER" if over else ("within" if basis is not None else "-")
        if over:
            over.add(5)
        if idle is None:
            idle_text = "-"
        elif current:
            idle_text = _fmt(idle_s)
        else:
            idle_text = "stale"
        nb_rows.append(
            (
                [
                    name,
                    _fmt(b.get("cpu_s")),
                    _fmt(b.get("wall_s")),
                    _fmt(rss, ".2f"),
                    idle_text,
                    verdict,
                ],
                over,
            )
        )
        tally = per_chapter.setdefault(ch, {"cpu": 0.0, "idle": 0.0, "n_idle": 0, "n": 0})
        tally["n"] += 1
        tally["cpu"] += b.get("cpu_s") or b.get("wall_s") or 0.0
        if idle_s is not None:
            tally["idle"] += idle_s
            tally["n_idle"] += 1
    ch_rows = []
    for ch, t in sorted(per_chapter.items()):
        idle_total = t["idle"] if t["n_idle"] == t["n"] else None
        basis = idle_total if idle_total is not None else t["cpu"]
        over = {3, 2 if idle_total is not None else 1} if basis > CHAPTER_S else set()
        ch_rows.append(([ch, _fmt(t["cpu"]), _fmt(idle_total), "OVER" if over else "within"], over))
    return nb_rows, ch_rows


def _row(cells, over=(), head=False):
    row = nodes.row()
    for k, cell in enumerate(cells):
        entry = nodes.entry(classes=["budget-over"] if k in over else [])
        entry += nodes.paragraph(text=str(cell))
        row += entry
    return row


def _table(headers, rows, classes):
    table = nodes.table(classes=classes)
    tgroup = nodes.tgroup(cols=len(headers))
    table += tgroup
    for _ in headers:
        tgroup += nodes.colspec(colwidth=1)
    thead = nodes.thead()
    thead += _row(headers)
    tgroup += thead
    tbody = nodes.tbody()
    for cells, over in rows:
        tbody += _row(cells, over)
    tgroup += tbody
    return table


def _scale() -> str:
    from lib.scale import scale_name

    return scale_name()


class BudgetTable(Directive):
    has_content = False

    def run(self):
        from lib.sphinxext.cache import result_stamps

        env = self.state.document.settings.env
        env.note_reread()  # the numbers change without the page changing
        build = build_times(Path(env.app.outdir).parent / ".jupyter_cache")
        bench = load_bench(_scale())
        if not build and not bench:
            return [nodes.paragraph(text="No notebook times in this build tree yet.")]
        nb_rows, ch_rows = budget_rows(build, bench, result_stamps(ROOT, _scale()))
        if bench:
            loads = [r.get("load_before") for r in bench.get("notebooks", [])]
            loads = [x for x in loads if x is not None]
            how = (
                f"Idle bench: `make bench` on {bench.get('recorded', '?')} at commit "
                f"{bench.get('commit', '?')} ({bench.get('machine', '?')}), median of "
                f"{bench.get('repeats', '?')} runs, each notebook alone on one core; the "
                "1-minute load average before each run was at most "
                f"{max(loads) if loads else '?'}. 'stale': the notebook's chapter changed since."
            )
        else:
            how = "Idle bench: none committed (`make bench` writes book/_data/budget-quick.json)."
        intro = nodes.paragraph(
            text="This build: nbval under `make test` (two notebooks at a time on two cores): "
            "CPU seconds and peak memory of the notebook's kernel, and wall seconds. " + how
        )
        return [
            intro,
            _table(
                [
                    "notebook",
                    "CPU s (this build)",
                    "wall s (this build)",
                    "peak GiB",
                    "idle bench s",
                    "budget 30 s, 2 GiB",
                ],
                nb_rows,
                ["budget-table"],
            ),
            _table(
                ["chapter", "CPU s (this build)", "idle bench s", "budget 60 s"],
                ch_rows,
                ["budget-table"],
            ),
        ]


class GatePhases(Directive):
    has_content = False

    def run(self):
        self.state.document.settings.env.note_reread()
        try:
            data = json.loads(GATE_TIMES.read_text())
        except (OSError, json.JSONDecodeError):
            return [
                nodes.paragraph(
                    text="No `make test` phases in this build tree (it was built by `make book`)."
                )
            ]
        phases = data.get("phases", {})
        rows = [([k, _fmt(v)], set()) for k, v in phases.items()]
        total = sum(phases.values())
        rows.append((["total", _fmt(total)], {1} if total > 15 * 60 else set()))
        intro = nodes.paragraph(
            text=f"Wall seconds of each phase of the `make test` that built this page "
            f"(started {data.get('started', '?')}); the gate's budget is 15 minutes on 2 cores."
        )
        return [intro, _table(["phase", "seconds"], rows, ["budget-table"])]


class SweepStatus(Directive):
    has_content = False

    def run(self):
        from lib.records import load_records
        from lib.sphinxext.cache import result_stamps
        from lib.sphinxext.sweep import entry_robustness, load_published, published_path

        self.state.document.settings.env.note_reread()
        scale = _scale()
        data = load_published(scale)
        stamps = result_stamps(ROOT, scale)
        records = load_records()
        rows = []
        for ch in sorted(stamps):
            entry = data["chapters"].get(ch)
            n_rec = sum(r.get("chapter") == ch for r in records)
            if entry is None:
                rows.append(([ch, "-", "-", "-", "-", f"{n_rec}", "none"], {6}))
                continue
            robust = entry_robustness(entry)
            held = sum(not r["failing"] for r in robust.values())
            state = "current" if entry.get("stamp") == stamps[ch] else "stale"
            over = {4, 6} if held < len(robust) else set()
            if state == "stale":
                over.add(6)
            rows.append(
                (
                    [
                        ch,
                        entry.get("swept", "?"),
                        entry.get("commit", "?"),
                        ", ".join(map(str, entry.get("seeds", []))),
                        f"{held} of {len(robust)}",
                        f"{n_rec}",
                        state,
                    ],
                    over,
                )
            )
        intro = nodes.paragraph(
            text=f"`make sweep` runs every notebook at every seed and publishes the per-claim "
            f"results in {published_path(scale).relative_to(ROOT)}; the ledger's seeds column "
            "reads them. A chapter is 'stale' when its code changed after its sweep."
        )
        head = [
            "chapter",
            "swept",
            "commit",
            "seeds",
            "claims holding at every seed",
            "claims in this build",
            "sweep",
        ]
        return [intro, _table(head, rows, ["budget-table"])]


def setup(app):
    app.add_directive("budget-table", BudgetTable)
    app.add_directive("gate-phases", GatePhases)
    app.add_directive("sweep-status", SweepStatus)
    return {"version": "0.2", "parallel_read_safe": True, "parallel_write_safe": True}
