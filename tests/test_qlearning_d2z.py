"""Tests of lib.qlearning_d2z (chapter 07), following section (g) of the brief."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.papers import qlearning_d2z as ql


@pytest.fixture(scope="module")
def mdp():
    return ql.GridMDP()


def test_transition_rows_sum_to_one(mdp):
    P = mdp.transition_matrix()
    assert P.shape == (64, 16)
    assert np.allclose(P.sum(1), 1.0) and np.all(P >= 0)


def test_q_star_is_bellman_fixed_point(mdp):
    Q = mdp.q_star()
    assert np.max(np.abs(mdp.bellman(Q) - Q)) < 1e-10


def test_q_star_against_brute_force_policy_enumeration():
    # Tiny 2x2 grid, no specials: Q* from the best of all 4^4 deterministic policies.
    m = ql.GridMDP(size=2, gamma=0.5, specials={}, tie_eps=0.2)
    r = m.mean_reward()
    best = None
    import itertools

    for pol in itertools.product(range(4), repeat=4):
        H = m.policy_matrix(np.array(pol))
        Q = np.linalg.solve(np.eye(m.d) - m.gamma * H, r)
        best = Q if best is None else np.maximum(best, Q)
    assert np.allclose(m.q_star(), best, atol=1e-10)


def test_unique_optimal_actions(mdp):
    assert mdp.min_action_gap() > 0.05


def test_step_sizes_endpoints():
    e = ql.step_sizes("pd2z", 100, 0.05, nu=2)
    assert e[-1] == 0.0 and np.all((0 <= e) & (e <= 0.05))
    assert np.isclose(e[0], 0.05 * 0.99**2)
    assert np.allclose(ql.step_sizes("const", 5, 0.1), 0.1)
    assert np.isclose(ql.step_sizes("poly", 10, 0.05, alpha=0.65)[-1], 0.05 * 10**-0.65)


def test_step_sizes_bad_input():
    with pytest.raises(ValueError, match="kind"):
        ql.step_sizes("cosine", 10, 0.1)
    with pytest.raises(ValueError, match="eta"):
        ql.step_sizes("const", 10, -0.1)
    with pytest.raises(ValueError, match="alpha"):
        ql.step_sizes("poly", 10, 0.1)
    with pytest.raises(ValueError, match="n must"):
        ql.step_sizes("const", 0, 0.1)
    with pytest.raises(ValueError, match="nu"):
        ql.step_sizes("pd2z", 10, 0.1, nu=0)


def test_linearization_structure(mdp):
    G, Gamma = mdp.linearization()
    H = (np.eye(mdp.d) - G) / mdp.gamma
    assert np.allclose(H.sum(1), 1.0)
    # spectral radius of I - G = gamma * H is gamma (H is a stochastic matrix)
    assert np.isclose(np.max(np.abs(np.linalg.eigvals(np.eye(mdp.d) - G))), mdp.gamma)
    assert np.count_nonzero(Gamma - np.diag(np.diag(Gamma))) == 0
    deterministic = np.array([np.count_nonzero(mdp.prob[i]) == 1 for i in range(mdp.d)])
    assert np.all(np.diag(Gamma)[deterministic] == 0)
    assert np.all(np.diag(Gamma)[~deterministic] > 0)


def test_gamma_matches_monte_carlo_bellman_noise(mdp):
    G, Gamma = mdp.linearization()
    rng = np.random.default_rng(3)
    ns, r = mdp.sample(20000, rng)
    V = mdp.q_star().reshape(16, 4).max(1)
    Z = r + mdp.gamma * V[ns] - mdp.q_star()
    assert np.allclose(Z.mean(0), 0, atol=5 * np.sqrt(np.diag(Gamma).max() / 20000) + 1e-12)
    # s.e. of a sample variance: sqrt((mu4 - sigma^4) / N), mu4 exact from the outcome table
    target = mdp.reward + mdp.gamma * V[mdp.next_state]
    mean = (mdp.prob * target).sum(1)
    mu4 = (mdp.prob * (target - mean[:, None]) ** 4).sum(1)
    se = np.sqrt(np.clip(mu4 - np.diag(Gamma) ** 2, 0, None) / Z.shape[0])
    assert np.all(np.abs(Z.var(0) - np.diag(Gamma)) <= 4 * se + 1e-12)


def test_sampling_frequencies(mdp):
    ns, _ = mdp.sample(40000, np.random.default_rng(0))
    i = 5 * 4 + 1  # state 5, action right -> state 6 w.p. 1 - slip + slip/4
    assert abs(np.mean(ns[:, i] == 6) - 0.925) < 0.005


def test_offset_coupling_is_exact(mdp):
    e = ql.step_sizes("pd2z", 300, 0.05)
    Qs = mdp.q_star()
    a = ql.run_sync_q(mdp, e, 3, np.random.default_rng(9), Q0=Qs, track_error=False, keep_from=1)
    b = ql.run_sync_q(
        mdp, e, 3, np.random.default_rng(9), Q0=Qs + 50, track_error=False, keep_from=1
    )
    diff = b["kept"] - a["kept"]
    pred = 50 * ql.forgetting_factor(e, mdp.gamma)
    assert np.allclose(diff, pred[None, :, None], rtol=1e-8, atol=1e-9)


def test_run_sync_q_converges_and_averages(mdp):
    n = 2000
    out = ql.run_sync_q(
        mdp,
        ql.step_sizes("pd2z", n, 0.05),
        50,
        np.random.default_rng(1),
        tail_m=ql.tail_length(n),
        keep_from=n - 10,
    )
    Qs = mdp.q_star()
    assert np.sqrt(np.mean((out["tail"] - Qs) ** 2)) < 0.05
    assert np.allclose(out["kept"][:, -1], out["last"])
    assert out["path_err"].shape == (50, n)


def test_tail_cov_backward_equals_forward():
    rng = np.random.default_rng(0)
    d = 5
    A = rng.normal(size=(d, d))
    G = np.eye(d) + 0.3 * A / np.linalg.norm(A, 2)
    Gamma = np.diag(rng.uniform(0, 1, d))
    e = ql.step_sizes("pd2z", 200, 0.2, nu=1.5)
    for m in (1, 17, 200):
        S1 = ql.gaussian_tail_cov(G, Gamma, e, m)
        S2 = ql.gaussian_tail_cov_forward(G, Gamma, e, m)
        assert np.allclose(S1, S2, rtol=1e-10, atol=1e-15)


def test_tail_cov_against_monte_carlo_of_Y():
    # Brief (g): d = 3 toy, 20 000 draws, within 3 standard errors.
    G = np.array([[1.0, -0.2, 0.0], [0.0, 0.9, -0.1], [-0.3, 0.0, 1.0]])
    Gamma = np.diag([1.0, 0.5, 0.0])
    e = ql.step_sizes("pd2z", 120, 0.3)
    m = 20
    S = ql.gaussian_tail_cov(G, Gamma, e, m)
    Y = ql.simulate_Y(G, Gamma, e, 20000, np.random.default_rng(4), tail_m=m)["tail"]
    emp = Y[:, :2].T @ Y[:, :2] / Y.shape[0]
    # s.e. of a second moment of Gaussians: sqrt((S_ii S_jj + S_ij^2) / N)
    se = np.sqrt((np.outer(np.diag(S)[:2], np.diag(S)[:2]) + S[:2, :2] ** 2) / Y.shape[0])
    assert np.all(np.abs(emp - S[:2, :2]) < 3 * se)
    assert np.allclose(Y[:, 2].var(), S[2, 2], rtol=0.1)


def test_tail_cov_m_zero_raises(mdp):
    G, Gamma = mdp.linearization()
    with pytest.raises(ValueError, match="m must"):
        ql.gaussian_tail_cov(G, Gamma, ql.step_sizes("pd2z", 10, 0.05), 0)
    with pytest.raises(ValueError, match="Gamma must"):
        ql.gaussian_tail_cov(G, Gamma[:3, :3], ql.step_sizes("pd2z", 10, 0.05), 2)


def test_tail_length():
    assert ql.tail_length(10000, 1) == 100
    assert ql.tail_length(1000, 2) == 100
    with pytest.raises(ValueError, match="nu"):
        ql.tail_length(10, 0)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 6), st.integers(0, 3))
def test_max_tail_partial_sum_brute_force(L, seed):
    X = np.random.default_rng(seed).normal(size=(2, L, 3))
    got = ql.max_tail_partial_sum(X)
    brute = [max(np.abs(X[c, t:].sum(0)).max() for t in range(L)) for c in range(2)]
    assert np.allclose(got, brute)


def test_run_sync_q_bad_input(mdp):
    e = ql.step_sizes("const", 5, 0.1)
    rng = np.random.default_rng(0)
    with pytest.raises(TypeError, match="rng"):
        ql.run_sync_q(mdp, e, 2, 0)
    with pytest.raises(ValueError, match="etas"):
        ql.run_sync_q(mdp, [0.1, 1.5], 2, rng)
    with pytest.raises(ValueError, match="n_chains"):
        ql.run_sync_q(mdp, e, 0, rng)
    with pytest.raises(ValueError, match="Q0"):
        ql.run_sync_q(mdp, e, 2, rng, Q0=np.zeros(3))
    with pytest.raises(ValueError, match="tail_m"):
        ql.run_sync_q(mdp, e, 2, rng, tail_m=6)
    with pytest.raises(TypeError, match="mdp"):
        ql.run_sync_q("grid", e, 2, rng)


def test_gridmdp_bad_input():
    with pytest.raises(ValueError, match="gamma"):
        ql.GridMDP(gamma=1.0)
    with pytest.raises(ValueError, match="slip"):
        ql.GridMDP(slip=1.5)
    with pytest.raises(ValueError, match="specials"):
        ql.GridMDP(size=2)
    with pytest.raises(ValueError, match="noise_df"):
        ql.GridMDP(reward_noise=1.0, noise_df=2)


# -- the plug-in Gaussian bootstrap -----------------------------------------------------------
def test_tail_cov_basis_is_linear_in_the_diagonal():
    rng = np.random.default_rng(1)
    d = 4
    A = rng.normal(size=(d, d))
    G = np.eye(d) + 0.3 * A / np.linalg.norm(A, 2)
    e = ql.step_sizes("pd2z", 300, 0.2)  # 300 > one chunk of 256: checks the chunking
    S = ql.tail_cov_basis(G, e, 17)
    gam = rng.uniform(0, 2, d)
    assert np.allclose(np.tensordot(gam, S, 1), ql.gaussian_tail_cov(G, np.diag(gam), e, 17))
    with pytest.raises(ValueError, match="m must"):
        ql.tail_cov_basis(G, e, 0)


@pytest.mark.parametrize("noise", [0.0, 0.5])
def test_plugin_gamma_equals_sample_variance_of_targets(noise):
    mdp = ql.GridMDP(size=3, specials={1: (7, 10.0)}, reward_noise=noise)
    e = ql.step_sizes("pd2z", 40, 0.3)
    out = ql.run_sync_q(mdp, e, 3, np.random.default_rng(5), track_error=False, count_outcomes=True)
    Qbar = out["last"] + np.random.default_rng(6).normal(size=out["last"].shape)
    got = ql.plugin_gamma(mdp, Qbar, out["outcomes"])
    # brute force: replay the same draws and take the variance of the targets at Qbar
    rng = np.random.default_rng(5)
    V = Qbar.reshape(3, mdp.n_states, mdp.n_actions).max(axis=2)
    targets = []
    for _ in range(e.size):
        ns, r = mdp.sample(3, rng)
        targets.append(r + mdp.gamma * np.take_along_axis(V, ns, axis=1))
    assert np.allclose(got, np.var(np.array(targets), axis=0), rtol=1e-9, atol=1e-12)
    plain = ql.run_sync_q(mdp, e, 3, np.random.default_rng(5), track_error=False)
    assert np.array_equal(plain["last"], out["last"])  # counting leaves the draws unchanged


def test_plugin_gamma_converges_to_gamma(mdp):
    G, Gamma = mdp.linearization()
    e = ql.step_sizes("const", 3000, 0.1)
    out = ql.run_sync_q(mdp, e, 2, np.random.default_rng(2), track_error=False, count_outcomes=True)
    Qs = np.tile(mdp.q_star(), (2, 1))
    g = ql.plugin_gamma(mdp, Qs, out["outcomes"])
    # a variance from 3000 draws: relative error a few standard errors of sqrt(kurtosis / 3000)
    assert np.allclose(g, np.diag(Gamma), rtol=0.35, atol=1e-12)
    assert np.all(g[:, np.diag(Gamma) == 0] == 0)


def test_plugin_band_radius_gaussian_quantile_and_scaling():
    S = np.array([[[4.0]]])  # d = 1, Sigma = 4 Gamma_11
    r = ql.plugin_band_radius(S, np.ones((2, 1)), 0.95, 40000, np.random.default_rng(0))
    assert np.allclose(r, 2 * 1.959964, rtol=0.02)
    d = 3
    B = np.random.default_rng(3).normal(size=(d, d, d))
    S = B @ B.transpose(0, 2, 1)
    gam = np.random.default_rng(4).uniform(0, 1, (5, d))
    full = ql.plugin_band_radius(S, gam, [0.5, 0.9], 300, np.random.default_rng(7))
    half = ql.plugin_band_radius(S, gam / 2, [0.5, 0.9], 300, np.random.default_rng(7))
    assert full.shape == (5, 2) and np.all(full[:, 0] < full[:, 1])
    assert np.allclose(half, full / np.sqrt(2))  # positive homogeneity: Gamma/2 -> r/sqrt 2


def test_plugin_bad_input(mdp):
    S = np.ones((2, 2, 2))
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="level"):
        ql.plugin_band_radius(S, np.ones((1, 2)), 1.5, 10, rng)
    with pytest.raises(ValueError, match="gamma_hat"):
        ql.plugin_band_radius(S, np.ones((1, 3)), 0.9, 10, rng)
    with pytest.raises(ValueError, match="gamma_hat"):
        ql.plugin_band_radius(S, -np.ones((1, 2)), 0.9, 10, rng)
    with pytest.raises(TypeError, match="rng"):
        ql.plugin_band_radius(S, np.ones((1, 2)), 0.9, 10, 0)
    with pytest.raises(ValueError, match="outcomes"):
        ql.plugin_gamma(mdp, np.zeros((1, mdp.d)), {})
    with pytest.raises(ValueError, match="Qbar"):
        ql.plugin_gamma(mdp, np.zeros((1, 3)), {"counts": np.ones((1, 3, 4))})
    with pytest.raises(TypeError, match="mdp"):
        ql.plugin_gamma("grid", np.zeros((1, 3)), {"counts": np.ones((1, 3, 4))})
