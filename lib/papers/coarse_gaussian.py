r"""Gaussian mean estimation from coarse data (chapter 03).

Paper: A. Kalavasis, A. Mehrotra, M. Zampetakis, F. Zhou, Z. Zhu, *Mean Estimation from Coarse
Data: Characterizations and Efficient Algorithms*, ICLR 2026 (arXiv:2602.23341, OpenReview
``XV8hoBrPJ6``).

Chapter folder: ``book/03-coarse-gaussian-mean/``.

A hidden sample :math:`x\sim\mathcal N(\mu^\star,I_d)` is observed only through the cell
:math:`P\ni x` of a partition :math:`\mathcal P`. The population negative log-likelihood is
:math:`L(\mu)=\mathbb E_{P\sim\mathcal N_{\mathcal P}(\mu^\star)}[-\log\mathcal N(\mu,I;P)]`, with
gradient :math:`\mu-\mathbb E_P\,m_P(\mu)` (:math:`m_P` the mean of the Gaussian truncated to
``P``).

Three kinds of partitions:

- :class:`GridPartition`: products of intervals (a rounding grid), optionally in a rotated
  frame; cell probabilities, moments and truncated samples are exact (``log_ndtr``).
- :class:`HyperplanePartition`: the cells of an arrangement ``sign(W x - b)``; cell
  probabilities and moments by Monte Carlo bucketing with common random numbers, exact
  truncated samples by pooled rejection or by half-space rejection (vectorised over requests
  with different means), and a coordinate Gibbs sampler for comparison.
- :class:`VoronoiPartition`: nearest-site cells, by Monte Carlo bucketing.

The paper's estimator is one-pass projected SGD with the stochastic gradient ``mu - y``, ``y`` an
oracle draw from the Gaussian truncated to the observed cell (:func:`psgd_one_pass`). Its averaged
iterate has asymptotic covariance ``F^-1 (F + (I - F)/k) F^-1 / n`` for ``k`` draws per step
(:func:`sgd_sandwich`, :func:`averaged_sgd_mse`), which is ``F^-2 / n`` for the paper's ``k = 1``.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize, special, stats

from lib.validate import check_generator, positive_int, real, real_array


# --------------------------------------------------------------------------- helpers
def _as_points(X, d: int, name: str = "X") -> np.ndarray:
    X = np.asarray(X, dtype=float)
    if X.ndim == 1:
        X = X[None, :]
    if X.ndim != 2 or X.shape[1] != d:
        raise ValueError(f"{name} must have shape (N, {d}), got {X.shape}")
    return X


def log_diff_ndtr(a, b):
    r"""``log(Phi(b) - Phi(a))`` for ``a < b`` without underflow, also far in the tails."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
    # use the upper tail when both ends are positive: Phi(b)-Phi(a) = Phi(-a)-Phi(-b)
    flip = a > 0
    lo = np.where(flip, -b, a)
    hi = np.where(flip, -a, b)
    lhi, llo = special.log_ndtr(hi), special.log_ndtr(lo)
    with np.errstate(divide="ignore"):
        return lhi + np.log1p(-np.exp(llo - lhi))


def _interval_loglik(a, b):
    r"""``log(Phi(b) - Phi(a))`` and its derivative in a shift ``m`` of the mean.

    The derivative is ``(phi(a) - phi(b)) / (Phi(b) - Phi(a))`` (``a = lo - m``, ``b = hi - m``),
    both in logs so that far-tail intervals neither underflow nor divide 0 by 0.
    """
    ll = log_diff_ndtr(a, b)
    with np.errstate(over="ignore", invalid="ignore"):
        ga = np.where(np.isfinite(a), np.exp(stats.norm.logpdf(a) - ll), 0.0)
        gb = np.where(np.isfinite(b), np.exp(stats.norm.logpdf(b) - ll), 0.0)
    return ll, ga - gb


def tv_gauss(mu1, mu2) -> float:
    r"""Total variation between :math:`\mathcal N(\mu_1,I)` and :math:`\mathcal N(\mu_2,I)`.

    It equals :math:`2\Phi(\|\mu_1-\mu_2\|/2)-1`.
    """
    mu1, mu2 = np.asarray(mu1, dtype=float), np.asarray(mu2, dtype=float)
    if mu1.shape != mu2.shape or mu1.ndim != 1:
        raise ValueError(
            f"mu1 and mu2 must be vectors of the same length, got {mu1.shape} and {mu2.shape}"
        )
    r = np.linalg.norm(mu1 - mu2)
    # 2 Phi(r/2) - 1 = erf(r / (2 sqrt 2)), accurate for small r
    return float(special.erf(r / (2 * np.sqrt(2))))


