"""Sphinx extension: the claims ledger.

``{claims-ledger}`` renders, at write time, a table of every claim recorded by
:func:`lib.claims.claim` during notebook execution (``:chapter: NN`` restricts it
to one chapter). The "checked in" column links to the page whose executed output
shows the claim, found by scanning the built doctrees for the claim's HTML row.
``{claims-status}`` (``:chapter: NN``) renders one sentence: how many *evidence* claims
pass and how many are not reproduced (only evidence counts towards reproduction), and how
many consistency and sanity checks there are besides, and which of the paper's headline
results no evidence claim tests (declared in ``book/_data/headline-results.yml``).
Pages using either directive are re-read on every build, so nothing is stale.
Records, verdicts, kinds and the row marker come from :mod:`lib.records`.
"""

from __future__ import annotations

import html
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
    RECORD_FIELDS,
    ROOT,
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


class claim_reference(nodes.Inline, nodes.TextElement):
    """``{claim}`07/x/y``: replaced by a link to the claim's row in its chapter's table."""


def claim_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """The role ``{claim}`NN/where/what``: a link to the claim's row (its anchor) in the claims
    table of chapter ``NN``'s overview page. An id no record carries is a build warning."""
    cid = text.strip()
    if not re.fullmatch(r"\d\d/[A-Za-z0-9_.\-/]+", cid):
        msg = inliner.reporter.error(f"claim role: not a claim id: {cid!r}", line=lineno)
        return [inliner.problematic(rawtext, rawtext, msg)], [msg]
    node = claim_reference(rawtext, cid)
    node["claim_id"] = cid
    return [node], []


def claim_anchor(claim_id: str) -> str:
    """The HTML id of a claim's row: ``claim-`` and the id with ``/`` as ``-``."""
    return "claim-" + re.sub(r"[^A-Za-z0-9_.\-]", "-", claim_id)


class findings_placeholder(nodes.General, nodes.Element):
    """Replaced by the findings (claims with a ``finding`` note) in ``doctree-resolved``."""


class ClaimsFindings(ClaimsLedger):
    node_class = findings_placeholder


HEADLINES = ROOT / "book" / "_data" / "headline-results.yml"


def headline_results(path=None) -> dict[str, list[dict]]:
    """The papers' headline results per chapter: ``{"07": [{"name": ..., "ids": [...]}]}``."""
    import yaml

    path = HEADLINES if path is None else path
    if not path.exists():
        return {}
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return {str(ch).zfill(2): list(items or []) for ch, items in data.items()}


def untested_headlines(recs: list[dict], chapter: str, headlines=None) -> list[str]:
    """The names of chapter ``chapter``'s headline results that no evidence claim names (the
    second part of an evidence claim's id, ``07/thm-3.1/...``, is one of the result's ids)."""
    headlines = headline_results() if headlines is None else headlines
    named = {
        r["id"].split("/")[1]
        for r in recs
        if r.get("kind") == EVIDENCE and r.get("chapter") == chapter and r["id"].count("/") >= 2
    }
    return [h["name"] for h in headlines.get(chapter, []) if not named & set(h.get("ids", []))]


def untested_text(recs: list[dict], chapter: str = "", headlines=None) -> str:
    """``untested headline results: k (names)``; for the whole book (no chapter), the count
    over all chapters."""
    headlines = headline_results() if headlines is None else headlines
    if chapter:
        names = untested_headlines(recs, chapter, headlines)
        listed = f" ({'; '.join(names)})" if names else ""
        return f"Untested headline results of the paper: {len(names)}{listed}."
    total = sum(len(v) for v in headlines.values())
    k = sum(len(untested_headlines(recs, ch, headlines)) for ch in headlines)
    return f"Untested headline results: {k} of the papers' {total} (listed per chapter)."


