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
    "kink_moments",
    "count_active_units",
    "participation_ratio",
    "manifold_distance",
    "icl_tokens",
    "attention_forward",
    "attention_stats",
    "attention_loss_grad",
    "attention_init",
    "train_attention",
    "regression_matrix",
    "head_sizes",
    "attention_plateaus",
    "three_point_exponent",
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
    hid, dhid = activation(kind, X @ np.swapaxes(W1, -1, -2))  # (..., n, H)
    R = Y - hid @ np.swapaxes(W2, -1, -2)  # residual (..., n, m)
    L = 0.5 * np.sum(R**2, axis=(-2, -1)) / n
    gW2 = -(np.swapaxes(R, -1, -2) @ hid) / n
    back = (R @ W2) * dhid
    gW1 = -(np.swapaxes(back, -1, -2) @ X) / n
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


def _gd(grad_fn, blocks, lr, steps, log_every):
    """Gradient descent on a tuple of parameter blocks; ``grad_fn(*blocks) -> (L, *grads)``.

    Logs every ``log_every`` steps and at the end: ``t`` (T,), ``loss`` (..., T) and each block
    stacked along a new first axis (T, ...)."""
    lr = positive(lr, "lr")
    steps = positive_int(steps, "steps")
    log_every = positive_int(log_every, "log_every")
    blocks = [np.array(B, dtype=float) for B in blocks]
    ts, losses, logs = [], [], [[] for _ in blocks]
    for k in range(steps + 1):
        L, *grads = grad_fn(*blocks)
        if k % log_every == 0 or k == steps:
            ts.append(k * lr)
            losses.append(L)
            for log, B in zip(logs, blocks):
                log.append(B.copy())
        if k < steps:
            # gradient descent on every block: Theta <- Theta - lr * grad L
            for B, gB in zip(blocks, grads):
                B -= lr * gB
    return np.array(ts), np.stack(losses, -1), [np.stack(log) for log in logs]


def _gd2(grad_fn, W1, W2, lr, steps, log_every):
    t, loss, (W1s, W2s) = _gd(grad_fn, (W1, W2), lr, steps, log_every)
    return dict(t=t, loss=loss, W1=W1s, W2=W2s)


def train_gd(kind: str, W1, W2, X, Y, lr: float, steps: int, log_every: int = 10) -> dict:
    """Full-batch gradient descent on the empirical loss of :func:`loss_and_grad`.

    Returns a dict with ``t`` (T,), ``loss`` (..., T), ``W1`` (T, ..., H, d), ``W2`` (T, ..., m, H)
    logged every ``log_every`` steps and at the end.
    """
    kind = _kind(kind)
    _check_net(W1, W2, X, Y)
    X, Y = np.asarray(X, float), np.asarray(Y, float)
    return _gd2(lambda a, b: loss_and_grad(kind, a, b, X, Y), W1, W2, lr, steps, log_every)


def train_population(model: str, target, W1, W2, lr: float, steps: int, log_every: int = 10):
    """Gradient descent on a population loss: ``model`` is ``"linear"`` (target = S = Sigma_yx)
    or ``"quadratic"`` (target = A). Same return value as :func:`train_gd`."""
    fns = {"linear": linear_population_loss_grad, "quadratic": quadratic_population_loss_grad}
    if model not in fns:
        raise ValueError(f"model must be 'linear' or 'quadratic', got {model!r}")
    fns[model](target, W1, W2)  # validates shapes once
    fn = fns[model]
    return _gd2(lambda a, b: fn(target, a, b), W1, W2, lr, steps, log_every)