# --------------------------------------------------------------------------- grids
class GridPartition:
    """Cells are products of intervals ``(e_{j,k-1}, e_{j,k}]`` in the frame ``z = Q^T x``.

    Parameters
    ----------
    edges : list of d increasing 1-d arrays
        Interior cut points per coordinate; coordinate ``j`` has ``len(edges[j]) + 1`` intervals,
        the outer two unbounded.
    rotation : (d, d) orthogonal matrix, optional
        ``Q``; the grid is axis-aligned in ``z = Q^T x``. Default: the identity.

    Cells are numbered by the flat (C-order) index of their interval multi-index.
    """

    def __init__(self, edges, rotation=None):
        if not isinstance(edges, (list, tuple)) or len(edges) == 0:
            raise TypeError("edges must be a non-empty list of 1-d arrays, one per coordinate")
        self.edges = []
        for j, e in enumerate(edges):
            e = np.asarray(e, dtype=float)
            if e.ndim != 1 or e.size == 0 or not np.all(np.isfinite(e)):
                raise ValueError(f"edges[{j}] must be a non-empty finite 1-d array")
            if np.any(np.diff(e) <= 0):
                raise ValueError(
                    f"edges[{j}] must be strictly increasing (cells must not overlap or be empty)"
                )
            self.edges.append(e)
        self.d = len(self.edges)
        if rotation is None:
            self.Q = np.eye(self.d)
        else:
            Q = np.asarray(rotation, dtype=float)
            if Q.shape != (self.d, self.d) or not np.allclose(Q.T @ Q, np.eye(self.d), atol=1e-10):
                raise ValueError(f"rotation must be an orthogonal {self.d}x{self.d} matrix")
            self.Q = Q
        self.shape = tuple(e.size + 1 for e in self.edges)
        self.n_cells = int(np.prod(self.shape))
        self._bounds = [np.concatenate([[-np.inf], e, [np.inf]]) for e in self.edges]

    # geometry
    def cell_id(self, X) -> np.ndarray:
        """Cell index of each row of ``X``."""
        Z = _as_points(X, self.d) @ self.Q
        idx = [np.searchsorted(self.edges[j], Z[:, j], side="left") for j in range(self.d)]
        return np.ravel_multi_index(idx, self.shape)

    def _check_cells(self, cells) -> np.ndarray:
        cells = np.asarray(cells)
        if (
            not np.issubdtype(cells.dtype, np.integer)
            or np.any(cells < 0)
            or np.any(cells >= self.n_cells)
        ):
            raise ValueError(f"cells must be integer cell indices in [0, {self.n_cells})")
        return cells

    def cell_bounds(self, cells):
        """Lower and upper bounds ``(N, d)`` of each cell in the rotated frame."""
        cells = self._check_cells(np.atleast_1d(cells))
        idx = np.unravel_index(cells, self.shape)
        lo = np.stack([self._bounds[j][idx[j]] for j in range(self.d)], axis=1)
        hi = np.stack([self._bounds[j][idx[j] + 1] for j in range(self.d)], axis=1)
        return lo, hi

    # exact probabilities and moments
    def log_prob(self, mu, cells) -> np.ndarray:
        """Exact ``log N(mu, I; P)`` for each cell (stable far in the tails)."""
        m = real_array(mu, "mu", shape=(self.d,)) @ self.Q
        lo, hi = self.cell_bounds(cells)
        return log_diff_ndtr(lo - m, hi - m).sum(axis=1)

    def all_log_probs(self, mu) -> np.ndarray:
        """``log N(mu, I; P)`` for every cell, in cell order."""
        return self.log_prob(mu, np.arange(self.n_cells))

    def cell_moments(self, mu, cells=None):
        """Exact probability, mean and covariance (original frame) of the truncated Gaussian.

        One of each per cell.
        """
        cells = (
            np.arange(self.n_cells) if cells is None else self._check_cells(np.atleast_1d(cells))
        )
        m = real_array(mu, "mu", shape=(self.d,)) @ self.Q
        lo, hi = self.cell_bounds(cells)
        a, b = lo - m, hi - m
        mean_z = stats.truncnorm.mean(a, b) + m
        var_z = stats.truncnorm.var(a, b)
        prob = np.exp(self.log_prob(mu, cells))
        means = mean_z @ self.Q.T
        covs = np.einsum("ij,nj,kj->nik", self.Q, var_z, self.Q)
        return prob, means, covs

    def sample_truncated(self, mu, cells, rng, R: float | None = None) -> np.ndarray:
        """Exact draws from ``N(mu, I)`` truncated to each cell.

        Each cell is intersected with ``|z_j| <= R`` when ``R`` is given.
        """
        check_generator(rng)
        m = real_array(mu, "mu", shape=(self.d,)) @ self.Q
        lo, hi = self.cell_bounds(cells)
        if R is not None:
            if not R > 0:
                raise ValueError(f"R must be positive, got {R}")
            lo, hi = np.maximum(lo, -R), np.minimum(hi, R)
            if np.any(lo >= hi):
                raise ValueError("a requested cell does not meet the box B(0, R): increase R")
        z = stats.truncnorm.rvs(lo - m, hi - m, loc=m, random_state=rng)
        return np.atleast_2d(z) @ self.Q.T

    def sample_truncated_many(
        self, mus, cells, rng, R: float | None = None, *, stats_out: dict | None = None
    ):
        """Exact draws, one per row: ``y_i ~ N(mus[i], I)`` truncated to ``cells[i]`` (∩ box).

        Inverse-CDF draws (``ndtr``/``ndtri``) per coordinate of the grid's frame; ``stats_out`` is
        unused (no fallback is ever needed).
        """
        check_generator(rng)
        mus = real_array(mus, "mus", ndim=2)
        if mus.shape[1] != self.d:
            raise ValueError(f"mus must have shape (P, {self.d}), got {mus.shape}")
        m = mus @ self.Q
        lo, hi = self.cell_bounds(cells)
        if R is not None:
            if not R > 0:
                raise ValueError(f"R must be positive, got {R}")
            lo, hi = np.maximum(lo, -R), np.minimum(hi, R)
            if np.any(lo >= hi):
                raise ValueError("a requested cell does not meet the box B(0, R): increase R")
        a, b = lo - m, hi - m
        # inverse CDF, in the upper tail for cells above the mean (no 1 - 1 cancellation)
        flip = a > 0
        c_lo = special.ndtr(np.where(flip, -b, a))
        c_hi = special.ndtr(np.where(flip, -a, b))
        z = special.ndtri(c_lo + rng.random(a.shape) * (c_hi - c_lo))
        z = np.clip(np.where(flip, -z, z), a, b) + m
        return z @ self.Q.T


def fisher_grid_exact(partition: GridPartition, mu) -> np.ndarray:
    r"""Exact Fisher information :math:`F=\sum_P p_P(m_P-\mu)(m_P-\mu)^\top` of a grid.

    Computed coordinatewise in the frame of the grid.

    Book: prf:`prop-03-likelihood` in book/03-coarse-gaussian-mean/identifiability.md
    (part 4).
    """
    if not isinstance(partition, GridPartition):
        raise TypeError("partition must be a GridPartition")
    mu = real_array(mu, "mu", shape=(partition.d,))
    m = mu @ partition.Q
    diag = np.empty(partition.d)
    for j, b in enumerate(partition._bounds):
        a_, b_ = b[:-1] - m[j], b[1:] - m[j]
        p = np.exp(log_diff_ndtr(a_, b_))
        dphi = stats.norm.pdf(a_) - stats.norm.pdf(b_)  # p * (mean - m)
        keep = p > 0
        diag[j] = np.sum(dphi[keep] ** 2 / p[keep])
    return partition.Q @ np.diag(diag) @ partition.Q.T


