"""Unit tests for lib.papers.length_generalization (chapter 17), following item (g) of the plan."""

from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import softmax

from lib.papers import length_generalization as lg


def gen(seed=0):
    return np.random.default_rng(seed)


# --------------------------------------------------------------------------- finite precision
@given(st.lists(st.floats(-5, 5), min_size=1, max_size=12), st.integers(1, 10_000))
@settings(max_examples=60, deadline=None)
def test_infinite_bits_is_softmax_of_log_n_logits(a, n):
    a = np.array(a)
    np.testing.assert_allclose(
        lg.finite_precision_softmax(a, n, np.inf), softmax(a * np.log(n)), rtol=1e-10, atol=1e-14
    )


@given(
    st.lists(st.floats(-5, 5), min_size=1, max_size=12), st.integers(1, 10**6), st.floats(0.5, 30)
)
@settings(max_examples=60, deadline=None)
def test_max_is_never_dropped_and_weights_sum_to_one(a, n, bits):
    w = lg.finite_precision_softmax(np.array(a), n, bits)
    assert w[int(np.argmax(a))] > 0
    assert w.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("bits,gamma", [(4, 0.25), (4, 1.0), (8, 0.5), (6, 2.0)])
def test_threshold_is_exact(bits, gamma):
    a = np.array([0.0, -gamma, -3 * gamma])
    N = int(np.ceil(lg.hardmax_threshold(bits, gamma)))
    assert np.all(lg.finite_precision_softmax(a, N, bits)[1:] == 0)
    assert lg.finite_precision_softmax(a, N - 1, bits)[1] > 0


def test_hardmax_is_uniform_on_ties():
    np.testing.assert_array_equal(lg.hardmax([1.0, 3.0, 3.0, 0.0]), [0, 0.5, 0.5, 0])


def test_logit_margin():
    assert lg.logit_margin([0.0, 1.0, 1.0, 3.5]) == 1.0
    assert lg.logit_margin([2.0, 2.0]) == np.inf


def test_bad_inputs_raise_naming_the_argument():
    with pytest.raises(ValueError, match="bits"):
        lg.finite_precision_softmax([0.0, 1.0], 4, 0)
    with pytest.raises(ValueError, match="gamma"):
        lg.hardmax_threshold(4, -1.0)
    with pytest.raises(ValueError, match="n_ctx"):
        lg.finite_precision_softmax([0.0], 0, 4)
    with pytest.raises(TypeError, match="n_ctx"):
        lg.finite_precision_softmax([0.0], 2.5, 4)
    with pytest.raises(ValueError, match="n"):
        lg.simulate_short(np.zeros(100, dtype=int), 2, 3, 2)
    with pytest.raises(ValueError, match="no position"):
        lg.attainable_stats("modp", 2, Delta=5, k=4)
    with pytest.raises(ValueError, match="form"):
        lg.thm52_N(2.0, 1.0, 1.0, 0.1, form="sum")
    with pytest.raises(ValueError, match="task"):
        lg.attainable_stats("kgram", 4)


# --------------------------------------------------------------------------- one-layer model
def _brute_forward(model, i, x, bits):
    """Per-position loop for model i: logits, p-bit weights, values, readout."""
    T, D, tau = len(x), model.period, model.tau

    def key_logit(j):
        if model.keys_see_tokens:
            return model.logit_table[i, x[-1], T % D, x[j - 1], j % D]
        return model.logit_table[i, x[-1], T % D, j % D]

    a = np.array(
        [key_logit(j) + (model.phi[i, T - j] if T - j <= tau else 0.0) for j in range(1, T + 1)]
    )
    w = lg.finite_precision_softmax(a, T, bits)
    attn = sum(w[j - 1] * model.values[i, x[j - 1], j % D] for j in range(1, T + 1))
    h = model.embed[i, x[-1], T % D] + attn
    return model.w_out[i] @ (h + model.B[i] @ np.maximum(model.A[i] @ h + model.b[i], 0))


