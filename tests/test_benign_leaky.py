"""Unit tests for lib.papers.benign_leaky (chapter 10)."""

from math import erf

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, stats

from lib.papers import benign_leaky as bl


def gen(seed=0):
    return np.random.default_rng(seed)


# --------------------------------------------------------------------------- network
def test_gradient_matches_finite_differences():
    g = gen(1)
    X, y, _ = bl.sample_mixture(6, 5, 1.0, g)
    W = g.standard_normal((4, 5))
    loss, G = bl.loss_and_grad(W, X, y, 0.2)

    def f(w):
        return bl.loss_and_grad(w.reshape(4, 5), X, y, 0.2)[0]

    # central differences, away from kinks: the pre-activations are O(1) here
    assert np.min(np.abs(X @ W.T)) > 1e-3
    eps = 1e-6
    num = np.array(
        [(f(W.ravel() + eps * e) - f(W.ravel() - eps * e)) / (2 * eps) for e in np.eye(W.size)]
    ).reshape(4, 5)
    assert np.allclose(G, num, rtol=1e-6, atol=1e-9)
    assert loss == pytest.approx(np.mean(np.exp(-y * bl.forward(W, X, 0.2))))


@settings(max_examples=25, deadline=None)
@given(c=st.floats(0.01, 100.0), seed=st.integers(0, 1000))
def test_forward_is_positively_homogeneous(c, seed):
    g = gen(seed)
    X, W = g.standard_normal((5, 3)), g.standard_normal((6, 3))
    assert np.allclose(bl.forward(c * W, X, 0.3), c * bl.forward(W, X, 0.3))


def test_second_layer_and_leaky():
    a = bl.second_layer(4)
    assert np.allclose(a, np.array([1, 1, -1, -1]) / 2)
    assert np.allclose(bl.leaky(np.array([-2.0, 0.0, 3.0]), 0.1), [-0.2, 0.0, 3.0])
    assert np.allclose(bl.leaky_grad(np.array([-2.0, 0.0, 3.0]), 0.1), [0.1, 0.1, 1.0])


def test_activation_after_one_step_on_positively_correlated_data():
    g = gen(2)
    X, y, _ = bl.sample_mixture(10, 20, 8.0, g)
    G = (y[:, None] * X) @ (y[:, None] * X).T
    assert G.min() > 0
    alpha = 2 / (1.01 * np.max(np.sum(X**2, 1)))
    run = bl.train_gd(X, y, 6, 0.1, alpha, 50, 1e-9, g, [0, 1, 50])
    assert run["first_all_active"] == 1 and run["stayed_active"]
    # activation margins are non-decreasing (prop-10-activation)
    m1 = bl.activation_margins(run["W_ckpt"][1], X, y)
    m2 = bl.activation_margins(run["W_ckpt"][2], X, y)
    assert np.all(m2 >= m1)
    assert run["loss"][2] < run["loss"][1]


# --------------------------------------------------------------------------- limit directions
def test_limit_weights_margins_and_kkt():
    g = gen(3)
    X, y, _ = bl.sample_mixture(12, 30, 7.0, g)
    m, gamma = 8, 0.2
    W = bl.limit_weights(X, y, gamma, m)
    margins = y * bl.forward(W, X, gamma)
    lam, normal = bl.limit_direction(X, y, gamma)
    assert np.all(lam >= 0)
    assert margins.min() == pytest.approx(1.0, abs=1e-8)
    # complementary slackness: lam_i > 0 only on the margin
    assert np.all(np.abs(margins[lam > 1e-10] - 1) < 1e-8)
    # equal rows per sign group, and the decision normal is proportional to sum lam y x
    a = bl.second_layer(m)
    assert np.allclose(W[a > 0], W[a > 0][0]) and np.allclose(W[a < 0], W[a < 0][0])
    u_minus_v = W[a > 0].sum(0) - W[a < 0].sum(0)
    assert bl.direction_cosine(u_minus_v, normal) == pytest.approx(1.0, abs=1e-12)


