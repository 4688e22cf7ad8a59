"""Tests of lib.fisher_metric (chapter 18), following section (g) of the brief."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.papers import fisher_metric as fm
from lib.seed import torch_seeded


@pytest.fixture(scope="module")
def net():
    gen = np.random.default_rng(0)
    X, y = fm.gaussian_mixture(12, 3, 5, gen)
    with torch_seeded(seed=1):
        model = fm.make_mlp([5, 6, 3])
    return model, X, y, fm.logit_jacobians(model, X), fm.softmax_probs(model, X)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 9), st.floats(0.05, 5.0), st.integers(0, 10**6))
def test_simplex_fim_properties(C, alpha, seed):
    p = np.random.default_rng(seed).dirichlet(np.full(C, alpha))
    I = fm.simplex_fim(p)
    assert np.allclose(I, I.T) and np.allclose(I.sum(1), 0, atol=1e-15)
    assert np.linalg.eigvalsh(I).min() > -1e-14
    lo, hi = fm.lambda_max_bounds(p)
    lam = np.linalg.eigvalsh(I)[-1]
    assert lo - 1e-13 <= lam <= hi + 1e-13


def test_c2_closed_forms():
    p = np.array([0.3, 0.7])
    lam, v = fm.top_eigpair(p)
    assert lam == pytest.approx(2 * 0.3 * 0.7)
    assert abs(abs(v @ np.array([1, -1]) / np.sqrt(2)) - 1) < 1e-12


def test_top_eigpair_ties_and_near_one_hot():
    lam, v = fm.top_eigpair(np.array([0.4, 0.4, 0.2]))
    assert lam == pytest.approx(0.4)
    I = fm.simplex_fim(np.array([0.4, 0.4, 0.2]))
    assert np.allclose(I @ v, lam * v)
    eps = 1e-12
    p = np.array([1 - eps, eps / 3, eps / 3, eps / 3])
    lam, v = fm.top_eigpair(p)
    assert lam == pytest.approx(
        4 * eps / 3, rel=1e-9
    )  # exact: trace minus the two eigenvalues eps/3
    # (diag(p) - p p^T) itself cannot be formed to this accuracy in float64 (1 - p_max loses
    # digits), so check the eigenvector against its closed form v_i ~ p_i / (p_i - lambda).
    w = p / (p - lam)
    assert abs(abs(v @ w) / np.linalg.norm(w) - 1) < 1e-12


def test_top_eigpair_matches_eigh():
    gen = np.random.default_rng(3)
    for _ in range(300):
        p = gen.dirichlet(np.full(int(gen.integers(2, 10)), 0.5))
        w, V = fm.simplex_spectrum(p)
        if w[-1] - w[-2] < 1e-9:
            continue
        lam, v = fm.top_eigpair(p)
        assert abs(lam - w[-1]) < 1e-13 and 1 - abs(v @ V[:, -1]) < 1e-10


def test_multilabel_fim():
    z = np.array([0.0, 2.0])
    s = 1 / (1 + np.exp(-z))
    assert np.allclose(fm.multilabel_fim(z), np.diag(s * (1 - s)))


def test_logit_jacobians_finite_differences(net):
    import torch

    model, X, _, J, _ = net
    params = list(model.parameters())
    flat = torch.cat([q.detach().reshape(-1) for q in params])
    k = 7
    h = 1e-6

    def logits_with(delta):
        with torch.no_grad():
            off = 0
            for q in params:
                n = q.numel()
                q.copy_((flat[off : off + n] + delta[off : off + n]).reshape(q.shape))
                off += n
            out = model(torch.as_tensor(X)).numpy().copy()
        return out

    e = torch.zeros_like(flat)
    e[k] = h
    fd = (logits_with(e) - logits_with(-e)) / (2 * h)
    logits_with(torch.zeros_like(flat))
    assert np.allclose(fd, J[:, :, k], atol=1e-7)


def test_exact_fim_equals_expectation_and_ggn(net):
    model, X, _, J, p = net
    F = fm.exact_fim(J, p)
    B, C, P = J.shape
    expl = np.zeros((P, P))
    for b in range(B):
        for yy in range(C):
            g = J[b].T @ (np.eye(C)[yy] - p[b])
            expl += p[b, yy] * np.outer(g, g)
    assert np.allclose(F, expl, atol=1e-12)
    ggn = sum(J[b].T @ fm.simplex_fim(p[b]) @ J[b] for b in range(B))
    assert np.allclose(F, ggn, atol=1e-12)


def _fim_by_expectation(J, p):
    """F = sum_x E_{y ~ p_x}[s s^T], s = J_x^T (e_y - p_x), written out (not via exact_fim)."""
    B, C, P = J.shape
    F = np.zeros((P, P))
    for b in range(B):
        for yy in range(C):
            g = J[b].T @ (np.eye(C)[yy] - p[b])
            F += p[b, yy] * np.outer(g, g)
    return F


def test_fim_bounds_upper_gap_and_loewner_order(net):
    # the properties behind 18/prop-6/upper-gap-identity and 18/prop-6/loewner-order, against an F
    # computed by the explicit expectation over y rather than by the einsum that F_UB shares
    _, _, _, J, p = net
    F = _fim_by_expectation(J, p)
    F_LB, F_UB = fm.fim_bounds(J, p)
    Jp = np.einsum("bcp,bc->bp", J, p)
    assert np.allclose(F_UB - F, Jp.T @ Jp, atol=1e-12)
    nF = np.linalg.norm(F, 2)
    assert np.linalg.eigvalsh(F_UB - F).min() > -1e-12 * nF
    assert np.linalg.eigvalsh(F - F_LB).min() > -1e-12 * nF
    L, U = fm.core_envelopes(p[0])
    assert np.allclose(U - fm.simplex_fim(p[0]), np.outer(p[0], p[0]), atol=1e-15)


def test_fim_bounds_diagonal_and_layer_median_order(net):
    # the property behind 18/prop-6/layer-median-order: diag F_LB <= diag F <= diag F_UB entrywise,
    # hence per layer for the medians
    model, _, _, J, p = net
    Fd = np.diag(_fim_by_expectation(J, p))
    lb, ub = (np.diag(M) for M in fm.fim_bounds(J, p))
    tol = 1e-12 * Fd.max()
    assert np.all(lb <= Fd + tol) and np.all(Fd <= ub + tol)
    start = 0
    for layer in (model[0], model[2]):
        sl = slice(start, start + layer.weight.numel() + layer.bias.numel())
        start = sl.stop
        assert np.median(lb[sl]) <= np.median(Fd[sl]) + tol
        assert np.median(Fd[sl]) <= np.median(ub[sl]) + tol
    assert start == J.shape[2]


def test_autograd_probe_equals_Jtu(net):
    model, X, _, J, p = net
    xi = np.random.default_rng(2).choice([-1.0, 1.0], size=p.shape)
    g, u = fm.hutchinson_probe_autograd(model, X, "full", xi=xi)
    assert np.allclose(g, np.einsum("bcp,bc->p", J, u), atol=1e-13)


def test_probe_second_moments_exact(net):
    # E[u u^T] equals the core metric (full), diag(p) (dg) and the rank-one envelope (lr).
    _, _, _, J, p = net
    q = p[:2]
    for kind, target in (
        ("full", fm.simplex_fim(q)),
        ("dg", q[..., None] * np.eye(q.shape[1])),
        ("lr", np.array([fm.core_envelopes(q[b])[0] for b in range(2)])),
    ):
        u = fm.probe_vectors(q, 40000, kind, "rademacher", np.random.default_rng(4))
        emp = np.einsum("rbc,rbd->bcd", u, u) / u.shape[0]
        assert np.allclose(emp, target, atol=0.02)


def test_estimators_reproducible(net):
    _, _, _, J, p = net
    a = fm.hutchinson_stats(J, p, 100, generator=np.random.default_rng(7))["diag_mean"]
    b = fm.hutchinson_stats(J, p, 100, generator=np.random.default_rng(7))["diag_mean"]
    assert np.array_equal(a, b)


def test_variance_formula_gaussian_is_2F2(net):
    _, _, _, J, p = net
    F = fm.exact_fim(J, p)
    assert np.allclose(fm.hutchinson_variance(J, p, dist="gaussian"), 2 * np.diag(F) ** 2)
    assert np.all(fm.hutchinson_variance(J, p) <= 2 * np.diag(F) ** 2 + 1e-15)


def test_closed_form_cvs():
    assert fm.hutchinson_cv_closed_form(0.5) == pytest.approx(1.0)
    assert fm.mc_cv_closed_form(1e-3) > 20
    with pytest.raises(ValueError, match="delta"):
        fm.mc_cv_closed_form(0.0)


def test_empirical_fim_zero_when_confident():
    J = np.ones((1, 2, 3))
    assert np.allclose(fm.empirical_fim_diag(J, np.array([[1.0, 0.0]]), np.array([0])), 0)


def test_bad_input(net):
    _, _, _, J, p = net
    with pytest.raises(ValueError, match="non-negative"):
        fm.simplex_fim([1.2, -0.2])
    with pytest.raises(ValueError, match="sum to 1"):
        fm.simplex_fim([0.2, 0.2])
    with pytest.raises(ValueError, match="n_probes"):
        fm.hutchinson_stats(J, p, 0, generator=np.random.default_rng(0))
    with pytest.raises(ValueError, match="kind"):
        fm.probe_vectors(p, 2, "kfac", generator=np.random.default_rng(0))
    with pytest.raises(ValueError, match="dist"):
        fm.probe_vectors(p, 2, "full", "uniform", np.random.default_rng(0))
    with pytest.raises(TypeError, match="generator"):
        fm.probe_vectors(p, 2, "full", "rademacher", 3)
    with pytest.raises(ValueError, match="J must"):
        fm.exact_fim(J[:, :, :, None], p)
    with pytest.raises(ValueError, match="y must"):
        fm.empirical_fim_diag(J, p, np.array([5] * J.shape[0]))


def _fim_by_hessian(model, X):
    """F = sum_x J_x^T H_x J_x with H_x the Hessian in the logits of -log softmax(z)_y, which does
    not depend on y (torch.func.hessian; independent of exact_fim and fim_by_expectation)."""
    import torch
    from torch.func import hessian

    J = fm.logit_jacobians(model, X)
    with torch.no_grad():
        Z = model(torch.as_tensor(X))
    H = np.array(
        [hessian(lambda z: -torch.log_softmax(z, -1)[0])(Z[b]).numpy() for b in range(len(X))]
    )
    return np.einsum("bcp,bcd,bdq->pq", J, H, J)


def test_fim_by_expectation_matches_pullback_and_hessian(net):
    model, X, _, J, p = net
    F_auto = fm.fim_by_expectation(model, X)
    assert np.allclose(F_auto, fm.exact_fim(J, p), atol=1e-12)
    assert np.allclose(F_auto, _fim_by_hessian(model, X), atol=1e-12)


@pytest.mark.parametrize("kind", ["full", "dg"])
def test_autograd_probe_is_unbiased_against_an_independent_fim(net, kind):
    # the one-backward-pass probe a user runs: the mean of its quadratic forms converges to the
    # exact F (full; from autograd scores) or F_UB (dg; from the Jacobians), within 4.5 MC s.e.
    model, X, _, J, p = net
    target = fm.fim_by_expectation(model, X) if kind == "full" else fm.fim_bounds(J, p)[1]
    gen = np.random.default_rng(11)
    R = 1000
    G = np.array([fm.hutchinson_probe_autograd(model, X, kind, gen)[0] for _ in range(R)])
    W = gen.standard_normal((3, G.shape[1]))
    forms = np.column_stack([(G**2).sum(1), (G @ W.T) ** 2])
    want = np.r_[np.trace(target), np.einsum("kp,pq,kq->k", W, target, W)]
    z = (forms.mean(0) - want) / (forms.std(0, ddof=1) / np.sqrt(R))
    assert np.all(np.abs(z) < 4.5), z
    # power: the wrong centring u = s + p (1^T s) has second moment diag(p) + 3 p p^T, which
    # moves the trace by 4 sum_x |J_x^T p_x|^2, many standard errors
    if kind == "full":
        shift = 4 * np.sum(np.einsum("bcp,bc->bp", J, p) ** 2)
        assert shift / (forms[:, 0].std(ddof=1) / np.sqrt(R)) > 10


def test_hutchinson_stats_variance_about_known_mean(net):
    _, _, _, J, p = net
    F = fm.exact_fim(J, p)
    pairs = np.array([[0, 1], [2, 5]])
    st_ = fm.hutchinson_stats(
        J,
        p,
        20000,
        "full",
        "gaussian",
        np.random.default_rng(3),
        pairs=pairs,
        diag_target=np.diag(F),
        pair_target=F[pairs[:, 0], pairs[:, 1]],
    )
    keep = np.diag(F) > 1e-8 * np.diag(F).max()
    z = (st_["sqdev_mean"] - 2 * np.diag(F) ** 2)[keep] / st_["sqdev_se"][keep]
    assert np.abs(z).max() < 5
    _, var_pairs = fm.hutchinson_variance(J, p, pairs, dist="gaussian")
    assert np.all(np.abs(st_["pair_sqdev_mean"] - var_pairs) < 5 * st_["pair_sqdev_se"])
    with pytest.raises(ValueError, match="diag_target"):
        fm.hutchinson_stats(J, p, 10, generator=np.random.default_rng(0), diag_target=[1.0])
