"""The book's Sphinx extensions and build tools.

- :mod:`lib.sphinxext.ledger`: the ``{claims-ledger}`` and ``{claims-status}`` directives;
- :mod:`lib.sphinxext.reader`: what the reader's HTML needs (offline MathJax, executed
  ``.ipynb`` downloads, the build-environment table);
- :mod:`lib.sphinxext.cache`: one execution per gate, and per-chapter invalidation of cached
  outputs (``python -m lib.sphinxext.cache ...``).

Claim records, their folders and the HTML row marker are defined once, in :mod:`lib.records`.
"""
