"""Sphinx extension: the claims ledger.

``{claims-ledger}`` renders, at write time, a table of every claim recorded by
:func:`lib.claims.claim` during notebook execution (``:chapter: NN`` restricts it
to one chapter). The "checked in" column links to the page whose executed output
shows the claim, found by scanning the built doctrees for the claim's HTML row.
Pages using the directive are re-read on every build, so the table is never stale.
"""

from __future__ import annotations

import re

from docutils import nodes
from docutils.parsers.rst import Directive, directives

from .claims import FAIL, NOT_REPRODUCED, PASS, load_records

_ROW_ID = re.compile(r'class="book-claim" data-claim-id="([^"]+)"')


class ledger_placeholder(nodes.General, nodes.Element):
    """Replaced by the ledger table in ``doctree-resolved``."""


class ClaimsLedger(Directive):
    has_content = False
    option_spec = {"chapter": directives.unchanged}

    def run(self):
        env = self.state.document.settings.env
        if not hasattr(env, "claims_ledger_docs"):
            env.claims_ledger_docs = set()
        env.claims_ledger_docs.add(env.docname)
        chapter = (self.options.get("chapter") or "").strip().strip("\"'")
        if chapter and not re.fullmatch(r"\d\d", chapter):
            raise self.error(f"claims-ledger: :chapter: must be two digits, got {chapter!r}")
        node = ledger_placeholder()
        node["chapter"] = chapter
        return [node]


def _collect_locations(app, doctree):
    env = app.env
    if not hasattr(env, "claims_locations"):
        env.claims_locations = {}
    for raw in doctree.findall(nodes.raw):
        for cid in _ROW_ID.findall(raw.astext()):
            env.claims_locations[cid] = env.docname


def _purge(app, env, docname):
    if hasattr(env, "claims_ledger_docs"):
        env.claims_ledger_docs.discard(docname)
    if hasattr(env, "claims_locations"):
        for cid in [c for c, d in env.claims_locations.items() if d == docname]:
            del env.claims_locations[cid]


def _merge(app, env, docnames, other):
    env.claims_ledger_docs = getattr(env, "claims_ledger_docs", set()) | getattr(other, "claims_ledger_docs", set())
    locs = getattr(env, "claims_locations", {})
    locs.update(getattr(other, "claims_locations", {}))
    env.claims_locations = locs


def _always_outdated(app, env, added, changed, removed):
    return sorted(d for d in getattr(env, "claims_ledger_docs", set()) if d in env.found_docs)


def _row(cells):
    row = nodes.row()
    for cell in cells:
        entry = nodes.entry()
        if isinstance(cell, nodes.Node):
            entry += nodes.paragraph("", "", cell)
        else:
            entry += nodes.paragraph(text=str(cell))
        row += entry
    return row


def _table(app, fromdocname, records, with_chapter):
    headers = ["id", "claim", "chapter", "checked in", "measured", "criterion", "verdict"]
    if not with_chapter:
        headers.remove("chapter")
    table = nodes.table(classes=["claims-ledger"])
    tgroup = nodes.tgroup(cols=len(headers))
    table += tgroup
    for _ in headers:
        tgroup += nodes.colspec(colwidth=1)
    thead = nodes.thead()
    thead += _row(headers)
    tgroup += thead
    tbody = nodes.tbody()
    locations = getattr(app.env, "claims_locations", {})
    for rec in records:
        docname = locations.get(rec["id"])
        if docname is not None:
            ref = nodes.reference("", "", internal=True,
                                  refuri=app.builder.get_relative_uri(fromdocname, docname))
            ref += nodes.Text(app.env.titles[docname].astext() if docname in app.env.titles else docname)
            where = ref
        else:
            where = "(not shown on any page)"
        verdict = rec.get("verdict", "?")
        note = rec.get("note") or ""
        verdict_node = nodes.strong(text=verdict, classes=[f"claim-{verdict.replace(' ', '-').lower()}"])
        cells = [nodes.literal(text=rec["id"]), rec.get("statement", "") + (f" — {note}" if note else ""),
                 rec.get("chapter", ""), where, rec.get("measured_text", ""), rec.get("criterion", ""),
                 verdict_node]
        if not with_chapter:
            del cells[2]
        tbody += _row(cells)
    tgroup += tbody
    return table


def _resolve(app, doctree, fromdocname):
    records = load_records()
    for node in list(doctree.findall(ledger_placeholder)):
        chapter = node["chapter"]
        recs = [r for r in records if not chapter or r.get("chapter") == chapter]
        counts = {v: sum(r.get("verdict") == v for r in recs) for v in (PASS, FAIL, NOT_REPRODUCED)}
        if recs:
            scales = sorted({r.get("scale", "?") for r in recs})
            seeds = sorted({str(r.get("seed", "?")) for r in recs})
            summary = nodes.paragraph(text=(
                f"{len(recs)} claim checks: {counts[PASS]} pass, {counts[FAIL]} fail, "
                f"{counts[NOT_REPRODUCED]} not reproduced (scale {', '.join(scales)}; "
                f"BOOK_SEED {', '.join(seeds)})."))
            node.replace_self([summary, _table(app, fromdocname, recs, with_chapter=not chapter)])
        else:
            node.replace_self(nodes.paragraph(text=(
                "No claim records were found: the notebooks have not been executed in this build "
                "tree yet (run `make book` or `make test`).")))


def setup(app):
    app.add_node(ledger_placeholder)
    app.add_directive("claims-ledger", ClaimsLedger)
    app.connect("doctree-read", _collect_locations)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-get-outdated", _always_outdated)
    app.connect("doctree-resolved", _resolve)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True,
            "env_version": 1}
