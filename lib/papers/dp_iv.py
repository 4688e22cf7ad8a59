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

    Returns a dict with ``Z, X, Y, beta_star, Theta_star, ols_bias`` (the vector :math:`b`) and
    ``eps1_var``, the structural error variance :math:`\sigma_1^2=\|g\|^2+\text{noise}^2`.

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
    return {
        "Z": Z,
        "X": X,
        "Y": Y,
        "beta_star": beta,
        "Theta_star": Theta,
        "ols_bias": bias,
        "eps1_var": float(g @ g + noise**2),
    }


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


def wald_statistic(beta_hat, beta_star, Theta_star, eps1_var: float, n: int) -> float:
    r"""Distance of an estimate from :math:`\beta^\star` in units of the 2SLS asymptotic covariance.

    For isotropic instruments (:math:`\mathbb E zz^\top=I`) and homoskedastic :math:`\epsilon_1`,
    :math:`\sqrt n(\hat\beta_{2SLS}-\beta^\star)\to\mathcal N(0,V)` with
    :math:`V=\sigma_1^2(\Theta^{\star\top}\Theta^\star)^{-1}`, so
    :math:`W=n(\hat\beta-\beta^\star)^\top V^{-1}(\hat\beta-\beta^\star)` is asymptotically
    :math:`\chi^2_p` for 2SLS and grows like :math:`n` for an inconsistent estimate.

    Book: eq:`eq-04-wald` in book/04-dp-iv-regression/theory.md.
    """
    n = positive_int(n, "n")
    eps1_var = positive(eps1_var, "eps1_var")
    d = np.asarray(beta_hat, dtype=float) - np.asarray(beta_star, dtype=float)
    Theta_star = np.asarray(Theta_star, dtype=float)
    if d.ndim != 1 or Theta_star.shape[1] != d.shape[0]:
        raise ValueError(
            f"beta must be (p,) and Theta_star (q, p), got {d.shape} and {Theta_star.shape}"
        )
    v = Theta_star @ d
    return float(n * (v @ v) / eps1_var)


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
def _with_run_axis(Z, X, Theta, beta):
    """``(Theta (R, q, p), beta (R, p), squeeze)``: a run axis for a single run; shapes checked."""
    Theta = np.asarray(Theta, dtype=float)
    beta = np.asarray(beta, dtype=float)
    squeeze = Theta.ndim == 2
    if squeeze:
        Theta, beta = Theta[None], beta[None]
    R, (q, p) = Theta.shape[0], (Z.shape[1], X.shape[1])
    if Theta.shape != (R, q, p) or beta.shape != (R, p):
        raise ValueError(
            f"Theta must be (R, {q}, {p}) and beta (R, {p}), got {Theta.shape} and {beta.shape}"
        )
    return Theta, beta, squeeze


def per_sample_grads(Z, X, Y, Theta, beta):
    r"""Per-sample gradients of the two least-squares stages.

    ``Theta`` (R, q, p) and ``beta`` (R, p) for ``R`` runs (or without the run axis).
    Returns ``G1`` (R, n, q*p) with rows :math:`\mathrm{vec}(z_i(z_i^\top\Theta-x_i^\top))` and
    ``G2`` (R, n, p) with rows :math:`\Theta^\top z_i(z_i^\top\Theta\beta-y_i)`.
    """
    Theta, beta, squeeze = _with_run_axis(Z, X, Theta, beta)
    R, n, q, p = Theta.shape[0], Z.shape[0], Z.shape[1], X.shape[1]
    H = Z @ Theta  # (R, n, p): z_i^T Theta
    resid1 = H - X  # (R, n, p)
    G1 = (Z[None, :, :, None] * resid1[:, :, None, :]).reshape(R, n, q * p)
    resid2 = np.einsum("rnp,rp->rn", H, beta) - Y  # (R, n)
    G2 = H * resid2[..., None]  # Theta^T z_i (z_i^T Theta beta - y_i)
    if squeeze:
        return G1[0], G2[0]
    return G1, G2


