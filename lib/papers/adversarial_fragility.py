r"""Matrix-theoretic adversarial fragility of interpolating classifiers (chapter 12).

Paper: J. Gao, Z. Lu, R. Mudumbai, X. Wu, J. Yi, M. Cho, C. Xu, H. Xie, W. Xu, *Feature
compression is the root cause of adversarial fragility in neural network classifiers*,
ICLR 2026 (arXiv:2406.16200, OpenReview ``UYM3yaiUX9``).

Chapter folder: ``book/12-adversarial-fragility/``.

The model (the paper's Theorem 1 setting, as reported by its reviewers): ``K`` classes with
one Gaussian prototype each, :math:`X=[x_1,\dots,x_K]\in\mathbb R^{d\times K}`, and a classifier
:math:`C(x)=\arg\max_k f_k(x)`, :math:`f(x)=Wx`, that interpolates one-hot codes, :math:`WX=I_K`.
Its minimum-norm solution is :math:`W=X^+`. The central identities (derived in the chapter):

.. math::
    \rho_C(x\to j)=\frac{f_i(x)-f_j(x)}{\|w_i-w_j\|},\qquad
    \|(X^+)_{i,:}\|=\frac1{\operatorname{dist}(x_i,\operatorname{span}\{x_j:j\ne i\})},\qquad
    \frac{\rho_{X^+}(x_i\to j)}{\rho_{\rm opt}(x_i\to j)}=\cos\angle(w_i-w_j,\,x_i-x_j).

Conventions: prototypes are the *columns* of ``X`` (shape ``(d, K)``); weights ``W`` have
shape ``(K, d)`` (row ``k`` is :math:`w_k`); a batch of inputs has shape ``(n, d)``.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg, optimize, stats

from lib.validate import check_generator, positive, positive_int, real, real_array

__all__ = [
    "gaussian_prototypes",
    "noisy_samples",
    "min_norm_onehot",
    "linear_scores",
    "linear_robustness",
    "pairwise_linear_robustness",
    "optimal_robustness",
    "nearest_prototype_predict",
    "dist_to_span",
    "pairwise_ratio",
    "ratio_law",
    "projection_ratio_law",
    "chernoff_min_distance",
    "qr_attack",
    "thm5_phi",
    "thm5_mean_phi",
    "thm5_cosines",
    "thm5_linear_net_gd",
    "train_linear",
    "gd_mse_spectral",
    "projected_pairwise_robustness",
    "make_mlp",
    "train_mlp",
    "mlp_predict",
    "mlp_lipschitz_lower_bound",
    "deepfool",
    "fmn_min_norm",
    "fmn_targeted",
    "compression_factor",
    "pairwise_boundary_norm",
    "verify_flip",
    "bisect_norm",
]


# --------------------------------------------------------------------------- data
def _prototypes(X, name: str = "X") -> np.ndarray:
    X = real_array(X, name, ndim=2)
    if X.shape[1] < 2:
        raise ValueError(f"{name} must have at least 2 columns (classes), got shape {X.shape}")
    return X


def gaussian_prototypes(d: int, K: int, rng: np.random.Generator) -> np.ndarray:
    """``K`` prototypes with i.i.d. :math:`N(0,1)` entries, as the columns of a ``(d, K)`` array."""
    d = positive_int(d, "d")
    K = positive_int(K, "K")
    rng = check_generator(rng)
    return rng.standard_normal((d, K))


def noisy_samples(X, per_class: int, sigma: float, rng: np.random.Generator):
    """``per_class`` noisy copies :math:`x_k+\\sigma z` of every prototype.

    Returns ``(inputs, labels)`` with shapes ``(K * per_class, d)`` and ``(K * per_class,)``.
    Book: the training data of the ReLU network in book/12-adversarial-fragility/training.md.
    """
    X = _prototypes(X)
    per_class = positive_int(per_class, "per_class")
    sigma = real(sigma, "sigma", lo=0.0)
    rng = check_generator(rng)
    d, K = X.shape
    labels = np.repeat(np.arange(K), per_class)
    inputs = X.T[labels] + sigma * rng.standard_normal((K * per_class, d))
    return inputs, labels


# --------------------------------------------------------------------------- linear classifiers
def min_norm_onehot(X, rcond: float = 1e-12) -> np.ndarray:
    """Minimum-norm weights with one-hot outputs at the prototypes, :math:`W=X^+` (``(K, d)``).

    Raises ``ValueError`` when ``K > d`` (then :math:`WX=I_K` has no solution) or when ``X``
    is numerically rank deficient. Book: prf:`def-12-interpolating` in
    book/12-adversarial-fragility/theory.md.
    """
    X = _prototypes(X)
    rcond = positive(rcond, "rcond")
    d, K = X.shape
    if K > d:
        raise ValueError(
            f"X has K={K} columns in dimension d={d}: WX = I needs K <= d (no interpolation)"
        )
    U, s, Vt = np.linalg.svd(X, full_matrices=False)
    if s[-1] <= rcond * s[0]:
        raise ValueError("X must have full column rank (smallest singular value below rcond)")
    return (Vt.T / s) @ U.T  # X^+ = V S^{-1} U^T (one SVD)


def linear_scores(W, b, x) -> np.ndarray:
    """Scores :math:`f(x)=Wx+b` for one input ``(d,)`` or a batch ``(n, d)``.

    Book: eq. ``eq-12-linear`` in book/12-adversarial-fragility/theory.md.
    """
    W = real_array(W, "W", ndim=2)
    x = real_array(x, "x")
    if x.ndim not in (1, 2) or x.shape[-1] != W.shape[1]:
        raise ValueError(f"x must have shape (d,) or (n, d) with d={W.shape[1]}, got {x.shape}")
    b = np.zeros(W.shape[0]) if b is None else real_array(b, "b", shape=(W.shape[0],))
    return x @ W.T + b


def linear_robustness(W, b, x, overshoot: float = 1e-6):
    r"""Exact :math:`\ell_2` robustness of :math:`C(x)=\arg\max_k (Wx+b)_k` at ``x``.

    :math:`\rho(x\to j)=(f_i-f_j)/\|w_i-w_j\|` for :math:`i=C(x)`; :math:`\rho(x)=\min_j`.
    Returns ``(rho, j_star, delta)`` with the attack
    :math:`\delta=-(1+\epsilon)(f_i-f_{j^\star})(w_i-w_{j^\star})/\|w_i-w_{j^\star}\|^2`.
    Book: prf:`thm-12-linear` in book/12-adversarial-fragility/theory.md.
    """
    W = real_array(W, "W", ndim=2)
    x = real_array(x, "x", shape=(W.shape[1],))
    overshoot = real(overshoot, "overshoot", lo=0.0)
    f = linear_scores(W, b, x)
    i = int(np.argmax(f))
    diff = W[i] - W  # rows w_i - w_j
    norms = np.linalg.norm(diff, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (f[i] - f) / norms
    r[i] = np.inf
    r[norms == 0] = np.inf  # identical rows can never be separated
    j = int(np.argmin(r))
    if not np.isfinite(r[j]):
        raise ValueError("W has identical rows for every class: no perturbation changes the label")
    delta = -(1 + overshoot) * (f[i] - f[j]) * diff[j] / norms[j] ** 2
    return float(r[j]), j, delta


def pairwise_linear_robustness(W, X, b=None, rows=None) -> np.ndarray:
    r"""``R[i, j]`` = distance from :math:`x_i` to the boundary :math:`f_i=f_j`.

    :math:`R_{ij}=(f_i(x_i)-f_j(x_i))/\|w_i-w_j\|` (negative when :math:`x_i` is on the wrong
    side), ``inf`` on the diagonal. Its row minimum is :math:`\rho(x_i)` when every
    prototype is classified correctly. ``rows`` (a sequence of prototype indices) returns
    only those rows, shape ``(len(rows), K)``, at a cost of :math:`O(\text{len(rows)}\,Kd)`
    instead of :math:`O(K^2d)`. Book: eq. `eq-12-linear` in
    book/12-adversarial-fragility/theory.md.
    """
    W = real_array(W, "W", ndim=2)
    X = _prototypes(X)
    if W.shape != (X.shape[1], X.shape[0]):
        raise ValueError(f"W must have shape (K, d) = {(X.shape[1], X.shape[0])}, got {W.shape}")
    K = X.shape[1]
    if rows is None:
        idx = np.arange(K)
    else:
        idx = np.asarray(rows)
        if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer) or len(idx) == 0:
            raise ValueError("rows must be a non-empty 1-d sequence of integers")
        if idx.min() < 0 or idx.max() >= K:
            raise ValueError(f"rows must lie in [0, {K}), got {idx.min()}..{idx.max()}")
    F = linear_scores(W, b, X.T[idx])  # F[a, k] = f_k(x_{idx[a]})
    margin = F[np.arange(len(idx)), idx][:, None] - F
    if rows is None:
        G = W @ W.T
        sq = np.diag(G)[:, None] + np.diag(G)[None, :] - 2 * G
        norms = np.sqrt(np.maximum(sq, 0.0))
    else:
        norms = np.linalg.norm(W[idx][:, None, :] - W[None], axis=2)
    with np.errstate(divide="ignore", invalid="ignore"):
        R = margin / norms
    R[np.arange(len(idx)), idx] = np.inf
    return R


def optimal_robustness(X):
    r"""Robustness of the nearest-prototype (optimal) classifier at its own prototypes.

    Returns ``(per_class, pairwise)``: ``pairwise[i, j]`` :math:`=\|x_i-x_j\|/2` (``inf`` on
    the diagonal) and ``per_class[i]`` its row minimum. Book: prf:`def-12-optimal` in
    book/12-adversarial-fragility/theory.md.
    """
    X = _prototypes(X)
    sq = np.sum(X**2, axis=0)
    D2 = np.maximum(sq[:, None] + sq[None, :] - 2 * X.T @ X, 0.0)
    pairwise = np.sqrt(D2) / 2
    np.fill_diagonal(pairwise, np.inf)
    return pairwise.min(axis=1), pairwise


def nearest_prototype_predict(X, x) -> np.ndarray:
    """Labels of the nearest-prototype classifier for inputs ``x`` of shape ``(n, d)``.

    Book: prf:`def-12-optimal` (theory.md) and prf:`prop-12-compression` (compression.md) in
    book/12-adversarial-fragility/.
    """
    X = _prototypes(X)
    x = real_array(x, "x", ndim=2)
    if x.shape[1] != X.shape[0]:
        raise ValueError(f"x must have shape (n, {X.shape[0]}), got {x.shape}")
    d2 = np.sum(x**2, axis=1)[:, None] - 2 * x @ X + np.sum(X**2, axis=0)[None, :]
    return np.argmin(d2, axis=1)


def dist_to_span(X, i: int) -> float:
    r""":math:`\operatorname{dist}(x_i,\operatorname{span}\{x_j:j\ne i\})` (least-squares residual).

    Book: prf:`thm-12-schur` in book/12-adversarial-fragility/theory.md.
    """
    X = _prototypes(X)
    if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
        raise TypeError(f"i must be an integer, got {type(i).__name__}")
    if not 0 <= i < X.shape[1]:
        raise ValueError(f"i must be in [0, {X.shape[1]}), got {i}")
    others = np.delete(X, i, axis=1)
    coef, *_ = np.linalg.lstsq(others, X[:, i], rcond=None)
    return float(np.linalg.norm(X[:, i] - others @ coef))


def pairwise_ratio(W, X, b=None) -> np.ndarray:
    r"""Off-diagonal ratios :math:`\rho_C(x_i\to j)/\rho_{\rm opt}(x_i\to j)`, flattened.

    Book: prf:`thm-12-ratio-law` in book/12-adversarial-fragility/theory.md.
    """
    R = pairwise_linear_robustness(W, X, b)
    _, P = optimal_robustness(X)
    off = ~np.eye(R.shape[0], dtype=bool)
    return R[off] / P[off]


def ratio_law(d: int, K: int):
    r"""Exact law of :math:`\rho_{X^+}(x_i\to j)^2/\rho_{\rm opt}(x_i\to j)^2` for Gaussian ``X``.

    It is :math:`\mathrm{Beta}\big(\tfrac{d-K+1}2,\tfrac{K-1}2\big)` (a frozen ``scipy`` law);
    for ``K = 1`` there is no pair. Book: prf:`thm-12-ratio-law` in
    book/12-adversarial-fragility/theory.md.
    """
    d = positive_int(d, "d")
    K = positive_int(K, "K")
    if K < 2 or K > d:
        raise ValueError(f"K must satisfy 2 <= K <= d={d}, got {K}")
    return stats.beta((d - K + 1) / 2, (K - 1) / 2)


def projection_ratio_law(d: int, k: int):
    r"""Law of :math:`\|Pu\|^2/\|u\|^2`, Gaussian ``u`` in ``R^d``, rank-``k`` projection ``P``.

    It is :math:`\mathrm{Beta}\big(\tfrac k2,\tfrac{d-k}2\big)` (a frozen ``scipy`` law,
    ``1 <= k < d``); the ratio of the compressed classifier is its square root. Book:
    prf:`prop-12-compression` in book/12-adversarial-fragility/compression.md.
    """
    d = positive_int(d, "d")
    k = positive_int(k, "k")
    if k >= d:
        raise ValueError(f"k must satisfy 1 <= k < d={d}, got {k}")
    return stats.beta(k / 2, (d - k) / 2)


def chernoff_min_distance(d: int, K: int, fail_prob: float) -> float:
    r"""A level :math:`c` with :math:`P(\min_{i<j}\|x_i-x_j\|/\sqrt{2d}<c)\le` ``fail_prob``.

    Chernoff bound for :math:`\chi^2_d`: :math:`P(\chi^2_d\le(1-\epsilon)d)\le
    e^{-\frac d2(-\epsilon-\log(1-\epsilon))}`, union over :math:`\binom K2` pairs; returns
    :math:`\sqrt{1-\epsilon}` for the smallest admissible :math:`\epsilon`. Book:
    prf:`lem-12-chernoff` in book/12-adversarial-fragility/theory.md.
    """
    d = positive_int(d, "d")
    K = positive_int(K, "K")
    fail_prob = real(fail_prob, "fail_prob", lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    if K < 2:
        raise ValueError(f"K must be at least 2, got {K}")
    need = 2 * np.log(K * (K - 1) / 2 / fail_prob) / d  # -eps - log(1 - eps) >= need
    if need <= 0:
        return 1.0

    def rate(eps):  # increasing on (0, 1)
        return -eps - np.log1p(-eps) - need

    top = 1 - np.finfo(float).eps
    if rate(top) <= 0:
        return 0.0
    eps = optimize.brentq(rate, 0.0, top, xtol=1e-15, rtol=4 * np.finfo(float).eps)
    return float(np.sqrt(1 - eps))


def qr_attack(X):
    r"""The paper's Theorem 1 attack on :math:`W=X^{-1}` at the last prototype (``K = d``).

    With :math:`X=QR`, :math:`e=Qb`, :math:`b=(0,\dots,0,R_{d-1,d-1}-R_{d-1,d},-R_{dd})` sets
    :math:`f_{d-1}(x_d+e)=1` and :math:`f_d(x_d+e)=0`. Returns ``(e, bound)`` with the paper's
    bound :math:`|R_{d-1,d-1}|+|R_{d-1,d}|+|R_{dd}|\ge\|e\|`. Book: prf:`thm-12-paper-thm1` in
    book/12-adversarial-fragility/theory.md.
    """
    X = _prototypes(X)
    d, K = X.shape
    if K != d:
        raise ValueError(f"X must be square (K = d), got shape {X.shape}")
    R = np.linalg.qr(X, mode="r")
    # only the last two columns of Q = X R^{-1} are needed: two triangular solves, O(d^2)
    Q_last = X @ linalg.solve_triangular(R, np.eye(d)[:, -2:])
    b = np.array([R[-2, -2] - R[-2, -1], -R[-1, -1]])
    bound = abs(R[-2, -2]) + abs(R[-2, -1]) + abs(R[-1, -1])
    return Q_last @ b, float(bound)


# --------------------------------------------------------------------------- Theorem 5
def _square_batch(A, name: str = "A") -> np.ndarray:
    A = real_array(A, name)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2] or A.shape[-1] < 2:
        raise ValueError(f"{name} must have shape (..., d, d) with d >= 2, got {A.shape}")
    return A


def thm5_phi(A) -> np.ndarray:
    r"""The paper's predicted ratio :math:`\phi=|R_{dd}|/\|a_d\|` for :math:`A=QR` (Theorem 5).

    ``A``: ``(d, d)`` or a batch ``(..., d, d)``; returns ``(...)``. :math:`|R_{dd}|` is the
    distance from the last column :math:`a_d` to the span of the others, so for standard
    Gaussian ``A``, :math:`\phi^2\sim\mathrm{Beta}(\tfrac12,\tfrac{d-1}2)` (eq. ``eq-12-phi``).
    Book: prf:`thm-12-paper-thm5` in book/12-adversarial-fragility/compression.md.
    """
    A = _square_batch(A)
    R = np.linalg.qr(A, mode="r")
    return np.abs(R[..., -1, -1]) / np.linalg.norm(A[..., :, -1], axis=-1)


def thm5_mean_phi(d: int) -> float:
    r"""Exact mean of :math:`\phi=\sqrt{\mathrm{Beta}(\tfrac12,\tfrac{d-1}2)}` for standard
    Gaussian ``A`` in dimension ``d >= 2``: :math:`\Gamma(d/2)/(\sqrt\pi\,\Gamma((d+1)/2))`.

    Book: eq. ``eq-12-phi`` in book/12-adversarial-fragility/compression.md.
    """
    from scipy.special import gammaln

    d = positive_int(d, "d")
    if d < 2:
        raise ValueError(f"d must be at least 2, got {d}")
    # eq-12-phi
    return float(np.exp(gammaln(d / 2) - gammaln((d + 1) / 2)) / np.sqrt(np.pi))


def thm5_cosines(A, v):
    r"""The paper's measured and predicted cosines for a linear probe ``v`` on Theorem 5 data.

    For the end-to-end weight vector :math:`v` of a trained linear network (``(d,)``) and
    ``A`` (``(d, d)``), returns ``(phi, cos1, cos2)``: :math:`\phi=|R_{dd}|/\|a_d\|`,
    :math:`|\cos\theta_1|=|v^\top a_d|/(\|v\|\|a_d\|)` (the paper's measured ratio: the flip
    size :math:`|v^\top a_d|/\|v\|` along :math:`v` over :math:`\|a_d\|`) and
    :math:`|\cos\theta_2|=|\cos\angle(v,(A^{-1})_{d,:})|` (alignment with the interpolant).
    At the interpolant :math:`v=(A^{-1})_{d,:}^\top`, ``cos1 == phi`` and ``cos2 == 1``. Book:
    prf:`thm-12-paper-thm5` in book/12-adversarial-fragility/compression.md.
    """
    A = _square_batch(A)
    if A.ndim != 2:
        raise ValueError(f"A must have shape (d, d), got {A.shape}")
    v = real_array(v, "v", shape=(A.shape[0],))
    nv = np.linalg.norm(v)
    if nv == 0:
        raise ValueError("v must not be the zero vector")
    a = A[:, -1]
    last = np.linalg.solve(A.T, np.eye(A.shape[0])[-1])  # (A^{-1})_{d,:}
    cos1 = abs(v @ a) / (nv * np.linalg.norm(a))
    cos2 = abs(v @ last) / (nv * np.linalg.norm(last))
    return float(thm5_phi(A)), float(cos1), float(cos2)


def thm5_linear_net_gd(A_list, hidden: int, steps: int, rng, lr_scale: float = 1.0, log_steps=()):
    r"""Full-batch GD of linear networks :math:`x\mapsto w_2^\top W_1x` on Theorem 5 data, exactly.

    Run ``r`` has data :math:`x=A_rz` for all :math:`2^{d_r}` sign vectors :math:`z`, labels
    :math:`y=z_{d_r}`, hidden width :math:`H` (``hidden``), no biases, PyTorch's default
    initialisation (:math:`W_1\sim U(\pm1/\sqrt{d})^{H\times d}`, :math:`w_2\sim U(\pm1/\sqrt H)^H`)
    and the loss :math:`L=\tfrac12\operatorname{mean}_z(w_2^\top W_1Az-z_d)^2`. Because
    :math:`\operatorname{mean}_z zz^\top=I` and :math:`\operatorname{mean}_z z z_d=e_d`,
    :math:`L=\tfrac12v^\top\Sigma v-v^\top a_d+\tfrac12` with :math:`v=W_1^\top w_2`,
    :math:`\Sigma=AA^\top`, and one GD step :math:`W_1\leftarrow W_1-\eta w_2g^\top`,
    :math:`w_2\leftarrow w_2-\eta W_1g` (:math:`g=\Sigma v-a_d`) acts on
    :math:`(M,v,s)=(W_1^\top W_1,\,W_1^\top w_2,\,\|w_2\|^2)` as

    .. math::
        v'=v-\eta(M+sI)g+\eta^2(v^\top g)g,\quad
        M'=M-\eta(vg^\top+gv^\top)+\eta^2s\,gg^\top,\quad
        s'=s-2\eta v^\top g+\eta^2g^\top Mg,

    which is the same iteration in :math:`O(d^2)` per step whatever :math:`H`. The step is
    :math:`\eta_r=` ``lr_scale`` :math:`/((s_0+\lambda_{\max}(M_0))\,\lambda_{\max}(\Sigma))`
    (half the stability limit of the linearised dynamics for ``lr_scale = 1``). The runs are
    advanced together (zero-padded to the largest ``d``). ``A_list``: a sequence of square
    arrays; returns ``{t: [v_r, ...]}`` (the end-to-end vectors, shape ``(d_r,)``) for each ``t``
    in ``log_steps`` and for ``t = steps``. Book: prf:`prop-12-thm5-gd` in
    book/12-adversarial-fragility/compression.md.
    """
    if isinstance(A_list, np.ndarray) and A_list.ndim == 2:
        raise TypeError("A_list must be a sequence of square arrays, not one array")
    A_list = [_square_batch(A, "A_list[]") for A in A_list]
    if not A_list or any(A.ndim != 2 for A in A_list):
        raise ValueError("A_list must be a non-empty sequence of (d, d) arrays")
    hidden = positive_int(hidden, "hidden")
    steps = positive_int(steps, "steps")
    rng = check_generator(rng)
    lr_scale = real(lr_scale, "lr_scale", lo=0.0, lo_open=True, hi=2.0, hi_open=True)
    log = {positive_int(t, "log_steps") for t in log_steps} | {steps}
    if max(log) > steps:
        raise ValueError(f"log_steps must be <= steps={steps}, got {max(log)}")
    ds = np.array([A.shape[0] for A in A_list])
    n, D = len(A_list), int(ds.max())
    Sig, M = np.zeros((n, D, D)), np.zeros((n, D, D))
    v, a, s = np.zeros((n, D)), np.zeros((n, D)), np.zeros(n)
    for r, A in enumerate(A_list):
        d = A.shape[0]
        W1 = rng.uniform(-1 / np.sqrt(d), 1 / np.sqrt(d), (hidden, d))
        w2 = rng.uniform(-1 / np.sqrt(hidden), 1 / np.sqrt(hidden), hidden)
        Sig[r, :d, :d], a[r, :d] = A @ A.T, A[:, -1]
        M[r, :d, :d], v[r, :d], s[r] = W1.T @ W1, W1.T @ w2, w2 @ w2
    # padded coordinates have zero Sigma, a, M and v, so their gradient stays zero
    lr = lr_scale / ((s + np.linalg.eigvalsh(M)[:, -1]) * np.linalg.eigvalsh(Sig)[:, -1])
    out = {}
    for t in range(1, steps + 1):
        g = np.einsum("rij,rj->ri", Sig, v) - a
        Mg = np.einsum("rij,rj->ri", M, g)
        vg, gMg = np.sum(v * g, axis=1), np.sum(g * Mg, axis=1)
        v, M, s = (
            v - lr[:, None] * (Mg + s[:, None] * g) + (lr**2 * vg)[:, None] * g,
            M
            - lr[:, None, None] * (v[:, :, None] * g[:, None, :] + g[:, :, None] * v[:, None, :])
            + (lr**2 * s)[:, None, None] * g[:, :, None] * g[:, None, :],
            s - 2 * lr * vg + lr**2 * gMg,
        )
        if t in log:
            out[t] = [v[r, :d].copy() for r, d in enumerate(ds)]
    return out


# --------------------------------------------------------------------------- training
def _softmax(Z):
    Z = Z - Z.max(axis=0, keepdims=True)
    E = np.exp(Z)
    return E / E.sum(axis=0, keepdims=True)


def train_linear(X, Y, loss: str, steps: int, lr: float, W0=None, log_steps=()):
    r"""Full-batch gradient descent for :math:`W` (``(K, d)``) on inputs ``X`` (``(d, n)``).

    ``loss="mse"``: :math:`\tfrac12\|WX-Y\|_F^2`, gradient :math:`(WX-Y)X^\top`.
    ``loss="ce"``: softmax cross-entropy summed over the columns, gradient :math:`(S-Y)X^\top`
    with :math:`S` the column-wise softmax of :math:`WX`. ``Y`` is ``(K, n)`` (one-hot columns).
    Returns ``(W, snapshots)`` with ``snapshots[t]`` the weights after ``t`` steps for each
    ``t`` in ``log_steps``. Book: prf:`prop-12-gd` in book/12-adversarial-fragility/training.md.
    """
    X = real_array(X, "X", ndim=2)
    Y = real_array(Y, "Y", ndim=2)
    if Y.shape[1] != X.shape[1]:
        raise ValueError(f"Y must have shape (K, {X.shape[1]}), got {Y.shape}")
    if loss not in ("mse", "ce"):
        raise ValueError(f"loss must be 'mse' or 'ce', got {loss!r}")
    steps = positive_int(steps, "steps")
    lr = positive(lr, "lr")
    K, d = Y.shape[0], X.shape[0]
    W = np.zeros((K, d)) if W0 is None else real_array(W0, "W0", shape=(K, d)).copy()
    log = set()
    for t in log_steps:
        t = positive_int(t, "log_steps")
        if t > steps:
            raise ValueError(f"log_steps must be <= steps={steps}, got {t}")
        log.add(t)
    snaps = {}
    for t in range(1, steps + 1):
        Z = W @ X
        resid = Z - Y if loss == "mse" else _softmax(Z) - Y
        W -= lr * (resid @ X.T)
        if t in log:
            snaps[t] = W.copy()
    return W, snaps


def gd_mse_spectral(X, Y, lr: float, t: int) -> np.ndarray:
    r"""Closed form of ``t`` GD steps on the squared loss from :math:`W_0=0`.

    :math:`W_t=YX^+\,\big[I-(I-\eta XX^\top)^t\big]`, i.e. each singular direction
    :math:`(s_k,u_k,v_k)` of :math:`X` is fitted by the factor :math:`1-(1-\eta s_k^2)^t`.
    Book: prf:`prop-12-gd` in book/12-adversarial-fragility/training.md.
    """
    X = real_array(X, "X", ndim=2)
    Y = real_array(Y, "Y", ndim=2)
    if Y.shape[1] != X.shape[1]:
        raise ValueError(f"Y must have shape (K, {X.shape[1]}), got {Y.shape}")
    lr = positive(lr, "lr")
    t = positive_int(t, "t")
    U, s, Vt = np.linalg.svd(X, full_matrices=False)
    a = lr * s**2
    if np.any(a >= 2):
        raise ValueError(f"lr must be < 2 / s_max^2 = {2 / s[0] ** 2:.4g} (GD diverges), got {lr}")
    small = a < 1
    filt = np.empty_like(a)
    filt[small] = -np.expm1(t * np.log1p(-a[small]))  # 1 - (1 - a)^t without cancellation
    filt[~small] = 1 - (1 - a[~small]) ** t
    return Y @ (Vt.T * (filt / s)) @ U.T


# --------------------------------------------------------------------------- compression
def projected_pairwise_robustness(P, X) -> np.ndarray:
    r"""Exact pairwise robustness of the nearest-*projected*-prototype classifier.

    The classifier uses only the ``k`` features :math:`Px` (``P``: ``(k, d)``, orthonormal
    rows). At :math:`x_i`, :math:`\rho(x_i\to j)=\|P(x_i-x_j)\|/2` (``inf`` on the diagonal).
    Book: prf:`prop-12-compression` in book/12-adversarial-fragility/compression.md.
    """
    P = real_array(P, "P", ndim=2)
    X = _prototypes(X)
    if P.shape[1] != X.shape[0]:
        raise ValueError(f"P must have shape (k, {X.shape[0]}), got {P.shape}")
    if not np.allclose(P @ P.T, np.eye(P.shape[0]), atol=1e-8):
        raise ValueError("P must have orthonormal rows")
    _, pairwise = optimal_robustness(P @ X)
    return pairwise


# --------------------------------------------------------------------------- networks (torch)
def make_mlp(d: int, hidden: int, K: int):
    """A ReLU network ``d -> hidden -> K`` in float64 (build it inside ``torch_seeded``).

    Book: the ReLU network of book/12-adversarial-fragility/training.md.
    """
    import torch

    d, hidden, K = positive_int(d, "d"), positive_int(hidden, "hidden"), positive_int(K, "K")
    return torch.nn.Sequential(
        torch.nn.Linear(d, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, K)
    ).double()


def train_mlp(model, inputs, labels, steps: int, lr: float):
    """Full-batch Adam on the squared loss to one-hot targets; returns the final loss.

    Book: the ReLU network of book/12-adversarial-fragility/training.md.
    """
    import torch

    steps = positive_int(steps, "steps")
    lr = positive(lr, "lr")
    x = torch.as_tensor(real_array(inputs, "inputs", ndim=2))
    y_idx = np.asarray(labels)
    if y_idx.shape != (x.shape[0],):
        raise ValueError(f"labels must have shape ({x.shape[0]},), got {y_idx.shape}")
    K = model[-1].out_features
    if not np.issubdtype(y_idx.dtype, np.integer) or y_idx.min() < 0 or y_idx.max() >= K:
        raise ValueError(f"labels must be integers in [0, {K}), got {y_idx.dtype} array")
    y = torch.nn.functional.one_hot(torch.as_tensor(y_idx), K).double()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).sum(dim=1).mean()
        loss.backward()
        opt.step()
    return float(loss.detach())


def mlp_predict(model, inputs) -> np.ndarray:
    r"""Labels :math:`\arg\max_k f_k(x)` of a network for inputs of shape ``(n, d)``.

    Book: book/12-adversarial-fragility/training.md.
    """
    import torch

    x = torch.as_tensor(real_array(inputs, "inputs", ndim=2))
    with torch.no_grad():
        return torch.argmax(model(x), dim=1).numpy()


def mlp_lipschitz_lower_bound(model, inputs, labels) -> np.ndarray:
    r"""Certified lower bound on :math:`\rho(x)` for a one-hidden-layer ReLU network.

    For ``Linear(W1) -> ReLU -> Linear(W2)``, :math:`f_i-f_j` is Lipschitz with constant at most
    :math:`\|W_{2,i}-W_{2,j}\|\,\|W_1\|_2` (ReLU is 1-Lipschitz), so
    :math:`\rho(x)\ge\min_{j\ne y}(f_y-f_j)(x)/(\|W_{2,y}-W_{2,j}\|\,\|W_1\|_2)` for the label ``y``
    (negative when ``x`` is misclassified). Returns one bound per row of ``inputs``. Book:
    book/12-adversarial-fragility/training.md.
    """
    import torch

    x = real_array(inputs, "inputs", ndim=2)
    y = np.asarray(labels)
    if y.shape != (x.shape[0],) or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"labels must be an integer array of shape ({x.shape[0]},)")
    W1 = model[0].weight.detach().numpy()
    W2 = model[-1].weight.detach().numpy()
    with torch.no_grad():
        F = model(torch.as_tensor(x)).numpy()
    lip = np.linalg.norm(W1, 2) * np.linalg.norm(W2[y][:, None, :] - W2[None], axis=2)  # (n, K)
    margin = F[np.arange(len(y)), y][:, None] - F
    with np.errstate(divide="ignore", invalid="ignore"):
        r = margin / lip
    r[np.arange(len(y)), y] = np.inf
    return r.min(axis=1)


def _predict(model, x):
    import torch

    with torch.no_grad():
        return int(torch.argmax(model(torch.as_tensor(x)[None])[0]))


def deepfool(model, x, overshoot: float = 0.02, max_iter: int = 50) -> np.ndarray:
    r"""Multiclass DeepFool: repeat the exact linear step of the linearised network.

    At the current point :math:`x+\delta` the scores are linearised (autograd Jacobian) and
    the step of :func:`linear_robustness` toward the closest linearised boundary is taken,
    until the label changes. The total perturbation is scaled by ``1 + overshoot``. Returns
    ``delta`` (``(d,)``); raises ``RuntimeError`` if no flip after ``max_iter`` steps.
    Book: prf:`thm-12-linear` (the step) in book/12-adversarial-fragility/theory.md.
    """
    import torch

    x = real_array(x, "x", ndim=1)
    overshoot = real(overshoot, "overshoot", lo=0.0)
    max_iter = positive_int(max_iter, "max_iter")
    x0 = torch.as_tensor(x)
    label = _predict(model, x)
    delta = np.zeros_like(x)
    for _ in range(max_iter):
        xt = x0 + torch.as_tensor(delta)
        J = torch.autograd.functional.jacobian(model, xt).numpy()  # (K, d)
        f = model(xt).detach().numpy()
        if int(np.argmax(f)) != label:
            break
        b = f - J @ xt.numpy()
        _, _, step = linear_robustness(J, b, xt.numpy(), overshoot=1e-9)
        # the linearisation is exact on the current ReLU region and equals f at xt, so its
        # argmax (the role of "i" in linear_robustness) is still the unchanged label
        delta = delta + step
        if _predict(model, x + (1 + overshoot) * delta) != label:
            break
    else:
        raise RuntimeError(f"deepfool: no label change after max_iter={max_iter} steps")
    delta = (1 + overshoot) * delta
    if _predict(model, x + delta) == label:
        raise RuntimeError("deepfool: final perturbation does not change the label")
    return delta


def fmn_targeted(model, inputs, labels, steps: int = 100, max_stepsize: float = 0.1):
    r"""Targeted FMN (foolbox ``L2FMNAttack``) from every input towards every other class.

    ``inputs``: ``(n, d)``; ``labels``: ``(n,)`` integers in ``[0, K)``. The attack runs on a
    float32 copy of ``model`` (foolbox's default step is set for images in :math:`[0,1]`, hence
    ``max_stepsize``). Returns ``(targets, deltas, success)`` of shapes ``(n, K-1)``,
    ``(n, K-1, d)`` (float64) and ``(n, K-1)``: row ``i`` lists the classes :math:`j\ne y_i` in
    increasing order. The perturbations are *not* verified here (float32); use
    :func:`verify_flip`, :func:`bisect_norm` or :func:`pairwise_boundary_norm`. Book: the FMN
    attack in book/12-adversarial-fragility/training.md.
    """
    import copy

    import foolbox
    import torch

    x = real_array(inputs, "inputs", ndim=2)
    y = np.asarray(labels)
    if y.shape != (x.shape[0],) or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"labels must be an integer array of shape ({x.shape[0]},)")
    steps = positive_int(steps, "steps")
    max_stepsize = positive(max_stepsize, "max_stepsize")
    n, d = x.shape
    K = model[-1].out_features
    if y.min() < 0 or y.max() >= K:
        raise ValueError(f"labels must lie in [0, {K}), got {y.min()}..{y.max()}")
    src = np.repeat(np.arange(n), K - 1)
    tgt = np.array([j for i in range(n) for j in range(K) if j != y[i]])
    net32 = copy.deepcopy(model).float().eval()
    fmodel = foolbox.PyTorchModel(net32, bounds=(-np.inf, np.inf))
    x32 = torch.as_tensor(x[src], dtype=torch.float32)
    crit = foolbox.criteria.TargetedMisclassification(torch.as_tensor(tgt))
    attack = foolbox.attacks.L2FMNAttack(steps=steps, max_stepsize=max_stepsize)
    _, adv, success = attack(fmodel, x32, crit, epsilons=None)
    deltas = (adv - x32).double().numpy().reshape(n, K - 1, d)
    return tgt.reshape(n, K - 1), deltas, success.numpy().reshape(n, K - 1)


def _pair_args(model, x_i, x_j, i, j):
    x_i = real_array(x_i, "x_i")
    x_j = real_array(x_j, "x_j", shape=x_i.shape)
    if x_i.ndim not in (1, 2):
        raise ValueError(f"x_i must have shape (d,) or (m, d), got {x_i.shape}")
    single = x_i.ndim == 1
    x_i, x_j = np.atleast_2d(x_i), np.atleast_2d(x_j)
    m = x_i.shape[0]
    K = model[-1].out_features
    idx = []
    for name, v in (("i", i), ("j", j)):
        v = np.broadcast_to(np.asarray(v), (m,)) if np.ndim(v) == 0 else np.asarray(v)
        if v.shape != (m,) or not np.issubdtype(v.dtype, np.integer):
            raise ValueError(f"{name} must be an integer or an integer array of shape ({m},)")
        if v.min() < 0 or v.max() >= K:
            raise ValueError(f"{name} must lie in [0, {K}), got {v.min()}..{v.max()}")
        idx.append(v)
    if np.any(idx[0] == idx[1]):
        raise ValueError("i and j must differ (a class against itself has no boundary)")
    return x_i, x_j, idx[0], idx[1], single


def compression_factor(model, x_i, x_j, i, j, n: int = 64):
    r"""Path average of the paper's compression factor :math:`\cos\theta_\gamma` on a segment.

    For :math:`g=f_i-f_j` and the segment :math:`\gamma(t)=x_j+t(x_i-x_j)`, returns
    :math:`\bar c=\frac1n\sum_k\cos\angle(\nabla g(\gamma(t_k)),\,x_i-x_j)` at the midpoints
    :math:`t_k=(k+\tfrac12)/n` (the midpoint rule for :math:`\int_0^1\cos\theta_\gamma\,dt`).
    The paper's Section 5 argument (as reported) predicts that the smallest perturbation that
    moves :math:`x_i` onto the :math:`i/j` boundary has size about
    :math:`\bar c\,\|x_i-x_j\|/2`. For a linear model :math:`\nabla g=w_i-w_j` and
    :math:`\bar c` is the cosine of prf:`thm-12-ratio-law`.

    ``model``: a torch module mapping ``(b, d)`` to ``(b, K)`` scores; ``x_i``, ``x_j``: ``(d,)``
    or ``(m, d)``; ``i``, ``j``: class indices (integers or ``(m,)`` arrays). Returns a float or
    an ``(m,)`` array. Book: the Section 5 test in book/12-adversarial-fragility/training.md.
    """
    import torch

    x_i, x_j, i, j, single = _pair_args(model, x_i, x_j, i, j)
    n = positive_int(n, "n")
    m, d = x_i.shape
    t = (np.arange(n) + 0.5) / n
    diff = x_i - x_j
    pts = x_j[:, None, :] + t[None, :, None] * diff[:, None, :]  # (m, n, d)
    dtype = next(model.parameters()).dtype
    xt = torch.tensor(pts.reshape(m * n, d), dtype=dtype, requires_grad=True)
    F = model(xt)
    rows = torch.arange(m * n)
    ii, jj = torch.as_tensor(np.repeat(i, n)), torch.as_tensor(np.repeat(j, n))
    # each row of F depends on its own input only, so one backward pass gives every grad g
    (grad,) = torch.autograd.grad((F[rows, ii] - F[rows, jj]).sum(), xt)
    G = grad.detach().double().numpy().reshape(m, n, d)
    u = diff / np.linalg.norm(diff, axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        cos = np.einsum("mnd,md->mn", G, u) / np.linalg.norm(G, axis=2)
    c = cos.mean(axis=1)
    return float(c[0]) if single else c


def pairwise_boundary_norm(model, x, delta, i, j, iters: int = 40):
    r"""Verified distance to the :math:`i/j` boundary along ``delta``, by bisection.

    For :math:`g=f_i-f_j` with :math:`g(x)>0`, returns :math:`t\|\delta\|` for a
    :math:`t\in(0,1]` with :math:`g(x+t\delta)\le0` found by bisection (evaluated in the
    model's dtype): an upper bound on the pairwise robustness
    :math:`\rho(x\to j)=\min\{\|e\|:f_j(x+e)\ge f_i(x+e)\}`. ``x``, ``delta``: ``(d,)``
    or ``(m, d)``; ``i``, ``j``: integers or ``(m,)`` arrays. Entries where
    :math:`g(x)\le0` or :math:`g(x+\delta)>0` (no verified crossing) are ``nan``. Book: the
    Section 5 test in book/12-adversarial-fragility/training.md.
    """
    import torch

    x, delta, i, j, single = _pair_args(model, x, delta, i, j)
    iters = positive_int(iters, "iters")
    dtype = next(model.parameters()).dtype
    rows = np.arange(len(x))

    def g(t):
        with torch.no_grad():
            F = model(torch.as_tensor(x + t[:, None] * delta, dtype=dtype)).double().numpy()
        return F[rows, i] - F[rows, j]

    ok = (g(np.zeros(len(x))) > 0) & (g(np.ones(len(x))) <= 0)
    lo, hi = np.zeros(len(x)), np.ones(len(x))
    for _ in range(iters):
        mid = (lo + hi) / 2
        crossed = g(mid) <= 0
        hi, lo = np.where(crossed, mid, hi), np.where(crossed, lo, mid)
    out = np.where(ok, hi * np.linalg.norm(delta, axis=1), np.nan)
    return float(out[0]) if single else out


def fmn_min_norm(model, inputs, labels, steps: int = 100, max_stepsize: float = 0.1, attack=None):
    r"""Smallest verified :math:`\ell_2` perturbation found by targeted FMN, over all targets.

    Runs foolbox's ``L2FMNAttack`` (fast minimum-norm attack; Pintor et al., 2021) towards
    every class :math:`j\ne y` at each input (on a float32 copy of ``model``), keeps the
    smallest successful perturbation per input, and tightens it in the model's own dtype by
    :func:`bisect_norm` along its direction. ``inputs``: ``(n, d)``; ``labels``: ``(n,)``
    (the class each input must keep). Returns ``(norms, deltas)`` of shapes ``(n,)`` and
    ``(n, d)``; every returned norm is a verified upper bound on :math:`\rho(x)` (``inf`` and
    a zero row where no target was reached). ``attack``: the output of :func:`fmn_targeted`
    on the same inputs, to reuse it instead of running the attack again. Book: the FMN attack
    in book/12-adversarial-fragility/training.md.
    """
    x = real_array(inputs, "inputs", ndim=2)
    n, d = x.shape
    if attack is None:
        attack = fmn_targeted(model, x, labels, steps, max_stepsize)
    targets, deltas, success = attack
    if deltas.shape[:2] != success.shape or deltas.shape[0] != n or deltas.shape[2] != d:
        raise ValueError(f"attack must be fmn_targeted's output for inputs of shape {x.shape}")
    size = np.linalg.norm(deltas, axis=2)
    size[~success] = np.inf
    norms, best = np.full(n, np.inf), np.zeros((n, d))
    for i in range(n):
        for k in np.argsort(size[i]):  # smallest first; float32 may miss the flip in float64
            if np.isfinite(size[i, k]) and verify_flip(model, x[i], deltas[i, k]):
                norms[i] = bisect_norm(model, x[i], deltas[i, k])
                best[i] = deltas[i, k] * norms[i] / np.linalg.norm(deltas[i, k])
                break
    return norms, best


def verify_flip(model, x, delta) -> bool:
    """True when ``model`` labels ``x + delta`` differently from ``x``.

    Book: "we never report an unverified norm", book/12-adversarial-fragility/training.md.
    """
    x = real_array(x, "x", ndim=1)
    delta = real_array(delta, "delta", shape=x.shape)
    return _predict(model, x) != _predict(model, x + delta)


def bisect_norm(model, x, delta, iters: int = 40) -> float:
    r"""Smallest :math:`t\in(0,1]` (by bisection) with a flip at ``x + t * delta``, times
    :math:`\|\delta\|`: a verified upper bound on the robustness :math:`\rho(x)`.

    Book: book/12-adversarial-fragility/training.md."""
    x = real_array(x, "x", ndim=1)
    delta = real_array(delta, "delta", shape=x.shape)
    iters = positive_int(iters, "iters")
    if not verify_flip(model, x, delta):
        raise ValueError("delta must change the label of x (verify_flip is False)")
    lo, hi = 0.0, 1.0
    for _ in range(iters):
        mid = (lo + hi) / 2
        if verify_flip(model, x, mid * delta):
            hi = mid
        else:
            lo = mid
    return float(hi * np.linalg.norm(delta))
