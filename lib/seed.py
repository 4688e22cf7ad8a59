"""The seed: ``BOOK_SEED`` (an integer, default 0) shifts every seed in the book.

All randomness flows from explicit generators built here. A *stream* is a tuple
of labels (strings or non-negative integers) naming what the numbers are for, e.g.
``rng("07", "rates", n)``; the same stream under the same ``BOOK_SEED`` always gives
the same numbers, and different streams are statistically independent
(``numpy.random.SeedSequence`` with the labels as spawn key).
"""

from __future__ import annotations

import os
import zlib
from typing import Mapping

import numpy as np

ENV_VAR = "BOOK_SEED"


def book_seed(env: Mapping[str, str] | None = None) -> int:
    """Return the integer in ``BOOK_SEED`` (0 when unset)."""
    env = os.environ if env is None else env
    raw = env.get(ENV_VAR, "0").strip()
    if raw == "":
        return 0
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{ENV_VAR} must be a non-negative integer, got {raw!r}") from None
    if value < 0:
        raise ValueError(f"{ENV_VAR} must be a non-negative integer, got {value}")
    return value


def _label_to_int(label: object) -> int:
    if isinstance(label, bool):
        raise TypeError("stream labels must be str or int, got bool")
    if isinstance(label, (int, np.integer)):
        if label < 0:
            raise ValueError(f"stream labels must be non-negative integers, got {label}")
        return int(label)
    if isinstance(label, str):
        # crc32 is stable across processes and Python versions (unlike hash()).
        return zlib.crc32(label.encode("utf-8"))
    raise TypeError(f"stream labels must be str or int, got {type(label).__name__}")


def seed_sequence(*stream: object, env: Mapping[str, str] | None = None) -> np.random.SeedSequence:
    """The ``SeedSequence`` for ``stream`` under the current ``BOOK_SEED``."""
    key = tuple(_label_to_int(s) for s in stream)
    return np.random.SeedSequence(entropy=book_seed(env), spawn_key=key)


def rng(*stream: object, env: Mapping[str, str] | None = None) -> np.random.Generator:
    """A fresh ``numpy.random.Generator`` for the named stream."""
    return np.random.default_rng(seed_sequence(*stream, env=env))


def torch_generator(*stream: object, device=None, env: Mapping[str, str] | None = None):
    """A ``torch.Generator`` on ``device`` seeded from the named stream."""
    import torch

    seed = int(seed_sequence(*stream, env=env).generate_state(1, dtype=np.uint64)[0] >> 1)
    gen = torch.Generator(device=device if device is not None else "cpu")
    gen.manual_seed(seed)
    return gen
