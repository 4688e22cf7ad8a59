"""Unit tests for lib.grpo_offpolicy (chapter 01), following section (g) of the brief."""

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import softmax

from lib.papers.grpo_offpolicy import tabular as gp


def gen(seed=0):
    return np.random.default_rng(seed)


def triple(seed=0, n=20, K=6, M=5, reward="binary"):
    return gp.random_triples(n, K, M, gen(seed), reward=reward)


# ----------------------------------------------------------------- group statistics
def test_whitening_constant_group_is_zero_and_matches_formula():
    r = np.array([[1.0, 1, 1, 1], [0, 0, 0, 0], [1, 0, 0, 1]])
    a = gp.group_whiten(r, eps=1e-4)
    assert np.all(a[:2] == 0)
    assert np.allclose(a[2], (r[2] - 0.5) / np.sqrt(0.25 + 1e-4))
    trl = gp.group_whiten(r, eps=1e-4, ddof=1, convention="trl")
    assert np.all(trl[:2] == 0)
    assert np.allclose(trl[2], (r[2] - 0.5) / (np.std(r[2], ddof=1) + 1e-4))


@pytest.mark.parametrize(
    "kw, match",
    [(dict(eps=0.0), "eps"), (dict(ddof=2), "ddof"), (dict(convention="torch"), "convention")],
)
def test_whitening_bad_input(kw, match):
    with pytest.raises(ValueError, match=match):
        gp.group_whiten(np.ones((2, 3)), **kw)
    with pytest.raises(ValueError, match="ddof"):
        gp.group_whiten(np.ones((2, 1)), ddof=1)


def test_policy_stats_returns_and_surrogate_match_direct_sums():
    pi, pi_k, alpha, r = triple(1, reward="uniform")
    mu, sig = gp.policy_stats(alpha, r, 1e-3)
    assert np.allclose(mu, np.einsum("nkm,nkm->nk", alpha, r))
    var = np.einsum("nkm,nkm->nk", alpha, (r - mu[..., None]) ** 2)
    assert np.allclose(sig, np.sqrt(var + 1e-3))
    assert np.allclose(gp.returns(pi, r), np.sum(pi * r, -1))
    # importance-sampling form equals the expectation under pi
    adv = (r - mu[..., None]) / sig[..., None]
    assert np.allclose(gp.surrogate(pi, alpha, r, 1e-3), np.sum(alpha * (pi / alpha) * adv, -1))


def test_whitening_identity_and_self_surrogate_is_zero():
    # lem-01-identity: J_x(pi) - mu_alpha = sigma_eps L_alpha(pi), and L_{pi_k}(pi_k) = 0
    # (the notebook's sanity claims 01/identity/whitening and 01/identity/self-zero)
    for reward in ("binary", "uniform"):
        pi, pi_k, alpha, r = triple(13, n=50, reward=reward)
        _, sig = gp.policy_stats(alpha, r, 1e-4)
        lhs = gp.returns(pi, r) - gp.returns(alpha, r)
        assert np.max(np.abs(lhs - sig * gp.surrogate(pi, alpha, r, 1e-4))) < 1e-12
        assert np.max(np.abs(gp.surrogate(pi_k, pi_k, r, 1e-4))) < 1e-12


def test_policy_inputs_are_validated():
    good = np.full((2, 4), 0.25)
    r = np.zeros((2, 4))
    with pytest.raises(ValueError, match="alpha must sum to 1"):
        gp.policy_stats(good * 1.1, r)
    with pytest.raises(ValueError, match="alpha must be non-negative"):
        gp.policy_stats(np.array([[1.5, -0.5]]), np.zeros((1, 2)))
    with pytest.raises(ValueError, match="r must lie in"):
        gp.returns(good, r + 2)
    with pytest.raises(ValueError, match="shapes must agree"):
        gp.returns(good, np.zeros((2, 3)))
    with pytest.raises(TypeError, match="pi must be an array"):
        gp.returns(object(), r)
    with pytest.raises(ValueError, match="pi must be finite"):
        gp.returns(np.array([[np.nan, 1.0]]), np.zeros((1, 2)))


