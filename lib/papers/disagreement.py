r"""Surrogates for disagreement discrepancy, and their Bayes (in)consistency.

Paper: N. G. Marchant, A. C. Cullen, F. Liu, S. M. Erfani, *On the Bayes Inconsistency of
Disagreement Discrepancy Surrogates*, ICLR 2026 (arXiv:2512.05931, OpenReview ``VwCyRQJ51H``).
Chapter 08.

Chapter folder: ``book/08-disagreement-discrepancy/``.

The disagreement discrepancy of a critic :math:`f` against labellers :math:`h_1,h_2` is
:math:`d_\alpha=\alpha R[\ell_{01},h_2,Af](T)-R[\ell_{01},h_1,Af](S)` (maximised). Surrogates
minimise :math:`R[\ell_{agr},h_1,f](S)+\alpha R[\ell_{dis},h_2,f](T)` with cross-entropy for
agreement and

* RG23: :math:`\log(1+\exp(s_y-\frac1{K-1}\sum_{c\ne y}s_c))`,
* GLK23: :math:`-\frac1{K-1}\sum_{c\ne y}\log\sigma(s)_c`,
* the paper's: :math:`-\log(1-\sigma(s)_y)=\mathrm{logsumexp}(s)-\mathrm{logsumexp}(s_{-y})`.

Logits ``s`` have the class axis last (torch tensors); labels are integer tensors.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from lib.validate import positive, positive_int

KINDS = ("rg", "glk", "ours")


def _check_kind(kind):
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def _check_sy(s, y):
    if not (isinstance(s, torch.Tensor) and s.is_floating_point()):
        s = torch.as_tensor(np.asarray(s, dtype=float))
    y = torch.as_tensor(y, dtype=torch.long)
    K = s.shape[-1]
    if K < 2:
        raise ValueError(f"s needs at least 2 classes, got shape {tuple(s.shape)}")
    if y.shape != s.shape[:-1]:
        raise ValueError(f"y must have shape {tuple(s.shape[:-1])}, got {tuple(y.shape)}")
    if torch.any((y < 0) | (y >= K)):
        raise ValueError(f"labels y must lie in [0, {K})")
    return s, y


def _logsumexp(s):
    """``torch.logsumexp(s, -1)`` with the maximum shift written out.

    Equal to torch's to rounding, and about a third faster forward and backward on the short
    class axis used here (K = 10 logits per row), where the critics' training spends its time.
    Entries of ``-inf`` are allowed as long as one entry per row is finite.
    """
    m = s.detach().amax(-1, keepdim=True)
    return (s - m).exp().sum(-1).log() + m.squeeze(-1)


def ce_loss(s, y):
    """Cross-entropy :math:`-\\log\\sigma(s)_y` (the agreement loss)."""
    s, y = _check_sy(s, y)
    return _logsumexp(s) - s.gather(-1, y.unsqueeze(-1)).squeeze(-1)


def dis_loss(s, y, kind: str):
    """The disagreement loss ``kind`` in ``("rg", "glk", "ours")``.

    Computed stably (no clamping).

    Book: eq:`eq-08-losses` in book/08-disagreement-discrepancy/pointwise.md.
    """
    _check_kind(kind)
    s, y = _check_sy(s, y)
    K = s.shape[-1]
    sy = s.gather(-1, y.unsqueeze(-1)).squeeze(-1)
    mean_rest = (s.sum(-1) - sy) / (K - 1)  # mean of the logits other than y
    if kind == "rg":
        # log(1 + e^t) exactly; torch's softplus switches to t for t > 20 (error up to e^-20)
        t = sy - mean_rest
        return torch.logaddexp(torch.zeros_like(t), t)
    if kind == "glk":
        return _logsumexp(s) - mean_rest
    # logsumexp over the classes other than y: set s_y to -inf (stays exact as sigma_y -> 1)
    s_rest = s.scatter(-1, y.unsqueeze(-1), float("-inf"))
    return _logsumexp(s) - _logsumexp(s_rest)


def thresholds(K: int) -> dict:
    r"""Weights :math:`w=p_S/(\alpha p_T)` above which pointwise minimisers agree with the label.

    For RG / GLK (we derive): :math:`\lambda_{RG}=K/(2(K-1))`, :math:`\lambda_{GLK}=1/(K-1)`;
    Bayes: 1.

    Book: prf:`prop-08-thresholds` in book/08-disagreement-discrepancy/pointwise.md.
    """
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 2:
        raise ValueError(f"K must be an integer >= 2, got {K!r}")
    return {"rg": K / (2 * (K - 1)), "glk": 1 / (K - 1), "bayes": 1.0}


def _softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def pointwise_grad(s, w, kind: str):
    r"""Gradient in ``s`` (shape (..., K), label 0) of the pointwise objective.

    :math:`W(s)=w\,\mathrm{CE}(s,0)+\ell_{dis}(s,0)`.
    """
    _check_kind(kind)
    K = s.shape[-1]
    e0 = np.zeros(K)
    e0[0] = 1.0
    sig = _softmax(s)
    g = np.asarray(w)[..., None] * (sig - e0)  # cross-entropy
    if kind == "glk":
        g += sig - (1 - e0) / (K - 1)
    elif kind == "rg":
        t = s[..., 0] - s[..., 1:].mean(-1)
        g += (1 / (1 + np.exp(-t)))[..., None] * (e0 - (1 - e0) / (K - 1))
    else:  # logsumexp(s) - logsumexp(s_{-0})
        rest = np.zeros_like(s)
        rest[..., 1:] = _softmax(s[..., 1:])
        g += sig - rest
    return g


def pointwise_minimise(
    w,
    K: int,
    kind: str,
    n_init: int,
    generator: np.random.Generator,
    steps: int = 3000,
    init_scale: float = 3.0,
):
    r"""Minimise :math:`W(s)=w\,\mathrm{CE}(s,0)+\ell_{dis}(s,0)` over full logit vectors.

    Gradient descent (analytic gradients, step :math:`1/(1+w)`), for every weight in ``w``
    (shape (M,)) and ``n_init`` random initialisations at once. Returns the final logits, shape
    (M, n_init, K).

    Book: prf:`prop-08-thresholds` in book/08-disagreement-discrepancy/pointwise.md
    (numerical minimisers of its ``W``).
    """
    _check_kind(kind)
    w = np.asarray(w, dtype=float)
    if w.ndim != 1 or np.any(w <= 0):
        raise ValueError("w must be a 1-D array of positive weights")
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 2:
        raise ValueError(f"K must be an integer >= 2, got {K!r}")
    if not isinstance(generator, np.random.Generator):
        raise TypeError(
            f"generator must be a numpy.random.Generator, got {type(generator).__name__}"
        )
    s = init_scale * generator.standard_normal((w.size, n_init, K))
    W = np.broadcast_to(w[:, None], (w.size, n_init))
    lr = (1.0 / (1.0 + w))[:, None, None]
    for _ in range(steps):
        s -= lr * pointwise_grad(s, W, kind)
    return s


def decisions(s):
    """Argmax decoding with ties to the smallest index (``numpy.argmax`` does this)."""
    return np.asarray(s).argmax(-1)


# ----------------------------------------------------------------------------- tabular problems
def tabular_problem(
    n_points: int, K: int, generator: np.random.Generator, concentration: float = 1.0
):
    """A finite input space: densities ``pS``, ``pT`` (Dirichlet) and labels ``y`` (h1 = h2)."""
    if not isinstance(generator, np.random.Generator):
        raise TypeError(
            f"generator must be a numpy.random.Generator, got {type(generator).__name__}"
        )
    if n_points < 1 or K < 2:
        raise ValueError(f"need n_points >= 1 and K >= 2, got {n_points}, {K}")
    pS = generator.dirichlet(np.full(n_points, concentration))
    pT = generator.dirichlet(np.full(n_points, concentration))
    return pS, pT, generator.integers(0, K, n_points)


def true_discrepancy(pred, y, pS, pT, alpha: float = 1.0) -> float:
    r"""The disagreement discrepancy on a finite space.

    .. math::
        d_\alpha=\alpha\sum_xp_T(x)\mathbb 1\{\hat y\ne y\}
        -\sum_xp_S(x)\mathbb 1\{\hat y\ne y\}

    Book: eq:`eq-08-dd` in book/08-disagreement-discrepancy/pointwise.md.
    """
    alpha = positive(alpha, "alpha")
    dis = (np.asarray(pred) != np.asarray(y)).astype(float)
    return float(alpha * np.sum(np.asarray(pT) * dis) - np.sum(np.asarray(pS) * dis))


def optimal_discrepancy(pS, pT, alpha: float = 1.0) -> float:
    r"""The optimal discrepancy :math:`\sup_fd_\alpha=\sum_x(\alpha p_T(x)-p_S(x))_+`.

    The optimal critic disagrees exactly where :math:`\alpha p_T>p_S`.
    """
    alpha = positive(alpha, "alpha")
    return float(np.sum(np.maximum(alpha * np.asarray(pT) - np.asarray(pS), 0.0)))


def predicted_fraction(pS, pT, lam: float, alpha: float = 1.0) -> float:
    r"""Fraction of :math:`\sup d` recovered by a critic.

    The critic disagrees exactly where :math:`w<\lambda`.
    """
    alpha = positive(alpha, "alpha")
    pS, pT = np.asarray(pS), np.asarray(pT)
    gain = alpha * pT - pS
    w = pS / (alpha * pT)
    return float(np.sum(gain[w < lam]) / np.sum(gain[w < 1]))


def train_tabular_critic(
    pS,
    pT,
    y,
    K: int,
    kind: str,
    alpha: float,
    generator: torch.Generator,
    steps: int = 1500,
    lr: float = 0.1,
):
    """Minimise the surrogate over *all* critics on a finite space.

    One free logit vector per point.
    """
    _check_kind(kind)
    alpha = positive(alpha, "alpha")
    pS_t, pT_t = torch.as_tensor(pS), torch.as_tensor(pT)
    yt = torch.as_tensor(np.asarray(y), dtype=torch.long)
    s = torch.randn(len(yt), K, generator=generator, dtype=torch.float64).requires_grad_()
    opt = torch.optim.Adam([s], lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        (
            torch.sum(pS_t * ce_loss(s, yt)) + alpha * torch.sum(pT_t * dis_loss(s, yt, kind))
        ).backward()
        opt.step()
    return s.detach()


# ----------------------------------------------------------------------------- linear critics
def make_shift_data(
    K: int,
    d: int,
    n: int,
    generator: torch.Generator,
    noise_target: float = 1.5,
    shift_scale: float = 1.0,
):
    """Synthetic covariate shift: class means ~ N(0, 4I); source x = mean + N(0, I); target uses
    noise scale ``noise_target`` and a random mean shift. Returns (XS, yS, XT, yT)."""
    means = 2.0 * torch.randn(K, d, generator=generator, dtype=torch.float64)
    shift = shift_scale * torch.randn(d, generator=generator, dtype=torch.float64)
    yS = torch.randint(0, K, (n,), generator=generator)
    yT = torch.randint(0, K, (n,), generator=generator)
    XS = means[yS] + torch.randn(n, d, generator=generator, dtype=torch.float64)
    XT = (
        means[yT]
        + shift
        + noise_target * torch.randn(n, d, generator=generator, dtype=torch.float64)
    )
    return XS, yS, XT, yT


def train_linear(X, y, K: int, steps: int = 300, lr: float = 0.05):
    """Multinomial logistic regression (the reference model h), full-batch Adam."""
    W = torch.zeros(X.shape[1], K, dtype=torch.float64, requires_grad=True)
    b = torch.zeros(K, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([W, b], lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(X @ W + b, y).backward()
        opt.step()
    return W.detach(), b.detach()


def train_critics(
    XS,
    hS,
    XT,
    hT,
    kind: str,
    n_critics: int,
    generator: torch.Generator,
    *,
    K: int,
    steps: int = 300,
    lr: float = 3e-3,
    weight_decay: float = 5e-4,
):
    r"""Train ``n_critics`` linear critics at once (one tensor), AdamW, full batch, minimising
    :math:`\frac12(\mathrm{mean\,CE}(f(x_S),h_S)+\mathrm{mean}\,\ell_{dis}(f(x_T),h_T))`
    (RG23's protocol, :math:`\alpha=1`).

    ``K`` (number of classes) is passed explicitly: inferring it from the labels would give the
    critics too few outputs whenever the labeller never predicts the last class.
    Returns weights (n_critics, d, K) and biases (n_critics, K)."""
    _check_kind(kind)
    K = positive_int(K, "K")
    if K < 2:
        raise ValueError(f"K must be at least 2, got {K}")
    if int(max(hS.max(), hT.max())) >= K:
        raise ValueError(f"labels hS, hT must lie in 0..K-1 = 0..{K - 1}")
    d = XS.shape[1]
    XS, XT = XS.float(), XT.float()  # float32: training speed; decisions are all we read off
    W = (
        (0.01 * torch.randn(n_critics, d, K, generator=generator, dtype=torch.float64))
        .float()
        .requires_grad_()
    )
    b = torch.zeros(n_critics, K, dtype=torch.float32, requires_grad=True)
    opt = torch.optim.AdamW([W, b], lr=lr, weight_decay=weight_decay)
    for _ in range(steps):
        opt.zero_grad()
        sS = torch.einsum("nd,cdk->cnk", XS, W) + b[:, None]
        sT = torch.einsum("nd,cdk->cnk", XT, W) + b[:, None]
        loss = 0.5 * (
            ce_loss(sS, hS.expand(n_critics, -1)).mean(1)
            + dis_loss(sT, hT.expand(n_critics, -1), kind).mean(1)
        )
        loss.sum().backward()
        opt.step()
    return W.detach(), b.detach()


def heldout_discrepancy(W, b, XS, hS, XT, hT):
    """Per-critic disagreement discrepancy on held-out data: agree_S - agree_T (alpha = 1).

    Book: eq:`eq-08-dd` in book/08-disagreement-discrepancy/pointwise.md.
    """
    W, b, XS, XT = W.double(), b.double(), XS.double(), XT.double()
    aS = ((torch.einsum("nd,cdk->cnk", XS, W) + b[:, None]).argmax(-1) == hS).double().mean(1)
    aT = ((torch.einsum("nd,cdk->cnk", XT, W) + b[:, None]).argmax(-1) == hT).double().mean(1)
    return (aS - aT).numpy()


def dis2_lower_bound(acc_source: float, delta_hat: float, nS: int, nT: int, delta: float) -> float:
    r"""Dis² lower bound on target accuracy: :math:`\mathrm{acc}_S-\hat\Delta-\epsilon`.

    With a Hoeffding term :math:`\epsilon=\sqrt{\log(1/\delta)(1/n_S+1/n_T)/2}` (our choice;
    RG23's exact term was not retrieved).
    """
    if not (0 < delta < 1):
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    if nS < 1 or nT < 1:
        raise ValueError(f"nS and nT must be positive, got {nS}, {nT}")
    return float(acc_source - delta_hat - math.sqrt(math.log(1 / delta) * (1 / nS + 1 / nT) / 2))