# ----------------------------------------------------------------------- Monte Carlo partitions
class _MonteCarloCells:
    """Shared Monte Carlo machinery for partitions known only through ``cell_id``."""

    d: int

    def cell_id(self, X) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    # Monte Carlo with common random numbers
    def cell_moments(self, mu, n_mc: int, rng, *, base=None):
        """Per-cell ``(cells, prob, mean, cov, count)`` from ``n_mc`` draws of ``N(mu, I)``.

        ``base`` (``(n_mc, d)`` standard normals) may be passed to use common random numbers.
        """
        mu = real_array(mu, "mu", shape=(self.d,))
        if base is None:
            check_generator(rng)
            base = rng.standard_normal((positive_int(n_mc, "n_mc"), self.d))
        X = base + mu
        ids = self.cell_id(X)
        cells, inv, counts = np.unique(ids, return_inverse=True, return_counts=True)
        N = X.shape[0]
        sums = np.zeros((cells.size, self.d))
        np.add.at(sums, inv, X)
        means = sums / counts[:, None]
        D = X - means[inv]
        covs = np.zeros((cells.size, self.d, self.d))
        np.add.at(covs, inv, D[:, :, None] * D[:, None, :])
        covs /= np.maximum(counts - 1, 1)[:, None, None]
        return cells, counts / N, means, covs, counts

    def log_prob(self, mu, cells, *, base) -> np.ndarray:
        """Monte Carlo ``log N(mu, I; P)`` from the standard-normal sample ``base``.

        ``base`` provides common random numbers. Cells without a hit get ``-inf``.
        """
        mu = real_array(mu, "mu", shape=(self.d,))
        base = _as_points(base, self.d, "base")
        ids = self.cell_id(base + mu)
        uniq, counts = np.unique(ids, return_counts=True)
        cells = np.atleast_1d(np.asarray(cells))
        pos = np.searchsorted(uniq, cells)
        pos = np.minimum(pos, uniq.size - 1)
        found = uniq[pos] == cells
        p = np.where(found, counts[pos] / base.shape[0], 0.0)
        with np.errstate(divide="ignore"):
            return np.log(p)


class VoronoiPartition(_MonteCarloCells):
    """Cells of the Voronoi diagram of ``sites``: ``x`` lies in the cell of its nearest site.

    Every cell is a convex polyhedron (an intersection of the half-spaces of the bisectors). A cell
    is a slab in direction ``v`` exactly when ``v`` is orthogonal to all its bisector normals
    ``s_i - s_j``; so the partition is made of ``v``-slabs iff the sites lie in a hyperplane
    orthogonal to ``v``.

    Book: prf:`thm-03-slabs` in book/03-coarse-gaussian-mean/identifiability.md (the Voronoi
    check of the necessity direction).
    """

    def __init__(self, sites):
        sites = real_array(sites, "sites", ndim=2)
        if sites.shape[0] < 2:
            raise ValueError(f"sites must hold at least two points, got shape {sites.shape}")
        if np.unique(sites, axis=0).shape[0] != sites.shape[0]:
            raise ValueError("sites must be distinct (equal sites would give an empty cell)")
        self.sites = sites
        self.n_cells, self.d = sites.shape
        self._half_sq = 0.5 * np.sum(sites**2, axis=1)

    def cell_id(self, X) -> np.ndarray:
        """Index of the nearest site of each row of ``X`` (``argmin |x - s_j|``)."""
        X = _as_points(X, self.d)
        return np.argmin(self._half_sq - X @ self.sites.T, axis=1)


