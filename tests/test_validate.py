"""Tests of lib.validate."""

import numpy as np
import pytest

from lib.validate import check_generator, positive_int


def test_check_generator():
    g = np.random.default_rng(0)
    assert check_generator(g) is g
    with pytest.raises(TypeError, match="seed_rng must be"):
        check_generator(0, "seed_rng")


def test_positive_int():
    assert positive_int(np.int64(3), "n") == 3
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="n must be a positive integer"):
            positive_int(bad, "n")
