"""Sphinx extension: ``{budget-table}``, every notebook's time against the book's budget.

The budget (see ``benchmarks/budget.py``): 30 s per notebook and 60 s per chapter of one core
at quick scale, 2 GiB of memory. When ``make bench`` has run in this build tree, the table shows
its medians (each notebook alone on one core). Otherwise it shows the times nbval measured under
``make test`` (two notebooks at a time on two cores, so somewhat slower than alone), read from
the execution cache, and says so. It never shows a number that was not measured.
"""

from __future__ import annotations

import json
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive, directives

from lib.records import BUILD, ROOT

NOTEBOOK_S, CHAPTER_S, RSS_GIB = 30.0, 60.0, 2.0
BENCH = BUILD / "bench" / "budget.json"


def _bench_times() -> tuple[dict[str, dict], str] | None:
    try:
        data = json.loads(BENCH.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    rows = {r["notebook"]: r for r in data.get("notebooks", []) if r.get("wall_s") is not None}
    how = (
        f"`make bench`, {data.get('recorded', '?')}: median of {data.get('repeats', '?')} runs, "
        "each notebook alone on one core"
    )
    return rows, how


def _nbval_times(cache_path: Path) -> dict[str, dict]:
    from jupyter_cache import get_cache

    rows = {}
    if not cache_path.exists():
        return rows
    for rec in get_cache(str(cache_path)).list_cache_records():
        secs = (rec.data or {}).get("execution_seconds")
        if secs is None:
            continue
        try:
            rel = str(Path(rec.uri).resolve().relative_to(ROOT.resolve()))
        except ValueError:
            continue
        rows[rel] = {"notebook": rel, "wall_s": float(secs), "peak_rss_gib": None}
    return rows


def _row(cells):
    row = nodes.row()
    for cell in cells:
        entry = nodes.entry()
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
    for r in rows:
        tbody += _row(r)
    tgroup += tbody
    return table


class BudgetTable(Directive):
    """``:source: auto`` (default: ``make bench`` results if any, else this build's nbval times)
    or ``build`` (always this build's execution times)."""

    has_content = False
    option_spec = {"source": lambda x: directives.choice(x, ("auto", "build"))}

    def run(self):
        env = self.state.document.settings.env
        env.note_reread()  # the numbers change without the page changing
        bench = _bench_times() if self.options.get("source", "auto") == "auto" else None
        if bench is not None:
            times, how = bench
        else:
            cache = Path(env.app.outdir).parent / ".jupyter_cache"
            times = _nbval_times(cache)
            how = (
                "nbval under `make test` (two notebooks at a time on two cores); run "
                "`make bench` for each notebook alone on one core"
            )
        if not times:
            return [nodes.paragraph(text="No notebook times in this build tree yet.")]
        nb_rows, chapters = [], {}
        for name in sorted(times):
            r = times[name]
            ch = Path(name).parts[1][:2] if len(Path(name).parts) > 1 else "?"
            chapters[ch] = chapters.get(ch, 0.0) + r["wall_s"]
            rss = r.get("peak_rss_gib")
            verdict = "within" if r["wall_s"] <= NOTEBOOK_S else "OVER"
            if rss is not None and rss > RSS_GIB:
                verdict += ", memory OVER"
            nb_rows.append(
                [name, f"{r['wall_s']:.1f}", "-" if rss is None else f"{rss:.2f}", verdict]
            )
        ch_rows = [
            [ch, f"{t:.1f}", "within" if t <= CHAPTER_S else "OVER"]
            for ch, t in sorted(chapters.items())
        ]
        intro = nodes.paragraph(text=f"Source of the times: {how}.")
        return [
            intro,
            _table(
                ["notebook", "seconds", "peak GiB", "budget 30 s, 2 GiB"],
                nb_rows,
                ["budget-table"],
            ),
            _table(["chapter", "seconds", "budget 60 s"], ch_rows, ["budget-table"]),
        ]


def setup(app):
    app.add_directive("budget-table", BudgetTable)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