# ----------------------------------------------------------------------- hyperplane arrangements
class HyperplanePartition(_MonteCarloCells):
    """Cells of the arrangement ``{x : sign(W x - b) = s}``, numbered by the bits of ``s``.

    Parameters
    ----------
    W : (m, d) array of non-zero normals
    b : (m,) offsets
    """

    def __init__(self, W, b):
        W = np.asarray(W, dtype=float)
        b = np.asarray(b, dtype=float)
        if W.ndim != 2 or W.shape[0] < 1:
            raise ValueError(f"W must be an (m, d) matrix of normals, got shape {W.shape}")
        if b.shape != (W.shape[0],):
            raise ValueError(f"b must have shape ({W.shape[0]},), got {b.shape}")
        if not (np.all(np.isfinite(W)) and np.all(np.isfinite(b))):
            raise ValueError("W and b must be finite")
        if np.any(np.linalg.norm(W, axis=1) == 0):
            raise ValueError("W must not contain a zero normal")
        if W.shape[0] > 62:
            raise ValueError("at most 62 hyperplanes (cells are numbered by 64-bit sign patterns)")
        self.W, self.b = W, b
        self.m, self.d = W.shape
        self._pow = 1 << np.arange(self.m, dtype=np.int64)

    def cell_id(self, X) -> np.ndarray:
        X = _as_points(X, self.d)
        return ((X @ self.W.T - self.b) > 0).astype(np.int64) @ self._pow

    def signs(self, cell: int) -> np.ndarray:
        """The sign vector ``s`` in ``{-1, +1}^m`` of a cell."""
        return np.where((int(cell) >> np.arange(self.m)) & 1, 1.0, -1.0)

    def normal_rank(self) -> int:
        return int(np.linalg.matrix_rank(self.W))

    def sample_truncated_many(
        self, mus, cells, rng, R: float | None = None, *, max_rounds: int = 8, stats_out=None
    ):
        """Exact draws, one per row: ``y_i ~ N(mus[i], I)`` truncated to ``cells[i]`` (∩ box).

        Vectorised rejection from a half-space proposal (see ``_halfspace_rejection``); each
        request has its own mean, so many SGD runs can share one call per step.
        """
        check_generator(rng)
        mus = real_array(mus, "mus", ndim=2)
        cells = np.atleast_1d(np.asarray(cells, dtype=np.int64))
        if mus.shape != (cells.size, self.d):
            raise ValueError(f"mus must have shape ({cells.size}, {self.d}), got {mus.shape}")
        if R is not None and not R > 0:
            raise ValueError(f"R must be positive, got {R}")
        return _halfspace_rejection(
            self, mus, cells, rng, R, positive_int(max_rounds, "max_rounds"), stats_out
        )

    def sample_truncated(
        self,
        mu,
        cells,
        rng,
        R: float | None = None,
        *,
        pool: int = 20000,
        max_pools: int = 200,
        fallback_sweeps: int = 200,
        stats_out: dict | None = None,
    ):
        """Exact draws from ``N(mu, I)`` truncated to each requested cell.

        Each cell is also intersected with ``B_inf(0, R)`` when ``R`` is given.

        A pool of ``pool`` Gaussian points is bucketed by cell and each request takes a distinct
        point of its bucket (new pools serve what is left); conditioning an i.i.d. Gaussian point on
        its cell gives an exact draw, and no point is used twice, so the answers are independent.
        Requests whose bucket stays empty after ``max_pools`` pools fall back to a coordinate
        Gibbs chain (``fallback_sweeps`` sweeps from the Chebyshev centre); their number is added to
        ``stats_out["fallback"]`` when a dict is given.
        """
        check_generator(rng)
        mu = real_array(mu, "mu", shape=(self.d,))
        cells = np.atleast_1d(np.asarray(cells, dtype=np.int64))
        if R is not None and not R > 0:
            raise ValueError(f"R must be positive, got {R}")
        out = np.full((cells.size, self.d), np.nan)
        todo = np.arange(cells.size)
        for _ in range(max_pools):
            if todo.size == 0:
                break
            X = rng.standard_normal((pool, self.d)) + mu
            if R is not None:
                X = X[np.all(np.abs(X) <= R, axis=1)]
            ids = self.cell_id(X)
            order = np.argsort(ids, kind="stable")
            sorted_ids = ids[order]
            want = cells[todo]
            start = np.searchsorted(sorted_ids, want, side="left")
            stop = np.searchsorted(sorted_ids, want, side="right")
            # the r-th request for a cell gets the r-th pool point of that cell: every point is
            # used at most once, so the answers are independent (pool points are i.i.d., hence
            # exchangeable)
            by_cell = np.argsort(want, kind="stable")
            first = np.searchsorted(want[by_cell], want[by_cell], side="left")
            rank = np.empty_like(by_cell)
            rank[by_cell] = np.arange(by_cell.size) - first
            ok = rank < stop - start
            out[todo[ok]] = X[order[start[ok] + rank[ok]]]
            todo = todo[~ok]
        if todo.size:
            if stats_out is not None:
                stats_out["fallback"] = stats_out.get("fallback", 0) + int(todo.size)
            for cell in np.unique(cells[todo]):
                rows = todo[cells[todo] == cell]
                out[rows] = gibbs_sample(
                    self,
                    mu,
                    int(cell),
                    rows.size,
                    fallback_sweeps,
                    rng,
                    R=R if R is not None else 50.0,
                )
        return out


def _halfspace_rejection(
    partition: HyperplanePartition,
    mus: np.ndarray,
    cells: np.ndarray,
    rng: np.random.Generator,
    R: float | None,
    max_rounds: int,
    stats_out: dict | None,
) -> np.ndarray:
    r"""Exact draws ``y_i ~ N(mus[i], I)`` truncated to ``cells[i]`` (∩ ``B_inf(0, R)``).

    Proposal: :math:`\mathcal N(\mu_i,I)` conditioned on the half-space :math:`H_i` of the cell's
    constraint that is least likely under :math:`\mathcal N(\mu_i,I)` (an exact draw: a 1-d
    truncated normal along its unit normal plus an independent Gaussian orthogonal to it). Since
    :math:`P_i\subseteq H_i`, accepting a proposal that lands in :math:`P_i` gives an exact draw,
    with acceptance :math:`\mathcal N(\mu_i,I;P_i)/\mathcal N(\mu_i,I;H_i)`. Round ``r`` gives each
    unserved request ``4^r`` proposals; requests left after ``max_rounds`` rounds go to a long
    Gibbs chain (counted in ``stats_out["fallback"]``).
    """
    P, d = mus.shape
    W, b = partition.W, partition.b
    nrm = np.linalg.norm(W, axis=1)
    sgn = np.where((cells[:, None] >> np.arange(partition.m)) & 1, 1.0, -1.0)  # (P, m)
    marg = sgn * (mus @ W.T - b) / nrm  # signed distance of mu_i inside each half-space
    i = marg.argmin(axis=1)
    rows = np.arange(P)
    u = sgn[rows, i, None] * W[i] / nrm[i, None]  # inward unit normal of H_i
    p_h = special.ndtr(marg[rows, i])  # N(mu_i, I; H_i)
    out = np.empty((P, d))
    todo = rows
    for r in range(max_rounds):
        req = np.repeat(todo, 4**r)  # sorted by request
        Z = rng.standard_normal((req.size, d))
        uu = u[req]
        # along u: N(0,1) conditioned on u.z > -marg, i.e. -t ~ N(0,1) truncated to (-inf, marg)
        t = -special.ndtri(rng.random(req.size) * p_h[req])
        X = Z + ((t - np.einsum("nd,nd->n", Z, uu))[:, None] * uu + mus[req])
        hit = partition.cell_id(X) == cells[req]
        if R is not None:
            hit &= np.abs(X).max(axis=1) <= R
        pos = np.flatnonzero(hit)
        if pos.size:
            r_hit = req[pos]
            first = np.r_[True, r_hit[1:] != r_hit[:-1]]
            out[r_hit[first]] = X[pos[first]]
            served = np.zeros(P, bool)
            served[r_hit] = True
            todo = todo[~served[todo]]
        if todo.size == 0:
            return out
    if stats_out is not None:
        stats_out["fallback"] = stats_out.get("fallback", 0) + int(todo.size)
    for j in todo:
        out[j] = gibbs_sample(
            partition, mus[j], int(cells[j]), 1, 200, rng, R=R if R is not None else 50.0
        )[0]
    return out


