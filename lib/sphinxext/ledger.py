"""Sphinx extension: the claims ledger.

``{claims-ledger}`` renders, at write time, a table of every claim recorded by
:func:`lib.claims.claim` during notebook execution (``:chapter: NN`` restricts it
to one chapter). The "checked in" column links to the page whose executed output
shows the claim, found by scanning the built doctrees for the claim's HTML row.
``{claims-status}`` (``:chapter: NN``) renders one sentence: how many *evidence* claims
pass and how many are not reproduced (only evidence counts towards reproduction), and how
many consistency and sanity checks there are besides.
Pages using either directive are re-read on every build, so nothing is stale.
Records, verdicts, kinds and the row marker come from :mod:`lib.records`.
"""

from __future__ import annotations

import re

from docutils import nodes
from docutils.parsers.rst import Directive, directives

from lib.records import (
    CONSISTENCY,
    EVIDENCE,
    FAIL,
    KINDS,
    NOT_REPRODUCED,
    PASS,
    ROW_RE,
    SANITY,
    load_records,
)


class ledger_placeholder(nodes.General, nodes.Element):
    """Replaced by the ledger table in ``doctree-resolved``."""


class status_placeholder(nodes.General, nodes.Element):
    """Replaced by the chapter's reproduction-status sentence in ``doctree-resolved``."""


class ClaimsLedger(Directive):
    has_content = False
    option_spec = {"chapter": directives.unchanged}
    node_class = ledger_placeholder

    def run(self):
        env = self.state.document.settings.env
        if not hasattr(env, "claims_ledger_docs"):
            env.claims_ledger_docs = set()
        env.claims_ledger_docs.add(env.docname)
        chapter = (self.options.get("chapter") or "").strip().strip("\"'")
        if chapter and not re.fullmatch(r"\d\d", chapter):
            raise self.error(f"{self.name}: :chapter: must be two digits, got {chapter!r}")
        node = self.node_class()
        node["chapter"] = chapter
        return [node]


class ClaimsStatus(ClaimsLedger):
    node_class = status_placeholder


def status_text(recs: list[dict]) -> str:
    """One sentence: evidence claims by verdict, then the other kinds' counts."""
    ev = [r for r in recs if r.get("kind") == EVIDENCE]
    n_pass = sum(r.get("verdict") == PASS for r in ev)
    n_nr = sum(r.get("verdict") == NOT_REPRODUCED for r in ev)
    n_fail = sum(r.get("verdict") == FAIL for r in ev)
    n_cons = sum(r.get("kind") == CONSISTENCY for r in recs)
    n_san = sum(r.get("kind") == SANITY for r in recs)
    n_unk = sum(r.get("kind") not in KINDS for r in recs)
    text = (
        f"Reproduction status: {len(ev)} evidence claims, {n_pass} pass and {n_nr} not "
        f"reproduced" + (f", {n_fail} FAIL" if n_fail else "") + ". Besides these, "
        f"{n_cons} consistency checks of our own derivation and {n_san} sanity checks "
        f"(true by construction) run with the chapter"
    )
    if n_unk:
        text += f"; {n_unk} records carry no kind"
    return text + "."


def _collect_locations(app, doctree):
    env = app.env
    if not hasattr(env, "claims_locations"):
        env.claims_locations = {}
    for raw in doctree.findall(nodes.raw):
        for cid in ROW_RE.findall(raw.astext()):
            env.claims_locations[cid] = env.docname


def _purge(app, env, docname):
    if hasattr(env, "claims_ledger_docs"):
        env.claims_ledger_docs.discard(docname)
    if hasattr(env, "claims_locations"):
        for cid in [c for c, d in env.claims_locations.items() if d == docname]:
            del env.claims_locations[cid]


def _merge(app, env, docnames, other):
    env.claims_ledger_docs = getattr(env, "claims_ledger_docs", set()) | getattr(
        other, "claims_ledger_docs", set()
    )
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


def _robustness(records) -> dict[str, dict]:
    """The sweep's per-claim seed summary for the scale of ``records`` (empty if not swept)."""
    from lib.sphinxext.sweep import robustness_table

    scales = {r.get("scale") for r in records}
    if len(scales) != 1:
        return {}
    return robustness_table(scales.pop())