def status_text(recs: list[dict], chapter: str | None = None, headlines=None) -> str:
    """One sentence: evidence claims by verdict, then the other kinds' counts; with a chapter
    (``"07"``; ``""`` for the whole book), a second: the paper's untested headline results."""
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
        f"(true by construction) run with the {'book' if chapter == '' else 'chapter'}"
    )
    if n_unk:
        text += f"; {n_unk} records carry no kind"
    text += "."
    if chapter is not None:
        text += " " + untested_text(recs, chapter, headlines)
    if chapter == "":
        text += f" Findings (where the book qualifies a paper): {len(findings_of(recs))}."
    return text


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


def _esc(text) -> str:
    return html.escape(str(text), quote=True)


def _chapter_titles(app) -> dict[str, tuple[str, str]]:
    """``{"07": (docname of the chapter's index, its title)}``."""
    out = {}
    for docname in app.env.found_docs:
        m = re.match(r"book/(\d\d)-[^/]+/index$", docname)
        if m and docname in app.env.titles:
            out[m.group(1)] = (docname, app.env.titles[docname].astext())
    return out


def _href(app, fromdocname, docname) -> str:
    return app.builder.get_relative_uri(fromdocname, docname)


def _static(fromdocname, name) -> str:
    return "../" * fromdocname.count("/") + f"_static/{name}"


def _badge(verdict: str) -> str:
    slug = verdict.replace(" ", "-").lower()
    return f'<span class="ledger-badge ledger-{_esc(slug)}">{_esc(verdict)}</span>'


def _rows_html(app, fromdocname, recs, robust, with_chapter) -> str:
    """The claims table: four columns, so that the statement gets most of the width (about
    half at 1280 px): the verdict and kind; the id (it wraps), the statement and the note;
    what was measured, the criterion and the seeds; the page that checks the claim. Each row's
    HTML id is the claim's anchor (:func:`claim_anchor`)."""
    locations = getattr(app.env, "claims_locations", {})
    heads = [
        ("verdict", "verdict"),
        ("claim", "claim"),
        ("result", "result"),
        ("where", "checked in"),
    ]
    if with_chapter:
        heads.insert(1, ("ch", "ch."))
    out = ['<div class="ledger-scroll"><table class="ledger-table claims-ledger"><thead><tr>']
    out += [f'<th class="ledger-col-{cls}">{h}</th>' for cls, h in heads]
    out.append("</tr></thead><tbody>")
    for rec in recs:
        verdict, kind = rec.get("verdict", "?"), rec.get("kind") or "?"
        docname = locations.get(rec["id"])
        if docname is not None:
            title = app.env.titles[docname].astext() if docname in app.env.titles else docname
            where = f'<a href="{_esc(_href(app, fromdocname, docname))}">{_esc(title)}</a>'
        else:
            where = "(not shown on any page)"
        note = rec.get("note") or ""
        statement = (
            f'<code class="ledger-id">{_esc(rec["id"])}</code><br>'
            + _esc(rec.get("statement", ""))
            + (f'<br><span class="ledger-note">{_esc(note)}</span>' if note else "")
        )
        result = "<br>".join(
            f'<span class="ledger-label">{label}</span> {_esc(value)}'
            for label, value in (
                ("measured", rec.get("measured_text", "")),
                ("criterion", rec.get("criterion", "")),
                ("seeds", robust.get(rec["id"], {}).get("text", "not swept")),
            )
        )
        cells = [
            (
                "verdict",
                _badge(verdict) + "<br>"
                f'<span class="ledger-kind ledger-kind-{_esc(kind)}">{_esc(kind)}</span>',
            ),
            ("claim", statement),
            ("result", result),
            ("where", where),
        ]
        if with_chapter:
            cells.insert(1, ("ch", _esc(rec.get("chapter", ""))))
        search = " ".join([rec["id"], rec.get("statement", ""), note, verdict, kind]).lower()
        out.append(
            f'<tr id="{_esc(claim_anchor(rec["id"]))}" '
            f'data-verdict="{_esc(verdict)}" data-kind="{_esc(kind)}" '
            f'data-search="{_esc(search)}">'
            + "".join(f'<td class="ledger-cell-{cls}">{c}</td>' for cls, c in cells)
            + "</tr>"
        )
    out.append("</tbody></table></div>")
    return "".join(out)