# ------------------------------------------------------------------ linear self-attention
def icl_tokens(rng, P: int, N: int, D: int, *, eigenvalues=None, antithetic: bool = True):
    """In-context linear regression sequences for linear attention.

    Each sequence has its own task vector w ~ N(0, I_D), inputs x ~ N(0, diag(eigenvalues))
    (default I_D: a flat spectrum) and labels y = w^T x. Returns ``Z`` of shape (P, N+1, D+1),
    the N context tokens z_n = (x_n, y_n) followed by the query token (x_q, 0), and ``y`` of
    shape (P,), the query targets w^T x_q. With ``antithetic`` (P even) the second half repeats
    the first half's inputs with -w, so the training set is symmetric under y -> -y exactly.
    """
    rng = check_generator(rng)
    P, N, D = positive_int(P, "P"), positive_int(N, "N"), positive_int(D, "D")
    lam = np.ones(D) if eigenvalues is None else real_array(eigenvalues, "eigenvalues", shape=(D,))
    if np.any(lam <= 0):
        raise ValueError("eigenvalues must be positive")
    if antithetic and P % 2:
        raise ValueError(f"P must be even with antithetic=True, got {P}")
    half = P // 2 if antithetic else P
    x = rng.standard_normal((half, N + 1, D)) * np.sqrt(lam)
    w = rng.standard_normal((half, D))
    if antithetic:
        x, w = np.concatenate([x, x]), np.concatenate([w, -w])
    yall = np.einsum("pnd,pd->pn", x, w)
    Z = np.concatenate([x, yall[..., None]], axis=-1)
    y = Z[:, -1, -1].copy()
    Z[:, -1, -1] = 0.0  # the query's label slot is empty
    return Z, y


def _check_tokens(Z, y=None):
    Z = real_array(Z, "Z", ndim=3)
    if Z.shape[1] < 2:
        raise ValueError(f"Z needs at least one context token and the query, got {Z.shape}")
    if y is not None:
        y = real_array(y, "y", ndim=1, shape=(Z.shape[0],))
    return Z, y


def attention_forward(Q, K, V, Z) -> np.ndarray:
    """Output at the query's label slot of multi-head linear attention with separate rank-one
    key and query (ATTN_S of Zhang et al., 2025), read directly from the tokens:

        yhat = sum_h (q_h^T z_q) (1/N) sum_{n=1}^{N+1} (k_h^T z_n) (v_h^T z_n),

    the sum running over the N context tokens and the query (as in the authors' code). ``Q``,
    ``K``, ``V`` have shape (..., H, D+1) (``V`` holds each head's value row for the label
    slot); ``Z`` has shape (P, N+1, D+1). Returns shape (..., P). Book: prf:ref:`prop-09-attention`
    in book/09-saddle-to-saddle/attention.md."""
    Z, _ = _check_tokens(Z)
    Q, K, V = (real_array(A, n) for A, n in ((Q, "Q"), (K, "K"), (V, "V")))
    if not (Q.shape == K.shape == V.shape) or Q.shape[-1] != Z.shape[-1]:
        raise ValueError("Q, K and V must have the same shape (..., H, D+1) as the tokens' D+1")
    N = Z.shape[1] - 1
    zk = np.einsum("pnd,...hd->...phn", Z, K)
    zv = np.einsum("pnd,...hd->...phn", Z, V)
    zq = np.einsum("pd,...hd->...ph", Z[:, -1], Q)
    return np.sum(zq * np.sum(zk * zv, -1), -1) / N


def attention_stats(Z, y) -> dict:
    """Sufficient statistics of the training loss of linear attention.

    The output is linear in the features Phi_p = z_q (x) S_p, S_p = (1/N) sum_n z_n z_n^T:
    yhat_p = <T, Phi_p> with the CP tensor T = sum_h q_h (x) k_h (x) v_h. So the empirical loss
    L = (1/2P) sum_p (y_p - yhat_p)^2 = (1/2) (yy - 2 b.T + T.C.T) is exact with
    C = mean Phi Phi^T ((D+1)^3 x (D+1)^3), b = mean y Phi, yy = mean y^2.
    """
    Z, y = _check_tokens(Z, y)
    N, P = Z.shape[1] - 1, Z.shape[0]
    S = np.einsum("pnd,pne->pde", Z, Z) / N
    Phi = np.einsum("pa,pbc->pabc", Z[:, -1], S).reshape(P, -1)
    return dict(C=Phi.T @ Phi / P, b=Phi.T @ y / P, yy=float(y @ y / P), d=Z.shape[-1])


