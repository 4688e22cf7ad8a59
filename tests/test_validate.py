"""Tests of lib.validate: one convention, TypeError for a wrong type, ValueError for a wrong
value, and the argument's name in every message."""

import math

import numpy as np
import pytest

from lib import validate as v


def test_check_generator():
    g = np.random.default_rng(0)
    assert v.check_generator(g) is g
    with pytest.raises(TypeError, match="seed_rng must be"):
        v.check_generator(0, "seed_rng")


def test_positive_and_nonnegative_int():
    assert v.positive_int(np.int64(3), "n") == 3
    assert v.nonnegative_int(0, "k") == 0
    for bad in (2.5, True, "3", None):
        with pytest.raises(TypeError, match="^n must be an integer"):
            v.positive_int(bad, "n")
    for bad in (0, -1):
        with pytest.raises(ValueError, match="^n must be a positive integer"):
            v.positive_int(bad, "n")
    with pytest.raises(ValueError, match="^k must be a non-negative integer"):
        v.nonnegative_int(-1, "k")


def test_real_scalars():
    assert v.real(np.float32(0.5), "x", lo=0, hi=1) == 0.5
    assert v.positive(math.inf, "rho", allow_inf=True) == math.inf
    assert v.nonnegative(0, "sigma") == 0.0
    assert v.probability(1, "p") == 1.0
    for bad in (True, "1", None, [1.0]):
        with pytest.raises(TypeError, match="^x must be a real number"):
            v.real(bad, "x")
    with pytest.raises(ValueError, match="^x must be a finite number"):
        v.real(float("nan"), "x")
    with pytest.raises(ValueError, match="^rho must be a finite number"):
        v.positive(math.inf, "rho")
    with pytest.raises(ValueError, match="^eta must be > 0"):
        v.positive(0.0, "eta")
    with pytest.raises(ValueError, match="^sigma must be >= 0"):
        v.nonnegative(-1e-9, "sigma")
    with pytest.raises(ValueError, match="^p must be <= 1"):
        v.probability(1.5, "p")
    with pytest.raises(ValueError, match="^a must be < 1"):
        v.real(1.0, "a", hi=1.0, hi_open=True)


def test_arrays():
    a = v.real_array([[1, 2], [3, 4]], "A", shape=(None, 2))
    assert a.dtype == float and a.shape == (2, 2)
    with pytest.raises(ValueError, match=r"^A must have shape \(\*, 3\)"):
        v.real_array(a, "A", shape=(None, 3))
    with pytest.raises(ValueError, match="^A must have 1 axes"):
        v.real_array(a, "A", ndim=1)
    with pytest.raises(ValueError, match="^A must be finite"):
        v.real_array([1.0, np.inf], "A")
    with pytest.raises(TypeError, match="^A must be an array of real numbers"):
        v.real_array(["a"], "A")
    assert np.allclose(v.probabilities([0, 0.5, 1], "p"), [0, 0.5, 1])
    with pytest.raises(ValueError, match=r"^p must lie in \[0, 1\]"):
        v.probabilities([0.5, 1.2], "p")


def test_simplex_and_unit_vector():
    p = v.simplex([[0.25, 0.75], [1.0, 0.0]], "p")
    assert p.shape == (2, 2)
    with pytest.raises(ValueError, match="^p must sum to 1"):
        v.simplex([0.5, 0.6], "p")
    with pytest.raises(ValueError, match="^p must be non-negative"):
        v.simplex([1.5, -0.5], "p")
    with pytest.raises(ValueError, match="^p must have a class axis"):
        v.simplex([1.0], "p")
    u = v.unit_vector([0.6, 0.8], "u", dim=2)
    assert np.isclose(np.linalg.norm(u), 1)
    with pytest.raises(ValueError, match="^u must be a unit vector"):
        v.unit_vector([1.0, 1.0], "u")
    with pytest.raises(ValueError, match="^u must have length 3"):
        v.unit_vector([0.6, 0.8], "u", dim=3)
