"""Computed prose: a summary page may not type a number that a claim measured.

Numbers in a chapter's summary and overview pages that come from a run change with
``BOOK_SEED`` (and, in the last digits, from one machine to another); they must be inserted
with ``myst_nb.glue``. :func:`typed_run_numbers` finds typed copies mechanically, and only
where the page itself *attributes* the number to a claim, so that a typed parameter or
threshold that happens to equal some measurement is never flagged:

* a sentence attributes to a claim when it names it: the role ``{claim}`NN/where/what``
  (a link to the claim's row) or the id in inline code, ```NN/where/what```;
* in such a sentence, a number written in the prose or math (not inside a glue role, a code
  cell or inline code) is a typed copy when it equals, at the precision it is written with,
  a value that a claim named in that sentence measured in this build, and is not one of the
  numbers of that claim's criterion (a threshold is typed on purpose).

Whether a number is flagged therefore depends on what the page says, not on which numbers a
run happens to produce elsewhere in the chapter. ``check-build`` (:mod:`lib.sphinxext.cache`)
fails on any typed copy.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from lib.records import ROOT, load_records

PAGES = ("summary.md", "index.md")
_STRIP = [
    re.compile(r"```.*?```", re.S),  # code cells, fenced blocks and directives' bodies
    re.compile(r"\{glue(?::\w+)?\}`[^`]*`"),  # glued values
    re.compile(r"`[^`\n]*`"),  # inline code, roles' targets
    re.compile(r"\]\([^)]*\)"),  # link targets
    re.compile(r"^---\n.*?\n---\n", re.S),  # front matter
]
_NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?:\s*\\times\s*10\^\{?(-?\d+)\}?)?(?!\w|\.\d)")


def prose_of(text: str) -> str:
    for pat in _STRIP:
        text = pat.sub(" ", text)
    return text


def _typed_numbers(prose: str):
    for m in _NUMBER.finditer(prose):
        digits, exp = m.group(1), m.group(2)
        decimals = len(digits.split(".")[1]) if "." in digits else 0
        value = float(digits) * (10 ** int(exp) if exp else 1)
        yield m.group(0), value, decimals, exp is not None


def measured_values(rec: dict) -> list[float]:
    m = rec.get("measured")
    if isinstance(m, dict):
        vals = [m.get("min"), m.get("max")]
    elif isinstance(m, list):
        vals = m
    else:
        vals = [m]
    out = []
    for v in vals:
        try:
            v = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(v):
            out.append(v)
    return out


def _matches(value: float, decimals: int, sci: bool, measured: float) -> bool:
    if sci:  # a x 10^k: compare on two significant digits
        return measured != 0 and abs(measured - value) <= 0.05 * abs(value)
    if decimals >= 2:
        return round(measured, decimals) == round(value, decimals) or round(
            abs(measured), decimals
        ) == round(value, decimals)
    if decimals == 0 and value >= 10 and float(measured).is_integer():
        return int(abs(measured)) == int(value)
    return False


_ALLOW = re.compile(r"<!--\s*typed-ok:\s*([^>]*?)-->")


def allowed_numbers(text: str) -> set[str]:
    """Numbers a page declares as not coming from a run, with its reason, in a comment such as
    ``<!-- typed-ok: 0.75 (the exponent 3/4 of Theorem 2) -->``."""
    out = set()
    for m in _ALLOW.finditer(text):
        out.update(g[0] for g in _NUMBER.findall(m.group(1).split("(")[0]))
    return out


_CLAIM_ROLE = re.compile(r"\{claim\}`([^`]+)`")
_CLAIM_CODE = re.compile(r"`(\d\d/[A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-]+)*)`")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=[A-Z(*\[{$\\])|\n\s*\n|\n\s*(?:[-*+]|\d+\.)\s")
_FENCES = re.compile(r"(```|~~~|:::).*?\1", re.S)
_FRONT = re.compile(r"^---\n.*?\n---\n", re.S)


def sentences(text: str) -> list[str]:
    """The prose of a page cut into sentences and list items (code, front matter and
    directives' bodies removed first)."""
    text = _FRONT.sub(" ", text)
    text = _FENCES.sub("\n\n", text)
    return [u for u in _SENTENCE_END.split(text) if u and u.strip()]


def _criterion_numbers(rec: dict) -> list[float]:
    return [v for _, v, _, _ in _typed_numbers(str(rec.get("criterion", "")))]


def typed_run_numbers(text: str, records: list[dict]) -> list[tuple[str, str]]:
    """``(typed number, claim id)`` for every number in ``text`` that a sentence attributes to a
    claim of ``records`` and that this claim measured."""
    by_id = {rec["id"]: rec for rec in records}
    found = []
    allowed = allowed_numbers(text)
    for unit in sentences(_ALLOW.sub(" ", text)):
        named = [c for c in _CLAIM_ROLE.findall(unit) if c.strip() in by_id]
        named += [c for c in _CLAIM_CODE.findall(unit) if c in by_id]
        if not named:
            continue
        prose = prose_of(_CLAIM_ROLE.sub(" ", unit))
        for typed, value, decimals, sci in _typed_numbers(prose):
            if typed in allowed:
                continue
            for cid in dict.fromkeys(c.strip() for c in named):
                rec = by_id[cid]
                if any(abs(value - t) <= 1e-12 * max(1.0, abs(t)) for t in _criterion_numbers(rec)):
                    continue  # the claim's own threshold, typed on purpose
                if any(_matches(value, decimals, sci, v) for v in measured_values(rec)):
                    found.append((typed, cid))
                    break
    return found


def check_pages(root: Path = ROOT, records: list[dict] | None = None) -> list[str]:
    """Problems (one line each) on the summary and overview pages of every chapter."""
    records = load_records() if records is None else records
    problems = []
    for folder in sorted((root / "book").glob("[0-9][0-9]-*")):
        recs = [r for r in records if r.get("chapter") == folder.name[:2]]
        for name in PAGES:
            page = folder / name
            if not page.exists() or not recs:
                continue
            for typed, cid in typed_run_numbers(page.read_text(encoding="utf-8"), recs):
                problems.append(
                    f"{page.relative_to(root)}: {typed!r} is typed, but claim {cid} measured it "
                    "in this run; glue it (myst_nb.glue) instead"
                )
    return problems
