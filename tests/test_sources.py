"""Source hygiene: no control characters (other than newline) in any book or library source.

A lost backslash in a Python string turns ``\\times`` into a TAB and ``imes``, which then renders
as a broken formula; this test catches the control character at its source.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")
SOURCES = sorted(
    p
    for pattern in (
        "book/**/*.md",
        "book/**/*.bib",
        "lib/**/*.py",
        "tests/**/*.py",
        "*.yml",
        "*.md",
    )
    for p in ROOT.glob(pattern)
    if "_build" not in p.parts and ".venv" not in p.parts
)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_control_characters(path):
    text = path.read_text(encoding="utf-8")
    bad = [(text.count("\n", 0, m.start()) + 1, repr(m.group())) for m in CONTROL.finditer(text)]
    assert not bad, f"{path.relative_to(ROOT)}: control characters at (line, char) {bad[:5]}"
