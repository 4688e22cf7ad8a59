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
