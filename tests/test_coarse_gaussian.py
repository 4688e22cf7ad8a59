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
def test_psgd_one_pass_consistent_on_grid_and_arrangement():
    g = gen(9)
    mu = np.array([0.5, -0.2])
    for part in (unit_grid(2), cg.slab_partition(2, 4, 2, g)[0]):
        cells = part.cell_id(g.standard_normal((3 * 600, 2)) + mu).reshape(3, 600)
        est = cg.psgd_one_pass(part, cells, D=3.0, R=8.0, c=0.5, rng=g, checkpoints=[100, 600])
        assert est.shape == (2, 3, 2)
        assert np.all(np.abs(est[1] - mu) < 0.35)  # about 4 SD of sqrt(tr F^-2 / n)


def test_halfspace_oracle_is_exact_per_request_mean():
    # each request has its own mean; draws stay in their cell, and for a far-away cell (where
    # plain rejection would need ~1/p proposals) the draw mean matches Monte Carlo
    g = gen(17)
    part, _ = cg.slab_partition(3, 5, 3, g)
    mus = g.normal(scale=0.5, size=(400, 3))
    cells = part.cell_id(g.standard_normal((400, 3)) + mus)
    y = part.sample_truncated_many(mus, cells, g, R=8.0)
    assert np.array_equal(part.cell_id(y), cells) and np.all(np.abs(y) <= 8.0)
    mu = np.array([0.2, 0.0, -0.3])
    c, p, m, C, n = part.cell_moments(mu, 400_000, g)
    k = np.argmin(np.where(n >= 200, p, np.inf))  # a small cell with enough MC points
    draws = part.sample_truncated_many(np.tile(mu, (4000, 1)), np.full(4000, c[k]), g)
    z = (draws.mean(0) - m[k]) / np.sqrt(draws.var(0) / 4000 + np.diag(C[k]) / n[k])
    assert np.all(np.abs(z) < 4.5)


def test_grid_many_sampler_uses_one_mean_per_row():
    g = gen(18)
    grid = unit_grid(1)
    mus = np.array([[-2.0], [2.0]]).repeat(2000, axis=0)
    cells = np.full(4000, int(grid.cell_id(np.array([[0.5]]))[0]))  # the cell (0, 1]
    y = grid.sample_truncated_many(mus, cells, g)[:, 0]
    m = stats.truncnorm.mean([2.0, -2.0], [3.0, -1.0]) + np.array([-2.0, 2.0])
    assert abs(y[:2000].mean() - m[0]) < 0.03 and abs(y[2000:].mean() - m[1]) < 0.03


def test_sandwich_closed_forms():
    F = np.diag([0.25, 0.5, 1.0])
    # k = 1: F^-2; k -> inf: F^-1 (Cramer-Rao); in between F^-1 + (F^-2 - F^-1) / k
    assert np.allclose(cg.sgd_sandwich(F, 1), np.diag([16.0, 4.0, 1.0]))
    assert np.allclose(cg.sgd_sandwich(F, 4), np.diag([4 + 12 / 4, 2 + 2 / 4, 1.0]))
    # the finite-n linear prediction tends to tr(Sigma_k) / n
    for k in (1, 3):
        big = cg.averaged_sgd_mse(F, [20_000], 2.0, k=k)[0] * 20_000
        assert big == pytest.approx(np.trace(cg.sgd_sandwich(F, k)), rel=0.05)
    # with constant steps eta = 1 and lambda = 1 the iterate is the last noise: delta_t = xi_t,
    # so the average of n iid N(0, 1) has variance 1/n (brute force on the recursion)
    one = cg.averaged_sgd_mse(np.eye(1), [10], 1.0, power=1e-12)[0]
    assert one == pytest.approx(0.1, rel=1e-9)
    # the initial error enters as a deterministic bias
    assert (
        cg.averaged_sgd_mse(F, [50], 0.5, delta0=np.ones(3))[0]
        > cg.averaged_sgd_mse(F, [50], 0.5)[0]
    )


def test_sandwich_matches_scalar_simulation():
    # a scalar Gaussian recursion with H = lam, noise variance s: brute-force simulation
    g = gen(19)
    lam, n, runs, c = 0.4, 300, 20000, 0.5
    eta = c / np.sqrt(np.arange(1, n + 1))
    delta = np.zeros(runs)
    acc = np.zeros(runs)
    for t in range(n):
        delta = (1 - eta[t] * lam) * delta + eta[t] * g.standard_normal(runs)
        acc += delta
    mse = np.mean((acc / n) ** 2)
    pred = cg.averaged_sgd_mse(np.array([[lam]]), [n], c)[0]
    assert mse == pytest.approx(pred, rel=4 * np.sqrt(2 / runs))


