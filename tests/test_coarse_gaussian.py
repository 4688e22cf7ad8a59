"""Unit tests for lib.coarse_gaussian (chapter 03), following section (g) of the brief."""

import numpy as np
import pytest
from scipy import stats

from lib.papers import coarse_gaussian as cg


def gen(seed=0):
    return np.random.default_rng(seed)


def unit_grid(d=2, rotation=None):
    return cg.GridPartition([np.arange(-3, 3.01, 1.0)] * d, rotation=rotation)


# --------------------------------------------------------------------------- grids
def test_grid_log_prob_matches_monte_carlo():
    g = gen(1)
    Q, _ = np.linalg.qr(g.standard_normal((2, 2)))
    grid = unit_grid(2, Q)
    mu = np.array([0.4, -0.3])
    N = 200_000
    ids = grid.cell_id(g.standard_normal((N, 2)) + mu)
    cells, counts = np.unique(ids, return_counts=True)
    p = np.exp(grid.log_prob(mu, cells))
    se = np.sqrt(p * (1 - p) / N)
    assert np.all(np.abs(counts / N - p) <= 3 * se + 1e-4)
    assert np.exp(grid.all_log_probs(mu)).sum() == pytest.approx(1, abs=1e-12)


def test_log_diff_ndtr_far_tails():
    # no underflow far in either tail, and agreement with direct differences where those are
    # accurate
    v = cg.log_diff_ndtr(np.array([40.0, -41.0, -1.0]), np.array([41.0, -40.0, 2.0]))
    assert np.all(np.isfinite(v))
    assert v[0] == pytest.approx(stats.norm.logsf(40.0), rel=1e-6)
    assert v[2] == pytest.approx(np.log(stats.norm.cdf(2) - stats.norm.cdf(-1)), rel=1e-12)


def test_grid_moments_and_fisher_exact():
    grid = unit_grid(1)
    mu = np.array([0.2])
    prob, means, covs = grid.cell_moments(mu)
    assert prob.sum() == pytest.approx(1, abs=1e-12)
    assert np.sum(prob * means[:, 0]) == pytest.approx(0.2, abs=1e-12)  # tower property
    # law of total variance: 1 = E Var(x|P) + Var(E[x|P]) = (1 - F) + F
    F = cg.fisher_grid_exact(grid, mu)[0, 0]
    assert np.sum(prob * covs[:, 0, 0]) == pytest.approx(1 - F, abs=1e-12)
    assert 0 < F < 1


def test_grid_sampler_stays_in_cell_and_box():
    g = gen(2)
    Q, _ = np.linalg.qr(g.standard_normal((3, 3)))
    grid = cg.GridPartition([np.arange(-2, 2.01, 0.5)] * 3, rotation=Q)
    cells = g.integers(0, grid.n_cells, size=500)
    y = grid.sample_truncated(np.zeros(3), cells, g, R=4.0)
    assert np.array_equal(grid.cell_id(y), cells)
    assert np.all(np.abs(y @ Q) <= 4.0 + 1e-12)


def test_grid_mle_recovers_mean():
    g = gen(3)
    grid = unit_grid(3)
    mu = np.array([0.3, -0.4, 1.1])
    x = g.standard_normal((20000, 3)) + mu
    assert np.allclose(cg.mle_grid(grid, grid.cell_id(x)), mu, atol=0.05)


# --------------------------------------------------------------------------- arrangements
def test_arrangement_sampler_never_leaves_its_cell_and_is_exact():
    g = gen(4)
    part, _ = cg.slab_partition(3, 5, 3, g)
    mu = np.array([0.2, 0.0, -0.3])
    cells = part.cell_id(g.standard_normal((300, 3)) + mu)
    st = {}
    y = part.sample_truncated(mu, cells, g, R=6.0, stats_out=st)
    assert np.array_equal(part.cell_id(y), cells)
    assert np.all(np.abs(y) <= 6.0)
    # distribution: one large cell, 4000 independent draws against a fresh Monte Carlo mean
    c, p, m, C, n = part.cell_moments(mu, 400_000, g)
    k = np.argmax(p)
    draws = part.sample_truncated(mu, np.full(4000, c[k]), g)
    z = (draws.mean(0) - m[k]) / np.sqrt(draws.var(0) / 4000 + np.diag(C[k]) / n[k])
    assert np.all(np.abs(z) < 4.5)


