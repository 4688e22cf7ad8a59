r"""Differentially private instrumental-variable regression by noisy two-stage GD.

Paper: H. Liang, Y. Jin, K. Balasubramanian, L. Lai, *Differentially Private Two-Stage
Gradient Descent for Instrumental Variable Regression*, ICLR 2026 (arXiv:2509.22794,
OpenReview ``XQDy4obYLZ``). Chapter 04 of the book.

Chapter folder: ``book/04-dp-iv-regression/``.

DP-2S-GD clips per-sample gradients and adds Gaussian noise to both stages:

.. math::
    \Theta^{t+1} = \Theta^t - \eta\Big[\tfrac1n\sum_i
        \mathrm{clip}_{\gamma_1}\big(z_i(z_i^\top\Theta^t - x_i^\top)\big) + \Xi^t\Big],\\
    \beta^{t+1} = \beta^t - \alpha\Big[\tfrac1n\sum_i
        \mathrm{clip}_{\gamma_2}\big(\Theta^{t\top}z_i(z_i^\top\Theta^t\beta^t - y_i)\big)
        + \nu^t\Big],

with :math:`\mathrm{vec}(\Xi^t)\sim\mathcal N(0,\lambda_1^2 I)`,
:math:`\nu^t\sim\mathcal N(0,\lambda_2^2 I)` and
:math:`\lambda_j = \frac{2\gamma_j}{n}\sqrt{T/\rho_j}` (Proposition 3.1).

Shapes: ``Z`` (n, q), ``X`` (n, p), ``Y`` (n,), ``Theta`` (q, p), ``beta`` (p,). Functions that
run many independent noise draws at once take ``n_runs`` and return a leading run axis.
"""

from __future__ import annotations

import math

import numpy as np

from lib.validate import check_generator, positive, positive_int

# ----------------------------------------------------------------------------- validation


def check_data(Z, X, Y):
    """Validate and return float arrays ``Z (n,q)``, ``X (n,p)``, ``Y (n,)``."""
    Z = np.asarray(Z, dtype=float)
    X = np.asarray(X, dtype=float)
    Y = np.asarray(Y, dtype=float)
    if Z.ndim != 2 or X.ndim != 2 or Y.ndim != 1:
        raise ValueError(f"Z, X must be 2-D and Y 1-D, got shapes {Z.shape}, {X.shape}, {Y.shape}")
    n, q = Z.shape
    if X.shape[0] != n or Y.shape[0] != n:
        raise ValueError(
            f"Z, X, Y must have the same number of rows, got {n}, {X.shape[0]}, {Y.shape[0]}"
        )
    p = X.shape[1]
    if q < p:
        raise ValueError(
            f"need at least as many instruments as regressors (q >= p), got q={q}, p={p}"
        )
    if np.linalg.matrix_rank(Z) < q:
        raise ValueError("Z is rank deficient: the instruments must be linearly independent")
    if not (np.all(np.isfinite(Z)) and np.all(np.isfinite(X)) and np.all(np.isfinite(Y))):
        raise ValueError("Z, X, Y must be finite")
    return Z, X, Y


# ----------------------------------------------------------------------------- data and estimators
def simulate_iv(
    n: int,
    p: int,
    q: int,
    r: int,
    rng: np.random.Generator,
    theta_scale: float = 0.2,
    conf: float = 0.5,
    noise: float = 0.5,
    ols_bias: float | None = 0.5,
):
    r"""The book's linear IV model with a confounder.

    :math:`z\sim\mathcal N(0,I_q)`, :math:`u\sim\mathcal N(0,I_r)`,
    :math:`\Theta^\star=I_{q\times p}+\text{theta\_scale}\cdot G`,
    :math:`x=\Theta^{\star\top}z+\Gamma^\top u+\text{noise}\cdot e`,
    :math:`y=\beta^{\star\top}x+g^\top u+\text{noise}\cdot e'`, with :math:`\Gamma,g` entries
    :math:`\mathcal N(0,\text{conf}^2)` and :math:`\beta^\star\sim\mathcal N(0,I_p)`. The shared
    :math:`u` makes :math:`x` endogenous; :math:`z` is a valid instrument.

    The strength of the endogeneity is fixed rather than left to chance: unless ``ols_bias`` is
    None, :math:`g` is rescaled so that the population OLS bias
    :math:`b=(\Theta^{\star\top}\Theta^\star+\Gamma^\top\Gamma+\text{noise}^2I)^{-1}\Gamma^\top g`
    has norm ``ols_bias``. (With a random :math:`g`, a few per cent of instances are barely
    confounded.)

    Returns a dict with ``Z, X, Y, beta_star, Theta_star, ols_bias`` (the vector :math:`b`).

    Book: eq:`eq-04-model` in book/04-dp-iv-regression/theory.md.
    """
    n, p, q, r = (positive_int(v, k) for v, k in ((n, "n"), (p, "p"), (q, "q"), (r, "r")))
    if q < p:
        raise ValueError(f"need q >= p, got q={q}, p={p}")
    check_generator(rng)
    Theta = np.eye(q, p) + theta_scale * rng.standard_normal((q, p))
    Gam = conf * rng.standard_normal((r, p))
    g = conf * rng.standard_normal(r)
    Exx = Theta.T @ Theta + Gam.T @ Gam + noise**2 * np.eye(p)  # E[x x^T]
    bias = np.linalg.solve(Exx, Gam.T @ g)  # E[xx^T]^{-1} E[x eps_1]
    if ols_bias is not None:
        if not ols_bias >= 0:
            raise ValueError(f"ols_bias must be >= 0 or None, got {ols_bias}")
        scale = ols_bias / max(np.linalg.norm(bias), 1e-300)
        g, bias = g * scale, bias * scale
    beta = rng.standard_normal(p)
    Z = rng.standard_normal((n, q))
    U = rng.standard_normal((n, r))
    X = Z @ Theta + U @ Gam + noise * rng.standard_normal((n, p))
    Y = X @ beta + U @ g + noise * rng.standard_normal(n)
    return {"Z": Z, "X": X, "Y": Y, "beta_star": beta, "Theta_star": Theta, "ols_bias": bias}


