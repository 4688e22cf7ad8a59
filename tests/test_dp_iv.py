"""Tests of lib.dp_iv (chapter 04), following section (g) of the brief."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.papers import dp_iv as d


@pytest.fixture(scope="module")
def data():
    return d.simulate_iv(3000, 3, 4, 2, np.random.default_rng(0))


def test_simulate_shapes_and_endogeneity(data):
    assert (
        data["Z"].shape == (3000, 4) and data["X"].shape == (3000, 3) and data["Y"].shape == (3000,)
    )
    assert data["Theta_star"].shape == (4, 3)
    assert np.linalg.norm(data["ols_bias"]) == pytest.approx(0.5)


def test_population_ols_bias_matches_large_sample():
    D = d.simulate_iv(200_000, 3, 4, 2, np.random.default_rng(5))
    measured = d.ols(D["X"], D["Y"]) - D["beta_star"]
    assert np.linalg.norm(measured - D["ols_bias"]) < 0.02


def test_two_sls_matches_linearmodels(data):
    from linearmodels.iv import IV2SLS

    _, beta = d.two_sls(data["Z"], data["X"], data["Y"])
    ref = IV2SLS(data["Y"], None, data["X"], data["Z"]).fit().params
    assert np.allclose(beta, np.asarray(ref), atol=1e-10)


def test_two_stage_gd_converges_to_2sls(data):
    eta, alpha = d.public_step_sizes(data["Theta_star"], 3000, 4)
    Ths, bs = d.two_stage_gd(data["Z"], data["X"], data["Y"], 300, eta, alpha)
    Th, b = d.two_sls(data["Z"], data["X"], data["Y"])
    assert bs.shape == (301, 3) and Ths.shape == (301, 4, 3)
    assert np.linalg.norm(bs[-1] - b) < 1e-10 and np.linalg.norm(Ths[-1] - Th) < 1e-10


def test_clip_rows():
    G = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]])
    C, frac = d.clip_rows(G, 1.0)
    assert np.allclose(C[0], [0.6, 0.8]) and np.allclose(C[1], G[1]) and np.allclose(C[2], 0)
    assert frac == pytest.approx(1 / 3)


@settings(max_examples=50, deadline=None)
@given(st.floats(0.01, 100), st.integers(0, 10**6))
def test_clip_rows_caps_norms_exactly(c, seed):
    G = np.random.default_rng(seed).standard_normal((20, 6)) * 10
    C, _ = d.clip_rows(G, c)
    norms = np.linalg.norm(C, axis=1)
    assert np.all(norms <= c * (1 + 1e-12))
    small = np.linalg.norm(G, axis=1) <= c
    assert np.allclose(C[small], G[small])


def test_noise_scale_and_accounting():
    assert d.noise_scale(5.0, 100, 10, math.inf) == 0.0
    lam = d.noise_scale(5.0, 100, 10, 0.3)
    assert lam == pytest.approx(2 * 5 / 100 * math.sqrt(10 / 0.3))
    # Proposition 3.1's noise scale costs rho/2 per stage (the factor-2 slack)
    assert d.zcdp_cost(5.0, lam, 100, 10) == pytest.approx(0.15, rel=1e-12)
    assert d.zcdp_cost(5.0, 0.0, 100, 10) == math.inf


def test_zcdp_to_dp_known_values():
    for rho, eps in ((0.1, 2.246), (1.0, 7.786), (10.0, 31.46)):
        assert d.zcdp_to_dp(rho, 1e-5) == pytest.approx(eps, abs=0.01)


def test_per_sample_grads_average_to_full_gradient(data):
    rng = np.random.default_rng(1)
    Th, b = rng.standard_normal((4, 3)), rng.standard_normal(3)
    G1, G2 = d.per_sample_grads(data["Z"], data["X"], data["Y"], Th, b)
    Z, X, Y = data["Z"], data["X"], data["Y"]
    n = Z.shape[0]
    assert np.allclose(G1.mean(0).reshape(4, 3), Z.T @ (Z @ Th - X) / n)
    assert np.allclose(G2.mean(0), Th.T @ Z.T @ (Z @ Th @ b - Y) / n)


def test_clipped_mean_replace_one_sensitivity_is_at_most_2_gamma_over_n(data):
    # 04/lem-sensitivity/bound: one clipped row of norm <= gamma is swapped for another
    rng = np.random.default_rng(6)
    Z, X, Y = data["Z"][:300], data["X"][:300], data["Y"][:300]
    n, gamma = Z.shape[0], 2.0
    Th, b = rng.standard_normal((4, 3)), rng.standard_normal(3)
    g1, g2, _, _ = d.clipped_mean_grads(Z, X, Y, Th, b, gamma, gamma)
    for k in range(20):
        Z2, X2, Y2 = Z.copy(), X.copy(), Y.copy()
        j, scale = int(rng.integers(n)), (1.0 if k % 2 else 1e3)
        Z2[j], X2[j], Y2[j] = scale * rng.standard_normal(4), scale * rng.standard_normal(3), scale
        h1, h2, _, _ = d.clipped_mean_grads(Z2, X2, Y2, Th, b, gamma, gamma)
        assert np.linalg.norm(h1 - g1) <= 2 * gamma / n * (1 + 1e-9)
        assert np.linalg.norm(h2 - g2) <= 2 * gamma / n * (1 + 1e-9)


def test_opposite_clipped_neighbour_attains_the_sensitivity_bound(data):
    # 04/lem-sensitivity/tight: same z, residual of opposite sign and huge, so the clipped stage-2
    # gradient flips to exactly minus the removed one and the change is 2 gamma / n
    rng = np.random.default_rng(7)
    Z, X, Y = data["Z"][:300], data["X"][:300], data["Y"][:300]
    n, gamma = Z.shape[0], 2.0
    Th, b = rng.standard_normal((4, 3)), rng.standard_normal(3)
    _, G2 = d.per_sample_grads(Z, X, Y, Th, b)
    _, g2, _, _ = d.clipped_mean_grads(Z, X, Y, Th, b, gamma, gamma)
    for j in np.flatnonzero(np.linalg.norm(G2, axis=1) > gamma)[:5]:
        resid = Z[j] @ Th @ b - Y[j]
        Y2 = Y.copy()
        Y2[j] = Y[j] + 2 * resid + np.sign(resid) * 1e3
        _, h2, _, _ = d.clipped_mean_grads(Z, X, Y2, Th, b, gamma, gamma)
        assert np.linalg.norm(h2 - g2) == pytest.approx(2 * gamma / n, rel=1e-9)


def test_dp_with_infinite_budget_and_no_clipping_equals_2sgd(data):
    eta, alpha = d.public_step_sizes(data["Theta_star"], 3000, 4)
    out = d.dp_two_stage_gd(
        data["Z"],
        data["X"],
        data["Y"],
        15,
        math.inf,
        math.inf,
        1e6,
        1e6,
        eta,
        alpha,
        np.random.default_rng(0),
        n_runs=2,
    )
    _, bs = d.two_stage_gd(data["Z"], data["X"], data["Y"], 15, eta, alpha)
    assert out["beta"].shape == (2, 16, 3)
    assert np.allclose(out["beta"][0], bs) and out["frac1"] == 0 and out["lam1"] == 0


def test_beta_noise_mse_exact_against_monte_carlo(data):
    Z, X, Y = data["Z"], data["X"], data["Y"]
    eta, alpha = d.public_step_sizes(data["Theta_star"], 3000, 4)
    T = 10
    out = d.dp_two_stage_gd(
        Z, X, Y, T, math.inf, 1.0, 1e6, 1e6, eta, alpha, np.random.default_rng(3), n_runs=400
    )
    _, bs = d.two_stage_gd(Z, X, Y, T, eta, alpha)
    sq = np.sum((out["beta"][:, -1] - bs[-1]) ** 2, axis=1)
    exact = d.beta_noise_mse_exact(Z, X, T, eta, alpha, out["lam2"])
    assert abs(sq.mean() - exact) < 4 * sq.std(ddof=1) / np.sqrt(sq.size)


def test_bad_input():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="q >= p"):
        d.two_sls(
            rng.standard_normal((50, 2)), rng.standard_normal((50, 3)), rng.standard_normal(50)
        )
    Z = rng.standard_normal((50, 3))
    Z[:, 2] = Z[:, 0]
    with pytest.raises(ValueError, match="rank deficient"):
        d.two_sls(Z, rng.standard_normal((50, 2)), rng.standard_normal(50))
    with pytest.raises(ValueError, match="rho"):
        d.noise_scale(1.0, 10, 5, 0.0)
    with pytest.raises(ValueError, match="rho"):
        d.zcdp_to_dp(-1.0, 1e-5)
    with pytest.raises(ValueError, match="delta"):
        d.zcdp_to_dp(1.0, 1.5)
    with pytest.raises(ValueError, match="c must"):
        d.clip_rows(np.ones((2, 2)), 0)
    with pytest.raises(ValueError, match="rows"):
        d.two_sls(
            rng.standard_normal((50, 2)), rng.standard_normal((40, 2)), rng.standard_normal(50)
        )
    with pytest.raises(TypeError, match="rng"):
        d.dp_two_stage_gd(
            rng.standard_normal((50, 2)),
            rng.standard_normal((50, 2)),
            rng.standard_normal(50),
            5,
            1.0,
            1.0,
            1.0,
            1.0,
            0.5,
            0.5,
            42,
        )
    with pytest.raises(ValueError, match="T must"):
        d.two_stage_gd(
            rng.standard_normal((50, 2)),
            rng.standard_normal((50, 2)),
            rng.standard_normal(50),
            0,
            0.5,
            0.5,
        )
    with pytest.raises(ValueError, match="q >= p"):
        d.simulate_iv(10, 3, 2, 1, rng)


def test_clipped_mean_grads_equals_clipping_per_sample_rows(data):
    # the rank-one shortcut (norm = |z_i| |r_i|) agrees with clipping the explicit rows
    rng = np.random.default_rng(11)
    Z, X, Y = data["Z"][:400], data["X"][:400], data["Y"][:400]
    Th, b = rng.standard_normal((3, 4, 3)), rng.standard_normal((3, 3))
    g1, g2, f1, f2 = d.clipped_mean_grads(Z, X, Y, Th, b, 2.0, 3.0)
    G1, G2 = d.per_sample_grads(Z, X, Y, Th, b)
    C1, e1 = d.clip_rows(G1, 2.0)
    C2, e2 = d.clip_rows(G2, 3.0)
    assert np.allclose(g1, C1.mean(axis=1).reshape(3, 4, 3), atol=1e-13)
    assert np.allclose(g2, C2.mean(axis=1), atol=1e-13)
    assert f1 == pytest.approx(e1) and f2 == pytest.approx(e2) and 0 < f1 < 1


def test_eps1_var_and_wald_statistic():
    D = d.simulate_iv(200_000, 3, 4, 2, np.random.default_rng(5))
    resid = D["Y"] - D["X"] @ D["beta_star"]
    assert np.var(resid) == pytest.approx(D["eps1_var"], rel=0.02)
    delta = np.array([0.1, -0.2, 0.05])
    w = d.wald_statistic(D["beta_star"] + delta, D["beta_star"], D["Theta_star"], 2.0, 50)
    v = D["Theta_star"] @ delta
    assert w == pytest.approx(50 * v @ v / 2.0, rel=1e-12)
    with pytest.raises(ValueError, match="eps1_var"):
        d.wald_statistic(delta, delta, D["Theta_star"], 0.0, 50)


def test_first_stage_noise_var_is_the_ar1_stationary_variance():
    eta, lam, runs = 0.7, 0.3, 200_000
    gen = np.random.default_rng(2)
    e = np.zeros(runs)
    for _ in range(60):  # E^{t+1} = (1 - eta) E^t - eta Xi^t
        e = (1 - eta) * e - eta * lam * gen.standard_normal(runs)
    s2 = d.first_stage_noise_var(lam, eta)
    assert s2 == pytest.approx(eta**2 * lam**2 / (1 - (1 - eta) ** 2))
    assert np.var(e) == pytest.approx(s2, rel=0.02)


def test_attenuation_and_critical_T_agree():
    rng = np.random.default_rng(4)
    A = rng.standard_normal((4, 4))
    H = A.T @ A + np.eye(4)
    beta_hat = rng.standard_normal(4)
    assert np.allclose(d.attenuated_beta(H, beta_hat, 0.0, 4.0), beta_hat)
    mu, U = np.linalg.eigh(H)
    s2 = 0.3
    bar = d.attenuated_beta(H, beta_hat, s2, 4.0)
    assert np.allclose(U.T @ bar, mu / (mu + 4 * s2) * (U.T @ beta_hat))
    # at T_c the stationary first-stage variance times q equals mu_min
    rho1, n, gamma, q, eta = 0.5, 3000, 7.0, 4, 0.8
    T_c = d.critical_T(rho1, n, gamma, q, eta, mu[0])
    lam2 = 4 * gamma**2 * T_c / (n**2 * rho1)
    assert q * d.first_stage_noise_var(math.sqrt(lam2), eta) == pytest.approx(mu[0], rel=1e-12)


def test_u_curve_closed_form_is_exact_when_sigma_hat_is_identity():
    # Z with Z^T Z / n = I exactly: the closed form must equal 2S-GD plus the exact noise MSE
    n, p = 400, 3
    gen = np.random.default_rng(9)
    Q, _ = np.linalg.qr(gen.standard_normal((n, p)))
    Z = math.sqrt(n) * Q
    Theta = np.eye(p) + 0.2 * gen.standard_normal((p, p))
    X = Z @ Theta + 0.5 * gen.standard_normal((n, p))
    beta_star = gen.standard_normal(p)
    Y = X @ beta_star + gen.standard_normal(n)
    eta, alpha, lam2, T_max = 0.9, 0.5, 0.05, 25
    Th, bh = d.two_sls(Z, X, Y)
    H = Th.T @ Th
    cf = d.u_curve_closed_form(H, bh, beta_star, T_max, eta, alpha, lam2)
    _, bs = d.two_stage_gd(Z, X, Y, T_max, eta, alpha)
    for T in (1, 2, 5, 25):
        exact = np.sum((bs[T] - beta_star) ** 2) + d.beta_noise_mse_exact(Z, X, T, eta, alpha, lam2)
        assert cf[T - 1] == pytest.approx(exact, rel=1e-9)