def test_gibbs_stays_in_cell_and_chebyshev_centre_is_inside():
    g = gen(5)
    part, _ = cg.slab_partition(2, 4, 2, g)
    cell = int(part.cell_id(np.zeros((1, 2)))[0])
    x0, r = cg.chebyshev_centre(part, cell, R=5.0)
    assert r > 0 and part.cell_id(x0)[0] == cell
    y = cg.gibbs_sample(part, np.zeros(2), cell, 200, 3, g, R=5.0)
    assert np.all(part.cell_id(y) == cell) and np.all(np.abs(y) <= 5.0)


def test_slab_partition_is_invariant_along_its_direction():
    g = gen(6)
    part, V = cg.slab_partition(4, 7, 2, g)
    assert V.shape == (4, 2) and part.normal_rank() == 2
    X = g.standard_normal((1000, 4))
    assert np.array_equal(part.cell_id(X), part.cell_id(X + 3.7 * V[:, 0] - 1.2 * V[:, 1]))


def test_fisher_information_is_symmetric_psd_with_trace_at_most_d():
    g = gen(7)
    part, _ = cg.slab_partition(3, 6, 3, g)
    Fm, Fc = cg.fisher_information(part, np.zeros(3), 200_000, g)
    for F in (Fm, Fc):
        assert np.allclose(F, F.T)
        assert np.linalg.eigvalsh(F).min() > -1e-3
        assert np.trace(F) <= 3 + 1e-9
    grid_F = cg.fisher_grid_exact(unit_grid(3), np.array([0.1, 0.2, 0.3]))
    assert np.linalg.eigvalsh(grid_F).min() > 0 and np.trace(grid_F) < 3


def test_crn_log_prob_and_nll():
    g = gen(8)
    part, _ = cg.slab_partition(2, 3, 2, g)
    base = g.standard_normal((10000, 2))
    cells = part.cell_id(base)
    lp = part.log_prob(np.zeros(2), np.unique(cells), base=base)
    assert np.exp(lp).sum() == pytest.approx(1)
    assert cg.coarse_nll(part, np.zeros(2), cells, base=base) > 0
    with pytest.raises(ValueError, match="base"):
        cg.coarse_nll(part, np.zeros(2), cells)


# --------------------------------------------------------------------------- distances
def test_tv_gauss_limits():
    assert cg.tv_gauss([0.0, 1.0], [0.0, 1.0]) == 0
    assert cg.tv_gauss([0.0], [30.0]) == pytest.approx(1)
    assert cg.tv_gauss([0.0], [1.0]) == pytest.approx(2 * stats.norm.cdf(0.5) - 1, abs=1e-14)


def test_kl_and_tv_coarse():
    grid = unit_grid(2)
    a, b = np.array([0.1, 0.2]), np.array([-0.5, 0.4])
    assert cg.kl_coarse(grid, a, a) == pytest.approx(0, abs=1e-14)
    kl, tv = cg.kl_coarse(grid, a, b), cg.tv_coarse(grid, a, b)
    assert kl >= 2 * tv**2
    assert tv <= cg.tv_gauss(a, b) + 1e-12  # data processing
    alpha = cg.alpha_ratio(grid, a, np.array([b, b + 1]))
    assert np.all((alpha > 0) & (alpha <= 1))