def chebyshev_centre(partition: HyperplanePartition, cell: int, R: float):
    """Centre and radius of the largest ball in ``cell ∩ B_inf(0, R)``.

    Solved as a linear programme with ``scipy.optimize.linprog``.
    """
    if not isinstance(partition, HyperplanePartition):
        raise TypeError("partition must be a HyperplanePartition")
    s = partition.signs(cell)
    W, b, d = partition.W, partition.b, partition.d
    norms = np.linalg.norm(W, axis=1)
    # s_i (w_i x - b_i) >= r |w_i|   <=>   -s_i w_i x + r |w_i| <= -s_i b_i
    A = np.hstack([-(s[:, None] * W), norms[:, None]])
    ub = -s * b
    box = np.vstack(
        [np.hstack([np.eye(d), np.ones((d, 1))]), np.hstack([-np.eye(d), np.ones((d, 1))])]
    )
    A = np.vstack([A, box])
    ub = np.concatenate([ub, np.full(2 * d, R)])
    res = optimize.linprog(
        np.r_[np.zeros(d), -1.0],
        A_ub=A,
        b_ub=ub,
        bounds=[(None, None)] * d + [(0, None)],
        method="highs",
    )
    if not res.success or res.x[-1] <= 0:
        raise ValueError(f"cell {cell} has empty interior inside B(0, {R})")
    return res.x[:d], float(res.x[-1])


def gibbs_sample(
    partition: HyperplanePartition,
    mu,
    cell: int,
    n_chains: int,
    n_sweeps: int,
    rng,
    *,
    R: float = 50.0,
    start=None,
) -> np.ndarray:
    """Coordinate Gibbs sampling of ``N(mu, I)`` on ``cell ∩ B_inf(0, R)``.

    ``n_chains`` chains run in parallel. Each coordinate is redrawn from its exact 1-d truncated
    normal given the others. Chains start at ``start`` (default: the Chebyshev centre) and the state
    after ``n_sweeps`` sweeps is returned. With too few sweeps the draws are biased toward the
    start.
    """
    if not isinstance(partition, HyperplanePartition):
        raise TypeError("partition must be a HyperplanePartition")
    check_generator(rng)
    mu = real_array(mu, "mu", shape=(partition.d,))
    n_chains, n_sweeps = positive_int(n_chains, "n_chains"), positive_int(n_sweeps, "n_sweeps")
    if start is None:
        start, _ = chebyshev_centre(partition, cell, R)
    s = partition.signs(cell)
    W, b = partition.W, partition.b
    X = np.tile(np.asarray(start, dtype=float), (n_chains, 1))
    for _ in range(n_sweeps):
        for j in range(partition.d):
            rest = X @ W.T - np.outer(X[:, j], W[:, j]) - b  # (chains, m)
            coef = s * W[:, j]  # s_i w_ij
            with np.errstate(divide="ignore", invalid="ignore"):
                bound = -(s * rest) / coef  # s_i(w_ij x + rest_i) > 0
            lo = np.max(np.where(coef > 0, bound, -np.inf), axis=1, initial=-R)
            hi = np.min(np.where(coef < 0, bound, np.inf), axis=1, initial=R)
            X[:, j] = stats.truncnorm.rvs(lo - mu[j], hi - mu[j], loc=mu[j], random_state=rng)
    return X


def slab_partition(d: int, m: int, rank: int, rng, *, offset_scale: float = 1.0):
    """A random arrangement of ``m`` hyperplanes whose normals span a ``rank``-dim subspace.

    Returns ``(partition, V)`` where the columns of ``V`` span the directions along which every
    cell is a slab (the orthogonal complement of the normals). ``rank = d`` gives a generic
    arrangement.

    Book: prf:`thm-03-slabs` in book/03-coarse-gaussian-mean/identifiability.md
    (its slab partitions, ``rank < d``).
    """
    d, m, rank = positive_int(d, "d"), positive_int(m, "m"), positive_int(rank, "rank")
    if rank > d:
        raise ValueError(f"rank must be at most d = {d}, got {rank}")
    check_generator(rng)
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    W = rng.standard_normal((m, rank)) @ Q[:, :rank].T
    W /= np.linalg.norm(W, axis=1, keepdims=True)
    b = offset_scale * rng.standard_normal(m)
    return HyperplanePartition(W, b), Q[:, rank:]


# ------------------------------------------------------------------- likelihood and information
def coarse_nll(partition, mu, cells, *, base=None) -> float:
    """Average negative log-likelihood of observed cells.

    Exact for grids; Monte Carlo with common random numbers otherwise.
    """
    if isinstance(partition, GridPartition):
        return float(-np.mean(partition.log_prob(mu, cells)))
    if isinstance(partition, _MonteCarloCells):
        if base is None:
            raise ValueError("base (standard normal draws) is required for a Monte Carlo partition")
        return float(-np.mean(partition.log_prob(mu, cells, base=base)))
    raise TypeError("partition must be a GridPartition, HyperplanePartition or VoronoiPartition")


def population_nll(partition: GridPartition, mu_star, mu) -> float:
    r"""Exact :math:`L(\mu)=-\sum_P N(\mu^\star;P)\log N(\mu;P)` for a grid.

    Book: prf:`prop-03-likelihood` in book/03-coarse-gaussian-mean/identifiability.md
    (the population loss of part 1).
    """
    if not isinstance(partition, GridPartition):
        raise TypeError("partition must be a GridPartition (exact sums over cells)")
    p_star = np.exp(partition.all_log_probs(mu_star))
    lp = partition.all_log_probs(mu)
    keep = p_star > 0
    return float(-np.sum(p_star[keep] * lp[keep]))


