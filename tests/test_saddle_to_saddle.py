"""Unit tests for lib.papers.saddle_to_saddle (chapter 09)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import solve_ivp

from lib.papers import saddle_to_saddle as ss


def gen(seed=0):
    return np.random.default_rng(seed)


def _data(kind, seed=0, n=7, d=3, m=2, H=4):
    g = gen(seed)
    X, Y = g.standard_normal((n, d)), g.standard_normal((n, m))
    W1, W2 = g.standard_normal((H, d)), g.standard_normal((m, H))
    if kind == "relu":  # finite differences need pre-activations away from the kink
        assert np.abs(X @ W1.T).min() > 1e-3
    return X, Y, W1, W2


@pytest.mark.parametrize("kind", ss.KINDS)
def test_gradients_match_finite_differences(kind):
    X, Y, W1, W2 = _data(kind)
    _, g1, g2 = ss.loss_and_grad(kind, W1, W2, X, Y)
    eps = 1e-6
    for W, g, which in ((W1, g1, 0), (W2, g2, 1)):
        num = np.zeros_like(W)
        for idx in np.ndindex(W.shape):
            Wp, Wm = W.copy(), W.copy()
            Wp[idx] += eps
            Wm[idx] -= eps
            args_p = (Wp, W2) if which == 0 else (W1, Wp)
            args_m = (Wm, W2) if which == 0 else (W1, Wm)
            num[idx] = (
                ss.loss_and_grad(kind, *args_p, X, Y)[0] - ss.loss_and_grad(kind, *args_m, X, Y)[0]
            ) / (2 * eps)
        assert np.max(np.abs(num - g)) <= 1e-6 * max(1.0, np.max(np.abs(g)))


def test_batched_loss_matches_loop():
    X, Y, _, _ = _data("tanh")
    g = gen(3)
    W1, W2 = g.standard_normal((2, 3, 4, 3)), g.standard_normal((2, 3, 2, 4))
    L, g1, g2 = ss.loss_and_grad("tanh", W1, W2, X, Y)
    for i in range(2):
        for j in range(3):
            Lij, a, b = ss.loss_and_grad("tanh", W1[i, j], W2[i, j], X, Y)
            assert L[i, j] == pytest.approx(Lij)
            np.testing.assert_allclose(g1[i, j], a)
            np.testing.assert_allclose(g2[i, j], b)


def test_linear_population_equals_whitened_empirical():
    g = gen(1)
    d, m, H = 4, 3, 5
    S = g.standard_normal((m, d))
    X = np.sqrt(d) * np.eye(d)
    Y = X @ S.T
    W1, W2 = g.standard_normal((H, d)), g.standard_normal((m, H))
    Lp, a1, a2 = ss.linear_population_loss_grad(S, W1, W2)
    Le, b1, b2 = ss.loss_and_grad("linear", W1, W2, X, Y)
    assert Lp == pytest.approx(Le)
    np.testing.assert_allclose(a1, b1, atol=1e-12)
    np.testing.assert_allclose(a2, b2, atol=1e-12)


def test_quadratic_population_matches_monte_carlo_and_fd():
    g = gen(2)
    d, H = 3, 2
    A = np.diag([2.0, 1.0, 0.0])
    W1, W2 = 0.5 * g.standard_normal((H, d)), 0.5 * g.standard_normal((1, H))
    L, g1, g2 = ss.quadratic_population_loss_grad(A, W1, W2)
    X = g.standard_normal((60_000, d))
    Y = np.einsum("nd,de,ne->n", X, A, X)[:, None]
    Le, e1, e2 = ss.loss_and_grad("quadratic", W1, W2, X, Y)
    assert Le == pytest.approx(L, rel=0.06)
    np.testing.assert_allclose(e1, g1, atol=0.15 * np.abs(g1).max())
    Hfd = ss.fd_hessian(lambda a, b: ss.quadratic_population_loss_grad(A, a, b), W1, W2)
    assert np.allclose(Hfd, Hfd.T)


def test_fd_hessian_closed_form_at_zero_embedding():
    """Linear net at its width-1 optimum plus a zero unit: lambda_min = -s_2 exactly."""
    s = np.array([3.0, 2.0, 1.0])
    S = np.diag(s)
    W1, W2 = np.sqrt(3.0) * np.eye(3)[:1], np.sqrt(3.0) * np.eye(3)[:, :1]
    V1, V2 = ss.embed(W1, W2, "zero", "linear")
    Hm = ss.fd_hessian(lambda a, b: ss.linear_population_loss_grad(S, a, b), V1, V2)
    assert np.linalg.eigvalsh(Hm)[0] == pytest.approx(-2.0, abs=1e-8)


@pytest.mark.parametrize(
    "mode,kind",
    [("duplicate", "tanh"), ("zero", "tanh"), ("ray_split", "relu"), ("linear", "linear")],
)
def test_embed_keeps_function(mode, kind):
    X, _, W1, W2 = _data(kind)
    G = np.eye(5) + 0.3 * gen(5).standard_normal((5, 5))
    V1, V2 = ss.embed(W1, W2, mode, kind, j=1, lam=0.3, G=G)
    assert V1.shape == (5, 3) and V2.shape == (2, 5)
    np.testing.assert_allclose(ss.forward(kind, V1, V2, X), ss.forward(kind, W1, W2, X), atol=1e-12)


def test_embed_bad_inputs():
    _, _, W1, W2 = _data("relu")
    with pytest.raises(ValueError, match="lam"):
        ss.embed(W1, W2, "ray_split", "relu", lam=1.5)
    with pytest.raises(ValueError, match="homogeneous"):
        ss.embed(W1, W2, "ray_split", "tanh")
    with pytest.raises(ValueError, match="linear"):
        ss.embed(W1, W2, "linear", "relu", G=np.eye(5))
    with pytest.raises(ValueError, match="mode"):
        ss.embed(W1, W2, "split", "relu")
    with pytest.raises(ValueError, match="j"):
        ss.embed(W1, W2, "duplicate", "relu", j=9)
    with pytest.raises(ValueError, match="kind"):
        ss.forward("sigmoid", W1, W2, np.zeros((2, 3)))
    with pytest.raises(TypeError):
        ss.forward(3, W1, W2, np.zeros((2, 3)))
    with pytest.raises(ValueError, match="W1"):
        ss.forward("relu", W1[:3], W2, np.zeros((2, 3)))
    with pytest.raises(ValueError, match="sigma0"):
        ss.small_init(gen(), (2, 2), (2, 2), 0.0)
    with pytest.raises(ValueError, match="lr"):
        ss.train_gd("relu", W1, W2, np.zeros((2, 3)), np.zeros((2, 2)), -1.0, 5)


def test_saxe_logistic_closed_form_matches_ode():
    """eq-09-saxe: c(t) = s / (1 + (s/c0 - 1) e^{-2st}) solves c' = 2c(s - c)."""
    s, u0 = 2.5, 1e-4
    t = np.linspace(0, 6, 50)
    sol = solve_ivp(lambda _, u: 2 * u * (s - u), (0, 6), [u0], t_eval=t, rtol=1e-11, atol=1e-14)
    closed = s / (1.0 + (s / u0 - 1.0) * np.exp(-2.0 * s * t))
    np.testing.assert_allclose(closed, sol.y[0], rtol=1e-6)


