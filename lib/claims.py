"""The claim check: every empirical claim in the book goes through :func:`claim`.

A claim has a stable id (``"07/thm-3.5/clt-trace"``: chapter number, then where in
the paper, then what), a one-line statement, the measured value(s) and a criterion
fixed *before* the measurement. :func:`claim`

* shows a one-row result in the notebook,
* records it (one JSON file per id) for the claims ledger page, and
* raises ``AssertionError`` naming the id, the measurement and the criterion when
  the claim fails, so that nbval and the strict book build fail too.

A claim that does not reproduce at the scale we can afford is not deleted or
loosened: pass ``not_reproduced="because ..."``. It is then shown and recorded with
verdict ``not reproduced`` (never counted as a pass) and does not raise.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import scale as _scale
from . import seed as _seed
from .records import (
    CONSISTENCY,
    EVIDENCE,
    FAIL,
    KINDS,
    NOT_REPRODUCED,
    PASS,
    SANITY,
    ledger_dir,
    load_records,
    row_marker,
    write_record,
)

__all__ = [
    "claim",
    "within",
    "above",
    "below",
    "close_to",
    "ClaimResult",
    "claims_table",
    "load_records",
    "ledger_dir",
    "PASS",
    "FAIL",
    "NOT_REPRODUCED",
    "EVIDENCE",
    "CONSISTENCY",
    "SANITY",
    "KINDS",
]

ID_RE = re.compile(r"^(\d\d)/[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*$")


# --------------------------------------------------------------------------- criteria
@dataclass(frozen=True)
class Criterion:
    """Base class: ``holds(x)`` is an elementwise boolean array; ``text`` describes it."""

    def holds(self, x: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def text(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError


def _finite_number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if math.isnan(value):
        raise ValueError(f"{name} must not be NaN")
    return value


@dataclass(frozen=True)
class Within(Criterion):
    lo: float
    hi: float

    def __post_init__(self):
        lo = _finite_number(self.lo, "lo")
        hi = _finite_number(self.hi, "hi")
        if lo > hi:
            raise ValueError(f"lo must be <= hi, got lo={lo}, hi={hi}")

    def holds(self, x):
        return (x >= self.lo) & (x <= self.hi)

    @property
    def text(self):
        return f"in [{_fmt_exact(self.lo)}, {_fmt_exact(self.hi)}]"


@dataclass(frozen=True)
class Above(Criterion):
    threshold: float

    def __post_init__(self):
        _finite_number(self.threshold, "threshold")

    def holds(self, x):
        return x > self.threshold

    @property
    def text(self):
        return f"> {_fmt_exact(self.threshold)}"


@dataclass(frozen=True)
class Below(Criterion):
    threshold: float

    def __post_init__(self):
        _finite_number(self.threshold, "threshold")

    def holds(self, x):
        return x < self.threshold

    @property
    def text(self):
        return f"< {_fmt_exact(self.threshold)}"


@dataclass(frozen=True)
class CloseTo(Criterion):
    reference: Any
    rtol: float = 0.0
    atol: float = 0.0

    def __post_init__(self):
        rtol = _finite_number(self.rtol, "rtol")
        atol = _finite_number(self.atol, "atol")
        if rtol < 0 or atol < 0:
            raise ValueError(f"rtol and atol must be >= 0, got rtol={rtol}, atol={atol}")
        if rtol == 0 and atol == 0:
            raise ValueError("CloseTo needs rtol > 0 or atol > 0")
        ref = np.asarray(self.reference, dtype=float)
        if not np.all(np.isfinite(ref)):
            raise ValueError("reference must be finite")

    def holds(self, x):
        ref = np.asarray(self.reference, dtype=float)
        return np.abs(x - ref) <= self.atol + self.rtol * np.abs(ref)

    @property
    def text(self):
        ref = np.asarray(self.reference, dtype=float)
        refs = _fmt_exact(float(ref)) if ref.ndim == 0 else f"reference (shape {ref.shape})"
        parts = []
        if self.atol:
            parts.append(_fmt_exact(self.atol))
        if self.rtol:
            parts.append(f"{_fmt_exact(self.rtol)}·|ref|")
        return f"|x − {refs}| ≤ {' + '.join(parts)}"


def within(lo: float, hi: float) -> Within:
    """Criterion ``lo <= x <= hi`` (elementwise)."""
    return Within(lo, hi)


def above(threshold: float) -> Above:
    """Criterion ``x > threshold`` (elementwise)."""
    return Above(threshold)


def below(threshold: float) -> Below:
    """Criterion ``x < threshold`` (elementwise)."""
    return Below(threshold)


def close_to(reference, *, rtol: float = 0.0, atol: float = 0.0) -> CloseTo:
    """Criterion ``|x - reference| <= atol + rtol*|reference|`` (elementwise)."""
    return CloseTo(reference, rtol, atol)


# --------------------------------------------------------------------------- results
@dataclass
class ClaimResult:
    id: str
    statement: str
    measured: Any
    criterion: str
    verdict: str
    n_values: int
    n_failing: int
    kind: str = EVIDENCE
    note: str = ""
    finding: str = ""
    scale: str = "quick"
    seed: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def chapter(self) -> str:
        return self.id[:2]

    @property
    def passed(self) -> bool:
        return self.verdict == PASS

    def measured_text(self) -> str:
        return _summarise(self.measured)

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "chapter": self.chapter,
            "kind": self.kind,
            "statement": self.statement,
            "measured": self.measured,
            "measured_text": self.measured_text(),
            "criterion": self.criterion,
            "verdict": self.verdict,
            "n_values": self.n_values,
            "n_failing": self.n_failing,
            "note": self.note,
            "finding": self.finding,
            "scale": self.scale,
            "seed": self.seed,
        }

    def _ipython_display_(self) -> None:
        # claim() has already shown the row; a bare `claim(...)` as the last line of a
        # cell must not show it a second time.
        if not getattr(self, "_shown", False):
            from IPython.display import display

            display(_ClaimView(self))
            self._shown = True

    def _repr_html_(self) -> str:
        colour = {PASS: "#1a7f37", FAIL: "#cf222e"}.get(self.verdict, "#9a6700")
        note = f"<br><em>{html.escape(self.note)}</em>" if self.note else ""
        return (
            f"<table {row_marker(self.id)}><tr>"
            f"<td><code>{html.escape(self.id)}</code><br><em>{html.escape(self.kind)}</em></td>"
            f"<td>{html.escape(self.statement)}{note}</td>"
            f"<td>measured {html.escape(self.measured_text())}</td>"
            f"<td>criterion {html.escape(self.criterion)}</td>"
            f'<td><strong style="color:{colour}">{html.escape(self.verdict)}</strong></td>'
            "</tr></table>"
        )

    def __repr__(self) -> str:
        note = f" ({self.note})" if self.note else ""
        return (
            f"[{self.verdict}] {self.id} ({self.kind}): {self.statement} "
            f"| measured {self.measured_text()} "
            f"| criterion {self.criterion}{note}"
        )


def _fmt(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "nan"
    if x == 0:
        return "0"
    ax = abs(x)
    if ax >= 1e4 or ax < 1e-3:
        return f"{x:.3g}"
    return f"{x:.4g}"


def _fmt_exact(x: float) -> str:
    """Thresholds are shown to 12 significant digits, so 1 + 1e-9 does not print as 1."""
    return f"{float(x):.12g}"


def _summarise(measured: Any) -> str:
    if isinstance(measured, dict):  # a long array stored by _jsonable as its size and range
        return (
            f"{measured['size']} values in [{_fmt(float(measured['min']))}, "
            f"{_fmt(float(measured['max']))}]"
        )
    arr = np.asarray(measured, dtype=float)
    if arr.ndim == 0:
        return _fmt(float(arr))
    if arr.size <= 6:
        return "[" + ", ".join(_fmt(float(v)) for v in arr.ravel()) + "]"
    return f"{arr.size} values in [{_fmt(float(np.nanmin(arr)))}, {_fmt(float(np.nanmax(arr)))}]"


def _jsonable(arr: np.ndarray):
    if arr.ndim == 0:
        v = float(arr)
        return v if math.isfinite(v) else str(v)
    if arr.size > 64:
        return {"size": int(arr.size), "min": float(np.nanmin(arr)), "max": float(np.nanmax(arr))}
    return [float(v) if math.isfinite(v) else str(v) for v in arr.ravel()]


# --------------------------------------------------------------------------- ledger
def _record(result: ClaimResult) -> None:
    try:
        write_record(result.to_json())
    except OSError as exc:  # a read-only install must not break the notebook
        print(f"note: claim {result.id} not recorded for the ledger ({exc})")


# --------------------------------------------------------------------------- the check
def claim(
    claim_id: str,
    statement: str,
    measured: Any,
    criterion: Criterion,
    *,
    kind: str | None = None,
    not_reproduced: str | None = None,
    finding: str | None = None,
    display: bool = True,
) -> ClaimResult:
    """Check one claim, show it, record it for the ledger, and raise if it fails.

    Parameters
    ----------
    claim_id : str
        Stable id ``"NN/where/what"`` (``NN`` the chapter number).
    statement : str
        One line saying what is claimed.
    measured : float or array_like
        The measured value(s). Arrays pass only if every element meets the criterion.
        NaN never meets a criterion.
    criterion : Criterion
        Made with :func:`within`, :func:`above`, :func:`below` or :func:`close_to`,
        fixed before the measurement.
    kind : {"evidence", "consistency", "sanity"}
        Required. ``evidence``: the paper's statement against an independent measurement
        of the real system (the finite-n algorithm, the trained network); ``consistency``:
        our derivation against a second, independent route; ``sanity``: true by
        construction (prefer a unit test). Only evidence counts towards a chapter's
        reproduction status.
    not_reproduced : str, optional
        ``"because ..."``: mark the claim as not reproduced at this scale. It is
        then recorded with verdict ``not reproduced`` and does not raise.
    finding : str, optional
        One paragraph for the book's findings page: where this claim shows that our derivation
        or measurement contradicts or qualifies the paper's statement as we paraphrased it
        (e.g. "Theorem 3.6 as paraphrased is false: ..."). It is shown there with a link to
        the claim, so the page is generated from the records and cannot drift.

    Returns
    -------
    ClaimResult
    """
    if not isinstance(claim_id, str) or not ID_RE.match(claim_id):
        raise ValueError(
            f"claim_id must look like 'NN/where/what' (letters, digits, . _ -), got {claim_id!r}"
        )
    if not isinstance(statement, str) or not statement.strip():
        raise ValueError("statement must be a non-empty string")
    if kind is None:
        raise TypeError(f"claim {claim_id!r}: kind is required, one of {KINDS}")
    if not isinstance(kind, str):
        raise TypeError(f"kind must be a string, one of {KINDS}, got {type(kind).__name__}")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if not isinstance(criterion, Criterion):
        raise TypeError(
            f"criterion must be a lib.claims criterion (within/above/below/close_to), "
            f"got {type(criterion).__name__}"
        )
    if finding is not None and (not isinstance(finding, str) or not finding.strip()):
        raise ValueError("finding must be a non-empty paragraph when given")
    if not_reproduced is not None and (
        not isinstance(not_reproduced, str) or not not_reproduced.strip()
    ):
        raise ValueError("not_reproduced must be a non-empty reason string")
    try:
        arr = np.asarray(measured, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(
            f"measured must be a real number or an array of them, got {type(measured).__name__}"
        ) from None
    if arr.size == 0:
        raise ValueError("measured must not be empty")
    ok = np.asarray(criterion.holds(arr), dtype=bool) & np.isfinite(arr)
    n_fail = int(arr.size - ok.sum())
    if not_reproduced is not None:
        verdict = NOT_REPRODUCED
        note = f"not reproduced: {not_reproduced}" + (
            " (the criterion does hold in this run)" if n_fail == 0 else ""
        )
    else:
        verdict = PASS if n_fail == 0 else FAIL
        note = "" if n_fail == 0 else f"{n_fail} of {arr.size} values fail"
    result = ClaimResult(
        id=claim_id,
        statement=statement.strip(),
        measured=_jsonable(arr),
        criterion=criterion.text,
        verdict=verdict,
        n_values=int(arr.size),
        n_failing=n_fail,
        kind=kind,
        note=note,
        finding=(finding or "").strip(),
        scale=_scale.scale_name(),
        seed=_seed.book_seed(),
    )
    _record(result)
    if display:
        _show(result)
    if verdict == FAIL:
        raise AssertionError(
            f"claim {claim_id} failed: {statement} | measured {result.measured_text()} "
            f"| criterion {criterion.text} | {note}"
        )
    return result


class _ClaimView:
    """What a notebook shows for a claim: the HTML row and a plain-text fallback."""

    def __init__(self, result: ClaimResult):
        self.result = result

    def _repr_html_(self) -> str:
        return self.result._repr_html_()

    def __repr__(self) -> str:
        return repr(self.result)


def _show(result: ClaimResult) -> None:
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython ships with the stack
        print(repr(result))
        return
    if get_ipython() is None:
        print(repr(result))
    else:
        display(_ClaimView(result))
        result._shown = True


def claims_table(results: Iterable[ClaimResult]):
    """Rows ``(id, verdict, measured, criterion)`` for a quick summary table."""
    return [(r.id, r.verdict, r.measured_text(), r.criterion) for r in results]
