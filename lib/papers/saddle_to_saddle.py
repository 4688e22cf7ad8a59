"""Saddle-to-saddle dynamics in two-layer networks of units.

Paper: Yedi Zhang, Andrew Saxe, Peter E. Latham, *Saddle-to-Saddle Dynamics Explains A
Simplicity Bias Across Neural Network Architectures*, ICLR 2026 (arXiv:2512.20607,
OpenReview ``Vit5M0G5Gb``). Chapter: ``book/09-saddle-to-saddle/``.

A two-layer network is a sum of ``H`` units, unit ``h`` with input weights ``w_h`` (row ``h`` of
``W1``) and output weights ``a_h`` (column ``h`` of ``W2``),

    f(x) = sum_h a_h sigma(w_h^T x),   L = (1/2n) sum_i ||y_i - f(x_i)||^2,

trained by gradient descent ``Theta <- Theta - lr * grad L`` (time ``t = lr * steps``) from a
small initialisation of scale ``sigma0``. The central objects are the embedded fixed points of a
narrower network (``embed``), the invariant manifolds that contain them, and the two escape laws

    linear (2 parameter blocks):   u' = 2u(s - u),  t_half = ln(s/u0 - 1) / (2s)      (eq-09-saxe)
    quadratic (3 blocks):          a' = 2 q a^2,    t_esc  = 1 / (2 q a0)            (eq-09-cubic)

Arrays carry optional leading batch axes (seeds, init scales): ``W1`` has shape ``(..., H, d)``
and ``W2`` shape ``(..., m, H)``; everything is float64.
"""

from __future__ import annotations

import numpy as np

from lib.validate import check_generator, positive, positive_int, real, real_array

__all__ = [
    "KINDS",
    "EMBED_MODES",
    "activation",
    "forward",
    "loss_and_grad",
    "train_gd",
    "linear_population_loss_grad",
    "quadratic_population_loss_grad",
    "train_population",
    "small_init",
    "embed",
    "fd_hessian",
    "cubic_escape_time",
    "crossing_times",
    "effective_rank",
    "count_kinks",
    "count_active_units",
    "participation_ratio",
    "manifold_distance",
]

KINDS = ("linear", "relu", "tanh", "quadratic")
EMBED_MODES = ("duplicate", "zero", "ray_split", "linear")


def _kind(kind) -> str:
    if not isinstance(kind, str):
        raise TypeError(f"kind must be a str, got {type(kind).__name__}")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return kind


