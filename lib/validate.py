"""Input checks shared by the paper modules, with one error convention.

A value of the wrong *type* raises ``TypeError``; a value of the right type but outside its
domain (negative, not finite, wrong shape, outside [0, 1], ...) raises ``ValueError``. Every
message starts with the argument's name, so that a reader sees at once what to fix.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

__all__ = [
    "check_generator",
    "positive_int",
    "nonnegative_int",
    "real",
    "positive",
    "nonnegative",
    "probability",
    "probabilities",
    "simplex",
    "real_array",
    "unit_vector",
]


def check_generator(rng, name: str = "rng") -> np.random.Generator:
    """Require a ``numpy.random.Generator`` (randomness never comes from global state)."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"{name} must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


def _integer(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    return int(value)


def positive_int(value, name: str) -> int:
    """Require an integer >= 1 (bools and floats are rejected with ``TypeError``)."""
    value = _integer(value, name)
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value}")
    return value


def nonnegative_int(value, name: str) -> int:
    """Require an integer >= 0."""
    value = _integer(value, name)
    if value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value}")
    return value


def real(
    value,
    name: str,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
    allow_inf: bool = False,
) -> float:
    """Require a real number (not a bool, not NaN) in the interval given by ``lo``/``hi``.

    ``lo_open``/``hi_open`` make an end exclusive. Infinite values pass only with
    ``allow_inf=True`` (and only if the interval admits them).
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    x = float(value)
    if math.isnan(x) or (math.isinf(x) and not allow_inf):
        raise ValueError(f"{name} must be a finite number, got {x}")
    if lo is not None and (x < lo or (lo_open and x == lo)):
        raise ValueError(f"{name} must be {'>' if lo_open else '>='} {lo}, got {x}")
    if hi is not None and (x > hi or (hi_open and x == hi)):
        raise ValueError(f"{name} must be {'<' if hi_open else '<='} {hi}, got {x}")
    return x


def positive(value, name: str, *, allow_inf: bool = False) -> float:
    """Require a real number > 0 (finite unless ``allow_inf``)."""
    return real(value, name, lo=0.0, lo_open=True, allow_inf=allow_inf)


def nonnegative(value, name: str) -> float:
    """Require a finite real number >= 0."""
    return real(value, name, lo=0.0)


def probability(value, name: str) -> float:
    """Require a real number in [0, 1]."""
    return real(value, name, lo=0.0, hi=1.0)


def real_array(x, name: str, *, ndim: int | None = None, shape=None, finite: bool = True):
    """Convert to a float array; check its number of axes, its shape (``None`` entries are
    free) and, by default, that every entry is finite."""
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} must be an array of real numbers, got {type(x).__name__}"
        ) from None
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} axes, got shape {arr.shape}")
    if shape is not None:
        shape = tuple(shape)
        if arr.ndim != len(shape) or any(
            s is not None and s != a for s, a in zip(shape, arr.shape)
        ):
            want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
            raise ValueError(f"{name} must have shape {want}, got {arr.shape}")
    if finite and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


def probabilities(p, name: str, **shape_kw) -> np.ndarray:
    """An array whose entries all lie in [0, 1] (shape checks as in :func:`real_array`)."""
    arr = real_array(p, name, **shape_kw)
    if np.any(arr < 0) or np.any(arr > 1):
        raise ValueError(f"{name} must lie in [0, 1]")
    return arr


def simplex(p, name: str, *, atol: float = 1e-9, min_classes: int = 2) -> np.ndarray:
    """Probability vectors along the last axis: finite, >= 0, summing to 1, and at least
    ``min_classes`` entries."""
    arr = real_array(p, name)
    if arr.ndim < 1 or arr.shape[-1] < min_classes:
        raise ValueError(
            f"{name} must have a class axis of length >= {min_classes}, got shape {arr.shape}"
        )
    if np.any(arr < 0):
        raise ValueError(f"{name} must be non-negative")
    if not np.allclose(arr.sum(-1), 1.0, atol=atol):
        raise ValueError(f"{name} must sum to 1 along the last axis")
    return arr


def unit_vector(x, name: str, *, dim: int | None = None, atol: float = 1e-8) -> np.ndarray:
    """A finite 1-d vector of Euclidean norm 1 (and length ``dim`` if given)."""
    arr = real_array(x, name, ndim=1)
    if dim is not None and arr.shape[0] != dim:
        raise ValueError(f"{name} must have length {dim}, got {arr.shape[0]}")
    norm = float(np.linalg.norm(arr))
    if abs(norm - 1.0) > atol:
        raise ValueError(f"{name} must be a unit vector, got norm {norm:.6g}")
    return arr