# ------------------------------------------------------------------- by-construction properties
# Each is also shown as a `sanity` claim in book/03-coarse-gaussian-mean/identifiability.md.
def test_excess_likelihood_is_kl_and_grid_likelihood_rises():
    # 03/prop-4.1/kl-identity and 03/thm-3.1/grid-rises
    g = gen(12)
    Q, _ = np.linalg.qr(g.standard_normal((3, 3)))
    edges = [np.arange(-2, 2.01, 1.0), np.arange(-2, 2.01, 1.3), [-0.5, 0.5]]
    grid = cg.GridPartition(edges, rotation=Q)
    mu_star = np.array([0.3, -0.5, 0.4])
    L_star = cg.population_nll(grid, mu_star, mu_star)
    for mu in mu_star + g.normal(size=(5, 3)):
        excess = cg.population_nll(grid, mu_star, mu) - L_star
        assert excess == pytest.approx(cg.kl_coarse(grid, mu_star, mu), abs=1e-10)
    v = g.standard_normal(3)
    v /= np.linalg.norm(v)
    rise = [
        cg.population_nll(grid, mu_star, mu_star + t * v) - L_star for t in (-2.0, -0.3, 0.3, 2.0)
    ]
    assert min(rise) > 0


def test_grid_cell_covariances_are_below_identity():
    # 03/prop-4.2/variance-reduction-grid: exact truncated-normal covariances have eigenvalues < 1
    g = gen(13)
    Q, _ = np.linalg.qr(g.standard_normal((3, 3)))
    edges = [np.arange(-3, 3.01, 0.7), np.arange(-3, 3.01, 1.5), [0.0]]
    grid = cg.GridPartition(edges, rotation=Q)
    _, _, covs = grid.cell_moments(np.array([0.2, -1.0, 0.5]))
    eig = np.linalg.eigvalsh(covs)
    assert eig.max() < 1 and eig.min() > 0


def test_slab_fisher_is_singular_along_the_slab_direction():
    # 03/thm-3.1/slab-singular and 03/thm-3.1/null-direction (up to Monte Carlo noise ~ sqrt(2/N))
    g = gen(14)
    part, V = cg.slab_partition(3, 6, 2, g)
    v = V[:, 0]
    Fm, Fc = cg.fisher_information(part, np.array([0.3, -0.5, 0.4]), 100_000, g)
    assert np.linalg.eigvalsh(Fm)[0] < 1e-2 and abs(np.linalg.eigvalsh(Fc)[0]) < 3e-2
    assert abs(v @ Fm @ v) < 1e-2
    assert abs(np.linalg.eigh(Fm)[1][:, 0] @ v) > 0.95


def test_fisher_estimators_agree_by_total_covariance():
    # 03/thm-3.1/estimators-agree: Cov(E[x|P]) = I - E Cov(x|P) (law of total covariance), so
    # the two estimators differ by Monte Carlo noise only
    g = gen(15)
    part, _ = cg.slab_partition(3, 6, 3, g)
    Fm, Fc = cg.fisher_information(part, np.array([0.3, -0.5, 0.4]), 100_000, g)
    assert np.abs(Fm - Fc).max() < 3e-2


def test_crn_likelihood_is_exactly_flat_along_the_slab_direction():
    # 03/thm-3.1/flat-valley: with common random numbers no point changes cell along v, so the
    # likelihood is flat to the last bit
    g = gen(16)
    part, V = cg.slab_partition(3, 5, 2, g)
    mu = np.array([0.3, -0.5, 0.4])
    base = g.standard_normal((5000, 3))
    cells = np.unique(part.cell_id(base + mu))
    lp0 = part.log_prob(mu, cells, base=base)
    for t in (-3.0, -0.7, 1.1, 3.0):
        assert np.array_equal(part.log_prob(mu + t * V[:, 0], cells, base=base), lp0)


def test_alpha_decreases_under_nested_coarsening():
    # 03/alpha/decreasing: a coarser nested grid is a function of the finer one, so by data
    # processing its TV (hence the ratio, pointwise in mu) is no larger; here strictly smaller
    # at the infimum
    mu_star = np.array([0.2])
    mus = np.linspace(-3.8, 4.2, 81)
    mus = mus[np.abs(mus - 0.2) > 1e-6][:, None]
    ratios = [
        cg.alpha_ratio(cg.GridPartition([np.arange(-8, 8 + 1e-9, w)]), mu_star, mus)
        for w in (1.0, 2.0, 4.0)
    ]
    for fine, coarse in zip(ratios, ratios[1:]):
        assert np.all(coarse <= fine + 1e-12)
        assert coarse.min() < fine.min()


