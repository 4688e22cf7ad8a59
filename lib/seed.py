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
from collections.abc import Mapping
from contextlib import contextmanager

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


@contextmanager
def torch_seeded(*stream: object, seed: int | None = None, env: Mapping[str, str] | None = None):
    """Build torch modules inside this block to give them a reproducible initialisation.

    ``torch.nn`` layers draw their initial weights from torch's global generator. This is the
    one place in the book that seeds it: inside the block the global generator is forked
    (``torch.random.fork_rng``) and seeded from the named ``stream`` (or from an explicit
    ``seed``, e.g. one drawn from a numpy generator); on exit the previous global state is
    restored, so nothing outside the block depends on or changes it.

    Example: ``with torch_seeded("18", "mlp"): model = fm.make_mlp([16, 32, 3])``.
    """
    import torch

    if seed is None:
        if not stream:
            raise ValueError("torch_seeded needs a stream (labels) or an explicit seed")
        seed = int(seed_sequence(*stream, env=env).generate_state(1)[0])
    elif stream:
        raise ValueError("give torch_seeded either a stream or seed=, not both")
    elif isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        yield
