"""The reader's text helpers (#39): plain-text titles, untested headline results."""

from __future__ import annotations

import re

import pytest

from lib.sphinxext.ledger import headline_results, status_text, untested_headlines
from lib.sphinxext.reader import tex_to_text


@pytest.mark.parametrize(
    "tex, text",
    [
        (r"1/\sqrt d", "1/√d"),
        (r"|\mathcal T|\,w\log A", "|T|\u2009w log A"),
        (r"O(1/\sqrt{d})", "O(1/√d)"),
        (r"\eta t^{-0.65}", "η t^-0.65"),
        (r"x^2", "x²"),
        (r"\Omega(\sqrt d)", "Ω(√d)"),
        (r"\mathbb{E}\left[x\right]", "E[x]"),
    ],
)
def test_tex_to_text(tex, text):
    assert tex_to_text(tex) == text
    assert "\\" not in tex_to_text(tex)


def _rec(cid, kind="evidence"):
    return {"id": cid, "chapter": cid[:2], "kind": kind, "verdict": "pass"}


def test_untested_headlines_counts_only_evidence_that_names_the_result():
    heads = {
        "07": [{"name": "Thm 3.1", "ids": ["thm-3.1"]}, {"name": "Thm 3.5", "ids": ["thm-3.5"]}]
    }
    recs = [_rec("07/thm-3.1/slope"), _rec("07/thm-3.5/clt", kind="sanity")]
    assert untested_headlines(recs, "07", heads) == ["Thm 3.5"]
    text = status_text(recs, "07", heads)
    assert text.endswith("Untested headline results of the paper: 1 (Thm 3.5).")
    assert "Untested" not in status_text(recs)  # no chapter given: the old sentence only


def test_headline_results_are_declared_for_every_chapter():
    heads = headline_results()
    from lib.records import ROOT

    chapters = sorted(p.name[:2] for p in (ROOT / "book").glob("[0-9][0-9]-*") if p.is_dir())
    assert sorted(heads) == chapters
    for ch, items in heads.items():
        assert items, ch
        for item in items:
            assert item["name"] and item["ids"], (ch, item)
            assert all(re.fullmatch(r"[A-Za-z0-9_.\-]+", i) for i in item["ids"]), (ch, item)
