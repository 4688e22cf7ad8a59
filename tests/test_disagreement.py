"""Tests of lib.disagreement (chapter 08), following section (g) of the brief."""

import itertools
import math

import numpy as np
import pytest
import torch

from lib.papers import disagreement as dd


def test_losses_at_uniform_logits():
    K = 4
    s = torch.zeros(1, K, dtype=torch.float64)
    y = torch.zeros(1, dtype=torch.long)
    assert float(dd.ce_loss(s, y)) == pytest.approx(math.log(K))
    assert float(dd.dis_loss(s, y, "ours")) == pytest.approx(-math.log(1 - 1 / K))
    assert float(dd.dis_loss(s, y, "glk")) == pytest.approx(math.log(K))
    assert float(dd.dis_loss(s, y, "rg")) == pytest.approx(math.log(2))


def test_gradients_match_finite_differences():
    gen = np.random.default_rng(0)
    s0 = gen.normal(size=(3, 5))
    y = torch.as_tensor([0, 2, 4])
    for kind in dd.KINDS:
        s = torch.tensor(s0, requires_grad=True)
        dd.dis_loss(s, y, kind).sum().backward()
        h = 1e-6
        fd = np.zeros_like(s0)
        for i, j in itertools.product(range(3), range(5)):
            e = np.zeros_like(s0)
            e[i, j] = h
            fd[i, j] = (
                dd.dis_loss(torch.tensor(s0 + e), y, kind).sum()
                - dd.dis_loss(torch.tensor(s0 - e), y, kind).sum()
            ) / (2 * h)
        assert np.allclose(s.grad.numpy(), fd, atol=1e-7)


def test_pointwise_grad_matches_autograd():
    gen = np.random.default_rng(1)
    s0 = gen.normal(size=(4, 6))
    w = np.array([0.2, 0.7, 1.0, 1.3])
    for kind in dd.KINDS:
        s = torch.tensor(s0, requires_grad=True)
        y = torch.zeros(4, dtype=torch.long)
        (torch.as_tensor(w) * dd.ce_loss(s, y) + dd.dis_loss(s, y, kind)).sum().backward()
        assert np.allclose(dd.pointwise_grad(s0, w, kind), s.grad.numpy(), atol=1e-12)


def test_three_losses_coincide_for_two_classes():
    # 08/prop-thresholds/k2-identity: for K = 2 each loss is log(1 + exp(s_y - s_{1-y}))
    gen = np.random.default_rng(4)
    s = torch.as_tensor(gen.normal(scale=5, size=(200, 2)))
    y = torch.as_tensor(gen.integers(0, 2, 200))
    margin = s.gather(1, y[:, None]).squeeze(1) - s.gather(1, 1 - y[:, None]).squeeze(1)
    logistic = torch.logaddexp(torch.zeros_like(margin), margin)
    for kind in dd.KINDS:
        assert torch.allclose(dd.dis_loss(s, y, kind), logistic, rtol=0, atol=1e-12)
    s3 = torch.as_tensor(gen.normal(scale=5, size=(200, 3)))  # and not for K = 3
    assert not torch.allclose(dd.dis_loss(s3, y, "rg"), dd.dis_loss(s3, y, "ours"), atol=1e-6)


def test_new_loss_finite_when_confident():
    s = torch.tensor([[50.0, 0.0, 0.0]], dtype=torch.float64)
    v = float(dd.dis_loss(s, torch.tensor([0]), "ours"))
    assert math.isfinite(v) and v == pytest.approx(50 - math.log(2), rel=1e-12)


def test_true_and_optimal_discrepancy_brute_force():
    gen = np.random.default_rng(2)
    pS, pT, y = dd.tabular_problem(4, 3, gen)
    best = max(
        dd.true_discrepancy(np.array(f), y, pS, pT) for f in itertools.product(range(3), repeat=4)
    )
    assert best == pytest.approx(dd.optimal_discrepancy(pS, pT))
    assert dd.true_discrepancy(y, y, pS, pT) == 0.0