# --------------------------------------------------------------------------- estimators
def test_psgd_consistent_on_grid():
    g = gen(9)
    grid = unit_grid(2)
    mu = np.array([0.5, -0.2])
    cells = grid.cell_id(g.standard_normal((4000, 2)) + mu)
    est = cg.psgd_coarse_mean(grid, cells, D=3.0, R=8.0, epochs=3, batch=32, c=0.5, rng=g)
    assert np.allclose(est, mu, atol=0.1)


def test_interval_regression_equals_ols_for_points():
    g = gen(10)
    X = g.standard_normal((200, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + g.standard_normal(200)
    assert np.allclose(cg.interval_regression_mle(X, y, y), np.linalg.lstsq(X, y, rcond=None)[0])


def test_interval_regression_recovers_with_band():
    g = gen(11)
    w = np.array([0.6, -0.3, 0.2])
    X, lo, hi, _ = cg.friction_data(20000, w, (-1.0, 1.0), g)
    assert np.allclose(cg.interval_regression_mle(X, lo, hi), w, atol=0.04)
    assert np.allclose(cg.interval_regression_sgd(X, lo, hi, 2, 64, 0.5, g), w, atol=0.06)


# --------------------------------------------------------------------------- bad input
def test_bad_input_is_rejected_with_named_argument():
    with pytest.raises(ValueError, match="edges"):
        cg.GridPartition([np.array([0.0, 1.0, 1.0])])  # overlapping / empty cell
    with pytest.raises(ValueError, match="edges"):
        cg.GridPartition([np.array([1.0, 0.0])])
    with pytest.raises(TypeError, match="edges"):
        cg.GridPartition(np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="rotation"):
        cg.GridPartition([np.array([0.0])] * 2, rotation=np.ones((2, 2)))
    grid = unit_grid(2)
    with pytest.raises(ValueError, match="cells"):
        grid.log_prob(np.zeros(2), [grid.n_cells])
    with pytest.raises(ValueError, match="mu"):
        grid.log_prob(np.zeros(3), [0])
    with pytest.raises(ValueError, match="R must be at least D"):
        cg.psgd_coarse_mean(
            grid, np.array([0, 1]), D=3.0, R=2.0, epochs=1, batch=1, c=0.5, rng=gen()
        )
    with pytest.raises(ValueError, match="R"):
        grid.sample_truncated(np.zeros(2), [0], gen(), R=-1.0)
    with pytest.raises(ValueError, match="box"):
        grid.sample_truncated(
            np.zeros(2), [0], gen(), R=1.0
        )  # corner cell (-inf,-3]^2 misses the box
    with pytest.raises(ValueError, match="W"):
        cg.HyperplanePartition(np.zeros((2, 2)), np.zeros(2))
    with pytest.raises(ValueError, match="b must"):
        cg.HyperplanePartition(np.eye(2), np.zeros(3))
    with pytest.raises(ValueError, match="rank"):
        cg.slab_partition(2, 3, 3, gen())
    with pytest.raises(TypeError, match="rng"):
        grid.sample_truncated(np.zeros(2), [0], 7)
    with pytest.raises(ValueError, match="lo <= hi"):
        cg.interval_regression_mle(np.ones((2, 1)), np.array([1.0, 0.0]), np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="band"):
        cg.friction_data(10, np.ones(2), (1.0, -1.0), gen())
    with pytest.raises(ValueError, match="mus must differ"):
        cg.alpha_ratio(grid, np.zeros(2), np.zeros((1, 2)))
    with pytest.raises(TypeError, match="GridPartition"):
        cg.kl_coarse(cg.HyperplanePartition(np.eye(2), np.zeros(2)), np.zeros(2), np.ones(2))
    empty = cg.HyperplanePartition(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="empty interior"):
        cg.chebyshev_centre(empty, 3, R=5.0)  # x1 > 1 and x1 < 0