# ----------------------------------------------------------------- TV and the bound
def test_tv_symmetric_bounded_and_zero_on_identical():
    pi, pi_k, _, _ = triple(2)
    d = gp.tv(pi, pi_k)
    assert np.allclose(d, gp.tv(pi_k, pi))
    assert np.all((d >= 0) & (d <= 1))
    assert np.all(gp.tv(pi, pi) == 0)
    assert gp.tv(np.array([1.0, 0]), np.array([0, 1.0])) == 1.0
    with pytest.raises(ValueError, match="q must sum to 1"):
        gp.tv(np.array([0.5, 0.5]), np.array([0.5, 0.6]))


@pytest.mark.parametrize("reward", ["binary", "uniform"])
def test_improvement_bound_holds_and_c1_is_tighter(reward):
    pi, pi_k, alpha, r = triple(3, n=200, reward=reward)
    lhs = gp.returns(pi, r) - gp.returns(pi_k, r)
    b2 = gp.improvement_bound(pi, pi_k, alpha, r, 1e-4, c=2.0)
    b1 = gp.improvement_bound(pi, pi_k, alpha, r, 1e-4, c=1.0)
    assert np.all(lhs >= b1 - 1e-12) and np.all(b1 >= b2)
    # the wrong bound without the drift term fails at pi = alpha where J(pi_k) > J(alpha)
    wrong = gp.improvement_bound(alpha, pi_k, alpha, r, 1e-4) + 2 * gp.tv(pi_k, alpha)
    lhs_a = gp.returns(alpha, r) - gp.returns(pi_k, r)
    assert np.all((lhs_a < wrong)[lhs_a < -1e-9])


def test_improvement_bound_needs_abs_when_eps_is_large():
    # eps >= 3/4 makes sigma > 1; the bound with |1 - sigma| still holds
    pi, pi_k, alpha, r = triple(4, n=100)
    lhs = gp.returns(pi, r) - gp.returns(pi_k, r)
    assert np.all(lhs >= gp.improvement_bound(pi, pi_k, alpha, r, eps=2.0, c=1.0) - 1e-12)


def test_improvement_bound_rejects_bad_input():
    pi, pi_k, alpha, r = triple(5, n=2)
    with pytest.raises(ValueError, match="r must lie in"):
        gp.improvement_bound(pi, pi_k, alpha, r * 3 - 1)
    with pytest.raises(ValueError, match="pi must sum to 1"):
        gp.improvement_bound(pi * 2, pi_k, alpha, r)
    with pytest.raises(ValueError, match="pi_k must sum to 1"):
        gp.improvement_bound(pi, pi_k * 0.5, alpha, r)
    with pytest.raises(ValueError, match="c must be"):
        gp.improvement_bound(pi, pi_k, alpha, r, c=0)
    with pytest.raises(ValueError, match="eps must be"):
        gp.improvement_bound(pi, pi_k, alpha, r, eps=-1)


def test_drift_bound_formula_and_errors():
    out = gp.drift_bound(0.5, 0.4, 0.2, 0.1, c=2.0)
    assert out == pytest.approx(0.5 - 1.5 * (0.2 + 0.2) - 0.2)
    assert gp.drift_bound(0.5, 0.4, 0.2, 0.1, c=1.0) == pytest.approx(0.5 - 1.5 * 0.2 - 0.1)
    with pytest.raises(ValueError, match="sigma"):
        gp.drift_bound(0.5, 0.0, 0.2, 0.1)
    with pytest.raises(ValueError, match="delta"):
        gp.drift_bound(0.5, 0.4, 0.2, 1.5)
    with pytest.raises(ValueError, match="clip"):
        gp.drift_bound(0.5, 0.4, 0.0, 0.1)


def test_within_clip_respects_the_window_and_the_corollary():
    _, pi_k, alpha, r = triple(6, n=100)
    pi = gp.within_clip(pi_k, alpha, 0.2, gen(6))
    assert np.allclose(pi.sum(-1), 1) and np.all(pi >= 0)
    assert np.all(np.abs(pi - pi_k) <= 0.2 * alpha + 1e-15)
    assert np.all(gp.tv(pi, pi_k) <= 0.1 + 1e-15)
    _, sig = gp.policy_stats(alpha, r)
    lower = gp.drift_bound(gp.surrogate(pi, alpha, r), sig, 0.2, gp.tv(pi_k, alpha))
    assert np.all(gp.returns(pi, r) - gp.returns(pi_k, r) >= lower - 1e-12)
    with pytest.raises(TypeError, match="rng"):
        gp.within_clip(pi_k, alpha, 0.2, 3)