def test_cubic_escape_time_matches_ode():
    q, a0 = 3.0, 0.01
    T = ss.cubic_escape_time(q, a0)
    sol = solve_ivp(
        lambda _, a: 2 * q * a**2, (0, 2 * T), [a0], rtol=1e-10, events=lambda _, a: a[0] - 1e6
    )
    assert sol.t_events[0][0] == pytest.approx(T, rel=1e-4)


def test_crossing_times():
    t = np.linspace(0, 10, 101)
    y = np.stack([t, 10 - t, np.zeros_like(t)])
    out = ss.crossing_times(t, y, [2.5, 20.0, 1.0])
    assert out[0] == pytest.approx(2.5) and np.isnan(out[1]) and np.isnan(out[2])
    assert ss.crossing_times(t, 10 - t, 3.0, direction="down") == pytest.approx(7.0)


def test_effective_rank_and_active_units():
    M = np.diag([3.0, 1e-3, 0.5, 0.0])
    assert ss.effective_rank(M, 0.1) == 2
    stack = np.stack([M, np.eye(4), np.zeros((4, 4))])
    np.testing.assert_array_equal(ss.effective_rank(stack, 0.1), [2, 4, 0])
    assert ss.count_active_units(np.array([1.0, 1e-4, 0.5]), 1e-2) == 2