def test_limit_weights_is_min_norm_over_random_feasible_directions():
    g = gen(4)
    X, y, _ = bl.sample_mixture(6, 10, 6.0, g)
    gamma, m = 0.3, 4
    W = bl.limit_weights(X, y, gamma, m)
    best = np.linalg.norm(W)
    # any W' inside the activated cone with margin >= 1 has a larger norm
    feasible = 0
    for _ in range(200):
        Wp = W + 0.05 * np.linalg.norm(W) * g.standard_normal(W.shape) / np.sqrt(W.size)
        if np.all(bl.activation_margins(Wp, X, y) > 0):
            scale = np.min(y * bl.forward(Wp, X, gamma))
            if scale > 0:
                feasible += 1
                assert np.linalg.norm(Wp / scale) >= best - 1e-9
    assert feasible >= 100  # the check must actually run


def test_gamma_to_one_gives_linear_svm():
    g = gen(5)
    X, y, _ = bl.sample_mixture(10, 15, 3.0, g)
    _, n1 = bl.limit_direction(X, y, 1 - 1e-7)
    assert bl.direction_cosine(n1, bl.linear_svm(X, y)) == pytest.approx(1.0, abs=1e-8)


def test_linear_svm_brute_force_2d():
    X = np.array([[2.0, 1.0], [-0.5, -2.0]])
    y = np.array([1.0, -1.0])
    w = bl.linear_svm(X, y)
    assert np.all(y * (X @ w) >= 1 - 1e-9)
    # brute force over directions: 1/||w|| is the largest margin of a unit direction
    ang = np.linspace(0, 2 * np.pi, 200001)
    U = np.stack([np.cos(ang), np.sin(ang)], 1)
    marg = np.min(y[None, :] * (U @ X.T), axis=1)
    assert 1 / np.linalg.norm(w) == pytest.approx(marg.max(), rel=1e-5)


def test_linear_svm_matches_primal_solver():
    g = gen(10)
    X, y, _ = bl.sample_mixture(6, 9, 1.0, g)
    cons = [{"type": "ineq", "fun": lambda w, i=i: y[i] * (X[i] @ w) - 1} for i in range(6)]
    sol = optimize.minimize(
        lambda w: w @ w, np.ones(9), constraints=cons, method="SLSQP", options={"ftol": 1e-14}
    )
    assert np.allclose(bl.linear_svm(X, y), sol.x, atol=1e-5)


def test_min_norm_interpolator_interpolates():
    g = gen(6)
    X, y, _ = bl.sample_mixture(8, 20, 1.0, g)
    w = bl.min_norm_interpolator(X, y)
    assert np.allclose(X @ w, y)
    assert np.allclose(w, np.linalg.pinv(X) @ y)


def test_snr_formula_limits():
    # class-mean rule: weak regime n||mu||^4/p, strong regime -> ||mu||
    assert bl.snr_class_mean(50, 10**9, 2.0) == pytest.approx(4 * np.sqrt(50 / 1e9), rel=1e-6)
    assert bl.snr_class_mean(50, 10, 1e4) == pytest.approx(1e4, rel=1e-3)
    assert np.allclose(bl.snr_class_mean(4, 16, [0.0, 2.0]), [0.0, np.sqrt(4 * 16 / 32)])
    # min-norm interpolator: the weak regime agrees with the class-mean rule ...
    assert bl.snr_min_norm(50, 10**9, 2.0) == pytest.approx(4 * np.sqrt(50 / 1e9), rel=1e-5)
    # ... but in the strong regime the deficit grows like n||mu||^2/(q + n), q = p - n - 2
    n, p, mu = 20, 400, 1e3
    q = p - n - 2
    deficit = mu**2 - bl.snr_min_norm(n, p, mu) ** 2
    assert deficit == pytest.approx(n * mu**2 / (q + n) + q / n, rel=1e-3)
    # at the regime boundary n||mu||^2 = p (p >> n) both give SNR^2 ~ ||mu||^2 / 2
    for f in (bl.snr_class_mean, bl.snr_min_norm):
        assert f(10, 10**6, np.sqrt(1e5)) ** 2 == pytest.approx(1e5 / 2, rel=1e-3)
    # broadcasting over p and mu
    P, MU = np.array([100, 400]), np.array([1.0, 3.0])
    assert np.allclose(
        bl.snr_min_norm(10, P, MU), [bl.snr_min_norm(10, 100, 1.0), bl.snr_min_norm(10, 400, 3.0)]
    )


