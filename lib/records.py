"""The claim-record contract, in one place.

Every writer of claim records (:func:`lib.claims.claim`, the nbval hooks in ``conftest.py``) and
every reader (the ledger extension :mod:`lib.sphinxext.ledger`, the cache tool
:mod:`lib.sphinxext.cache`, the tests) takes these names from here and from nowhere else:

* where records go: :func:`ledger_dir` (``$BOOK_LEDGER_DIR`` or ``_build/ledger``), one JSON
  file per claim id (:func:`record_path`);
* where nbval leaves executed notebooks for the build's cache: :func:`executed_dir`;
* the fields of a record (:data:`RECORD_FIELDS`), its verdicts and its kinds;
* the marker of a claim's HTML row in an executed notebook (:func:`row_marker`,
  :data:`ROW_RE`), by which the ledger finds the page that shows a claim.

``BOOK_LEDGER_DIR`` is a tooling variable (the seed sweep and the tests point it at a
scratch folder). It never changes a result; ``BOOK_SCALE`` and ``BOOK_SEED`` are the only
variables that do.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"
LEDGER_ENV = "BOOK_LEDGER_DIR"

# Verdicts. A FAIL stops the build; "not reproduced" is recorded with its reason.
PASS, FAIL, NOT_REPRODUCED = "pass", "FAIL", "not reproduced"
VERDICTS = (PASS, FAIL, NOT_REPRODUCED)

# Kinds (BOOK_GUIDE section 10). Only evidence counts towards a chapter's reproduction status.
EVIDENCE, CONSISTENCY, SANITY = "evidence", "consistency", "sanity"
KINDS = (EVIDENCE, CONSISTENCY, SANITY)
KIND_MEANING = {
    EVIDENCE: "the paper's statement against an independent measurement of the real system",
    CONSISTENCY: "our derivation against a second, independent route",
    SANITY: "true by construction; shown for the reader",
}

RECORD_FIELDS = (
    "id",
    "chapter",
    "kind",
    "statement",
    "measured",
    "measured_text",
    "criterion",
    "verdict",
    "n_values",
    "n_failing",
    "note",
    "finding",
    "scale",
    "seed",
)

# The HTML row of a claim in an executed notebook carries its id in this attribute.
ROW_CLASS = "book-claim"
ROW_ID_ATTR = "data-claim-id"
ROW_RE = re.compile(rf'class="{ROW_CLASS}" {ROW_ID_ATTR}="([^"]+)"')


def row_marker(claim_id: str) -> str:
    """The opening of a claim's HTML row, ``class="book-claim" data-claim-id="<id>"``."""
    import html

    return f'class="{ROW_CLASS}" {ROW_ID_ATTR}="{html.escape(claim_id)}"'


def ledger_dir(env: Mapping[str, str] | None = None, root: Path | None = None) -> Path:
    """Where claim records go: ``$BOOK_LEDGER_DIR`` if set, else ``<root>/_build/ledger``."""
    env = os.environ if env is None else env
    value = env.get(LEDGER_ENV, "").strip()
    return Path(value) if value else Path(root or ROOT) / "_build" / "ledger"


def executed_dir(root: Path | None = None) -> Path:
    """Where nbval saves each passing notebook with its outputs (``<root>/_build/executed``)."""
    return Path(root or ROOT) / "_build" / "executed"


def record_path(folder: Path, claim_id: str) -> Path:
    """The JSON file of one claim: its id with ``/`` replaced by ``__``."""
    return Path(folder) / (claim_id.replace("/", "__") + ".json")


def write_record(record: dict, folder: Path | None = None) -> Path:
    """Write one record atomically; its keys must be exactly :data:`RECORD_FIELDS`."""
    missing = set(RECORD_FIELDS) ^ set(record)
    if missing:
        raise ValueError(f"record fields differ from the contract in {sorted(missing)}")
    folder = ledger_dir() if folder is None else Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = record_path(folder, record["id"])
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(path)
    return path


def load_records(folder: str | os.PathLike | None = None) -> list[dict]:
    """All records in ``folder`` (default :func:`ledger_dir`), sorted by id.

    A record written before claim kinds existed reads with ``kind`` empty.
    """
    folder = Path(folder) if folder is not None else ledger_dir()
    if not folder.is_dir():
        return []
    records = []
    for path in sorted(folder.glob("*.json")):
        try:
            rec = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        rec.setdefault("kind", "")
        rec.setdefault("finding", "")
        records.append(rec)
    return sorted(records, key=lambda r: r.get("id", ""))


def clear_records(chapters: set[str] | None = None, folder: Path | None = None) -> int:
    """Delete the records of ``chapters`` (two-digit strings), or all of them; return how many."""
    folder = ledger_dir() if folder is None else Path(folder)
    if not folder.is_dir():
        return 0
    n = 0
    for path in folder.glob("*.json"):
        if chapters is None or path.name[:2] in chapters:
            path.unlink()
            n += 1
    return n