def kl_coarse(partition: GridPartition, mu_star, mu) -> float:
    """Exact discrete KL between the coarse laws, from cell probabilities.

    Summed with ``scipy.special.rel_entr``.

    Book: prf:`prop-03-likelihood` in book/03-coarse-gaussian-mean/identifiability.md
    (the KL of part 1).
    """
    if not isinstance(partition, GridPartition):
        raise TypeError("partition must be a GridPartition (exact sums over cells)")
    d = partition.d
    mu_star, mu = real_array(mu_star, "mu_star", shape=(d,)), real_array(mu, "mu", shape=(d,))

    # probabilities by plain CDF differences per coordinate (a second code path to log_prob),
    # taken in the lower tail for cells above the mean so that no difference of two numbers near 1
    # is formed
    def probs(m):
        z = m @ partition.Q
        per = []
        for j in range(d):
            lo, hi = partition._bounds[j][:-1] - z[j], partition._bounds[j][1:] - z[j]
            per.append(
                np.where(
                    lo > 0,
                    special.ndtr(-lo) - special.ndtr(-hi),
                    special.ndtr(hi) - special.ndtr(lo),
                )
            )
        out = per[0]
        for q in per[1:]:
            out = np.multiply.outer(out, q)
        return out.ravel()

    return float(np.sum(special.rel_entr(probs(mu_star), probs(mu))))


def tv_coarse(partition: GridPartition, mu_star, mu) -> float:
    """Total variation between the coarse laws of a grid (exact)."""
    if not isinstance(partition, GridPartition):
        raise TypeError("partition must be a GridPartition (exact sums over cells)")
    p = np.exp(partition.all_log_probs(mu_star))
    q = np.exp(partition.all_log_probs(mu))
    return float(0.5 * np.abs(p - q).sum())


def alpha_ratio(partition: GridPartition, mu_star, mus) -> np.ndarray:
    r"""The TV ratio of coarse to fine laws for each row of ``mus``.

    .. math::
        \frac{d_{TV}(\mathcal N_{\mathcal P}(\mu^\star),\mathcal N_{\mathcal P}(\mu))}
             {d_{TV}(\mathcal N(\mu^\star),\mathcal N(\mu))}
    """
    mus = _as_points(mus, partition.d, "mus")
    mu_star = real_array(mu_star, "mu_star", shape=(partition.d,))
    out = np.empty(mus.shape[0])
    for i, mu in enumerate(mus):
        tv = tv_gauss(mu_star, mu)
        if tv == 0:
            raise ValueError("mus must differ from mu_star (the ratio is undefined at mu_star)")
        out[i] = tv_coarse(partition, mu_star, mu) / tv
    return out


def union_partition_law(edges, labels, mu):
    r"""Exact law of a 1-d partition whose cells are unions of intervals.

    ``edges`` (increasing, length ``J``) cut the line into ``J + 1`` intervals; interval ``j``
    belongs to cell ``labels[j]`` (cells ``0..K-1``, each used). Returns ``(p, dp, F)``: the cell
    probabilities :math:`p_k(\mu)=\sum_{j:\,\ell_j=k}\Phi(b_j-\mu)-\Phi(a_j-\mu)`, their
    derivatives :math:`p_k'(\mu)=\sum_{j:\,\ell_j=k}\varphi(a_j-\mu)-\varphi(b_j-\mu)` and the
    Fisher information :math:`F=\sum_kp_k'^2/p_k`. Cells need not be convex (a cell may be
    two rays).

    Book: prf:`thm-03-slabs` in book/03-coarse-gaussian-mean/identifiability.md (the non-convex
    counterexample).
    """
    edges = real_array(edges, "edges", ndim=1)
    if np.any(np.diff(edges) <= 0):
        raise ValueError("edges must be strictly increasing")
    labels = np.asarray(labels)
    if labels.shape != (edges.size + 1,) or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels must be {edges.size + 1} integers, one per interval")
    K = int(labels.max()) + 1
    if labels.min() < 0 or np.unique(labels).size != K:
        raise ValueError("labels must use every cell 0..K-1")
    mu = real(mu, "mu")
    a = np.r_[-np.inf, edges] - mu
    b = np.r_[edges, np.inf] - mu
    p = np.bincount(labels, np.exp(log_diff_ndtr(a, b)), minlength=K)
    dp = np.bincount(labels, stats.norm.pdf(a) - stats.norm.pdf(b), minlength=K)
    return p, dp, float(np.sum(dp**2 / p))


def fisher_information(partition, mu, n_mc: int, rng):
    r"""Monte Carlo Fisher information of one coarse sample, two ways.

    ``F_means`` :math:`=\sum_Pp_P(m_P-\mu)(m_P-\mu)^\top` (covariance of the conditional mean) and
    ``F_cov`` :math:`=I-\sum_Pp_PC_P` (one minus the average conditional covariance), from two
    independent samples of size ``n_mc``. For grids use :func:`fisher_grid_exact`.

    Book: prf:`prop-03-likelihood` in book/03-coarse-gaussian-mean/identifiability.md
    (part 4: both forms of ``F``).
    """
    if not isinstance(partition, _MonteCarloCells):
        raise TypeError(
            "partition must be a HyperplanePartition or a VoronoiPartition "
            "(use fisher_grid_exact for grids)"
        )
    check_generator(rng)
    n_mc = positive_int(n_mc, "n_mc")
    mu = real_array(mu, "mu", shape=(partition.d,))
    _, p, means, _, _ = partition.cell_moments(mu, n_mc, rng)
    D = means - mu
    F_means = np.einsum("n,ni,nj->ij", p, D, D)
    _, p2, _, covs, counts = partition.cell_moments(mu, n_mc, rng)
    # the per-cell covariance uses the unbiased divisor; weight by counts/N
    F_cov = np.eye(partition.d) - np.einsum(
        "n,nij->ij", (counts - 1).clip(min=0) / counts.sum(), covs
    )
    return F_means, F_cov