def test_snr_min_norm_matches_simulation():
    # median SNR of the min-norm interpolator over 300 draws within 4 SDs of the median
    g = gen(21)
    n, p, mu = 20, 400, 3.0
    s = np.array(
        [
            bl.snr(
                bl.min_norm_interpolator(*bl.sample_mixture(n, p, mu, g)[:2]), bl.mean_vector(p, mu)
            )
            for _ in range(300)
        ]
    )
    sd_median = 1.2533 * s.std(ddof=1) / np.sqrt(len(s))
    assert abs(np.median(s) - bl.snr_min_norm(n, p, mu)) < 4 * sd_median
    # and the class-mean formula is rejected by the same test
    assert abs(np.median(s) - bl.snr_class_mean(n, p, mu)) > 4 * sd_median


def test_mean_vector_and_log_error_ratio():
    mu = bl.mean_vector(4, 3.0)
    assert np.allclose(mu, [3.0, 0, 0, 0])
    w = np.array([1.0, 0.5, 0.0, 0.0])
    expected = np.log(bl.gaussian_error(w, mu) / erfc_half(3.0))
    assert bl.log_error_ratio(w, mu) == pytest.approx(expected, rel=1e-9)
    assert bl.log_error_ratio(mu, mu) == pytest.approx(0.0, abs=1e-12)  # the Bayes rule
    # far in the tail, where both errors underflow a ratio, the log-ratio stays finite
    far = bl.mean_vector(4, 40.0)
    assert np.isfinite(bl.log_error_ratio(w, far)) and bl.log_error_ratio(w, far) > 100


def erfc_half(m):
    """Phi(-m) from math.erf, independent of scipy."""
    return 0.5 * (1 + erf(-m / np.sqrt(2)))


def test_gaussian_error_matches_monte_carlo():
    g = gen(7)
    w, mu = g.standard_normal(6), np.array([1.5, 0, 0, 0, 0, 0])
    X, y, _ = bl.sample_mixture(200000, 6, 1.5, g)
    mc = np.mean(y * (X @ w) < 0)
    assert mc == pytest.approx(bl.gaussian_error(w, mu), abs=4 * np.sqrt(0.25 / 200000))


def test_label_flip_identity():
    # with labels flipped independently of x, noisy error = eta + (1 - 2 eta) clean error
    g = gen(8)
    w, eta = np.array([1.0, 0.5, -0.3]), 0.2
    X, y, y_obs = bl.sample_mixture(400000, 3, 1.0, g, eta=eta)
    clean = np.mean(y * (X @ w) < 0)
    noisy = np.mean(y_obs * (X @ w) < 0)
    assert noisy == pytest.approx(eta + (1 - 2 * eta) * clean, abs=0.004)


def test_batched_sample_mixture():
    X, y, y_obs = bl.sample_mixture(6, 40, 2.0, gen(21), size=500)
    assert X.shape == (500, 6, 40) and y.shape == y_obs.shape == (500, 6)
    assert set(np.unique(y)) == {-1.0, 1.0} and np.array_equal(y, y_obs)
    # x = y mu + z with mu = 2 e_1: y x_1 has mean 2 and variance 1, the other coordinates N(0, 1)
    assert (y * X[..., 0]).mean() == pytest.approx(2.0, abs=4 / np.sqrt(3000))
    assert X[..., 1:].var() == pytest.approx(1.0, abs=0.01)
    # the sets are independent: the label vectors of different sets are uncorrelated
    assert abs(np.mean(y[:-1] * y[1:])) < 4 / np.sqrt(2994)