def _counts(recs) -> dict[str, int]:
    ev = [r for r in recs if r.get("kind") == EVIDENCE]
    return {
        "evidence pass": sum(r.get("verdict") == PASS for r in ev),
        "evidence not reproduced": sum(r.get("verdict") == NOT_REPRODUCED for r in ev),
        "consistency": sum(r.get("kind") == CONSISTENCY for r in recs),
        "sanity": sum(r.get("kind") == SANITY for r in recs),
        "FAIL": sum(r.get("verdict") == FAIL for r in recs),
    }


SEGMENTS = (
    ("evidence pass", "#1a7f37"),
    ("evidence not reproduced", "#bf8700"),
    ("consistency", "#0969da"),
    ("sanity", "#8c959f"),
    ("FAIL", "#cf222e"),
)


def _figure_svg(by_chapter: dict[str, list[dict]]) -> str:
    """A horizontal stacked bar per chapter: its claims by kind, evidence split by verdict."""
    chapters = sorted(by_chapter)
    top = max((len(v) for v in by_chapter.values()), default=1)
    row, left, width = 22, 34, 520
    height = row * len(chapters) + 8
    parts = [
        f'<svg class="ledger-figure-svg" viewBox="0 0 {left + width + 40} {height}" '
        'role="img" aria-label="claims per chapter by verdict and kind" '
        'xmlns="http://www.w3.org/2000/svg">'
    ]
    for k, ch in enumerate(chapters):
        y = 4 + k * row
        parts.append(f'<text x="0" y="{y + 14}" font-size="12">{_esc(ch)}</text>')
        x = float(left)
        counts = _counts(by_chapter[ch])
        for name, colour in SEGMENTS:
            w = width * counts[name] / top
            if w > 0:
                parts.append(
                    f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 6}" '
                    f'fill="{colour}"><title>{_esc(ch)}: {counts[name]} {name}</title></rect>'
                )
            x += w
        parts.append(
            f'<text x="{x + 4:.1f}" y="{y + 14}" font-size="11">{len(by_chapter[ch])}</text>'
        )
    parts.append("</svg>")
    legend = " ".join(
        f'<span class="ledger-swatch" style="background:{c}"></span>{_esc(n)}' for n, c in SEGMENTS
    )
    return (
        '<figure class="ledger-figure">' + "".join(parts) + "<figcaption>Claims of each "
        "chapter, by kind, with evidence split by verdict. Only evidence counts towards a "
        f"chapter's reproduction status. {legend}</figcaption></figure>"
    )


def _overview_html(app, fromdocname, by_chapter) -> str:
    titles = _chapter_titles(app)
    headlines = headline_results()
    heads = [
        "chapter",
        "evidence: pass",
        "evidence: not reproduced",
        "consistency",
        "sanity",
        "untested headline results",
    ]
    out = ['<div class="ledger-scroll"><table class="ledger-overview"><thead><tr>']
    out += [f"<th>{h}</th>" for h in heads] + ["</tr></thead><tbody>"]
    for ch in sorted(by_chapter):
        c = _counts(by_chapter[ch])
        doc, title = titles.get(ch, (None, ch))
        name = f'<a href="#ledger-{ch}">{_esc(title)}</a>'
        untested = untested_headlines(by_chapter[ch], ch, headlines)
        declared = len(headlines.get(ch, []))
        untested_cell = (
            f'{len(untested)} of {declared}<br><span class="ledger-note">'
            f"{_esc('; '.join(untested))}</span>"
            if untested
            else f"0 of {declared}"
        )
        out.append(
            f"<tr><td>{name}</td><td>{c['evidence pass']}</td>"
            f"<td>{c['evidence not reproduced']}</td><td>{c['consistency']}</td>"
            f"<td>{c['sanity']}</td><td>{untested_cell}</td></tr>"
        )
    out.append("</tbody></table></div>")
    return "".join(out)