def two_sls(Z, X, Y):
    r"""Two-stage least squares: :math:`\hat\Theta=(Z^\top Z)^{-1}Z^\top X`,
    :math:`\hat\beta=(\hat\Theta^\top Z^\top Z\hat\Theta)^{-1}\hat\Theta^\top Z^\top Y`.

    Book: eq:`eq-04-2sls` in book/04-dp-iv-regression/theory.md.
    """
    Z, X, Y = check_data(Z, X, Y)
    Theta = np.linalg.lstsq(Z, X, rcond=None)[0]
    ZT = Z @ Theta
    beta = np.linalg.solve(ZT.T @ ZT, ZT.T @ Y)
    return Theta, beta


def ols(X, Y):
    """Ordinary least squares of ``Y`` on ``X`` (biased under endogeneity)."""
    X = np.asarray(X, dtype=float)
    Y = np.asarray(Y, dtype=float)
    if X.ndim != 2 or Y.shape != (X.shape[0],):
        raise ValueError(f"X must be (n, p) and Y (n,), got {X.shape} and {Y.shape}")
    return np.linalg.lstsq(X, Y, rcond=None)[0]


# ----------------------------------------------------------------------------- privacy
def clip_rows(G, c: float):
    r"""Scale each row of ``G`` (shape (..., n, k)) to Euclidean norm at most ``c``.

    Returns ``(clipped, fraction_clipped)``: :math:`g\mapsto g\min(1,c/\|g\|)`.
    """
    c = positive(c, "c")
    G = np.asarray(G, dtype=float)
    if G.ndim < 2:
        raise ValueError(f"G must have at least 2 dims (rows, features), got shape {G.shape}")
    norms = np.linalg.norm(G, axis=-1, keepdims=True)
    scale = np.minimum(1.0, c / np.maximum(norms, 1e-300))
    return G * scale, float(np.mean(norms > c))


def noise_scale(gamma: float, n: int, T: int, rho: float) -> float:
    r"""Per-coordinate noise s.d. of Proposition 3.1.

    :math:`\lambda=\frac{2\gamma}{n}\sqrt{T/\rho}` (0 when ``rho`` is ``math.inf``).

    Book: prf:`prop-04-privacy` in book/04-dp-iv-regression/theory.md.
    """
    gamma = positive(gamma, "gamma")
    n, T = positive_int(n, "n"), positive_int(T, "T")
    rho = positive(rho, "rho", allow_inf=True)
    if math.isinf(rho):
        return 0.0
    return 2.0 * gamma / n * math.sqrt(T / rho)


def zcdp_cost(gamma: float, lam: float, n: int, T: int) -> float:
    r"""zCDP cost of ``T`` Gaussian steps on a clipped mean (replace-one neighbours).

    Sensitivity :math:`\Delta=2\gamma/n`, each step :math:`\Delta^2/(2\lambda^2)`, composed
    additively.

    Book: prf:`def-04-zcdp` in book/04-dp-iv-regression/theory.md.
    Book: prf:`lem-04-sensitivity` in book/04-dp-iv-regression/theory.md (the sensitivity).
    Book: prf:`prop-04-privacy` in book/04-dp-iv-regression/theory.md (the accountant).
    """
    gamma = positive(gamma, "gamma")
    n, T = positive_int(n, "n"), positive_int(T, "T")
    if (
        isinstance(lam, bool)
        or not isinstance(lam, (int, float, np.integer, np.floating))
        or lam < 0
    ):
        raise ValueError(f"lam must be a non-negative number, got {lam!r}")
    if lam == 0:
        return math.inf
    delta = 2.0 * gamma / n
    return T * delta**2 / (2.0 * lam**2)


