r"""Prophet inequalities with noisy linear rewards (chapter 16).

Paper: J. Kim, V. Perchet, *Learning in Prophet Inequalities with Noisy Observations*, ICLR 2026
(arXiv:2604.01789, OpenReview ``TOyf8Z4y22``).

Chapter folder: ``book/16-prophet-noisy-rewards/``.

At step :math:`i` a gambler sees a feature :math:`x_i\sim D_{x,i}` (known law) and a noisy signal
:math:`y_i=x_i^\top\theta+\eta_i`; stopping at :math:`\tau` pays :math:`X_\tau=x_\tau^\top\theta`.
With a ridge estimate :math:`\hat\theta=V^{-1}\sum y_tx_t`, :math:`V=\beta I+\sum x_tx_t^\top`, the
policies threshold the lower confidence bound

.. math::
    X^{LCB}(x)=x^\top\hat\theta-\rho\,\|x\|_{V^{-1}} .

Everything here is vectorised over independent runs (axis 0). Features of the i.i.d.
environment are uniform on :math:`[0,a]^d`, :math:`a=1/\sqrt d`, as in the official code; the
non-i.i.d. environment draws a box per step.
"""

from __future__ import annotations

import numpy as np
from scipy import integrate, special, stats

from lib.validate import check_generator, nonnegative, positive_int


# --------------------------------------------------------------------------- checks
def _check_horizon(n, ell):
    n = positive_int(n, "n")
    ell = int(ell)
    if not 1 <= ell < n:
        raise ValueError(f"ell must satisfy 1 <= ell < n = {n}, got {ell}")
    return n, ell


def default_ell(n: int) -> int:
    r"""The paper's exploration length :math:`\ell_n=\lfloor n^{2/3}\rfloor`."""
    return int(np.floor(positive_int(n, "n") ** (2 / 3)))


# --------------------------------------------------------------------------- environments
def make_theta(d: int, c: float, rng) -> np.ndarray:
    r""":math:`\theta=c\,\theta_0`, :math:`\theta_0\sim U[0,1/\sqrt d]^d`.

    This is the code's draw, scaled by ``c``.
    """
    d = positive_int(d, "d")
    check_generator(rng)
    if not c > 0:
        raise ValueError(f"c must be a positive reward scale, got {c}")
    return c * rng.uniform(0, 1 / np.sqrt(d), size=d)


def iid_features(shape, d: int, rng) -> np.ndarray:
    """Features uniform on ``[0, 1/sqrt(d)]^d``, array of shape ``shape + (d,)``."""
    return rng.uniform(0, 1 / np.sqrt(d), size=tuple(shape) + (d,))


def make_noniid_boxes(n: int, d: int, rng, a: float | None = None):
    """Per-step boxes ``[lo_i, hi_i]``.

    Centres and widths are ``U[0, a]^d``, clipped to ``[0, a]`` (``a = 1/sqrt d``).
    """
    n, d = positive_int(n, "n"), positive_int(d, "d")
    check_generator(rng)
    a = 1 / np.sqrt(d) if a is None else float(a)
    centre = rng.uniform(0, a, size=(n, d))
    width = rng.uniform(0, a, size=(n, d))
    return np.clip(centre - width / 2, 0, a), np.clip(centre + width / 2, 0, a)


def box_features(lo, hi, n_runs: int, rng) -> np.ndarray:
    """One feature per step from its box, for ``n_runs`` runs: shape ``(n_runs, n, d)``."""
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    return lo + (hi - lo) * rng.random((positive_int(n_runs, "n_runs"),) + lo.shape)


# --------------------------------------------------------------------------- estimation
def ridge_fit(X, y, beta: float = 1.0):
    r"""Batched ridge regression. ``X``: ``(R, l, d)``, ``y``: ``(R, l)``.

    Returns ``(theta_hat, V, Vinv)`` with :math:`V=\beta I+X^\top X` and
    :math:`\hat\theta=V^{-1}X^\top y`.
    """
    X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    if X.ndim == 2:
        X, y = X[None], y[None]
    if X.ndim != 3 or y.shape != X.shape[:2]:
        raise ValueError(f"X must have shape (R, l, d) and y (R, l), got {X.shape} and {y.shape}")
    if not beta > 0:
        raise ValueError(f"beta must be positive, got {beta}")
    d = X.shape[2]
    V = beta * np.eye(d) + np.einsum("rli,rlj->rij", X, X)
    Vinv = np.linalg.inv(V)
    theta_hat = np.einsum("rij,rj->ri", Vinv, np.einsum("rli,rl->ri", X, y))
    return theta_hat, V, Vinv


