r"""Dueling bandits with a Borda winner: DEXP3 and FTRL with a hybrid entropy (chapter 06).

Paper: Z. Hu, T. Zhang, F. Kong, *Best-of-three-worlds Analysis for Dueling Bandits with
Borda Winner*, ICLR 2026 (OpenReview ``XCFL4Po1d8``). Baseline: A. Saha, T. Koren,
Y. Mansour, *Adversarial Dueling Bandits*, ICML 2021 (DEXP3).

Chapter folder: ``book/06-dueling-bandits-borda/``.

Each round the learner draws two arms :math:`x_t,y_t` i.i.d. from a law :math:`d_t` on
:math:`[K]`, sees :math:`o_t\sim\mathrm{Bernoulli}(P_t(x_t,y_t))` and scores arms by the
shifted Borda score :math:`s_t(i)=\frac1K\sum_j P_t(i,j)`. The central equations are the
importance-weighted estimate and the FTRL / mixing step

.. math::
    \hat s_t(i)=\frac{\mathbb 1\{x_t=i\}\,o_t}{K\,d_t(i)\,d_t(y_t)},\qquad
    p_t=\arg\max_{p\in\Delta_K}\langle p,\hat S_{t-1}\rangle-\psi_t(p),\qquad
    d_t=(1-\gamma_t)\,p_t+\gamma_t/K,

with :math:`\psi_t=\beta_t\sum_i p_i\log p_i` (Shannon, DEXP3) or the hybrid
:math:`\psi_t=\beta_t\sum_i[p_i\log p_i+(1-p_i)\log(1-p_i)]` (our reconstruction of the
paper's regulariser). The regret is
:math:`R_T=\max_i\sum_t s_t(i)-\sum_t\langle d_t,s_t\rangle` (the expectation over the two
draws of round ``t`` is taken exactly; the randomness left is that of the past).

Shapes: a preference matrix is ``(K, K)``; a stack of them ``(M, K, K)``; a batch of
independent runs (seeds times configurations) has ``B`` rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lib.validate import check_generator, positive, positive_int, real, real_array

__all__ = [
    "check_preference_matrix",
    "shifted_borda",
    "borda",
    "utility_matrix",
    "borda_estimate",
    "estimator_moments",
    "ftrl_weights",
    "hybrid_entropy",
    "shannon_entropy",
    "dexp3_params",
    "Schedule",
    "fixed_schedule",
    "adaptive_schedule",
    "etc_schedule",
    "dexp3_bound",
    "switching_index",
    "corruption_index",
    "play_round",
    "adaptive_gamma",
    "adaptive_beta_next",
    "second_moment_closed_form",
    "simulate",
    "SimResult",
]


# --------------------------------------------------------------------------- preferences
def check_preference_matrix(P, name: str = "P", atol: float = 1e-9) -> np.ndarray:
    """Require :math:`P\\in[0,1]^{K\\times K}` with :math:`P+P^\\top=\\mathbf 1` (so
    :math:`P(i,i)=\\tfrac12`); a stack ``(M, K, K)`` is checked matrix by matrix."""
    P = real_array(P, name)
    if P.ndim not in (2, 3) or P.shape[-1] != P.shape[-2] or P.shape[-1] < 2:
        raise ValueError(f"{name} must have shape (K, K) or (M, K, K) with K >= 2, got {P.shape}")
    if np.any(P < 0) or np.any(P > 1):
        raise ValueError(f"{name} must have entries in [0, 1]")
    if not np.allclose(P + np.swapaxes(P, -1, -2), 1.0, atol=atol):
        raise ValueError(f"{name} must satisfy P + P^T = 1")
    return P


def shifted_borda(P) -> np.ndarray:
    """Shifted Borda score :math:`s(i)=\\frac1K\\sum_j P(i,j)`, shape ``(..., K)``.

    Book: :prf:ref:`def-06-borda` in book/06-dueling-bandits-borda/estimator_dexp3.md.
    """
    P = check_preference_matrix(P)
    return P.mean(axis=-1)


def borda(P) -> np.ndarray:
    """Borda score :math:`b(i)=\\frac1{K-1}\\sum_{j\\ne i}P(i,j)=(Ks(i)-\\tfrac12)/(K-1)`."""
    P = check_preference_matrix(P)
    K = P.shape[-1]
    return (P.sum(axis=-1) - 0.5) / (K - 1)


def utility_matrix(u) -> np.ndarray:
    """Linear-utility preferences :math:`P(i,j)=\\tfrac12+\\tfrac{u_i-u_j}2`.

    Needs :math:`|u_i-u_j|\\le1`; then :math:`s(i)=\\tfrac12+\\tfrac{u_i-\\bar u}2`, so shifted
    Borda gaps are half the utility gaps.
    """
    u = real_array(u, "u", ndim=1)
    if u.size < 2:
        raise ValueError(f"u must have at least 2 entries, got {u.size}")
    if np.ptp(u) > 1 + 1e-12:
        raise ValueError(f"u must satisfy max(u) - min(u) <= 1, got {np.ptp(u):.4g}")
    return np.clip(0.5 + (u[:, None] - u[None, :]) / 2, 0.0, 1.0)


# --------------------------------------------------------------------------- estimator
def borda_estimate(x, y, o, q) -> np.ndarray:
    """One-round importance-weighted estimate :math:`\\hat s_t`, shape ``(B, K)``.

    :math:`\\hat s_t(i)=\\mathbb 1\\{x_t=i\\}o_t/(K q_t(i) q_t(y_t))` (eq. ``06-estimator``):
    zero except at :math:`x_t`. ``x, y`` int ``(B,)``, ``o`` in {0, 1} ``(B,)``, ``q`` ``(B, K)``.

    Book: :prf:ref:`lem-06-estimator` in book/06-dueling-bandits-borda/estimator_dexp3.md.
    """
    q = real_array(q, "q", ndim=2)
    B, K = q.shape
    x = np.asarray(x)
    y = np.asarray(y)
    o = real_array(o, "o", shape=(B,))
    for arr, nm in ((x, "x"), (y, "y")):
        if arr.shape != (B,) or not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"{nm} must be an integer array of shape ({B},)")
        if np.any(arr < 0) or np.any(arr >= K):
            raise ValueError(f"{nm} must lie in [0, {K})")
    if np.any(q <= 0):
        raise ValueError("q must be positive")
    out = np.zeros((B, K))
    _estimate_update(out, x, y, o, q)
    return out


def _estimate_update(S: np.ndarray, x, y, o, d: np.ndarray) -> None:
    """Add the estimate of eq. ``06-estimator`` to ``S`` in place: row ``b`` gets
    :math:`o_b/(K d_b(x_b) d_b(y_b))` at column ``x_b``. Shared by :func:`borda_estimate` and
    :func:`play_round` (no validation: callers check their inputs)."""
    rows = np.arange(S.shape[0])
    S[rows, x] += o / (S.shape[1] * d[rows, x] * d[rows, y])


def estimator_moments(P, q) -> tuple[np.ndarray, np.ndarray]:
    """Exact mean and second moment of :math:`\\hat s(i)` under :math:`x,y\\sim q` i.i.d.

    Both are computed by enumerating the :math:`2K^2` outcomes :math:`(x,y,o)` with their
    probabilities :math:`q(x)q(y)P(x,y)^o(1-P(x,y))^{1-o}` and applying
    :func:`borda_estimate` to each, so the mean is an independent route to :math:`s(i)` (it
    equals it only if the estimator's weights are right) and the second moment can be compared
    with the closed form :math:`\\sum_j P(i,j)/(K^2q(i)q(j))` of the lemma. Both ``(K,)``.
    """
    P = check_preference_matrix(P)
    q = real_array(q, "q", ndim=1, shape=(P.shape[-1],))
    K = q.size
    x, y = (a.ravel() for a in np.meshgrid(np.arange(K), np.arange(K), indexing="ij"))
    w = q[x] * q[y]
    est1 = borda_estimate(x, y, np.ones(K * K), np.broadcast_to(q, (K * K, K)))  # o = 1
    pr1 = (w * P[x, y])[:, None]  # outcomes with o = 0 give a zero estimate
    return (pr1 * est1).sum(0), (pr1 * est1**2).sum(0)


def second_moment_closed_form(P, q) -> np.ndarray:
    """:math:`\\mathbb E\\hat s(i)^2=\\sum_j P(i,j)/(K^2q(i)q(j))`
    (:prf:ref:`lem-06-estimator`), ``(K,)``."""
    P = check_preference_matrix(P)
    q = real_array(q, "q", ndim=1, shape=(P.shape[-1],))
    K = q.size
    return (P / (K**2 * q[:, None] * q[None, :])).sum(1)


# --------------------------------------------------------------------------- FTRL step
def shannon_entropy(p) -> np.ndarray:
    """:math:`H(p)=-\\sum_i p_i\\log p_i` along the last axis."""
    p = np.asarray(p, dtype=float)
    return -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=-1)


def hybrid_entropy(p) -> np.ndarray:
    """:math:`h(p)=-\\sum_i[p_i\\log p_i+(1-p_i)\\log(1-p_i)]` along the last axis."""
    p = np.asarray(p, dtype=float)
    return shannon_entropy(p) + shannon_entropy(1.0 - p)


def _hybrid_solve(S, beta, lam0=None, tol=1e-9, max_iter=60):
    """Vectorised safeguarded Newton for :math:`\\sum_i\\sigma((S_i-\\lambda)/\\beta)=1`.

    With :math:`k=\\arg\\max_i S_i` the condition reads
    :math:`g(\\lambda)=\\log\\sum_{i\\ne k}\\sigma(a_i)-\\log\\sigma(-a_k)=0`,
    :math:`a_i=(S_i-\\lambda)/\\beta`; :math:`g` is strictly decreasing and nearly linear in
    both tails, so Newton on :math:`g` converges in a few steps even when :math:`p_k\\to1`.
    Bracket: :math:`g(S_{(2)})\\ge0\\ge g(\\max S+\\beta\\log K)`. Returns ``(p, lam)``.
    """
    B, K = S.shape
    rows = np.arange(B)
    k = np.argmax(S, axis=1)
    Ssort = np.sort(S, axis=1)
    lo = Ssort[:, -2].copy()
    hi = Ssort[:, -1] + beta * np.log(K)
    lam = (lo + hi) / 2 if lam0 is None else np.clip(lam0, lo, hi)
    others = np.ones((B, K), dtype=bool)
    others[rows, k] = False
    for _ in range(max_iter):
        a = (S - lam[:, None]) / beta[:, None]
        logsig = -np.logaddexp(0.0, -a)  # log sigma(a)
        sig = np.exp(logsig)
        ls_o = np.where(others, logsig, -np.inf)
        mx = ls_o.max(1)
        w = np.exp(ls_o - mx[:, None])
        sw = w.sum(1)
        A = mx + np.log(sw)
        ak = a[rows, k]
        C = -np.logaddexp(0.0, ak)  # log sigma(-a_k) = log(1 - p_k)
        g = A - C
        if np.all(np.abs(g) < tol):
            break
        gp = -(((w / sw[:, None]) * (1.0 - sig)).sum(1) + sig[rows, k]) / beta
        pos = g > 0
        lo = np.where(pos, lam, lo)
        hi = np.where(pos, hi, lam)
        new = lam - g / gp
        bad = ~np.isfinite(new) | (new <= lo) | (new >= hi)
        lam = np.where(bad, (lo + hi) / 2, new)
    a = (S - lam[:, None]) / beta[:, None]
    sig = 0.5 * (1.0 + np.tanh(0.5 * a))
    return sig / sig.sum(1, keepdims=True), lam


def _softmax(z: np.ndarray) -> np.ndarray:
    """Row-wise softmax of ``(B, K)`` logits (the Shannon FTRL step)."""
    p = np.exp(z - z.max(1, keepdims=True))
    return p / p.sum(1, keepdims=True)


def _ftrl_step(S: np.ndarray, beta: np.ndarray, hyb: np.ndarray, lam: np.ndarray):
    """FTRL weights for a batch (eq. ``06-hybrid-kkt`` on rows with ``hyb``, softmax elsewhere).

    ``lam`` ``(B,)``: previous multipliers of the hybrid rows (NaN: no warm start); returns
    ``(p, lam)``. Shared by :func:`ftrl_weights`-style calls inside :func:`play_round`.
    """
    p = _softmax(S / beta[:, None])
    if hyb.any():
        lam0 = lam[hyb]
        ph, lam_h = _hybrid_solve(
            S[hyb], beta[hyb], None if np.isnan(lam0).any() else lam0, tol=1e-10, max_iter=80
        )
        p[hyb] = ph
        lam = lam.copy()
        lam[hyb] = lam_h
    return p, lam


def ftrl_weights(S_hat, beta, kind: str = "shannon") -> np.ndarray:
    """FTRL weights :math:`p=\\arg\\max_{p\\in\\Delta_K}\\langle p,\\hat S\\rangle-\\psi(p)`.

    ``kind="shannon"``: :math:`\\psi=\\beta\\sum p_i\\log p_i`, so
    :math:`p=\\mathrm{softmax}(\\hat S/\\beta)`.
    ``kind="hybrid"``: :math:`\\psi=\\beta\\sum[p_i\\log p_i+(1-p_i)\\log(1-p_i)]`, so
    :math:`p_i=\\sigma((\\hat S_i-\\lambda)/\\beta)` with :math:`\\lambda` the root of
    :math:`\\sum_i p_i=1` (eq. ``06-hybrid-kkt``).

    ``S_hat``: ``(K,)`` or ``(B, K)``; ``beta``: scalar or ``(B,)``, > 0. Returns the same
    shape as ``S_hat``.

    Book: :prf:ref:`prop-06-hybrid` in book/06-dueling-bandits-borda/ftrl_hybrid.md.
    """
    S = real_array(S_hat, "S_hat")
    if S.ndim not in (1, 2) or S.shape[-1] < 2:
        raise ValueError(f"S_hat must have shape (K,) or (B, K) with K >= 2, got {S.shape}")
    one = S.ndim == 1
    S2 = S[None, :] if one else S
    b = real_array(beta, "beta")
    if np.any(b <= 0):
        raise ValueError("beta must be positive")
    b = np.broadcast_to(b, (S2.shape[0],)).astype(float)
    if kind == "shannon":
        p = _softmax(S2 / b[:, None])
    elif kind == "hybrid":
        p, _ = _hybrid_solve(S2, b, tol=1e-12, max_iter=200)
    else:
        raise ValueError(f"kind must be 'shannon' or 'hybrid', got {kind!r}")
    return p[0] if one else p


# --------------------------------------------------------------------------- schedules
@dataclass(frozen=True)
class Schedule:
    """Learning-rate and exploration schedule (one per batch row).

    ``mode="fixed"``: constant :math:`\\beta=\\beta_1`, :math:`\\gamma=\\gamma_1` (DEXP3 tuned for
    a horizon). ``mode="adaptive"`` (our reconstruction, :prf:ref:`def-06-schedule` in
    book/06-dueling-bandits-borda/ftrl_hybrid.md):
    :math:`\\gamma_t=\\min\\{\\tfrac12,\\sqrt{K/\\beta_t}\\}`,
    :math:`\\beta_{t+1}=\\beta_t+c\\,\\sqrt{K/\\beta_t}/\\max\\{h_t,h_{\\min}\\}`.
    ``mode="etc"``: explore-then-commit, :math:`\\gamma_t=1` for ``t < explore_rounds`` and 0
    after, with a vanishing :math:`\\beta` (plays the empirical Borda leader twice).
    """

    mode: str
    beta1: float
    gamma1: float = 0.5
    c: float = 1.0
    h_min: float = 1e-3
    explore_rounds: int = 0


def adaptive_gamma(beta, K: int) -> np.ndarray:
    """Exploration rule of eq. ``06-schedule``:
    :math:`\\gamma_t=\\min\\{\\tfrac12,\\sqrt{K/\\beta_t}\\}`.

    Book: :prf:ref:`def-06-schedule` in book/06-dueling-bandits-borda/ftrl_hybrid.md.
    """
    return np.minimum(0.5, np.sqrt(K / np.asarray(beta, dtype=float)))


def adaptive_beta_next(beta, h, K: int, c=1.0, h_min=1e-3) -> np.ndarray:
    """Learning-rate rule of eq. ``06-schedule``:
    :math:`\\beta_{t+1}=\\beta_t+c\\sqrt{K/\\beta_t}/\\max\\{h_t,h_{\\min}\\}`, so that the
    penalty increment :math:`(\\beta_{t+1}-\\beta_t)h_t` is :math:`c\\sqrt{K/\\beta_t}` whatever
    :math:`h_t` is. Arrays broadcast.

    Book: :prf:ref:`def-06-schedule` in book/06-dueling-bandits-borda/ftrl_hybrid.md.
    """
    beta = np.asarray(beta, dtype=float)
    return beta + c * np.sqrt(K / beta) / np.maximum(h, h_min)


def dexp3_params(K: int, T: int) -> tuple[float, float]:
    """DEXP3's fixed-horizon tuning :math:`\\eta=(\\log K)^{2/3}K^{-1/3}T^{-2/3}`,
    :math:`\\gamma=\\sqrt{\\eta K}`; returns :math:`(\\beta=1/\\eta,\\gamma)`.

    Book: :prf:ref:`thm-06-dexp3` in book/06-dueling-bandits-borda/estimator_dexp3.md.
    """
    K = positive_int(K, "K")
    T = positive_int(T, "T")
    if K < 2:
        raise ValueError(f"K must be >= 2, got {K}")
    eta = np.log(K) ** (2 / 3) / (K ** (1 / 3) * T ** (2 / 3))
    return 1.0 / eta, float(min(1.0, np.sqrt(eta * K)))


def fixed_schedule(beta: float, gamma: float) -> Schedule:
    """A constant schedule (DEXP3 with :math:`\\eta=1/\\beta`; ``gamma=1`` plays uniformly)."""
    return Schedule("fixed", positive(beta, "beta"), real(gamma, "gamma", lo=0.0, hi=1.0))


def etc_schedule(explore_rounds: int) -> Schedule:
    """Explore-then-commit: uniform pairs for ``explore_rounds`` rounds, then the leader."""
    n = positive_int(explore_rounds, "explore_rounds")
    return Schedule("etc", 1e-9, 1.0, explore_rounds=n)


def adaptive_schedule(K: int, c: float = 1.0, h_min: float = 1e-3) -> Schedule:
    """Our reconstructed entropy-adaptive schedule, started at :math:`\\beta_1=4K`."""
    K = positive_int(K, "K")
    return Schedule("adaptive", 4.0 * K, 0.5, positive(c, "c"), positive(h_min, "h_min"))


def dexp3_bound(K: int, T: int) -> float:
    """Our explicit fixed-horizon bound for DEXP3 (tuned by :func:`dexp3_params`):
    :math:`R_T\\le\\bigl(2+\\tfrac1{1-\\gamma}\\bigr)(K\\log K)^{1/3}T^{2/3}` for every oblivious
    sequence of preference matrices (eq. ``06-dexp3-bound``).

    Book: :prf:ref:`thm-06-dexp3` in book/06-dueling-bandits-borda/estimator_dexp3.md.
    """
    _, gamma = dexp3_params(K, T)
    if gamma >= 1:
        raise ValueError(f"T is too small for K: the tuned gamma is {gamma:.3g} >= 1")
    return float((2 + 1 / (1 - gamma)) * (K * np.log(K)) ** (1 / 3) * T ** (2 / 3))


def switching_index(T: int) -> np.ndarray:
    """Oblivious switching sequence: matrix ``0`` on :math:`[2^{2k}-1,2^{2k+1}-1)`, ``1`` on the
    other dyadic blocks (round ``t`` is 0-based), shape ``(T,)``."""
    T = positive_int(T, "T")
    t = np.arange(T)
    return (np.floor(np.log2(t + 1)).astype(int) % 2).astype(int)


def corruption_index(T: int, C: float, per_round: float) -> np.ndarray:
    """Corrupt the first :math:`\\lceil C/c\\rceil` rounds (matrix ``1``), then play the true
    matrix ``0``; ``per_round`` is :math:`c=\\max_{i,j}|P_{\\rm bad}(i,j)-P(i,j)|`, so the total
    corruption is at most :math:`C+c`. Shape ``(T,)``."""
    T = positive_int(T, "T")
    C = real(C, "C", lo=0.0)
    c = positive(per_round, "per_round")
    out = np.zeros(T, dtype=int)
    out[: min(T, int(np.ceil(C / c)))] = 1
    return out


# --------------------------------------------------------------------------- simulation
def play_round(S, beta, gamma, hyb, lam, u, Ms, m):
    """One round of :prf:ref:`alg-06-ftrl` for ``B`` learners; updates ``S`` in place.

    FTRL weights :math:`p_t` (eq. ``06-hybrid-kkt`` or softmax), mixing
    :math:`d_t=(1-\\gamma_t)p_t+\\gamma_t/K`, two i.i.d. draws from :math:`d_t`, the duel
    :math:`o_t\\sim\\mathrm{Bern}(P_t(x_t,y_t))` with :math:`P_t=M_{m_b}`, and the estimate of
    eq. ``06-estimator``. ``S`` ``(B, K)``; ``beta, gamma, lam`` ``(B,)``; ``hyb`` bool ``(B,)``;
    ``u`` ``(3, B)`` uniforms; ``Ms`` ``(M, K, K)``; ``m`` int ``(B,)``. Returns ``(p, d, lam)``.

    Book: :prf:ref:`alg-06-ftrl` in book/06-dueling-bandits-borda/ftrl_hybrid.md.
    """
    K = S.shape[1]
    p, lam = _ftrl_step(S, beta, hyb, lam)
    d = (1.0 - gamma)[:, None] * p + (gamma / K)[:, None]
    cum = np.cumsum(d, axis=1)
    cum[:, -1] = 1.0
    x = (u[0][:, None] > cum).sum(1)
    y = (u[1][:, None] > cum).sum(1)
    o = (u[2] < Ms[m, x, y]).astype(float)
    _estimate_update(S, x, y, o, d)
    return p, d, lam


@dataclass
class SimResult:
    """Output of :func:`simulate`.

    ``regret``: ``(B, n_checkpoints)`` regret :math:`R_T` at each checkpoint;
    ``regret_ref``: ``(B, n)`` regret measured on the reference matrix ``Ms[0]`` (the
    uncorrupted preferences in a corrupted run), :math:`\\sum_t\\sum_i\\Delta_i d_t(i)`;
    ``checkpoints``: ``(n,)``; ``p_best``/``gamma``/``beta``: ``(B, n_trace)`` traces of
    :math:`p_t(i^*)`, :math:`\\gamma_t`, :math:`\\beta_t` at ``trace_t``;
    ``S_hat``: final cumulative estimates ``(B, K)``.
    """

    regret: np.ndarray
    regret_ref: np.ndarray
    checkpoints: np.ndarray
    trace_t: np.ndarray
    p_best: np.ndarray
    gamma: np.ndarray
    beta: np.ndarray
    S_hat: np.ndarray


def simulate(
    Ms,
    idx,
    schedules: list[Schedule],
    kind,
    checkpoints,
    rng: np.random.Generator,
    best_arm: int | None = None,
    n_trace: int = 200,
) -> SimResult:
    """Run ``B`` independent dueling-bandit learners for ``T = idx.shape[1]`` rounds.

    Row ``b`` faces :math:`P_t=M_{\\mathrm{idx}[b,t]}` (an oblivious sequence fixed in
    advance), uses ``schedules[b]`` and regulariser ``kind[b]`` (``"shannon"``/``"hybrid"``).
    Each round: FTRL weights :math:`p_t`, mixing :math:`d_t=(1-\\gamma_t)p_t+\\gamma_t/K`,
    draws :math:`x_t,y_t\\sim d_t` i.i.d., :math:`o_t\\sim\\mathrm{Bern}(P_t(x_t,y_t))`,
    update :math:`\\hat S\\mathrel{+}=\\hat s_t` (eq. ``06-estimator``). The expected gain
    :math:`\\langle d_t,s_t\\rangle` is accumulated exactly.

    Parameters
    ----------
    Ms : (M, K, K) preference matrices.  idx : (B, T) int in [0, M).
    schedules : list of B :class:`Schedule`.  kind : str or list of B str.
    checkpoints : increasing ints in [1, T]: horizons at which :math:`R_T` is reported.
    best_arm : arm whose :math:`p_t` is traced (default: best arm of ``Ms[0]``).
    The hybrid weights are solved each round by Newton's method warm-started at the previous
    :math:`\\lambda`, to :math:`|g|<10^{-10}` (see :func:`_hybrid_solve`).

    Book: :prf:ref:`alg-06-ftrl` in book/06-dueling-bandits-borda/ftrl_hybrid.md.
    """
    check_generator(rng)
    Ms = check_preference_matrix(Ms, "Ms")
    if Ms.ndim == 2:
        Ms = Ms[None]
    M, K, _ = Ms.shape
    idx = np.asarray(idx)
    if idx.ndim != 2 or not np.issubdtype(idx.dtype, np.integer):
        raise ValueError("idx must be a 2-D integer array (B, T)")
    if np.any(idx < 0) or np.any(idx >= M):
        raise ValueError(f"idx must lie in [0, {M})")
    B, T = idx.shape
    if len(schedules) != B:
        raise ValueError(f"schedules must have one entry per row ({B}), got {len(schedules)}")
    kinds = [kind] * B if isinstance(kind, str) else list(kind)
    if len(kinds) != B or any(k not in ("shannon", "hybrid") for k in kinds):
        raise ValueError("kind must be 'shannon', 'hybrid' or a list of those, one per row")
    cps = np.asarray(checkpoints)
    if cps.ndim != 1 or np.any(np.diff(cps) <= 0) or cps[0] < 1 or cps[-1] > T:
        raise ValueError(f"checkpoints must be increasing integers in [1, {T}]")
    sb = Ms.mean(axis=-1)  # (M, K) shifted Borda scores
    best = int(np.argmax(sb[0])) if best_arm is None else int(best_arm)

    for s in schedules:
        if not isinstance(s, Schedule) or s.mode not in ("fixed", "adaptive", "etc"):
            raise ValueError("schedules must be Schedule objects with a known mode")
    adaptive = np.array([s.mode == "adaptive" for s in schedules])
    etc = np.array([s.mode == "etc" for s in schedules])
    n_explore = np.array([s.explore_rounds for s in schedules])
    any_adaptive, any_etc = bool(adaptive.any()), bool(etc.any())
    beta = np.array([s.beta1 for s in schedules], dtype=float)
    gamma = np.array([s.gamma1 for s in schedules], dtype=float)
    c = np.array([s.c for s in schedules], dtype=float)
    h_min = np.array([s.h_min for s in schedules], dtype=float)
    hyb = np.array([k == "hybrid" for k in kinds])

    S = np.zeros((B, K))
    lam = np.full(B, np.nan)
    gain = np.zeros(B)
    gain_ref = np.zeros(B)
    sb0 = sb[0]
    regret_ref = np.zeros((B, cps.size))
    regret = np.zeros((B, cps.size))
    trace_t = np.unique(np.linspace(1, T, min(n_trace, T)).astype(int))
    tr_p = np.zeros((B, trace_t.size))
    tr_g = np.zeros((B, trace_t.size))
    tr_b = np.zeros((B, trace_t.size))
    chunk = max(1, min(T, 2**22 // (3 * B)))  # uniforms for x, y, o, drawn in blocks
    ci = ti = 0
    for t in range(T):
        if t % chunk == 0:  # same stream as one (T, 3, B) draw, without holding it in memory
            U = rng.random((min(chunk, T - t), 3, B))
        if any_adaptive:
            gamma = np.where(adaptive, adaptive_gamma(beta, K), gamma)
        if any_etc:
            gamma = np.where(etc, (t < n_explore).astype(float), gamma)
        m = idx[:, t]
        p, d, lam = play_round(S, beta, gamma, hyb, lam, U[t % chunk], Ms, m)
        gain += (d * sb[m]).sum(1)
        gain_ref += d @ sb0
        if any_adaptive:
            h = np.where(hyb, hybrid_entropy(p), shannon_entropy(p))
            beta = np.where(adaptive, adaptive_beta_next(beta, h, K, c, h_min), beta)
        if ti < trace_t.size and t + 1 == trace_t[ti]:
            tr_p[:, ti], tr_g[:, ti], tr_b[:, ti] = p[:, best], gamma, beta
            ti += 1
        if ci < cps.size and t + 1 == cps[ci]:
            counts = np.stack([(idx[:, : t + 1] == j).sum(1) for j in range(M)], axis=1)
            regret[:, ci] = (counts @ sb).max(1) - gain
            regret_ref[:, ci] = (t + 1) * sb0.max() - gain_ref
            ci += 1
    return SimResult(regret, regret_ref, cps, trace_t, tr_p, tr_g, tr_b, S)