def zcdp_to_dp(rho: float, delta: float) -> float:
    r""":math:`\rho`-zCDP implies :math:`(\rho+2\sqrt{\rho\log(1/\delta)},\delta)`-DP."""
    rho = positive(rho, "rho", allow_inf=True)
    if not (0 < delta < 1):
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


# ----------------------------------------------------------------------------- gradients
def per_sample_grads(Z, X, Y, Theta, beta):
    r"""Per-sample gradients of the two least-squares stages.

    ``Theta`` (R, q, p) and ``beta`` (R, p) for ``R`` runs (or without the run axis).
    Returns ``G1`` (R, n, q*p) with rows :math:`\mathrm{vec}(z_i(z_i^\top\Theta-x_i^\top))` and
    ``G2`` (R, n, p) with rows :math:`\Theta^\top z_i(z_i^\top\Theta\beta-y_i)`.
    """
    Theta = np.asarray(Theta, dtype=float)
    beta = np.asarray(beta, dtype=float)
    squeeze = Theta.ndim == 2
    if squeeze:
        Theta, beta = Theta[None], beta[None]
    R = Theta.shape[0]
    n, q = Z.shape
    p = X.shape[1]
    if Theta.shape != (R, q, p) or beta.shape != (R, p):
        raise ValueError(
            f"Theta must be (R, {q}, {p}) and beta (R, {p}), got {Theta.shape} and {beta.shape}"
        )
    H = Z @ Theta  # (R, n, p): z_i^T Theta
    resid1 = H - X  # (R, n, p)
    G1 = (Z[None, :, :, None] * resid1[:, :, None, :]).reshape(R, n, q * p)
    resid2 = np.einsum("rnp,rp->rn", H, beta) - Y  # (R, n)
    G2 = H * resid2[..., None]  # Theta^T z_i (z_i^T Theta beta - y_i)
    if squeeze:
        return G1[0], G2[0]
    return G1, G2


def clipped_mean_grads(Z, X, Y, Theta, beta, gamma1: float, gamma2: float):
    """Clipped per-sample means of both stages: ``(g1 (R,q,p), g2 (R,p), frac1, frac2)``.

    Book: prf:`lem-04-sensitivity` in book/04-dp-iv-regression/theory.md (the mean it bounds).
    """
    G1, G2 = per_sample_grads(Z, X, Y, Theta, beta)
    C1, f1 = clip_rows(G1, gamma1)
    C2, f2 = clip_rows(G2, gamma2)
    q, p = Z.shape[1], X.shape[1]
    return C1.mean(axis=-2).reshape(C1.shape[:-2] + (q, p)), C2.mean(axis=-2), f1, f2


# ----------------------------------------------------------------------------- algorithms
def _check_steps(T, eta, alpha):
    return positive_int(T, "T"), positive(eta, "eta"), positive(alpha, "alpha")


def two_stage_gd(Z, X, Y, T: int, eta: float, alpha: float):
    """Non-private 2S-GD from zero. Returns ``(Theta_traj (T+1,q,p), beta_traj (T+1,p))``.

    Book: eq:`eq-04-2sgd` in book/04-dp-iv-regression/theory.md (the iteration).
    Book: prf:`prop-04-2sgd` in book/04-dp-iv-regression/theory.md (its limit).
    """
    Z, X, Y = check_data(Z, X, Y)
    T, eta, alpha = _check_steps(T, eta, alpha)
    n, q = Z.shape
    p = X.shape[1]
    S, ZX, ZY = Z.T @ Z / n, Z.T @ X / n, Z.T @ Y / n
    Theta, beta = np.zeros((q, p)), np.zeros(p)
    Ths, bs = [Theta.copy()], [beta.copy()]
    for _ in range(T):
        grad1 = S @ Theta - ZX  # (1/n) sum z_i (z_i^T Theta - x_i^T)
        grad2 = Theta.T @ (S @ Theta @ beta - ZY)  # (1/n) sum Theta^T z_i (z_i^T Theta beta - y_i)
        Theta, beta = Theta - eta * grad1, beta - alpha * grad2  # both use Theta^t
        Ths.append(Theta.copy())
        bs.append(beta.copy())
    return np.array(Ths), np.array(bs)


