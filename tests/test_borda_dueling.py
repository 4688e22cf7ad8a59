"""Tests for lib.papers.borda_dueling (chapter 06)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize

from lib.papers import borda_dueling as bd


def _random_P(rng, K):
    A = rng.random((K, K))
    P = np.triu(A, 1) + np.tril(1 - A.T, -1)
    np.fill_diagonal(P, 0.5)
    return P


def test_shifted_and_plain_borda_relation():
    rng = np.random.default_rng(0)
    P = _random_P(rng, 6)
    s, b = bd.shifted_borda(P), bd.borda(P)
    np.testing.assert_allclose(s, ((6 - 1) * b + 0.5) / 6)
    # gaps in s are (K-1)/K times gaps in b
    np.testing.assert_allclose(np.diff(s), (5 / 6) * np.diff(b))


def test_utility_matrix_valid_and_gaps():
    u = np.array([0.8, 0.0, 0.3, 0.1])
    P = bd.utility_matrix(u)
    bd.check_preference_matrix(P)
    s = bd.shifted_borda(P)
    np.testing.assert_allclose(s, 0.5 + (u - u.mean()) / 2)
    np.testing.assert_allclose(s[0] - s, (u[0] - u) / 2)


def test_invalid_preference_matrix_raises():
    with pytest.raises(ValueError, match="P"):
        bd.check_preference_matrix(np.array([[0.5, 0.7], [0.7, 0.5]]))
    with pytest.raises(ValueError, match="P"):
        bd.check_preference_matrix(np.array([[0.5, 1.5], [-0.5, 0.5]]))
    with pytest.raises(ValueError, match="u"):
        bd.utility_matrix([0.0, 1.5])
    with pytest.raises(TypeError):
        bd.check_preference_matrix("abc")


def test_estimator_zero_except_at_x_and_moments():
    q = np.array([[0.1, 0.2, 0.3, 0.4], [0.25] * 4])
    est = bd.borda_estimate(np.array([2, 0]), np.array([1, 3]), np.array([1.0, 1.0]), q)
    assert np.count_nonzero(est[0]) == 1 and est[0, 2] == pytest.approx(1 / (4 * 0.3 * 0.2))
    assert np.count_nonzero(est[1]) == 1 and est[1, 0] == pytest.approx(4.0)
    # exact moments by enumeration of (x, y, o)
    rng = np.random.default_rng(1)
    P = _random_P(rng, 4)
    qq = q[0]
    mean = np.zeros(4)
    second = np.zeros(4)
    for x in range(4):
        for y in range(4):
            w = qq[x] * qq[y] * P[x, y]
            e = bd.borda_estimate(np.array([x]), np.array([y]), np.array([1.0]), qq[None])[0]
            mean += w * e
            second += w * e**2
    m, s2 = bd.estimator_moments(P, qq)
    np.testing.assert_allclose(mean, bd.shifted_borda(P))
    np.testing.assert_allclose(m, mean)
    np.testing.assert_allclose(s2, second)
    np.testing.assert_allclose(s2, bd.second_moment_closed_form(P, qq))
    gamma = 4 * qq.min()
    assert np.all(s2 <= 1 / (gamma * qq) + 1e-12)


@settings(max_examples=15, deadline=None)
@given(
    st.lists(st.floats(-50, 50), min_size=2, max_size=7),
    st.floats(0.05, 50.0),
)
def test_ftrl_weights_simplex_kkt_and_equivariance(S, beta):
    S = np.array(S)
    for kind in ("shannon", "hybrid"):
        p = bd.ftrl_weights(S, beta, kind)
        assert p.sum() == pytest.approx(1.0, abs=1e-9) and np.all(p >= 0)
        perm = np.random.default_rng(0).permutation(S.size)
        np.testing.assert_allclose(bd.ftrl_weights(S[perm], beta, kind), p[perm], atol=1e-9)
    p = bd.ftrl_weights(S, beta, "hybrid")
    inner = (p > 1e-12) & (p < 1 - 1e-12)
    if inner.sum() >= 2:
        lam = S[inner] - beta * np.log(p[inner] / (1 - p[inner]))
        assert np.ptp(lam) < 1e-6 * max(1.0, np.abs(S).max())


def test_ftrl_weights_limits_and_slsqp():
    S = np.array([3.0, 1.0, 0.5, -2.0])
    for kind in ("shannon", "hybrid"):
        np.testing.assert_allclose(bd.ftrl_weights(S, 1e6, kind), 0.25, atol=1e-5)
        assert bd.ftrl_weights(S, 1e-3, kind)[0] == pytest.approx(1.0, abs=1e-9)
    beta = 1.3

    def obj(p):
        p = np.clip(p, 1e-15, 1 - 1e-15)
        return -(p @ S) + beta * np.sum(p * np.log(p) + (1 - p) * np.log(1 - p))

    res = optimize.minimize(
        obj,
        np.full(4, 0.25),
        method="SLSQP",
        bounds=[(1e-12, 1 - 1e-12)] * 4,
        constraints={"type": "eq", "fun": lambda p: p.sum() - 1},
        options={"ftol": 1e-14, "maxiter": 500},
    )
    np.testing.assert_allclose(bd.ftrl_weights(S, beta, "hybrid"), res.x, atol=1e-6)


def test_ftrl_weights_bad_input():
    with pytest.raises(ValueError, match="beta"):
        bd.ftrl_weights([0.0, 1.0], -1.0)
    with pytest.raises(ValueError, match="kind"):
        bd.ftrl_weights([0.0, 1.0], 1.0, kind="tsallis")
    with pytest.raises(ValueError, match="S_hat"):
        bd.ftrl_weights([1.0], 1.0)


def test_dexp3_gamma_one_plays_uniformly():
    P = bd.utility_matrix(np.array([0.8, 0.0, 0.0, 0.0]))
    T = 400
    r = bd.simulate(
        P,
        np.zeros((3, T), int),
        [bd.fixed_schedule(1.0, 1.0)] * 3,
        "shannon",
        [T],
        np.random.default_rng(0),
    )
    s = bd.shifted_borda(P)
    np.testing.assert_allclose(r.regret[:, 0], T * (s.max() - s.mean()))
    np.testing.assert_allclose(r.gamma, 1.0)


def test_simulate_regret_definitions_and_errors():
    P = bd.utility_matrix(np.array([0.6, 0.0, 0.2]))
    T = 300
    idx = np.zeros((2, T), int)
    sc = [bd.adaptive_schedule(3), bd.fixed_schedule(*bd.dexp3_params(3, T))]
    r = bd.simulate(P, idx, sc, ["hybrid", "shannon"], [100, T], np.random.default_rng(2))
    np.testing.assert_allclose(r.regret, r.regret_ref)  # one matrix: the two agree
    assert np.all(r.regret > 0) and np.all(np.diff(r.regret, axis=1) > 0)
    with pytest.raises(ValueError, match="schedules"):
        bd.simulate(P, idx, sc[:1], "shannon", [T], np.random.default_rng(0))
    with pytest.raises(ValueError, match="checkpoints"):
        bd.simulate(P, idx, sc, "shannon", [T + 1], np.random.default_rng(0))
    with pytest.raises(TypeError):
        bd.simulate(P, idx, sc, "shannon", [T], 0)


def test_indices_and_bound():
    np.testing.assert_array_equal(bd.switching_index(8), [0, 1, 1, 0, 0, 0, 0, 1])
    c = bd.corruption_index(10, 1.0, 0.4)
    assert c.sum() == 3 and c[:3].all()
    assert bd.dexp3_bound(5, 1000) > 0
    with pytest.raises(ValueError, match="C"):
        bd.corruption_index(10, -1.0, 0.4)
    with pytest.raises(ValueError, match="K"):
        bd.dexp3_params(1, 10)


def test_warm_started_newton_matches_exact_solver():
    g = np.random.default_rng(3)
    B, K = 16, 5
    S = g.normal(size=(B, K)) * 20
    beta = np.full(B, 15.0)
    _, lam = bd._hybrid_solve(S, beta)
    for _ in range(100):  # one-entry updates, as in the simulation loop
        S[np.arange(B), g.integers(0, K, B)] += g.exponential(3.0, B)
        beta = beta + 0.05
        p3, lam = bd._hybrid_solve(S, beta, lam, tol=1e-10, max_iter=80)
        np.testing.assert_allclose(p3, bd.ftrl_weights(S, beta, "hybrid"), atol=1e-8)


def test_one_round_simulate_uses_the_estimator():
    """A 1-round simulation's S_hat equals borda_estimate on the same draws."""
    P = bd.utility_matrix(np.array([0.6, 0.0, 0.2, 0.1]))
    B, K = 6, 4
    sc = [bd.fixed_schedule(3.0, 0.4)] * 3 + [bd.adaptive_schedule(K)] * 3
    kinds = ["shannon", "hybrid"] * 3
    r = bd.simulate(P, np.zeros((B, 1), int), sc, kinds, [1], np.random.default_rng(7))
    u = np.random.default_rng(7).random((1, 3, B))[0]
    gamma = np.array([0.4] * 3 + [0.5] * 3)  # adaptive: min(1/2, sqrt(K / 4K))
    d = (1 - gamma)[:, None] * np.full((B, K), 1 / K) + (gamma / K)[:, None]
    cum = np.cumsum(d, 1)
    x = (u[0][:, None] > cum).sum(1)
    y = (u[1][:, None] > cum).sum(1)
    o = (u[2] < P[x, y]).astype(float)
    np.testing.assert_allclose(r.S_hat, bd.borda_estimate(x, y, o, d))


