r"""The Fisher metric on the neuromanifold: core-space spectrum, deterministic bounds and
Hutchinson estimators.

Paper: K. Sun, *Deterministic Bounds and Random Estimates of Metric Tensors on
Neuromanifolds*, ICLR 2026 (arXiv:2505.13614, OpenReview ``Ssevs8KCsU``). Chapter 18.

Chapter folder: ``book/18-fisher-neuromanifold/``.

For a softmax classifier with logits :math:`z_x=z(x,\theta)` and Jacobians
:math:`J_x=\partial z_x/\partial\theta`, the Fisher information matrix (summed over inputs) is
the pull-back of the *core-space* metric :math:`\mathcal I(z)=\mathrm{diag}(p)-pp^\top`:

.. math::  \mathcal F(\theta)=\sum_x J_x^\top\big(\mathrm{diag}(p_x)-p_xp_x^\top\big)J_x .

Conventions: probabilities ``p`` have the class axis last; Jacobians ``J`` have shape
(B, C, P) for B inputs, C classes and P parameters; the FIM is a *sum* over inputs.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

from lib.validate import check_generator, positive_int, simplex


# ----------------------------------------------------------------------------- validation
# ----------------------------------------------------------------------------- core space
def simplex_fim(p) -> np.ndarray:
    r"""Core-space FIM of the softmax in logit coordinates (batched).

    :math:`\mathrm{diag}(p)-pp^\top`.

    Book: eq:`eq-18-pullback` in book/18-fisher-neuromanifold/spectrum.md (the core metric).
    """
    p = simplex(p, "p")
    return p[..., :, None] * np.eye(p.shape[-1]) - p[..., :, None] * p[..., None, :]


def multilabel_fim(z) -> np.ndarray:
    r"""Core-space FIM of independent sigmoids, :math:`\mathrm{diag}(\sigma(z)(1-\sigma(z)))`."""
    z = np.asarray(z, dtype=float)
    s = 1.0 / (1.0 + np.exp(-z))
    return s[..., :, None] * (1 - s)[..., :, None] * np.eye(z.shape[-1])


def simplex_spectrum(p):
    """Eigenvalues (ascending) and eigenvectors of :func:`simplex_fim` (``numpy.linalg.eigh``)."""
    return np.linalg.eigh(simplex_fim(p))


def top_eigpair(p):
    r"""Largest eigenpair of :math:`\mathrm{diag}(p)-pp^\top` for one probability vector.

    The top eigenvalue solves the secular equation :math:`\sum_ip_i^2/(p_i-\lambda)=1`, equivalently
    :math:`\sum_ip_i/(p_i-\lambda)=0`, in :math:`(p_{(C-1)},p_{(C)})` (``brentq``), with eigenvector
    :math:`v_i\propto p_i/(p_i-\lambda)`.
    If the two largest probabilities tie, :math:`\lambda_C=p_{(C)}` and :math:`v\propto e_a-e_b`.

    Book: prf:`thm-18-spectrum` in book/18-fisher-neuromanifold/spectrum.md (part iv).
    """
    p = simplex(p, "p")
    if p.ndim != 1:
        raise ValueError(f"p must be a single probability vector, got shape {p.shape}")
    order = np.argsort(p)
    a, b = order[-1], order[-2]
    hi, lo = p[a], p[b]
    if hi - lo <= 1e-14 * max(hi, 1e-300) or lo == 0.0:
        # a tie at the top gives lambda_C = p_(C) with v = (e_a - e_b)/sqrt 2; a one-hot p gives
        # the zero matrix (lambda_C = 0, any unit vector orthogonal to 1 will do)
        v = np.zeros_like(p)
        v[a], v[b] = 1 / math.sqrt(2), -1 / math.sqrt(2)
        return (float(hi) if lo > 0 else 0.0), v
    mask = p > 0
    q = p[mask]

    # Secular equation sum_i p_i^2/(p_i - lam) = 1. Since sum_i p_i = 1 it is equivalent (for
    # lam != 0) to sum_i p_i/(p_i - lam) = 0, which avoids the cancellation "1 - 1" near one-hot p.
    def h(lam):
        return np.sum(q / (q - lam))

    left, right = np.nextafter(lo, hi), np.nextafter(hi, lo)  # h(left) < 0 < h(right)
    lam = brentq(h, left, right, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=1000)
    v = np.where(mask, p / (p - lam), 0.0)
    return float(lam), v / np.linalg.norm(v)


def lambda_max_bounds(p):
    r"""Bounds on :math:`\lambda_C` (book's precise form of Thm 1 (iii)).

    .. math::
        \max\{p_{(C-1)},p_{(C)}(1-p_{(C)}),\lambda_{\max}(M_2)\}\le\lambda_C
        \le\min\{p_{(C)},1-\|p\|^2\}

    Book: prf:`thm-18-spectrum` in book/18-fisher-neuromanifold/spectrum.md (part iii).
    """
    p = simplex(p, "p")
    s = np.sort(p, axis=-1)
    pc, pc1 = s[..., -1], s[..., -2]
    A, B = pc * (1 - pc), pc1 * (1 - pc1)
    m2 = 0.5 * (A + B + np.sqrt((A - B) ** 2 + 4 * pc**2 * pc1**2))
    lo = np.maximum(np.maximum(pc1, A), m2)
    hi = np.minimum(pc, np.sum(p * (1 - p), axis=-1))  # 1 - |p|^2, without cancellation
    return lo, hi


def core_envelopes(p):
    r"""Löwner envelopes of the core metric for one ``p``.

    :math:`\lambda_Cv_Cv_C^\top\preceq\mathcal I\preceq\mathrm{diag}(p)`.

    Book: prf:`lem-18-envelopes` in book/18-fisher-neuromanifold/spectrum.md.
    """
    p = simplex(p, "p")
    lam, v = top_eigpair(p)
    return lam * np.outer(v, v), np.diag(p)


# ----------------------------------------------------------------------------- networks (torch)
def make_mlp(sizes):
    """A tanh MLP ``sizes[0] -> ... -> sizes[-1]`` in float64 (``torch.nn.Sequential``).

    Its initial weights come from torch's default initialisation; build it inside
    ``lib.seed.torch_seeded(...)`` in a notebook for a reproducible draw.
    """
    import torch

    if len(sizes) < 2 or any((not isinstance(s, (int, np.integer))) or s < 1 for s in sizes):
        raise ValueError(f"sizes must be at least two positive integers, got {sizes}")
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(int(sizes[i]), int(sizes[i + 1])).double())
        if i < len(sizes) - 2:
            layers.append(torch.nn.Tanh())
    return torch.nn.Sequential(*layers)


def logit_jacobians(model, X) -> np.ndarray:
    r"""Per-input logit Jacobians :math:`J_x=\partial z_x/\partial\theta`, shape (B, C, P).

    Parameters are flattened in ``model.named_parameters()`` order (``torch.func.vmap`` of
    ``jacrev``).
    """
    import torch
    from torch.func import functional_call, jacrev, vmap

    X = torch.as_tensor(np.asarray(X), dtype=torch.float64)
    params = {k: v.detach() for k, v in model.named_parameters()}

    def logits(prm, x):
        return functional_call(model, prm, (x[None],))[0]

    jac = vmap(jacrev(logits), in_dims=(None, 0))(params, X)
    return torch.cat(
        [jac[k].reshape(X.shape[0], -1, params[k].numel()) for k in params], dim=2
    ).numpy()


def softmax_probs(model, X) -> np.ndarray:
    """Softmax probabilities of ``model`` on ``X``, shape (B, C)."""
    import torch

    with torch.no_grad():
        return torch.softmax(
            model(torch.as_tensor(np.asarray(X), dtype=torch.float64)), dim=-1
        ).numpy()


def fim_by_expectation(model, X) -> np.ndarray:
    r"""The FIM from its definition, :math:`\sum_x\sum_yp(y\mid x)\,s_{xy}s_{xy}^\top` (P, P).

    The scores :math:`s_{xy}=\partial_\theta\log\mathrm{softmax}(z(x,\theta))_y` come from
    ``torch.func.jacrev`` of the log-softmax of the model, for every class :math:`y`; the
    expectation over :math:`y\sim p(\cdot\mid x)` is written out. No logit Jacobian and no core
    metric are used, so this is an independent route to :func:`exact_fim` (parameters flattened in
    ``model.named_parameters()`` order, as in :func:`logit_jacobians`).

    Book: eq:`eq-18-pullback` in book/18-fisher-neuromanifold/spectrum.md (the left-hand side).
    """
    import torch
    from torch.func import functional_call, jacrev, vmap

    X = torch.as_tensor(np.asarray(X), dtype=torch.float64)
    params = {k: v.detach() for k, v in model.named_parameters()}

    def log_probs(prm, x):
        return torch.log_softmax(functional_call(model, prm, (x[None],))[0], dim=-1)

    scores = vmap(jacrev(log_probs), in_dims=(None, 0))(params, X)  # each (B, C, *shape)
    with torch.no_grad():
        logp = vmap(log_probs, in_dims=(None, 0))(params, X)  # (B, C)
    S = torch.cat([scores[k].reshape(X.shape[0], logp.shape[1], -1) for k in params], dim=2)
    R = (logp.exp().sqrt()[..., None] * S).reshape(-1, S.shape[2])  # rows sqrt(p_xy) s_xy
    return (R.T @ R).numpy()


def _check_Jp(J, p):
    J = np.asarray(J, dtype=float)
    p = simplex(p, "p")
    if J.ndim != 3 or p.shape != J.shape[:2]:
        raise ValueError(f"J must be (B, C, P) and p (B, C), got {J.shape} and {p.shape}")
    return J, p


def exact_fim(J, p) -> np.ndarray:
    r""":math:`\mathcal F=\sum_xJ_x^\top(\mathrm{diag}(p_x)-p_xp_x^\top)J_x`, shape (P, P).

    Book: eq:`eq-18-pullback` in book/18-fisher-neuromanifold/spectrum.md.
    """
    J, p = _check_Jp(J, p)
    Jp = np.einsum("bcp,bc->bp", J, p)
    return np.einsum("bcp,bc,bcq->pq", J, p, J) - Jp.T @ Jp


def fim_bounds(J, p):
    r"""Pull-backs of the core envelopes (Prop. 6): ``(F_LB, F_UB)``.

    With :math:`F_{LB}=\sum_x\lambda_C(x)(J_x^\top v_C)(J_x^\top v_C)^\top`,
    :math:`F_{UB}=\sum_xJ_x^\top\mathrm{diag}(p_x)J_x`.

    Book: prf:`prop-18-bounds` in book/18-fisher-neuromanifold/spectrum.md.
    """
    J, p = _check_Jp(J, p)
    rows = []
    for b in range(J.shape[0]):
        lam, v = top_eigpair(p[b])
        rows.append(math.sqrt(lam) * (J[b].T @ v))
    R = np.array(rows)
    return R.T @ R, np.einsum("bcp,bc,bcq->pq", J, p, J)


def probe_vectors(
    p,
    n_probes: int,
    kind: str = "full",
    dist: str = "rademacher",
    generator: np.random.Generator | None = None,
    weight: str = "sqrt",
):
    r"""Logit-space probes :math:`u` (shape (R, B, C)).

    Their outer products average to the core metric.
    ``kind="full"``: :math:`u=\sqrt p\circ\xi-p\,(\sqrt p\cdot\xi)` (unbiased for
    :math:`\mathcal I`); ``"dg"``: :math:`u=\sqrt p\circ\xi` (for :math:`\mathrm{diag}(p)`);
    ``"lr"``: :math:`u=\sqrt{\lambda_C}v_C\xi_x` (for :math:`\lambda_Cv_Cv_C^\top`).
    ``weight="p"`` uses :math:`p` instead of :math:`\sqrt p` (the biased version printed in some
    summaries; a negative control).

    Book: prf:`prop-18-hutchinson` in book/18-fisher-neuromanifold/hutchinson.md.
    """
    p = simplex(p, "p")
    R = positive_int(n_probes, "n_probes")
    if kind not in ("full", "dg", "lr"):
        raise ValueError(f"kind must be 'full', 'dg' or 'lr', got {kind!r}")
    if dist not in ("rademacher", "gaussian"):
        raise ValueError(f"dist must be 'rademacher' or 'gaussian', got {dist!r}")
    if weight not in ("sqrt", "p"):
        raise ValueError(f"weight must be 'sqrt' or 'p', got {weight!r}")
    check_generator(generator, "generator")
    B, C = p.shape
    shape = (R, B, 1) if kind == "lr" else (R, B, C)
    xi = (
        generator.choice([-1.0, 1.0], size=shape)
        if dist == "rademacher"
        else generator.standard_normal(shape)
    )
    if kind == "lr":
        pairs = [top_eigpair(p[b]) for b in range(B)]
        w = np.array([math.sqrt(lam) * v for lam, v in pairs])  # (B, C)
        return xi * w[None]
    w = np.sqrt(p) if weight == "sqrt" else p
    s = w[None] * xi
    if kind == "dg":
        return s
    return s - p[None] * s.sum(-1, keepdims=True)


def hutchinson_stats(
    J,
    p,
    n_probes: int,
    kind: str = "full",
    dist: str = "rademacher",
    generator: np.random.Generator | None = None,
    pairs=None,
    chunk: int = 2000,
    weight: str = "sqrt",
    diag_target=None,
    pair_target=None,
):
    r"""Monte-Carlo statistics of the single-probe estimator :math:`\mathbb F=gg^\top`.

    Here :math:`g=J^\top u`. Returns a dict: ``diag_mean``, ``diag_sd`` (per-probe s.d. of
    :math:`g_i^2`), ``trace_mean``, ``trace_se``, and for ``pairs`` (a (K, 2) index array)
    ``pair_mean``, ``pair_var`` of :math:`g_ig_j`. Probes are processed in chunks so memory stays
    ``chunk x P``.

    With the exact means known, ``diag_target`` (P,) adds ``sqdev_mean``, the mean of
    :math:`(g_i^2-t_i)^2` (an unbiased estimate of :math:`\mathrm{Var}\,\mathbb F_{ii}` when
    :math:`t_i=\mathcal F_{ii}`), and ``sqdev_se``, its Monte Carlo standard error; ``pair_target``
    (K,) adds ``pair_sqdev_mean`` and ``pair_sqdev_se`` for :math:`(g_ig_j-t_{ij})^2`.

    Book: prf:`prop-18-hutchinson` in book/18-fisher-neuromanifold/hutchinson.md (its estimator).
    """
    J, p = _check_Jp(J, p)
    R = positive_int(n_probes, "n_probes")
    check_generator(generator, "generator")
    B, C, P = J.shape
    Jf = J.reshape(B * C, P)
    s1 = np.zeros(P)
    s2 = np.zeros(P)
    t1 = 0.0
    t2 = 0.0
    pairs = None if pairs is None else np.asarray(pairs, dtype=int)
    if pairs is not None:
        q1 = np.zeros(len(pairs))
        q2 = np.zeros(len(pairs))
    if diag_target is not None:
        diag_target = np.asarray(diag_target, dtype=float)
        if diag_target.shape != (P,):
            raise ValueError(f"diag_target must have shape ({P},), got {diag_target.shape}")
        v1, v2 = np.zeros(P), np.zeros(P)
    if pair_target is not None:
        if pairs is None or np.shape(pair_target) != (len(pairs),):
            raise ValueError("pair_target needs pairs and must have one entry per pair")
        pair_target = np.asarray(pair_target, dtype=float)
        w1, w2 = np.zeros(len(pairs)), np.zeros(len(pairs))
    done = 0
    while done < R:
        m = min(chunk, R - done)
        u = probe_vectors(p, m, kind, dist, generator, weight).reshape(m, -1)
        if kind == "lr":  # u has shape (m, B, C) after broadcasting
            u = u.reshape(m, B * C)
        g = u @ Jf  # (m, P): g = J^T u
        g2 = g**2
        s1 += g2.sum(0)
        s2 += (g2**2).sum(0)
        tr = g2.sum(1)
        t1 += tr.sum()
        t2 += (tr**2).sum()
        if pairs is not None:
            gg = g[:, pairs[:, 0]] * g[:, pairs[:, 1]]
            q1 += gg.sum(0)
            q2 += (gg**2).sum(0)
            if pair_target is not None:
                e = (gg - pair_target) ** 2
                w1 += e.sum(0)
                w2 += (e**2).sum(0)
        if diag_target is not None:
            e = (g2 - diag_target) ** 2
            v1 += e.sum(0)
            v2 += (e**2).sum(0)
        done += m
    mean = s1 / R
    var = np.maximum(s2 / R - mean**2, 0) * R / (R - 1)
    tm = t1 / R
    tv = max(t2 / R - tm**2, 0) * R / (R - 1)
    out = {
        "diag_mean": mean,
        "diag_sd": np.sqrt(var),
        "trace_mean": tm,
        "trace_se": math.sqrt(tv / R),
        "n": R,
    }
    if pairs is not None:
        pm = q1 / R
        out["pair_mean"], out["pair_var"] = pm, np.maximum(q2 / R - pm**2, 0) * R / (R - 1)
    if diag_target is not None:
        out["sqdev_mean"] = v1 / R
        out["sqdev_se"] = np.sqrt(np.maximum(v2 / R - (v1 / R) ** 2, 0) / (R - 1))
    if pair_target is not None:
        out["pair_sqdev_mean"] = w1 / R
        out["pair_sqdev_se"] = np.sqrt(np.maximum(w2 / R - (w1 / R) ** 2, 0) / (R - 1))
    return out


def score_rows(J, p) -> np.ndarray:
    r"""Rows :math:`r_k=\sqrt{p_{xy}}\,J_x^\top(e_y-p_x)` for every pair :math:`k=(x,y)`.

    Shape (B*C, P).

    Book: prf:`prop-18-hutchinson` in book/18-fisher-neuromanifold/hutchinson.md (its :math:`r_k`).
    """
    J, p = _check_Jp(J, p)
    B, C, P = J.shape
    E = np.eye(C)[None] - p[:, None, :]  # (B, y, c): e_y - p_x
    grads = np.einsum("byc,bcp->byp", E, J)  # J_x^T (e_y - p_x)
    return (np.sqrt(p)[..., None] * grads).reshape(B * C, P)


def hutchinson_variance(J, p, pairs=None, dist: str = "rademacher"):
    r"""Exact single-probe variances.

    .. math::
        \mathrm{Var}\,\mathbb F_{ij}=\mathcal F_{ii}\mathcal F_{jj}+\mathcal F_{ij}^2
        -2\sum_kr_{ki}^2r_{kj}^2

    (Rademacher; without the last term for Gaussian probes). Returns the diagonal variances, and
    those of ``pairs`` if given.

    Book: prf:`prop-18-hutchinson` in book/18-fisher-neuromanifold/hutchinson.md (the variance).
    """
    if dist not in ("rademacher", "gaussian"):
        raise ValueError(f"dist must be 'rademacher' or 'gaussian', got {dist!r}")
    r = score_rows(J, p)
    S2 = (r**2).sum(0)
    S4 = (r**4).sum(0)
    c = 2.0 if dist == "rademacher" else 0.0
    diag = 2 * S2**2 - c * S4
    if pairs is None:
        return diag
    pairs = np.asarray(pairs, dtype=int)
    i, j = pairs[:, 0], pairs[:, 1]
    Fij = (r[:, i] * r[:, j]).sum(0)
    return diag, S2[i] * S2[j] + Fij**2 - c * (r[:, i] ** 2 * r[:, j] ** 2).sum(0)


def mc_fim_diag_samples(J, p, n_samples: int, generator: np.random.Generator):
    r"""Samples of the Monte-Carlo FIM diagonal: labels :math:`\hat y_x\sim p_x`,
    :math:`\sum_x(J_x^\top(e_{\hat y_x}-p_x))^{\circ2}`; shape (n_samples, P)."""
    J, p = _check_Jp(J, p)
    S = positive_int(n_samples, "n_samples")
    check_generator(generator, "generator")
    B, C, P = J.shape
    cum = np.cumsum(p, axis=1)
    out = np.empty((S, P))
    for s in range(S):
        y = np.minimum((generator.random((B, 1)) > cum).sum(1), C - 1)
        E = np.eye(C)[y] - p
        g = np.einsum("bc,bcp->bp", E, J)
        out[s] = (g**2).sum(0)
    return out


def empirical_fim_diag(J, p, y) -> np.ndarray:
    r"""Empirical FIM diagonal with observed labels.

    :math:`\sum_x(J_x^\top(e_{y_x}-p_x))^{\circ2}`.
    """
    J, p = _check_Jp(J, p)
    y = np.asarray(y, dtype=int)
    if y.shape != (J.shape[0],) or np.any(y < 0) or np.any(y >= J.shape[1]):
        raise ValueError(
            f"y must be ({J.shape[0]},) labels in [0, {J.shape[1]}), got shape {y.shape}"
        )
    E = np.eye(J.shape[1])[y] - p
    return (np.einsum("bc,bcp->bp", E, J) ** 2).sum(0)


def mc_cv_closed_form(delta):
    r"""CV of the single-sample MC Fisher for :math:`C=2`, one input, :math:`p=(1-\delta,\delta)`:
    :math:`\sqrt{(\delta^3+(1-\delta)^3)/(\delta(1-\delta))-1}`."""
    d = np.asarray(delta, dtype=float)
    if np.any((d <= 0) | (d >= 1)):
        raise ValueError("delta must lie in (0, 1)")
    return np.sqrt((d**3 + (1 - d) ** 3) / (d * (1 - d)) - 1)


def hutchinson_cv_closed_form(delta):
    r"""CV of the single-probe Rademacher Hutchinson estimator in the same setting.

    :math:`2\sqrt{\delta(1-\delta)}`.
    """
    d = np.asarray(delta, dtype=float)
    if np.any((d <= 0) | (d >= 1)):
        raise ValueError("delta must lie in (0, 1)")
    return 2 * np.sqrt(d * (1 - d))


def hutchinson_probe_autograd(
    model, X, kind: str = "full", generator: np.random.Generator | None = None, xi=None
):
    r"""One probe with a single backward pass.

    :math:`g=\partial_\theta\sum(u^{\text{detached}}\cdot z)=J^\top u`.
    ``xi`` (B, C) may be given to fix the signs; otherwise they are Rademacher from ``generator``.
    Returns ``(g (P,), u (B, C))``.

    Book: prf:`prop-18-hutchinson` in book/18-fisher-neuromanifold/hutchinson.md.
    """
    import torch

    Xt = torch.as_tensor(np.asarray(X), dtype=torch.float64)
    z = model(Xt)
    p = torch.softmax(z, dim=-1).detach()
    if xi is None:
        check_generator(generator, "generator")
        xi = generator.choice([-1.0, 1.0], size=tuple(z.shape))
    xi = torch.as_tensor(np.asarray(xi, dtype=float))
    if kind == "full":
        s = p.sqrt() * xi
        u = s - p * s.sum(-1, keepdim=True)
    elif kind == "dg":
        u = p.sqrt() * xi
    else:
        raise ValueError(f"kind must be 'full' or 'dg' for the autograd probe, got {kind!r}")
    model.zero_grad()
    (u.detach() * z).sum().backward()
    g = torch.cat([prm.grad.reshape(-1) for _, prm in model.named_parameters()])
    return g.detach().numpy().copy(), u.numpy()


def gaussian_mixture(n: int, C: int, dim: int, generator: np.random.Generator, spread: float = 2.0):
    """``n`` points from ``C`` Gaussian classes.

    The class means are random (scale ``spread``) and the noise is unit.
    """
    n, C, dim = positive_int(n, "n"), positive_int(C, "C"), positive_int(dim, "dim")
    check_generator(generator, "generator")
    means = spread * generator.standard_normal((C, dim))
    y = generator.integers(0, C, n)
    return means[y] + generator.standard_normal((n, dim)), y


def train(model, X, y, steps: int = 300, lr: float = 1e-2):
    """Adam on cross-entropy (makes the outputs confident)."""
    import torch

    Xt = torch.as_tensor(np.asarray(X), dtype=torch.float64)
    yt = torch.as_tensor(np.asarray(y), dtype=torch.long)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(positive_int(steps, "steps")):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(Xt), yt).backward()
        opt.step()
    return model
