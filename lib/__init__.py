"""ICLR 2026, Reproduced: the shared library of the executable book.

Common helpers (one place each):

- :mod:`lib.scale`    -- the ``BOOK_SCALE`` knob (``quick`` / ``full``) and per-chapter sizes;
- :mod:`lib.seed`     -- the ``BOOK_SEED`` shift and explicit random generators;
- :mod:`lib.claims`   -- the claim check that feeds the claims ledger;
- :mod:`lib.stats`    -- log-log slope fits with confidence intervals, Monte-Carlo means;
- :mod:`lib.plotting` -- the book's figure style;
- :mod:`lib.device`   -- GPU when present, CPU otherwise;
- :mod:`lib.validate` -- input checks with one error convention (TypeError / ValueError);
- :mod:`lib.records`  -- the claim-record contract (folders, fields, kinds, row marker).

One module per paper, under :mod:`lib.papers`, holds a chapter's algorithms (e.g.
:mod:`lib.papers.qlearning_d2z`); the book's Sphinx extensions and build tools live in
:mod:`lib.sphinxext`.
"""

__all__ = ["scale", "seed", "claims", "stats", "plotting", "device", "validate", "records"]
