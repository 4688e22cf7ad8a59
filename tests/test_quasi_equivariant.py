"""Tests for lib.papers.quasi_equivariant (chapter 05)."""

import math

import numpy as np
import pytest
import torch

from lib.papers import quasi_equivariant as qe

W3 = (2, 5, 4, 2)


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def max_gap(p1, p2, batch_dims=1):
    return float(qe.params_distance(p1, p2, batch_dims).max())


def test_group_action_composes_and_identity():
    g = gen()
    th = qe.init_params(W3, (7,), gen=g)
    g1 = qe.sample_group(W3, (7,), gen=g)
    g2 = qe.sample_group(W3, (7,), gen=g)
    left = qe.act_group(qe.act_group(th, g2), g1)
    right = qe.act_group(th, [a @ b for a, b in zip(g1, g2, strict=True)])
    assert max_gap(left, right) < 1e-12
    eye = [torch.eye(n, dtype=torch.float64).expand(7, n, n) for n in W3[1:-1]]
    assert max_gap(qe.act_group(th, eye), th) == 0.0


def test_monomial_inverse():
    g = qe.sample_group(W3, (3,), gen=gen(1))[0]
    eye = torch.eye(W3[1], dtype=torch.float64)
    assert torch.allclose(g @ qe.monomial_inverse(g), eye.expand_as(g), atol=1e-14)


def test_action_preserves_function_relu_not_tanh():
    g = gen(2)
    th = qe.init_params(W3, (10,), gen=g)
    grp = qe.sample_group(W3, (10,), gen=g)
    x = torch.randn(64, 2, generator=g, dtype=torch.float64)
    assert float(qe.functional_distance(th, qe.act_group(th, grp), x).max()) < 1e-12
    assert float(qe.functional_distance(th, qe.act_group(th, grp), x, act="tanh").min()) > 1e-3
    signs = qe.sample_group(W3, (10,), gen=g, signs=True)
    assert float(qe.functional_distance(th, qe.act_group(th, signs), x, act="tanh").max()) < 1e-12


def test_apply_scales_ones_is_identity_and_matches_act_group():
    g = gen(3)
    th = qe.init_params(W3, (4,), gen=g)
    ones = [torch.ones(4, n, dtype=torch.float64) for n in W3[1:-1]]
    assert max_gap(qe.apply_scales(th, ones), th) == 0.0
    d = [torch.rand(4, n, generator=g, dtype=torch.float64) + 0.5 for n in W3[1:-1]]
    assert (
        max_gap(qe.apply_scales(th, d), qe.act_group(th, [torch.diag_embed(v) for v in d])) < 1e-14
    )


def test_flatten_roundtrip():
    th = qe.init_params(W3, (3,), gen=gen(4))
    assert max_gap(qe.unflatten_params(qe.flatten_params(th), W3), th) == 0.0


@pytest.mark.parametrize("widths", [(3, 6, 1), (2, 5, 4, 2)])
def test_balanced_representative(widths):
    g = gen(5)
    th = qe.init_params(widths, (6,), gen=g)
    iters = 1 if len(widths) == 3 else 200
    T = qe.balanced_representative(th, iters=iters)
    x = torch.randn(32, widths[0], generator=g, dtype=torch.float64)
    assert float(qe.functional_distance(th, T, x).max()) < 1e-12
    T2 = qe.balanced_representative(T, iters=iters)
    assert max_gap(T, T2) < 1e-8
    # invariant under positive scalings (only the permutation part survives)
    grp = qe.sample_group(widths, (6,), gen=g, permute=False)
    assert max_gap(qe.balanced_representative(qe.act_group(th, grp), iters=iters), T) < 1e-7


def test_strict_layer_equivariant():
    g = gen(6)
    th = qe.init_params(W3, (5,), gen=g)
    grp = qe.sample_group(W3, (5,), gen=g)
    torch.manual_seed(0)
    layer = qe.MonomialLinear(W3, 1, 3)
    Z = [(W.unsqueeze(1), b.unsqueeze(1)) for W, b in th]
    gZ = [(W.unsqueeze(1), b.unsqueeze(1)) for W, b in qe.act_group(th, grp)]
    with torch.no_grad():
        gap = max_gap(layer(gZ), qe.act_group(layer(Z), grp, channel_dims=1), 2)
    assert gap < 1e-12