def _sweep_note(recs, robust, chapter) -> nodes.Node:
    """Above the table: which claims fail at some swept seed (or that nothing was swept)."""
    ids = {r["id"] for r in recs}
    swept = {cid: r for cid, r in robust.items() if cid in ids}
    if not swept:
        return nodes.paragraph(
            text="Seeds column: no seed sweep for this scale in this build tree "
            '(`make sweep SEEDS=0-9` runs one), so every row says "not swept".'
        )
    failing = sorted(cid for cid, r in swept.items() if r["failing"])
    n = max(r["n"] for r in swept.values())
    if not failing:
        return nodes.paragraph(
            text=f"Seeds column: every swept claim holds at every swept seed (up to {n} seeds)."
        )
    para = nodes.paragraph(text=f"Claims that fail at some swept seed ({len(failing)}): ")
    for k, cid in enumerate(failing):
        if k:
            para += nodes.Text("; ")
        para += nodes.literal(text=cid)
        para += nodes.Text(f" ({swept[cid]['text']})")
    return para


def _table(app, fromdocname, records, with_chapter, robust):
    headers = [
        "id",
        "kind",
        "claim",
        "chapter",
        "checked in",
        "measured",
        "criterion",
        "seeds",
        "verdict",
    ]
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
            ref = nodes.reference(
                "", "", internal=True, refuri=app.builder.get_relative_uri(fromdocname, docname)
            )
            ref += nodes.Text(
                app.env.titles[docname].astext() if docname in app.env.titles else docname
            )
            where = ref
        else:
            where = "(not shown on any page)"
        verdict = rec.get("verdict", "?")
        note = rec.get("note") or ""
        verdict_node = nodes.strong(
            text=verdict, classes=[f"claim-{verdict.replace(' ', '-').lower()}"]
        )
        cells = [
            nodes.literal(text=rec["id"]),
            rec.get("kind") or "?",
            rec.get("statement", "") + (f" — {note}" if note else ""),
            rec.get("chapter", ""),
            where,
            rec.get("measured_text", ""),
            rec.get("criterion", ""),
            robust.get(rec["id"], {}).get("text", "not swept"),
            verdict_node,
        ]
        if not with_chapter:
            del cells[3]
        tbody += _row(cells)
    tgroup += tbody
    return table


def _resolve(app, doctree, fromdocname):
    records = load_records()
    for node in list(doctree.findall(status_placeholder)):
        chapter = node["chapter"]
        recs = [r for r in records if not chapter or r.get("chapter") == chapter]
        if recs:
            node.replace_self(nodes.paragraph(text=status_text(recs)))
        else:
            node.replace_self(
                nodes.paragraph(
                    text="Reproduction status: no claim records in "
                    "this build tree yet (run `make book`)."
                )
            )
    robust = None
    for node in list(doctree.findall(ledger_placeholder)):
        if robust is None:
            robust = _robustness(records)
        chapter = node["chapter"]
        recs = [r for r in records if not chapter or r.get("chapter") == chapter]
        counts = {v: sum(r.get("verdict") == v for r in recs) for v in (PASS, FAIL, NOT_REPRODUCED)}
        if recs:
            scales = sorted({r.get("scale", "?") for r in recs})
            seeds = sorted({str(r.get("seed", "?")) for r in recs})
            summary = nodes.paragraph(
                text=(
                    f"{len(recs)} claim checks: {counts[PASS]} pass, {counts[FAIL]} fail, "
                    f"{counts[NOT_REPRODUCED]} not reproduced (scale {', '.join(scales)}; "
                    f"BOOK_SEED {', '.join(seeds)}). {status_text(recs)}"
                )
            )
            table = _table(app, fromdocname, recs, with_chapter=not chapter, robust=robust)
            node.replace_self([summary, _sweep_note(recs, robust, chapter), table])
        else:
            node.replace_self(
                nodes.paragraph(
                    text=(
                        "No claim records were found: the notebooks have not been executed "
                        "in this build tree yet (run `make book` or `make test`)."
                    )
                )
            )


def setup(app):
    app.add_node(ledger_placeholder)
    app.add_node(status_placeholder)
    app.add_directive("claims-ledger", ClaimsLedger)
    app.add_directive("claims-status", ClaimsStatus)
    app.connect("doctree-read", _collect_locations)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-get-outdated", _always_outdated)
    app.connect("doctree-resolved", _resolve)
    return {
        "version": "0.1",
        "parallel_read_safe": True,
        "parallel_write_safe": True,
        "env_version": 1,
    }
