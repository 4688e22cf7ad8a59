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

Two schedules of :math:`(\beta_t,\gamma_t)` are ours (the paper's eq. (5) was not readable): the
entropy-adaptive one with :math:`\gamma_t=\sqrt{K/\beta_t}` (:prf:ref:`def-06-schedule`), for
which no learning rate gives polylogarithmic stochastic regret (:prf:ref:`prop-06-floor`), and
the stability-matched one (:prf:ref:`def-06-matched`), whose exploration shrinks with
:math:`a_t=1-\max_ip_t(i)` through the hybrid stability term
:math:`\beta_t^{-1}\sum_ip_i(1-p_i)\hat s_i^2` (:prf:ref:`lem-06-hybrid-stability`).

Shapes: a preference matrix is ``(K, K)``; a stack of them ``(M, K, K)``; a batch of
independent runs (seeds times configurations) has ``B`` rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import integrate, special

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
    "hybrid_entropy_max",
    "shannon_entropy",
    "hybrid_potential",
    "hybrid_one_step_stability",
    "hybrid_stability_bound",
    "matched_stability_bound",
    "dexp3_params",
    "Schedule",
    "fixed_schedule",
    "adaptive_schedule",
    "matched_schedule",
    "oracle_schedule",
    "etc_schedule",
    "dexp3_bound",
    "switching_index",
    "corruption_index",
    "lower_bound_matrix",
    "exploration_floor",
    "exploration_floor_regret",
    "play_round",
    "adaptive_gamma",
    "adaptive_beta_next",
    "matched_gamma",
    "entropy_beta_next",
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
    :func:`play_round` (no validation: callers check their inputs). Returns the increments
    ``(B,)``."""
    rows = np.arange(S.shape[0])
    v = o / (S.shape[1] * d[rows, x] * d[rows, y])
    S[rows, x] += v
    return v


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
    return special.entr(np.asarray(p, dtype=float)).sum(-1)


def hybrid_entropy(p) -> np.ndarray:
    """:math:`h(p)=-\\sum_i[p_i\\log p_i+(1-p_i)\\log(1-p_i)]` along the last axis."""
    p = np.asarray(p, dtype=float)
    return (special.entr(p) + special.entr(1.0 - p)).sum(-1)


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
        done = np.abs(g) < tol
        if np.all(done):
            break
        gp = -(((w / sw[:, None]) * (1.0 - sig)).sum(1) + sig[rows, k]) / beta
        pos = g > 0
        lo = np.where(pos, lam, lo)
        hi = np.where(pos, hi, lam)
        new = lam - g / gp
        bad = ~np.isfinite(new) | (new <= lo) | (new >= hi)
        # rows already solved stay put (a bisection step would move them off the root)
        lam = np.where(done, lam, np.where(bad, (lo + hi) / 2, new))
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


def hybrid_entropy_max(K: int) -> float:
    r""":math:`h_{\max}=\max_{p\in\Delta_K}h(p)=\log K+(K-1)\log\frac K{K-1}` (uniform law)."""
    K = positive_int(K, "K")
    if K < 2:
        raise ValueError(f"K must be >= 2, got {K}")
    return float(np.log(K) + (K - 1) * np.log(K / (K - 1)))


def _hybrid_point(S, beta, x, v):
    """Validate the one-step stability arguments; returns ``(S, beta, x, v, p)``."""
    S = real_array(S, "S", ndim=1)
    if S.size < 2:
        raise ValueError(f"S must have at least 2 entries, got {S.size}")
    beta = positive(beta, "beta")
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or not 0 <= x < S.size:
        raise ValueError(f"x must be an integer arm in [0, {S.size}), got {x!r}")
    v = real(v, "v", lo=0.0)
    return S, beta, int(x), v, ftrl_weights(S, beta, "hybrid")


def hybrid_potential(S, beta) -> float:
    r"""FTRL potential :math:`\Phi_\beta(S)=\max_{p\in\Delta_K}\langle p,S\rangle-\beta\psi(p)
    =\langle p,S\rangle+\beta h(p)` for the hybrid :math:`\psi` (eq. ``06-hybrid``); ``S`` ``(K,)``.

    Its gradient is the FTRL step :math:`p=\nabla\Phi_\beta(S)`, so the stability term of round
    :math:`t` is the Bregman gap of :math:`\Phi` (:func:`hybrid_one_step_stability`).
    """
    S = real_array(S, "S", ndim=1)
    p = ftrl_weights(S, positive(beta, "beta"), "hybrid")
    return float(p @ S + beta * hybrid_entropy(p))


def hybrid_one_step_stability(S, beta, x, v) -> float:
    r"""Exact stability term of one FTRL round with a one-arm gain :math:`\hat s=v\,e_x`:

    .. math:: D=\Phi_\beta(S+v e_x)-\Phi_\beta(S)-v\,p_x
              =\int_0^v\bigl(p_x(S+u\,e_x)-p_x(S)\bigr)\,du,

    computed by adaptive quadrature of the second form (the first loses digits to cancellation).
    ``S`` ``(K,)``, ``beta`` > 0, ``x`` an arm, ``v`` >= 0.

    Book: :prf:ref:`lem-06-hybrid-stability` in book/06-dueling-bandits-borda/ftrl_hybrid.md.
    """
    S, beta, x, v, p = _hybrid_point(S, beta, x, v)
    if v == 0:
        return 0.0

    def excess(u):
        shifted = S.copy()
        shifted[x] += u
        return ftrl_weights(shifted, beta, "hybrid")[x] - p[x]

    # the integrand rises from 0 to at most 1 - p_x, over a width of order beta
    points = [min(v, beta * k) for k in (1, 4, 16) if beta * k < v] or None
    val, _ = integrate.quad(excess, 0.0, v, points=points, epsabs=1e-14, epsrel=1e-10, limit=200)
    return float(max(val, 0.0))


def hybrid_stability_bound(S, beta, x, v) -> float:
    r"""Bound of :prf:ref:`lem-06-hybrid-stability` on :func:`hybrid_one_step_stability`:

    .. math:: D\le\frac{e^{v/\beta}}{2\beta}\sum_ip_i(1-p_i)\hat s_i^2
              =\frac{e^{v/\beta}}{2\beta}\,v^2\,p_x(1-p_x),\qquad \hat s=v\,e_x .

    ``S`` ``(K,)``, ``beta`` > 0, ``x`` an arm, ``v`` >= 0.
    """
    S, beta, x, v, p = _hybrid_point(S, beta, x, v)
    return float(np.exp(v / beta) * v**2 * p[x] * (1.0 - p[x]) / (2.0 * beta))


def matched_stability_bound(p, gamma) -> np.ndarray:
    r"""Bound of :prf:ref:`cor-06-expected-stability` on the expected hybrid stability sum:

    .. math:: \mathbb E_t\Bigl[\sum_ip_i(1-p_i)\hat s_i^2\Bigr]\le
              \min\Bigl\{\frac{(K+1)\,a}{\gamma^2},\ \frac{2(K-1)}{\gamma}\Bigr\},
              \qquad a=1-\max_ip_i,

    for :math:`x,y\sim d=(1-\gamma)p+\gamma/K` and :math:`0<\gamma\le\tfrac12`. ``p`` ``(K,)`` or
    ``(B, K)``; ``gamma`` scalar or ``(B,)``. Returns a scalar or ``(B,)``.
    """
    p = real_array(p, "p")
    if p.ndim not in (1, 2) or p.shape[-1] < 2:
        raise ValueError(f"p must have shape (K,) or (B, K) with K >= 2, got {p.shape}")
    if np.any(p < 0) or not np.allclose(p.sum(-1), 1.0, atol=1e-9):
        raise ValueError("p must be a probability vector (rows on the simplex)")
    g = real_array(gamma, "gamma")
    if np.any(g <= 0) or np.any(g > 0.5):
        raise ValueError("gamma must lie in (0, 1/2]")
    K = p.shape[-1]
    a = p.sum(-1) - p.max(-1)  # 1 - max_i p_i, without cancellation when a is tiny
    return np.minimum((K + 1) * a / g**2, 2 * (K - 1) / g)


# --------------------------------------------------------------------------- schedules
@dataclass(frozen=True)
class Schedule:
    r"""Learning-rate and exploration schedule (one per batch row).

    ``mode="fixed"``: constant :math:`\beta=\beta_1`, :math:`\gamma=\gamma_1` (DEXP3 tuned for
    a horizon). ``mode="adaptive"``: our reconstructions (book/06-dueling-bandits-borda/
    ftrl_hybrid.md), with a learning-rate rule ``beta_rule`` and an exploration rule ``gamma_rule``:

    * ``beta_rule="penalty"`` (:prf:ref:`def-06-schedule`):
      :math:`\beta_{t+1}=\beta_t+c\sqrt{K/\beta_t}/\max\{h_t,h_{\min}\}`;
    * ``beta_rule="entropy"`` (:prf:ref:`def-06-matched`):
      :math:`\beta_{t+1}=\beta_t+c\sqrt{K/\beta_t}\,h_t/h_{\max}`;
    * ``gamma_rule="sqrt"``: :math:`\gamma_t=\min\{\tfrac12,\sqrt{K/\beta_t}\}`;
    * ``gamma_rule="matched"``: :math:`\gamma_t=\min\{\tfrac12,\sqrt{K/\beta_t},
      (2(K+1)a_t/\beta_t)^{1/3}\}`, :math:`a_t=1-\max_ip_t(i)`.

    ``mode="oracle"`` (:prf:ref:`prop-06-floor`): Shannon weights, :math:`\gamma_t=\min\{\tfrac12,
    \sqrt{K/\beta_t}\}`, and each round the :math:`\beta_t` on a log grid that minimises the
    expected regret of the round :math:`\sum_i\Delta_id_t(i)`, knowing the gaps of ``Ms[0]``.
    ``mode="etc"``: explore-then-commit, :math:`\gamma_t=1` for ``t < explore_rounds`` and 0
    after, with a vanishing :math:`\beta` (plays the empirical Borda leader twice).
    """

    mode: str
    beta1: float
    gamma1: float = 0.5
    c: float = 1.0
    h_min: float = 1e-3
    explore_rounds: int = 0
    beta_rule: str = "penalty"
    gamma_rule: str = "sqrt"


def adaptive_gamma(beta, K: int) -> np.ndarray:
    r"""Exploration rule of eq. ``06-schedule``:
    :math:`\gamma_t=\min\{\tfrac12,\sqrt{K/\beta_t}\}`.

    Book: :prf:ref:`def-06-schedule` in book/06-dueling-bandits-borda/ftrl_hybrid.md.
    """
    return np.minimum(0.5, np.sqrt(K / np.asarray(beta, dtype=float)))


def matched_gamma(p, beta, K: int) -> np.ndarray:
    r"""Stability-matched exploration (eq. ``06-matched-gamma``):
    :math:`\gamma_t=\min\{\tfrac12,\sqrt{K/\beta_t},(2(K+1)a_t/\beta_t)^{1/3}\}` with
    :math:`a_t=1-\max_ip_t(i)`. The last branch minimises
    :math:`\gamma+(K+1)a_t/(\beta_t\gamma^2)`, exploration against the bound of
    :prf:ref:`cor-06-expected-stability`. ``p`` ``(B, K)``, ``beta`` ``(B,)``.

    Book: :prf:ref:`def-06-matched` in book/06-dueling-bandits-borda/ftrl_hybrid.md.
    """
    p = np.asarray(p, dtype=float)
    beta = np.asarray(beta, dtype=float)
    a = p.sum(-1) - p.max(-1)  # 1 - max_i p_i, without cancellation when a is tiny
    return np.minimum(adaptive_gamma(beta, K), np.cbrt(2 * (K + 1) * a / beta))


def adaptive_beta_next(beta, h, K: int, c=1.0, h_min=1e-3) -> np.ndarray:
    r"""Learning-rate rule of eq. ``06-schedule``:
    :math:`\beta_{t+1}=\beta_t+c\sqrt{K/\beta_t}/\max\{h_t,h_{\min}\}`, so that the
    penalty increment :math:`(\beta_{t+1}-\beta_t)h_t` is :math:`c\sqrt{K/\beta_t}` whatever
    :math:`h_t` is. Arrays broadcast.

    Book: :prf:ref:`def-06-schedule` in book/06-dueling-bandits-borda/ftrl_hybrid.md.
    """
    beta = np.asarray(beta, dtype=float)
    return beta + c * np.sqrt(K / beta) / np.maximum(h, h_min)


def entropy_beta_next(beta, h, K: int, c=1.0) -> np.ndarray:
    r"""Entropy-proportional learning rate (eq. ``06-matched-beta``):
    :math:`\beta_{t+1}=\beta_t+c\sqrt{K/\beta_t}\,h_t/h_{\max}`, so that
    :math:`\beta_t^{3/2}\approx\tfrac32c\sqrt K\sum_{s<t}h_s/h_{\max}` (it stops growing when the
    weights concentrate). Arrays broadcast.

    Book: :prf:ref:`def-06-matched` in book/06-dueling-bandits-borda/ftrl_hybrid.md.
    """
    beta = np.asarray(beta, dtype=float)
    return beta + c * np.sqrt(K / beta) * np.asarray(h, dtype=float) / hybrid_entropy_max(K)


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
    """Our first reconstruction (:prf:ref:`def-06-schedule`), started at :math:`\\beta_1=4K`."""
    K = positive_int(K, "K")
    return Schedule("adaptive", 4.0 * K, 0.5, positive(c, "c"), positive(h_min, "h_min"))


def matched_schedule(K: int, c: float | None = None, gamma_rule: str = "matched") -> Schedule:
    """Our second reconstruction (:prf:ref:`def-06-matched`), started at :math:`\\beta_1=4K`:
    entropy-proportional :math:`\\beta_t` with the stability-matched exploration
    (``gamma_rule="matched"``) or, as a control, with :math:`\\gamma_t=\\sqrt{K/\\beta_t}`
    (``gamma_rule="sqrt"``). The default :math:`c=2/(3\\log K)` makes
    :math:`\\beta_t=(\\sqrt K\\,t/\\log K)^{2/3}` when :math:`h_t=h_{\\max}` throughout, which is
    DEXP3's :math:`1/\\eta` for horizon :math:`t` (eq. ``06-dexp3``)."""
    K = positive_int(K, "K")
    if K < 2:
        raise ValueError(f"K must be >= 2, got {K}")
    c = 2.0 / (3.0 * np.log(K)) if c is None else positive(c, "c")
    if gamma_rule not in ("matched", "sqrt"):
        raise ValueError(f"gamma_rule must be 'matched' or 'sqrt', got {gamma_rule!r}")
    return Schedule("adaptive", 4.0 * K, 0.5, c, beta_rule="entropy", gamma_rule=gamma_rule)


def oracle_schedule() -> Schedule:
    """The round-by-round optimal learning rate of :prf:ref:`prop-06-floor` (Shannon weights,
    :math:`\\gamma_t=\\min\\{\\tfrac12,\\sqrt{K/\\beta_t}\\}`; it knows the gaps)."""
    return Schedule("oracle", 1.0, 0.5)


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


def lower_bound_matrix(K: int, n_good: int, delta: float, eps: float) -> np.ndarray:
    r"""Preferences of the lower-bound construction (our reconstruction of Saha et al.'s):

    arms ``0..n_good-1`` are *good*, the others *bad*; :math:`P(i,j)=\tfrac12` within each group,
    :math:`P(g,b)=\tfrac12+\delta` for a good :math:`g` against a bad :math:`b`, and arm 0 beats the
    bad arms by :math:`\varepsilon` more. Comparisons among good arms carry no information; only
    duels against the costly bad arms tell arm 0 apart. Shifted gaps: :math:`(K-n)\varepsilon/K`
    for the other good arms, :math:`\delta+(K-n+1)\varepsilon/K` for the bad ones.

    Book: :prf:ref:`def-06-lower-bound` in book/06-dueling-bandits-borda/three_worlds.md.
    """
    K = positive_int(K, "K")
    n = positive_int(n_good, "n_good")
    if not 2 <= n < K:
        raise ValueError(f"n_good must be in [2, K), got {n} with K = {K}")
    delta = real(delta, "delta", lo=0.0)
    eps = real(eps, "eps", lo=0.0)
    if delta + eps > 0.5:
        raise ValueError(f"delta + eps must be <= 1/2, got {delta + eps:.4g}")
    good = np.arange(K) < n
    P = np.full((K, K), 0.5)
    P[np.ix_(good, ~good)] = 0.5 + delta
    P[0, ~good] += eps
    P[np.ix_(~good, good)] = 1.0 - P[np.ix_(good, ~good)].T
    return P


def exploration_floor(K: int, D) -> np.ndarray:
    r"""Lower bound :math:`m_K(D)` of :prf:ref:`prop-06-floor` (shape of ``D``):

    .. math:: m_K(D)=\min\Bigl\{\frac{K-1}{2K},\ \inf_{\beta>4K}\Bigl[\frac{K-1}K
              \sqrt{K/\beta}+\tfrac14e^{-D/\beta}\Bigr]\Bigr\}.

    The infimum over :math:`y=1/\beta\in(0,\frac1{4K})` is bounded *from below* on a log grid
    :math:`y_0<\dots<y_n`: on each cell the first term is at least its value at the left end and
    the second at its value at the right end (both monotone), and below :math:`y_0` the first
    term is dropped. So the returned value never exceeds the true :math:`m_K(D)`.
    """
    K = positive_int(K, "K")
    if K < 2:
        raise ValueError(f"K must be >= 2, got {K}")
    D = real_array(D, "D")
    if np.any(D < 0):
        raise ValueError("D must be non-negative")
    y = np.geomspace(1e-14, 1.0 / (4 * K), 1001)
    A = (K - 1) / K * np.sqrt(K)
    flat = D.ravel()
    inf_lb = np.empty(flat.size)
    for k in range(0, flat.size, 1024):  # blocks keep the (block, grid) array small
        blk = flat[k : k + 1024, None]
        cells = A * np.sqrt(y[:-1]) + 0.25 * np.exp(-blk * y[1:])
        inf_lb[k : k + 1024] = np.minimum(cells.min(1), 0.25 * np.exp(-blk[:, 0] * y[0]))
    return np.minimum((K - 1) / (2 * K), inf_lb).reshape(D.shape)


def exploration_floor_regret(K: int, delta_min: float, T: int) -> np.ndarray:
    r"""Cumulative lower bound of :prf:ref:`prop-06-floor`,
    :math:`L_t=\frac{\Delta_{\min}}2\sum_{s=1}^t m_K(2s)` for :math:`t=1..T`, shape ``(T,)``."""
    T = positive_int(T, "T")
    delta_min = positive(delta_min, "delta_min")
    s = np.arange(1, T + 1, dtype=float)
    return delta_min / 2 * np.cumsum(exploration_floor(K, 2 * s))


# --------------------------------------------------------------------------- simulation
def play_round(S, p, gamma, u, Ms, m):
    r"""One round of :prf:ref:`alg-06-ftrl` for ``B`` learners, after the FTRL step; updates ``S``.

    Mixing :math:`d_t=(1-\gamma_t)p_t+\gamma_t/K`, two i.i.d. draws from :math:`d_t`, the duel
    :math:`o_t\sim\mathrm{Bern}(P_t(x_t,y_t))` with :math:`P_t=M_{m_b}`, and the estimate of
    eq. ``06-estimator``. ``S``, ``p`` ``(B, K)``; ``gamma`` ``(B,)``; ``u`` ``(3, B)`` uniforms;
    ``Ms`` ``(M, K, K)``; ``m`` int ``(B,)``. Returns ``d`` ``(B, K)`` and the estimate
    :math:`\hat s_t(x_t)` added to each row, ``(B,)``.

    Book: :prf:ref:`alg-06-ftrl` in book/06-dueling-bandits-borda/ftrl_hybrid.md.
    """
    K = S.shape[1]
    d = (1.0 - gamma)[:, None] * p + (gamma / K)[:, None]
    cum = np.cumsum(d, axis=1)
    cum[:, -1] = 1.0
    x = (u[0][:, None] > cum).sum(1)
    y = (u[1][:, None] > cum).sum(1)
    o = (u[2] < Ms[m, x, y]).astype(float)
    return d, _estimate_update(S, x, y, o, d)


ORACLE_GRID = np.geomspace(1.0, 1e8, 73)  # candidate beta of the oracle, 6.6% apart


def _oracle_step(S, gaps, K):
    r"""Round-by-round optimal :math:`\beta` on :data:`ORACLE_GRID` for Shannon weights with
    :math:`\gamma=\min\{\tfrac12,\sqrt{K/\beta}\}`: minimises :math:`\sum_i\Delta_id_i`.
    ``S`` ``(B, K)``; returns ``(p, beta, gamma)``."""
    z = S[:, None, :] / ORACLE_GRID[None, :, None]
    w = np.exp(z - z.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)  # (B, G, K) softmax for every candidate beta
    g = adaptive_gamma(ORACLE_GRID, K)
    cost = (1.0 - g) * (w @ gaps) + g * gaps.mean()
    best = np.argmin(cost, axis=1)
    rows = np.arange(S.shape[0])
    return w[rows, best], ORACLE_GRID[best], g[best]


@dataclass
class SimResult:
    """Output of :func:`simulate`.

    ``regret``: ``(B, n_checkpoints)`` regret :math:`R_T` at each checkpoint;
    ``regret_ref``: ``(B, n)`` regret measured on the reference matrix ``Ms[0]`` (the
    uncorrupted preferences in a corrupted run), :math:`\\sum_t\\sum_i\\Delta_i d_t(i)`;
    ``checkpoints``: ``(n,)``; ``p_best``/``gamma``/``beta``: ``(B, n_trace)`` traces of
    :math:`p_t(i^*)`, :math:`\\gamma_t`, :math:`\\beta_t` at ``trace_t``;
    ``S_hat``: final cumulative estimates ``(B, K)``; ``max_step``: ``(B,)`` the largest
    :math:`\\hat s_t(x_t)/\\beta_t` over the run (:prf:ref:`rem-06-rare-duels`).
    """

    regret: np.ndarray
    regret_ref: np.ndarray
    checkpoints: np.ndarray
    trace_t: np.ndarray
    p_best: np.ndarray
    gamma: np.ndarray
    beta: np.ndarray
    S_hat: np.ndarray
    max_step: np.ndarray


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

    modes = ("fixed", "adaptive", "etc", "oracle")
    for s in schedules:
        if (
            not isinstance(s, Schedule)
            or s.mode not in modes
            or s.beta_rule not in ("penalty", "entropy")
            or s.gamma_rule not in ("sqrt", "matched")
        ):
            raise ValueError("schedules must be Schedule objects with a known mode and rules")
    adaptive = np.array([s.mode == "adaptive" for s in schedules])
    etc = np.array([s.mode == "etc" for s in schedules])
    oracle = np.array([s.mode == "oracle" for s in schedules])
    ent_beta = adaptive & np.array([s.beta_rule == "entropy" for s in schedules])
    matched = adaptive & np.array([s.gamma_rule == "matched" for s in schedules])
    n_explore = np.array([s.explore_rounds for s in schedules])
    any_adaptive, any_etc, any_oracle = bool(adaptive.any()), bool(etc.any()), bool(oracle.any())
    any_matched = bool(matched.any())
    beta = np.array([s.beta1 for s in schedules], dtype=float)
    gamma = np.array([s.gamma1 for s in schedules], dtype=float)
    c = np.array([s.c for s in schedules], dtype=float)
    h_min = np.array([s.h_min for s in schedules], dtype=float)
    hyb = np.array([k == "hybrid" for k in kinds])
    if np.any(oracle & hyb):
        raise ValueError("oracle schedules run Shannon weights: give them kind 'shannon'")
    gaps = sb[0].max() - sb[0]  # (K,) the oracle's knowledge

    S = np.zeros((B, K))
    lam = np.full(B, np.nan)
    max_step = np.zeros(B)
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
        p, lam = _ftrl_step(S, beta, hyb, lam)
        if any_oracle:
            p[oracle], beta[oracle], gamma[oracle] = _oracle_step(S[oracle], gaps, K)
        if any_adaptive:
            gamma[adaptive] = adaptive_gamma(beta[adaptive], K)
            if any_matched:
                gamma[matched] = matched_gamma(p[matched], beta[matched], K)
        if any_etc:
            gamma = np.where(etc, (t < n_explore).astype(float), gamma)
        m = idx[:, t]
        d, v = play_round(S, p, gamma, U[t % chunk], Ms, m)
        np.maximum(max_step, v / beta, out=max_step)
        gain += (d * sb[m]).sum(1)
        gain_ref += d @ sb0
        if any_adaptive:
            pa = p[adaptive]
            h = np.where(hyb[adaptive], hybrid_entropy(pa), shannon_entropy(pa))
            nxt = np.where(
                ent_beta[adaptive],
                entropy_beta_next(beta[adaptive], h, K, c[adaptive]),
                adaptive_beta_next(beta[adaptive], h, K, c[adaptive], h_min[adaptive]),
            )
            beta[adaptive] = nxt
        if ti < trace_t.size and t + 1 == trace_t[ti]:
            tr_p[:, ti], tr_g[:, ti], tr_b[:, ti] = p[:, best], gamma, beta
            ti += 1
        if ci < cps.size and t + 1 == cps[ci]:
            counts = np.stack([(idx[:, : t + 1] == j).sum(1) for j in range(M)], axis=1)
            regret[:, ci] = (counts @ sb).max(1) - gain
            regret_ref[:, ci] = (t + 1) * sb0.max() - gain_ref
            ci += 1
    return SimResult(regret, regret_ref, cps, trace_t, tr_p, tr_g, tr_b, S, max_step)