@pytest.mark.parametrize("shared", [True, False])
def test_quasi_alpha_range_and_pool(shared):
    g = gen(7)
    th = qe.init_params(W3, (5,), gen=g)
    torch.manual_seed(1)
    alpha = qe.QuasiAlpha(W3, 3, shared=shared, eps=0.2)
    Z = [(W.unsqueeze(1).expand(-1, 3, -1, -1), b.unsqueeze(1).expand(-1, 3, -1)) for W, b in th]
    with torch.no_grad():
        scales = alpha(Z)
    for a, n in zip(scales, W3[1:-1], strict=True):
        assert a.shape == (5, 1 if shared else 3, n)
        assert float(a.min()) >= 0.8 - 1e-12 and float(a.max()) <= 1.2 + 1e-12
    with torch.no_grad():
        gap = (
            (qe.channel_norm_pool(qe.apply_scales(Z, scales)) - qe.channel_norm_pool(Z)).abs().max()
        )
    assert (float(gap) < 1e-12) == shared


def test_orbit_pair_bound_brute_force():
    t = torch.tensor([1.3, -0.7, 2.0], dtype=torch.float64)
    r = torch.tensor([3.0, 0.4, 1.05], dtype=torch.float64)
    for eps in (0.0, 0.1):
        lb = qe.orbit_pair_lower_bound(t, r, eps)
        u = torch.linspace(-5, 5, 4001, dtype=torch.float64)[:, None]
        lo, hi = math.log((1 - eps) / (1 + eps)), math.log((1 + eps) / (1 - eps))
        rho = r * torch.exp(torch.linspace(lo, hi, 101, dtype=torch.float64))[:, None, None]
        brute = ((u - t) ** 2 + (rho * u - t) ** 2).amin(1).amin(0)
        assert torch.allclose(lb, brute, atol=1e-4)


def test_gl_quasi_invertible_when_eps_dh_below_one():
    gamma = 5 * torch.randn(500, 6, 6, generator=gen(8), dtype=torch.float64)
    eps = 0.99 / 6
    cond = torch.linalg.cond(qe.gl_quasi_matrix(gamma, eps))
    assert float(cond.max()) < 1e6
    assert float(cond.max()) <= qe.gl_condition_bound(eps, 6)


def test_tau_drop_bootstrap():
    a = np.arange(20.0)
    drop, reps = qe.tau_drop_bootstrap(a, a, a, n_boot=10, rng=np.random.default_rng(0))
    assert drop == 0.0 and np.all(reps == 0.0)


def test_make_zoo_and_models():
    params, acc, hyper = qe.make_zoo((2, 4, 4, 1), 6, gen=gen(9), n_points=32, max_steps=5)
    assert params[0][0].shape == (6, 4, 2) and acc.shape == (6,)
    assert float(acc.min()) >= 0 and float(acc.max()) <= 1
    assert set(hyper) == {"lr", "scale", "steps", "noise"}
    torch.manual_seed(2)
    for model in (qe.StatNet((2, 4, 4, 1)), qe.InvariantNFN((2, 4, 4, 1), quasi="per")):
        assert model(params).shape == (6,)