def conf_radius(
    d: int,
    n: int,
    *,
    sigma: float | None = None,
    S: float | None = None,
    beta: float = 1.0,
    L: float = 1.0,
    delta: float | None = None,
    mode: str = "code",
) -> float:
    r"""Confidence radius :math:`\rho` of the LCB.

    ``mode="code"``: :math:`\sqrt{d\log n}` (the official code; no :math:`\sigma`, no :math:`S`).
    ``mode="oful"``: :math:`\sigma\sqrt{2\log(1/\delta)+d\log(1+nL/(\beta d))}+\sqrt{\beta S}`
    (Abbasi-Yadkori et al., 2011), valid simultaneously for all :math:`x` with probability
    :math:`1-\delta` (default :math:`\delta=1/n`).

    Book: prf:`lem-16-sandwich` in book/16-prophet-noisy-rewards/theory.md
    (the radius, ``mode="oful"``).
    """
    d, n = positive_int(d, "d"), positive_int(n, "n")
    if mode == "code":
        return float(np.sqrt(d * np.log(n)))
    if mode == "oful":
        if sigma is None or S is None:
            raise ValueError("mode='oful' needs sigma and S")
        sigma = nonnegative(sigma, "sigma")
        if S < 0:
            raise ValueError(f"S must be non-negative, got {S}")
        delta = 1 / n if delta is None else float(delta)
        if not 0 < delta < 1:
            raise ValueError(f"delta must be in (0, 1), got {delta}")
        return float(
            sigma * np.sqrt(2 * np.log(1 / delta) + d * np.log(1 + n * L / (beta * d)))
            + np.sqrt(beta * S)
        )
    raise ValueError(f"mode must be 'code' or 'oful', got {mode!r}")


def lcb(Z, theta_hat, Vinv, rad: float) -> np.ndarray:
    r"""The lower confidence bound :math:`z^\top\hat\theta-\rho\|z\|_{V^{-1}}`.

    ``Z`` has shape ``(R, M, d)``, with per-run ``theta_hat (R, d)``, ``Vinv (R, d, d)``.

    Book: prf:`lem-16-sandwich` in book/16-prophet-noisy-rewards/theory.md.
    """
    Z = np.asarray(Z, dtype=float)
    theta_hat, Vinv = np.asarray(theta_hat, dtype=float), np.asarray(Vinv, dtype=float)
    if (
        Z.ndim != 3
        or theta_hat.shape != (Z.shape[0], Z.shape[2])
        or Vinv.shape != (Z.shape[0],) + (Z.shape[2],) * 2
    ):
        raise ValueError(
            f"Z must be (R, M, d) with theta_hat (R, d) and Vinv (R, d, d); got {Z.shape}, "
            f"{theta_hat.shape}, {Vinv.shape}"
        )
    # explicit sums over the (small) feature dimension: much faster than batched matmuls with
    # d = 2
    d = Z.shape[2]
    cols = [Z[..., i] for i in range(d)]
    mean = sum(theta_hat[:, i, None] * cols[i] for i in range(d))
    quad = sum(Vinv[:, i, i, None] * cols[i] ** 2 for i in range(d))
    for i in range(d):
        for j in range(i + 1, d):
            quad = quad + 2 * Vinv[:, i, j, None] * cols[i] * cols[j]
    return mean - rad * np.sqrt(np.maximum(quad, 0.0))


def top_quantile(values, n: int) -> np.ndarray:
    r"""The :math:`(1-1/n)` sample quantile along the last axis.

    It is the :math:`k`-th largest value, :math:`k=\lfloor M/n\rfloor`. Requires :math:`M\ge20n`,
    so that :math:`k\ge20` and the threshold's pass probability is within about
    :math:`1/\sqrt{20}` of :math:`1/n` in relative terms. (With :math:`M=10^4` samples and
    :math:`n=10^5`, as in the official code, no order statistic is a :math:`(1-1/n)` quantile:
    ``np.quantile`` then returns a mix of the two largest draws, see
    :func:`numpy_quantile_ranks`.)
    """
    values = np.asarray(values, dtype=float)
    n = positive_int(n, "n")
    M = values.shape[-1]
    if M < 20 * n:
        raise ValueError(
            f"values must hold at least 20 n = {20 * n} samples along the last axis, got {M}"
        )
    k = M // n
    return np.partition(values, M - k, axis=-1)[..., M - k]


def order_stat_stop_probability(n_decide: int, M: int, k: int) -> float:
    r"""Exact stopping probability when the threshold is the ``k``-th largest of ``M`` draws.

    The calibration draws and the ``n_decide`` decision items are i.i.d. from one continuous
    law (given :math:`\hat\theta`). The pass probability of each decision item is then
    :math:`p=1-F(\text{threshold})\sim\mathrm{Beta}(k,M-k+1)` (the :math:`k`-th smallest of
    :math:`M` uniforms), whatever :math:`F`, and given :math:`p` the items pass independently, so

    .. math::
        \Pr[\text{stop}]=1-\mathbb E(1-p)^{n'}
        =1-\frac{\Gamma(M+1)\,\Gamma(M-k+1+n')}{\Gamma(M-k+1)\,\Gamma(M+1+n')} .

    Book: eq. `eq-16-orderstat` in book/16-prophet-noisy-rewards/theory.md.
    """
    n_decide, M, k = positive_int(n_decide, "n_decide"), positive_int(M, "M"), positive_int(k, "k")
    if k > M:
        raise ValueError(f"k must be at most M = {M}, got {k}")
    log_q = (
        special.gammaln(M + 1)
        + special.gammaln(M - k + 1 + n_decide)
        - special.gammaln(M - k + 1)
        - special.gammaln(M + 1 + n_decide)
    )
    return float(-np.expm1(log_q))