def _filter_html(fromdocname) -> str:
    opts_v = "".join(f'<option value="{v}">{v}</option>' for v in (PASS, NOT_REPRODUCED, FAIL))
    opts_k = "".join(f'<option value="{k}">{k}</option>' for k in KINDS)
    return (
        '<div class="ledger-filter" role="search">'
        '<input type="search" id="ledger-q" placeholder="filter: text or claim id" '
        'aria-label="filter claims by text">'
        '<select id="ledger-verdict" aria-label="verdict"><option value="">any verdict</option>'
        f"{opts_v}</select>"
        '<select id="ledger-kind" aria-label="kind"><option value="">any kind</option>'
        f"{opts_k}</select>"
        '<span id="ledger-count" aria-live="polite"></span>'
        f'<span class="ledger-downloads">download: <a href="{_static(fromdocname, "ledger.json")}"'
        f' download>ledger.json</a> · <a href="{_static(fromdocname, "ledger.csv")}" download>'
        "ledger.csv</a></span></div>"
    )


def _sweep_note(recs, robust, sweep_state=None) -> str:
    """Above the tables: which claims fail at some swept seed, and which chapters have no
    current sweep (none, or one of older code)."""
    ids = {r["id"] for r in recs}
    chapters = sorted({r.get("chapter", "") for r in recs})
    sweep_state = sweep_state or {}
    stale = [ch for ch in chapters if sweep_state.get(ch, {}).get("state") == "stale"]
    none = [ch for ch in chapters if sweep_state.get(ch, {}).get("state", "none") == "none"]
    swept = {cid: r for cid, r in robust.items() if cid in ids and not r.get("stale")}
    parts = []
    if not swept and not stale:
        return (
            '<p class="ledger-sweep">Seeds column: no published seed sweep for this scale '
            "(<code>make sweep SEEDS=0-9</code> runs one and writes "
            "<code>book/_data/sweep-&lt;scale&gt;.json</code>), so every row says "
            "“not swept”.</p>"
        )
    failing = sorted(cid for cid, r in swept.items() if r["failing"])
    if swept:
        n = max(r["n"] for r in swept.values())
        if failing:
            items = "".join(
                f"<li><code>{_esc(c)}</code>: {_esc(swept[c]['text'])}</li>" for c in failing
            )
            parts.append(
                f'<div class="ledger-sweep ledger-sweep-fail"><p>Claims that fail at some '
                f"swept seed ({len(failing)}):</p><ul>{items}</ul></div>"
            )
        else:
            parts.append(
                f'<p class="ledger-sweep">Seeds column: every swept claim holds at every swept '
                f"seed (up to {n} seeds; <code>make sweep</code>, published in "
                f"<code>book/_data</code>).</p>"
            )
    if stale or none:
        what = []
        if stale:
            what.append("chapter(s) " + ", ".join(stale) + " changed since their sweep")
        if none:
            what.append("chapter(s) " + ", ".join(none) + " have no published sweep")
        parts.append(f'<p class="ledger-sweep ledger-sweep-stale">{_esc("; ".join(what))}.</p>')
    return "".join(parts)


def _robustness(app, records) -> tuple[dict[str, dict], dict[str, dict]]:
    """The published sweep's per-claim seed summary and each chapter's sweep state (computed
    once per build: the result stamps hash every notebook's code)."""
    from lib.sphinxext.sweep import published_robustness

    cached = getattr(app, "_book_robustness", None)
    if cached is None:
        cached = app._book_robustness = published_robustness(records)
    return cached