def clipped_mean_grads(Z, X, Y, Theta, beta, gamma1: float, gamma2: float):
    r"""Clipped per-sample means of both stages: ``(g1 (R,q,p), g2 (R,p), frac1, frac2)``.

    Both per-sample gradients are rank one, so their norms factor and no (R, n, q*p) tensor is
    formed: :math:`\|z_i r_i^\top\|_F=\|z_i\|\,\|r_i\|` with :math:`r_i=\Theta^\top z_i-x_i`, and
    :math:`\|h_i e_i\|=\|h_i\|\,|e_i|` with :math:`h_i=\Theta^\top z_i`,
    :math:`e_i=h_i^\top\beta-y_i`. With :math:`c_i=\min(1,\gamma/\text{norm}_i)` the clipped
    means are :math:`Z^\top\mathrm{diag}(c)R/n` and :math:`H^\top(c\odot e)/n`. Agrees with
    clipping the rows of :func:`per_sample_grads` to rounding (unit-tested).

    Book: prf:`lem-04-sensitivity` in book/04-dp-iv-regression/theory.md (the mean it bounds).
    """
    gamma1, gamma2 = positive(gamma1, "gamma1"), positive(gamma2, "gamma2")
    Theta, beta, squeeze = _with_run_axis(Z, X, Theta, beta)
    n = Z.shape[0]
    H = Z @ Theta  # (R, n, p): rows h_i = Theta^T z_i
    resid1 = H - X  # (R, n, p): r_i
    norm1 = np.sqrt(np.einsum("nq,nq->n", Z, Z) * np.einsum("rnp,rnp->rn", resid1, resid1))
    c1 = np.minimum(1.0, gamma1 / np.maximum(norm1, 1e-300))
    resid2 = (H @ beta[..., None])[..., 0] - Y  # (R, n): e_i
    norm2 = np.sqrt(np.einsum("rnp,rnp->rn", H, H)) * np.abs(resid2)
    c2 = np.minimum(1.0, gamma2 / np.maximum(norm2, 1e-300))
    g1 = Z.T @ (c1[..., None] * resid1) / n  # (R, q, p), batched BLAS
    g2 = ((c2 * resid2)[:, None, :] @ H)[:, 0] / n  # (R, p)
    f1, f2 = float(np.mean(norm1 > gamma1)), float(np.mean(norm2 > gamma2))
    if squeeze:
        return g1[0], g2[0], f1, f2
    return g1, g2, f1, f2


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


# ----------------------------------------------------------------------------- derived predictions
def first_stage_noise_var(lam1: float, eta: float) -> float:
    r"""Stationary per-entry variance of :math:`\Theta^t-\hat\Theta` under first-stage noise.

    With :math:`\hat\Sigma\approx I` the error follows
    :math:`E^{t+1}=(1-\eta)E^t-\eta\Xi^t`, an AR(1) with stationary variance
    :math:`s^2=\eta^2\lambda_1^2/(1-(1-\eta)^2)=\eta\lambda_1^2/(2-\eta)` (for :math:`0<\eta<2`).

    Book: eq:`eq-04-attenuation` in book/04-dp-iv-regression/utility.md.
    """
    if isinstance(lam1, bool) or not lam1 >= 0:
        raise ValueError(f"lam1 must be >= 0, got {lam1!r}")
    eta = positive(eta, "eta")
    if eta >= 2:
        raise ValueError(f"eta must be in (0, 2), got {eta}")
    return eta * lam1**2 / (2.0 - eta)


def attenuated_beta(H, beta_hat, s2: float, trace_sigma: float):
    r"""Mean-field fixed point of the second stage under first-stage noise (errors in variables).

    If :math:`\Theta^t=\hat\Theta+E^t` with :math:`E^t` independent of :math:`\beta^t`, entries of
    variance :math:`s^2`, then :math:`\mathbb E H_t=\hat H+s^2\operatorname{tr}(\hat\Sigma)I` while
    :math:`\mathbb E\,\Theta^{t\top}Z^\top Y/n=\hat H\hat\beta`, so the mean iterate settles at
    :math:`\bar\beta=(\hat H+s^2\operatorname{tr}\hat\Sigma\,I)^{-1}\hat H\hat\beta`: every
    direction of :math:`\hat H` with eigenvalue :math:`\mu` is shrunk by
    :math:`\mu/(\mu+s^2\operatorname{tr}\hat\Sigma)`.

    Book: eq:`eq-04-attenuation` in book/04-dp-iv-regression/utility.md.
    """
    H = np.asarray(H, dtype=float)
    beta_hat = np.asarray(beta_hat, dtype=float)
    if isinstance(s2, bool) or not s2 >= 0:
        raise ValueError(f"s2 must be >= 0, got {s2!r}")
    trace_sigma = positive(trace_sigma, "trace_sigma")
    p = beta_hat.shape[0]
    return np.linalg.solve(H + s2 * trace_sigma * np.eye(p), H @ beta_hat)