def expected_stop_probability(n_decide: int, M: int, n: int) -> float:
    r"""Exact stopping probability of a quantile rule calibrated on ``M`` fresh samples.

    The threshold is the :math:`k`-th largest of :math:`M` i.i.d. values,
    :math:`k=\lfloor M/n\rfloor` (as :func:`top_quantile` takes it); see
    :func:`order_stat_stop_probability`. As
    :math:`M\to\infty` this tends to :math:`1-(1-1/n)^{n'}`, from below by Jensen's inequality.
    """
    M, n = positive_int(M, "M"), positive_int(n, "n")
    return order_stat_stop_probability(n_decide, M, max(1, M // n))


def numpy_quantile_ranks(M: int, q: float) -> tuple[int, int, float]:
    r"""Which order statistics ``np.quantile(v, q)`` (default ``method="linear"``) interpolates.

    With :math:`h=(M-1)q` the value is
    :math:`(1-g)\,v_{(\lfloor h\rfloor)}+g\,v_{(\lfloor h\rfloor+1)}` (ascending, 0-based),
    :math:`g=h-\lfloor h\rfloor`. Returned as ranks *from the top*
    ``(k_low, k_high, g)``: the threshold lies between the ``k_low``-th largest value (weight
    :math:`1-g`) and the ``k_high = k_low - 1``-th largest (weight :math:`g`); ``k_high = 0``
    means no upper neighbour (``g = 0``).
    """
    M = positive_int(M, "M")
    if not 0 <= q <= 1:
        raise ValueError(f"q must be in [0, 1], got {q}")
    h = (M - 1) * q
    j = int(np.floor(h))
    return M - j, M - j - 1, float(h - j)


def numpy_quantile_stop_bracket(n_decide: int, M: int, n: int) -> tuple[float, float]:
    r"""Exact bracket of the stopping probability of a rule calibrated by ``np.quantile``.

    The official code sets :math:`\alpha` = ``np.quantile(lcb_of_M_draws, 1 - 1/n)``, an
    interpolation between the ``k_low``-th and ``k_high``-th largest draws
    (:func:`numpy_quantile_ranks`). Since
    the threshold lies between those two order statistics and the stopping probability is
    monotone in it, :math:`\Pr[\text{stop}]` lies between :func:`order_stat_stop_probability` at
    ``k_high`` (lower end) and at ``k_low`` (upper end), whatever the law of the LCB.
    At :math:`M=10^4`, :math:`n=10^5` these are the sample maximum and the second largest.

    Book: prf:`prop-16-numpy-quantile` in book/16-prophet-noisy-rewards/paper.md.
    """
    k_low, k_high, g = numpy_quantile_ranks(M, 1 - 1 / positive_int(n, "n"))
    hi = order_stat_stop_probability(n_decide, M, k_low)
    lo = order_stat_stop_probability(n_decide, M, k_high) if (k_high >= 1 and g > 0) else hi
    return lo, hi


def numpy_quantile_stop_quadratic_tail(n_decide: int, M: int, n: int) -> float:
    r"""Stopping probability of the ``np.quantile`` threshold when the upper tail is quadratic.

    If :math:`1-F(s)=C(s_{\max}-s)^2` near the top (the trapezoid law; a statistic whose maximum
    over the feature box sits at a corner with non-zero gradient), then :math:`\sqrt{1-F}` is
    linear in :math:`s` there, and the interpolated threshold
    :math:`(1-g)\,v_{(k_{low})}+g\,v_{(k_{high})}` (ranks from the top,
    :func:`numpy_quantile_ranks`) passes items with probability
    :math:`p=\big((1-g)\sqrt{U_{(2)}}+g\sqrt{U_{(1)}}\big)^2`, :math:`U_{(1)}<U_{(2)}` the two
    smallest of :math:`M` uniforms (joint density :math:`M(M-1)(1-u_2)^{M-2}`). Then
    :math:`\Pr[\text{stop}]=1-\mathbb E(1-p)^{n'}`, by a two-dimensional quadrature. Only for
    ``k_low = 2`` (:math:`M<2n`, e.g. the code's :math:`M=10^4`, :math:`n=10^5`).

    Book: prf:`prop-16-numpy-quantile` in book/16-prophet-noisy-rewards/paper.md (Exercise 5).
    """
    n_decide, M, n = positive_int(n_decide, "n_decide"), positive_int(M, "M"), positive_int(n, "n")
    k_low, _, g = numpy_quantile_ranks(M, 1 - 1 / n)
    if k_low != 2:
        raise ValueError(
            f"M must be at most n + 1 (np.quantile mixing the two largest draws), got {M}"
        )

    def f(u1, u2):
        p = ((1 - g) * np.sqrt(u2) + g * np.sqrt(u1)) ** 2
        return -np.expm1(n_decide * np.log1p(-p)) * M * (M - 1) * np.exp((M - 2) * np.log1p(-u2))

    # (1 - u2)^(M - 2) < e^-78 beyond u2 = 80 / M
    return float(
        integrate.dblquad(f, 0, min(1.0, 80 / M), 0, lambda u2: u2, epsabs=1e-13, epsrel=1e-11)[0]
    )


# ---------------------------------------------------------------- policies (vectorised over runs)
def _first_true(mask):
    """Index of the first True along axis 1 and whether there is one."""
    any_ = mask.any(axis=1)
    return np.where(any_, mask.argmax(axis=1), -1), any_


def _setup_iid(theta, sigma, n, n_runs, rng, ell, rad, M_factor):
    """Validated common arguments of the i.i.d. LCB policies."""
    theta = np.asarray(theta, dtype=float)
    d = theta.size
    sigma = nonnegative(sigma, "sigma")
    n, ell = _check_horizon(n, default_ell(n) if ell is None else ell)
    n_runs = positive_int(n_runs, "n_runs")
    check_generator(rng)
    rad = conf_radius(d, n) if rad is None else float(rad)
    return theta, d, sigma, n, ell, n_runs, rad, positive_int(M_factor, "M_factor") * n


def etd_lcbt_iid(
    theta,
    sigma: float,
    n: int,
    n_runs: int,
    rng,
    *,
    ell: int | None = None,
    beta: float = 1.0,
    rad: float | None = None,
    M_factor: int = 20,
    M: int | None = None,
    quantile: str = "order",
    chunk: int = 25,
) -> dict:
    r"""Explore-then-Decide with the LCB threshold (Algorithm ETD-LCBT, i.i.d. features).

    Explore for ``ell`` steps (never stop), fit ridge, set :math:`\alpha` to the :math:`(1-1/n)`
    quantile of :math:`X^{LCB}(z)`, :math:`z\sim D_x`, from ``M_factor * n`` fresh calibration draws
    per run (or ``M`` draws when given), then stop at the first :math:`i>\ell` with
    :math:`X^{LCB}(x_i)\ge\alpha`. ``quantile="order"`` takes the
    :math:`\lfloor M/n\rfloor`-th largest draw (:func:`top_quantile`, needs :math:`M\ge20n`);
    ``quantile="numpy"`` takes
    ``np.quantile(draws, 1 - 1/n)`` as the official code does (any ``M``; the code uses
    :math:`M=10^4`, see :func:`numpy_quantile_stop_bracket`). Returns
    per-run ``reward`` (0 if no stop), ``stopped``, ``tau`` (-1 if none), ``maxima``
    (:math:`\max_{i\le n}X_i`), ``alpha``, and the ridge fit of the exploration phase,
    ``theta_hat`` :math:`(R,d)` and ``V`` :math:`(R,d,d)`.

    Book: prf:`thm-16-etd` in book/16-prophet-noisy-rewards/theory.md.
    """
    theta, d, sigma, n, ell, n_runs, rad, M_ = _setup_iid(
        theta, sigma, n, n_runs, rng, ell, rad, M_factor
    )
    M = M_ if M is None else positive_int(M, "M")
    if quantile not in ("order", "numpy"):
        raise ValueError(f"quantile must be 'order' or 'numpy', got {quantile!r}")
    out = {k: [] for k in ("reward", "stopped", "tau", "maxima", "alpha", "theta_hat", "V")}
    # calibration blocks of at most 10^6 draws (16 MB at d = 2): larger blocks go to fresh
    # memory maps each time and cost more in page faults than in arithmetic
    chunk = max(1, min(int(chunk), int(1e6 // M)))
    for start in range(0, n_runs, chunk):
        r = min(chunk, n_runs - start)
        x = iid_features((r, n), d, rng)
        X = x @ theta
        y = X[:, :ell] + sigma * rng.standard_normal((r, ell))
        th, V, Vinv = ridge_fit(x[:, :ell], y, beta)
        Z = iid_features((r, M), d, rng)
        if quantile == "order":
            alpha = top_quantile(lcb(Z, th, Vinv, rad), n)
        else:
            alpha = np.quantile(lcb(Z, th, Vinv, rad), 1 - 1 / n, axis=-1)
        pass_ = lcb(x[:, ell:], th, Vinv, rad) >= alpha[:, None]
        idx, stopped = _first_true(pass_)
        tau = np.where(stopped, idx + ell, -1)
        out["reward"].append(np.where(stopped, X[np.arange(r), np.maximum(tau, 0)], 0.0))
        out["stopped"].append(stopped)
        out["tau"].append(tau)
        out["maxima"].append(X.max(axis=1))
        out["alpha"].append(alpha)
        out["theta_hat"].append(th)
        out["V"].append(V)
    return {k: np.concatenate(v) for k, v in out.items()}


def eps_greedy_lcbt(
    theta,
    sigma: float,
    n: int,
    n_runs: int,
    rng,
    *,
    ell: int | None = None,
    beta: float = 1.0,
    rad: float | None = None,
    M_factor: int = 20,
    M: int | None = None,
    quantile: str = "order",
) -> dict:
    r""":math:`\varepsilon`-Greedy-LCBT.

    Explore with probability :math:`\varepsilon=\sqrt{\ell_n/n}` (never stop then), else decide.
    Our variant, stated because recalibrating after every exploration costs :math:`O(Mn)`: the
    threshold is recomputed (the :math:`(1-1/n)` quantile of the LCB from fresh draws) when the
    number of explorations reaches :math:`2,4,8,\dots`; before the first recalibration the gambler
    only explores. ``M`` and ``quantile`` set the calibration as in :func:`etd_lcbt_iid`
    (``quantile="numpy"`` with ``M=10**4`` is the official code's). Same outputs as
    :func:`etd_lcbt_iid`.

    Book: prf:`thm-16-etd` in book/16-prophet-noisy-rewards/theory.md
    (its :math:`\varepsilon`-Greedy-LCBT, our variant).
    """
    theta, d, sigma, n, ell, n_runs, rad, M_ = _setup_iid(
        theta, sigma, n, n_runs, rng, ell, rad, M_factor
    )
    M = M_ if M is None else positive_int(M, "M")
    if quantile not in ("order", "numpy"):
        raise ValueError(f"quantile must be 'order' or 'numpy', got {quantile!r}")
    eps = np.sqrt(ell / n)
    reward, stopped_all, tau_all, maxima, alphas = [], [], [], [], []
    for _ in range(n_runs):
        x = iid_features((n,), d, rng)
        X = x @ theta
        explore = rng.random(n) < eps
        y = X + sigma * rng.standard_normal(n)
        ex_idx = np.nonzero(explore)[0]
        # recalibration points: after the 2^j-th exploration
        marks = [ex_idx[k - 1] for k in 2 ** np.arange(1, 32) if k <= ex_idx.size]
        tau, alpha = -1, np.nan
        bounds = marks + [n]
        for j, m in enumerate(marks):
            used = ex_idx[ex_idx <= m]
            th, _, Vinv = ridge_fit(x[None, used], y[None, used], beta)
            calib = lcb(iid_features((1, M), d, rng), th, Vinv, rad)
            if quantile == "order":
                alpha = top_quantile(calib, n)[0]
            else:
                alpha = float(np.quantile(calib[0], 1 - 1 / n))
            seg = np.arange(m + 1, bounds[j + 1])
            seg = seg[~explore[seg]]
            if seg.size:
                ok = lcb(x[None, seg], th, Vinv, rad)[0] >= alpha
                if ok.any():
                    tau = int(seg[ok.argmax()])
                    break
        reward.append(X[tau] if tau >= 0 else 0.0)
        stopped_all.append(tau >= 0)
        tau_all.append(tau)
        maxima.append(X.max())
        alphas.append(alpha)
    return dict(
        reward=np.array(reward),
        stopped=np.array(stopped_all),
        tau=np.array(tau_all),
        maxima=np.array(maxima),
        alpha=np.array(alphas),
    )


def gusein_zade(theta, sigma: float, n: int, n_runs: int, rng) -> dict:
    r"""Secretary-style baseline on the noisy signals.

    Watch :math:`\lceil n/e\rceil` steps, then stop at the first :math:`y_i` above their maximum.
    Pays the true :math:`X_\tau`.
    """
    theta = np.asarray(theta, dtype=float)
    sigma = nonnegative(sigma, "sigma")
    n, n_runs = positive_int(n, "n"), positive_int(n_runs, "n_runs")
    check_generator(rng)
    x = iid_features((n_runs, n), theta.size, rng)
    X = x @ theta
    y = X + sigma * rng.standard_normal((n_runs, n))
    m = int(np.ceil(n / np.e))
    best = y[:, :m].max(axis=1)
    idx, stopped = _first_true(y[:, m:] > best[:, None])
    tau = np.where(stopped, idx + m, -1)
    reward = np.where(stopped, X[np.arange(n_runs), np.maximum(tau, 0)], 0.0)
    return dict(reward=reward, stopped=stopped, tau=tau, maxima=X.max(axis=1))


def oracle_quantile(theta, n: int, n_runs: int, rng, alpha: float, *, chunk: int = 100) -> dict:
    r"""Known-:math:`\theta` single threshold: stop at the first :math:`X_i\ge\alpha`.

    Pass ``alpha`` = the exact :math:`(1-1/n)` quantile, e.g. :func:`trapezoid_quantile`.

    Book: prf:`thm-16-classical` in book/16-prophet-noisy-rewards/theory.md (the rule of part 2).
    """
    theta = np.asarray(theta, dtype=float)
    n, n_runs = positive_int(n, "n"), positive_int(n_runs, "n_runs")
    check_generator(rng)
    out = {k: [] for k in ("reward", "stopped", "tau", "maxima")}
    for start in range(0, n_runs, chunk):
        r = min(chunk, n_runs - start)
        X = iid_features((r, n), theta.size, rng) @ theta
        idx, stopped = _first_true(X >= alpha)
        out["reward"].append(np.where(stopped, X[np.arange(r), np.maximum(idx, 0)], 0.0))
        out["stopped"].append(stopped)
        out["tau"].append(idx)
        out["maxima"].append(X.max(axis=1))
    return {k: np.concatenate(v) for k, v in out.items()}


def _mc_half_emax(Zf_theta):
    """Half the Monte Carlo mean of the per-draw maximum (axis -1), per run."""
    return 0.5 * Zf_theta.max(axis=-1).mean(axis=-1)


def etd_lcbt_noniid(
    lo,
    hi,
    theta,
    sigma: float,
    n_runs: int,
    rng,
    *,
    ell: int | None = None,
    beta: float = 1.0,
    rad: float | None = None,
    n_mc: int = 50,
    window: bool = False,
) -> dict:
    r"""ETD-LCBT for non-identical boxes (Theorem 5.1).

    With window access (Theorem 5.4) when ``window``. After ``ell`` exploration steps,
    :math:`\alpha=\tfrac12\mathbb E[\max_{s>\ell}z_s^\top\hat\theta]` by ``n_mc`` Monte Carlo draws
    of the future features. With window access the expectation also includes the observed window
    :math:`x_1,\dots,x_{\ell+1}` (through :math:`\hat\theta`), and at time :math:`\ell+1` the
    gambler may take the window item with the largest LCB if it clears :math:`\alpha`. Returns
    per-run ``reward``, ``stopped``, ``tau``, ``maxima`` (all steps), ``maxima_after`` (steps after
    ``ell``), ``alpha``.

    Book: prf:`thm-16-noniid` in book/16-prophet-noisy-rewards/theory.md.
    """
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    theta = np.asarray(theta, dtype=float)
    n, d = lo.shape
    sigma = nonnegative(sigma, "sigma")
    n, ell = _check_horizon(n, default_ell(n) if ell is None else ell)
    n_runs, n_mc = positive_int(n_runs, "n_runs"), positive_int(n_mc, "n_mc")
    check_generator(rng)
    rad = conf_radius(d, n) if rad is None else float(rad)
    out = {k: [] for k in ("reward", "stopped", "tau", "maxima", "maxima_after", "alpha")}
    for _ in range(n_runs):
        x = box_features(lo, hi, 1, rng)[0]
        X = x @ theta
        y = X[:ell] + sigma * rng.standard_normal(ell)
        th, _, Vinv = ridge_fit(x[None, :ell], y[None], beta)
        first = ell + 1 if window else ell  # items after the threshold is set
        future = box_features(lo[first:], hi[first:], n_mc, rng) @ th[0]  # (n_mc, n - first)
        if window:
            seen = (x[: ell + 1] @ th[0]).max()
            alpha = 0.5 * np.maximum(future.max(axis=1), seen).mean()
        else:
            alpha = 0.5 * future.max(axis=1).mean()
        tau = -1
        if window:
            lw = lcb(x[None, : ell + 1], th, Vinv, rad)[0]
            j = int(lw.argmax())
            if lw[j] >= alpha:
                tau = j
        if tau < 0:
            ok = lcb(x[None, first:], th, Vinv, rad)[0] >= alpha
            if ok.any():
                tau = first + int(ok.argmax())
        out["reward"].append(X[tau] if tau >= 0 else 0.0)
        out["stopped"].append(tau >= 0)
        out["tau"].append(tau)
        out["maxima"].append(X.max())
        out["maxima_after"].append(X[ell:].max())
        out["alpha"].append(alpha)
    return {k: np.array(v) for k, v in out.items()}


# ------------------------------------------------------------ exact d = 2 helpers (trapezoid law)
def _trap_params(theta):
    theta = np.asarray(theta, dtype=float)
    if theta.shape != (2,) or np.any(theta <= 0):
        raise ValueError(f"theta must be a positive vector of length 2, got {theta}")
    b = np.sort(theta / np.sqrt(2))  # X = U1 + U2, U_j ~ U[0, theta_j / sqrt 2]
    return b[0], b[1]


def trapezoid_cdf(s, theta) -> np.ndarray:
    r"""CDF of :math:`X=x^\top\theta`, :math:`x\sim U[0,1/\sqrt2]^2`.

    :math:`X` is the sum of two uniforms (a trapezoid density).
    """
    b1, b2 = _trap_params(theta)
    s = np.asarray(s, dtype=float)
    out = np.zeros_like(s)
    out = np.where((s > 0) & (s <= b1), s**2 / (2 * b1 * b2), out)
    out = np.where((s > b1) & (s <= b2), (s - b1 / 2) / b2, out)
    out = np.where((s > b2) & (s < b1 + b2), 1 - (b1 + b2 - s) ** 2 / (2 * b1 * b2), out)
    return np.where(s >= b1 + b2, 1.0, out)


def trapezoid_quantile(q: float, theta) -> float:
    """Exact inverse of :func:`trapezoid_cdf` (``0 <= q <= 1``).

    The upper tail is inverted without cancellation.
    """
    b1, b2 = _trap_params(theta)
    if not 0 <= q <= 1:
        raise ValueError(f"q must be in [0, 1], got {q}")
    if q <= b1 / (2 * b2):
        return float(np.sqrt(2 * b1 * b2 * q))
    if q <= 1 - b1 / (2 * b2):
        return float(q * b2 + b1 / 2)
    return float(b1 + b2 - np.sqrt(2 * b1 * b2 * (1 - q)))


def expected_max_iid(theta, n: int) -> float:
    r""":math:`\mathbb E\max_{i\le n}X_i=\int_0^{b_1+b_2}(1-F(s)^n)\,ds` by quadrature."""
    b1, b2 = _trap_params(theta)
    n = positive_int(n, "n")
    f = lambda s: -np.expm1(n * np.log(np.maximum(trapezoid_cdf(s, theta), 1e-300)))
    top = b1 + b2
    # the integrand drops from 1 to 0 within O(1/sqrt(n)) of the top: split there
    edge = max(b2, top - 20 * np.sqrt(2 * b1 * b2 / n))
    pts = sorted({b1, b2, edge})
    total = 0.0
    grid = [0.0] + [p for p in pts if 0 < p < top] + [top]
    for a_, b_ in zip(grid[:-1], grid[1:]):
        total += integrate.quad(f, a_, b_, limit=200, epsabs=1e-13, epsrel=1e-12)[0]
    return float(total)


def cond_mean_above(alpha: float, theta) -> float:
    r"""The conditional mean above a threshold, by quadrature.

    :math:`\mathbb E[X\mid X\ge\alpha]=\alpha+\int_\alpha^{top}(1-F)/(1-F(\alpha))`.
    """
    b1, b2 = _trap_params(theta)
    top = b1 + b2
    if not 0 <= alpha < top:
        raise ValueError(f"alpha must be in [0, {top}), got {alpha}")
    sf = lambda s: 1 - trapezoid_cdf(s, theta)
    # 1 - F(s) = (top - s)^2 / (2 b1 b2) in the upper tail: integrate exactly there
    if alpha >= b2:
        tail = (top - alpha) ** 3 / (6 * b1 * b2)
        return float(alpha + tail / ((top - alpha) ** 2 / (2 * b1 * b2)))
    pts = [p for p in (b1, b2) if alpha < p < top]
    val = integrate.quad(sf, alpha, top, points=pts or None, limit=200, epsabs=1e-14)[0]
    return float(alpha + val / sf(alpha))


def oracle_ratio_exact(theta, n: int) -> float:
    r"""Exact competitive ratio of the known-:math:`\theta` quantile rule.

    :math:`(1-(1-1/n)^n)\,\mathbb E[X\mid X\ge\alpha^*]/\mathbb E\max`.

    Book: prf:`thm-16-classical` in book/16-prophet-noisy-rewards/theory.md
    (part 2, with :math:`n'=n`).
    """
    n = positive_int(n, "n")
    a = trapezoid_quantile(1 - 1 / n, theta)
    return float(
        -np.expm1(n * np.log1p(-1 / n)) * cond_mean_above(a, theta) / expected_max_iid(theta, n)
    )


def known_theta_etd_ratio(theta, n: int, ell: int, M: int) -> float:
    r"""Exact ratio of explore-then-decide with *known* :math:`\theta` and a sampled quantile.

    The rule waits ``ell`` steps, sets :math:`\alpha` to the :math:`k`-th largest of ``M`` fresh
    draws of :math:`X` (:math:`k=\lfloor M/n\rfloor`) and stops at the first later
    :math:`X_i\ge\alpha`. With :math:`p=1-F(\alpha)\sim\mathrm{Beta}(k,M-k+1)` and
    :math:`n'=n-\ell`,

    .. math::
        \frac{\mathbb E[X_\tau]}{\mathrm{OPT}}
        =\frac{\mathbb E_p\big[(1-(1-p)^{n'})\,\mathbb E[X\mid X\ge F^{-1}(1-p)]\big]}
        {\mathbb E\max_{i\le n}X_i},

    by quadrature (trapezoid law, :math:`d=2`). It is what ETD-LCBT should earn once
    :math:`\hat\theta` has learned :math:`\theta` well enough that the LCB ranks the top items as
    :math:`X` does.

    Book: eq. `eq-16-known-etd` in book/16-prophet-noisy-rewards/iid.md.
    """
    n, ell = _check_horizon(n, ell)
    M = positive_int(M, "M")
    k = max(1, M // n)
    nd = n - ell
    dist = stats.beta(k, M - k + 1)
    f = lambda p: (
        -np.expm1(nd * np.log1p(-p))
        * cond_mean_above(trapezoid_quantile(1 - p, theta), theta)
        * dist.pdf(p)
    )
    hi = min(1.0 - 1e-12, dist.ppf(1 - 1e-12))
    val = integrate.quad(f, 0, hi, points=[dist.mean()], limit=200, epsrel=1e-10)[0]
    return float(val / expected_max_iid(theta, n))


def code_replay_etd(seed: int, *, n: int = 10**5, d: int = 2, noise_std: float = 0.8) -> dict:
    r"""Replay of the official code's ETD-LCBT run for one of its integer seeds.

    The code seeds numpy's legacy global generator with ``seed`` when it builds the environment
    (:math:`\theta`, then the :math:`n` items), seeds it *again* with the same ``seed`` before the
    run, draws one noise value per step for :math:`t\le\ell_n=\lfloor n^{2/3}\rfloor`, fits ridge
    (:math:`\beta=1`), and then draws its :math:`10^4` calibration features from the same stream.
    We reproduce that sequence with ``np.random.RandomState(seed)`` (no global state): the values
    are those the code draws. Deterministic: this replays the code, it is not a simulation of ours.

    The code's exploration loop runs for :math:`t=0,\dots,\ell_n`, that is :math:`\ell_n+1` steps,
    and decides from step :math:`\ell_n+1` on; the replay keeps that off-by-one, while
    :func:`etd_lcbt_iid` explores exactly :math:`\ell_n` steps (one step in about 2,000 at
    :math:`n=10^5`, which moves the stopping probability by less than :math:`10^{-5}`).

    Returns ``reward`` (0 without a stop), ``maximum``, ``tau`` (-1 without a stop), ``alpha`` and
    ``z_offset``: the index ``t0`` with calibration feature ``j`` equal to item ``t0 + j`` for every
    ``j`` (``-1`` if the calibration sample is not a block of the items).

    Book: prf:`prop-16-numpy-quantile` in book/16-prophet-noisy-rewards/paper.md (the replay).
    """
    d, n = positive_int(d, "d"), positive_int(n, "n")
    noise_std = nonnegative(noise_std, "noise_std")
    ell = int(n ** (2 / 3))
    norm = 1 / np.sqrt(d)
    env = np.random.RandomState(int(seed))
    theta = env.uniform(0, norm, size=d)
    items = env.uniform(0, norm, size=(n, d))
    alg = np.random.RandomState(int(seed))  # algorithm.reset() reseeds the global generator
    y = items[: ell + 1] @ theta + alg.normal(0, noise_std, size=ell + 1)
    V = np.eye(d) + items[: ell + 1].T @ items[: ell + 1]
    th = np.linalg.solve(V, items[: ell + 1].T @ y)
    Vinv = np.linalg.inv(V)
    Z = alg.uniform(0, norm, size=(10_000, d))
    rad = np.sqrt(d * np.log(n))
    alpha = float(np.quantile(lcb(Z[None], th[None], Vinv[None], rad)[0], 1 - 1 / n))
    ok = lcb(items[None, ell + 1 :], th[None], Vinv[None], rad)[0] >= alpha
    X = items @ theta
    tau = ell + 1 + int(ok.argmax()) if ok.any() else -1
    hit = np.nonzero(np.all(items == Z[0], axis=1))[0]
    t0 = int(hit[0]) if hit.size and hit[0] + len(Z) <= n else -1
    if t0 >= 0 and not np.array_equal(items[t0 : t0 + len(Z)], Z):
        t0 = -1
    return dict(
        reward=float(X[tau]) if tau >= 0 else 0.0,
        maximum=float(X.max()),
        tau=tau,
        alpha=alpha,
        z_offset=t0,
        ell=ell,
    )


def adversarial_boxes(n: int, d: int, ell: int, *, a: float | None = None, low: float = 0.05):
    r"""A non-i.i.d. instance that puts the value inside the exploration window.

    Steps :math:`i\le\ell` draw features from :math:`[0,a]^d` (as the i.i.d. environment), later
    steps from the small box :math:`[0,\text{low}\cdot a]^d`. Any rule that cannot stop during the
    first ``ell`` steps earns at most :math:`\mathbb E\max_{i>\ell}X_i\le\text{low}\cdot
    a\,\|\theta\|_1`, a vanishing share of :math:`\mathbb E\max_{i\le n}X_i` as
    ``low`` :math:`\to0`.

    Book: prf:`prop-16-window-value` in book/16-prophet-noisy-rewards/noniid.md.
    """
    n, ell = _check_horizon(n, ell)
    d = positive_int(d, "d")
    a = 1 / np.sqrt(d) if a is None else float(a)
    if not 0 < low <= 1:
        raise ValueError(f"low must be in (0, 1], got {low}")
    lo = np.zeros((n, d))
    hi = np.full((n, d), a)
    hi[ell:] = low * a
    return lo, hi


# --------------------------------------------------------------------------- reporting
def ratio_of_sums(rewards, maxima, rng, n_boot: int = 2000):
    r"""The paper's metric :math:`\sum_r\text{reward}_r/\sum_r\max_r`.

    Returned with its bootstrap standard error (runs resampled).
    """
    rewards, maxima = np.asarray(rewards, dtype=float), np.asarray(maxima, dtype=float)
    if rewards.shape != maxima.shape or rewards.ndim != 1 or rewards.size < 2:
        raise ValueError(
            "rewards and maxima must be 1-d arrays of the same length (at least 2 runs)"
        )
    if np.any(maxima <= 0):
        raise ValueError("maxima must be positive")
    check_generator(rng)
    ratio = rewards.sum() / maxima.sum()
    idx = rng.integers(0, rewards.size, size=(positive_int(n_boot, "n_boot"), rewards.size))
    boot = rewards[idx].sum(axis=1) / maxima[idx].sum(axis=1)
    return float(ratio), float(boot.std(ddof=1))
