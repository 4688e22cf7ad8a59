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


def test_count_kinks_hand_built():
    w = np.array([1.0, 2.0, -1.0, 1.0, 1.0])
    b = np.array([-0.4, -0.8, -0.2, -5.0, 0.1])
    a = np.array([1.0, 0.5, 1.0, 1.0, 1e-6])
    # units 0 and 1 share the kink 0.4 (one ray), unit 2 has kink -0.2, unit 3 is outside,
    # unit 4 is negligible
    assert ss.count_kinks(w, b, a) == 2
    # location -b/w (sign matters): only the kink at 0.5 lies in (0, 1)
    assert ss.count_kinks(np.ones(2), np.array([-0.5, 1.5]), np.ones(2), x_range=(0.0, 1.0)) == 1
    # batched: leading axes are independent networks
    batch = np.stack([np.stack([w, b, a]), np.stack([w, b, np.zeros_like(a)])])  # (2, 3, H)
    np.testing.assert_array_equal(ss.count_kinks(batch[:, 0], batch[:, 1], batch[:, 2]), [2, 0])


def _count_kinks_loop(w, b, a, merge_tol):
    jump = np.abs(a * w)
    if jump.max() == 0:
        return 0
    tol = 0.02 * jump.max()
    keep = (jump > tol) & (w != 0)
    x, slope = -b[keep] / w[keep], (a * np.abs(w))[keep]
    inside = (x > -1) & (x < 1)
    order = np.argsort(x[inside])
    x, slope = x[inside][order], slope[inside][order]
    total, last = [], -np.inf
    for xi, si in zip(x, slope):
        if xi - last > merge_tol:
            total.append(0.0)
        total[-1] += si
        last = xi
    return int(np.sum(np.abs(np.array(total)) > tol))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), merge_tol=st.sampled_from([0.05, 0.1, 0.3]))
def test_count_kinks_vectorised_matches_loop(seed, merge_tol):
    g = gen(seed)
    w, b, a = g.standard_normal((3, 4, 6))
    got = ss.count_kinks(w, b, a, merge_tol=merge_tol)
    want = [_count_kinks_loop(w[r], b[r], a[r], merge_tol) for r in range(4)]
    np.testing.assert_array_equal(got, want)


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