def attention_loss_grad(stats: dict, Q, K, V):
    """Training loss of separate-key-query linear attention and its gradients, from
    :func:`attention_stats`: L = (1/2)(yy - 2 b.T + T.C.T), G = dL/dT = C T - b and
    dL/dq_h = G x_2 k_h x_3 v_h (likewise for k_h, v_h). ``Q``, ``K``, ``V``: (..., H, D+1).
    Returns ``(L, dL/dQ, dL/dK, dL/dV)``. Book: prf:ref:`prop-09-attention` in
    book/09-saddle-to-saddle/attention.md."""
    d = stats["d"]
    batch, H = Q.shape[:-2], Q.shape[-2]
    kv = (K[..., :, None] * V[..., None, :]).reshape(*batch, H, d * d)  # k_h (x) v_h
    T = (np.swapaxes(Q, -1, -2) @ kv).reshape(*batch, d**3)  # sum_h q_h (x) k_h (x) v_h
    CT = T @ stats["C"]
    L = 0.5 * (stats["yy"] - 2.0 * T @ stats["b"] + np.sum(T * CT, -1))
    G = (CT - stats["b"]).reshape(*batch, d, d, d)  # dL/dT
    gQ = np.swapaxes(G.reshape(*batch, d, d * d) @ np.swapaxes(kv, -1, -2), -1, -2)
    GQ = np.swapaxes(Q @ G.reshape(*batch, d, d * d), -1, -2).reshape(*batch, d, d, H)
    gK = np.einsum("...bch,...hc->...hb", GQ, V)  # G contracted with q_h and v_h
    gV = np.einsum("...bch,...hb->...hc", GQ, K)
    return L, gQ, gK, gV


def attention_init(rng, batch, H: int, D: int, sigma0: float):
    """Small initialisation of H rank-one heads: i.i.d. N(0, sigma0^2) entries for Q, K, V of
    shape (*batch, H, D+1), with the key's label entry and the value's input entries set to
    zero, as in the authors' code (yedizhang/linattn-icl)."""
    rng = check_generator(rng)
    sigma0 = positive(sigma0, "sigma0")
    shape = (*tuple(batch), positive_int(H, "H"), positive_int(D, "D") + 1)
    Q, K, V = (sigma0 * rng.standard_normal(shape) for _ in range(3))
    K[..., -1] = 0.0
    V[..., :-1] = 0.0
    return Q, K, V


def train_attention(stats: dict, Q, K, V, lr: float, steps: int, log_every: int = 10) -> dict:
    """Full-batch gradient descent on the training loss of :func:`attention_loss_grad`.
    Returns ``t`` (T,), ``loss`` (..., T) and ``Q``, ``K``, ``V`` (T, ..., H, D+1)."""
    Q, K, V = (real_array(A, n) for A, n in ((Q, "Q"), (K, "K"), (V, "V")))
    if not (Q.shape == K.shape == V.shape) or Q.shape[-1] != stats["d"]:
        raise ValueError(f"Q, K and V must have the same shape (..., H, {stats['d']})")
    t, loss, (Qs, Ks, Vs) = _gd(
        lambda a, b, c: attention_loss_grad(stats, a, b, c), (Q, K, V), lr, steps, log_every
    )
    return dict(t=t, loss=loss, Q=Qs, K=Ks, V=Vs)


def regression_matrix(Q, K, V) -> np.ndarray:
    """The in-context regression matrix Gamma (..., D, D) of the attention, for which the
    output is x_q^T Gamma (1/N) sum_n x_n y_n plus terms that do not read the labels:
    Gamma = sum_h q_h,x (k_h,x v_h,y + v_h,x k_h,y)^T (``x`` the input entries, ``y`` the label
    entry). Each head adds a rank-one term, its *size* being that term's Frobenius norm."""
    Q, K, V = (np.asarray(A, float) for A in (Q, K, V))
    u = K[..., :-1] * V[..., -1:] + V[..., :-1] * K[..., -1:]
    return np.einsum("...ha,...hi->...ai", Q[..., :-1], u)