@pytest.mark.parametrize("see", [False, True])
@pytest.mark.parametrize("T,bits", [(1, 5), (3, 5), (7, np.inf), (40, 5), (40, 2)])
def test_forward_matches_per_position_loop(T, bits, see):
    g = gen(T)
    model = lg.random_one_layer_lt(3, 4, 3, 2, 5, 7, g, keys_see_tokens=see)
    x = g.integers(0, 4, T)
    out = model.forward(x, bits=bits)
    for i in range(3):
        assert out[i] == pytest.approx(_brute_forward(model, i, x, bits), abs=1e-12)


def test_forward_invariant_to_permuting_far_positions_within_a_residue_class():
    g = gen(1)
    model = lg.random_one_layer_lt(4, 3, 3, 2, 6, 8, g)
    x = g.integers(0, 3, 200)
    y = x.copy()
    far = np.arange(0, 200 - 3)  # 0-based indices of positions 1..T-tau-1
    for r in range(3):
        idx = far[(far + 1) % 3 == r]
        y[idx] = g.permutation(x[idx])
    np.testing.assert_allclose(model.forward(x, bits=5), model.forward(y, bits=5), atol=1e-12)


def test_pbit_equals_hardmax_beyond_threshold():
    g = gen(2)
    model = lg.random_one_layer_lt(5, 4, 3, 2, 6, 8, g)
    for T in (32, 33, 100):
        x = g.integers(0, 4, T)
        np.testing.assert_array_equal(
            model.forward(x, bits=5), model.forward(x, exact_hardmax=True)
        )


# --------------------------------------------------------------------------- simulation
def test_largest_remainder():
    a = lg.largest_remainder([5, 3, 2], 7)
    assert a.sum() == 7 and np.all(np.abs(a - 7 * np.array([5, 3, 2]) / 10) < 1)


@given(st.integers(0, 2**31 - 1), st.integers(200, 2000), st.integers(12, 150))
@settings(max_examples=30, deadline=None)
def test_simulate_short_keeps_suffix_residue_and_length(seed, T, n):
    g = gen(seed)
    x = g.integers(0, 4, T)
    z = lg.simulate_short(x, n, 3, 2)
    assert len(z) <= n
    assert len(z) % 3 == T % 3
    np.testing.assert_array_equal(z[-3:], x[-3:])
    assert set(np.unique(z)) <= set(np.unique(x))