def test_thresholds():
    t = dd.thresholds(5)
    assert t["rg"] == pytest.approx(5 / 8) and t["glk"] == pytest.approx(0.25) and t["bayes"] == 1.0
    assert dd.thresholds(2)["rg"] == dd.thresholds(2)["glk"] == 1.0


def test_predicted_fraction_limits():
    pS, pT, _ = dd.tabular_problem(50, 3, np.random.default_rng(3))
    assert dd.predicted_fraction(pS, pT, 1.0) == pytest.approx(1.0)
    assert dd.predicted_fraction(pS, pT, 0.0) == 0.0


def test_dis2_bound_and_bad_input():
    assert dd.dis2_lower_bound(0.9, 0.1, 100, 100, 0.05) < 0.8
    with pytest.raises(ValueError, match="delta"):
        dd.dis2_lower_bound(0.9, 0.1, 100, 100, 1.5)
    with pytest.raises(ValueError, match="alpha"):
        dd.optimal_discrepancy([0.5, 0.5], [0.5, 0.5], alpha=0)
    with pytest.raises(ValueError, match="labels"):
        dd.ce_loss(torch.zeros(2, 3), torch.tensor([0, 3]))
    with pytest.raises(ValueError, match="kind"):
        dd.dis_loss(torch.zeros(2, 3), torch.tensor([0, 1]), "hinge")
    with pytest.raises(ValueError, match="K must"):
        dd.thresholds(1)
    with pytest.raises(ValueError, match="w must"):
        dd.pointwise_minimise([-0.5], 3, "rg", 2, np.random.default_rng(0))
    with pytest.raises(TypeError, match="generator"):
        dd.tabular_problem(4, 3, 0)


def test_train_critics_takes_the_number_of_classes_explicitly():
    # the labeller never predicts class 2 of K = 3: the critics still get K outputs
    g = torch.Generator().manual_seed(0)
    XS, XT = torch.randn(20, 4, generator=g), torch.randn(20, 4, generator=g)
    hS, hT = torch.randint(0, 2, (20,), generator=g), torch.randint(0, 2, (20,), generator=g)
    W, b = dd.train_critics(XS, hS, XT, hT, "ours", 2, g, K=3, steps=2)
    assert W.shape == (2, 4, 3) and b.shape == (2, 3)
    with pytest.raises(ValueError, match="K"):
        dd.train_critics(XS, hS, XT, hT, "ours", 2, g, K=1, steps=2)
    with pytest.raises(ValueError, match="labels"):
        dd.train_critics(XS, hS + 2, XT, hT, "ours", 2, g, K=3, steps=2)


# ----------------------------------------------------------------------------- revision of #18
def test_analytic_logit_gradients_match_autograd():
    gen = np.random.default_rng(5)
    s0 = gen.normal(scale=3, size=(6, 5))
    y = torch.as_tensor(gen.integers(0, 5, 6))
    s = torch.tensor(s0, requires_grad=True)
    dd.ce_loss(s, y).sum().backward()
    assert torch.allclose(dd.ce_grad(torch.tensor(s0), y), s.grad, atol=1e-12)
    for kind in dd.KINDS:
        s = torch.tensor(s0, requires_grad=True)
        dd.dis_loss(s, y, kind).sum().backward()
        assert torch.allclose(dd.dis_grad(torch.tensor(s0), y, kind), s.grad, atol=1e-12)