def activation(kind: str, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The activation sigma and its derivative sigma' at ``z`` (any shape).

    ``quadratic`` is sigma(z) = z^2, so a unit is a_h (w_h^T x)^2; ReLU uses sigma'(0) = 0.
    """
    kind = _kind(kind)
    z = np.asarray(z, dtype=float)
    if kind == "linear":
        return z, np.ones_like(z)
    if kind == "relu":
        return np.maximum(z, 0.0), (z > 0).astype(float)
    if kind == "tanh":
        s = np.tanh(z)
        return s, 1.0 - s**2
    return z**2, 2.0 * z


def _check_net(W1, W2, X=None, Y=None):
    W1 = real_array(W1, "W1")
    W2 = real_array(W2, "W2")
    if W1.ndim < 2 or W2.ndim < 2:
        raise ValueError(f"W1 and W2 need at least 2 axes, got {W1.shape} and {W2.shape}")
    if W1.shape[-2] != W2.shape[-1]:
        raise ValueError(f"W1 rows ({W1.shape[-2]}) and W2 columns ({W2.shape[-1]}) must match")
    if X is not None:
        X = real_array(X, "X", ndim=2)
        if X.shape[1] != W1.shape[-1]:
            raise ValueError(f"X has {X.shape[1]} features but W1 expects {W1.shape[-1]}")
    if Y is not None:
        Y = real_array(Y, "Y", ndim=2)
        if X is None or Y.shape != (X.shape[0], W2.shape[-2]):
            raise ValueError(
                f"Y must have shape (n, m) = ({len(X)}, {W2.shape[-2]}), got {Y.shape}"
            )
    return W1, W2, X, Y


def forward(kind: str, W1: np.ndarray, W2: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Network output f(X), shape ``(..., n, m)``, for inputs ``X`` of shape ``(n, d)``."""
    kind = _kind(kind)
    W1, W2, X, _ = _check_net(W1, W2, X)
    hid, _ = activation(kind, np.einsum("nd,...hd->...nh", X, W1))
    return np.einsum("...nh,...mh->...nm", hid, W2)


def loss_and_grad(kind: str, W1, W2, X, Y):
    """Empirical loss L = (1/2n) sum_i ||y_i - f(x_i)||^2 and its gradients.

    Returns ``(L, dL/dW1, dL/dW2)`` with shapes ``(...,)``, ``W1.shape``, ``W2.shape``:
    dL/dW2 = -(1/n) R^T sigma(Z), dL/dW1 = -(1/n) [(R W2) * sigma'(Z)]^T X with residual R = Y - f
    and pre-activations Z = X W1^T (eq-09-grad).
    Book: prf:ref:`thm-09-embedding` in book/09-saddle-to-saddle/fixed_points.md.
    """
    kind = _kind(kind)
    W1, W2, X, Y = _check_net(W1, W2, X, Y)
    n = X.shape[0]
    hid, dhid = activation(kind, np.einsum("nd,...hd->...nh", X, W1))
    R = Y - np.einsum("...nh,...mh->...nm", hid, W2)
    L = 0.5 * np.sum(R**2, axis=(-2, -1)) / n
    gW2 = -np.einsum("...nm,...nh->...mh", R, hid) / n
    back = np.einsum("...nm,...mh->...nh", R, W2) * dhid
    gW1 = -np.einsum("...nh,nd->...hd", back, X) / n
    return L, gW1, gW2


def linear_population_loss_grad(S, W1, W2):
    """Population loss of a linear net with whitened inputs (Sigma_xx = I), up to a constant.

    L = (1/2) ||S - W2 W1||_F^2 with S = Sigma_yx of shape ``(m, d)``; gradients
    dL/dW1 = -W2^T R, dL/dW2 = -R W1^T with R = S - W2 W1. Book: (eq-09-saxe) in
    book/09-saddle-to-saddle/timescales.md.
    """
    W1, W2, _, _ = _check_net(W1, W2)
    S = real_array(S, "S", ndim=2, shape=(W2.shape[-2], W1.shape[-1]))
    R = S - W2 @ W1
    L = 0.5 * np.sum(R**2, axis=(-2, -1))
    return L, -np.swapaxes(W2, -1, -2) @ R, -R @ np.swapaxes(W1, -1, -2)


def quadratic_population_loss_grad(A, W1, W2):
    """Population loss of a quadratic net f(x) = sum_h a_h (w_h^T x)^2 = x^T M x, x ~ N(0, I).

    For the teacher y = x^T A x (A symmetric, shape ``(d, d)``), with B = A - M and
    M = W1^T diag(a) W1 (a = ``W2[..., 0, :]``, ``W2`` of shape ``(..., 1, H)``):

        L = (1/2) E[(x^T B x)^2] = ||B||_F^2 + (1/2) (tr B)^2,
        G = dL/dM = -2B - tr(B) I,  dL/da_h = w_h^T G w_h,  dL/dw_h = 2 a_h G w_h.

    Book: prf:ref:`prop-09-cubic` in book/09-saddle-to-saddle/timescales.md.
    """
    W1, W2, _, _ = _check_net(W1, W2)
    d = W1.shape[-1]
    A = real_array(A, "A", ndim=2, shape=(d, d))
    if not np.allclose(A, A.T):
        raise ValueError("A must be symmetric")
    if W2.shape[-2] != 1:
        raise ValueError(f"W2 must have one output row for the quadratic net, got {W2.shape}")
    a = W2[..., 0, :]
    M = np.einsum("...hd,...h,...he->...de", W1, a, W1)
    B = A - M
    trB = np.trace(B, axis1=-2, axis2=-1)
    L = np.sum(B**2, axis=(-2, -1)) + 0.5 * trB**2
    G = -2.0 * B - trB[..., None, None] * np.eye(d)
    GW = np.einsum("...de,...he->...hd", G, W1)
    ga = np.einsum("...hd,...hd->...h", W1, GW)
    return L, 2.0 * a[..., :, None] * GW, ga[..., None, :]


def _gd(grad_fn, W1, W2, lr, steps, log_every):
    lr = positive(lr, "lr")
    steps = positive_int(steps, "steps")
    log_every = positive_int(log_every, "log_every")
    W1, W2 = np.array(W1, dtype=float), np.array(W2, dtype=float)
    ts, losses, W1s, W2s = [], [], [], []
    for k in range(steps + 1):
        L, g1, g2 = grad_fn(W1, W2)
        if k % log_every == 0 or k == steps:
            ts.append(k * lr)
            losses.append(L)
            W1s.append(W1.copy())
            W2s.append(W2.copy())
        if k < steps:
            # gradient descent on both layers: Theta <- Theta - lr * grad L
            W1 -= lr * g1
            W2 -= lr * g2
    return dict(t=np.array(ts), loss=np.stack(losses, -1), W1=np.stack(W1s), W2=np.stack(W2s))


def train_gd(kind: str, W1, W2, X, Y, lr: float, steps: int, log_every: int = 10) -> dict:
    """Full-batch gradient descent on the empirical loss of :func:`loss_and_grad`.

    Returns a dict with ``t`` (T,), ``loss`` (..., T), ``W1`` (T, ..., H, d), ``W2`` (T, ..., m, H)
    logged every ``log_every`` steps and at the end.
    """
    kind = _kind(kind)
    _check_net(W1, W2, X, Y)
    X, Y = np.asarray(X, float), np.asarray(Y, float)
    return _gd(lambda a, b: loss_and_grad(kind, a, b, X, Y), W1, W2, lr, steps, log_every)


def train_population(model: str, target, W1, W2, lr: float, steps: int, log_every: int = 10):
    """Gradient descent on a population loss: ``model`` is ``"linear"`` (target = S = Sigma_yx)
    or ``"quadratic"`` (target = A). Same return value as :func:`train_gd`."""
    fns = {"linear": linear_population_loss_grad, "quadratic": quadratic_population_loss_grad}
    if model not in fns:
        raise ValueError(f"model must be 'linear' or 'quadratic', got {model!r}")
    fns[model](target, W1, W2)  # validates shapes once
    fn = fns[model]
    return _gd(lambda a, b: fn(target, a, b), W1, W2, lr, steps, log_every)


def small_init(rng: np.random.Generator, shape1, shape2, sigma0: float):
    """Independent N(0, sigma0^2) entries for ``W1`` (shape1) and ``W2`` (shape2)."""
    rng = check_generator(rng)
    sigma0 = positive(sigma0, "sigma0")
    return sigma0 * rng.standard_normal(shape1), sigma0 * rng.standard_normal(shape2)


def embed(W1, W2, mode: str, kind: str, *, j: int = 0, lam: float = 0.5, G=None):
    """Embed a width-(H-1) network into width H without changing its function.

    Modes (Theorem 1 of the paper, as reconstructed; Book: prf:ref:`thm-09-embedding` in
    book/09-saddle-to-saddle/fixed_points.md):

    * ``duplicate`` (any sigma): w_H = w_j, a_j -> lam a_j, a_H = (1 - lam) a_j, lam real;
    * ``zero`` (sigma(0) = 0): append theta_H = 0;
    * ``ray_split`` (degree-1 homogeneous sigma: relu, linear): unit j -> sqrt(lam) theta_j and
      a new unit sqrt(1 - lam) theta_j, lam in (0, 1);
    * ``linear`` (linear sigma only): append a zero unit, then (W1, W2) -> (G W1, W2 G^{-1}) for
      an invertible ``G`` of shape (H, H).

    ``W1`` has shape (H-1, d), ``W2`` shape (m, H-1); returns the width-H pair.
    """
    kind = _kind(kind)
    W1, W2, _, _ = _check_net(W1, W2)
    if W1.ndim != 2:
        raise ValueError("embed works on one network (W1 with 2 axes)")
    if mode not in EMBED_MODES:
        raise ValueError(f"mode must be one of {EMBED_MODES}, got {mode!r}")
    Hm1 = W1.shape[0]
    if mode in ("duplicate", "ray_split"):
        if isinstance(j, bool) or not isinstance(j, (int, np.integer)) or not 0 <= j < Hm1:
            raise ValueError(f"j must be a unit index in [0, {Hm1}), got {j!r}")
    W1n, W2n = (
        np.vstack([W1, np.zeros((1, W1.shape[1]))]),
        np.hstack([W2, np.zeros((W2.shape[0], 1))]),
    )
    if mode == "duplicate":
        lam = real(lam, "lam")
        W1n[-1] = W1[j]
        W2n[:, j], W2n[:, -1] = lam * W2[:, j], (1 - lam) * W2[:, j]
    elif mode == "ray_split":
        if kind not in ("relu", "linear"):
            raise ValueError(f"ray_split needs a degree-1 homogeneous activation, got {kind!r}")
        lam = real(lam, "lam", lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        r, q = np.sqrt(lam), np.sqrt(1 - lam)
        W1n[j], W1n[-1] = r * W1[j], q * W1[j]
        W2n[:, j], W2n[:, -1] = r * W2[:, j], q * W2[:, j]
    elif mode == "linear":
        if kind != "linear":
            raise ValueError(f"mode 'linear' needs the linear activation, got {kind!r}")
        G = real_array(G, "G", shape=(Hm1 + 1, Hm1 + 1))
        if np.linalg.cond(G) > 1e12:
            raise ValueError("G must be invertible")
        W1n, W2n = G @ W1n, W2n @ np.linalg.inv(G)
    return W1n, W2n


def cubic_escape_time(q, a0):
    """Blow-up time 1/(2 q a0) of a' = 2 q a^2 (eq-09-cubic): a balanced quadratic unit
    (||w||^2 = 2a^2) aligned with an eigenvector of eigenvalue q of -dL/dM at M = 0."""
    q, a0 = np.asarray(q, float), np.asarray(a0, float)
    if np.any(q <= 0) or np.any(a0 <= 0):
        raise ValueError("q and a0 must be positive")
    return 1.0 / (2.0 * q * a0)


def crossing_times(t, y, level, *, direction: str = "up"):
    """First time at which ``y`` (shape (..., T)) crosses ``level`` (broadcast to y[..., 0]),
    linearly interpolated between logs; NaN where it never does. ``direction`` is ``"up"``
    (y rises through level) or ``"down"``."""
    t = real_array(t, "t", ndim=1)
    y = real_array(y, "y", finite=False)
    if y.shape[-1] != t.size:
        raise ValueError(f"y's last axis ({y.shape[-1]}) must match t ({t.size})")
    if direction not in ("up", "down"):
        raise ValueError(f"direction must be 'up' or 'down', got {direction!r}")
    lev = np.broadcast_to(np.asarray(level, float), y.shape[:-1])[..., None]
    z = (y - lev) if direction == "up" else (lev - y)
    hit = z >= 0
    k = np.argmax(hit, axis=-1)
    ok = hit.any(axis=-1) & (k > 0)
    kk = np.clip(k, 1, t.size - 1)
    z1 = np.take_along_axis(z, kk[..., None], -1)[..., 0]
    z0 = np.take_along_axis(z, kk[..., None] - 1, -1)[..., 0]
    frac = np.where(z1 != z0, -z0 / np.where(z1 != z0, z1 - z0, 1.0), 0.0)
    out = t[kk - 1] + frac * (t[kk] - t[kk - 1])
    return np.where(ok, out, np.nan)


def effective_rank(M, tol: float) -> np.ndarray:
    """Number of singular values of M (shape (..., p, q)) above the absolute level ``tol``.

    An absolute level is needed near zero: from a small initialisation every singular value is
    tiny and a relative level would count noise as rank."""
    M = real_array(M, "M")
    tol = positive(tol, "tol")
    return np.linalg.matrix_rank(M, tol=tol)


def count_active_units(norms, rel_tol: float = 1e-2) -> np.ndarray:
    """Number of units whose norm (last axis) exceeds ``rel_tol`` times the largest."""
    norms = real_array(norms, "norms")
    rel_tol = positive(rel_tol, "rel_tol")
    return np.sum(norms > rel_tol * norms.max(axis=-1, keepdims=True), axis=-1)


def participation_ratio(sizes) -> np.ndarray:
    """Effective number of units (sum_h s_h)^2 / sum_h s_h^2 over the last axis of ``sizes``
    (non-negative unit sizes): 1 for one unit, H for H equal units."""
    sizes = real_array(sizes, "sizes")
    if np.any(sizes < 0):
        raise ValueError("sizes must be non-negative")
    return np.sum(sizes, -1) ** 2 / np.sum(sizes**2, -1)


def count_kinks(w, b, a, x_range=(-1.0, 1.0), rel_norm_tol=0.02, merge_tol=0.05) -> np.ndarray:
    """Distinct kinks -b_h/w_h inside ``x_range`` of 1-D ReLU nets sum_h a_h relu(w_h x + b_h).

    ``w``, ``b``, ``a`` have shape (..., H) (any leading axes: runs, logged times); returns the
    count, shape (...). A unit counts if its slope change |a_h w_h| exceeds ``rel_norm_tol`` times
    the largest of its network; kinks closer than ``merge_tol`` are merged (units on one ray share
    a kink), and a merged kink counts only if its total slope change sum a_h |w_h| is above the
    same tolerance. Book: figure fig-09-relu in book/09-saddle-to-saddle/relu.md.
    """
    w, b, a = (real_array(v, n) for v, n in ((w, "w"), (b, "b"), (a, "a")))
    if not (w.shape == b.shape == a.shape) or w.ndim < 1:
        raise ValueError("w, b and a must have the same shape (..., H)")
    lo, hi = (real(v, "x_range") for v in x_range)
    merge_tol = positive(merge_tol, "merge_tol")
    jump = np.abs(a * w)
    tol = rel_norm_tol * jump.max(axis=-1, keepdims=True)  # (..., 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.where(w != 0, -b / np.where(w != 0, w, 1.0), np.nan)
    valid = (jump > tol) & (w != 0) & (x > lo) & (x < hi)
    x = np.where(valid, x, np.inf)  # invalid kinks sort to the end
    order = np.argsort(x, axis=-1)
    x = np.take_along_axis(x, order, -1)
    slope = np.take_along_axis(np.where(valid, a * np.abs(w), 0.0), order, -1)
    valid = np.isfinite(x)
    # a new group starts at each valid kink more than merge_tol right of the previous one
    with np.errstate(invalid="ignore"):  # inf - inf among the invalid tail gives NaN: no start
        gap = np.diff(x, axis=-1, prepend=-np.inf) > merge_tol
    start = valid & gap
    gid = np.cumsum(start, axis=-1) - 1  # group index per kink, -1 before the first
    H = w.shape[-1]
    flat = gid.reshape(-1, H) + H * np.arange(gid.size // H)[:, None]
    total = np.zeros(gid.size)
    np.add.at(total, flat[valid.reshape(-1, H)], slope.reshape(-1, H)[valid.reshape(-1, H)])
    total = total.reshape(w.shape)  # group sums; slot g of each net holds group g
    ngroups = start.sum(-1, keepdims=True)
    counted = (np.abs(total) > tol) & (np.arange(H) < ngroups)
    return counted.sum(-1)


def manifold_distance(W1, W2, pair=(0, 1), c: float = 1.0) -> np.ndarray:
    """Relative distance of units ``pair = (h, h')`` from the proportionality manifold
    theta_h' = c theta_h: ||theta_h' - c theta_h|| / max(||theta_h'||, ||c theta_h||) over the last
    two axes of W1, W2; 0 where both units are zero (a zero pair lies on every such manifold)."""
    W1, W2, _, _ = _check_net(W1, W2)
    h, hp = pair
    th = np.concatenate([W1[..., h, :], W2[..., :, h]], axis=-1)
    thp = np.concatenate([W1[..., hp, :], W2[..., :, hp]], axis=-1)
    den = np.maximum(np.linalg.norm(thp, axis=-1), np.linalg.norm(c * th, axis=-1))
    num = np.linalg.norm(thp - c * th, axis=-1)
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)


def fd_hessian(grad_fn, W1, W2, h: float = 1e-5) -> np.ndarray:
    """Hessian of a loss by central differences of its analytic gradient.

    ``grad_fn(W1, W2) -> (L, dL/dW1, dL/dW2)`` (e.g. a population loss); returns the symmetrised
    (P, P) matrix in the flattened parameters (W1 then W2). Error O(h^2); small models only."""
    h = positive(h, "h")
    W1, W2 = np.asarray(W1, float), np.asarray(W2, float)
    p0 = np.concatenate([W1.ravel(), W2.ravel()])
    n1 = W1.size

    def g(p):
        _, g1, g2 = grad_fn(p[:n1].reshape(W1.shape), p[n1:].reshape(W2.shape))
        return np.concatenate([g1.ravel(), g2.ravel()])

    Hm = np.empty((p0.size, p0.size))
    for i in range(p0.size):
        e = np.zeros_like(p0)
        e[i] = h
        Hm[i] = (g(p0 + e) - g(p0 - e)) / (2 * h)
    return 0.5 * (Hm + Hm.T)