def test_participation_ratio():
    assert ss.participation_ratio(np.array([2.0, 0.0, 0.0])) == pytest.approx(1.0)
    assert ss.participation_ratio(np.ones((2, 5))) == pytest.approx(np.full(2, 5.0))
    assert ss.participation_ratio(np.array([2.0, 1.0])) == pytest.approx(1.8)
    with pytest.raises(ValueError, match="sizes"):
        ss.participation_ratio(np.array([-1.0, 1.0]))


def test_kink_moments_hand_built():
    w = np.array([1.0, 2.0, -1.0, 1.0, 1.0])
    b = np.array([-0.4, -0.8, -0.2, -5.0, 0.1])
    a = np.array([1.0, 0.5, 1.0, 1.0, 1e-6])
    # units 0 and 1 share the kink 0.4 (one ray, slope changes 1 and 1), unit 2 has its kink at
    # -0.2 (slope change 1), unit 3 lies outside, unit 4 (kink -0.1) is negligible
    m, mean, sd = ss.kink_moments(w, b, a)
    assert m == pytest.approx(3.0 + 1e-6)
    assert mean == pytest.approx((2 * 0.4 - 0.2 - 1e-7) / (3 + 1e-6))
    want_sd = np.sqrt((2 * (0.4 - mean) ** 2 + (-0.2 - mean) ** 2 + 1e-6 * (-0.1 - mean) ** 2) / m)
    assert sd == pytest.approx(want_sd)
    # one ray: SD exactly 0 however many units it has
    m1, mean1, sd1 = ss.kink_moments(np.array([1.0, 3.0]), np.array([-0.3, -0.9]), np.ones(2))
    assert (m1, mean1, sd1) == pytest.approx((4.0, 0.3, 0.0))
    # no kink inside: mass 0, mean NaN
    m0, mean0, _ = ss.kink_moments(np.ones(2), np.array([-5.0, 3.0]), np.ones(2))
    assert m0 == 0.0 and np.isnan(mean0)
    # batched over leading axes
    mb, _, _ = ss.kink_moments(np.stack([w, w]), np.stack([b, b]), np.stack([a, 0 * a]))
    np.testing.assert_allclose(mb, [3.0 + 1e-6, 0.0])
    with pytest.raises(ValueError, match="shape"):
        ss.kink_moments(w, b[:3], a)
    with pytest.raises(ValueError, match="x_range"):
        ss.kink_moments(w, b, a, x_range=(1.0, -1.0))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_kink_moments_match_loop(seed):
    g = gen(seed)
    w, b, a = g.standard_normal((3, 4, 6))
    m, mean, sd = ss.kink_moments(w, b, a)
    for r in range(4):
        c = -b[r] / w[r]
        keep = (c > -1) & (c < 1)
        mass = np.abs(a[r] * w[r])[keep]
        assert m[r] == pytest.approx(mass.sum())
        if mass.sum() > 0:
            mu = np.average(c[keep], weights=mass)
            assert mean[r] == pytest.approx(mu)
            assert sd[r] == pytest.approx(np.sqrt(np.average((c[keep] - mu) ** 2, weights=mass)))


# ------------------------------------------------------------------ linear self-attention
def _attn_setup(seed=0, P=60, N=6, D=3, H=4, batch=(2,)):
    g = gen(seed)
    Z, y = ss.icl_tokens(g, P, N, D)
    Q, K, V = (0.5 * g.standard_normal((*batch, H, D + 1)) for _ in range(3))
    return Z, y, Q, K, V