def ledger_html(app, fromdocname, records, chapter, robust, sweep_state=None) -> str:
    recs = [r for r in records if not chapter or r.get("chapter") == chapter]
    counts = {v: sum(r.get("verdict") == v for r in recs) for v in (PASS, FAIL, NOT_REPRODUCED)}
    scales = sorted({r.get("scale", "?") for r in recs})
    seeds = sorted({str(r.get("seed", "?")) for r in recs})
    summary = (
        f'<p class="ledger-summary">{len(recs)} claim checks: {counts[PASS]} pass, '
        f"{counts[FAIL]} fail, {counts[NOT_REPRODUCED]} not reproduced (scale "
        f"{_esc(', '.join(scales))}; BOOK_SEED {_esc(', '.join(seeds))}). "
        f"{_esc(status_text(recs, chapter))}</p>"
    )
    if chapter:
        return (
            '<div class="claims-ledger ledger-chapter-table">'
            + summary
            + _sweep_note(recs, robust, sweep_state)
            + _rows_html(app, fromdocname, recs, robust, with_chapter=False)
            + "</div>"
        )
    by_chapter: dict[str, list[dict]] = {}
    for r in recs:
        by_chapter.setdefault(r.get("chapter", "?"), []).append(r)
    titles = _chapter_titles(app)
    sections = []
    for ch in sorted(by_chapter):
        c = _counts(by_chapter[ch])
        _, title = titles.get(ch, (None, f"Chapter {ch}"))
        n_untested = len(untested_headlines(by_chapter[ch], ch))
        head = (
            f"{_esc(title)} <small>{len(by_chapter[ch])} claims; evidence: "
            f"{c['evidence pass']} pass, {c['evidence not reproduced']} not reproduced; "
            f"untested headline results: {n_untested}</small>"
        )
        sections.append(
            f'<details class="ledger-chapter" id="ledger-{ch}" data-chapter="{ch}">'
            f"<summary>{head}</summary>"
            + _rows_html(app, fromdocname, by_chapter[ch], robust, with_chapter=False)
            + "</details>"
        )
    return (
        '<div class="claims-ledger ledger-book">'
        + summary
        + _figure_svg(by_chapter)
        + _overview_html(app, fromdocname, by_chapter)
        + _sweep_note(recs, robust, sweep_state)
        + _filter_html(fromdocname)
        + "".join(sections)
        + "</div>"
    )


def findings_of(records) -> list[dict]:
    """The claims that carry a finding, less those that rest on a sanity check (true by
    construction, so not a finding about a paper)."""
    return [r for r in records if r.get("finding") and r.get("kind") != SANITY]


def findings_html(app, fromdocname, records) -> str:
    """An in-page contents list (one entry per chapter, with its number of findings), then one
    paragraph per finding: the finding, its claim's verdict and kind, the claim id linked to
    the claim's row in its chapter's table, and a link to the page that checks it. Findings
    attached to sanity claims are left out (and counted)."""
    locations = getattr(app.env, "claims_locations", {})
    titles = _chapter_titles(app)
    items = findings_of(records)
    n_sanity = sum(1 for r in records if r.get("finding") and r.get("kind") == SANITY)
    if not items:
        return "<p>No claim in this build records a finding.</p>"
    chapters = sorted({r["chapter"] for r in items})
    toc = "".join(
        f'<li><a href="#findings-{ch}">{_esc(titles.get(ch, (None, f"Chapter {ch}"))[1])}</a>'
        f" ({sum(r['chapter'] == ch for r in items)})</li>"
        for ch in chapters
    )
    out = [
        f'<nav class="findings-contents" aria-label="findings by chapter"><p>{len(items)} '
        f"findings in {len(chapters)} chapters"
        + (f" ({n_sanity} notes on sanity checks are not counted as findings)" if n_sanity else "")
        + f":</p><ul>{toc}</ul></nav>"
    ]
    for ch in chapters:
        _, title = titles.get(ch, (None, f"Chapter {ch}"))
        out.append(f'<h2 class="findings-chapter" id="findings-{ch}">{_esc(title)}</h2>')
        for r in (r for r in items if r["chapter"] == ch):
            docname = locations.get(r["id"])
            link = (
                f' <a href="{_esc(_href(app, fromdocname, docname))}">'
                f"checked in {_esc(app.env.titles[docname].astext())}</a>"
                if docname in getattr(app.env, "titles", {})
                else ""
            )
            href = claim_href(app, fromdocname, r["id"])
            code = f"<code>{_esc(r['id'])}</code>"
            if href:
                code = f'<a class="claim-ref" href="{_esc(href)}">{code}</a>'
            out.append(
                f'<div class="finding"><p>{_esc(r["finding"])}</p><p class="finding-claim">'
                f"{_badge(r['verdict'])} {code} ({_esc(r.get('kind'))}){link}</p></div>"
            )
    return "".join(out)