# ----------------------------------------------------------------- the clipped objective
def test_clip_objective_inside_window_is_plain_ratio_times_advantage():
    rho_k = np.array([0.5, 1.0, 2.0])
    rho = rho_k + np.array([0.1, -0.15, 0.19])
    adv = np.array([1.0, -2.0, 0.5])
    val, active = gp.clip_objective(rho, rho_k, adv, 0.2)
    assert np.allclose(val, rho * adv) and active.all()


def test_clip_objective_mask_outside_window_matches_sign_of_advantage():
    rho_k = np.ones(4)
    rho = np.array([1.5, 1.5, 0.5, 0.5])
    adv = np.array([1.0, -1.0, 1.0, -1.0])
    val, active = gp.clip_objective(rho, rho_k, adv, 0.2)
    # above the window: no gradient when a > 0; below: none when a < 0
    assert active.tolist() == [False, True, True, False]
    assert np.allclose(val, [1.2, -1.5, 0.5, -0.8])


def test_clip_window_is_one_plus_minus_eps_on_policy_and_floored_at_zero():
    eps = 0.2
    rho = np.linspace(0, 2, 401)
    val, _ = gp.clip_objective(rho, 1.0, 1.0, eps)
    assert np.allclose(val, np.minimum(rho, np.clip(rho, 1 - eps, 1 + eps)))
    val0, active0 = gp.clip_objective(0.0, 0.1, -1.0, eps)  # window [0, 0.3]: 0 is inside
    assert val0[0] == 0.0 and active0[0]


def test_clip_objective_is_pessimistic():
    # prop-01-clip part 1: f(rho, rho', a) <= rho a everywhere (sanity claim 01/clip/pessimistic)
    g = gen(14)
    rho_k = g.uniform(0, 3, 10_000)
    rho = np.abs(rho_k + g.normal(0, 0.5, rho_k.size)) + 1e-3
    a = g.normal(0, 1, rho_k.size)
    val, active = gp.clip_objective(rho, rho_k, a, 0.2)
    assert np.all(val <= rho * a) and not active.all()


def test_clip_objective_bad_input():
    with pytest.raises(ValueError, match="ratio must be non-negative"):
        gp.clip_objective(-0.1, 1.0, 1.0, 0.2)
    with pytest.raises(ValueError, match="ratio_k must be non-negative"):
        gp.clip_objective(0.1, -1.0, 1.0, 0.2)
    with pytest.raises(ValueError, match="clip"):
        gp.clip_objective(1.0, 1.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="broadcast"):
        gp.clip_objective(np.ones(3), np.ones(2), 1.0, 0.2)


# ----------------------------------------------------------------- Bernoulli closed forms
def test_bernoulli_constant_values_and_errors():
    eps = 1e-4
    assert gp.bernoulli_constant(0.0, eps) == pytest.approx((1 - 0.01) / 0.01)
    p = np.linspace(0, 1, 101)
    c = gp.bernoulli_constant(p, eps)
    assert np.allclose(c, c[::-1]) and np.argmin(c) == 50
    with pytest.raises(ValueError, match="p must lie"):
        gp.bernoulli_constant(1.2)
    with pytest.raises(ValueError, match="eps"):
        gp.bernoulli_constant(0.5, eps=0)


def test_amplification_map_is_monotone_in_p_ref_and_above_it():
    p_ref = np.linspace(0.01, 0.99, 99)
    for p in (0.0, 0.3, 0.5, 0.9):
        h = gp.amplification_map(p, p_ref, beta=1.0)
        assert np.all(np.diff(h) >= 0) and np.all(h >= p_ref)
        h = gp.amplification_map(p, p_ref, beta=50.0)  # far from saturation at 1
        assert np.all(np.diff(h) > 0) and np.all(h > p_ref) and h.max() < 1
    with pytest.raises(ValueError, match="p_ref"):
        gp.amplification_map(0.5, 0.0, 1.0)
    with pytest.raises(ValueError, match="beta"):
        gp.amplification_map(0.5, 0.3, -1.0)
    with pytest.raises(ValueError, match="p must lie"):
        gp.amplification_map(-0.5, 0.3, 1.0)


