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

Also here: the Bayes-optimal discrepancy of a shift with known densities (Monte Carlo), the Dis²
bound's Hoeffding term, two labellers :math:`h_1\ne h_2`, and a Detectron-style shift test
(Ginsberg et al. 2023) calibrated on held-out null runs, with DeLong's paired AUROC comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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
    # the update of pointwise_grad, run in torch with the class axis first (faster, same numbers
    # to rounding)
    s0 = torch.from_numpy(s).permute(2, 0, 1).contiguous()
    onehot = torch.zeros_like(s0)
    onehot[0] = 1.0
    wt = torch.from_numpy(w)[:, None]
    lr = 1.0 / (1.0 + wt)
    for _ in range(steps):
        s0 -= lr * (wt * _ce_grad0(s0, onehot) + _dis_grad0(s0, onehot, kind))
    return s0.permute(1, 2, 0).numpy()


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


def _second_labeller(y, y2):
    return np.asarray(y) if y2 is None else np.asarray(y2)


def true_discrepancy(pred, y, pS, pT, alpha: float = 1.0, y2=None) -> float:
    r"""The disagreement discrepancy on a finite space.

    .. math::
        d_\alpha=\alpha\sum_xp_T(x)\mathbb 1\{\hat y\ne h_2(x)\}
        -\sum_xp_S(x)\mathbb 1\{\hat y\ne h_1(x)\}

    with :math:`h_1=` ``y`` and :math:`h_2=` ``y2`` (default: ``y``, the case :math:`h_1=h_2`).

    Book: eq:`eq-08-dd` in book/08-disagreement-discrepancy/pointwise.md.
    """
    alpha = positive(alpha, "alpha")
    pred = np.asarray(pred)
    dis_S = (pred != np.asarray(y)).astype(float)
    dis_T = (pred != _second_labeller(y, y2)).astype(float)
    return float(alpha * np.sum(np.asarray(pT) * dis_T) - np.sum(np.asarray(pS) * dis_S))


def optimal_discrepancy(pS, pT, alpha: float = 1.0, differ=None) -> float:
    r"""The optimal discrepancy over all critics on a finite space.

    :math:`\sup_fd_\alpha=\sum_{h_1=h_2}(\alpha p_T-p_S)_++\alpha\sum_{h_1\ne h_2}p_T`: where the
    labellers agree the optimal critic disagrees exactly where :math:`\alpha p_T>p_S`; where they
    differ (boolean mask ``differ``; default none) it answers :math:`h_1` and gains
    :math:`\alpha p_T`.

    Book: prop:`prop-08-two-labellers` in book/08-disagreement-discrepancy/detection.md.
    """
    alpha = positive(alpha, "alpha")
    pS, pT = np.asarray(pS), np.asarray(pT)
    differ = np.zeros(pS.shape, bool) if differ is None else np.asarray(differ, bool)
    gain = np.where(differ, alpha * pT, np.maximum(alpha * pT - pS, 0.0))
    return float(np.sum(gain))


def predicted_fraction(pS, pT, lam: float, alpha: float = 1.0, differ=None) -> float:
    r"""Fraction of :math:`\sup d` recovered by a critic that, where :math:`h_1=h_2`, disagrees
    exactly where :math:`w<\lambda`, and answers :math:`h_1` where they differ (mask ``differ``).

    Book: prf:`prop-08-two-labellers` in book/08-disagreement-discrepancy/detection.md.
    """
    alpha = positive(alpha, "alpha")
    pS, pT = np.asarray(pS), np.asarray(pT)
    differ = np.zeros(pS.shape, bool) if differ is None else np.asarray(differ, bool)
    gain = alpha * pT - pS
    w = pS / (alpha * pT)
    num = np.sum(alpha * pT[differ]) + np.sum(gain[~differ & (w < lam)])
    return float(num / optimal_discrepancy(pS, pT, alpha, differ))