def test_adaptive_rules_by_hand():
    np.testing.assert_allclose(bd.adaptive_gamma([4.0, 20.0, 80.0], 5), [0.5, 0.5, 0.25])
    beta, h = np.array([20.0, 80.0]), np.array([0.5, 1e-6])
    nxt = bd.adaptive_beta_next(beta, h, 5, c=1.0, h_min=1e-3)
    np.testing.assert_allclose(nxt, [20 + 0.5 / 0.5, 80 + 0.25 / 1e-3])
    # the penalty increment (beta_{t+1} - beta_t) h_t is c sqrt(K / beta_t) whatever h_t is
    for hh in (0.1, 0.7, 2.0):
        inc = (bd.adaptive_beta_next(45.0, hh, 5, c=2.0) - 45.0) * hh
        assert inc == pytest.approx(2.0 * np.sqrt(5 / 45.0))


def test_etc_explores_then_commits_to_the_leader():
    P = bd.utility_matrix(np.array([0.9, 0.0, 0.0]))
    T, n = 400, 150
    r = bd.simulate(
        P,
        np.zeros((4, T), int),
        [bd.etc_schedule(n)] * 4,
        "shannon",
        [T],
        np.random.default_rng(5),
        n_trace=T,
    )
    t = r.trace_t
    np.testing.assert_allclose(r.gamma[:, t <= n], 1.0)
    np.testing.assert_allclose(r.gamma[:, t > n], 0.0)
    # after the exploration phase the FTRL weights sit on the empirical leader (arm 0 here)
    np.testing.assert_allclose(r.p_best[:, -1], 1.0)
    assert np.all(np.argmax(r.S_hat, 1) == 0)


