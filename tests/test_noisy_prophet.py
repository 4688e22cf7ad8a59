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


def test_order_stat_stop_probability_closed_form_matches_beta_quadrature_and_simulation():
    from scipy import integrate, stats

    M, k, nd = 500, 3, 700
    dist = stats.beta(k, M - k + 1)
    quad = 1 - integrate.quad(lambda p: (1 - p) ** nd * dist.pdf(p), 0, 1, limit=200)[0]
    assert npf.order_stat_stop_probability(nd, M, k) == pytest.approx(quad, abs=1e-10)
    # k = 1: 1 - M/(M + n'); brute force with uniforms
    assert npf.order_stat_stop_probability(nd, M, 1) == pytest.approx(1 - M / (M + nd))
    g = gen(11)
    R = 4000
    thr = -np.partition(-g.random((R, M)), k - 1, axis=1)[:, k - 1]
    p = 1 - thr
    stop = g.random(R) < -np.expm1(nd * np.log1p(-p))
    pred = npf.order_stat_stop_probability(nd, M, k)
    assert abs(stop.mean() - pred) < 4 * np.sqrt(pred * (1 - pred) / R)
    with pytest.raises(ValueError, match="k must"):
        npf.order_stat_stop_probability(nd, M, M + 1)


def test_numpy_quantile_ranks_and_bracket():
    M, n = 10_000, 10**5
    k_low, k_high, w = npf.numpy_quantile_ranks(M, 1 - 1 / n)
    assert (k_low, k_high) == (2, 1) and w == pytest.approx(0.90001, abs=1e-9)
    v = np.sort(gen(12).random(M))
    assert np.quantile(v, 1 - 1 / n) == pytest.approx((1 - w) * v[-k_low] + w * v[-k_high])
    lo, hi = npf.numpy_quantile_stop_bracket(n - 2154, M, n)
    nd = n - 2154
    assert lo == pytest.approx(1 - M / (M + nd))
    assert hi == pytest.approx(1 - M * (M - 1) / ((M + nd) * (M + nd - 1)))
    # the bracket contains a direct simulation of the np.quantile threshold on uniforms
    g = gen(13)
    R = 800
    thr = np.quantile(g.random((R, M)), 1 - 1 / n, axis=1)
    stop = g.random(R) < -np.expm1(nd * np.log1p(-(1 - thr)))
    se = np.sqrt(0.25 / R)
    assert lo - 3 * se < stop.mean() < hi + 3 * se


def test_known_theta_etd_ratio_matches_direct_simulation_and_limit():
    theta = np.array([0.26, 0.38])
    n, ell, M = 100, 20, 20 * 100
    exact = npf.known_theta_etd_ratio(theta, n, ell, M)
    g = gen(14)
    R = 5000
    X = npf.iid_features((R, n), 2, g) @ theta
    calib = npf.iid_features((R, M), 2, g) @ theta
    alpha = npf.top_quantile(calib, n)
    ok = X[:, ell:] >= alpha[:, None]
    idx = ok.argmax(axis=1)
    reward = np.where(ok.any(axis=1), X[np.arange(R), ell + idx], 0.0)
    sim, se = npf.ratio_of_sums(reward, X.max(axis=1), g, n_boot=300)
    assert abs(sim - exact) < 4 * se
    # scale invariance and the M -> infinity limit (the exact-quantile rule on n - ell items)
    assert npf.known_theta_etd_ratio(7 * theta, n, ell, M) == pytest.approx(exact, rel=1e-9)
    big = npf.known_theta_etd_ratio(theta, n, ell, 20_000 * n)
    limit = (
        -np.expm1((n - ell) * np.log1p(-1 / n))
        * npf.cond_mean_above(npf.trapezoid_quantile(1 - 1 / n, theta), theta)
        / npf.expected_max_iid(theta, n)
    )
    assert big == pytest.approx(limit, abs=2e-3) and exact < limit


