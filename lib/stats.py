"""Small statistics used across chapters: log-log slopes with confidence
intervals, and Monte-Carlo means with standard errors."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as _st


@dataclass(frozen=True)
class SlopeFit:
    """Least-squares fit of ``log y = intercept + slope * log x``."""

    slope: float
    intercept: float
    stderr: float
    ci_low: float
    ci_high: float
    level: float
    r2: float

    def predict(self, x):
        """``exp(intercept) * x**slope``."""
        return np.exp(self.intercept) * np.asarray(x, dtype=float) ** self.slope


def loglog_slope(x, y, level: float = 0.95) -> SlopeFit:
    """Fit a power law ``y ~ C x^slope`` by least squares on log-log axes.

    Parameters
    ----------
    x, y : array_like, shape (k,)
        Positive values, ``k >= 3`` (a confidence interval needs a residual).
    level : float in (0, 1)
        Confidence level of the Student-t interval on the slope.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError(f"x and y must be 1-D, got shapes {x.shape} and {y.shape}")
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same shape, got {x.shape} and {y.shape}")
    if x.size < 3:
        raise ValueError(f"x needs at least 3 points for a slope CI, got {x.size}")
    if not (np.all(np.isfinite(x)) and np.all(x > 0)):
        raise ValueError("x must be finite and positive")
    if not (np.all(np.isfinite(y)) and np.all(y > 0)):
        raise ValueError("y must be finite and positive")
    if not (0 < level < 1):
        raise ValueError(f"level must be in (0, 1), got {level}")
    if np.ptp(np.log(x)) == 0:
        raise ValueError("x must take at least two distinct values")
    lx, ly = np.log(x), np.log(y)
    q = _st.t.ppf(0.5 + level / 2, df=x.size - 2)
    if np.ptp(ly) == 0:  # exactly flat: linregress would report NaN errors
        return SlopeFit(0.0, float(ly[0]), 0.0, 0.0, 0.0, float(level), 1.0)
    res = _st.linregress(lx, ly)
    return SlopeFit(
        float(res.slope),
        float(res.intercept),
        float(res.stderr),
        float(res.slope - q * res.stderr),
        float(res.slope + q * res.stderr),
        float(level),
        float(res.rvalue**2),
    )


def mc_mean(samples, axis: int = 0):
    """Monte-Carlo mean and its standard error ``s / sqrt(N)`` along ``axis``.

    Returns ``(mean, se)`` with the same shape as the input without ``axis``.
    """
    arr = np.asarray(samples, dtype=float)
    if arr.ndim == 0:
        raise ValueError("samples must be an array with at least one axis")
    if not (-arr.ndim <= axis < arr.ndim):
        raise ValueError(f"axis {axis} out of range for samples with {arr.ndim} dims")
    n = arr.shape[axis]
    if n < 2:
        raise ValueError(f"samples needs at least 2 draws along axis {axis}, got {n}")
    mean = arr.mean(axis=axis)
    se = arr.std(axis=axis, ddof=1) / np.sqrt(n)
    return mean, se