def claim_href(app, fromdocname, claim_id: str) -> str | None:
    """The link to a claim's row in its chapter's overview table, or None (no such chapter)."""
    doc = _chapter_titles(app).get(claim_id[:2], (None, None))[0]
    if doc is None:
        return None
    return _href(app, fromdocname, doc) + "#" + claim_anchor(claim_id)


def _resolve_claim_refs(app, doctree, fromdocname, records):
    from sphinx.util import logging

    known = {r["id"] for r in records}
    log = logging.getLogger(__name__)
    for node in list(doctree.findall(claim_reference)):
        cid = node["claim_id"]
        href = claim_href(app, fromdocname, cid)
        if records and cid not in known:
            log.warning(f"claim role: no claim {cid!r} in this build's records", location=node)
        code = f'<code class="claim-ref-id">{_esc(cid)}</code>'
        html_text = f'<a class="claim-ref" href="{_esc(href)}">{code}</a>' if href else code
        node.replace_self(nodes.raw("", html_text, format="html"))


def _resolve(app, doctree, fromdocname):
    records = load_records()
    _resolve_claim_refs(app, doctree, fromdocname, records)
    for node in list(doctree.findall(status_placeholder)):
        chapter = node["chapter"]
        recs = [r for r in records if not chapter or r.get("chapter") == chapter]
        text = (
            status_text(recs, chapter)
            if recs
            else "Reproduction status: no claim records in this build tree yet (run `make book`)."
        )
        node.replace_self(nodes.paragraph(text=text))
    for node in list(doctree.findall(findings_placeholder)):
        node.replace_self(nodes.raw("", findings_html(app, fromdocname, records), format="html"))
    robust = sweep_state = None
    for node in list(doctree.findall(ledger_placeholder)):
        chapter = node["chapter"]
        if not [r for r in records if not chapter or r.get("chapter") == chapter]:
            node.replace_self(
                nodes.paragraph(
                    text="No claim records were found: the notebooks have not been executed "
                    "in this build tree yet (run `make book` or `make test`)."
                )
            )
            continue
        if robust is None:
            robust, sweep_state = _robustness(app, records)
        html_text = ledger_html(app, fromdocname, records, chapter, robust, sweep_state)
        node.replace_self(nodes.raw("", html_text, format="html"))


def _write_downloads(app, exception):
    """``_static/ledger.json`` and ``_static/ledger.csv``: the same records as the page."""
    if exception is not None or app.builder.format != "html":
        return
    import csv
    import json
    from pathlib import Path

    records = load_records()
    robust = _robustness(app, records)[0] if records else {}
    static = Path(app.outdir) / "_static"
    static.mkdir(exist_ok=True)
    rows = [dict(r, seeds=robust.get(r["id"], {}).get("text", "not swept")) for r in records]
    (static / "ledger.json").write_text(json.dumps(rows, indent=1))
    fields = [f for f in RECORD_FIELDS if f != "measured"] + ["seeds"]
    with open(static / "ledger.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def setup(app):
    app.add_node(ledger_placeholder)
    app.add_node(status_placeholder)
    app.add_node(findings_placeholder)
    app.add_node(claim_reference)
    app.add_role("claim", claim_role)
    app.add_directive("claims-ledger", ClaimsLedger)
    app.add_directive("claims-status", ClaimsStatus)
    app.add_directive("claims-findings", ClaimsFindings)
    app.connect("build-finished", _write_downloads)
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