def _reference_critics(XS, hS, XT, hT, kind, W0, b0, steps, alpha):
    """The same training with autograd (the protocol's loss written out)."""
    W, b = W0.clone().requires_grad_(), b0.clone().requires_grad_()
    opt = torch.optim.AdamW([W, b], lr=3e-3, weight_decay=5e-4)
    C = W.shape[0]
    for _ in range(steps):
        opt.zero_grad()
        sS = torch.einsum("nd,cdk->cnk", XS, W) + b[:, None]
        eq = "cnd,cdk->cnk" if XT.dim() == 3 else "nd,cdk->cnk"
        sT = torch.einsum(eq, XT, W) + b[:, None]
        hTc = hT if XT.dim() == 3 else hT.expand(C, -1)
        loss = 0.5 * (
            dd.ce_loss(sS, hS.expand(C, -1)).mean(1) + alpha * dd.dis_loss(sT, hTc, kind).mean(1)
        )
        loss.sum().backward()
        opt.step()
    return W.detach(), b.detach()


@pytest.mark.parametrize("kind", dd.KINDS)
def test_train_critics_matches_autograd(kind):
    g = torch.Generator().manual_seed(1)
    XS, XT = torch.randn(30, 4, generator=g), torch.randn(3, 7, 4, generator=g)
    hS, hT = torch.randint(0, 3, (30,), generator=g), torch.randint(0, 3, (3, 7), generator=g)
    W0, b0 = torch.randn(4, 3, generator=g), torch.randn(3, generator=g)
    W, b = dd.train_critics(XS, hS, XT, hT, kind, 3, g, K=3, steps=20, alpha=0.3, init=(W0, b0))
    Wr, br = _reference_critics(
        XS, hS, XT, hT, kind, W0.expand(3, 4, 3).clone(), b0.expand(3, 3).clone(), 20, 0.3
    )
    assert torch.allclose(W, Wr, atol=1e-5) and torch.allclose(b, br, atol=1e-5)
    with pytest.raises(ValueError, match="batched XT"):
        dd.train_critics(XS, hS, XT, hT, kind, 2, g, K=3, steps=1)


def test_pointwise_minimise_follows_pointwise_grad():
    w = np.array([0.3, 0.9, 1.2])
    for kind in dd.KINDS:
        s = dd.pointwise_minimise(w, 4, kind, 5, np.random.default_rng(0), steps=30)
        ref = 3.0 * np.random.default_rng(0).standard_normal((3, 5, 4))
        for _ in range(30):
            ref -= (1 / (1 + w))[:, None, None] * dd.pointwise_grad(ref, w[:, None], kind)
        assert np.allclose(s, ref, atol=1e-10)