def test_hybrid_potential_gradient_is_the_ftrl_step():
    S, beta = np.array([1.5, -0.3, 0.8, 0.0]), 0.7
    p = bd.ftrl_weights(S, beta, "hybrid")
    eps = 1e-6
    grad = [
        (
            bd.hybrid_potential(S + eps * np.eye(4)[i], beta)
            - bd.hybrid_potential(S - eps * np.eye(4)[i], beta)
        )
        / (2 * eps)
        for i in range(4)
    ]
    np.testing.assert_allclose(grad, p, atol=1e-7)


def test_hybrid_one_step_stability_lemma():
    g = np.random.default_rng(4)
    for _ in range(20):
        k = int(g.integers(2, 6))
        S = g.normal(size=k) * 3
        beta = float(g.uniform(0.5, 5))
        x = int(g.integers(k))
        v = float(beta * g.uniform(0.01, 3))
        exact = bd.hybrid_one_step_stability(S, beta, x, v)
        assert 0 <= exact <= bd.hybrid_stability_bound(S, beta, x, v) * (1 + 1e-9)
        # the quadrature agrees with the difference of potentials where that is well conditioned
        Sx = S.copy()
        Sx[x] += v
        direct = bd.hybrid_potential(Sx, beta) - bd.hybrid_potential(S, beta)
        direct -= v * bd.ftrl_weights(S, beta, "hybrid")[x]
        assert exact == pytest.approx(direct, rel=1e-5, abs=1e-9)
    assert bd.hybrid_one_step_stability(S, beta, 0, 0.0) == 0.0