def test_leaky_grad():
    t = np.array([-2.0, 0.0, 3.0])
    assert np.array_equal(bl.leaky_grad(t, 0.2), [0.2, 0.2, 1.0])
    assert np.array_equal(bl.leaky(t, 0.2), [-0.4, 0.0, 3.0])


def test_strong_limit_has_one_support_vector_per_class():
    # prop-10-plateau: as ||mu|| grows at fixed (n, p), W* rests on one support vector per
    # class, its normal is parallel to x_a - x_b, and its SNR deficit ||mu||^2 - SNR^2 tends to
    # ||z_a' - z_b'||^2 / 4, with z' the noise orthogonal to mu
    g = gen(22)
    mu = 1e5
    X, y, _ = bl.sample_mixture(10, 30, mu, g)
    lam, normal = bl.limit_direction(X, y, 0.1)
    sv = np.flatnonzero(lam > 1e-9 * lam.max())
    assert len(sv) == 2 and y[sv].sum() == 0
    a, b = (sv[0], sv[1]) if y[sv[0]] > 0 else (sv[1], sv[0])
    assert bl.direction_cosine(normal, X[a] - X[b]) == pytest.approx(1.0, abs=1e-10)
    # the support vectors are the points with the smallest y_i <x_i, e_1> in each class
    margin = y * X[:, 0]
    assert a == np.flatnonzero(y > 0)[np.argmin(margin[y > 0])]
    assert b == np.flatnonzero(y < 0)[np.argmin(margin[y < 0])]
    deficit = mu**2 - bl.snr(normal, bl.mean_vector(30, mu)) ** 2
    assert deficit == pytest.approx(np.sum((X[a, 1:] - X[b, 1:]) ** 2) / 4, rel=1e-3)


def test_student_t_noise_has_unit_variance():
    X, _, _ = bl.sample_mixture(20000, 5, 0.0, gen(9), noise="student_t", df=5)
    assert X.var() == pytest.approx(1.0, abs=0.1)


def test_same_sign_neurons_differ_after_first_step():
    # phi'(0) takes the random sign of the tiny initialisation, so neurons of one sign get
    # different first updates (of order alpha) and are not identical afterwards
    g = gen(11)
    X, y, _ = bl.sample_mixture(20, 50, 8.0, g)
    run = bl.train_gd(X, y, 10, 0.1, bl.default_step(X, 0.1), 200, 1e-8, g)
    Wp = run["W"][bl.second_layer(10) > 0]
    assert np.linalg.norm(Wp - Wp.mean(0)) / np.linalg.norm(Wp) > 0.01


def _direct_gd(X, y, m, gamma, alpha, steps, W0, normalized=False):
    """GD written directly from loss_and_grad, the reference for the kernel form."""
    W = W0.copy()
    for _ in range(steps):
        loss, G = bl.loss_and_grad(W, X, y, gamma)
        W = W - alpha * (G / loss if normalized else G)
    return W


@pytest.mark.parametrize("normalized", [False, True])
def test_kernel_form_gd_equals_direct_gd(normalized):
    # a large random start, so that activation patterns change along the way
    g = gen(14)
    X, y, _ = bl.sample_mixture(7, 9, 1.0, g)
    W0 = 0.5 * g.standard_normal((4, 9))
    run = bl.train_gd(X, y, 4, 0.2, 0.05, 30, None, None, [0, 10, 30], W0=W0, normalized=normalized)
    for t, W in zip([0, 10, 30], run["W_ckpt"]):
        assert np.allclose(
            W, _direct_gd(X, y, 4, 0.2, 0.05, t, W0, normalized), rtol=1e-10, atol=1e-12
        )
    assert np.allclose(run["W"], run["W_ckpt"][-1])
    losses = [bl.loss_and_grad(W, X, y, 0.2)[0] for W in run["W_ckpt"]]
    assert np.allclose(run["loss"], losses) and np.allclose(run["log_loss"], np.log(losses))