def minimiser_margin(w, K: int, kind: str):
    r"""Logit margin :math:`s_y-s_c` (:math:`c\ne y`) of the pointwise minimiser of
    :math:`w\,\mathrm{CE}+\ell_{dis}` where :math:`h_1=h_2=y` (we derive).

    GLK23: :math:`\log(w(K-1))`. RG23: :math:`\log u` with :math:`u` the positive root of
    :math:`u^2+(K-1)(1-w)u-w(K-1)=0` (stationarity of
    :math:`w\log(1+(K-1)e^{-m})+\log(1+e^m)`). The margin changes sign at
    :math:`\lambda_{GLK}`, :math:`\lambda_{RG}`.

    Book: prf:`prop-08-thresholds` in book/08-disagreement-discrepancy/pointwise.md.
    """
    w = np.asarray(w, dtype=float)
    if kind == "glk":
        return np.log(w * (K - 1))
    if kind != "rg":
        raise ValueError(
            f"kind must be 'rg' or 'glk' (the new loss has no unique margin), got {kind!r}"
        )
    c = (K - 1) * (1 - w)
    return np.log((-c + np.sqrt(c * c + 4 * w * (K - 1))) / 2)


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
    y2=None,
):
    r"""Minimise the surrogate over *all* critics on a finite space.

    The surrogate is :math:`\sum_xp_S\,\mathrm{CE}(s_x,h_1)+\alpha\sum_xp_T\,\ell_{dis}(s_x,h_2)`,
    with one free logit vector per point, by Adam.

    :math:`h_1=` ``y``, :math:`h_2=` ``y2`` (default ``y``). Returns the logits (n_points, K).
    """
    _check_kind(kind)
    alpha = positive(alpha, "alpha")
    pS_t, pT_t = torch.as_tensor(pS), torch.as_tensor(pT)
    yt = torch.as_tensor(np.asarray(y), dtype=torch.long)
    y2t = torch.as_tensor(_second_labeller(y, y2), dtype=torch.long)
    s = torch.randn(len(yt), K, generator=generator, dtype=torch.float64)
    # gradient written out (class axis first, see ce_grad / dis_grad): same numbers as autograd
    # of the surrogate to rounding, several times faster on these small tensors
    s0 = s.T.contiguous()
    s0.grad = torch.zeros_like(s0)
    o1, o2 = _onehot0(s0, yt), _onehot0(s0, y2t)
    opt = torch.optim.Adam([s0], lr=lr)
    for _ in range(steps):
        s0.grad = pS_t * _ce_grad0(s0, o1) + alpha * pT_t * _dis_grad0(s0, o2, kind)
        opt.step()
    return s0.T.contiguous()


# ----------------------------------------------------------------------------- linear critics
@dataclass(frozen=True)
class GaussianShift:
    r"""The synthetic covariate shift with known densities (chapter 08, ``critics.md``).

    Source :math:`x=\mu_y+\varepsilon`, target :math:`x=\mu_y+\delta+\tau\varepsilon`, with
    :math:`y` uniform on :math:`[K]`, :math:`\varepsilon\sim\mathcal N(0,I_d)`, class means
    ``means`` (K, d), mean shift ``shift`` (d,) and target noise scale ``noise_target`` = τ.
    ``P(y | x)`` differs between the domains (the noise scale changes); the densities
    :math:`p_S,p_T` are equal-weight Gaussian mixtures, known in closed form.
    """

    means: torch.Tensor
    shift: torch.Tensor
    noise_target: float

    def _centres_scale(self, domain: str):
        if domain == "source":
            return self.means, 1.0
        if domain == "target":
            return self.means + self.shift, float(self.noise_target)
        raise ValueError(f"domain must be 'source' or 'target', got {domain!r}")

    def sample(self, n: int, domain: str, generator: torch.Generator):
        """Draw ``n`` labelled points of ``domain``: returns X (n, d) float64 and y (n,)."""
        n = positive_int(n, "n")
        centres, scale = self._centres_scale(domain)
        y = torch.randint(0, centres.shape[0], (n,), generator=generator)
        X = centres[y] + scale * torch.randn(
            n, centres.shape[1], generator=generator, dtype=torch.float64
        )
        return X, y

    def log_density(self, X, domain: str):
        r""":math:`\log p_D(x)=\log\frac1K\sum_k\mathcal N(x;c_k,s^2I)`, shape (n,)."""
        centres, scale = self._centres_scale(domain)
        K, d = centres.shape
        sq = torch.cdist(X.double(), centres).square()
        return (
            torch.logsumexp(-sq / (2 * scale**2), -1)
            - math.log(K)
            - 0.5 * d * math.log(2 * math.pi * scale**2)
        )


def gaussian_shift(
    K: int, d: int, generator: torch.Generator, noise_target: float = 1.5, shift_scale: float = 1.0
) -> GaussianShift:
    """Draw the shift's parameters: class means ~ N(0, 4I), mean shift ~ N(0, shift_scale² I)."""
    K, d = positive_int(K, "K"), positive_int(d, "d")
    means = 2.0 * torch.randn(K, d, generator=generator, dtype=torch.float64)
    shift = shift_scale * torch.randn(d, generator=generator, dtype=torch.float64)
    return GaussianShift(means, shift, positive(noise_target, "noise_target"))


