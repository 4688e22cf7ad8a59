r"""Memorizing long-tail features and composing them: the linear model (chapter 13).

Paper: M. Zhou, H. Ma, R. Ge, *Memorizing Long-tail Data Can Help Generalization Through
Composition*, ICLR 2026 (arXiv:2510.16322, OpenReview ``UBoCMU5iYV``).

Chapter folder: ``book/13-memorization-composition/``. The small networks of the chapter's
composition experiment live in :mod:`lib.papers.longtail_composition.nets` (torch).

The model (our reconstruction): features :math:`x_i=\epsilon_i b_i` with independent
:math:`b_i\sim\mathrm{Bern}(p_i)`, Rademacher signs :math:`\epsilon_i`, a power law
:math:`p_i=\min\{1,\ s\,i^{-\alpha}/Z_\alpha\}` with :math:`Z_\alpha=\sum_{i\le d}i^{-\alpha}`,
labels :math:`y=\langle\beta^*,x\rangle+\xi`, and the minimum-norm interpolant that gradient
descent from zero reaches,

.. math::
    \hat\beta = X^{+}y,\qquad
    \hat\beta_i=\beta^*_i+(X^+\xi)_i\ \text{ for every } i \text{ with } e_i\in\mathrm{row}(X),

and, because the coordinates are uncorrelated (:math:`\mathbb E[x_ix_j]=p_i\delta_{ij}`), the exact
in-distribution excess loss :math:`L_{ID}(\hat\beta)=\sum_ip_i(\hat\beta_i-\beta^*_i)^2`.

Conventions: a design matrix ``X`` has shape ``(n, d)`` (rows are samples), ``p`` and ``beta``
have shape ``(d,)``; feature ``i`` of the book (1-based) is column ``i-1``.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg
from scipy.sparse import csr_array

from lib.validate import (
    check_generator,
    nonnegative_int,
    positive,
    positive_int,
    probabilities,
    real_array,
)

__all__ = [
    "powerlaw_probs",
    "common_cutoff",
    "sample_longtail",
    "min_norm_solution",
    "min_norm_and_mask",
    "gd_from_zero",
    "identifiable_mask",
    "peel_recoverable",
    "feature_counts",
    "clean_singletons",
    "id_loss_exact",
    "missing_mass",
    "tail_count_probs",
    "ood_excess_loss",
    "ood_sample",
]


def _design(X, name: str = "X") -> np.ndarray:
    return real_array(X, name, ndim=2)


def powerlaw_probs(d: int, s: float, alpha: float) -> np.ndarray:
    r"""Feature frequencies :math:`p_i=\min\{1,\ s\,i^{-\alpha}/Z_\alpha\}`.

    The normaliser is :math:`Z_\alpha=\sum_{i\le d}i^{-\alpha}`.

    Parameters
    ----------
    d : int
        Number of features :math:`d`.
    s : float
        Nominal sparsity :math:`s` (``0 < s <= d``); :math:`\sum_ip_i=s` only when nothing
        is clipped.
    alpha : float
        Power-law exponent :math:`\alpha>0`.

    Returns
    -------
    p : array, shape (d,), non-increasing, entries in (0, 1].

    Book: :prf:ref:`def-13-model` in book/13-memorization-composition/theory.md.
    """
    d = positive_int(d, "d")
    s = positive(s, "s")
    alpha = positive(alpha, "alpha")
    if s > d:
        raise ValueError(f"s must be at most d={d}, got {s}")
    w = np.arange(1, d + 1, dtype=float) ** (-alpha)
    return np.minimum(1.0, s * w / w.sum())


def common_cutoff(p, n: int, c: float = 10.0) -> int:
    r"""Number of common features :math:`k=\#\{i: n\,p_i\ge c\}` (the experiments use c=10)."""
    p = probabilities(p, "p", ndim=1)
    n = positive_int(n, "n")
    c = positive(c, "c")
    return int(np.count_nonzero(n * p >= c))


_DENSE_P = 0.05  # columns with p_i above this are drawn entry by entry, the rest by count


def _support(n: int, p: np.ndarray, rng: np.random.Generator):
    r"""Rows and columns of the non-zero entries of an ``(n, d)`` Bernoulli matrix (column j: p_j).

    Frequent columns (:math:`p_j>0.05`) are drawn entry by entry. A rare column draws its count
    :math:`c_j\sim\mathrm{Bin}(n,p_j)`, then :math:`c_j` rows uniformly at random, redrawing any row
    that repeats one already drawn in that column until all are distinct. The procedure treats
    row labels symmetrically, so the set is uniform among the :math:`c_j`-subsets and the column
    is i.i.d. :math:`\mathrm{Bern}(p_j)` over the rows, exactly; it costs :math:`O(n\sum_jp_j)`
    for the rare columns instead of :math:`O(nd)`.
    """
    dense = np.flatnonzero(p > _DENSE_P)
    r_dense, c_dense = np.nonzero(rng.random((n, dense.size)) < p[dense])
    rare = np.flatnonzero(p <= _DENSE_P)
    cols = np.repeat(rare, rng.binomial(n, p[rare]))
    rows = rng.integers(0, n, cols.size)
    while True:  # redraw repeated (column, row) pairs; each column has c_j <= n draws
        key = cols.astype(np.int64) * n + rows
        order = np.argsort(key, kind="stable")
        again = order[1:][key[order][1:] == key[order][:-1]]
        if again.size == 0:
            break
        rows[again] = rng.integers(0, n, again.size)
    return np.concatenate([r_dense, rows]), np.concatenate([dense[c_dense], cols])


def sample_longtail(n: int, p, rng: np.random.Generator) -> np.ndarray:
    r"""Draw ``n`` rows :math:`x_i=\epsilon_ib_i`, :math:`b_i\sim\mathrm{Bern}(p_i)`, random signs.

    All :math:`nd` indicators are independent; the draw costs :math:`O(n\sum_ip_i)` for the rare
    features (see ``_support``). Returns a dense float array of shape ``(n, d)`` with entries
    in :math:`\{-1,0,1\}`.

    Book: :prf:ref:`def-13-model` in book/13-memorization-composition/theory.md.
    """
    n = positive_int(n, "n")
    p = probabilities(p, "p", ndim=1)
    check_generator(rng)
    rows, cols = _support(n, p, rng)
    X = np.zeros((n, p.size))
    X[rows, cols] = rng.integers(0, 2, size=rows.size) * 2.0 - 1.0
    return X


_GRAM_FLOOR = 1e-6  # smallest relative singular value the Gram branch can resolve


def _row_space(X: np.ndarray, rcond: float):
    """Thin SVD of X restricted to its non-zero columns: (columns, U_r, s_r, Vt_r).

    With m seen columns, an SVD of the n x m block when m <= n, otherwise an eigendecomposition
    of the n x n Gram matrix X X^T = U diag(s^2) U^T (then Vt = diag(1/s) U^T X). Both branches
    keep the singular values s > rcond * s_max (in the Gram branch s = sqrt(w) for the
    eigenvalues w, so the test is sqrt(w) > rcond * sqrt(w_max), not w > rcond * w_max). The
    Gram branch cannot resolve singular values below about sqrt(n * eps) * s_max (squaring
    loses half the digits), so there the effective rcond is max(rcond, 1e-6).
    """
    cols = np.flatnonzero(np.any(X != 0, axis=0))
    if cols.size == 0:
        return cols, np.zeros((X.shape[0], 0)), np.zeros(0), np.zeros((0, 0))
    Xr = X[:, cols]
    if cols.size <= X.shape[0]:
        U, s, Vt = linalg.svd(Xr, full_matrices=False, lapack_driver="gesdd")
        r = int(np.count_nonzero(s > rcond * s[0]))
        return cols, U[:, :r], s[:r], Vt[:r]
    w, U = linalg.eigh(Xr @ Xr.T)
    s_all = np.sqrt(np.clip(w, 0.0, None))
    # forming X X^T squares the condition number: eigenvalues are only accurate to about
    # n * eps * w_max, i.e. singular values below ~1e-6 s_max are not resolved in this branch
    keep = s_all > max(rcond, _GRAM_FLOOR) * s_all[-1]
    U, s = U[:, keep], s_all[keep]
    return cols, U, s, (U.T @ Xr) / s[:, None]


def min_norm_solution(X, y, rcond: float = 1e-10) -> np.ndarray:
    r"""The minimum-norm least-squares solution :math:`\hat\beta=X^+y` (the limit of GD from zero).

    Unseen features (all-zero columns) get exactly :math:`\hat\beta_i=0`; the SVD is taken of the
    seen columns only, so the cost is :math:`O(n\,m\min(n,m))` with :math:`m` seen features.

    Parameters
    ----------
    X : array, shape (n, d)
    y : array, shape (n,) or (n, q)
        One or several label vectors (one column per noise draw).
    rcond : float
        Singular values of the seen block at or below ``rcond * s_max`` count as zero
        (duplicate rows make :math:`XX^\top` singular). The same rule applies to the thin SVD
        of the block (at most ``n`` seen columns) and to the eigendecomposition of the Gram
        matrix :math:`XX^\top` (more seen columns; singular values are the square roots of its
        eigenvalues), except that the Gram branch cannot resolve singular values below about
        ``1e-6 * s_max`` (squaring the matrix loses half the digits), so there the effective
        ``rcond`` is ``max(rcond, 1e-6)``.

    Returns
    -------
    beta : array, shape (d,) or (d, q).

    Book: :prf:ref:`prop-13-minnorm` in book/13-memorization-composition/theory.md.
    """
    X = _design(X)
    y = _labels(y, X.shape[0])
    rcond = positive(rcond, "rcond")
    return _solve(_row_space(X, rcond), y, X.shape[1])


def _labels(y, n: int) -> np.ndarray:
    y = real_array(y, "y")
    if y.ndim not in (1, 2) or y.shape[0] != n:
        raise ValueError(f"y must have shape ({n},) or ({n}, q), got {y.shape}")
    return y


def _solve(decomposition, y: np.ndarray, d: int) -> np.ndarray:
    cols, U, s, Vt = decomposition
    beta = np.zeros((d,) + y.shape[1:])
    # X^+ y = V diag(1/s) U^T y  (eq-13-minnorm)
    beta[cols] = Vt.T @ ((U.T @ y) / (s[:, None] if y.ndim == 2 else s))
    return beta


def _mask(decomposition, tol: float, d: int) -> np.ndarray:
    cols, _, _, Vt = decomposition
    mask = np.zeros(d, dtype=bool)
    # diagonal of the projector V V^T onto row(X): P_ii = 1 iff e_i in row(X)
    mask[cols] = np.abs(np.sum(Vt**2, axis=0) - 1.0) < tol
    return mask


def min_norm_and_mask(X, y, tol: float = 1e-8, rcond: float = 1e-10):
    r""":func:`min_norm_solution` and :func:`identifiable_mask` from one decomposition of ``X``.

    Returns ``(beta, mask)`` with ``beta`` of shape ``(d,)`` or ``(d, q)`` and ``mask`` a
    boolean array of shape ``(d,)``; equal to calling the two functions (with the same
    ``rcond``), at the cost of one.

    Book: :prf:ref:`prop-13-minnorm` and :prf:ref:`thm-13-recovery` in
    book/13-memorization-composition/theory.md.
    """
    X = _design(X)
    y = _labels(y, X.shape[0])
    tol = positive(tol, "tol")
    rcond = positive(rcond, "rcond")
    decomposition = _row_space(X, rcond)
    return _solve(decomposition, y, X.shape[1]), _mask(decomposition, tol, X.shape[1])


def gd_from_zero(X, y, lr: float, steps: int) -> np.ndarray:
    r"""Gradient descent on :math:`\frac1n\|X\beta-y\|^2` from :math:`\beta_0=0`.

    :math:`\beta_{t+1}=\beta_t-\eta\,\frac2nX^\top(X\beta_t-y)`. Every iterate stays in
    :math:`\mathrm{row}(X)`, so the limit (for :math:`\eta<n/\|X\|_2^2`) is :math:`X^+y`.
    Returns ``beta`` of shape ``(d,)``.
    """
    X = _design(X)
    y = real_array(y, "y", shape=(X.shape[0],))
    lr = positive(lr, "lr")
    steps = nonnegative_int(steps, "steps")
    n = X.shape[0]
    beta = np.zeros(X.shape[1])
    for _ in range(steps):
        beta -= lr * (2.0 / n) * (X.T @ (X @ beta - y))
    return beta


def identifiable_mask(X, tol: float = 1e-8, rcond: float = 1e-10) -> np.ndarray:
    r"""Coordinates pinned down by the data: :math:`e_i\in\mathrm{row}(X)`, i.e. :math:`P_{ii}=1`.

    Here :math:`P=X^+X` is the projector onto the row space.

    Every interpolant is :math:`\beta^*+v` with :math:`v\in\ker X`; coordinate :math:`i` is the same
    for all of them iff :math:`e_i\perp\ker X`. Returns a boolean array of shape ``(d,)``.

    Book: :prf:ref:`thm-13-recovery` in book/13-memorization-composition/theory.md.
    """
    X = _design(X)
    tol = positive(tol, "tol")
    return _mask(_row_space(X, positive(rcond, "rcond")), tol, X.shape[1])


def peel_recoverable(X, k: int) -> np.ndarray:
    r"""Features recovered by the peeling argument (our constructive proof of recovery).

    Start from the common block :math:`\{1,\dots,k\}` if the rows that use only common
    features have rank :math:`k` (otherwise from nothing); then repeatedly add the single
    unknown feature of every row that has exactly one. Every peeled feature is identifiable.
    Returns a boolean array of shape ``(d,)``.

    Book: :prf:ref:`thm-13-recovery` in book/13-memorization-composition/theory.md.
    """
    X = _design(X)
    k = nonnegative_int(k, "k")
    if k > X.shape[1]:
        raise ValueError(f"k must be at most d={X.shape[1]}, got {k}")
    cols = np.flatnonzero(np.any(X != 0, axis=0))  # unseen features are never peeled
    on = X[:, cols] != 0
    known = np.zeros(cols.size, dtype=bool)
    common_only = ~np.any(on[:, cols >= k], axis=1)
    if k > 0 and np.linalg.matrix_rank(X[common_only][:, :k]) == k:
        known[cols < k] = True  # rank k: every common column is seen
    while True:
        unknown = on & ~known
        single = np.count_nonzero(unknown, axis=1) == 1
        new = np.any(unknown[single], axis=0)
        if not new.any():
            break
        known |= new
    out = np.zeros(X.shape[1], dtype=bool)
    out[cols[known]] = True
    return out


def feature_counts(X) -> np.ndarray:
    """Number of rows in which each feature appears, shape ``(d,)``."""
    return np.count_nonzero(_design(X), axis=0)


def clean_singletons(X, k: int) -> np.ndarray:
    r"""Tail features (index :math:`>k`) seen in exactly one row that carries no other tail feature.

    Returns their column indices (0-based), shape ``(m,)``.
    """
    X = _design(X)
    k = nonnegative_int(k, "k")
    on = X[:, k:] != 0
    once = np.flatnonzero(np.count_nonzero(on, axis=0) == 1)
    row_of = np.argmax(on[:, once], axis=0)
    tail_per_row = np.count_nonzero(on, axis=1)
    return k + once[tail_per_row[row_of] == 1]


def id_loss_exact(beta_hat, beta_star, p) -> np.ndarray:
    r"""Exact in-distribution excess loss :math:`L_{ID}=\sum_ip_i(\hat\beta_i-\beta^*_i)^2`.

    ``beta_hat`` may have shape ``(d,)`` or ``(d, q)``; the result has shape ``()`` or ``(q,)``.

    Book: :prf:ref:`prop-13-idloss` in book/13-memorization-composition/theory.md.
    """
    p = probabilities(p, "p", ndim=1)
    beta_star = real_array(beta_star, "beta_star", shape=p.shape)
    beta_hat = real_array(beta_hat, "beta_hat")
    if beta_hat.shape[0] != p.size or beta_hat.ndim > 2:
        raise ValueError(
            f"beta_hat must have shape ({p.size},) or ({p.size}, q), got {beta_hat.shape}"
        )
    delta = beta_hat - (beta_star if beta_hat.ndim == 1 else beta_star[:, None])
    # eq-13-idloss
    return np.einsum("i,i...->...", p, delta**2)


def missing_mass(p, beta_star, n: int) -> float:
    r"""Expected loss from unseen features, :math:`M_n=\sum_ip_i\beta_i^{*2}(1-p_i)^n`.

    It is a lower bound on :math:`\mathbb E L_{ID}` for the min-norm fit.

    Book: :prf:ref:`prop-13-missing` in book/13-memorization-composition/theory.md.
    """
    p = probabilities(p, "p", ndim=1)
    beta_star = real_array(beta_star, "beta_star", shape=p.shape)
    n = positive_int(n, "n")
    return float(np.sum(p * beta_star**2 * (1.0 - p) ** n))


def tail_count_probs(p, k: int) -> dict:
    r"""Law of the number :math:`T` of tail features (index :math:`>k`) in one sample.

    Returns a dict with the exact Poisson-binomial values ``p0``, ``p1``, ``p2plus``, the tail
    mass ``lam`` :math:`=p_{>k}=\sum_{i>k}p_i`, the Poisson approximation
    ``poisson_p2plus`` :math:`=1-e^{-\lambda}(1+\lambda)` and the small-:math:`\lambda` form
    ``half_square`` :math:`=\lambda^2/2`.

    Book: :prf:ref:`lem-13-structure` in book/13-memorization-composition/theory.md.
    """
    p = probabilities(p, "p", ndim=1)
    k = nonnegative_int(k, "k")
    q = p[k:]
    if np.any(q >= 1):
        raise ValueError("p must be below 1 for every tail feature (index > k)")
    log_p0 = np.sum(np.log1p(-q))
    p0 = float(np.exp(log_p0))
    p1 = float(p0 * np.sum(q / (1 - q)))
    lam = float(q.sum())
    return dict(
        p0=p0,
        p1=p1,
        p2plus=1.0 - p0 - p1,
        lam=lam,
        poisson_p2plus=float(-np.expm1(-lam) - lam * np.exp(-lam)),
        half_square=lam**2 / 2,
    )


def _tail_features(features, k: int, d: int) -> np.ndarray:
    features = np.asarray(features)
    if features.ndim != 1 or (features.size and features.dtype.kind not in "iu"):
        raise ValueError("features must be a 1-D array of integer column indices")
    features = features.astype(int)
    if features.size and (features.min() < k or features.max() >= d):
        raise ValueError(f"features must be tail columns in [k, d) = [{k}, {d})")
    if np.unique(features).size != features.size:
        raise ValueError("features must be distinct")
    return features


def ood_excess_loss(delta, p, k: int, features, t: int) -> np.ndarray:
    r"""Exact OOD excess loss on :math:`D_{\tilde F}`: usual common part plus ``t`` tail features.

    The test point has coordinates :math:`i\le k` drawn as in training, and ``t`` distinct
    features drawn uniformly from ``features`` with random signs (no other coordinate). Since
    all cross terms have mean zero,
    :math:`\mathbb E(x^\top\delta)^2=\sum_{i\le k}p_i\delta_i^2
    +t\cdot\overline{\delta_j^2}_{j\in\tilde F}`.
    ``delta`` has shape ``(d,)`` or ``(d, q)``.

    Book: :prf:ref:`prop-13-noisy` in book/13-memorization-composition/theory.md.
    """
    p = probabilities(p, "p", ndim=1)
    delta = real_array(delta, "delta")
    if delta.shape[0] != p.size or delta.ndim > 2:
        raise ValueError(f"delta must have shape ({p.size},) or ({p.size}, q), got {delta.shape}")
    k = nonnegative_int(k, "k")
    t = nonnegative_int(t, "t")
    features = _tail_features(features, k, p.size)
    if t > features.size:
        raise ValueError(f"t must be at most the number of features ({features.size}), got {t}")
    common = np.einsum("i,i...->...", p[:k], delta[:k] ** 2)
    return common + t * np.mean(delta[features] ** 2, axis=0)


def ood_sample(
    n: int, p, k: int, features, t: int, rng: np.random.Generator, *, sparse: bool = False
):
    r"""Sample ``n`` OOD test points: the usual common part plus ``t`` features from ``features``.

    The ``t`` features are distinct, drawn uniformly, with random signs.

    Returns shape ``(n, d)``: a dense array, or with ``sparse=True`` a
    ``scipy.sparse.csr_array`` with the same entries (at most :math:`k+t` per row, so a large
    test set costs :math:`O(n(k+t))` memory). With ``t = 2`` and singleton tail features, most
    pairs never appeared together in training: this is the composition test.

    Book: :prf:ref:`prop-13-noisy` in book/13-memorization-composition/theory.md.
    """
    n = positive_int(n, "n")
    p = probabilities(p, "p", ndim=1)
    k = nonnegative_int(k, "k")
    t = nonnegative_int(t, "t")
    check_generator(rng)
    features = _tail_features(features, k, p.size)
    if t > features.size:
        raise ValueError(f"t must be at most the number of features ({features.size}), got {t}")
    if not isinstance(sparse, bool):
        raise TypeError(f"sparse must be a bool, got {type(sparse).__name__}")
    common = sample_longtail(n, p[:k], rng) if k else np.zeros((n, 0))
    r_c, c_c = np.nonzero(common)
    if t:
        pick = np.argsort(rng.random((n, features.size)), axis=1)[:, :t]
        r_t, c_t = np.repeat(np.arange(n), t), features[pick].ravel()
        v_t = rng.choice([-1.0, 1.0], size=n * t)
    else:
        r_t, c_t, v_t = (np.zeros(0, dtype=int),) * 2 + (np.zeros(0),)
    rows, cols = np.concatenate([r_c, r_t]), np.concatenate([c_c, c_t])
    vals = np.concatenate([common[r_c, c_c], v_t])
    if sparse:
        return csr_array((vals, (rows, cols)), shape=(n, p.size))
    X = np.zeros((n, p.size))
    X[rows, cols] = vals
    return X