def test_etd_numpy_quantile_mode_and_decomposition_identity():
    g = gen(15)
    theta = np.array([3.0, 2.0])
    out = npf.etd_lcbt_iid(theta, 0.5, 2000, 40, g, M=500, quantile="numpy")
    assert np.all((out["tau"] == -1) | (out["tau"] >= npf.default_ell(2000)))
    # ratio = P(stop) E[X | accepted] / OPT, an accounting identity
    s = out["stopped"]
    lhs = out["reward"].sum() / out["maxima"].sum()
    rhs = s.mean() * out["reward"][s].mean() / out["maxima"].mean()
    assert lhs == pytest.approx(rhs, rel=1e-12)
    with pytest.raises(ValueError, match="quantile"):
        npf.etd_lcbt_iid(theta, 0.5, 2000, 2, g, quantile="mean")


def test_code_replay_finds_the_calibration_sample_among_the_items():
    r = npf.code_replay_etd(0, n=20_000)
    ell = int(20_000 ** (2 / 3))
    assert r["ell"] == ell and r["z_offset"] >= 0
    assert r["reward"] <= r["maximum"]
    # pinned values of the replay for seed 0 (numpy's legacy RandomState stream is frozen):
    # the code's rule stops at item 6434, which is the run's maximum, and its calibration
    # sample is items 480 .. 10479
    assert (r["tau"], r["z_offset"]) == (6434, 480)
    assert r["reward"] == r["maximum"]
    assert r["alpha"] == pytest.approx(0.2204681548, abs=1e-9)


def test_numpy_quantile_quadratic_tail_prediction():
    n, M, nd = 10**5, 10**4, 10**5 - 2154
    pred = npf.numpy_quantile_stop_quadratic_tail(nd, M, n)
    lo, hi = npf.numpy_quantile_stop_bracket(nd, M, n)
    assert lo < pred < hi
    # a statistic with an exactly quadratic upper tail: 1 - F(s) = (1 - s)^2 on [0, 1];
    # simulate the np.quantile threshold and the exact pass probability (1 - alpha)^2
    g = gen(16)
    R = 1500
    v = 1 - np.sqrt(g.random((R, M)))
    alpha = np.quantile(v, 1 - 1 / n, axis=1)
    p = (1 - alpha) ** 2
    stop = g.random(R) < -np.expm1(nd * np.log1p(-p))
    assert abs(stop.mean() - pred) < 4 * np.sqrt(pred * (1 - pred) / R)
    with pytest.raises(ValueError, match="M must"):
        npf.numpy_quantile_stop_quadratic_tail(nd, 3 * n, n)


def test_etd_returns_the_ridge_fit_and_eps_greedy_numpy_mode():
    g = gen(17)
    theta = np.array([3.0, 2.0])
    out = npf.etd_lcbt_iid(theta, 0.5, 2000, 30, g)
    assert out["theta_hat"].shape == (30, 2) and out["V"].shape == (30, 2, 2)
    # V = I + sum x x^T over ell features in [0, 1/sqrt 2]^2: between I and (1 + ell / 2) I
    ell = npf.default_ell(2000)
    eig = np.linalg.eigvalsh(out["V"])
    assert np.all(eig >= 1 - 1e-12) and np.all(eig <= 1 + ell)
    eg = npf.eps_greedy_lcbt(theta, 0.5, 2000, 5, g, M=500, quantile="numpy")
    assert np.all(eg["reward"] <= eg["maxima"] + 1e-12)
    with pytest.raises(ValueError, match="quantile"):
        npf.eps_greedy_lcbt(theta, 0.5, 2000, 2, g, quantile="mean")


def test_adversarial_boxes_put_the_value_in_the_window():
    lo, hi = npf.adversarial_boxes(100, 2, 10, low=0.1)
    a = 1 / np.sqrt(2)
    assert np.all(lo == 0) and np.all(hi[:10] == a) and np.allclose(hi[10:], 0.1 * a)
    with pytest.raises(ValueError, match="low"):
        npf.adversarial_boxes(100, 2, 10, low=0.0)