def make_shift_data(
    K: int,
    d: int,
    n: int,
    generator: torch.Generator,
    noise_target: float = 1.5,
    shift_scale: float = 1.0,
    *,
    with_model: bool = False,
):
    """Synthetic covariate shift: class means ~ N(0, 4I); source x = mean + N(0, I); target uses
    noise scale ``noise_target`` and a random mean shift. Returns (XS, yS, XT, yT), and the
    :class:`GaussianShift` that generated them last when ``with_model``."""
    model = gaussian_shift(K, d, generator, noise_target, shift_scale)
    yS = torch.randint(0, K, (n,), generator=generator)
    yT = torch.randint(0, K, (n,), generator=generator)
    XS = model.means[yS] + torch.randn(n, d, generator=generator, dtype=torch.float64)
    XT = (
        model.means[yT]
        + model.shift
        + noise_target * torch.randn(n, d, generator=generator, dtype=torch.float64)
    )
    return (XS, yS, XT, yT, model) if with_model else (XS, yS, XT, yT)


def bayes_discrepancy_mc(log_pS, log_pT, h1T=None, h2T=None):
    r"""Monte Carlo estimate of the optimal discrepancy :math:`\sup_fd_1[h_1,h_2,f]` over all
    measurable critics, from target samples :math:`x_i\sim T` (shape (M,) log-densities).

    Pointwise (the decoupling, :math:`\alpha=1`): where :math:`h_1(x)\ne h_2(x)` the critic
    :math:`f=h_1` gains :math:`p_T(x)` at no source cost; where :math:`h_1=h_2` it gains
    :math:`(p_T-p_S)_+(x)`. So
    :math:`\sup_fd=\mathbb E_T\big[\mathbb 1\{h_1\ne h_2\}+\mathbb 1\{h_1=h_2\}(1-p_S/p_T)_+\big]`
    (:math:`=\mathrm{TV}(S,T)` when :math:`h_1=h_2`). Returns (estimate, standard error).

    Book: eq:`eq-08-bayes-dd` in book/08-disagreement-discrepancy/critics.md.
    """
    ratio = torch.exp(torch.as_tensor(log_pS) - torch.as_tensor(log_pT))
    g = torch.clamp(1.0 - ratio, min=0.0)
    if h1T is not None:
        g = torch.where(torch.as_tensor(h1T) != torch.as_tensor(h2T), torch.ones_like(g), g)
    g = g.double()
    return float(g.mean()), float(g.std() / math.sqrt(g.numel()))


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


# Training works with the class axis FIRST, logits of shape (K, ...): on CPU, reductions and
# broadcasts over a short trailing axis (K = 10) are several times slower than over a leading one.
def _softmax0(s):
    e = (s - s.amax(0, keepdim=True)).exp()
    return e / e.sum(0, keepdim=True)


def _onehot0(s, y):
    K = s.shape[0]
    return (torch.arange(K).view((K,) + (1,) * y.dim()) == y).to(s.dtype)


def _ce_grad0(s, onehot):
    return _softmax0(s) - onehot


def _dis_grad0(s, onehot, kind: str):
    K = s.shape[0]
    if kind == "ours":
        return _softmax0(s) - _softmax0(s.masked_fill(onehot.bool(), float("-inf")))
    if kind == "glk":
        return _softmax0(s) - (1 - onehot) / (K - 1)
    signs = (onehot * K - 1) / (K - 1)  # e_y - (1 - e_y)/(K - 1)
    return torch.sigmoid((s * signs).sum(0, keepdim=True)) * signs


def ce_grad(s, y):
    r"""Gradient of :math:`\mathrm{CE}(s,y)` in the logits: :math:`\sigma(s)-e_y`."""
    s, y = _check_sy(s, y)
    s0 = s.movedim(-1, 0)
    return _ce_grad0(s0, _onehot0(s0, y)).movedim(0, -1)