def test_batched_gd_equals_one_instance_at_a_time():
    g = gen(15)
    sets = [bl.sample_mixture(6, 12, 4.0, g)[:2] for _ in range(3)]
    X, y = np.array([s[0] for s in sets]), np.array([s[1] for s in sets])
    W0 = 1e-3 * g.standard_normal((3, 4, 12))
    alpha = np.array([bl.default_step(x, 0.1) for x in X])
    run = bl.train_gd(X, y, 4, 0.1, alpha, 40, None, None, [1, 40], W0=W0)
    assert run["W"].shape == (3, 4, 12) and run["W_ckpt"].shape == (3, 2, 4, 12)
    assert run["first_all_active"].shape == (3,) and run["stayed_active"].dtype == bool
    for b in range(3):
        one = bl.train_gd(X[b], y[b], 4, 0.1, alpha[b], 40, None, None, [1, 40], W0=W0[b])
        assert np.allclose(one["W_ckpt"], run["W_ckpt"][b], rtol=1e-12, atol=1e-15)
        assert one["first_all_active"] == run["first_all_active"][b]
        assert one["stayed_active"] == run["stayed_active"][b]
    # the random initialisation draws W0 for the whole batch at once
    r1 = bl.train_gd(X, y, 4, 0.1, alpha, 2, 1e-8, gen(3))
    r2 = bl.train_gd(X, y, 4, 0.1, alpha, 2, 1e-8, gen(3))
    assert np.array_equal(r1["W"], r2["W"])


def test_normalised_gd_reaches_the_limit_and_identifies_rho():
    # positively correlated data: one constant step activates everything, normalised steps
    # (which keep the pattern frozen) converge in direction to W* of prop-10-limit-qp
    g = gen(16)
    X, y, _ = bl.sample_mixture(10, 30, 8.0, g)
    gamma, m = 0.2, 6
    alpha = bl.default_step(X, gamma)
    W1 = bl.train_gd(X, y, m, gamma, alpha, 1, 1e-8, g)["W"]
    run = bl.train_gd(
        X, y, m, gamma, 16 * alpha, 2048, None, None, [1024, 2048], W0=W1, normalized=True
    )
    assert run["stayed_active"] and run["first_all_active"] == 0
    W_star = bl.limit_weights(X, y, gamma, m)
    d = [1 - bl.direction_cosine(W, W_star) for W in run["W_ckpt"]]
    assert d[1] < 1e-5 and d[1] / d[0] < 0.5
    v = bl.decision_normal(run["W"])
    gap = {
        r: 1 - bl.direction_cosine(v, bl.limit_direction(X, y, gamma, rho=r)[1])
        for r in (0.02, bl.discount(gamma), 1.0)
    }
    assert gap[bl.discount(gamma)] < min(gap[0.02], gap[1.0]) / 10


def test_discount_and_rho_argument():
    assert bl.discount(0.1) == pytest.approx(0.2 / 1.01)
    assert bl.discount(0.5) == pytest.approx(0.8)
    g = gen(17)
    X, y, _ = bl.sample_mixture(8, 14, 3.0, g)
    lam, normal = bl.limit_direction(X, y, 0.3)
    lam2, normal2 = bl.limit_direction(X, y, 0.3, rho=bl.discount(0.3))
    assert np.allclose(lam, lam2) and np.allclose(normal, normal2)
    _, n_svm = bl.limit_direction(X, y, 0.3, rho=1.0)
    assert bl.direction_cosine(n_svm, bl.linear_svm(X, y)) == pytest.approx(1.0, abs=1e-10)


def test_network_error_is_matches_linear_rule_for_equal_neurons():
    # with equal rows per sign the network is the linear rule sign<u - v, x>: exact error known
    g = gen(12)
    X, y, _ = bl.sample_mixture(10, 30, 6.0, g)
    W = bl.limit_weights(X, y, 0.2, 6)
    mu = 4.0 * np.eye(30)[0]
    est, se = bl.network_error_is(W, 0.2, mu, 20000, g)
    exact = bl.gaussian_error(bl.decision_normal(W), mu)
    assert exact < 1e-3  # far in the tail, where plain Monte Carlo would see nothing
    assert abs(est - exact) < 4 * se and se < 0.05 * exact


