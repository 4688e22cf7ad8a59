r"""Gradient descent on leaky-ReLU two-layer networks: directional convergence and benign
overfitting on mixture data (chapter 10).

Paper: I. Hashimoto, *Directional Convergence, Benign Overfitting of Gradient Descent in leaky
ReLU two-layer Neural Networks*, ICLR 2026 (arXiv:2505.16204, OpenReview ``VOK6LNaZ3N``).

Chapter folder: ``book/10-benign-overfitting-leaky-relu/``.

The model (confirmed by the paper's reviewers): data :math:`x=y\mu+z` with :math:`y=\pm1`,
a network :math:`f(x;W)=\sum_{j=1}^m a_j\phi(\langle w_j,x\rangle)` with
:math:`\phi(t)=\max(t,\gamma t)`, a fixed second layer :math:`a_j=\pm1/\sqrt m` (half of each
sign) and gradient descent on the exponential loss
:math:`L(W)=\frac1n\sum_i e^{-y_if(x_i;W)}`. The central equation of the chapter (our
derivation, ``prf:proposition`` ``prop-10-limit-qp``): once every neuron is activated, the limit
direction of GD is a linear classifier with normal :math:`\sum_i\lambda_iy_ix_i`, where
:math:`\lambda\ge0` solves the hard-margin SVM dual with the cross-class Gram entries discounted
by :math:`\rho=2\gamma/(1+\gamma^2)`,

.. math::
    \min_{\lambda\ge0}\ \tfrac12\lambda^\top Q\lambda-\mathbf 1^\top\lambda,\qquad
    Q_{ik}=y_iy_k\langle x_i,x_k\rangle\,(1\ \text{if}\ y_i=y_k\ \text{else}\ \rho).

Conventions: inputs ``X`` have shape ``(n, p)`` (row ``i`` is :math:`x_i`), labels ``y`` have
shape ``(n,)`` with entries :math:`\pm1`, first-layer weights ``W`` have shape ``(m, p)`` (row
``j`` is :math:`w_j`).
"""

from __future__ import annotations

import numpy as np
from scipy import linalg, optimize, stats

from lib.validate import check_generator, nonnegative_int, positive, positive_int, real, real_array

__all__ = [
    "sample_mixture",
    "second_layer",
    "leaky",
    "leaky_grad",
    "forward",
    "loss_and_grad",
    "train_gd",
    "activation_margins",
    "normalized_margin",
    "direction_cosine",
    "discount",
    "limit_direction",
    "limit_weights",
    "linear_svm",
    "min_norm_interpolator",
    "snr_class_mean",
    "snr_min_norm",
    "mean_vector",
    "snr",
    "default_step",
    "gaussian_error",
    "log_error_ratio",
    "network_error",
    "network_error_is",
    "network_log_error_is",
    "decision_normal",
]


# --------------------------------------------------------------------------- checks
def _gamma(gamma) -> float:
    return real(gamma, "gamma", lo=0.0, hi=1.0, lo_open=True, hi_open=True)


def _width(m) -> int:
    m = positive_int(m, "m")
    if m % 2:
        raise ValueError(f"m must be even (half the neurons have a_j > 0), got {m}")
    return m


def _data(X, y):
    X = real_array(X, "X", ndim=2)
    y = real_array(y, "y", shape=(X.shape[0],))
    if not np.all(np.abs(y) == 1):
        raise ValueError("y must have entries +1 or -1")
    return X, y


def _weights(W, p: int):
    W = real_array(W, "W", ndim=2)
    if W.shape[1] != p:
        raise ValueError(f"W must have shape (m, {p}), got {W.shape}")
    return W