def test_simulate_short_is_accurate_on_a_hardmax_model():
    g = gen(3)
    model = lg.random_one_layer_lt(10, 4, 3, 2, 6, 8, g)
    x = lg.sample_dirichlet_strings(1, 5000, np.ones(4), g)[0]
    z = lg.simulate_short(x, 400, 3, 2)
    bound = model.readout_lipschitz() * model.value_bound() * (4 + 2 * 2 + 4) / ((len(z) - 3) // 3)
    assert np.all(np.abs(model.forward(x, bits=5) - model.forward(z, bits=5)) <= bound)


@given(st.integers(0, 2**31 - 1), st.integers(300, 3000), st.integers(20, 200))
@settings(max_examples=30, deadline=None)
def test_keep_present_keeps_every_class_and_the_suffix(seed, T, n):
    g = gen(seed)
    x = lg.sample_dirichlet_strings(1, T, np.full(4, 0.3), g)[0]
    z = lg.simulate_short(x, n, 3, 2, keep_present=True)
    assert len(z) <= n and len(z) % 3 == T % 3
    np.testing.assert_array_equal(z[-3:], x[-3:])
    px, pz = x[: T - 3], z[: len(z) - 3]
    cx = {(int(s), (j + 1) % 3) for j, s in enumerate(px)}
    cz = {(int(s), (j + 1) % 3) for j, s in enumerate(pz)}
    assert cx == cz  # the same (token, residue) classes, each at least once


def test_keep_present_needs_room_for_every_token():
    x = np.tile(np.arange(4), 100)
    with pytest.raises(ValueError, match="keep_present"):
        lg.simulate_short(x, 10, 3, 2, keep_present=True)


@pytest.mark.parametrize("alpha", [0.3, 1.0])
def test_present_rule_bound_holds_on_token_seeing_models(alpha):
    g = gen(11)
    model = lg.random_one_layer_lt(20, 4, 3, 2, 6, 8, g, keys_see_tokens=True)
    for _ in range(4):
        x = lg.sample_dirichlet_strings(1, 3000, np.full(4, alpha), g)[0]
        am = model.argmax_far_classes(x)
        for n in (40, 200, 800):
            z = lg.simulate_short(x, n, 3, 2, keep_present=True)
            err = np.abs(model.forward(x, bits=5) - model.forward(z, bits=5))
            assert np.all(err <= lg.present_rule_bound(model, x, z, argmax=am) * (1 + 1e-12))
            # pairs whose output does not read far counts are reproduced exactly
            assert np.all(err[~model.reads_far_counts(x)] < 1e-12)


def test_reads_far_counts_small_cases():
    # one model, S = 2, Delta = 1, tau = 0: key logit of token 1 above token 0, no local bias
    tab = np.zeros((1, 2, 1, 2, 1))  # (M, S, Δ, S, Δ)
    tab[0, :, 0, 1, 0] = 1.0
    z1 = np.zeros((1, 2, 1, 1))
    model = lg.OneLayerLT(
        tab, np.zeros((1, 1)), z1 + 1, z1, np.zeros((1, 1, 1)), np.zeros((1, 1)),
        np.zeros((1, 1, 1)), np.ones((1, 1)),
    )  # fmt: skip
    assert model.keys_see_tokens
    assert not model.reads_far_counts(np.array([0, 1, 0, 0]))  # one far class (token 1) only
    assert model.reads_far_counts(np.array([0, 1, 0, 1]))  # token 1 far and local


def test_one_layer_lt_rejects_bad_table_shape():
    z = np.zeros((1, 2, 3, 3))
    with pytest.raises(ValueError, match="logit_table"):
        lg.OneLayerLT(np.zeros((1, 2, 3, 2)), np.zeros((1, 1)), z, z, np.zeros((1, 1, 3)),
                      np.zeros((1, 1)), np.zeros((1, 3, 1)), np.zeros((1, 3)))  # fmt: skip


def test_block_subsample_is_a_subsequence_of_about_n():
    g = gen(4)
    sizes = []
    for _ in range(20):
        idx = lg.block_subsample(20_000, 1000, 2, g)
        assert np.all(np.diff(idx) > 0) and idx.min() >= 0 and idx.max() < 20_000
        sizes.append(idx.size)
    assert 600 < np.mean(sizes) < 1400


def test_suffix_statistic_average_brute_force():
    g = gen(5)
    x, U = g.integers(0, 2, 30), g.standard_normal((8, 2))
    vals = []
    for t in range(2, 30):
        code = x[t - 2] * 4 + x[t - 1] * 2 + x[t]
        mu = np.bincount(x[: t + 1], minlength=2) / (t + 1)
        vals.append(np.tanh(U[code] @ mu))
    assert lg.suffix_statistic_average(x, U, 2) == pytest.approx(np.mean(vals))


# --------------------------------------------------------------------------- toy thresholds
def _brute_simple(N):
    return sorted({Fraction(2 * k, T) - 1 for T in range(1, N + 1) for k in range(T + 1)})


@pytest.mark.parametrize("N", range(1, 11))
def test_attainable_stats_simple_brute_force(N):
    np.testing.assert_allclose(
        lg.attainable_stats("simple", N), [float(f) for f in _brute_simple(N)]
    )


@pytest.mark.parametrize("N,D,k", [(10, 3, 1), (10, 2, 0), (7, 5, 2)])
def test_attainable_stats_modp_brute_force(N, D, k):
    vals = set()
    for T in range(1, N + 1):
        den = sum(1 for t in range(1, T + 1) if t % D == k)
        if den:
            vals |= {Fraction(c, den) for c in range(den + 1)}
    np.testing.assert_allclose(
        lg.attainable_stats("modp", N, Delta=D, k=k), [float(f) for f in sorted(vals)]
    )


def test_min_train_length_simple_closed_form():
    for L, eps in ((1.0, 0.1), (2.0, 0.07), (3.0, 0.5)):
        assert lg.min_train_length("simple", eps, L) == int(np.ceil(2 * L / eps))


def test_bound_shapes():
    assert lg.thm41_N(8, 1.0, 1.0, 1, 2, 1, 1.0) == 256.0
    assert lg.thm52_N(2.0, 0.5, 1.0, 0.5, form="power") == pytest.approx(4.0**3)
    assert lg.thm52_N(2.0, 0.25, 1.0, 0.5, form="product") == pytest.approx(2.0 * 2.0**4)


# --------------------------------------------------------------------------- Dirichlet
def test_absence_probability_closed_forms():
    # alpha = (1, 1): pi_s ~ Uniform(0, 1), so E(1 - pi)^T = 1 / (T + 1)
    T = np.array([0, 1, 5, 100])
    np.testing.assert_allclose(lg.absence_probability(T, 1.0, 2.0), 1 / (T + 1))


def test_sample_dirichlet_strings_shape_and_range():
    x = lg.sample_dirichlet_strings(7, 13, [0.5, 1.0, 2.0], gen(6))
    assert x.shape == (7, 13) and x.min() >= 0 and x.max() <= 2


# --------------------------------------------------------------------------- tiny transformer
def test_counts_form_equals_explicit_attention():
    g = gen(7)
    with torch.no_grad():
        m = lg.StackedAttentionReadout(3, 2, 4, 8, torch.Generator().manual_seed(0))
        tok = torch.from_numpy(g.integers(0, 2, (3, 10, 12)))
        lens = torch.from_numpy(g.integers(1, 13, (3, 10)))
        mask = torch.arange(12)[None, None, :] < lens[..., None]
        ones = (tok * mask).sum(-1)
        counts = torch.stack([lens - ones, ones], -1).double()
        last = torch.gather(tok, 2, (lens - 1)[..., None])[..., 0]
        assert torch.allclose(m(tok, lens), m.from_counts(counts, last), atol=1e-10)


def test_counts_form_with_periodic_codes_and_attention_mass():
    g = gen(9)
    per = np.array([1, 2, 5, 3])
    with torch.no_grad():
        m = lg.StackedAttentionReadout(4, 2, 4, 8, torch.Generator().manual_seed(1), periods=per)
        T = 13
        tok = g.integers(0, 2, (4, 10, T))
        lens = g.integers(1, T + 1, (4, 10))
        cnt = np.zeros((4, 10, 2, 5))
        for i in range(4):
            for b in range(10):
                for j in range(1, lens[i, b] + 1):
                    cnt[i, b, tok[i, b, j - 1], j % per[i]] += 1
        last = tok[np.arange(4)[:, None], np.arange(10)[None, :], lens - 1]
        args = (
            torch.from_numpy(cnt),
            torch.from_numpy(last),
            torch.from_numpy(lens % per[:, None]),
        )
        explicit = m(torch.from_numpy(tok), torch.from_numpy(lens))
        assert torch.allclose(explicit, m.from_counts(*args), atol=1e-10)
        att = m.from_counts(*args, attention=True)
        assert att.shape == (4, 10, 2, 5)
        assert torch.allclose(att.sum((2, 3)), torch.ones(4, 10, dtype=att.dtype))
        assert torch.all(att[torch.from_numpy(cnt) == 0] == 0)


def test_task_batch_modp_targets_and_counts():
    counts, last, res, L, y = lg.task_batch(["modp", "simple"], [5, 8.0], [12, 9], 200, gen(10))
    assert counts.shape == (2, 200, 2, 5)
    np.testing.assert_array_equal(counts.sum((2, 3)), L)
    npos = counts[0].sum(1)  # (b, Δ): positions per residue
    for b in range(200):
        T = L[0, b]
        expect = [sum(1 for t in range(1, T + 1) if t % 5 == r) for r in range(5)]
        np.testing.assert_array_equal(npos[b], expect)
    np.testing.assert_allclose(y[0], counts[0, :, 1, 1] / npos[:, 1])
    assert np.all(res[0] == L[0] % 5) and np.all(res[1] == 0)
    assert np.all(counts[1, :, :, 1:] == 0)  # SimpleTask uses residue 0 only
    # the last token is counted in its own class
    assert np.all(counts[0, np.arange(200), last[0], res[0]] >= 1)


def test_task_batch_bad_inputs():
    with pytest.raises(ValueError, match="tasks"):
        lg.task_batch(["kgram"], [2.0], [4], 8, gen(0))
    with pytest.raises(ValueError, match="Delta"):
        lg.task_batch(["modp"], [1.0], [4], 8, gen(0))
    with pytest.raises(ValueError, match="params"):
        lg.task_batch(["modp", "modp"], [2.0], [4, 4], 8, gen(0))
    with pytest.raises(ValueError, match="n_max"):
        lg.task_batch(["simple"], [2.0], [0], 8, gen(0))


def test_train_stacked_fits_modp_quickly():
    model = lg.train_stacked(
        ["modp"] * 2, [2, 3], np.array([8, 9]), 150, gen(12), torch.Generator().manual_seed(2),
        batch=64, dtype=torch.float32,
    )  # fmt: skip
    curve = lg.length_curve(model, ["modp"] * 2, [2, 3], np.array([[8], [9]]), 512, gen(13))
    assert curve.shape == (2, 1) and np.all(curve < 0.5)


def test_simple_task_batch_targets():
    counts, last, L, y = lg.simple_task_batch([2.0, 8.0], [4, 9], 50, gen(8))
    assert np.all(counts.sum(-1) == L) and np.all(L >= 1) and np.all(L[1] <= 9)
    m = (counts[..., 0] - counts[..., 1]) / L
    np.testing.assert_allclose(y, np.sin(np.array([2.0, 8.0])[:, None] * m))
    assert np.all(counts[np.arange(2)[:, None], np.arange(50)[None, :], last] >= 1)


def test_block_subsample_refuses_n_above_half_T():
    with pytest.raises(ValueError, match="n must be <= T/2"):
        lg.block_subsample(1000, 600, 2, gen(6))


def test_attainable_stats_has_no_near_duplicates():
    N = 60
    exact = {Fraction(2 * k, T) - 1 for T in range(1, N + 1) for k in range(T + 1)}
    v = lg.attainable_stats("simple", N)
    assert v.size == len(exact)
    assert np.diff(v).min() > 1 / N**2


def test_modp_min_train_length_closed_form():
    for D in (2, 3, 5):
        for r in (7, 20):
            assert lg.min_train_length("modp", 1 / r, 1.0, Delta=D) == 1 + D * (r - 1)


def test_bootstrap_slopes_exact_power_law_and_shape():
    x = np.array([10.0, 100.0, 1000.0])
    v = np.broadcast_to(x[None, :, None] ** -0.7, (4, 3, 5))
    s = lg.bootstrap_loglog_slopes(x, v, gen(7), n_boot=20)
    assert s.shape == (20,)
    np.testing.assert_allclose(s, -0.7, atol=1e-12)
    s_rms = lg.bootstrap_loglog_slopes(x, v, gen(7), rms=True, n_boot=5)
    np.testing.assert_allclose(s_rms, -0.7, atol=1e-12)
    with pytest.raises(ValueError, match="weights"):
        lg.bootstrap_loglog_slopes(x, v, gen(7), weights=-np.ones((4, 5)))


def test_block_subsample_keeps_at_least_one_window():
    g = gen(8)
    assert min(lg.block_subsample(2000, 4, 2, g).size for _ in range(300)) >= 3
