"""Off-policy GRPO on exact tabular instances (chapter 01).

Paper: *Revisiting Group Relative Policy Optimization: Insights into On-Policy and Off-Policy
Training*, ICLR 2026 (arXiv:2505.22257, OpenReview ``XXfOf22o3K``).

Chapter folder: ``book/01-grpo-off-policy/``.

Policies are arrays of probabilities with the responses on the last axis and the prompts
before it, e.g. shape ``(K, M)`` for ``K`` prompts and ``M`` responses; rewards ``r`` have the
same shape and lie in ``[0, 1]``. Every per-prompt quantity of the chapter is computed
exactly from these arrays:

* ``policy_stats``: the behaviour policy's mean reward and ``sigma_eps = sqrt(var + eps)``;
* ``surrogate``: ``L_alpha(pi)(x) = E_{y~pi} (r - mu_alpha) / sigma_eps``;
* ``improvement_bound``: the right-hand side of the off-policy improvement bound;
* ``clip_objective``: the clipped surrogate centred at ``pi_k / alpha`` and its active mask;
* ``bernoulli_constant``, ``amplification_map``, ``gibbs_step``: the closed forms;
* ``LogLinearBandit`` and ``grpo_train``: a verifiable-reward bandit with an exact return,
  trained by group-relative policy gradient with the two knobs ``v`` (sync period of the
  sampler) and ``i`` (gradient steps per batch) and the zero-variance mask.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit, log_softmax, softmax

from lib.validate import check_generator, positive, positive_int, probabilities

__all__ = [
    "group_whiten",
    "policy_stats",
    "returns",
    "surrogate",
    "tv",
    "improvement_bound",
    "drift_bound",
    "clip_objective",
    "bernoulli_constant",
    "amplification_map",
    "amplification_fixed_points",
    "gibbs_step",
    "random_policy",
    "random_triples",
    "within_clip",
    "LogLinearBandit",
    "grpo_train",
]

_ATOL = 1e-9


# --------------------------------------------------------------------------- checks
def _array(value, name: str) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be an array of real numbers") from None
    if arr.ndim == 0 or arr.shape[-1] == 0:
        raise ValueError(
            f"{name} must have at least one entry on its last axis, got shape {arr.shape}"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


def _policy(value, name: str) -> np.ndarray:
    p = _array(value, name)
    if np.any(p < 0):
        raise ValueError(f"{name} must be non-negative (a probability vector on the last axis)")
    if not np.allclose(p.sum(axis=-1), 1.0, atol=_ATOL * p.shape[-1], rtol=0):
        raise ValueError(
            f"{name} must sum to 1 on its last axis (got sums in "
            f"[{p.sum(axis=-1).min():.6g}, {p.sum(axis=-1).max():.6g}])"
        )
    return p


def _rewards(value, name: str = "r") -> np.ndarray:
    r = _array(value, name)
    if np.any(r < 0) or np.any(r > 1):
        raise ValueError(f"{name} must lie in [0, 1] (the bound uses a reward range of at most 1)")
    return r


def _same_shape(**arrays):
    shapes = {k: v.shape for k, v in arrays.items()}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"shapes must agree, got {shapes}")


# --------------------------------------------------------------------------- group statistics
def group_whiten(r, eps: float = 1e-4, ddof: int = 0, *, convention: str = "paper", axis: int = -1):
    """Group-relative advantages ``(r - mean) / scale`` along ``axis``.

    ``convention="paper"``: ``scale = sqrt(var + eps)`` (eps inside the root, as in the theory).
    ``convention="trl"``: ``scale = std + eps`` (TRL's ``std + 1e-4``; use ``ddof=1`` for torch's
    unbiased std). A constant group gets advantage 0 in both conventions.
    """
    r = _array(r, "r")
    eps = positive(eps, "eps")
    if ddof not in (0, 1):
        raise ValueError(f"ddof must be 0 or 1, got {ddof!r}")
    if convention not in ("paper", "trl"):
        raise ValueError(f"convention must be 'paper' or 'trl', got {convention!r}")
    if r.shape[axis] <= ddof:
        raise ValueError(f"r needs more than ddof={ddof} samples along axis {axis}")
    mean = r.mean(axis=axis, keepdims=True)
    var = r.var(axis=axis, ddof=ddof, keepdims=True)
    scale = np.sqrt(var + eps) if convention == "paper" else np.sqrt(var) + eps
    return (r - mean) / scale


def policy_stats(alpha, r, eps: float = 1e-4):
    """Exact per-prompt ``(mu_alpha, sigma_{alpha,eps})`` of the reward under ``alpha``."""
    alpha = _policy(alpha, "alpha")
    r = _rewards(r)
    _same_shape(alpha=alpha, r=r)
    eps = positive(eps, "eps")
    mu = np.sum(alpha * r, axis=-1)
    var = np.sum(alpha * (r - mu[..., None]) ** 2, axis=-1)
    return mu, np.sqrt(var + eps)


def returns(pi, r):
    """Exact per-prompt return ``J_x(pi) = E_{y~pi} r(x, y)``."""
    pi = _policy(pi, "pi")
    r = _rewards(r)
    _same_shape(pi=pi, r=r)
    return np.sum(pi * r, axis=-1)


def surrogate(pi, alpha, r, eps: float = 1e-4):
    """Exact ``L_alpha(pi)(x) = E_{y~pi} A_alpha(x, y)`` with the whitened advantage of ``alpha``.

    This equals ``E_{y~alpha}[pi/alpha * A_alpha]`` whenever ``alpha > 0`` where ``pi > 0``.
    """
    pi = _policy(pi, "pi")
    mu, sig = policy_stats(alpha, r, eps)
    r = np.asarray(r, dtype=float)
    _same_shape(pi=pi, r=r)
    return np.sum(pi * (r - mu[..., None]), axis=-1) / sig


def tv(p, q):
    """Total variation ``0.5 * sum |p - q|`` along the last axis."""
    p = _policy(p, "p")
    q = _policy(q, "q")
    _same_shape(p=p, q=q)
    return 0.5 * np.sum(np.abs(p - q), axis=-1)


def improvement_bound(pi, pi_k, alpha, r, eps: float = 1e-4, c: float = 2.0):
    """Right-hand side of the off-policy improvement bound, per prompt.

    ``L_alpha(pi) - c |1 - sigma|/sigma TV(pi, alpha) - c TV(pi_k, alpha)``. With ``c = 2`` this
    is the paper's Theorem 1 (for ``eps < 3/4`` the absolute value is ``1 - sigma``); ``c = 1``
    is the sharper constant valid for rewards in ``[0, 1]``. It lower-bounds
    ``J_x(pi) - J_x(pi_k)``.

    Book: prf:`thm-01-bound` in book/01-grpo-off-policy/theory.md.
    """
    c = positive(c, "c")
    pi = _policy(pi, "pi")
    pi_k = _policy(pi_k, "pi_k")
    _same_shape(pi=pi, pi_k=pi_k)
    _, sig = policy_stats(alpha, r, eps)
    lsur = surrogate(pi, alpha, r, eps)
    return lsur - c * np.abs(1.0 - sig) / sig * tv(pi, alpha) - c * tv(pi_k, alpha)


def drift_bound(lsur, sigma, clip: float, delta, c: float = 2.0):
    """The book's corollary: a lower bound on ``J(pi) - J(pi_k)``.

    It holds when ``|pi - pi_k| <= clip * alpha``. Then ``TV(pi, pi_k) <= clip/2`` and
    ``TV(pi, alpha) <= clip/2 + delta`` with ``delta = TV(pi_k, alpha)``,
    so the improvement bound gives ``L - c |1 - sigma|/sigma (clip/2 + delta) - c delta``
    (``c = 2``: ``L - |1 - sigma|/sigma (clip + 2 delta) - 2 delta``).

    Book: prf:`cor-01-drift` in book/01-grpo-off-policy/theory.md.
    """
    lsur = _array(np.atleast_1d(lsur), "lsur")
    sigma = _array(np.atleast_1d(sigma), "sigma")
    delta = _array(np.atleast_1d(delta), "delta")
    if np.any(sigma <= 0):
        raise ValueError("sigma must be positive")
    if np.any(delta < 0) or np.any(delta > 1):
        raise ValueError("delta must be a total variation in [0, 1]")
    clip = positive(clip, "clip")
    c = positive(c, "c")
    return lsur - c * np.abs(1.0 - sigma) / sigma * (clip / 2 + delta) - c * delta


# --------------------------------------------------------------------------- clipped surrogate
def clip_objective(ratio, ratio_k, adv, clip: float):
    """The clipped off-policy surrogate ``f(rho, rho', a)`` and its active mask.

    ``f = min(rho a, clip(rho, max(rho' - clip, 0), rho' + clip) a)`` with ``rho = pi/alpha`` and
    the window centred at ``rho' = pi_k/alpha``. ``active`` is False exactly where the min picks the
    clipped constant, i.e. ``rho`` beyond the upper end with ``a > 0`` or below the lower end with
    ``a < 0``; there the sample carries no gradient. Returns ``(value, active)``.

    Book: prf:`prop-01-clip` in book/01-grpo-off-policy/theory.md.
    """
    ratio = _array(np.atleast_1d(ratio), "ratio")
    ratio_k = _array(np.atleast_1d(ratio_k), "ratio_k")
    adv = _array(np.atleast_1d(adv), "adv")
    clip = positive(clip, "clip")
    if np.any(ratio < 0):
        raise ValueError("ratio must be non-negative (a likelihood ratio)")
    if np.any(ratio_k < 0):
        raise ValueError("ratio_k must be non-negative (a likelihood ratio)")
    try:
        ratio, ratio_k, adv = np.broadcast_arrays(ratio, ratio_k, adv)
    except ValueError:
        raise ValueError("ratio, ratio_k and adv must broadcast to one shape") from None
    lo = np.maximum(ratio_k - clip, 0.0)
    hi = ratio_k + clip
    value = np.minimum(ratio * adv, np.clip(ratio, lo, hi) * adv)
    inactive = ((ratio > hi) & (adv > 0)) | ((ratio < lo) & (adv < 0))
    return value, ~inactive


# --------------------------------------------------------------------------- Bernoulli closed forms
def bernoulli_constant(p, eps: float = 1e-4):
    """``c_eps(p) = (1 - s)/s`` with ``s = sqrt(p(1-p) + eps)``: the bound's penalty factor on a
    prompt whose success probability under the sampler is ``p``.

    Book: prf:`thm-01-bound` in book/01-grpo-off-policy/theory.md (its factor for a 0/1 reward).
    """
    p = probabilities(p, "p")
    eps = positive(eps, "eps")
    s = np.sqrt(p * (1 - p) + eps)
    return (1 - s) / s


def _amplification_logit(p, p_ref, beta, eps):
    """``logit h(p) = logit(p_ref) + 1/(beta sqrt(p(1-p) + eps))`` (inputs already checked).

    Written in the success probability ``p``; the map depends on ``p`` only through ``p(1-p)``,
    so callers may pass ``u = 1 - p`` instead."""
    return np.log(p_ref) - np.log1p(-p_ref) + 1.0 / (beta * np.sqrt(p * (1 - p) + eps))


def _amplification_args(p_ref, beta, eps):
    p_ref = probabilities(p_ref, "p_ref")
    if np.any(p_ref <= 0) or np.any(p_ref >= 1):
        raise ValueError("p_ref must lie strictly between 0 and 1")
    return p_ref, positive(beta, "beta"), positive(eps, "eps")


def amplification_map(p, p_ref, beta: float, eps: float = 1e-4):
    """Success probability after one KL-regularised step from a policy with success ``p``:
    ``h(p) = 1 / (1 + (1 - p_ref)/p_ref * exp(-1/(beta sqrt(p(1-p) + eps))))``, computed as the
    logistic function of its logit (stable for small ``beta``).

    Book: prf:`prop-01-amplification` in book/01-grpo-off-policy/theory.md.
    """
    p = probabilities(p, "p")
    p_ref, beta, eps = _amplification_args(p_ref, beta, eps)
    return expit(_amplification_logit(p, p_ref, beta, eps))


def amplification_fixed_points(p_ref: float, beta: float, eps: float = 1e-4, grid: int = 4000):
    """All fixed points of ``h`` on ``[0, 1]``, returned as ``(p_star, one_minus_p_star)``.

    Fixed points can sit within ``exp(-1/(beta sqrt(eps)))`` of 1, below double precision in
    ``p``, so the search runs in ``u = 1 - p``: ``G(u) = u - (1 - h(1 - u))``, with
    ``1 - h = expit(-logit h)`` evaluated without cancellation. Sign changes of ``G`` on a grid
    (logarithmic near ``u = 0``) are refined by Brent's method. ``G(0) < 0 < G(1)``, so there is
    at least one root.

    Book: prf:`prop-01-amplification` in book/01-grpo-off-policy/theory.md (its fixed points).
    """
    grid = positive_int(grid, "grid")
    if grid < 10:
        raise ValueError("grid must be at least 10")
    if np.ndim(p_ref) != 0:
        raise ValueError("p_ref must be a single number")
    p_ref, beta, eps = _amplification_args(float(p_ref), beta, eps)

    def G(u):
        u = np.asarray(u, dtype=float)
        return u - expit(-_amplification_logit(u, p_ref, beta, eps))  # p(1-p) = u(1-u)

    us = np.unique(
        np.concatenate([[0.0], np.logspace(-300, -2, grid), np.linspace(1e-2, 1.0, grid)])
    )
    gs = G(us)
    # a sign change is read from the signs, not from ga * gb < 0: near a root close to p = 1 both
    # values can be ~1e-218, and their product underflows to zero (no root was found at beta 0.2)
    sg = np.sign(gs)
    roots = []
    for a, b, ga, sa, sb in zip(us[:-1], us[1:], gs[:-1], sg[:-1], sg[1:]):
        if ga == 0:
            roots.append(a)
        elif sa * sb < 0:
            roots.append(
                brentq(
                    lambda u: float(G(u)),
                    a,
                    b,
                    xtol=1e-320,
                    rtol=8 * np.finfo(float).eps,
                    maxiter=500,
                )
            )
    if gs[-1] == 0:
        roots.append(us[-1])
    u = np.array(sorted(roots, reverse=True))
    return 1.0 - u, u


def gibbs_step(pi_ref, adv, beta: float):
    """The maximiser of ``E_pi adv - beta KL(pi || pi_ref)`` over the simplex (last axis):
    ``pi ∝ pi_ref exp(adv / beta)``.

    Book: prf:`prop-01-amplification` in book/01-grpo-off-policy/theory.md (the maximiser).
    """
    pi_ref = _policy(pi_ref, "pi_ref")
    adv = _array(adv, "adv")
    _same_shape(pi_ref=pi_ref, adv=adv)
    beta = positive(beta, "beta")
    with np.errstate(divide="ignore"):
        logits = np.log(pi_ref) + adv / beta
    return softmax(logits, axis=-1)


def random_policy(shape, scale: float, rng, base=None):
    """A random softmax policy ``softmax(base + scale * N(0, 1))``; returns ``(policy, logits)``."""
    rng = check_generator(rng)
    try:
        scale = float(scale)
    except (TypeError, ValueError):
        raise TypeError(f"scale must be a real number, got {type(scale).__name__}") from None
    if not np.isfinite(scale) or scale < 0:
        raise ValueError(f"scale must be a non-negative number, got {scale!r}")
    shape = tuple(int(s) for s in np.atleast_1d(shape))
    if len(shape) == 0 or any(s < 1 for s in shape):
        raise ValueError(f"shape must have positive entries, got {shape}")
    base = np.zeros(shape) if base is None else _array(base, "base")
    if base.shape != shape:
        raise ValueError(f"base must have shape {shape}, got {base.shape}")
    logits = base + scale * rng.standard_normal(shape)
    return softmax(logits, axis=-1), logits


def random_triples(
    n: int,
    K: int,
    M: int,
    rng,
    *,
    reward: str = "binary",
    p_correct: float = 0.3,
    scales=(1.0, 0.3, 0.5),
):
    """``n`` random tabular instances ``(pi, pi_k, alpha, r)``, each of shape ``(n, K, M)``.

    ``alpha`` has logits ``scales[0] * N(0,1)``; ``pi_k`` perturbs them by
    ``scales[1] * N(0,1)`` and ``pi`` perturbs ``pi_k``'s by ``scales[2] * N(0,1)``. Rewards are
    Bernoulli(``p_correct``) (``reward="binary"``) or uniform on ``[0, 1]`` (``"uniform"``).
    """
    n, K, M = positive_int(n, "n"), positive_int(K, "K"), positive_int(M, "M")
    rng = check_generator(rng)
    if reward not in ("binary", "uniform"):
        raise ValueError(f"reward must be 'binary' or 'uniform', got {reward!r}")
    p_correct = float(probabilities(p_correct, "p_correct"))
    if len(scales) != 3:
        raise ValueError("scales must hold three numbers (alpha, pi_k, pi)")
    shape = (n, K, M)
    alpha, la = random_policy(shape, scales[0], rng)
    pi_k, lk = random_policy(shape, scales[1], rng, base=la)
    pi, _ = random_policy(shape, scales[2], rng, base=lk)
    r = (rng.random(shape) < p_correct).astype(float) if reward == "binary" else rng.random(shape)
    return pi, pi_k, alpha, r


def within_clip(pi_k, alpha, clip: float, rng):
    """A random policy ``pi`` with ``|pi - pi_k| <= clip * alpha`` entrywise (the clip's aim).

    Draws ``d = clip * alpha * U(-1, 1)``, floors it at ``-pi_k`` (so ``pi >= 0``) and shrinks the
    heavier of its positive and negative parts so that ``d`` sums to zero; ``pi = pi_k + d``.
    """
    pi_k = _policy(pi_k, "pi_k")
    alpha = _policy(alpha, "alpha")
    _same_shape(pi_k=pi_k, alpha=alpha)
    clip = positive(clip, "clip")
    rng = check_generator(rng)
    d = np.maximum(clip * alpha * rng.uniform(-1.0, 1.0, size=alpha.shape), -pi_k)
    pos = np.sum(np.maximum(d, 0), axis=-1, keepdims=True)
    neg = np.sum(np.maximum(-d, 0), axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        shrink_pos = np.where(pos > neg, neg / pos, 1.0)
        shrink_neg = np.where(neg > pos, pos / neg, 1.0)
    d = np.where(d > 0, d * shrink_pos, d * shrink_neg)
    return pi_k + d


# --------------------------------------------------------------------------- the bandit
@dataclass
class LogLinearBandit:
    """A verifiable-reward bandit: ``K`` prompts, ``M`` responses each, features ``phi`` of
    dimension ``d`` (scaled by ``1/sqrt(d)``) and the log-linear policy
    ``pi_theta(y|x) ∝ exp(phi(x, y) . theta)``. The reward is 1 on the ``n_x`` responses with the
    largest score ``phi . w`` for a hidden direction ``w`` (``n_x`` uniform on 1..``max_correct``),
    0 elsewhere. ``J(theta)`` is exact (uniform prompt law)."""

    phi: np.ndarray
    r: np.ndarray
    w: np.ndarray

    @classmethod
    def make(cls, K: int, M: int, d: int, rng, max_correct: int = 4) -> LogLinearBandit:
        K, M, d = positive_int(K, "K"), positive_int(M, "M"), positive_int(d, "d")
        max_correct = positive_int(max_correct, "max_correct")
        if max_correct >= M:
            raise ValueError(f"max_correct must be below M={M}, got {max_correct}")
        rng = check_generator(rng)
        phi = rng.standard_normal((K, M, d)) / np.sqrt(d)
        w = rng.standard_normal(d)
        score = phi @ w
        n_correct = rng.integers(1, max_correct + 1, size=K)
        rank = np.argsort(np.argsort(-score, axis=1), axis=1)
        r = (rank < n_correct[:, None]).astype(float)
        return cls(phi=phi, r=r, w=w)

    @property
    def shape(self):
        return self.r.shape

    def _theta(self, theta) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (self.phi.shape[-1],):
            raise ValueError(f"theta must have shape ({self.phi.shape[-1]},), got {theta.shape}")
        return theta

    def logits(self, theta, prompts=None) -> np.ndarray:
        theta = self._theta(theta)
        phi = self.phi if prompts is None else self.phi[prompts]
        return phi @ theta

    def policy(self, theta, prompts=None) -> np.ndarray:
        """``pi_theta(.|x)`` for every prompt (or the listed ones), shape ``(K, M)``."""
        return softmax(self.logits(theta, prompts), axis=-1)

    def J(self, theta) -> float:
        """Exact expected reward over the uniform prompt law."""
        return float(np.mean(np.sum(self.policy(theta) * self.r, axis=-1)))


def grpo_train(
    env: LogLinearBandit,
    *,
    v: int,
    i: int,
    iters: int,
    B: int,
    G: int,
    lr: float,
    clip: float = 0.2,
    beta: float = 0.0,
    eps: float = 1e-4,
    mask=False,
    rng=None,
    theta0=None,
    bound_c=(2.0, 1.0),
) -> dict:
    """Group-relative policy optimisation on ``env`` with the sampler synced every ``v`` steps
    and ``i`` gradient-ascent steps per sampled batch (Algorithm 1 of the chapter).

    ``mask``: False, True (zero-variance groups get weight 0 and the loss is averaged over the
    remaining groups), or ``"rescale"`` (no mask, but the step is multiplied by ``B / #kept``: the
    same as the mask when ``beta = 0``). Rewards are whitened with the paper's convention and
    ``ddof = 0``; the KL term to ``pi_ref = pi_{theta0}`` is exact per sampled prompt.

    Returns per-step histories (length ``iters``; ``J`` has ``iters + 1`` entries):
    ``J`` (exact), ``drift`` (mean over prompts of ``TV(pi_k, alpha)``), ``clip_frac`` (share of
    sampled responses with no gradient, over the inner steps), ``kept`` (share of sampled groups
    with non-zero reward variance), ``rhs`` (dict
    ``c -> exact prompt-averaged right-hand side of the improvement bound`` for the step from
    ``pi_k`` to ``pi_{k+1}`` with the sampler used) and ``lsur`` (the exact surrogate).

    Book: prf:`alg-01-grpo` in book/01-grpo-off-policy/training.md.
    """
    if not isinstance(env, LogLinearBandit):
        raise TypeError(f"env must be a LogLinearBandit, got {type(env).__name__}")
    v, i, iters = positive_int(v, "v"), positive_int(i, "i"), positive_int(iters, "iters")
    B, G = positive_int(B, "B"), positive_int(G, "G")
    lr = positive(lr, "lr")
    clip = positive(clip, "clip")
    eps = positive(eps, "eps")
    beta = float(beta)
    if not np.isfinite(beta) or beta < 0:
        raise ValueError(f"beta must be a non-negative number, got {beta!r}")
    if mask not in (False, True, "rescale"):
        raise ValueError(f"mask must be False, True or 'rescale', got {mask!r}")
    if rng is None:
        raise TypeError("rng must be a numpy.random.Generator, got None")
    rng = check_generator(rng)
    cs = tuple(positive(c, "bound_c") for c in bound_c)
    K, M, d = env.phi.shape
    theta = np.zeros(d) if theta0 is None else env._theta(theta0).copy()
    log_ref = log_softmax(env.logits(theta), axis=-1)

    hist = {
        "J": [env.J(theta)],
        "drift": [],
        "clip_frac": [],
        "kept": [],
        "lsur": [],
        "rhs": {c: [] for c in cs},
    }
    theta_server = theta.copy()
    for k in range(iters):
        if k % v == 0:
            theta_server = theta.copy()
        alpha_all = env.policy(theta_server)
        pik_all = env.policy(theta)
        prompts = rng.integers(0, K, size=B)
        alpha = alpha_all[prompts]
        # inverse-CDF sampling of G responses per prompt from alpha
        u = rng.random((B, G))
        ys = np.minimum((np.cumsum(alpha, axis=1)[:, None, :] < u[..., None]).sum(-1), M - 1)
        r = np.take_along_axis(env.r[prompts], ys, axis=1)
        adv = group_whiten(r, eps, axis=1)
        n_var = int(np.sum(r.var(axis=1) > 0))
        keep = (r.var(axis=1) > 0).astype(float) if mask is True else np.ones(B)
        # the loss is averaged over the kept groups; "rescale" keeps all and scales by B / n_var
        denom = n_var if mask is True else B
        factor = B / n_var if (mask == "rescale" and n_var > 0) else 1.0
        a_alpha = np.take_along_axis(alpha, ys, axis=1)
        ratio_k = np.take_along_axis(pik_all[prompts], ys, axis=1) / a_alpha
        phi_b = env.phi[prompts]  # (B, M, d)
        phi_y = np.take_along_axis(phi_b, ys[..., None], axis=1)  # (B, G, d)
        clipped = 0
        for _ in range(i):
            pi_b = softmax(phi_b @ theta, axis=-1)
            ratio = np.take_along_axis(pi_b, ys, axis=1) / a_alpha
            _, active = clip_objective(ratio, ratio_k, adv, clip)
            clipped += int((~active).sum())
            if denom == 0:
                continue
            mean_phi = np.einsum("bm,bmd->bd", pi_b, phi_b)  # (B, d)
            score = phi_y - mean_phi[:, None, :]  # grad log pi(y|x), (B, G, d)
            wgt = (active * ratio * adv) * keep[:, None]
            grad = np.einsum("bg,bgd->d", wgt, score) / (G * denom)
            if beta > 0:
                log_ratio = log_softmax(phi_b @ theta, axis=-1) - log_ref[prompts]
                gkl = np.einsum("bm,bm,bmd->bd", pi_b, log_ratio, phi_b - mean_phi[:, None, :])
                grad -= beta * np.einsum("b,bd->d", keep, gkl) / denom
            theta = theta + lr * factor * grad
        pi_next = env.policy(theta)
        hist["J"].append(env.J(theta))
        hist["drift"].append(float(np.mean(tv(pik_all, alpha_all))))
        hist["clip_frac"].append(clipped / (i * B * G))
        hist["kept"].append(n_var / B)
        hist["lsur"].append(float(np.mean(surrogate(pi_next, alpha_all, env.r, eps))))
        for c in cs:
            hist["rhs"][c].append(
                float(np.mean(improvement_bound(pi_next, pik_all, alpha_all, env.r, eps, c)))
            )
    out = {key: np.array(val) for key, val in hist.items() if key != "rhs"}
    out["rhs"] = {c: np.array(val) for c, val in hist["rhs"].items()}
    out["theta"] = theta
    return out