def test_attention_forward_matches_token_loop():
    Z, y, Q, K, V = _attn_setup(batch=())
    N = Z.shape[1] - 1
    want = np.zeros(len(Z))
    for p in range(len(Z)):
        for h in range(Q.shape[0]):
            s = sum((K[h] @ Z[p, n]) * (V[h] @ Z[p, n]) for n in range(N + 1)) / N
            want[p] += (Q[h] @ Z[p, -1]) * s
    np.testing.assert_allclose(ss.attention_forward(Q, K, V, Z), want, rtol=1e-12)


def test_attention_stats_loss_and_gradients():
    """The sufficient-statistics loss equals the token-level loss; gradients match FD."""
    Z, y, Q, K, V = _attn_setup()
    stats = ss.attention_stats(Z, y)
    L, gQ, gK, gV = ss.attention_loss_grad(stats, Q, K, V)
    direct = 0.5 * np.mean((y - ss.attention_forward(Q, K, V, Z)) ** 2, -1)
    np.testing.assert_allclose(L, direct, rtol=1e-10)
    eps = 1e-6
    for which, G in enumerate((gQ, gK, gV)):
        for idx in [(0, 1, 2), (1, 3, 0), (1, 0, 3)]:
            plus = [A.copy() for A in (Q, K, V)]
            minus = [A.copy() for A in (Q, K, V)]
            plus[which][idx] += eps
            minus[which][idx] -= eps
            num = (
                ss.attention_loss_grad(stats, *plus)[0][idx[0]]
                - ss.attention_loss_grad(stats, *minus)[0][idx[0]]
            ) / (2 * eps)
            assert num == pytest.approx(G[idx], rel=1e-5, abs=1e-8)


def test_icl_tokens_structure():
    Z, y = ss.icl_tokens(gen(3), 8, 5, 3)
    assert Z.shape == (8, 6, 4) and y.shape == (8,)
    assert np.all(Z[:, -1, -1] == 0)
    # antithetic halves: same inputs, opposite labels
    np.testing.assert_array_equal(Z[:4, :, :-1], Z[4:, :, :-1])
    np.testing.assert_allclose(Z[:4, :, -1], -Z[4:, :, -1])
    np.testing.assert_allclose(y[:4], -y[4:])
    # labels are one linear map of the inputs per sequence
    w = np.linalg.lstsq(Z[0, :-1, :-1], Z[0, :-1, -1], rcond=None)[0]
    assert y[0] == pytest.approx(Z[0, -1, :-1] @ w)
    with pytest.raises(ValueError, match="P"):
        ss.icl_tokens(gen(), 7, 5, 3)
    with pytest.raises(ValueError, match="eigenvalues"):
        ss.icl_tokens(gen(), 8, 5, 3, eigenvalues=[1.0, -1.0, 1.0])


def test_attention_plateaus_match_monte_carlo():
    """eq-09-attn-loss: the training loss of Gamma = c* P_k approaches L_k for many sequences."""
    D, N = 3, 5
    Z, y = ss.icl_tokens(gen(4), 200_000, N, D)
    c, Lk = ss.attention_plateaus(D, N)
    assert c == pytest.approx(N / (N + 1 + D))
    Sxy = np.einsum("pnd,pn->pd", Z[:, :-1, :-1], Z[:, :-1, -1]) / N
    for k in range(D + 1):
        ell = 0.5 * (y - c * np.sum(Z[:, -1, :k] * Sxy[:, :k], 1)) ** 2
        assert abs(ell.mean() - Lk[k]) < 5 * ell.std() / np.sqrt(ell.size)
    # the same heads in the model: one head per learned axis, balanced at c*^(1/3)
    H, a = 2, c ** (1 / 3)
    Q, K, V = np.zeros((3, H, D + 1))
    for h in range(H):
        Q[h, h] = K[h, h] = V[h, -1] = a
    L = ss.attention_loss_grad(ss.attention_stats(Z, y), Q, K, V)[0]
    ell = 0.5 * (y - c * np.sum(Z[:, -1, :H] * Sxy[:, :H], 1)) ** 2
    assert L == pytest.approx(ell.mean(), rel=1e-10)
    np.testing.assert_allclose(ss.regression_matrix(Q, K, V), c * np.diag([1, 1, 0]), atol=1e-12)
    np.testing.assert_allclose(ss.head_sizes(Q, K, V), [c, c])


