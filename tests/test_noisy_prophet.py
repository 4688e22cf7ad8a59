"""Unit tests for lib.noisy_prophet (chapter 16), following section (g) of the brief."""

import numpy as np
import pytest
from scipy import stats

from lib.papers import noisy_prophet as npf


def gen(seed=0):
    return np.random.default_rng(seed)


def test_ridge_equals_lstsq_on_augmented_system():
    g = gen(1)
    X = g.random((3, 40, 2))
    y = g.standard_normal((3, 40))
    th, V, Vinv = npf.ridge_fit(X, y, beta=2.0)
    for r in range(3):
        A = np.vstack([X[r], np.sqrt(2.0) * np.eye(2)])
        b = np.concatenate([y[r], np.zeros(2)])
        assert np.allclose(th[r], np.linalg.lstsq(A, b, rcond=None)[0])
        assert np.allclose(V[r] @ Vinv[r], np.eye(2))


def test_trapezoid_cdf_matches_monte_carlo_and_quantile_inverts():
    g = gen(2)
    theta = np.array([0.3, 1.1])
    x = npf.iid_features((200_000,), 2, g) @ theta
    ks = stats.kstest(x, lambda s: npf.trapezoid_cdf(s, theta))
    assert ks.pvalue > 0.01
    assert (
        npf.trapezoid_cdf(theta.sum() / np.sqrt(2), theta) == 1.0
        and npf.trapezoid_cdf(0.0, theta) == 0.0
    )
    for q in (0.001, 0.2, 0.5, 0.9, 1 - 1e-5):
        assert npf.trapezoid_cdf(npf.trapezoid_quantile(q, theta), theta) == pytest.approx(
            q, abs=1e-12
        )


def test_expected_max_and_conditional_mean():
    # U[0,1] is the limit theta = (eps, sqrt 2): E max of n = n/(n+1)
    theta = np.array([1e-7, np.sqrt(2)])
    for n in (1, 10, 1000):
        assert npf.expected_max_iid(theta, n) == pytest.approx(n / (n + 1), abs=1e-6)
    theta = np.array([0.4, 0.9])
    g = gen(3)
    x = npf.iid_features((400_000,), 2, g) @ theta
    for a in (0.1, 0.5, 0.8):
        assert npf.cond_mean_above(a, theta) == pytest.approx(x[x >= a].mean(), abs=3e-3)


def test_top_quantile_is_the_sorted_element_and_needs_enough_samples():
    g = gen(4)
    v = g.random(50_000)
    n = 100
    assert npf.top_quantile(v, n) == np.sort(v)[-(v.size // n)]
    with pytest.raises(ValueError, match="20 n"):
        npf.top_quantile(g.random(1000), 100)


def test_lcb_below_point_estimate():
    g = gen(5)
    Z = g.random((2, 100, 3))
    th = g.standard_normal((2, 3))
    A = np.stack([np.eye(3) * 0.1, np.eye(3) * 0.5])
    l_ = npf.lcb(Z, th, A, 2.0)
    assert np.all(l_ <= np.einsum("rmd,rd->rm", Z, th) + 1e-15)
    ref = np.einsum("rmd,rd->rm", Z, th) - 2.0 * np.sqrt(np.einsum("rmd,rde,rme->rm", Z, A, Z))
    assert np.allclose(l_, ref)


def test_policies_never_stop_while_exploring():
    g = gen(6)
    theta = np.array([3.0, 2.0])
    out = npf.etd_lcbt_iid(theta, 0.5, 2000, 60, g)
    ell = npf.default_ell(2000)
    assert np.all((out["tau"] == -1) | (out["tau"] >= ell))
    assert np.all(out["reward"][~out["stopped"]] == 0)
    assert np.all(out["reward"] <= out["maxima"] + 1e-12)
    lo, hi = npf.make_noniid_boxes(1000, 2, g)
    nn = npf.etd_lcbt_noniid(lo, hi, theta, 0.5, 10, g, n_mc=5)
    assert np.all((nn["tau"] == -1) | (nn["tau"] >= npf.default_ell(1000)))
    eg = npf.eps_greedy_lcbt(theta, 0.5, 2000, 5, g)
    assert np.all(eg["reward"] <= eg["maxima"] + 1e-12)


def test_gusein_zade_noiseless_picks_the_maximum_with_prob_about_1_over_e():
    g = gen(7)
    out = npf.gusein_zade(np.array([0.7, 1.3]), 0.0, 50, 20_000, g)
    best = out["stopped"] & (out["reward"] == out["maxima"])
    assert best.mean() == pytest.approx(1 / np.e, abs=0.02)


def test_oracle_exact_ratio_above_bound():
    for theta in (np.array([0.2, 0.9]), np.array([1.0, 1.0])):
        for n in (10, 1000):
            assert npf.oracle_ratio_exact(theta, n) >= 1 - (1 - 1 / n) ** n - 1e-9


def test_expected_stop_probability_limit():
    n, nd = 1000, 900
    assert npf.expected_stop_probability(nd, 1000 * n, n) == pytest.approx(
        1 - (1 - 1 / n) ** nd, abs=2e-3
    )
    assert npf.expected_stop_probability(nd, 20 * n, n) < 1 - (1 - 1 / n) ** nd


def test_ratio_of_sums():
    g = gen(8)
    r, se = npf.ratio_of_sums(np.array([1.0, 0.0, 2.0]), np.array([2.0, 1.0, 2.0]), g)
    assert r == pytest.approx(3 / 5) and se > 0


def test_conf_radius_modes():
    assert npf.conf_radius(2, 10**4) == pytest.approx(np.sqrt(2 * np.log(10**4)))
    r = npf.conf_radius(2, 500, sigma=0.5, S=0.3, mode="oful", delta=0.01)
    assert r == pytest.approx(
        0.5 * np.sqrt(2 * np.log(100) + 2 * np.log(1 + 500 / 2)) + np.sqrt(0.3)
    )


def test_bad_input_is_rejected_with_named_argument():
    g = gen()
    with pytest.raises(ValueError, match="ell"):
        npf.etd_lcbt_iid(np.ones(2), 0.5, 100, 2, g, ell=100)
    with pytest.raises(ValueError, match="sigma"):
        npf.gusein_zade(np.ones(2), -1.0, 100, 2, g)
    with pytest.raises(ValueError, match="beta"):
        npf.ridge_fit(np.ones((1, 3, 2)), np.ones((1, 3)), beta=0.0)
    with pytest.raises(ValueError, match="mode"):
        npf.conf_radius(2, 100, mode="ucb")
    with pytest.raises(ValueError, match="sigma and S"):
        npf.conf_radius(2, 100, mode="oful")
    with pytest.raises(ValueError, match="theta"):
        npf.trapezoid_cdf(0.5, np.array([1.0, -1.0]))
    with pytest.raises(ValueError, match="q must"):
        npf.trapezoid_quantile(1.5, np.ones(2))
    with pytest.raises(ValueError, match="c must"):
        npf.make_theta(2, 0.0, g)
    with pytest.raises(TypeError, match="rng"):
        npf.make_theta(2, 1.0, 3)
    with pytest.raises(ValueError, match="maxima"):
        npf.ratio_of_sums(np.ones(3), np.zeros(3), g)
    with pytest.raises(ValueError, match="Z must"):
        npf.lcb(np.ones((2, 3)), np.ones((2, 2)), np.ones((2, 2, 2)), 1.0)