def head_sizes(Q, K, V) -> np.ndarray:
    """Frobenius norm of each head's rank-one term of :func:`regression_matrix`, (..., H)."""
    Q, K, V = (np.asarray(A, float) for A in (Q, K, V))
    u = K[..., :-1] * V[..., -1:] + V[..., :-1] * K[..., -1:]
    return np.linalg.norm(Q[..., :-1], axis=-1) * np.linalg.norm(u, axis=-1)


def attention_plateaus(D: int, N: int):
    """Population plateaus of ICL regression with white inputs (x ~ N(0, I_D)) for
    Gamma restricted to rank k (we derive; prf:ref:`prop-09-attention`):

        L(Gamma) = (1/2) [D - 2 tr Gamma + ((N + 1 + D)/N) ||Gamma||_F^2],
        c* = N / (N + 1 + D),   L_k = (1/2) (D - k c*),  k = 0..D.

    Returns ``(c*, L)`` with L of shape (D+1,)."""
    D, N = positive_int(D, "D"), positive_int(N, "N")
    c = N / (N + 1 + D)
    return c, 0.5 * (D - c * np.arange(D + 1))


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


def three_point_exponent(sigma0, times) -> np.ndarray:
    """Power-law exponent p of t(sigma0) = A sigma0^p + B from three geometric init scales.

    With sigma0 = (s, r s, r^2 s) the offset B cancels in differences:
    (t_1 - t_2) / (t_2 - t_3) = r^(-p), so p = ln[(t_1 - t_2) / (t_2 - t_3)] / ln(1/r)
    (eq-09-three-point). A logarithmic law t = c ln(1/sigma0) + B gives exactly p = 0, a cubic
    saddle's 1/sigma0 law gives p = -1. ``times`` has shape (..., 3); returns shape (...).
    Book: book/09-saddle-to-saddle/attention.md."""
    s = real_array(sigma0, "sigma0", ndim=1, shape=(3,))
    if np.any(s <= 0) or not np.isclose(s[1] / s[0], s[2] / s[1]) or s[1] <= s[0]:
        raise ValueError(f"sigma0 must be three increasing geometric values, got {s}")
    t = real_array(times, "times", finite=False)
    if t.shape[-1] != 3:
        raise ValueError(f"times must have a last axis of length 3, got {t.shape}")
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log((t[..., 0] - t[..., 1]) / (t[..., 1] - t[..., 2])) / np.log(s[0] / s[1])


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


def kink_moments(w, b, a, x_range=(-1.0, 1.0)):
    """Slope-weighted kinks of 1-D ReLU nets f(x) = sum_h a_h relu(w_h x + b_h), with no count,
    threshold or merging.

    Unit h has its kink at c_h = -b_h / w_h and changes the slope there by a_h |w_h|. Over the
    units whose kink lies inside ``x_range`` this returns, each of shape (...), the kink mass
    m = sum_h |a_h w_h|, the mass-weighted mean kink position and the mass-weighted standard
    deviation of the positions (0 when all the mass sits on one ray; NaN where m = 0).
    ``w``, ``b``, ``a`` have shape (..., H). Book: book/09-saddle-to-saddle/relu.md.
    """
    w, b, a = (real_array(v, n) for v, n in ((w, "w"), (b, "b"), (a, "a")))
    if not (w.shape == b.shape == a.shape) or w.ndim < 1:
        raise ValueError("w, b and a must have the same shape (..., H)")
    lo, hi = (real(v, "x_range") for v in x_range)
    if not lo < hi:
        raise ValueError(f"x_range must be increasing, got {x_range}")
    with np.errstate(divide="ignore", invalid="ignore"):
        c = np.where(w != 0, -b / np.where(w != 0, w, 1.0), np.nan)
    inside = (w != 0) & (c > lo) & (c < hi)
    mass = np.where(inside, np.abs(a * w), 0.0)
    c = np.where(inside, c, 0.0)
    m = mass.sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = (mass * c).sum(-1) / m
        var = (mass * (c - mean[..., None]) ** 2).sum(-1) / m
    return m, mean, np.sqrt(np.maximum(var, 0.0))


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