# --------------------------------------------------------------------------- estimators
def psgd_one_pass(
    partition,
    cells,
    D: float,
    R: float,
    c: float,
    rng,
    *,
    power: float = 0.5,
    k: int = 1,
    checkpoints=None,
    stats_out: dict | None = None,
) -> np.ndarray:
    r"""One-pass projected SGD on the coarse likelihood, ``S`` independent runs at once.

    Run ``s`` sees its cells ``cells[s, 0], cells[s, 1], ...`` once each, in order. Step ``t``
    draws ``k`` oracle samples ``y ~ N(mu_{t-1}, I)`` truncated to ``P_t ∩ B_inf(0, R)``, averages
    them to ``ybar`` and sets

    .. math:: \mu_t=\mathrm{Proj}_{\|\mu\|_\infty\le D}
              \big(\mu_{t-1}-\eta_t(\mu_{t-1}-\bar y_t)\big),
              \qquad \eta_t=c\,t^{-\text{power}},\ \mu_0=0.

    Returns the Polyak averages :math:`\bar\mu_n=\frac1n\sum_{t=1}^n\mu_t` at each ``n`` in
    ``checkpoints`` (default: the last step), shape ``(len(checkpoints), S, d)``. Since the steps do
    not depend on the horizon, ``bar mu_n`` is the estimator that would be returned after ``n``
    samples.

    Book: prf:`alg-03-psgd` in book/03-coarse-gaussian-mean/estimation.md.
    """
    check_generator(rng)
    cells = np.asarray(cells)
    if cells.ndim != 2 or cells.size == 0 or not np.issubdtype(cells.dtype, np.integer):
        raise ValueError("cells must be a non-empty (S, n) integer array of observed cells")
    if not D > 0:
        raise ValueError(f"D must be positive, got {D}")
    if not R >= D:
        raise ValueError(
            f"R must be at least D (the box must contain the warm-start region), got R={R}, D={D}"
        )
    if not c > 0:
        raise ValueError(f"c must be a positive step-size constant, got {c}")
    if not 0 < power <= 1:
        raise ValueError(f"power must lie in (0, 1], got {power}")
    k = positive_int(k, "k")
    S, n = cells.shape
    cps = [n] if checkpoints is None else [positive_int(v, "checkpoints") for v in checkpoints]
    if any(v > n for v in cps):
        raise ValueError(f"checkpoints must be at most n = {n}")
    d = partition.d
    mu, acc = np.zeros((S, d)), np.zeros((S, d))
    out = np.empty((len(cps), S, d))
    for t in range(1, n + 1):
        y = partition.sample_truncated_many(
            np.repeat(mu, k, axis=0), np.repeat(cells[:, t - 1], k), rng, R, stats_out=stats_out
        )
        ybar = y.reshape(S, k, d).mean(axis=1)
        mu = np.clip(mu - c * t**-power * (mu - ybar), -D, D)
        acc += mu
        for j, v in enumerate(cps):
            if v == t:
                out[j] = acc / t
    return out


def sgd_sandwich(F, k: int = 1) -> np.ndarray:
    r"""Asymptotic covariance of :math:`\sqrt n(\bar\mu_n-\mu^\star)`, oracle SGD with ``k`` draws.

    .. math:: \Sigma_k=F^{-1}\Big(F+\frac{I-F}{k}\Big)F^{-1},

    the sandwich :math:`H^{-1}SH^{-1}` with Hessian :math:`H=F` and gradient-noise covariance
    :math:`S=\mathrm{Cov}(\mathbb E[x|P])+\mathbb E\,\mathrm{Cov}(x|P)/k`. For ``k = 1`` it is
    :math:`F^{-2}`; as ``k -> inf`` it tends to the Cramér–Rao bound :math:`F^{-1}`.

    Book: prf:`prop-03-sandwich` in book/03-coarse-gaussian-mean/estimation.md.
    """
    F = real_array(F, "F", ndim=2)
    if F.shape[0] != F.shape[1] or not np.allclose(F, F.T):
        raise ValueError("F must be a symmetric square matrix")
    Fi = np.linalg.inv(F)
    return Fi @ (F + (np.eye(F.shape[0]) - F) / positive_int(k, "k")) @ Fi


def averaged_sgd_mse(F, ns, c: float, *, power: float = 0.5, k: int = 1, delta0=None):
    r"""Exact finite-``n`` MSE of the Polyak average for the SGD recursion linearised at the truth.

    With :math:`\delta_t=\mu_t-\mu^\star`, :math:`\delta_t=(I-\eta_tF)\delta_{t-1}+\eta_t\xi_t`,
    :math:`\mathrm{Cov}\,\xi_t=F+(I-F)/k`, everything is diagonal in the eigenbasis of ``F``. Per
    eigenvalue :math:`\lambda` with noise variance :math:`s=\lambda+(1-\lambda)/k`,

    .. math:: \mathbb E\bar\delta_n^2=\frac{s}{n^2}\sum_{u=1}^n\eta_u^2G_u^2+
              \Big(\frac{\delta_0a_1G_1}{n}\Big)^2,\qquad G_n=1,\ G_u=1+a_{u+1}G_{u+1},
              \ a_u=1-\eta_u\lambda,

    summed over the eigen-directions. As :math:`n\to\infty`, ``n * mse -> tr(sgd_sandwich(F, k))``.
    Returns an array with one entry per ``n`` in ``ns``.

    Book: prf:`prop-03-sandwich` in book/03-coarse-gaussian-mean/estimation.md.
    """
    F = real_array(F, "F", ndim=2)
    lam, U = np.linalg.eigh(F)
    if lam.min() <= 0:
        raise ValueError("F must be positive definite")
    k = positive_int(k, "k")
    s = lam + (1 - lam) / k
    d0 = (
        np.zeros_like(lam)
        if delta0 is None
        else U.T @ real_array(delta0, "delta0", shape=lam.shape)
    )
    out = []
    for n in ns:
        n = positive_int(n, "ns")
        eta = c * np.arange(1, n + 1, dtype=float) ** -power
        a = 1 - np.outer(eta, lam)  # a[u-1] = a_u
        G = np.ones_like(lam)
        var = eta[n - 1] ** 2 * G**2
        for u in range(n - 1, 0, -1):  # G_u from G_{u+1}
            G = 1 + a[u] * G
            var = var + eta[u - 1] ** 2 * G**2
        bias = d0 * a[0] * G / n
        out.append(float(np.sum(s * var / n**2 + bias**2)))
    return np.array(out)