def dis_grad(s, y, kind: str):
    r"""Analytic gradient of :math:`\ell_{dis}(s,y)` in the logits, shape of ``s`` (..., K).

    With :math:`p=\sigma(s)` and :math:`e_y` the one-hot label: RG23
    :math:`\mathrm{sigmoid}(t)\,(e_y-\frac{1-e_y}{K-1})` with
    :math:`t=s_y-\frac1{K-1}\sum_{c\ne y}s_c`; GLK23 :math:`p-\frac{1-e_y}{K-1}`; the new loss
    :math:`p-\sigma(s_{-y})` (softmax over the classes other than ``y``, zero at ``y``).
    Checked against autograd of :func:`dis_loss` in the tests.

    Book: eq:`eq-08-losses` in book/08-disagreement-discrepancy/pointwise.md.
    """
    _check_kind(kind)
    s, y = _check_sy(s, y)
    s0 = s.movedim(-1, 0)
    return _dis_grad0(s0, _onehot0(s0, y), kind).movedim(0, -1)


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
    alpha: float = 1.0,
    init=None,
):
    r"""Train ``n_critics`` linear critics at once (one tensor), AdamW, full batch, minimising
    :math:`\frac12(\mathrm{mean\,CE}(f(x_S),h_S)+\alpha\,\mathrm{mean}\,\ell_{dis}(f(x_T),h_T))`
    (RG23's protocol has :math:`\alpha=1`).

    ``XT`` is (n_T, d), shared by all critics, or (n_critics, n_T, d) with ``hT``
    (n_critics, n_T): one target sample per critic (the detection runs). ``init`` = (W0, b0)
    of shapes (d, K), (K,) starts every critic at that linear model (Detectron starts at the
    audited model); otherwise weights are N(0, 0.01²) and biases zero. The gradient is written
    out rather than taken by autograd (:func:`ce_grad`, :func:`dis_grad`).
    ``K`` (number of classes) is passed explicitly: inferring it from the labels would give the
    critics too few outputs whenever the labeller never predicts the last class.
    Returns weights (n_critics, d, K) and biases (n_critics, K)."""
    _check_kind(kind)
    K = positive_int(K, "K")
    alpha = positive(alpha, "alpha")
    if K < 2:
        raise ValueError(f"K must be at least 2, got {K}")
    if int(max(hS.max(), hT.max())) >= K or int(min(hS.min(), hT.min())) < 0:
        raise ValueError(f"labels hS, hT must lie in 0..K-1 = 0..{K - 1}")
    per_critic = XT.dim() == 3
    if per_critic and (XT.shape[0] != n_critics or hT.shape != XT.shape[:2]):
        raise ValueError("a batched XT must have shape (n_critics, n_T, d) and hT (n_critics, n_T)")
    d = XS.shape[1]
    XS, XT = XS.float(), XT.float()  # float32: training speed; decisions are all we read off
    if init is None:
        W = (0.01 * torch.randn(n_critics, d, K, generator=generator, dtype=torch.float64)).float()
        b = torch.zeros(n_critics, K, dtype=torch.float32)
    else:
        W = init[0].float().expand(n_critics, d, K).clone()
        b = init[1].float().expand(n_critics, K).clone()
    W.grad, b.grad = torch.zeros_like(W), torch.zeros_like(b)
    opt = torch.optim.AdamW([W, b], lr=lr, weight_decay=weight_decay)
    # one-hot labels (K, C, n), fixed during training
    oS = _onehot0(torch.empty(K), hS.expand(n_critics, -1)).float()
    oT = _onehot0(torch.empty(K), hT if per_critic else hT.expand(n_critics, -1)).float()
    nS, nT = XS.shape[0], XT.shape[-2]
    eq_T, eq_T_back = (
        ("cnd,kcd->kcn", "cnd,kcn->cdk") if per_critic else ("nd,kcd->kcn", "nd,kcn->cdk")
    )
    for _ in range(steps):
        Wk, bk = W.permute(2, 0, 1), b.T[:, :, None]  # (K, C, d), (K, C, 1): class axis first
        sS = torch.einsum("nd,kcd->kcn", XS, Wk) + bk
        sT = torch.einsum(eq_T, XT, Wk) + bk
        gS = _ce_grad0(sS, oS) * (0.5 / nS)
        gT = _dis_grad0(sT, oT, kind) * (0.5 * alpha / nT)
        W.grad = torch.einsum("nd,kcn->cdk", XS, gS) + torch.einsum(eq_T_back, XT, gT)
        b.grad = (gS.sum(-1) + gT.sum(-1)).T
        opt.step()
    return W, b


def critic_predictions(W, b, X):
    """Argmax decisions of every critic: X (n, d) or (C, n, d) -> (C, n)."""
    eq = "cnd,cdk->cnk" if X.dim() == 3 else "nd,cdk->cnk"
    return (torch.einsum(eq, X.double(), W.double()) + b.double()[:, None]).argmax(-1)


def heldout_discrepancy(W, b, XS, hS, XT, hT):
    """Per-critic disagreement discrepancy on held-out data: agree_S - agree_T (alpha = 1).

    Book: eq:`eq-08-dd` in book/08-disagreement-discrepancy/pointwise.md.
    """
    aS = (critic_predictions(W, b, XS) == hS).double().mean(1)
    aT = (critic_predictions(W, b, XT) == hT).double().mean(1)
    return (aS - aT).numpy()