def test_amplification_equals_gibbs_step_and_numerical_optimum():
    g = gen(7)
    pi_ref = softmax(g.standard_normal(5))
    r = np.array([1.0, 0, 1, 0, 0])
    p, beta, eps = 0.3, 0.7, 1e-4
    adv = (r - p) / np.sqrt(p * (1 - p) + eps)
    h = float(gp.amplification_map(p, pi_ref @ r, beta, eps))
    assert gp.gibbs_step(pi_ref, adv, beta) @ r == pytest.approx(h, abs=1e-13)

    def obj(z):
        q = softmax(z)
        return -(q @ adv - beta * np.sum(q * np.log(q / pi_ref)))

    z = minimize(obj, np.zeros(5), method="BFGS", options=dict(gtol=1e-10)).x
    assert softmax(z) @ r == pytest.approx(h, abs=1e-6)
    with pytest.raises(ValueError, match="beta"):
        gp.gibbs_step(pi_ref, adv, 0.0)
    with pytest.raises(ValueError, match="shapes"):
        gp.gibbs_step(pi_ref, adv[:3], 1.0)


def test_fixed_points_are_fixed_and_include_the_iterate_limit():
    for p_ref, beta in ((0.05, 1.0), (0.2, 2.0), (0.5, 0.5)):
        p_star, u = gp.amplification_fixed_points(p_ref, beta)
        assert len(p_star) in (1, 3) and np.all(p_star > p_ref)
        for ps, uu in zip(p_star, u):
            one_minus_h = 1 - float(gp.amplification_map(ps, p_ref, beta)) if uu > 1e-6 else None
            if one_minus_h is not None:
                assert one_minus_h == pytest.approx(uu, rel=1e-8)
        q = p_ref
        for _ in range(3000):
            q = float(gp.amplification_map(q, p_ref, beta))
        assert q == pytest.approx(p_star.min(), abs=1e-9)
    with pytest.raises(ValueError, match="grid"):
        gp.amplification_fixed_points(0.2, 1.0, grid=5)
    with pytest.raises(ValueError, match="p_ref"):
        gp.amplification_fixed_points(1.0, 1.0)


# ----------------------------------------------------------------- random instances
def test_random_policy_and_triples_shapes_and_errors():
    pol, logits = gp.random_policy((3, 4), 0.5, gen(8))
    assert pol.shape == (3, 4) and np.allclose(pol.sum(-1), 1) and logits.shape == (3, 4)
    pi, pi_k, alpha, r = gp.random_triples(2, 3, 4, gen(8), reward="uniform")
    assert pi.shape == pi_k.shape == alpha.shape == r.shape == (2, 3, 4)
    with pytest.raises(ValueError, match="scale"):
        gp.random_policy((3, 4), -1.0, gen())
    with pytest.raises(ValueError, match="base"):
        gp.random_policy((3, 4), 1.0, gen(), base=np.zeros(3))
    with pytest.raises(ValueError, match="reward"):
        gp.random_triples(2, 3, 4, gen(), reward="gaussian")
    with pytest.raises(ValueError, match="n must be a positive integer"):
        gp.random_triples(0, 3, 4, gen())


# ----------------------------------------------------------------- the bandit and training
def test_bandit_J_matches_monte_carlo_within_3_se():
    env = gp.LogLinearBandit.make(8, 6, 4, gen(9))
    theta = gen(10).standard_normal(4)
    pol = env.policy(theta)
    g = gen(11)
    x = g.integers(0, 8, 200_000)
    u = g.random(x.size)
    y = (np.cumsum(pol[x], axis=1) < u[:, None]).sum(1)
    rew = env.r[x, np.minimum(y, 5)]
    se = rew.std() / np.sqrt(rew.size)
    assert abs(rew.mean() - env.J(theta)) < 3 * se
    assert set(np.unique(env.r.sum(1))) <= {1, 2, 3, 4}


def test_bandit_bad_input():
    with pytest.raises(ValueError, match="max_correct"):
        gp.LogLinearBandit.make(4, 4, 2, gen(), max_correct=4)
    with pytest.raises(ValueError, match="K must be a positive integer"):
        gp.LogLinearBandit.make(0, 4, 2, gen())
    env = gp.LogLinearBandit.make(4, 5, 2, gen())
    with pytest.raises(ValueError, match="theta must have shape"):
        env.J(np.zeros(3))


