"""Canary: the test gate (make test / CI) must run at quick scale."""

import os

from lib.scale import scale_name


def test_gate_runs_at_quick_scale():
    assert os.environ.get("BOOK_SCALE", "quick").strip().lower() in ("", "quick"), (
        "the test gate must run at BOOK_SCALE=quick; full scale is for `make book` by hand"
    )
    assert scale_name() == "quick"