def test_hybrid_stability_bad_input():
    S = np.array([0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="x"):
        bd.hybrid_one_step_stability(S, 1.0, 3, 1.0)
    with pytest.raises(ValueError, match="v"):
        bd.hybrid_stability_bound(S, 1.0, 0, -1.0)
    with pytest.raises(ValueError, match="beta"):
        bd.hybrid_one_step_stability(S, 0.0, 0, 1.0)
    with pytest.raises(ValueError, match="S"):
        bd.hybrid_potential(np.array([1.0]), 1.0)


def test_matched_stability_bound_against_enumeration():
    g = np.random.default_rng(6)
    for _ in range(30):
        k = int(g.integers(2, 7))
        P = _random_P(g, k)
        p = g.dirichlet(np.full(k, 0.05))
        gam = float(g.uniform(0.001, 0.5))
        d = (1 - gam) * p + gam / k
        _, second = bd.estimator_moments(P, d)
        assert (p * (1 - p)) @ second <= bd.matched_stability_bound(p, gam) * (1 + 1e-12)
    # batch form, and the two branches
    p = np.array([[1 - 1e-3, 5e-4, 5e-4], [1 / 3, 1 / 3, 1 / 3]])
    b = bd.matched_stability_bound(p, np.array([0.1, 0.1]))
    np.testing.assert_allclose(b, [4 * 1e-3 / 0.01, 2 * 2 / 0.1])
    with pytest.raises(ValueError, match="gamma"):
        bd.matched_stability_bound(p, 0.6)
    with pytest.raises(ValueError, match="p"):
        bd.matched_stability_bound(np.array([0.5, 0.6]), 0.1)


def test_matched_rules_by_hand():
    K = 5
    beta = np.array([100.0, 100.0, 1.0])
    p = np.array([[0.2] * 5, [1 - 4e-6] + [1e-6] * 4, [0.2] * 5])
    gam = bd.matched_gamma(p, beta, K)
    np.testing.assert_allclose(gam[0], np.sqrt(K / 100.0))  # spread weights: the old rule
    np.testing.assert_allclose(gam[1], np.cbrt(2 * (K + 1) * 4e-6 / 100.0))  # the third branch
    np.testing.assert_allclose(gam[2], 0.5)
    assert np.all(gam <= bd.adaptive_gamma(beta, K))  # never explores more than the old rule
    h_max = bd.hybrid_entropy_max(K)
    assert h_max == pytest.approx(float(bd.hybrid_entropy(np.full(K, 1 / K))))
    c = 2 / (3 * np.log(K))
    assert bd.matched_schedule(K).c == pytest.approx(c)
    np.testing.assert_allclose(
        bd.entropy_beta_next(np.array([20.0, 20.0]), np.array([h_max, 0.0]), K, c),
        [20 + c * np.sqrt(K / 20), 20.0],
    )
    with pytest.raises(ValueError, match="gamma_rule"):
        bd.matched_schedule(K, gamma_rule="cube")


def test_oracle_picks_the_best_beta_on_its_grid():
    P = bd.utility_matrix(np.array([0.8, 0.0, 0.0, 0.0]))
    T = 200
    r = bd.simulate(
        P,
        np.zeros((2, T), int),
        [bd.oracle_schedule()] * 2,
        "shannon",
        [T],
        np.random.default_rng(1),
        n_trace=T,
    )
    assert np.all(np.isin(r.beta, bd.ORACLE_GRID))
    np.testing.assert_allclose(r.gamma, bd.adaptive_gamma(r.beta, 4))
    with pytest.raises(ValueError, match="oracle"):
        bd.simulate(
            P,
            np.zeros((1, T), int),
            [bd.oracle_schedule()],
            "hybrid",
            [T],
            np.random.default_rng(1),
        )


def test_lower_bound_matrix_gaps_and_errors():
    K, n, delta, eps = 5, 3, 0.3, 0.1
    P = bd.lower_bound_matrix(K, n, delta, eps)
    bd.check_preference_matrix(P)
    s = bd.shifted_borda(P)
    np.testing.assert_allclose(s[0] - s[1:n], (K - n) * eps / K)
    np.testing.assert_allclose(s[0] - s[n:], delta + (K - n + 1) * eps / K)
    np.testing.assert_allclose(P[:n, :n], 0.5)  # good-vs-good duels carry no information
    with pytest.raises(ValueError, match="delta"):
        bd.lower_bound_matrix(K, n, 0.4, 0.2)
    with pytest.raises(ValueError, match="n_good"):
        bd.lower_bound_matrix(K, K, 0.3, 0.1)


def test_exploration_floor_is_a_lower_bound_with_the_stated_rate():
    K = 5
    D = np.array([10.0, 100.0, 1e3, 1e4, 1e5])
    m = bd.exploration_floor(K, D)
    assert np.all(np.diff(m) <= 0)
    # a fine direct minimisation over beta > 4K is an upper approximation of the infimum
    beta = np.geomspace(4 * K * (1 + 1e-9), 1e12, 200_001)
    direct = np.minimum(
        (K - 1) / (2 * K),
        ((K - 1) / K * np.sqrt(K / beta) + 0.25 * np.exp(-D[:, None] / beta)).min(1),
    )
    assert np.all(m <= direct) and np.all(m >= 0.97 * direct)
    big = D >= K * np.sqrt(np.e)
    assert np.all(m[big] >= 0.25 * np.sqrt(K / D[big]))
    L = bd.exploration_floor_regret(K, 0.4, 1000)
    assert L.shape == (1000,) and np.all(np.diff(L) > 0)
    with pytest.raises(ValueError, match="D"):
        bd.exploration_floor(K, -1.0)


def test_solved_rows_stay_put_while_others_iterate():
    """Regression: a row already at its root must not be moved by the bracket update while
    other rows of the batch still iterate (it used to be bisected off the root)."""
    g = np.random.default_rng(8)
    S = g.normal(size=(6, 5)) * 10
    beta = np.full(6, 3.0)
    _, lam_exact = bd._hybrid_solve(S, beta, tol=1e-13, max_iter=200)
    lam0 = lam_exact.copy()
    lam0[3:] = np.sort(S, axis=1)[3:, -2]  # far from the root: these rows need iterations
    p, _ = bd._hybrid_solve(S, beta, lam0, tol=1e-10, max_iter=8)
    np.testing.assert_allclose(p, bd.ftrl_weights(S, beta, "hybrid"), atol=1e-9)