def test_mse_loglog_slope():
    ns = np.array([100.0, 200.0, 400.0, 800.0])
    E = np.outer(1 / ns, [0.5, 1.0, 1.5])
    slope, se = cg.mse_loglog_slope(ns, E)
    assert slope == pytest.approx(-1.0, abs=1e-12) and se >= 0


def test_voronoi_cells_and_slab_case():
    g = gen(20)
    sites = g.standard_normal((6, 3))
    part = cg.VoronoiPartition(sites)
    X = g.standard_normal((500, 3))
    brute = np.argmin(((X[:, None, :] - sites[None]) ** 2).sum(-1), axis=1)
    assert np.array_equal(part.cell_id(X), brute)
    # coplanar sites: every cell is a slab along the plane's normal
    v = np.array([0.0, 0.0, 1.0])
    flat = cg.VoronoiPartition(sites * [1.0, 1.0, 0.0])
    assert np.array_equal(flat.cell_id(X), flat.cell_id(X + 2.5 * v))
    Fm, _ = cg.fisher_information(flat, np.zeros(3), 100_000, g)
    assert abs(v @ Fm @ v) < 1e-3
    Fm, _ = cg.fisher_information(part, np.zeros(3), 100_000, g)
    assert np.linalg.eigvalsh(Fm)[0] > 0.05


def test_union_partition_law_and_sign_counterexample():
    edges, labels = np.array([-1.0, 1.0]), np.array([1, 0, 1])
    p, dp, F = cg.union_partition_law(edges, labels, 0.5)
    assert p.sum() == pytest.approx(1, abs=1e-15) and dp.sum() == pytest.approx(0, abs=1e-15)
    q, _, _ = cg.union_partition_law(edges, labels, -0.5)
    assert np.allclose(p, q, rtol=0, atol=1e-15)  # the sign of the mean is lost
    # F = p'^2 / (p (1 - p)) for two cells, against a finite difference of p
    h = 1e-6
    fd = (cg.union_partition_law(edges, labels, 0.5 + h)[0] - p) / h
    assert dp == pytest.approx(fd, abs=1e-5)
    assert F == pytest.approx(dp[0] ** 2 / (p[0] * p[1]), rel=1e-12) and F > 0
    # with one interval per cell the law is a grid's
    grid = cg.GridPartition([np.array([-1.0, 1.0])])
    p3, _, F3 = cg.union_partition_law(edges, np.array([0, 1, 2]), 0.3)
    assert np.allclose(p3, np.exp(grid.all_log_probs([0.3])))
    assert F3 == pytest.approx(cg.fisher_grid_exact(grid, [0.3])[0, 0], rel=1e-12)


def test_alpha_local_limit_is_the_nearest_edge():
    # the TV ratio near mu* tends to exp(-delta^2 / 2), delta = distance to the nearest edge
    for w, mu in ((0.5, 0.2), (2.0, 0.7), (4.0, -1.1)):
        part = cg.GridPartition([np.arange(-12, 12 + 1e-9, w)])
        r = cg.alpha_ratio(part, [mu], [[mu + 1e-5]])[0]
        delta = np.min(np.abs(part.edges[0] - mu))
        assert r == pytest.approx(np.exp(-(delta**2) / 2), abs=1e-4)


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
        cg.psgd_one_pass(grid, np.array([[0, 1]]), D=3.0, R=2.0, c=0.5, rng=gen())
    with pytest.raises(ValueError, match="cells"):
        cg.psgd_one_pass(grid, np.array([0, 1]), D=3.0, R=8.0, c=0.5, rng=gen())
    with pytest.raises(ValueError, match="checkpoints"):
        cg.psgd_one_pass(grid, np.array([[0, 1]]), D=3.0, R=8.0, c=0.5, rng=gen(), checkpoints=[3])
    with pytest.raises(ValueError, match="power"):
        cg.psgd_one_pass(grid, np.array([[0, 1]]), D=3.0, R=8.0, c=0.5, rng=gen(), power=1.5)
    with pytest.raises(ValueError, match="positive definite"):
        cg.averaged_sgd_mse(np.zeros((2, 2)), [10], 0.5)
    with pytest.raises(ValueError, match="symmetric"):
        cg.sgd_sandwich(np.array([[1.0, 0.5], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="sites"):
        cg.VoronoiPartition(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="labels"):
        cg.union_partition_law([0.0], np.array([0, 2]), 0.0)
    with pytest.raises(ValueError, match="mus"):
        cg.HyperplanePartition(np.eye(2), np.zeros(2)).sample_truncated_many(
            np.zeros((3, 2)), [0, 1], gen()
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