# --------------------------------------------------------------------------- data
def sample_mixture(
    n: int,
    p: int,
    mu_norm: float,
    rng: np.random.Generator,
    *,
    eta: float = 0.0,
    noise: str = "gauss",
    df: float | None = None,
    size: int | None = None,
):
    r"""Draw ``n`` points of the mixture :math:`x=y\mu+z`, :math:`\mu=\|\mu\|e_1`, or ``size``
    independent training sets of ``n`` points each.

    Parameters
    ----------
    n, p : int
        Sample size :math:`n` and dimension :math:`p`.
    mu_norm : float
        :math:`\|\mu\|\ge0`.
    rng : numpy.random.Generator
    eta : float in [0, 1/2)
        Label-flip probability of the observed label (0 in the paper; our extension).
    noise : {"gauss", "student_t"}
        :math:`z` has i.i.d. :math:`N(0,1)` entries, or Student-t entries with ``df > 2``
        degrees of freedom rescaled to unit variance (heavy tails).
    size : int, optional
        Number :math:`B` of independent training sets, drawn at once (vectorised); the outputs
        then carry a leading axis of length B.

    Returns
    -------
    X : ndarray ([B,] n, p); y : ndarray ([B,] n) clean labels; y_obs : ndarray ([B,] n)
    observed labels.
    """
    n, p = positive_int(n, "n"), positive_int(p, "p")
    mu_norm = real(mu_norm, "mu_norm", lo=0.0)
    eta = real(eta, "eta", lo=0.0, hi=0.5, hi_open=True)
    rng = check_generator(rng)
    lead = () if size is None else (positive_int(size, "size"),)
    if noise == "gauss":
        Z = rng.standard_normal((*lead, n, p))
    elif noise == "student_t":
        if df is None:
            raise ValueError("df must be given for noise='student_t'")
        df = real(df, "df", lo=2.0, lo_open=True)
        Z = rng.standard_t(df, size=(*lead, n, p)) / np.sqrt(df / (df - 2))
    else:
        raise ValueError(f"noise must be 'gauss' or 'student_t', got {noise!r}")
    y = rng.choice(np.array([-1.0, 1.0]), size=(*lead, n))
    X = Z
    X[..., 0] += y * mu_norm
    flip = rng.random((*lead, n)) < eta
    return X, y, np.where(flip, -y, y)


