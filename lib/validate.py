"""Input checks shared by the chapter modules: each raises an error that names the argument."""

from __future__ import annotations

import numpy as np


def check_generator(rng, name: str = "rng") -> np.random.Generator:
    """Require a ``numpy.random.Generator`` (randomness never comes from global state)."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"{name} must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


def positive_int(value, name: str) -> int:
    """Require a positive integer (bools are rejected)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)