def critical_T(rho1: float, n: int, gamma1: float, q: int, eta: float, mu_min: float) -> float:
    r"""The number of steps at which first-stage noise halves the weakest direction.

    Setting :math:`s^2q=\mu_{\min}(\hat H)` in :func:`attenuated_beta`, with
    :math:`s^2=\eta\lambda_1^2/(2-\eta)` and :math:`\lambda_1^2=4\gamma_1^2T/(n^2\rho_1)`, gives

    .. math:: T_c=\frac{\rho_1n^2\mu_{\min}(2-\eta)}{4\gamma_1^2q\,\eta},

    our reading of condition (5): with :math:`\gamma_1\propto(\sqrt q+\sqrt\tau)^2` it scales as
    :math:`\rho_1n^2/(\sqrt q+\sqrt\tau)^6`.

    Book: eq:`eq-04-critical-T` in book/04-dp-iv-regression/utility.md.
    """
    rho1 = positive(rho1, "rho1")
    n, q = positive_int(n, "n"), positive_int(q, "q")
    gamma1, mu_min = positive(gamma1, "gamma1"), positive(mu_min, "mu_min")
    eta = positive(eta, "eta")
    if eta >= 2:
        raise ValueError(f"eta must be in (0, 2), got {eta}")
    return rho1 * n**2 * mu_min * (2.0 - eta) / (4.0 * gamma1**2 * q * eta)


def u_curve_closed_form(H, beta_hat, beta_star, T_max: int, eta: float, alpha: float, lam2):
    r"""Mean squared error :math:`\mathbb E\|\beta^T-\beta^\star\|^2` for ``T = 1..T_max`` when only
    :math:`\beta` is noised (:math:`\rho_1=\infty`) and clipping is inactive.

    With :math:`\hat\Sigma\approx I` in the first-stage transient, :math:`\Theta^t=c_t\hat\Theta`,
    :math:`c_t=1-(1-\eta)^t`, so :math:`H_t=c_t^2\hat H` and :math:`b_t=c_t\hat H\hat\beta`: in the
    eigenbasis :math:`(\mu_i,u_i)` of :math:`\hat H` each coordinate is a scalar recursion,

    .. math:: m_i^{t+1}=(1-\alpha c_t^2\mu_i)m_i^t+\alpha c_t\mu_i\hat b_i,\qquad
              v_i^{t+1}=(1-\alpha c_t^2\mu_i)^2v_i^t+\alpha^2\lambda_2^2,

    and :math:`\mathrm{MSE}(T)=\|Um^T-\beta^\star\|^2+\sum_iv_i^T`. For :math:`c_t\equiv1` the
    sums close:
    :math:`m_i^T=\hat b_i(1-(1-\alpha\mu_i)^T)` and
    :math:`v_i^T=\alpha^2\lambda_2^2(1-(1-\alpha\mu_i)^{2T})/(1-(1-\alpha\mu_i)^2)`.

    ``lam2`` is a function of ``T`` (the noise scale of a ``T``-step run, :func:`noise_scale`) or a
    number. Returns an array of shape ``(T_max,)``.

    Book: eq:`eq-04-u-curve` in book/04-dp-iv-regression/utility.md.
    """
    H = np.asarray(H, dtype=float)
    beta_hat = np.asarray(beta_hat, dtype=float)
    beta_star = np.asarray(beta_star, dtype=float)
    T_max = positive_int(T_max, "T_max")
    eta, alpha = positive(eta, "eta"), positive(alpha, "alpha")
    mu, U = np.linalg.eigh(H)
    b = U.T @ beta_hat
    t = np.arange(T_max)
    c = 1.0 - (1.0 - eta) ** t  # c_0 = 0: Theta^0 = 0
    a = 1.0 - alpha * c[:, None] ** 2 * mu[None, :]  # (T_max, p): contraction of step t
    m = np.zeros_like(b)
    gain = np.zeros_like(b)  # sum over steps of the squared propagated unit noise
    out = np.empty(T_max)
    lam_of = lam2 if callable(lam2) else (lambda _T: lam2)
    for k in range(T_max):  # p scalar recursions; T_max is small
        m = a[k] * m + alpha * c[k] * mu * b
        gain = a[k] ** 2 * gain + alpha**2
        out[k] = np.sum((U @ m - beta_star) ** 2) + float(lam_of(k + 1)) ** 2 * np.sum(gain)
    return out
