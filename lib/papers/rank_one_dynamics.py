r"""Gradient-flow dynamics of rectangular rank-one matrix denoising (chapter 19).

Paper: *Gradient Descent Dynamics of Rank-One Matrix Denoising*, ICLR 2026 (OpenReview
``S5oAnaIbgb``).

Chapter folder: ``book/19-matrix-denoising-dynamics/``.

The model is

.. math::
    X = \lambda\,u^\star v^{\star\top} + Z\in\mathbb R^{p\times n},\qquad
    Z_{ij}\ \text{i.i.d.},\ \mathbb E Z_{ij}=0,\ \operatorname{Var}Z_{ij}=1/n,\qquad c=p/n,

and the Riemannian gradient flow of :math:`H(u,v)=\tfrac12\|X-uv^\top\|_F^2` on the product
of unit spheres, :math:`\dot u=(I-uu^\top)Xv`, :math:`\dot v=(I-vv^\top)X^\top u`.

The book's route to the deterministic limit (the paper's exact expression was not
recovered): the flow is the normalisation of the *linear* flow :math:`\dot y = My` with
:math:`M=\begin{psmallmatrix}0&X\\X^\top&0\end{psmallmatrix}`, so every overlap is a ratio of
quadratic forms in functions of :math:`XX^\top`; their limits are integrals against spectral
measures whose Stieltjes transforms follow from the Marčenko–Pastur law and Woodbury's
identity. Integrals are evaluated either on a contour around the spectrum or by
atoms plus Gauss–Chebyshev quadrature of the continuous part, the latter written with
exponentially rescaled integrands so that large times do not overflow or cancel.

Measures (``which``): ``"uu"`` :math:`a^\top f(XX^\top)a`, ``"vv"`` :math:`b^\top f(X^\top X)b`,
``"uv"`` :math:`a^\top f(XX^\top)Xb` (with :math:`a=u^\star`, :math:`b=v^\star`), ``"mu"`` the MP
law of :math:`ZZ^\top` and ``"mut"`` that of :math:`Z^\top Z`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import optimize, special

from lib.validate import (
    check_generator,
    nonnegative,
    positive,
    positive_int,
    real,
    real_array,
    unit_vector,
)

MEASURES = ("uu", "vv", "uv", "mu", "mut")


# --------------------------------------------------------------------------- input checks
def _check_times(ts, name: str = "ts") -> np.ndarray:
    ts = np.atleast_1d(np.asarray(ts, dtype=float))
    if ts.ndim != 1 or ts.size == 0 or not np.all(np.isfinite(ts)) or np.any(ts < 0):
        raise ValueError(f"{name} must be a non-empty 1-d array of non-negative times")
    return ts


# --------------------------------------------------------------------------- sampling
def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x)


def sample_spiked(
    p: int,
    n: int,
    lam: float,
    rng: np.random.Generator,
    *,
    u_kind: str = "gaussian",
    v_kind: str = "bernoulli",
    rho: float = 0.3,
    noise: str = "gaussian",
):
    """Draw ``X = lam u* v*^T + Z`` with ``Var Z_ij = 1/n``; returns ``(X, u_star, v_star)``.

    ``u_kind``/``v_kind``: ``"gaussian"`` (normalised Gaussian vector) or ``"bernoulli"``
    (normalised 0/1 vector with success probability ``rho``, as in the paper's Fig. 1).
    ``noise``: ``"gaussian"``, ``"rademacher"`` or ``"student5"`` (Student-t with 5 degrees of
    freedom rescaled to unit variance), each divided by ``sqrt(n)``.
    """
    p, n = positive_int(p, "p"), positive_int(n, "n")
    lam = nonnegative(lam, "lam")
    check_generator(rng)
    if not 0 < rho <= 1:
        raise ValueError(f"rho must be in (0, 1], got {rho}")

    def direction(kind, dim, name):
        if kind == "gaussian":
            return _unit(rng.standard_normal(dim))
        if kind == "bernoulli":
            x = (rng.random(dim) < rho).astype(float)
            if not x.any():
                x[rng.integers(dim)] = 1.0
            return _unit(x)
        raise ValueError(f"{name} must be 'gaussian' or 'bernoulli', got {kind!r}")

    u_star = direction(u_kind, p, "u_kind")
    v_star = direction(v_kind, n, "v_kind")
    if noise == "gaussian":
        Z = rng.standard_normal((p, n))
    elif noise == "rademacher":
        Z = rng.choice(np.array([-1.0, 1.0]), size=(p, n))
    elif noise == "student5":
        Z = rng.standard_t(5, size=(p, n)) / np.sqrt(5.0 / 3.0)
    else:
        raise ValueError(f"noise must be 'gaussian', 'rademacher' or 'student5', got {noise!r}")
    X = lam * np.outer(u_star, v_star) + Z / np.sqrt(n)
    return X, u_star, v_star


def init_with_overlap(w_star, alpha: float, rng: np.random.Generator) -> np.ndarray:
    """A unit vector ``w0`` with ``<w0, w_star> = alpha`` exactly, uniform otherwise."""
    w_star = unit_vector(w_star, "w_star")
    alpha = real(alpha, "alpha", lo=-1.0, hi=1.0)
    check_generator(rng)
    g = rng.standard_normal(w_star.shape[0])
    g -= (g @ w_star) * w_star
    if w_star.shape[0] == 1:
        if abs(abs(alpha) - 1) > 1e-12:
            raise ValueError("in dimension 1 the overlap alpha must be +1 or -1")
        return np.sign(alpha) * w_star
    return alpha * w_star + np.sqrt(max(0.0, 1 - alpha**2)) * _unit(g)


# --------------------------------------------------------------------------- dynamics at finite n
def flow_rhs(X) -> Callable[[float, np.ndarray], np.ndarray]:
    """The right-hand side of the (nonlinear) Riemannian flow on ``w = (u, v)``.

    For ``solve_ivp``.
    """
    X = real_array(X, "X", ndim=2)
    p = X.shape[0]

    def rhs(_t, w):
        u, v = w[:p], w[p:]
        xu, xv = X.T @ u, X @ v
        obj = u @ xv
        return np.concatenate([xv - obj * u, xu - obj * v])

    return rhs


def riemannian_gd(
    X, u0, v0, eta: float, n_steps: int, u_star, v_star, *, record_every: int = 1
) -> dict:
    """Riemannian GD with retraction, simultaneous update.

    ``u <- normalize(u + eta (I - u u^T) X v)``, ``v <- normalize(v + eta (I - v v^T) X^T u)``.
    Returns ``dict(t, qu, qv, obj, u, v)`` at steps ``0, record_every, ...`` (``t = k * eta``);
    ``u, v`` are the final iterates.
    """
    X = real_array(X, "X", ndim=2)
    p, n = X.shape
    u = unit_vector(u0, "u0", dim=p).copy()
    v = unit_vector(v0, "v0", dim=n).copy()
    u_star, v_star = unit_vector(u_star, "u_star", dim=p), unit_vector(v_star, "v_star", dim=n)
    eta = float(eta)
    if not np.isfinite(eta) or eta <= 0:
        raise ValueError(f"eta must be a positive step size, got {eta}")
    n_steps = positive_int(n_steps, "n_steps")
    record_every = positive_int(record_every, "record_every")
    ts, qu, qv, obj = [], [], [], []

    def record(k):
        ts.append(k * eta)
        qu.append(u @ u_star)
        qv.append(v @ v_star)
        obj.append(u @ X @ v)

    record(0)
    for k in range(1, n_steps + 1):
        xv, xu = X @ v, X.T @ u
        o = u @ xv
        u_new = u + eta * (xv - o * u)
        v_new = v + eta * (xu - o * v)
        u, v = _unit(u_new), _unit(v_new)
        if k % record_every == 0:
            record(k)
    return dict(t=np.array(ts), qu=np.array(qu), qv=np.array(qv), obj=np.array(obj), u=u, v=v)


def exact_flow(
    X, u0, v0, ts, u_star, v_star, *, return_vectors: bool = False, svd: tuple | None = None
) -> dict:
    """The exact solution of the Riemannian flow at times ``ts`` (book's linearisation).

    With the thin SVD ``X = U S V^T``: ``y_u = u0 + U[(cosh(tS)-1) U^T u0 + sinh(tS) V^T v0]``,
    ``y_v = v0 + V[(cosh(tS)-1) V^T v0 + sinh(tS) U^T u0]``, ``u_t = y_u/|y_u|``,
    ``v_t = y_v/|y_v|``.
    Everything is multiplied by ``exp(-t s_max)`` so that large times do not overflow.
    Returns ``dict(t, qu, qv, obj, norm_gap, s_max)`` where ``norm_gap`` is the relative
    difference ``(|y_u| - |y_v|)/|y_u|`` (zero in exact arithmetic) and ``s_max`` the top singular
    value of ``X`` (the maximum of ``u^T X v``), plus ``u, v`` of shape ``(T, p)`` and
    ``(T, n)`` when ``return_vectors``. ``svd``: the thin SVD ``(U, S, Vt)`` of ``X`` if already
    computed (several initialisations on one matrix need one SVD).

    Book: prf:`prop-19-linear` in book/19-matrix-denoising-dynamics/flow.md.
    """
    X = real_array(X, "X", ndim=2)
    p, n = X.shape
    u0, v0 = unit_vector(u0, "u0", dim=p), unit_vector(v0, "v0", dim=n)
    u_star, v_star = unit_vector(u_star, "u_star", dim=p), unit_vector(v_star, "v_star", dim=n)
    ts = _check_times(ts)
    if svd is None:
        U, S, Vt = np.linalg.svd(X, full_matrices=False)
    else:
        U, S, Vt = svd
        if U.shape != (p, min(p, n)) or S.shape != (min(p, n),) or Vt.shape != (min(p, n), n):
            raise ValueError("svd must be the thin SVD (U, S, Vt) of X")
    a, b = U.T @ u0, Vt @ v0
    s_max = S[0]
    out = dict(
        t=ts,
        qu=np.empty(ts.size),
        qv=np.empty(ts.size),
        obj=np.empty(ts.size),
        norm_gap=np.empty(ts.size),
        s_max=float(s_max),
    )
    if return_vectors:
        out["u"], out["v"] = np.empty((ts.size, p)), np.empty((ts.size, n))
    for i, t in enumerate(ts):
        scale = np.exp(-t * s_max)
        ch = (
            0.5 * (np.exp(t * (S - s_max)) + np.exp(-t * (S + s_max))) - scale
        )  # (cosh tS - 1) e^{-t smax}
        sh = 0.5 * (np.exp(t * (S - s_max)) - np.exp(-t * (S + s_max)))  # sinh(tS) e^{-t smax}
        yu = scale * u0 + U @ (ch * a + sh * b)
        yv = scale * v0 + Vt.T @ (ch * b + sh * a)
        nu_, nv_ = np.linalg.norm(yu), np.linalg.norm(yv)
        u, v = yu / nu_, yv / nv_
        out["qu"][i], out["qv"][i] = u @ u_star, v @ v_star
        out["obj"][i] = u @ X @ v
        out["norm_gap"][i] = (nu_ - nv_) / nu_
        if return_vectors:
            out["u"][i], out["v"][i] = u, v
    return out


# ----------------------------------------------------------------------- random-matrix transforms
def mp_edges(c: float) -> tuple[float, float]:
    """The edges ``E_- = (1 - sqrt c)^2`` and ``E_+ = (1 + sqrt c)^2`` of the MP bulk."""
    c = positive(c, "c")
    return (1 - np.sqrt(c)) ** 2, (1 + np.sqrt(c)) ** 2


def mp_stieltjes(z, c: float):
    r"""Stieltjes transform :math:`m(z)=\int d\mu_c(x)/(x-z)` of the MP law of :math:`ZZ^\top`.

    ``m = (-(z + c - 1) + sqrt(z - E_+) sqrt(z - E_-)) / (2 c z)`` with principal roots, which
    puts the branch cut on ``[E_-, E_+]`` only. ``z`` must not lie on the real axis inside
    the support (use :func:`mp_density` there).
    """
    c = positive(c, "c")
    z = np.asarray(z, dtype=complex)
    em, ep = mp_edges(c)
    root = np.sqrt(z - ep) * np.sqrt(z - em)
    return (-(z + c - 1) + root) / (2 * c * z)


def _m_boundary(x, c):
    """``m(x + i0)`` for real ``x`` strictly inside ``(E_-, E_+)``."""
    em, ep = mp_edges(c)
    x = np.asarray(x, dtype=float)
    return (-(x + c - 1) + 1j * np.sqrt((ep - x) * (x - em))) / (2 * c * x)


def mp_density(x, c: float):
    """Density of the continuous part of the MP law of ``Z Z^T`` (zero outside the bulk)."""
    c = positive(c, "c")
    em, ep = mp_edges(c)
    x = np.asarray(x, dtype=float)
    inside = (x > em) & (x < ep)
    out = np.zeros_like(x)
    xi = x[inside]
    out[inside] = np.sqrt((ep - xi) * (x[inside] - em)) / (2 * np.pi * c * xi)
    return out


def _transforms_from_m(z, m, c, lam):
    mt = c * m - (1 - c) / z
    D = 1 - lam**2 * z * m * mt
    return dict(uu=m / D, vv=mt / D, uv=-lam * z * m * mt / D, mu=m, mut=mt)


def spiked_transforms(z, c: float, lam: float) -> dict:
    r"""Limiting Stieltjes transforms of the five measures at ``z`` (off the real support).

    With :math:`\tilde m=cm-(1-c)/z` and :math:`D=1-\lambda^2zm\tilde m`:
    ``uu = m/D``, ``vv = m~/D``, ``uv = -lam z m m~/D``, ``mu = m``, ``mut = m~``.

    Book: prf:`lem-19-transforms` in book/19-matrix-denoising-dynamics/equivalent.md.
    """
    c, lam = positive(c, "c"), nonnegative(lam, "lam")
    z = np.asarray(z, dtype=complex)
    return _transforms_from_m(z, mp_stieltjes(z, c), c, lam)


def outlier(c: float, lam: float):
    r"""The spike's atom: ``(theta, w_u2, w_v2)`` above the threshold ``lam > c**0.25``.

    Below the threshold: ``None``.
    :math:`\vartheta=(1+\lambda^2)(c+\lambda^2)/\lambda^2` (squared top singular value),
    :math:`w_u^2=(1-c\lambda^{-4})/(1+c\lambda^{-2})`,
    :math:`w_v^2=(1-c\lambda^{-4})/(1+\lambda^{-2})` (the atom of ``uu``, ``vv``; the atom of
    ``uv`` is ``sqrt(theta) w_u w_v``).

    Book: prf:`lem-19-transforms` in book/19-matrix-denoising-dynamics/equivalent.md (the atoms).
    """
    c, lam = positive(c, "c"), nonnegative(lam, "lam")
    if lam <= c**0.25:
        return None
    theta = (1 + lam**2) * (c + lam**2) / lam**2
    w_u2 = (1 - c / lam**4) / (1 + c / lam**2)
    w_v2 = (1 - c / lam**4) / (1 + 1 / lam**2)
    return theta, w_u2, w_v2


def zero_atoms(c: float, lam: float) -> dict:
    """Masses at 0 of the five measures (the null space of the larger Gram matrix).

    Book: prf:`lem-19-transforms` in book/19-matrix-denoising-dynamics/equivalent.md
    (the masses at 0).
    """
    c, lam = positive(c, "c"), nonnegative(lam, "lam")
    out = dict(uu=0.0, vv=0.0, uv=0.0, mu=0.0, mut=0.0)
    if c < 1:
        out["vv"] = (1 - c) / (1 + lam**2)
        out["mut"] = 1 - c
    elif c > 1:
        out["uu"] = (1 - 1 / c) / (1 + lam**2 / c)
        out["mu"] = 1 - 1 / c
    return out


def _atoms(which, c, lam):
    """List of ``(location, mass)`` atoms of one measure."""
    atoms = []
    z0 = zero_atoms(c, lam)[which]
    if z0 > 0:
        atoms.append((0.0, z0))
    out = outlier(c, lam)
    if out is not None and which in ("uu", "vv", "uv"):
        theta, wu2, wv2 = out
        mass = dict(uu=wu2, vv=wv2, uv=np.sqrt(theta * wu2 * wv2))[which]
        atoms.append((theta, mass))
    return atoms


def _bulk_rule(c, lam, n_nodes):
    """Nodes and weights (one row per measure) of the bulk part, Gauss–Chebyshev (2nd kind)."""
    em, ep = mp_edges(c)
    if em < 1e-6:
        raise ValueError(
            "the quadrature method needs c != 1 (the MP density is singular at 0 "
            "when c = 1); use method='contour'"
        )
    y, w = special.roots_chebyu(n_nodes)
    mid, half = 0.5 * (ep + em), 0.5 * (ep - em)
    x = mid + half * y
    m = _m_boundary(x, c)
    tr = _transforms_from_m(x + 0j, m, c, lam)
    root = np.sqrt((ep - x) * (x - em))  # = half * sqrt(1 - y^2)
    weights = {}
    for k in MEASURES:
        h = tr[k].imag / (np.pi * root)  # density / sqrt((E+ - x)(x - E-)), smooth on the bulk
        weights[k] = w * h * half**2  # int f rho dx = int f h half^2 sqrt(1-y^2) dy
    return x, weights


def spectral_integral(
    f: Callable,
    which: str,
    c: float,
    lam: float,
    *,
    method: str = "quadrature",
    n_nodes: int = 400,
    radius_pad: float = 0.3,
) -> float:
    r"""``∫ f dν`` for one of the measures ``"uu", "vv", "uv", "mu", "mut"``.

    ``method="contour"``: :math:`-\frac1{2\pi i}\oint f(z)s(z)\,dz` on a circle enclosing
    ``[-radius_pad, x_top + radius_pad]`` with the trapezoid rule on ``n_nodes`` nodes
    (spectrally accurate for entire ``f``, which must accept complex arrays; nodes are offset
    so that none lies on the real axis). ``method="quadrature"``: atoms in closed form plus
    Gauss–Chebyshev quadrature of the density :math:`\frac1\pi\operatorname{Im}s(x+i0)` on the
    bulk.
    """
    if which not in MEASURES:
        raise ValueError(f"which must be one of {MEASURES}, got {which!r}")
    c, lam = positive(c, "c"), nonnegative(lam, "lam")
    n_nodes = positive_int(n_nodes, "n_nodes")
    if method == "contour":
        out = outlier(c, lam)
        x_top = out[0] if out is not None else mp_edges(c)[1]
        lo, hi = -radius_pad, x_top + radius_pad
        centre, radius = 0.5 * (lo + hi), 0.5 * (hi - lo)
        theta = 2 * np.pi * (np.arange(n_nodes) + 0.5) / n_nodes
        e = np.exp(1j * theta)
        z = centre + radius * e
        s = spiked_transforms(z, c, lam)[which]
        vals = np.asarray(f(z), dtype=complex) * s * radius * e
        return float(np.real(-np.mean(vals)))
    if method == "quadrature":
        x, weights = _bulk_rule(c, lam, n_nodes)
        total = float(np.sum(weights[which] * np.asarray(f(x), dtype=float)))
        for loc, mass in _atoms(which, c, lam):
            total += mass * float(np.asarray(f(np.array([loc])), dtype=float)[0])
        return total
    raise ValueError(f"method must be 'contour' or 'quadrature', got {method!r}")


def residue(
    which: str, c: float, lam: float, at: float, *, radius: float, n_nodes: int = 512
) -> float:
    r"""Mass of ``which`` at the point ``at``.

    Computed as :math:`-\frac1{2\pi i}\oint s(z)\,dz` on a small circle.
    """
    if which not in MEASURES:
        raise ValueError(f"which must be one of {MEASURES}, got {which!r}")
    if not radius > 0:
        raise ValueError(f"radius must be positive, got {radius}")
    n_nodes = positive_int(n_nodes, "n_nodes")
    theta = 2 * np.pi * (np.arange(n_nodes) + 0.5) / n_nodes
    e = np.exp(1j * theta)
    s = spiked_transforms(at + radius * e, c, lam)[which]
    return float(np.real(-np.mean(s * radius * e)))


# --------------------------------------------------------------------------- deterministic curves
def _scaled_basis(x, ts, r):
    """``e1 = cosh(t sqrt x) e^{-t r}`` and ``e3 = sinh(t sqrt x)/sqrt x e^{-t r}``.

    Both of shape ``(T, len(x))``.
    """
    s = np.sqrt(np.maximum(np.asarray(x, dtype=float), 0.0))[None, :]
    t = ts[:, None]
    up, down = np.exp(t * (s - r)), np.exp(-t * (s + r))
    e1 = 0.5 * (up + down)
    small = t * s < 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        big = 0.5 * (up - down) / s
        sinhc = np.where(s > 0, np.sinh(np.minimum(t * s, 1.0)) / np.where(s > 0, s, 1.0), t)
    e3 = np.where(small, sinhc * np.exp(-t * r), big)
    return e1, e3


def deterministic_curves(
    ts, c: float, lam: float, alpha_u: float, alpha_v: float, *, n_nodes: int = 400
) -> dict:
    r"""Theorem 1 (book's derivation): the limiting overlaps and objective at times ``ts``.

    :math:`\tilde q_u=\hat q_u/\sqrt{\hat p}`, :math:`\tilde q_v=\hat q_v/\sqrt{\hat p}` with

    - :math:`\hat q_u=\alpha_u\int\ell_1d\nu_{uu}+\alpha_v\int\ell_3d\nu_{uv}`,
    - :math:`\hat q_v=\alpha_v\int\ell_1d\nu_{vv}+\alpha_u\int\ell_3d\nu_{uv}`,
    - :math:`\hat p=\alpha_u^2\int\cosh^2d\nu_{uu}+\beta_u^2\int\cosh^2d\mu_c
      +2\alpha_u\alpha_v\int\ell_2d\nu_{uv}
      +\alpha_v^2\int\sinh^2d\nu_{vv}+\beta_v^2\int\sinh^2d\tilde\mu_c`,

    (:math:`\cosh^2=(1+\ell_4)/2`, :math:`\sinh^2=(\ell_4-1)/2` at :math:`\sqrt x\,t`) and the
    objective :math:`u_t^\top Xv_t\to\hat p'/(2\hat p)`. The spike's atom is added in the combined
    form :math:`\tfrac{w_u}2(\kappa_+e^{t\sqrt\vartheta}+\kappa_-e^{-t\sqrt\vartheta})` etc., with
    :math:`\kappa_\pm=\alpha_uw_u\pm\alpha_vw_v`, so critical initialisations do not cancel
    catastrophically. Returns ``dict(t, qu, qv, obj, log_p)`` (``log_p = log p_hat``).

    Book: prf:`thm-19-curves` in book/19-matrix-denoising-dynamics/equivalent.md.
    """
    ts = _check_times(ts)
    c, lam = positive(c, "c"), nonnegative(lam, "lam")
    au, av = real(alpha_u, "alpha_u", lo=-1.0, hi=1.0), real(alpha_v, "alpha_v", lo=-1.0, hi=1.0)
    bu2, bv2 = 1 - au**2, 1 - av**2
    n_nodes = positive_int(n_nodes, "n_nodes")
    x, W = _bulk_rule(c, lam, n_nodes)
    out = outlier(c, lam)
    x_top = out[0] if out is not None else mp_edges(c)[1]
    r = np.sqrt(x_top)
    e1, e3 = _scaled_basis(x, ts, r)
    xs = x[None, :]

    def bulk(which, g):
        return g @ W[which]

    # scaled by e^{-t r} (overlaps) and e^{-2 t r} (p_hat and its derivative)
    qu = au * bulk("uu", e1) + av * bulk("uv", e3)
    qv = av * bulk("vv", e1) + au * bulk("uv", e3)
    ph = (
        au**2 * bulk("uu", e1**2)
        + bu2 * bulk("mu", e1**2)
        + 2 * au * av * bulk("uv", e1 * e3)
        + av**2 * bulk("vv", xs * e3**2)
        + bv2 * bulk("mut", xs * e3**2)
    )
    dph = (
        au**2 * bulk("uu", 2 * xs * e1 * e3)
        + bu2 * bulk("mu", 2 * xs * e1 * e3)
        + 2 * au * av * bulk("uv", e1**2 + xs * e3**2)
        + av**2 * bulk("vv", 2 * xs * e1 * e3)
        + bv2 * bulk("mut", 2 * xs * e1 * e3)
    )
    # atoms at zero: l1 = cosh^2 = 1, sinh^2 = 0 and every derivative term vanishes
    z = zero_atoms(c, lam)
    damp = np.exp(-ts * r)
    qu = qu + au * z["uu"] * damp
    qv = qv + av * z["vv"] * damp
    ph = ph + (au**2 * z["uu"] + bu2 * z["mu"]) * damp**2
    # the spike's atom, combined analytically
    if out is not None:
        theta, wu2, wv2 = out
        wu, wv, st = np.sqrt(wu2), np.sqrt(wv2), np.sqrt(theta)
        kp, km = au * wu + av * wv, au * wu - av * wv
        decay = np.exp(-2 * ts * st)  # e^{-2 t sqrt(theta)}; here r = sqrt(theta)
        qu = qu + 0.5 * wu * (kp + km * decay)
        qv = qv + 0.5 * wv * (kp - km * decay)
        ph = ph + 0.25 * (kp + km * decay) ** 2
        dph = dph + 0.5 * st * (kp**2 - km**2 * decay**2)
    sq = np.sqrt(ph)
    return dict(t=ts, qu=qu / sq, qv=qv / sq, obj=dph / (2 * ph), log_p=np.log(ph) + 2 * ts * r)


def bbp_overlaps(c: float, lam: float) -> tuple[float, float]:
    """Classical BBP magnitudes ``(|<u*, u_top>|, |<v*, v_top>|)``.

    They are the square roots of ``w_u2, w_v2``.

    Book: prf:`thm-19-bbp` in book/19-matrix-denoising-dynamics/bbp.md (the limit's magnitudes).
    """
    out = outlier(c, lam)
    if out is None:
        return 0.0, 0.0
    return float(np.sqrt(out[1])), float(np.sqrt(out[2]))


def sign_bracket(c: float, lam: float, alpha_u: float, alpha_v: float) -> float:
    r"""The bracket :math:`\alpha_v/\sqrt{1+\lambda^2}+\alpha_u/\sqrt{\lambda^2+c}`.

    Its sign is the limit's sign ``I``.

    Book: prf:`thm-19-bbp` in book/19-matrix-denoising-dynamics/bbp.md (the sign ``I``).
    """
    c, lam = positive(c, "c"), nonnegative(lam, "lam")
    au, av = real(alpha_u, "alpha_u", lo=-1.0, hi=1.0), real(alpha_v, "alpha_v", lo=-1.0, hi=1.0)
    return av / np.sqrt(1 + lam**2) + au / np.sqrt(lam**2 + c)


def large_time_limit(c: float, lam: float, alpha_u: float, alpha_v: float) -> tuple[float, float]:
    """Theorem 2: ``(q_u^inf, q_v^inf) = I * BBP magnitudes`` above threshold, ``(0, 0)`` below.

    Book: prf:`thm-19-bbp` in book/19-matrix-denoising-dynamics/bbp.md.
    """
    bracket = sign_bracket(c, lam, alpha_u, alpha_v)
    mu, mv = bbp_overlaps(c, lam)
    sign = float(np.sign(bracket))
    return sign * mu, sign * mv


def critical_alpha_u(c: float, lam: float, alpha_v: float) -> float:
    """The ``alpha_u`` that makes the sign bracket vanish (critical initialisation)."""
    c, lam = positive(c, "c"), nonnegative(lam, "lam")
    av = real(alpha_v, "alpha_v", lo=-1.0, hi=1.0)
    au = -av * np.sqrt(lam**2 + c) / np.sqrt(1 + lam**2)
    if abs(au) > 1:
        raise ValueError(f"no critical alpha_u in [-1, 1] for alpha_v = {av}")
    return float(au)


def early_stopping_time(
    gamma: float,
    c: float,
    lam: float,
    alpha_u: float,
    alpha_v: float,
    t_max: float,
    *,
    n_grid: int = 400,
) -> float:
    """Remark 1: the first ``t`` with ``min(q_u, q_v) >= gamma`` on the limiting curves.

    Returns ``inf`` if there is none.
    """
    if not 0 < gamma < 1:
        raise ValueError(f"gamma must be in (0, 1), got {gamma}")
    if not t_max > 0:
        raise ValueError(f"t_max must be positive, got {t_max}")
    ts = np.linspace(0.0, float(t_max), positive_int(n_grid, "n_grid"))

    def gap(t):
        d = deterministic_curves(np.atleast_1d(t), c, lam, alpha_u, alpha_v)
        return float(np.minimum(d["qu"], d["qv"])[0] - gamma)

    d = deterministic_curves(ts, c, lam, alpha_u, alpha_v)
    g = np.minimum(d["qu"], d["qv"]) - gamma
    hits = np.nonzero(g >= 0)[0]
    if hits.size == 0:
        return float("inf")
    k = hits[0]
    if k == 0:
        return 0.0
    return float(optimize.brentq(gap, ts[k - 1], ts[k], xtol=1e-10))