def second_layer(m: int) -> np.ndarray:
    r"""The fixed second layer :math:`a_j=+1/\sqrt m` for :math:`j<m/2`, :math:`-1/\sqrt m` after.

    Returns ndarray (m,).
    """
    m = _width(m)
    return np.repeat([1.0, -1.0], m // 2) / np.sqrt(m)


# --------------------------------------------------------------------------- network
def leaky(t, gamma: float):
    r""":math:`\phi(t)=\max(t,\gamma t)`, elementwise."""
    return np.maximum(t, _gamma(gamma) * np.asarray(t, dtype=float))


def leaky_grad(t, gamma: float):
    r""":math:`\phi'(t)`: 1 for :math:`t>0`, :math:`\gamma` for :math:`t\le0` (the subgradient
    :math:`\gamma` at 0)."""
    return _leaky_grad(np.asarray(t), _gamma(gamma))


def _leaky_grad(t, gamma):
    """:func:`leaky_grad` without validation (for the training loop)."""
    return np.where(t > 0, 1.0, gamma)


def forward(W, X, gamma: float) -> np.ndarray:
    r""":math:`f(x_i;W)=\sum_ja_j\phi(\langle w_j,x_i\rangle)` for every row of ``X``.

    Returns ndarray (n,)."""
    X = real_array(X, "X", ndim=2)
    W = _weights(W, X.shape[1])
    return leaky(X @ W.T, gamma) @ second_layer(W.shape[0])


def loss_and_grad(W, X, y, gamma: float):
    r"""Exponential loss :math:`L(W)=\frac1n\sum_ie^{-y_if(x_i;W)}` and its gradient, shape (m, p).

    :math:`\nabla_{w_j}L=-\frac1n\sum_i e^{-y_if_i}y_ia_j\phi'(\langle w_j,x_i\rangle)x_i`.
    Book: :prf:ref:`prop-10-activation` in book/10-benign-overfitting-leaky-relu/convergence.md.
    """
    X, y = _data(X, y)
    W = _weights(W, X.shape[1])
    loss, G = _loss_and_grad(W, X, y, _gamma(gamma), second_layer(W.shape[0]))
    return loss, G


def _loss_and_grad(W, X, y, gamma, a):
    Z = X @ W.T  # (n, m) pre-activations
    F = np.maximum(Z, gamma * Z) @ a
    ell = np.exp(-y * F)
    G = -(ell * y)[:, None] * _leaky_grad(Z, gamma) * a[None, :]  # dL/dZ times n
    return ell.mean(), G.T @ X / X.shape[0]


def activation_margins(W, X, y) -> np.ndarray:
    r""":math:`a_jy_i\langle w_j,x_i\rangle\sqrt m`, shape (n, m). Every neuron is *activated*
    when all entries are positive. Book: :prf:ref:`prop-10-activation`."""
    X, y = _data(X, y)
    W = _weights(W, X.shape[1])
    a = second_layer(W.shape[0])
    return (X @ W.T) * y[:, None] * a[None, :] * np.sqrt(W.shape[0])


def normalized_margin(W, X, y, gamma: float) -> float:
    r""":math:`\min_iy_if(x_i;W)/\|W\|_F` (f is 1-homogeneous in W)."""
    X, y = _data(X, y)
    return float(np.min(y * forward(W, X, gamma)) / np.linalg.norm(W))


def direction_cosine(W1, W2) -> float:
    r""":math:`\langle W_1,W_2\rangle/(\|W_1\|\|W_2\|)` (Frobenius), for arrays of equal shape."""
    W1, W2 = real_array(W1, "W1"), real_array(W2, "W2")
    if W1.shape != W2.shape:
        raise ValueError(f"W1 and W2 must have the same shape, got {W1.shape} and {W2.shape}")
    return float(np.sum(W1 * W2) / (np.linalg.norm(W1) * np.linalg.norm(W2)))


def _batch(X, y, W0):
    """Validate (X, y[, W0]) with or without a leading instance axis; return 3-d/2-d arrays."""
    X = real_array(X, "X")
    if X.ndim not in (2, 3):
        raise ValueError(f"X must have shape (n, p) or (B, n, p), got {X.shape}")
    batched = X.ndim == 3
    Xb = X if batched else X[None]
    y = real_array(y, "y", shape=Xb.shape[:2] if batched else (X.shape[0],))
    yb = y if batched else y[None]
    if not np.all(np.abs(yb) == 1):
        raise ValueError("y must have entries +1 or -1")
    if W0 is not None:
        W0 = real_array(W0, "W0", ndim=3 if batched else 2)
        W0 = W0 if batched else W0[None]
        if W0.shape[0] != Xb.shape[0] or W0.shape[2] != Xb.shape[2]:
            raise ValueError(f"W0 must have shape (m, p) per instance, got {W0.shape}")
    return Xb, yb, W0, batched


def _gd_step(Z, K, y, a, gamma, alpha, normalized):
    r"""One GD step in kernel form, for a batch of instances.

    With :math:`W_t=W_0+C_tX` the pre-activations are :math:`Z_t=XW_t^\top=Z_0+KC_t^\top`,
    :math:`K=XX^\top`, and eq. ``eq-10-gd`` is :math:`C_{t+1}=C_t+\alpha D_t^\top` with
    :math:`(D_t)_{ij}=\frac1n\ell_iy_ia_j\phi'(Z_{ij})` (minus the gradient in :math:`Z`), so
    :math:`Z_{t+1}=Z_t+\alpha KD_t`. ``normalized`` divides the gradient by :math:`L(W_t)`
    (so :math:`\ell_i/n` becomes the softmax weight :math:`\ell_i/\sum_k\ell_k`).
    Shapes: Z (B, n, m), K (B, n, n), y (B, n), a (m,). Returns (Z_next, D, log L), log L of
    shape (B,).
    """
    margins = y * (np.maximum(Z, gamma * Z) @ a)  # y_i f(x_i; W_t), shape (B, n)
    top = np.max(-margins, axis=1, keepdims=True)
    ell = np.exp(-margins - top)  # e^{-y_i f_i}, scaled by e^{-top} to avoid overflow
    total = ell.sum(axis=1, keepdims=True)
    log_loss = (np.log(total) + top)[:, 0] - np.log(y.shape[1])  # log L(W_t)
    weight = ell / total if normalized else ell * np.exp(top) / y.shape[1]
    D = (weight * y)[:, :, None] * _leaky_grad(Z, gamma) * a
    return Z + alpha * (K @ D), D, log_loss


def train_gd(
    X,
    y,
    m: int,
    gamma: float,
    alpha: float,
    steps: int,
    init_scale: float | None,
    rng: np.random.Generator | None,
    checkpoints=(),
    *,
    W0=None,
    normalized: bool = False,
) -> dict:
    r"""Full-batch gradient descent :math:`W_{t+1}=W_t-\alpha\nabla L(W_t)` on the first layer
    (eq. ``eq-10-gd``), vectorised over a batch of independent instances.

    :math:`W_0` has i.i.d. :math:`N(0,\sigma_0^2)` entries, :math:`\sigma_0=` ``init_scale``,
    unless ``W0`` is given (then ``init_scale`` and ``rng`` are ignored and may be None).
    The iterates are computed exactly in kernel form, :math:`W_t=W_0+C_tX` (see
    :func:`_gd_step`), so a step costs :math:`O(n^2m)` whatever :math:`p`.
    ``normalized=True`` runs normalised GD, :math:`W_{t+1}=W_t-\alpha\nabla L(W_t)/L(W_t)`
    (gradient descent on :math:`\log L`), which reaches the same limit direction as GD once the
    activation pattern is frozen, but at a rate close to :math:`1/t` instead of :math:`1/\log t`.

    Parameters
    ----------
    X : ndarray (n, p) or (B, n, p); y : ndarray (n,) or (B, n), labels :math:`\pm1`.
    m : int, even; gamma : float in (0, 1).
    alpha : float > 0, the step :math:`\alpha`, or ndarray (B,), one step per instance.
    steps : int, the number :math:`T` of steps; checkpoints : iterable of ints in [0, T].
    W0 : ndarray (m, p) or (B, m, p), optional starting point.

    Returns
    -------
    dict with ``W`` (final, ([B,] m, p)), ``W_ckpt`` (([B,] k, m, p) at the sorted
    checkpoints), ``ckpt`` (the steps, (k,)), ``loss`` and ``log_loss`` (([B,] k), :math:`L`
    and :math:`\log L` at the checkpoints), ``first_all_active`` (first step at which every
    neuron is activated, -1 if never; int or (B,)), ``stayed_active`` (True if every neuron
    stayed activated at every step after that one; bool or (B,)). Without a batch axis in
    ``X`` the outputs have none either.
    Book: :prf:ref:`thm-10-directional` in book/10-benign-overfitting-leaky-relu/convergence.md.
    """
    Xb, yb, W0, batched = _batch(X, y, W0)
    m, gamma = _width(m), _gamma(gamma)
    steps = nonnegative_int(steps, "steps")
    if not isinstance(normalized, (bool, np.bool_)):
        raise TypeError(f"normalized must be a bool, got {type(normalized).__name__}")
    ckpt = sorted({nonnegative_int(int(c), "checkpoints") for c in checkpoints})
    if ckpt and ckpt[-1] > steps:
        raise ValueError(f"checkpoints must lie in [0, steps={steps}], got {ckpt[-1]}")
    B, n, p = Xb.shape
    if np.ndim(alpha) == 0:
        alpha = positive(alpha, "alpha")
    else:
        alpha = real_array(alpha, "alpha", shape=(B,))
        if not (batched and np.all(alpha > 0)):
            raise ValueError("alpha must be > 0 (one step per instance needs a batch axis in X)")
        alpha = alpha[:, None, None]
    if W0 is None:
        init_scale = real(init_scale, "init_scale", lo=0.0)
        rng = check_generator(rng)
        W0 = init_scale * rng.standard_normal((B, m, p))
    elif W0.shape[1] != m:
        raise ValueError(f"W0 must have m={m} rows per instance, got {W0.shape[1]}")
    a = second_layer(m)
    K = Xb @ Xb.transpose(0, 2, 1)  # (B, n, n)
    Z = Xb @ W0.transpose(0, 2, 1)  # (B, n, m) pre-activations
    sign = yb[:, :, None] * a  # neuron j activated at x_i when sign * Z > 0
    Ct = np.zeros((B, n, m))  # C_t transposed: W_t = W_0 + C_t X
    C_ckpt, logl_ckpt = [], []
    first = np.full(B, -1)
    stayed = np.ones(B, dtype=bool)
    for t in range(steps + 1):
        active = np.all(sign * Z > 0, axis=(1, 2))
        stayed &= active | (first < 0)
        first = np.where((first < 0) & active, t, first)
        if t == steps and t not in ckpt:
            break
        Z_next, D, log_loss = _gd_step(Z, K, yb, a, gamma, alpha, normalized)
        if t in ckpt:
            C_ckpt.append(Ct.copy())
            logl_ckpt.append(log_loss)
        if t < steps:
            Z, Ct = Z_next, Ct + alpha * D  # the GD step, W_{t+1} = W_t + alpha D^T X
    W = W0 + Ct.transpose(0, 2, 1) @ Xb
    k = len(ckpt)
    if k:
        Cs = np.stack(C_ckpt, axis=1)  # (B, k, n, m)
        W_ckpt = W0[:, None] + Cs.transpose(0, 1, 3, 2) @ Xb[:, None]
        log_loss = np.stack(logl_ckpt, axis=1)
    else:
        W_ckpt, log_loss = np.zeros((B, 0, m, p)), np.zeros((B, 0))
    out = dict(
        W=W,
        W_ckpt=W_ckpt,
        ckpt=np.array(ckpt, dtype=int),
        loss=np.exp(log_loss),
        log_loss=log_loss,
        first_all_active=first,
        stayed_active=stayed & (first >= 0),
    )
    if not batched:
        out = {key: (v if key == "ckpt" else v[0]) for key, v in out.items()}
        out["first_all_active"] = int(out["first_all_active"])
        out["stayed_active"] = bool(out["stayed_active"])
    return out


# --------------------------------------------------------------------------- limit directions
def _independent_rows(X) -> None:
    if X.shape[0] > X.shape[1]:
        raise ValueError(f"X must have n <= p (linearly independent rows), got shape {X.shape}")


def _nnls_qp(Q) -> np.ndarray:
    r"""Solve :math:`\min_{\lambda\ge0}\frac12\lambda^\top Q\lambda-\mathbf 1^\top\lambda` for
    positive definite Q as the NNLS problem
    :math:`\min_{\lambda\ge0}\|C\lambda-C^{-\top}\mathbf 1\|` with :math:`Q=C^\top C`."""
    try:
        C = linalg.cholesky(Q, lower=False)
    except linalg.LinAlgError:
        raise ValueError("X must have linearly independent rows (n <= p)") from None
    b = linalg.solve_triangular(C, np.ones(len(Q)), trans="T")
    lam, _ = optimize.nnls(C, b, maxiter=50 * len(Q))
    return lam


def discount(gamma: float) -> float:
    r"""The cross-class discount :math:`\rho=2\gamma/(1+\gamma^2)` of eq. ``eq-10-qp``.

    Book: :prf:ref:`prop-10-limit-qp` in book/10-benign-overfitting-leaky-relu/convergence.md."""
    gamma = _gamma(gamma)
    return 2 * gamma / (1 + gamma**2)


def limit_direction(X, y, gamma: float, *, rho: float | None = None):
    r"""The limit direction of GD once every neuron is activated (our derivation).

    Solves the dual of eq. ``eq-10-qp``: :math:`Q_{ik}=y_iy_k\langle x_i,x_k\rangle` for
    :math:`y_i=y_k` and :math:`\rho\,y_iy_k\langle x_i,x_k\rangle` otherwise, with
    :math:`\rho=` :func:`discount` :math:`(\gamma)` unless ``rho`` in (0, 1] is given (to test
    other discounts against GD). Requires linearly independent rows of X.

    Returns
    -------
    lam : ndarray (n,), the multipliers :math:`\lambda\ge0` (support vectors have
    :math:`\lambda_i>0`); normal : ndarray (p,), :math:`\sum_i\lambda_iy_ix_i`, the normal of the
    decision boundary :math:`\{x:\langle u-v,x\rangle=0\}`.
    Book: :prf:ref:`prop-10-limit-qp` in book/10-benign-overfitting-leaky-relu/convergence.md.
    """
    X, y = _data(X, y)
    _independent_rows(X)
    gamma = _gamma(gamma)
    rho = discount(gamma) if rho is None else real(rho, "rho", lo=0.0, hi=1.0, lo_open=True)
    return _discounted_svm(X, y, rho)


def _discounted_svm(X, y, rho: float):
    """Multipliers and normal of eq. ``eq-10-qp`` with discount ``rho`` (validated inputs)."""
    same = np.equal.outer(y, y)
    Q = np.outer(y, y) * (X @ X.T) * np.where(same, 1.0, rho)
    lam = _nnls_qp(Q)
    return lam, (lam * y) @ X


def limit_weights(X, y, gamma: float, m: int) -> np.ndarray:
    r"""The max-margin weights of the lifted linear problem (eq. ``eq-10-lifted``), shape (m, p).

    :math:`W^\star=\arg\min\{\|W\|_F:\langle W,\Psi_i\rangle\ge1\}` with
    :math:`(\Psi_i)_j=y_ia_js_{ij}x_i`, :math:`s_{ij}=1` if :math:`a_jy_i>0` else :math:`\gamma`.
    By the KKT conditions :math:`W^\star=\sum_i\lambda_i\Psi_i` with
    :math:`\lambda=\frac2{1+\gamma^2}\lambda^{Q}` (:math:`\lambda^Q` from :func:`limit_direction`):
    every neuron with :math:`a_j>0` is the same vector, and so is every neuron with :math:`a_j<0`.
    Book: :prf:ref:`prop-10-limit-qp`."""
    X, y = _data(X, y)
    m, gamma = _width(m), _gamma(gamma)
    lam_q, _ = limit_direction(X, y, gamma)
    lam = 2 * lam_q / (1 + gamma**2)  # <Psi_i, Psi_k> = (1 + gamma^2)/2 * Q_ik
    a = second_layer(m)
    S = np.where(np.outer(y, a) > 0, 1.0, gamma)  # s_ij, shape (n, m)
    # W* = sum_i lam_i Psi_i, row j: sum_i lam_i y_i a_j s_ij x_i
    return a[:, None] * ((lam * y)[:, None] * S).T @ X


def linear_svm(X, y) -> np.ndarray:
    r"""Hard-margin linear SVM without bias, :math:`\min\|w\|^2` s.t.
    :math:`y_i\langle w,x_i\rangle\ge1`; returns w, shape (p,). It is eq. ``eq-10-qp`` with
    :math:`\rho=1` (the :math:`\gamma\to1` end of :func:`limit_direction`), solved by the same
    code."""
    X, y = _data(X, y)
    _independent_rows(X)
    return _discounted_svm(X, y, 1.0)[1]


def min_norm_interpolator(X, y) -> np.ndarray:
    r""":math:`w=X^\top(XX^\top)^{-1}y`, the least-norm solution of :math:`Xw=y`; shape (p,).
    Book: :prf:ref:`prop-10-snr` in book/10-benign-overfitting-leaky-relu/phase_transition.md."""
    X, y = _data(X, y)
    if X.shape[0] > X.shape[1]:
        raise ValueError(f"X must have n <= p to interpolate, got shape {X.shape}")
    return X.T @ linalg.solve(X @ X.T, y, assume_a="pos")


def _mu_norms(mu_norm):
    mu = real_array(mu_norm, "mu_norm")
    if np.any(mu < 0):
        raise ValueError("mu_norm must be >= 0")
    return mu


def _dims(p, lo: int) -> np.ndarray:
    """Dimensions ``p`` (an int or an array of ints, broadcast with ``mu_norm``), each > lo."""
    if isinstance(p, bool):
        raise TypeError("p must be an integer or an array of integers, got bool")
    arr = real_array(p, "p")
    if np.any(arr != np.round(arr)) or np.any(arr <= lo):
        raise ValueError(f"p must be integers > {lo}, got {p}")
    return arr


def snr_class_mean(n: int, p, mu_norm) -> np.ndarray:
    r"""Leading-order signal-to-noise ratio of the class-mean rule :math:`w=\sum_iy_ix_i` on clean
    isotropic Gaussian mixtures, :math:`\mathrm{SNR}^2=n\|\mu\|^4/(p+n\|\mu\|^2)`
    (eq. ``eq-10-snr-cm``). Vectorised over ``p`` and ``mu_norm`` (broadcast).
    Book: :prf:ref:`prop-10-snr` in book/10-benign-overfitting-leaky-relu/phase_transition.md."""
    n = positive_int(n, "n")
    p, mu = _dims(p, 0), _mu_norms(mu_norm)
    return np.sqrt(n * mu**4 / (p + n * mu**2))


def snr_min_norm(n: int, p, mu_norm) -> np.ndarray:
    r"""Our signal-to-noise ratio of the min-norm interpolator on clean isotropic Gaussian
    mixtures (eq. ``eq-10-snr-mn``):

    .. math::
        \mathrm{SNR}^2=\frac{nq\|\mu\|^4}{(q+n)(q+n+n\|\mu\|^2)},\qquad q=p-n-2,

    from :math:`w=a\hat\mu+w_\perp`, where :math:`w_\perp` must also fit the noise along
    :math:`\hat\mu` (so an interpolator is never the class-mean rule in the strong regime), and
    :math:`\mathbb E(Z_\perp Z_\perp^\top)^{-1}=I/q` (inverse Wishart). Requires
    :math:`p>n+2`. Vectorised over ``p`` and ``mu_norm`` (broadcast).
    Book: :prf:ref:`prop-10-snr`."""
    n = positive_int(n, "n")
    p, mu = _dims(p, n + 2), _mu_norms(mu_norm)
    q = p - n - 2
    return np.sqrt(n * q * mu**4 / ((q + n) * (q + n + n * mu**2)))


def mean_vector(p: int, mu_norm: float) -> np.ndarray:
    r"""The class mean :math:`\mu=\|\mu\|e_1` of :func:`sample_mixture`, shape (p,)."""
    mu = np.zeros(positive_int(p, "p"))
    mu[0] = real(mu_norm, "mu_norm", lo=0.0)
    return mu


def default_step(X, gamma: float) -> float:
    r"""The step :math:`\alpha=1/\max_i\|\Psi_i\|^2=2/((1+\gamma^2)\max_i\|x_i\|^2)` used in the
    chapter (:math:`\|\Psi_i\|^2=\frac{1+\gamma^2}2\|x_i\|^2` for the lifted features of eq.
    ``eq-10-lifted``). ``X`` has shape (n, p).
    Book: :prf:ref:`thm-10-directional` in book/10-benign-overfitting-leaky-relu/convergence.md."""
    X = real_array(X, "X", ndim=2)
    return float(2 / ((1 + _gamma(gamma) ** 2) * np.max(np.sum(X**2, axis=1))))


def decision_normal(W) -> np.ndarray:
    r""":math:`u-v=\sum_{a_j>0}w_j-\sum_{a_j<0}w_j`, shape (p,), for ``W`` of shape (m, p).
    The network classifies by :math:`\mathrm{sign}\langle u-v,x\rangle` when the neurons of each
    sign are equal (as at the limit); otherwise only approximately.
    Book: :prf:ref:`prop-10-limit-qp`."""
    W = real_array(W, "W", ndim=2)
    a = second_layer(W.shape[0])
    return W[a > 0].sum(0) - W[a < 0].sum(0)


def snr(w, mu) -> float:
    r""":math:`\mathrm{SNR}(w)=\langle w,\mu\rangle/\|w\|` for ``w`` and ``mu`` of shape (p,).
    Book: eq. ``eq-10-gauss-error`` in book/10-benign-overfitting-leaky-relu/phase_transition.md."""
    w = real_array(w, "w", ndim=1)
    mu = real_array(mu, "mu", shape=w.shape)
    norm = np.linalg.norm(w)
    if norm == 0:
        raise ValueError("w must be non-zero")
    return float(w @ mu / norm)


def gaussian_error(w, mu) -> float:
    r"""Exact clean test error :math:`\Pr(y\langle w,x\rangle<0)=\Phi(-\mathrm{SNR}(w))`
    of the linear classifier ``w`` when :math:`z\sim N(0,I_p)`. Book: eq. ``eq-10-gauss-error``."""
    return float(stats.norm.cdf(-snr(w, mu)))


def log_error_ratio(w, mu) -> float:
    r""":math:`\log\big(\Phi(-\mathrm{SNR}(w))/\Phi(-\|\mu\|)\big)`, the log of the ratio of the
    linear rule's clean Gaussian test error to the Bayes error, computed with log-CDFs (exact
    far in the tail, where both errors underflow a ratio). Book: eq. ``eq-10-gauss-error``."""
    mu_arr = real_array(mu, "mu", ndim=1)
    return float(stats.norm.logcdf(-snr(w, mu_arr)) - stats.norm.logcdf(-np.linalg.norm(mu_arr)))


def network_error(
    W,
    gamma: float,
    mu_norm: float,
    n_test: int,
    rng: np.random.Generator,
    *,
    disagreement: bool = False,
):
    r"""Monte-Carlo clean test error :math:`\Pr(yf(x;W)\le0)` on ``n_test`` fresh Gaussian points
    :math:`x=y\mu+z`, :math:`\mu=\|\mu\|e_1` (evaluated with the network itself).

    With ``disagreement=True`` also returns, on the same points, the fraction where the network's
    sign differs from that of its linear rule :math:`\langle u-v,x\rangle`
    (:func:`decision_normal`), which is 0 when the neurons of each sign are equal (as at the
    limit).
    Returns float, or (float, float)."""
    W = real_array(W, "W", ndim=2)
    n_test = positive_int(n_test, "n_test")
    if not isinstance(disagreement, (bool, np.bool_)):
        raise TypeError(f"disagreement must be a bool, got {type(disagreement).__name__}")
    X, y, _ = sample_mixture(n_test, W.shape[1], mu_norm, rng)
    f = forward(W, X, gamma)
    error = float(np.mean(y * f <= 0))
    if not disagreement:
        return error
    return error, float(np.mean(np.sign(f) != np.sign(X @ decision_normal(W))))


def network_error_is(
    W, gamma: float, mu, n_samples: int, rng: np.random.Generator
) -> tuple[float, float]:
    r"""Clean test error :math:`\Pr(yf(x;W)<0)` of the network on Gaussian mixtures, by importance
    sampling in the row space of W, with its standard error.

    The value of :func:`network_log_error_is`, exponentiated (it underflows to 0 below about
    :math:`10^{-308}`; use the log version there).

    Returns
    -------
    (error, standard_error), each the average over the two classes.
    Book: eq. ``eq-10-gauss-error`` in book/10-benign-overfitting-leaky-relu/phase_transition.md.
    """
    log_err, rel_se = network_log_error_is(W, gamma, mu, n_samples, rng)
    err = float(np.exp(log_err))
    return err, err * rel_se


def network_log_error_is(
    W, gamma: float, mu, n_samples: int, rng: np.random.Generator
) -> tuple[float, float]:
    r"""Log of the clean test error :math:`\Pr(yf(x;W)<0)` of the network on Gaussian mixtures,
    by importance sampling in the row space of W with log-domain weights, and the relative
    standard error of the error (the SE of its log, to first order).

    :math:`f(x;W)` depends on :math:`z` only through :math:`B^\top z\sim N(0,I_k)`, where the
    columns of :math:`B` (shape (p, k), :math:`k\le m`) are an orthonormal basis of the rows of
    W. For each class :math:`y=\pm1` we sample :math:`\xi\sim N(\xi^\star,I_k)`, shifted to the
    point :math:`\xi^\star` of the linear boundary :math:`\langle u-v,x\rangle=0` nearest to
    :math:`y\mu`, and weight by :math:`\exp(-\langle\xi^\star,\xi\rangle+\|\xi^\star\|^2/2)`,
    kept as logarithms (log-sum-exp), so errors far below :math:`10^{-308}` are resolved.
    The estimate is unbiased for the network's own decision rule, which need not be linear (the
    neurons of one sign differ after the first step).

    Parameters
    ----------
    W : ndarray (m, p); gamma : float in (0, 1); mu : ndarray (p,), the mean :math:`\mu`;
    n_samples : int, samples per class; rng : numpy.random.Generator.

    Returns
    -------
    (log_error, relative_standard_error); log_error is -inf if no sample was misclassified.
    Book: eq. ``eq-10-gauss-error`` in book/10-benign-overfitting-leaky-relu/phase_transition.md.
    """
    W = real_array(W, "W", ndim=2)
    mu = real_array(mu, "mu", shape=(W.shape[1],))
    gamma, n_samples, rng = (
        _gamma(gamma),
        positive_int(n_samples, "n_samples"),
        check_generator(rng),
    )
    B = linalg.orth(W.T)  # (p, k)
    normal = B.T @ decision_normal(W)  # (k,) u - v in the basis (it lies in the row space)
    a = second_layer(W.shape[0])
    WB, Wmu = W @ B, W @ mu  # (m, k), (m,)
    logs, rel_vars = [], []
    for y in (1.0, -1.0):
        # nearest point of {<u - v, y mu + B xi> = 0}: xi* = -(y <u - v, mu>/||normal||^2) normal
        shift = -(y * (decision_normal(W) @ mu) / (normal @ normal)) * normal
        xi = shift + rng.standard_normal((n_samples, B.shape[1]))
        pre = y * Wmu + xi @ WB.T  # (n_samples, m) pre-activations
        f = np.maximum(pre, gamma * pre) @ a
        log_w = np.where(y * f < 0, -(xi @ shift) + shift @ shift / 2, -np.inf)
        top = np.max(log_w)
        if not np.isfinite(top):
            logs.append(-np.inf)
            rel_vars.append(0.0)
            continue
        scaled = np.exp(log_w - top)  # terms / e^top
        mean = scaled.mean()
        logs.append(top + np.log(mean))
        rel_vars.append(scaled.var() / n_samples / mean**2)
    log_err = float(np.logaddexp(*logs) - np.log(2.0))  # average of the two classes
    # relative variance of (e_+ + e_-)/2: sum of the classes' variances over their sum squared
    weights = np.exp(np.array(logs) - np.logaddexp(*logs)) if np.isfinite(log_err) else [0, 0]
    rel_se = float(np.sqrt(np.sum(np.square(weights) * np.array(rel_vars))))
    return log_err, rel_se