def test_bad_inputs_name_the_argument():
    g = gen()
    with pytest.raises(ValueError, match="widths"):
        qe.check_widths((3, 2))
    with pytest.raises(TypeError, match="widths"):
        qe.check_widths("abc")
    with pytest.raises(ValueError, match="act"):
        qe.QuasiAlpha(W3, 2, shared=True, act="tanh")
    with pytest.raises(ValueError, match="eps"):
        qe.QuasiAlpha(W3, 2, shared=True, eps=1.5)
    with pytest.raises(ValueError, match="quasi"):
        qe.InvariantNFN(W3, quasi="both")
    with pytest.raises(ValueError, match="scale_range"):
        qe.sample_group(W3, gen=g, scale_range=(2.0, 1.0))
    th = qe.init_params(W3, (2,), gen=g)
    with pytest.raises(ValueError, match="g must have"):
        qe.act_group(th, [])
    with pytest.raises(ValueError, match="params"):
        qe.forward([(th[0][0], th[1][1]), th[1]], torch.zeros(3, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="x must"):
        qe.forward(th, torch.zeros(3, 5, dtype=torch.float64))
    with pytest.raises(ValueError, match="eps"):
        qe.gl_condition_bound(0.5, 4)
    with pytest.raises(ValueError, match="gamma"):
        qe.gl_quasi_matrix(torch.zeros(3, 4), 0.1)
    with pytest.raises(ValueError, match="r must"):
        qe.orbit_pair_lower_bound(torch.ones(2), torch.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="widths"):
        qe.make_zoo((3, 4, 1), 4, gen=g)
    with pytest.raises(TypeError, match="rng"):
        qe.tau_drop_bootstrap(np.ones(3), np.ones(3), np.ones(3), n_boot=2, rng=0)
    with pytest.raises(ValueError, match="pred_b"):
        qe.tau_drop_bootstrap(
            np.ones(3), np.ones(4), np.ones(3), n_boot=2, rng=np.random.default_rng()
        )


def test_bad_inputs_added_validation():
    g = gen()
    th = qe.init_params(W3, (2,), gen=g)
    with pytest.raises(TypeError, match="gamma"):
        qe.gl_quasi_matrix([[0.0, 1.0], [1.0, 0.0]], 0.1)
    with pytest.raises(TypeError, match="t and r"):
        qe.orbit_pair_lower_bound([1.0], torch.ones(1))
    with pytest.raises(ValueError, match="t must"):
        qe.orbit_pair_lower_bound(torch.tensor([math.nan]), torch.ones(1))
    other = qe.init_params((2, 3, 4, 2), (2,), gen=g)
    with pytest.raises(ValueError, match="p1 and p2"):
        qe.functional_distance(th, other, torch.zeros(3, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="p1 and p2"):
        qe.params_distance(th, other)
    with pytest.raises(ValueError, match="p2"):
        qe.params_distance(th, "x")
    ones = [torch.ones(2, n, dtype=torch.float64) for n in W3[1:-1]]
    with pytest.raises(ValueError, match=r"scales\[1\] must be positive"):
        qe.apply_scales(th, [ones[0], -ones[1]])
    with pytest.raises(TypeError, match="scales"):
        qe.apply_scales(th, [ones[0], 1.0])
    with pytest.raises(ValueError, match="channels"):
        qe.InvariantNFN(W3, channels=(2, 4))
    with pytest.raises(ValueError, match="channels"):
        qe.InvariantNFN(W3, channels=(1, 0, 4))
    with pytest.raises(TypeError, match="x must"):
        qe.tensor_stats([1.0, 2.0])


def test_tensor_stats_matches_numpy():
    x = torch.randn(3, 4, 5, generator=gen(3), dtype=torch.float64)
    s = qe.tensor_stats(x).numpy()
    f = x.flatten(1).numpy()
    ref = np.concatenate(
        [f.mean(-1, keepdims=True), f.var(-1, ddof=1, keepdims=True)]
        + [np.quantile(f, q, axis=-1)[:, None] for q in (0, 0.25, 0.5, 0.75, 1)],
        -1,
    )
    assert np.allclose(s, ref, atol=1e-12)
    assert np.all(qe.tensor_stats(torch.ones(2, 1, dtype=torch.float64))[:, 1].numpy() == 0)


def test_trained_eps_past_one_is_refused_naming_eps():
    layer = qe.QuasiLayer(W3, 1, 2, shared=False)
    Z = [(W.unsqueeze(1), b.unsqueeze(1)) for W, b in qe.init_params(W3, (4,), gen=gen(5))]
    for bad in (1.0, -1.0, 50.0, float("nan")):
        with torch.no_grad():
            layer.alpha.eps.fill_(bad)
        with pytest.raises(ValueError, match="eps"):
            layer(Z)


def test_apply_scales_refuses_non_positive_scales():
    th = qe.init_params(W3, (2,), gen=gen(6))
    with pytest.raises(ValueError, match="positive"):
        qe.apply_scales(th, [torch.zeros(2, W3[1], dtype=torch.float64), torch.ones(2, W3[2])])


def test_project_eps_clips_and_reports():
    model = qe.InvariantNFN(W3, quasi="per")
    alpha = model.layers[-1].alpha
    assert not model.project_eps_(0.9)  # 0.01 is inside: nothing to clip
    assert float(alpha.eps) == pytest.approx(0.01)
    for value, clipped in ((3.0, 0.9), (-7.0, -0.9)):
        with torch.no_grad():
            alpha.eps.fill_(value)
        assert model.project_eps_(0.9)
        assert float(alpha.eps) == pytest.approx(clipped)
    Z = [(W.unsqueeze(1), b.unsqueeze(1)) for W, b in qe.init_params(W3, (4,), gen=gen(7))]
    a = alpha(model.layers[0](Z))  # the clipped eps keeps every scale in [0.1, 1.9]
    assert all(float(x.min()) >= 0.1 - 1e-12 and float(x.max()) <= 1.9 + 1e-12 for x in a)
    assert not qe.InvariantNFN(W3).project_eps_(0.9)  # strict: nothing to project
    for bad in (0.0, 1.0, 1.5, -0.5):
        with pytest.raises(ValueError, match="bound"):
            alpha.project_eps_(bad)