def test_attention_init_and_training_shapes():
    Z, y = ss.icl_tokens(gen(5), 40, 6, 3)
    stats = ss.attention_stats(Z, y)
    Q, K, V = ss.attention_init(gen(6), (2, 3), 4, 3, 0.01)
    assert Q.shape == (2, 3, 4, 4)
    assert np.all(K[..., -1] == 0) and np.all(V[..., :-1] == 0)
    h = ss.train_attention(stats, Q, K, V, lr=0.05, steps=20, log_every=10)
    assert h["t"].tolist() == [0.0, 0.5, 1.0]
    assert h["loss"].shape == (2, 3, 3) and h["Q"].shape == (3, 2, 3, 4, 4)
    assert np.all(np.diff(h["loss"], axis=-1) <= 0)
    with pytest.raises(ValueError, match="sigma0"):
        ss.attention_init(gen(), (1,), 2, 3, -1.0)
    with pytest.raises(ValueError, match="Q, K and V"):
        ss.train_attention(stats, Q[..., :3], K, V, lr=0.05, steps=2)
    with pytest.raises(ValueError, match="Z"):
        ss.attention_stats(Z[:, :1], y)


def test_three_point_exponent_exact_laws():
    s = np.array([0.01, 0.02, 0.04])
    assert ss.three_point_exponent(s, 3.0 / s + 7.0) == pytest.approx(-1.0)
    assert ss.three_point_exponent(s, 2.0 * np.log(1 / s) - 1.0) == pytest.approx(0.0, abs=1e-12)
    assert ss.three_point_exponent(s, 0.5 * s**-2 + 1.0) == pytest.approx(-2.0)
    batch = np.stack([3.0 / s, 1.0 / s**2])
    np.testing.assert_allclose(ss.three_point_exponent(s, batch), [-1.0, -2.0])
    with pytest.raises(ValueError, match="geometric"):
        ss.three_point_exponent(np.array([0.01, 0.02, 0.05]), s)
    with pytest.raises(ValueError, match="times"):
        ss.three_point_exponent(s, np.ones(4))


def test_manifold_distance_zero_units():
    W1, W2 = np.zeros((3, 2)), np.zeros((1, 3))
    assert ss.manifold_distance(W1, W2, (0, 1), 2.0) == 0.0
    W1[0] = 1.0
    assert ss.manifold_distance(W1, W2, (0, 1), 2.0) == pytest.approx(1.0)


def test_embed_ignores_lam_where_unused():
    W1, W2 = gen(5).standard_normal((2, 3)), gen(6).standard_normal((1, 2))
    V1, V2 = ss.embed(W1, W2, "zero", "relu", lam=7.0)
    assert V1.shape == (3, 3) and np.all(V1[-1] == 0) and np.all(V2[:, -1] == 0)


@settings(max_examples=25, deadline=None)
@given(c=st.floats(0.2, 5.0), seed=st.integers(0, 10_000))
def test_proportional_relu_units_stay_proportional(c, seed):
    g = gen(seed)
    x = np.linspace(-1, 1, 11)
    X, Y = np.c_[x, np.ones_like(x)], np.abs(x)[:, None]
    W1, W2 = g.standard_normal((3, 2)), g.standard_normal((1, 3))
    W1[1], W2[:, 1] = c * W1[0], c * W2[:, 0]
    h = ss.train_gd("relu", W1, W2, X, Y, lr=0.01, steps=50, log_every=50)
    assert ss.manifold_distance(h["W1"][-1], h["W2"][-1], (0, 1), c) < 1e-10
