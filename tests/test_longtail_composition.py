"""Unit tests for lib.papers.longtail_composition (chapter 13), following item (g) of the plan."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.papers import longtail_composition as lc
from lib.papers.longtail_composition import nets


def gen(seed=0):
    return np.random.default_rng(seed)


# --------------------------------------------------------------------------- data model
@given(st.integers(20, 400), st.floats(0.5, 1.0), st.floats(1.0, 3.0))
@settings(max_examples=30, deadline=None)
def test_powerlaw_sums_to_s_when_nothing_is_clipped(d, frac, alpha):
    s = frac  # s <= 1 and Z >= 1 keep every p_i <= 1
    p = lc.powerlaw_probs(d, s, alpha)
    assert p.max() <= 1 and np.all(np.diff(p) <= 0)
    assert np.isclose(p.sum(), s)


def test_powerlaw_clipping_lowers_the_sparsity():
    p = lc.powerlaw_probs(10_000, 5, 2.0)
    assert p[0] == 1.0 and p.sum() < 5


def test_sampler_marginals_within_4_se():
    p = lc.powerlaw_probs(50, 3, 1.0)
    X = lc.sample_longtail(20_000, p, gen(1))
    assert set(np.unique(X)) <= {-1.0, 0.0, 1.0}
    freq = (X != 0).mean(axis=0)
    se = np.sqrt(p * (1 - p) / 20_000) + 1e-12
    assert np.all(np.abs(freq - p) <= 4 * se + 1e-9)
    assert abs(X[X != 0].mean()) < 4 / np.sqrt((X != 0).sum())  # symmetric signs


def test_rare_columns_draw_distinct_rows():
    # 3000 rare columns (p = 0.05) over n = 4 rows: independent row draws would collide in
    # about a third of the columns with two or more entries; the support must have none
    p = np.full(3000, 0.05)
    rows, cols = lc._support(4, p, gen(41))
    assert np.unique(cols * 4 + rows).size == rows.size
    assert np.bincount(cols, minlength=3000).max() >= 2


def test_rare_columns_are_exact_bernoulli():
    # rare columns (p <= 0.05) are drawn by count and rows; each entry must be Bern(p_j),
    # every row equally likely, independent across columns
    p = np.array([0.5, 0.05, 0.04, 0.01])
    n, reps = 20, 4000
    g = gen(40)
    on = np.stack([lc.sample_longtail(n, p, g) != 0 for _ in range(reps)])  # (reps, n, d)
    counts = on.sum(axis=1)  # (reps, d): Bin(n, p_j)
    assert np.all(np.abs(counts.mean(axis=0) - n * p) < 4 * np.sqrt(n * p * (1 - p) / reps))
    freq = on.mean(axis=0)  # (n, d)
    assert np.all(np.abs(freq - p) < 4 * np.sqrt(p * (1 - p) / reps))
    for a, b in ((0, 1), (1, 2)):
        joint = (on[:, :, a] & on[:, :, b]).mean()
        assert abs(joint - p[a] * p[b]) < 4 * np.sqrt(p[a] * p[b] / (reps * n))


def test_common_cutoff_counts_frequent_features():
    p = np.array([0.5, 0.02, 0.011, 0.009, 0.001])
    assert lc.common_cutoff(p, 1000, c=10) == 3


# --------------------------------------------------------------------------- min-norm solution
def test_gd_from_zero_reaches_min_norm():
    X = lc.sample_longtail(20, lc.powerlaw_probs(200, 4, 1.0), gen(2))
    y = gen(3).standard_normal(20)
    lr = 0.9 * 20 / (2 * np.linalg.norm(X, 2) ** 2)
    b_gd = lc.gd_from_zero(X, y, lr=lr, steps=40_000)
    b = lc.min_norm_solution(X, y)
    assert np.linalg.norm(b_gd - b) / np.linalg.norm(b) < 1e-6
    assert np.allclose(b, np.linalg.pinv(X) @ y)


@pytest.mark.parametrize("n,d", [(30, 200), (80, 60)])  # SVD route and Gram route
def test_min_norm_interpolates_full_row_rank_and_matches_pinv(n, d):
    X = gen(4).standard_normal((n, d))
    y = gen(5).standard_normal((n, 2))
    b = lc.min_norm_solution(X, y)
    assert np.allclose(b, np.linalg.pinv(X) @ y, atol=1e-9)
    if n <= d:
        assert np.allclose(X @ b, y)


def test_gram_route_agrees_with_pinv_on_a_long_tail_design():
    X = lc.sample_longtail(40, lc.powerlaw_probs(300, 4, 0.8), gen(6))
    assert np.count_nonzero(np.any(X != 0, axis=0)) > 40  # forces the Gram route
    y = gen(7).standard_normal(40)
    assert np.allclose(lc.min_norm_solution(X, y), np.linalg.pinv(X) @ y, atol=1e-9)


def test_min_norm_and_mask_equals_the_two_functions():
    X = lc.sample_longtail(40, lc.powerlaw_probs(300, 4, 1.5), gen(17))
    Y = gen(18).standard_normal((40, 3))
    b, mask = lc.min_norm_and_mask(X, Y)
    assert np.array_equal(b, lc.min_norm_solution(X, Y))
    assert np.array_equal(mask, lc.identifiable_mask(X))


def test_unseen_features_get_zero():
    X = lc.sample_longtail(30, lc.powerlaw_probs(500, 3, 1.5), gen(8))
    b = lc.min_norm_solution(X, gen(9).standard_normal(30))
    assert np.all(b[lc.feature_counts(X) == 0] == 0)


# --------------------------------------------------------------------------- identifiability
@pytest.mark.parametrize("seed", range(3))
def test_identifiable_mask_agrees_with_null_space_brute_force(seed):
    X = lc.sample_longtail(25, lc.powerlaw_probs(60, 3, 1.2), gen(seed))
    mask = lc.identifiable_mask(X)
    _, s, Vt = np.linalg.svd(X)
    null = Vt[np.count_nonzero(s > 1e-10) :]
    moved = np.abs(null.T @ gen(seed + 10).standard_normal(null.shape[0])) > 1e-9
    assert np.array_equal(~mask, moved)


@pytest.mark.parametrize("seed", range(3))
def test_peeled_features_are_identifiable(seed):
    p = lc.powerlaw_probs(400, 4, 2.0)
    X = lc.sample_longtail(120, p, gen(seed))
    k = lc.common_cutoff(p, 120, c=10)
    peeled = lc.peel_recoverable(X, k)
    assert np.all(lc.identifiable_mask(X)[peeled])
    y = X @ np.linspace(1, 2, 400)
    b = lc.min_norm_solution(X, y)
    assert np.allclose(b[peeled], np.linspace(1, 2, 400)[peeled])


def _peel_reference(X, k):
    # the plain definition on all columns: common block if its common-only rows have rank k,
    # then the single unknown feature of every row with exactly one
    on = X != 0
    known = np.zeros(X.shape[1], dtype=bool)
    if k and np.linalg.matrix_rank(X[~on[:, k:].any(axis=1)][:, :k]) == k:
        known[:k] = True
    while True:
        unknown = on & ~known
        new = unknown[np.count_nonzero(unknown, axis=1) == 1].any(axis=0)
        if not new.any():
            return known
        known |= new


@pytest.mark.parametrize("seed,alpha,k", [(0, 2.0, 6), (1, 1.2, 10), (2, 1.5, 0), (3, 0.8, 40)])
def test_peeling_matches_the_plain_definition(seed, alpha, k):
    X = lc.sample_longtail(60, lc.powerlaw_probs(500, 4, alpha), gen(seed))
    assert np.array_equal(lc.peel_recoverable(X, k), _peel_reference(X, k))


def test_peeling_on_a_hand_made_design():
    # rows: {1}, {1,2}, {2,3}, {3,4,5}: features 1, 2, 3 are peeled in turn; 4 and 5 are not
    X = np.zeros((4, 5))
    X[0, 0] = X[1, [0, 1]] = X[2, [1, 2]] = X[3, [2, 3, 4]] = 1
    assert lc.peel_recoverable(X, 0).tolist() == [True, True, True, False, False]
    assert lc.identifiable_mask(X).tolist() == [True, True, True, False, False]


def test_clean_singletons():
    X = np.zeros((4, 6))
    X[0, [0, 2]] = 1  # tail feature 2 alone in its row: clean singleton
    X[1, [0, 3, 4]] = 1  # two tail features in one row: not clean
    X[2, [1, 5]] = X[3, [1, 5]] = 1  # feature 5 seen twice
    assert lc.clean_singletons(X, 2).tolist() == [2]


# --------------------------------------------------------------------------- losses
def test_id_loss_exact_matches_monte_carlo():
    p = lc.powerlaw_probs(30, 3, 1.0)
    delta = gen(10).standard_normal(30)
    X = lc.sample_longtail(200_000, p, gen(11))
    mc = np.mean((X @ delta) ** 2)
    exact = lc.id_loss_exact(delta, np.zeros(30), p)
    assert abs(mc - exact) < 4 * np.std((X @ delta) ** 2) / np.sqrt(200_000)


def test_missing_mass_closed_form():
    p = np.array([0.5, 0.1])
    assert np.isclose(lc.missing_mass(p, np.array([1.0, 2.0]), 3), 0.5 * 0.125 + 0.1 * 4 * 0.9**3)


def test_tail_count_probs_against_enumeration():
    p = np.array([0.9, 0.3, 0.2, 0.1])
    out = lc.tail_count_probs(p, 1)
    q = p[1:]
    probs = np.zeros(4)
    for bits in range(8):
        b = [(bits >> j) & 1 for j in range(3)]
        probs[sum(b)] += np.prod([q[j] if b[j] else 1 - q[j] for j in range(3)])
    assert np.isclose(out["p0"], probs[0]) and np.isclose(out["p1"], probs[1])
    assert np.isclose(out["p2plus"], probs[2:].sum())
    assert np.isclose(out["poisson_p2plus"], 1 - np.exp(-0.6) * 1.6)


def test_ood_excess_loss_matches_its_sampler():
    p = lc.powerlaw_probs(40, 3, 1.5)
    delta = gen(12).standard_normal(40)
    feats = np.arange(10, 30)
    X = lc.ood_sample(100_000, p, 5, feats, 2, gen(13))
    assert np.all(np.count_nonzero(X[:, 5:], axis=1) == 2)
    r = (X @ delta) ** 2
    exact = lc.ood_excess_loss(delta, p, 5, feats, 2)
    assert abs(r.mean() - exact) < 4 * r.std() / np.sqrt(r.size)


def test_sparse_ood_sample_equals_the_dense_one():
    p = lc.powerlaw_probs(60, 3, 1.5)
    feats = np.arange(20, 40)
    dense = lc.ood_sample(500, p, 6, feats, 2, gen(19))
    sparse = lc.ood_sample(500, p, 6, feats, 2, gen(19), sparse=True)
    assert sparse.shape == dense.shape and np.array_equal(sparse.toarray(), dense)
    delta = gen(20).standard_normal((60, 2))
    assert np.allclose(sparse @ delta, dense @ delta)


# --------------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize(
    "call,exc,word",
    [
        (lambda: lc.powerlaw_probs(10, 5, 0.0), ValueError, "alpha"),
        (lambda: lc.powerlaw_probs(10, -1, 1.0), ValueError, "s"),
        (lambda: lc.powerlaw_probs(10, 11, 1.0), ValueError, "s"),
        (lambda: lc.powerlaw_probs(2.5, 1, 1.0), TypeError, "d"),
        (lambda: lc.sample_longtail(5, [0.5, 1.5], gen()), ValueError, "p"),
        (lambda: lc.sample_longtail(5, [0.5], 3), TypeError, "rng"),
        (lambda: lc.min_norm_solution(np.ones((3, 4)), np.ones(4)), ValueError, "y"),
        (lambda: lc.gd_from_zero(np.ones((3, 4)), np.ones(3), lr=0.0, steps=1), ValueError, "lr"),
        (lambda: lc.peel_recoverable(np.ones((3, 4)), 5), ValueError, "k"),
        (lambda: lc.ood_excess_loss(np.ones(4), np.full(4, 0.1), 1, [2], 2), ValueError, "t"),
        (lambda: lc.ood_excess_loss(np.ones(4), np.full(4, 0.1), 2, [1, 3], 1), ValueError, "feat"),
        (lambda: lc.ood_sample(3, np.full(4, 0.1), 1, [2, 2], 1, gen()), ValueError, "feat"),
        (
            lambda: lc.ood_sample(3, np.full(4, 0.1), 1, [2, 3], 1, gen(), sparse=1),
            TypeError,
            "sparse",
        ),
        (lambda: lc.min_norm_and_mask(np.ones((3, 4)), np.ones(3), tol=0.0), ValueError, "tol"),
        (lambda: nets.render_digits(np.array([10]), gen()), ValueError, "labels"),
        (lambda: nets.zipf_digit_probs(-1.0), ValueError, "a"),
    ],
)
def test_bad_inputs_name_the_argument(call, exc, word):
    with pytest.raises(exc, match=word):
        call()


# --------------------------------------------------------------------------- networks
def test_digit_data_shapes_and_targets():
    D = nets.make_sum_data(50, 20, gen(14), per_digit=3)
    x, y = D["train"]
    assert x.shape == (60, 3, 64) and y.shape == (60,)
    assert float(x.min()) >= 0 and float(x.max()) <= 1
    xp, yp = D["pair"]
    assert xp.shape == (20, 3, 64) and float(yp.max()) <= 9 + 8 + 4


def test_ensemble_members_are_independent():
    torch.manual_seed(0)
    m = nets.SumNet(2, 4, hidden=8)
    x = torch.rand(2, 5, 3, 4)
    out = m(x)
    with torch.no_grad():
        m.g.weights[0][1].add_(1.0)
    out2 = m(x)
    assert torch.equal(out[0], out2[0]) and not torch.equal(out[1], out2[1])


def test_sum_net_is_channel_additive():
    torch.manual_seed(1)
    m = nets.SumNet(1, 4, hidden=8)
    x = torch.rand(1, 1, 3, 4)
    parts = sum(m.g(x[:, :, c, :]).squeeze(-1) for c in range(3))
    assert torch.allclose(m(x), parts, atol=1e-6)


def test_training_reduces_loss_and_weight_decay_shrinks():
    D = nets.make_sum_data(60, 10, gen(15), per_digit=3)
    x, y = D["train"]
    torch.manual_seed(2)
    m = nets.SumNet(2, 64, hidden=16)
    before = nets.ensemble_mse(m, x, y, 2)
    nets.train_ensemble(
        m,
        x,
        y,
        weight_decay=[0.0, 0.0],
        lr=3e-3,
        epochs=20,
        batch=32,
        generator=torch.Generator().manual_seed(0),
    )
    assert np.all(nets.ensemble_mse(m, x, y, 2) < before)
    with pytest.raises(ValueError, match="weight_decay"):
        nets.train_ensemble(m, x, y, weight_decay=[0.0], generator=torch.Generator())


def test_gram_and_svd_branches_share_the_rank_rule():
    # singular values 1, 0.5, 3e-6: above the Gram floor 1e-6 * s_max, so both branches keep 3
    # (thresholding the Gram eigenvalues w > 1e-10 * w_max, i.e. s > 1e-5 s_max, dropped it)
    g = gen(21)
    U = np.linalg.qr(g.standard_normal((3, 3)))[0]
    V = np.linalg.qr(g.standard_normal((6, 3)))[0]
    X = U @ np.diag([1.0, 0.5, 3e-6]) @ V.T  # 3 rows, 6 seen columns: Gram branch
    _, _, s_gram, _ = lc._row_space(X, 1e-10)
    _, _, s_svd, _ = lc._row_space(X.T, 1e-10)  # 6 rows, 3 columns: SVD branch
    assert s_gram.size == 3 and s_svd.size == 3
    np.testing.assert_allclose(s_gram[::-1], s_svd, rtol=1e-4)
    # an exactly repeated row: the Gram branch must not keep the numerically-zero direction
    Xd = np.vstack([X, X[:1]])
    assert lc._row_space(Xd, 1e-10)[2].size == 3


def test_paired_training_keeps_equal_members_equal():
    D = nets.make_sum_data(40, 10, gen(16), per_digit=3, n_glyphs=25)
    x, y = D["train"]
    assert x.shape[0] == 65 and D["glyph_rows"].size == 25
    assert float(D["pair"][1].max()) <= 9 + 9 + 4
    torch.manual_seed(3)
    m = nets.SumNet(2, 64, hidden=8)
    with torch.no_grad():
        for par in m.parameters():
            par[1:] = par[:1]
    nets.train_ensemble(
        m,
        x,
        y,
        weight_decay=[0.0, 0.0],
        epochs=3,
        batch=16,
        generator=torch.Generator().manual_seed(1),
        paired=True,
    )
    for par in m.parameters():
        assert torch.equal(par[0], par[1])
    with pytest.raises(ValueError, match="even"):
        nets.train_ensemble(
            nets.SumNet(3, 64, hidden=8),
            x,
            y,
            weight_decay=[0.0, 0.0, 1.0],
            generator=torch.Generator(),
            paired=True,
        )
    with pytest.raises(ValueError, match="y"):
        nets.ensemble_mse(m, x, y[:-1], 2)