def test_tabular_critic_matches_autograd_adam():
    pS, pT, y = dd.tabular_problem(6, 3, np.random.default_rng(0))
    y2 = (y + 1) % 3
    for kind in dd.KINDS:
        s = dd.train_tabular_critic(
            pS, pT, y, 3, kind, 1.0, torch.Generator().manual_seed(0), 25, y2=y2
        )
        ref = torch.randn(6, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        ref.requires_grad_()
        opt = torch.optim.Adam([ref], lr=0.1)
        for _ in range(25):
            opt.zero_grad()
            (
                torch.sum(torch.as_tensor(pS) * dd.ce_loss(ref, torch.as_tensor(y)))
                + torch.sum(torch.as_tensor(pT) * dd.dis_loss(ref, torch.as_tensor(y2), kind))
            ).backward()
            opt.step()
        assert torch.allclose(s, ref.detach(), atol=1e-10)


def test_minimiser_margin_switches_at_thresholds_and_matches_descent():
    for K in (3, 5, 10):
        lam = dd.thresholds(K)
        for kind in ("rg", "glk"):
            assert dd.minimiser_margin(lam[kind], K, kind) == pytest.approx(0.0, abs=1e-12)
    w = np.array([0.4, 0.8, 1.3])
    for kind in ("rg", "glk"):
        s = dd.pointwise_minimise(w, 5, kind, 2, np.random.default_rng(1), steps=3000)
        margin = s[..., 0] - s[..., 1:].mean(-1)  # off-label logits are equal at the minimiser
        assert np.allclose(margin, dd.minimiser_margin(w, 5, kind)[:, None], atol=1e-4)
    with pytest.raises(ValueError, match="kind"):
        dd.minimiser_margin(0.5, 5, "ours")


def test_two_labeller_optimum_brute_force():
    gen = np.random.default_rng(7)
    pS, pT, y = dd.tabular_problem(4, 3, gen)
    y2 = np.array([y[0], (y[1] + 1) % 3, y[2], (y[3] + 2) % 3])
    differ = y2 != y
    best = max(
        dd.true_discrepancy(np.array(f), y, pS, pT, y2=y2)
        for f in itertools.product(range(3), repeat=4)
    )
    assert best == pytest.approx(dd.optimal_discrepancy(pS, pT, differ=differ))
    assert dd.predicted_fraction(pS, pT, 1.0, differ=differ) == pytest.approx(1.0)


def test_bayes_discrepancy_mc_limits_and_gaussian_density():
    lp = torch.zeros(10)
    assert dd.bayes_discrepancy_mc(lp, lp)[0] == 0.0
    h = torch.arange(10)
    assert dd.bayes_discrepancy_mc(lp, lp, h, h + 1)[0] == 1.0
    model = dd.gaussian_shift(3, 2, torch.Generator().manual_seed(0))
    x = torch.tensor([[0.3, -0.2]], dtype=torch.float64)
    from scipy.stats import multivariate_normal

    for dom, c, sc in (("source", model.means, 1.0), ("target", model.means + model.shift, 1.5)):
        ref = np.mean(
            [multivariate_normal(c[k].numpy(), sc**2 * np.eye(2)).pdf(x[0]) for k in range(3)]
        )
        assert float(model.log_density(x, dom)[0]) == pytest.approx(np.log(ref), rel=1e-10)
    with pytest.raises(ValueError, match="domain"):
        model.log_density(x, "test")


def test_make_shift_data_draws_unchanged_with_model():
    a = dd.make_shift_data(3, 2, 5, torch.Generator().manual_seed(3))
    b = dd.make_shift_data(3, 2, 5, torch.Generator().manual_seed(3), with_model=True)
    assert all(torch.equal(u, v) for u, v in zip(a, b[:4]))


def test_dis2_epsilon():
    eps = dd.dis2_epsilon(100, 400, 0.05)
    assert eps == pytest.approx(math.sqrt(math.log(20) * (4 / 100 + 1 / 400) / 2))
    assert dd.dis2_epsilon(100, 400, 0.05, n_hypotheses=10) > eps
    assert dd.dis2_lower_bound(0.9, 0.1, 100, 400, 0.05) == pytest.approx(0.8 - eps)


def test_detection_threshold_is_exact_for_exchangeable_nulls():
    # M = 19 calibration runs at level 0.05: reject only above the maximum, probability 1/20
    assert dd.detection_threshold(np.arange(19.0), 0.05) == 18.0
    gen = np.random.default_rng(0)
    null = gen.random((20000, 40))
    thr = np.array([dd.detection_threshold(r, 0.1) for r in null[:, :39]])
    size = np.mean(null[:, 39] > thr)  # exact: (M + 1 - k)/(M + 1) = 4/40
    assert abs(size - 0.1) < 4 * math.sqrt(0.09 / 20000)
    with pytest.raises(ValueError, match="null runs"):
        dd.detection_threshold(np.arange(5.0), 0.05)


def test_auroc_paired_matches_mann_whitney():
    from scipy.stats import mannwhitneyu

    gen = np.random.default_rng(2)
    null, alt = gen.integers(0, 4, (30, 2)), gen.integers(1, 5, (25, 2))
    A, C = dd.auroc_paired(null, alt)
    for r in range(2):
        assert A[r] == pytest.approx(mannwhitneyu(alt[:, r], null[:, r]).statistic / (30 * 25))
    assert C.shape == (2, 2) and np.all(np.linalg.eigvalsh(C) > 0)