def test_network_log_error_is_resolves_errors_below_double_precision():
    # equal rows per sign: the network is its linear rule, whose log error is exact
    g = gen(21)
    X, y, _ = bl.sample_mixture(10, 30, 80.0, g)
    W = bl.limit_weights(X, y, 0.2, 6)
    mu = 60.0 * np.eye(30)[0]
    log_err, rel_se = bl.network_log_error_is(W, 0.2, mu, 20000, g)
    exact = stats.norm.logcdf(-bl.snr(bl.decision_normal(W), mu))
    assert exact < -800  # the error itself underflows a double
    assert bl.network_error_is(W, 0.2, mu, 100, g)[0] == 0.0
    assert abs(log_err - exact) < 4 * rel_se and rel_se < 0.05
    # where it does not underflow, the two estimators agree draw for draw
    mu_small = 3.0 * np.eye(30)[0]
    est, se = bl.network_error_is(W, 0.2, mu_small, 5000, gen(5))
    log_est, rel = bl.network_log_error_is(W, 0.2, mu_small, 5000, gen(5))
    assert np.log(est) == pytest.approx(log_est, rel=1e-12) and se == pytest.approx(est * rel)


def test_network_error_is_matches_plain_monte_carlo_for_unequal_neurons():
    g = gen(13)
    W = g.standard_normal((4, 6))  # unequal rows: the network is not a linear rule
    mu = 1.0 * np.eye(6)[0]
    est, se = bl.network_error_is(W, 0.3, mu, 40000, g)
    mc = bl.network_error(W, 0.3, 1.0, 400000, g)
    assert abs(est - mc) < 4 * np.sqrt(se**2 + mc * (1 - mc) / 400000)
    # assuming equal neurons (the linear surrogate sign<u - v, x>) would be wrong here
    mc2, disagree = bl.network_error(W, 0.3, 1.0, 100000, g, disagreement=True)
    assert disagree > 0.02 and abs(mc2 - mc) < 4 * np.sqrt(2 * mc * (1 - mc) / 100000)
    # with equal neurons of each sign the network is its linear rule: no disagreement
    W_eq = np.repeat(W[[0, 2]], 2, axis=0)
    assert bl.network_error(W_eq, 0.3, 1.0, 20000, g, disagreement=True)[1] == 0.0