def dp_two_stage_gd(
    Z,
    X,
    Y,
    T: int,
    rho1: float,
    rho2: float,
    gamma1: float,
    gamma2: float,
    eta: float,
    alpha: float,
    rng: np.random.Generator,
    n_runs: int = 1,
):
    r"""DP-2S-GD (the algorithm above), ``n_runs`` independent noise draws at once.

    ``rho1``/``rho2`` are the zCDP budgets passed to :func:`noise_scale` for each stage
    (``math.inf``: no noise on that stage). Step sizes and clip levels must be public
    constants, not tuned on the private data.

    Returns a dict with ``beta`` (R, T+1, p) trajectories, ``Theta`` (R, q, p) at ``T``,
    ``lam1``, ``lam2`` and the largest clipped fractions ``frac1``, ``frac2`` seen.

    Book: prf:`prop-04-privacy` in book/04-dp-iv-regression/theory.md (the noise scales).
    Book: prf:`thm-04-utility` in book/04-dp-iv-regression/utility.md (the algorithm analysed).
    """
    Z, X, Y = check_data(Z, X, Y)
    T, eta, alpha = _check_steps(T, eta, alpha)
    check_generator(rng)
    R = positive_int(n_runs, "n_runs")
    n, q = Z.shape
    p = X.shape[1]
    lam1 = noise_scale(gamma1, n, T, rho1)
    lam2 = noise_scale(gamma2, n, T, rho2)
    Theta = np.zeros((R, q, p))
    beta = np.zeros((R, p))
    traj = np.empty((R, T + 1, p))
    traj[:, 0] = beta
    f1max = f2max = 0.0
    for t in range(T):
        g1, g2, f1, f2 = clipped_mean_grads(Z, X, Y, Theta, beta, gamma1, gamma2)
        f1max, f2max = max(f1max, f1), max(f2max, f2)
        Xi = lam1 * rng.standard_normal((R, q, p)) if lam1 else 0.0
        nu = lam2 * rng.standard_normal((R, p)) if lam2 else 0.0
        Theta, beta = Theta - eta * (g1 + Xi), beta - alpha * (g2 + nu)  # beta step uses Theta^t
        traj[:, t + 1] = beta
    return {
        "beta": traj,
        "Theta": Theta,
        "lam1": lam1,
        "lam2": lam2,
        "frac1": f1max,
        "frac2": f2max,
    }


def beta_noise_mse_exact(Z, X, T: int, eta: float, alpha: float, lam2: float) -> float:
    r"""Exact :math:`\mathbb E\|\beta^T_{DP}-\beta^T\|^2` when only :math:`\beta` is noised
    (:math:`\rho_1=\infty`) and clipping is inactive:
    :math:`\alpha^2\lambda_2^2\sum_{t<T}\|\prod_{s=t+1}^{T-1}(I-\alpha H_s)\|_F^2`,
    :math:`H_s=\Theta^{s\top}\hat\Sigma\Theta^s` along the (deterministic) first-stage path.

    Book: eq:`eq-04-noise-mse` in book/04-dp-iv-regression/utility.md.
    """
    Z = np.asarray(Z, dtype=float)
    X = np.asarray(X, dtype=float)
    T, eta, alpha = _check_steps(T, eta, alpha)
    if isinstance(lam2, bool) or not lam2 >= 0:
        raise ValueError(f"lam2 must be >= 0, got {lam2!r}")
    Ths, _ = two_stage_gd(Z, X, np.zeros(Z.shape[0]), T, eta, alpha)
    n, p = Z.shape[0], X.shape[1]
    S = Z.T @ Z / n
    A = [np.eye(p) - alpha * Th.T @ S @ Th for Th in Ths[:T]]
    total, P = 0.0, np.eye(p)  # P = prod_{s=t+1}^{T-1} A_s, built from t = T-1 down
    for t in range(T - 1, -1, -1):
        total += np.sum(P**2)
        P = P @ A[t]
    return float(alpha**2 * lam2**2 * total)


def public_step_sizes(Theta_star, n: int, q: int):
    r"""The book's data-independent step sizes: :math:`\eta=1/(1+\sqrt{q/n}+\sqrt{6/n})^2`
    and :math:`\alpha=2/(1.2s_{\max}^2+0.8s_{\min}^2)` from the singular values of a *public*
    design matrix ``Theta_star`` (in simulations, the true one)."""
    n, q = positive_int(n, "n"), positive_int(q, "q")
    s = np.linalg.svd(np.asarray(Theta_star, dtype=float), compute_uv=False)
    eta = 1.0 / (1.0 + math.sqrt(q / n) + math.sqrt(6.0 / n)) ** 2
    alpha = 2.0 / (1.2 * s.max() ** 2 + 0.8 * s.min() ** 2)
    return eta, alpha