def mse_loglog_slope(ns, sq_errors):
    r"""Slope of :math:`\log\mathrm{MSE}` against :math:`\log n` and its standard error over runs.

    ``sq_errors`` has shape ``(len(ns), S)``: the squared error of run ``s`` at sample size
    ``ns[i]`` (the same runs may be reused across ``n``, as for the Polyak averages of one SGD
    trajectory). The slope is the least-squares fit :math:`\hat b=\sum_iw_i\log M_i` with
    :math:`M_i` the mean over runs; its variance by the delta method is
    :math:`\sum_{ij}w_iw_j\,\widehat{\mathrm{Cov}}(e_i,e_j)/(S\,M_iM_j)`, which keeps the
    correlation between sizes that share runs. Returns ``(slope, se)``.
    """
    ns = real_array(ns, "ns", ndim=1)
    E = real_array(sq_errors, "sq_errors", ndim=2)
    if E.shape[0] != ns.size or ns.size < 2 or E.shape[1] < 2:
        raise ValueError("sq_errors must have shape (len(ns), S) with len(ns) >= 2 and S >= 2")
    lx = np.log(ns) - np.log(ns).mean()
    w = lx / np.sum(lx**2)
    M = E.mean(axis=1)
    C = np.cov(E) / E.shape[1]
    g = w / M
    return float(w @ np.log(M)), float(np.sqrt(g @ C @ g))


def mle_grid(partition: GridPartition, cells, *, x0=None) -> np.ndarray:
    """Exact maximum-likelihood mean from grid cells (L-BFGS with the closed-form gradient)."""
    if not isinstance(partition, GridPartition):
        raise TypeError("partition must be a GridPartition")
    cells = partition._check_cells(np.atleast_1d(cells))
    lo, hi = partition.cell_bounds(cells)
    Q = partition.Q

    def f(mu):
        m = mu @ Q
        ll, dll = _interval_loglik(lo - m, hi - m)
        return -ll.sum(), -(Q @ dll.sum(axis=0))

    x0 = np.zeros(partition.d) if x0 is None else real_array(x0, "x0", shape=(partition.d,))
    res = optimize.minimize(f, x0, jac=True, method="L-BFGS-B")
    return res.x


def interval_regression_mle(X, lo, hi) -> np.ndarray:
    r"""MLE of ``w`` in ``y* = w^T x + xi``, ``xi ~ N(0, 1)``, from ``y* in [lo, hi]``.

    An observation is exact when ``lo == hi``. Log-likelihood: ``log phi(y - w^T x)`` for exact
    rows and ``log(Phi(hi - w^T x) - Phi(lo - w^T x))`` for interval rows (infinite ends allowed);
    concave in ``w``.
    """
    X = np.asarray(X, dtype=float)
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"X must be an (n, d) matrix, got shape {X.shape}")
    if lo.shape != (X.shape[0],) or hi.shape != (X.shape[0],):
        raise ValueError(f"lo and hi must have shape ({X.shape[0]},)")
    if np.any(lo > hi) or np.any(np.isnan(lo)) or np.any(np.isnan(hi)):
        raise ValueError("every interval must have lo <= hi")
    exact = lo == hi
    if np.any(~np.isfinite(lo[exact])):
        raise ValueError("exact observations (lo == hi) must be finite")
    Xe, ye, Xi, li, ui = X[exact], lo[exact], X[~exact], lo[~exact], hi[~exact]
    if exact.all():
        return np.linalg.lstsq(X, lo, rcond=None)[0]

    def f(w):
        r = ye - Xe @ w
        val = 0.5 * r @ r
        grad = -(Xe.T @ r)
        ll, dll = _interval_loglik(li - Xi @ w, ui - Xi @ w)
        return val - ll.sum(), grad - Xi.T @ dll

    w0 = np.linalg.lstsq(
        X,
        np.where(exact, lo, np.where(np.isfinite(lo) & np.isfinite(hi), 0.5 * (lo + hi), 0.0)),
        rcond=None,
    )[0]
    res = optimize.minimize(
        f, w0, jac=True, method="L-BFGS-B", options=dict(maxiter=500, gtol=1e-10)
    )
    return res.x


def friction_data(n: int, w_star, band, rng):
    """Rosett friction data: ``x ~ N(0, I)``, ``y* = w*^T x + N(0,1)``.

    Inside ``band`` only the band is seen. Returns ``(X, lo, hi, y_star)`` with ``lo = hi = y*``
    outside the band.
    """
    n = positive_int(n, "n")
    check_generator(rng)
    w_star = np.asarray(w_star, dtype=float)
    if w_star.ndim != 1:
        raise ValueError("w_star must be a 1-d vector")
    l, u = band
    if not l < u:
        raise ValueError(f"band must be an interval (l, u) with l < u, got {band}")
    X = rng.standard_normal((n, w_star.size))
    y = X @ w_star + rng.standard_normal(n)
    inside = (y >= l) & (y <= u)
    lo = np.where(inside, l, y)
    hi = np.where(inside, u, y)
    return X, lo, hi, y


def interval_regression_sgd(X, lo, hi, epochs: int, batch: int, c: float, rng) -> np.ndarray:
    r"""The same likelihood-SGD for friction regression.

    The oracle imputes ``y ~ N(w^T x, 1)`` on ``[lo, hi]``. The stochastic gradient of the negative
    log-likelihood is ``x (w^T x - y)`` with ``y`` the exact observation or a draw from the
    truncated normal; steps ``c / sqrt(t)``, last-epoch average.

    Book: prf:`thm-03-friction` in book/03-coarse-gaussian-mean/friction.md.
    """
    X = np.asarray(X, dtype=float)
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    check_generator(rng)
    epochs, batch = positive_int(epochs, "epochs"), positive_int(batch, "batch")
    if not c > 0:
        raise ValueError(f"c must be positive, got {c}")
    n, d = X.shape
    exact = lo == hi
    w = np.zeros(d)
    steps = int(np.ceil(n / batch))
    acc, t = np.zeros(d), 0
    for e in range(epochs):
        perm = rng.permutation(n)
        for s in range(steps):
            t += 1
            idx = perm[s * batch : (s + 1) * batch]
            m = X[idx] @ w
            y = lo[idx].copy()
            iv = ~exact[idx]
            if iv.any():
                y[iv] = stats.truncnorm.rvs(
                    lo[idx][iv] - m[iv], hi[idx][iv] - m[iv], loc=m[iv], random_state=rng
                )
            w = w - (c / np.sqrt(t)) * (X[idx].T @ (m - y)) / idx.size
            if e == epochs - 1:
                acc += w
    return acc / steps