def test_snr_and_default_step():
    w, mu = np.array([3.0, 4.0]), np.array([2.0, 0.0])
    assert bl.snr(w, mu) == pytest.approx(6 / 5)
    assert bl.gaussian_error(w, mu) == pytest.approx(0.5 * (1 + erf(-1.2 / np.sqrt(2))))
    X = np.array([[1.0, 0.0], [0.0, 2.0]])
    # 1 / max ||Psi_i||^2 with ||Psi_i||^2 = (1 + gamma^2)/2 ||x_i||^2
    assert bl.default_step(X, 0.5) == pytest.approx(1 / (1.25 / 2 * 4))


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "call, exc, name",
    [
        (lambda: bl.sample_mixture(5, 3, 1.0, gen(), eta=0.5), ValueError, "eta"),
        (lambda: bl.sample_mixture(5, 3, -1.0, gen()), ValueError, "mu_norm"),
        (lambda: bl.sample_mixture(5, 3, 1.0, 0), TypeError, "rng"),
        (lambda: bl.sample_mixture(5, 3, 1.0, gen(), noise="cauchy"), ValueError, "noise"),
        (lambda: bl.sample_mixture(5, 3, 1.0, gen(), size=0), ValueError, "size"),
        (
            lambda: bl.network_error(np.ones((2, 3)), 0.1, 1.0, 10, gen(), disagreement=1),
            TypeError,
            "disagreement",
        ),
        (lambda: bl.sample_mixture(5, 3, 1.0, gen(), noise="student_t", df=2), ValueError, "df"),
        (lambda: bl.second_layer(3), ValueError, "m"),
        (lambda: bl.leaky(1.0, 1.0), ValueError, "gamma"),
        (lambda: bl.leaky(1.0, 0.0), ValueError, "gamma"),
        (lambda: bl.forward(np.ones((2, 4)), np.ones((3, 5)), 0.1), ValueError, "W"),
        (
            lambda: bl.loss_and_grad(np.ones((2, 2)), np.ones((3, 2)), [1, 0, 1], 0.1),
            ValueError,
            "y",
        ),
        (
            lambda: bl.train_gd(np.ones((2, 2)), [1, -1], 2, 0.1, 0.0, 1, 0.1, gen()),
            ValueError,
            "alpha",
        ),
        (
            lambda: bl.train_gd(np.ones((2, 2)), [1, -1], 2, 0.1, 0.1, 1, 0.1, gen(), [5]),
            ValueError,
            "checkpoints",
        ),
        (lambda: bl.min_norm_interpolator(np.ones((4, 2)), [1, -1, 1, -1]), ValueError, "X"),
        (lambda: bl.snr_min_norm(0, 10, 1.0), ValueError, "n"),
        (lambda: bl.snr_min_norm(5, 7, 1.0), ValueError, "p"),
        (lambda: bl.snr_class_mean(5, 0, 1.0), ValueError, "p"),
        (lambda: bl.snr_class_mean(5, 10.5, 1.0), ValueError, "p"),
        (lambda: bl.snr_class_mean(5, 10, -1.0), ValueError, "mu_norm"),
        (lambda: bl.mean_vector(0, 1.0), ValueError, "p"),
        (lambda: bl.limit_direction(np.eye(2), [1, -1], 0.1, rho=0.0), ValueError, "rho"),
        (lambda: bl.limit_direction(np.eye(2), [1, -1], 0.1, rho=1.5), ValueError, "rho"),
        (lambda: bl.log_error_ratio(np.zeros(2), np.ones(2)), ValueError, "w"),
        (
            lambda: bl.train_gd(np.ones(3), [1, -1, 1], 2, 0.1, 0.1, 1, 0.1, gen()),
            ValueError,
            "X",
        ),
        (
            lambda: bl.train_gd(np.ones((2, 2)), [1, -1], 2, 0.1, 0.1, 1, 0.1, None),
            TypeError,
            "rng",
        ),
        (
            lambda: bl.train_gd(
                np.ones((2, 2)), [1, -1], 2, 0.1, 0.1, 1, None, None, W0=np.ones(2)
            ),
            ValueError,
            "W0",
        ),
        (
            lambda: bl.train_gd(np.eye(2), [1, -1], 4, 0.1, 0.1, 1, None, None, W0=np.ones((2, 2))),
            ValueError,
            "W0",
        ),
        (
            lambda: bl.train_gd(np.eye(2), [1, -1], 2, 0.1, [0.1, 0.2], 1, 0.1, gen()),
            ValueError,
            "alpha",
        ),
        (
            lambda: bl.train_gd(np.ones((2, 2, 2)), np.ones((2, 3)), 2, 0.1, 0.1, 1, 0.1, gen()),
            ValueError,
            "y",
        ),
        (
            lambda: bl.train_gd(np.eye(2), [1, -1], 2, 0.1, 0.1, 1, 0.1, gen(), normalized=1),
            TypeError,
            "normalized",
        ),
        (lambda: bl.linear_svm(np.ones((4, 2)), [1, -1, 1, -1]), ValueError, "X"),
        (lambda: bl.direction_cosine(np.ones(2), np.ones(3)), ValueError, "W1"),
        (lambda: bl.snr(np.zeros(2), np.ones(2)), ValueError, "w"),
        (lambda: bl.snr(np.ones(2), np.ones(3)), ValueError, "mu"),
        (
            lambda: bl.network_error_is(np.ones((2, 3)), 0.1, np.ones(3), 0, gen()),
            ValueError,
            "n_samples",
        ),
        (
            lambda: bl.network_log_error_is(np.ones((2, 3)), 0.1, np.ones(4), 10, gen()),
            ValueError,
            "mu",
        ),
    ],
)
def test_bad_input(call, exc, name):
    with pytest.raises(exc, match=name):
        call()