def dis2_epsilon(nS: int, nT: int, delta: float, n_hypotheses: int = 1) -> float:
    r"""Hoeffding term of the Dis² bound, for one critic fixed before the evaluation data.

    The estimate :math:`\widehat{\mathrm{acc}}_S-\hat\Delta=\frac1{n_S}\sum_{i\in S}
    (\mathbb 1\{h(x_i)=y_i\}-\mathbb 1\{f(x_i)=h(x_i)\})+\frac1{n_T}\sum_{j\in T}
    \mathbb 1\{f(x_j)=h(x_j)\}` is a sum of independent terms with ranges :math:`2/n_S` and
    :math:`1/n_T`, so Hoeffding gives :math:`\epsilon=\sqrt{\log(m/\delta)(4/n_S+1/n_T)/2}`,
    with a union bound over ``n_hypotheses`` = m critics when the critic is chosen on the same
    data. Book: eq:`eq-08-dis2-eps` in book/08-disagreement-discrepancy/critics.md.
    """
    if not (0 < delta < 1):
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    nS, nT = positive_int(nS, "nS"), positive_int(nT, "nT")
    m = positive_int(n_hypotheses, "n_hypotheses")
    return math.sqrt(math.log(m / delta) * (4 / nS + 1 / nT) / 2)


def dis2_lower_bound(acc_source: float, delta_hat: float, nS: int, nT: int, delta: float) -> float:
    r"""Dis² lower bound on target accuracy: :math:`\widehat{\mathrm{acc}}_S-\hat\Delta-\epsilon`.

    Holds with probability :math:`1-\delta` when the critic's population discrepancy is at least
    the true labeller's, :math:`d(y)=\mathrm{err}_T(h)-\mathrm{err}_S(h)` (RG23's assumption), and
    the critic was chosen before the evaluation data were seen (:func:`dis2_epsilon`).
    """
    return float(acc_source - delta_hat - dis2_epsilon(nS, nT, delta))


# ----------------------------------------------------------------------------- shift detection
def detection_threshold(null_stats, level: float) -> float:
    r"""Reject when the statistic exceeds the :math:`k`-th smallest of :math:`M_0` null
    calibration values, :math:`k=\lceil(M_0+1)(1-a)\rceil`.

    For a new run exchangeable with the calibration runs,
    :math:`\Pr(T>T_{(k)})\le(M_0+1-k)/(M_0+1)\le a` (ties only lower it).
    Book: prf:`prop-08-size` in book/08-disagreement-discrepancy/detection.md.
    """
    null_stats = np.sort(np.asarray(null_stats, dtype=float))
    if not (0 < level < 1):
        raise ValueError(f"level must be in (0, 1), got {level}")
    k = math.ceil((null_stats.size + 1) * (1 - level))
    if k > null_stats.size:
        raise ValueError(f"need at least {math.ceil(1 / level) - 1} null runs for level {level}")
    return float(null_stats[k - 1])


def auroc_paired(null_stats, alt_stats):
    r"""AUROCs of several statistics on the same runs, with DeLong's covariance.

    ``null_stats`` (M0, R) and ``alt_stats`` (M1, R): R statistics computed on the same M0 null
    and M1 shifted runs. With :math:`\psi(a,b)=\mathbb 1\{a>b\}+\frac12\mathbb 1\{a=b\}`, the AUROC
    is :math:`\hat A_r=\frac1{M_0M_1}\sum_{i,j}\psi(a_{ir},b_{jr})`; DeLong, DeLong & Clarke-Pearson
    (1988) estimate its covariance by :math:`S_{10}/M_1+S_{01}/M_0` from the per-run placement
    values.
    Returns (A (R,), covariance (R, R)).

    Book: eq:`eq-08-delong` in book/08-disagreement-discrepancy/detection.md.
    """
    b = np.asarray(null_stats, dtype=float)
    a = np.asarray(alt_stats, dtype=float)
    if b.ndim != 2 or a.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError("null_stats and alt_stats must be 2-D with the same number of columns")
    psi = (a[:, None, :] > b[None, :, :]) + 0.5 * (a[:, None, :] == b[None, :, :])
    v10, v01 = psi.mean(1), psi.mean(0)  # placements (M1, R), (M0, R)
    cov = np.atleast_2d(np.cov(v10, rowvar=False)) / a.shape[0]
    cov = cov + np.atleast_2d(np.cov(v01, rowvar=False)) / b.shape[0]
    return v10.mean(0), cov