def test_grpo_train_histories_and_structural_facts():
    env = gp.LogLinearBandit.make(16, 8, 6, gen(12))
    hp = dict(iters=30, B=8, G=6, lr=1.0, rng=None)
    on = gp.grpo_train(env, v=1, i=1, **{**hp, "rng": gen(1)})
    assert on["J"].shape == (31,) and np.all(on["drift"] == 0) and np.all(on["clip_frac"] == 0)
    off = gp.grpo_train(env, v=5, i=1, **{**hp, "rng": gen(1)})
    assert (
        np.all(off["drift"][::5] == 0) and off["drift"].max() > 0 and np.all(off["clip_frac"] == 0)
    )
    reuse = gp.grpo_train(env, v=1, i=5, **{**hp, "rng": gen(1)})
    assert reuse["clip_frac"].max() > 0
    for h in (on, off, reuse):
        assert np.all(np.diff(h["J"]) >= h["rhs"][1.0] - 1e-12)
    # with beta = 0 the mask equals the unmasked run with the step rescaled by
    # B / #groups with variance
    m = gp.grpo_train(env, v=1, i=1, mask=True, **{**hp, "rng": gen(2)})
    s = gp.grpo_train(env, v=1, i=1, mask="rescale", **{**hp, "rng": gen(2)})
    assert np.allclose(m["J"], s["J"], atol=1e-12)
    assert on["J"][-1] > on["J"][0]


def test_certified_steps_improve():
    # a step with RHS_1 > 0 must raise J, as the bound implies
    # (sanity claim 01/certified/c1-improves)
    env = gp.LogLinearBandit.make(16, 8, 6, gen(12))
    for v, i in ((1, 1), (5, 1), (1, 5)):
        h = gp.grpo_train(env, v=v, i=i, iters=30, B=8, G=6, lr=1.0, rng=gen(1))
        d_j, cert = np.diff(h["J"]), h["rhs"][1.0] > 1e-12
        assert cert.any() and np.all(d_j[cert] > 0)


def test_mask_differs_from_rescaled_step_with_kl():
    # power check of the beta = 0 equivalence: with a KL term the mask also drops the KL pull
    # on the masked prompts, so the runs must differ (sanity claim 01/mask/differs-with-kl)
    env = gp.LogLinearBandit.make(16, 8, 6, gen(12))
    hp = dict(v=1, i=1, iters=30, B=8, G=6, lr=1.0, beta=0.05)
    masked = gp.grpo_train(env, mask=True, rng=gen(2), **hp)
    rescaled = gp.grpo_train(env, mask="rescale", rng=gen(2), **hp)
    assert np.max(np.abs(masked["J"] - rescaled["J"])) > 1e-6


def test_grpo_train_bad_input():
    env = gp.LogLinearBandit.make(4, 5, 2, gen())
    base = dict(v=1, i=1, iters=2, B=2, G=2, lr=1.0, rng=gen())
    with pytest.raises(TypeError, match="env"):
        gp.grpo_train("env", **base)
    with pytest.raises(ValueError, match="v must be a positive integer"):
        gp.grpo_train(env, **{**base, "v": 0})
    with pytest.raises(ValueError, match="mask"):
        gp.grpo_train(env, **base, mask="yes")
    with pytest.raises(TypeError, match="rng"):
        gp.grpo_train(env, **{**base, "rng": None})
    with pytest.raises(ValueError, match="beta"):
        gp.grpo_train(env, **base, beta=-1.0)
    with pytest.raises(ValueError, match="lr"):
        gp.grpo_train(env, **{**base, "lr": 0.0})


def test_fixed_point_next_to_one_is_found_when_g_values_underflow_in_a_product():
    # beta = 0.2, eps = 1e-4: the fixed point has 1 - p* ~ exp(-500) ~ 1e-218, where G on both
    # sides of the root is ~1e-218 and G(a) * G(b) underflows to 0. The root is still found, and it
    # is a root: 1 - h(p*) = 1 - p* to relative accuracy (computed in u = 1 - p, no cancellation).
    from scipy.special import expit

    for p_ref in (0.01, 0.3, 0.5, 0.99):
        p_star, u = gp.amplification_fixed_points(p_ref, 0.2)
        assert len(u) >= 1
        uu = u.min()
        assert 1e-230 < uu < 1e-200
        one_minus_h = expit(-gp._amplification_logit(uu, p_ref, 0.2, 1e-4))
        assert one_minus_h == pytest.approx(uu, rel=1e-9)
