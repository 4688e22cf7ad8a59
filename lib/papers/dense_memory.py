r"""Dynamics of the dense associative memory under parallel updates, and its effective process.

Paper: K. Mimura, J. Takeuchi, Y. Sumikawa, Y. Kabashima, A. C. C. Coolen, *Dynamical Properties
of Dense Associative Memory*, ICLR 2026 (arXiv:2506.00851, OpenReview ``TeDkzf34hs``).
Chapter: ``book/15-dense-associative-memory/``.

The model is the Krotov-Hopfield dense associative memory with :math:`F(u)=u^n`, :math:`p=\alpha
N^{n-1}` patterns and the normalised local field (no self-coupling)

.. math::

    h_i = \frac{1}{2N^{n-1}}\sum_\mu\big[F(\xi_i^\mu+x_{\mu,i})-F(-\xi_i^\mu+x_{\mu,i})\big],
    \qquad x_{\mu,i}=\sum_{j\ne i}\xi_j^\mu\sigma_j,\qquad \sigma_i(t+1)=\operatorname{sgn}h_i(t).

The central equation (our derivation, see ``theory.md``) is the effective single-neuron process
for :math:`n\ge3`, in the gauge :math:`\xi=+1`,

.. math::

    h(t) = n\,m(t)^{n-1} + \sum_{s<t} R(t,s)\sigma(s) + \phi(t),\quad
    \Sigma(t,s)=\alpha n^2K_{n-1}(C(t,s)),\quad R(t,s)=\alpha n^2(n-1)^2G(t,s)K_{n-2}(C(t,s)),

with :math:`K_r(c)=\mathbb E[U^rV^r]` for a standard normal pair of correlation :math:`c`.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb, factorial

import numpy as np
from scipy.special import erf
from scipy.stats import norm

from lib.validate import check_generator, nonnegative, positive_int, real, real_array

__all__ = [
    "double_factorial",
    "bivariate_moment",
    "kh_field",
    "kh_field_bruteforce",
    "pattern_buffer",
    "random_patterns",
    "corrupted_state",
    "parallel_dynamics",
    "simulate_dam",
    "first_step",
    "naive_map",
    "noisy_naive_map",
    "first_kernel_theory",
    "measure_first_kernel",
    "EffectiveSolution",
    "solve_effective",
    "solve_hopfield",
    "hopfield_sigma11",
    "basin_edge",
    "convergence_time",
    "FiniteSizeFit",
    "finite_size_fit",
]


def _order(n, name: str = "n") -> int:
    n = positive_int(n, name)
    if n < 2:
        raise ValueError(f"{name} must be >= 2 (F(u) = u^n), got {n}")
    return n


def _m0(m0) -> float:
    return real(m0, "m0", lo=-1.0, hi=1.0)


def double_factorial(k: int) -> int:
    r""":math:`k!!` for integers :math:`k\ge-1`, with :math:`(-1)!!=0!!=1`."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"k must be an integer, got {type(k).__name__}")
    if k < -1:
        raise ValueError(f"k must be >= -1, got {k}")
    out = 1
    for j in range(int(k), 0, -2):
        out *= j
    return out


def bivariate_moment(r: int, c):
    r""":math:`K_r(c)=\mathbb E[U^rV^r]` for standard normal :math:`(U,V)` with correlation c.

    Hermite (Mehler) expansion: :math:`K_r(c)=\sum_{k\equiv r\,(2)}k!\binom rk^2((r-k-1)!!)^2c^k`.
    ``c`` may be an array (any shape), entries in [-1, 1]. Book: ``eq-15-kr`` in
    book/15-dense-associative-memory/theory.md.
    """
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)):
        raise TypeError(f"r must be an integer, got {type(r).__name__}")
    if r < 0:
        raise ValueError(f"r must be >= 0, got {r}")
    c = np.asarray(c, dtype=float)
    if not np.all(np.isfinite(c)) or np.any(np.abs(c) > 1 + 1e-12):
        raise ValueError("c must be finite and in [-1, 1]")
    out = np.zeros_like(c)
    for k in range(r % 2, r + 1, 2):
        out = out + factorial(k) * comb(r, k) ** 2 * double_factorial(r - k - 1) ** 2 * c**k
    return out


def _patterns(xi, name: str = "xi") -> np.ndarray:
    xi = real_array(xi, name, ndim=2)
    if not np.all(np.abs(xi) == 1):
        raise ValueError(f"{name} must have entries +-1")
    return xi


def _state(s, N: int, name: str = "s") -> np.ndarray:
    s = real_array(s, name)
    if s.ndim not in (1, 2) or s.shape[0] != N:
        raise ValueError(f"{name} must have shape (N,) or (N, K) with N = {N}, got {s.shape}")
    if not np.all(np.abs(s) == 1):
        raise ValueError(f"{name} must have entries +-1")
    return s


def _pm1(arr, name: str, chunk: int = 1 << 22) -> None:
    # entries must be +-1; checked in blocks along the contiguous axis, so a large pattern array
    # gets no full-size temporaries
    a = arr.T if arr.ndim == 2 and arr.flags.f_contiguous else arr
    rows = max(1, chunk // max(a.shape[-1], 1)) if a.ndim == 2 else a.shape[0]
    for r0 in range(0, a.shape[0], rows):
        blk = a[r0 : r0 + rows]
        if not np.all((blk == 1) | (blk == -1)):
            raise ValueError(f"{name} must have entries +-1")


def pattern_buffer(p: int, N: int) -> np.ndarray:
    r"""An empty (p, N) float32 array in column-major order, for :func:`random_patterns` to fill.

    Column-major, because the dynamics reads the columns :math:`\xi^{\cdot}_i` of the neurons
    that flipped (:func:`parallel_dynamics`). Allocate it once and reuse it across pattern sets.
    """
    return np.empty((positive_int(p, "p"), positive_int(N, "N")), dtype=np.float32, order="F")


def random_patterns(p: int, N: int, rng: np.random.Generator, *, out=None) -> np.ndarray:
    r"""Patterns :math:`\xi\in\{\pm1\}^{p\times N}` with i.i.d. uniform entries, as float32.

    One random bit per entry (``rng.bytes``), written neuron by neuron (column-major) into ``out``
    when it is given (a :func:`pattern_buffer` of shape (p, N), reused across pattern sets so that
    a large set costs no fresh memory). float32 holds +-1 exactly, and every product the dynamics
    forms from it is an integer (see :func:`parallel_dynamics`).
    """
    p, N = positive_int(p, "p"), positive_int(N, "N")
    rng = check_generator(rng)
    if out is None:
        out = pattern_buffer(p, N)
    elif not (
        isinstance(out, np.ndarray)
        and out.dtype == np.float32
        and out.shape == (p, N)
        and out.flags.f_contiguous
    ):
        raise ValueError(f"out must be a pattern_buffer({p}, {N}): float32, column-major")
    table = np.array([1.0, -1.0], dtype=np.float32)
    cols = out.T  # (N, p), C-contiguous: one row per neuron
    rows = max(1, (1 << 22) // p)
    for r0 in range(0, N, rows):
        blk = cols[r0 : r0 + rows]
        bits = np.unpackbits(np.frombuffer(rng.bytes((blk.size + 7) // 8), np.uint8))
        np.take(table, bits[: blk.size].reshape(blk.shape), out=blk)
    return out


def _kh_field(xi: np.ndarray, s: np.ndarray, n: int, x=None) -> np.ndarray:
    # F(x - e + a) - F(x - e - a) with a = xi_i, e = xi_i s_i, x = xi . s, expanded binomially:
    # odd k give 2^k C(n,k) x^(n-k) xi_i, even k >= 2 give -2^k C(n,k) x^(n-k) s_i.
    s = s.astype(xi.dtype, copy=False)
    if x is None:
        x = xi @ s  # (p,) or (p, K); integers, exact in float32 and float64
    x = np.asarray(x, dtype=np.float64)
    A = sum(comb(n, k) * 2.0**k * x ** (n - k) for k in range(1, n + 1, 2))
    B = sum(comb(n, k) * 2.0**k * x ** (n - k) for k in range(2, n + 1, 2))
    if A.ndim == 1:
        xiA = A.astype(xi.dtype) @ xi  # (N,): sum_mu xi_i^mu A(x_mu)
    else:  # (N, K), as (K, p) @ (p, N), which BLAS does faster than xi.T @ A for small K
        xiA = (A.T.astype(xi.dtype) @ xi).T
    return (xiA.astype(np.float64) - s * B.sum(axis=0)) / (2.0 * xi.shape[1] ** (n - 1))


def kh_field(xi, s, n: int) -> np.ndarray:
    r"""Exact Krotov-Hopfield local field without self-coupling, :eq:`eq-15-field`, in O(pN).

    Parameters
    ----------
    xi : (p, N) array of +-1, the patterns :math:`\xi^\mu_i`.
    s : (N,) or (N, K) array of +-1, the state(s) :math:`\sigma` (K states at once).
    n : int >= 2, the power in :math:`F(u)=u^n`.

    Returns the field :math:`h_i`, shape of ``s``. Book: ``eq-15-field`` in
    book/15-dense-associative-memory/theory.md.
    """
    n = _order(n)
    xi = _patterns(xi)
    s = _state(s, xi.shape[1])
    return _kh_field(xi, s, n)


def kh_field_bruteforce(xi, s, n: int) -> np.ndarray:
    """The same field from its definition, one neuron at a time (for tests; O(pN^2))."""
    n = _order(n)
    xi = _patterns(xi)
    N = xi.shape[1]
    s = _state(s, N)
    if s.ndim != 1:
        raise ValueError("s must have shape (N,) in kh_field_bruteforce")
    h = np.empty(N)
    for i in range(N):
        mask = np.arange(N) != i
        x = xi[:, mask] @ s[mask]
        h[i] = np.sum((xi[:, i] + x) ** n - (-xi[:, i] + x) ** n) / (2.0 * N ** (n - 1))
    return h


def corrupted_state(target, m0: float, rng: np.random.Generator, K: int = 1) -> np.ndarray:
    """K copies of ``target`` (shape (N,)) with exactly round((1 - m0) N / 2) bits flipped.

    So the initial overlap is m0 up to rounding, without the :math:`N^{-1/2}` spread of
    independent flips. Returns (N, K).
    """
    target = real_array(target, "target", ndim=1)
    m0 = _m0(m0)
    rng = check_generator(rng)
    K = positive_int(K, "K")
    N = target.size
    n_flip = int(round((1.0 - m0) * N / 2.0))
    keys = rng.random((N, K))
    flip = np.argsort(keys, axis=0) < n_flip  # a uniform subset of n_flip rows per column
    return np.where(flip, -target[:, None], target[:, None])


def _dynamics(xi: np.ndarray, s: np.ndarray, n: int, T: int, target: np.ndarray) -> dict:
    p, N = xi.shape
    K = s.shape[1]
    cols = np.arange(K)
    others = np.ones((p, K), dtype=bool)
    others[target, cols] = False
    m, u2, u2n = (np.empty((K, T + 1)) for _ in range(3))
    x = xi @ s  # (p, K): N times the overlaps, shared by the field and the records
    for t in range(T + 1):
        m[:, t] = x[target, cols] / N
        u = np.where(others, x.astype(np.float64), 0.0) / np.sqrt(N)
        u2[:, t] = (u**2).sum(0) / (p - 1) if p > 1 else np.nan
        u2n[:, t] = (u ** (2 * (n - 1))).sum(0) / (p - 1) if p > 1 else np.nan
        if t == T:
            break
        s_new = np.where(_kh_field(xi, s, n, x) >= 0, 1.0, -1.0).astype(xi.dtype)
        d = s_new - s  # 0 or +-2
        flipped = np.flatnonzero(d.any(axis=1))
        if flipped.size > N // 8:
            x = xi @ s_new
        else:  # only the neurons that flipped change x: x += xi[:, flipped] d[flipped] (exact)
            x = x + xi[:, flipped] @ d[flipped]
        s = s_new
    return {"m": m, "u2": u2, "u2n": u2n, "p": p}


def parallel_dynamics(xi, s0, n: int, T: int, *, target=0) -> dict:
    r"""Parallel zero-temperature dynamics :math:`\sigma(t+1)=\operatorname{sgn}h(\sigma(t))`.

    The field is :eq:`eq-15-field` (computed as :eq:`eq-15-fast-field`), all N neurons update at
    once, K initial states are run together. The overlaps :math:`x_\mu=\xi^\mu\cdot\sigma` serve
    both the field and the records; after the first step they are updated from the neurons that
    flipped only, :math:`x\mathrel{+}=\xi_{\cdot,F}(\sigma(t+1)-\sigma(t))_F` (integer, so exact),
    which reads a few columns of :math:`\xi` instead of all of it (column-major patterns, see
    :func:`pattern_buffer`, make those columns contiguous).

    Parameters
    ----------
    xi : (p, N) float32 or float64 array of +-1, the patterns. In float32 every product formed
        is an integer; partial sums are exact below :math:`2^{24}`, which for n = 3 holds up to
        :math:`6N^2<2^{24}` (N <= 1024) except in rare excursions, where the relative rounding is
        :math:`6\cdot10^{-8}` of the field.
    s0 : (N, K) array of +-1, the K initial states.
    n : int >= 2, :math:`F(u)=u^n`.
    T : int >= 1, number of parallel steps.
    target : int or (K,) ints, the pattern :math:`\nu_k` whose overlap column k records.

    Returns a dict of (K, T+1) arrays: ``m`` the overlaps :math:`m_{\nu_k}(t)`; ``u2``, ``u2n``
    the averages over :math:`\mu\ne\nu_k` of :math:`u_\mu(t)^2` and :math:`u_\mu(t)^{2(n-1)}`,
    :math:`u_\mu=N^{-1/2}\xi^\mu\cdot\sigma`, so that :math:`\alpha n^2` ``u2n`` estimates
    :math:`\Sigma(t,t)`; and ``p``. Book: {prf:ref}`prop-15-effective` in
    book/15-dense-associative-memory/theory.md.
    """
    if not isinstance(xi, np.ndarray) or xi.dtype not in (np.float32, np.float64) or xi.ndim != 2:
        raise TypeError("xi must be a 2-d float32 or float64 numpy array")
    _pm1(xi, "xi")
    s0 = real_array(s0, "s0", ndim=2)
    if s0.shape[0] != xi.shape[1]:
        raise ValueError(f"s0 must have shape (N, K) with N = {xi.shape[1]}, got {s0.shape}")
    _pm1(s0, "s0")
    n, T = _order(n), positive_int(T, "T")
    K = s0.shape[1]
    target = np.asarray(target)
    if target.dtype.kind not in "iu" or target.ndim > 1:
        raise TypeError("target must be an integer or a 1-d integer array")
    target = np.broadcast_to(target, (K,)).astype(int)
    if target.size and (target.min() < 0 or target.max() >= xi.shape[0]):
        raise ValueError(f"target must lie in [0, {xi.shape[0] - 1}]")
    return _dynamics(xi, s0.astype(xi.dtype), n, T, target)


def simulate_dam(
    N: int, n: int, alpha: float, m0: float, T: int, rng: np.random.Generator, *,
    trials: int = 1, runs: int | None = None,
) -> dict:  # fmt: skip
    r"""Parallel zero-temperature dynamics of the dense associative memory from a corrupted pattern.

    Per pattern set :math:`\xi\in\{\pm1\}^{p\times N}`, :math:`p=\lfloor\alpha N^{n-1}\rfloor`
    (:func:`random_patterns`), ``trials`` initial states with exactly round((1 - m0) N / 2) bits
    of pattern 1 flipped (:func:`corrupted_state`), run by :func:`parallel_dynamics`. With
    ``runs=None`` one pattern set and arrays of shape (trials, T+1); with ``runs=R``, R independent
    pattern sets drawn into one reused buffer and arrays of shape (R, trials, T+1). At m0 = 1 the
    trials of one pattern set are identical copies (the dynamics is deterministic). Returns a dict
    with ``m``, ``u2``, ``u2n`` (see :func:`parallel_dynamics`) and ``p``.

    Book: {prf:ref}`prop-15-effective` in book/15-dense-associative-memory/theory.md.
    """
    N, n, T = positive_int(N, "N"), _order(n), positive_int(T, "T")
    alpha, m0 = nonnegative(alpha, "alpha"), _m0(m0)
    rng = check_generator(rng)
    trials = positive_int(trials, "trials")
    R = 1 if runs is None else positive_int(runs, "runs")
    p = max(int(alpha * N ** (n - 1)), 1)
    buf = pattern_buffer(p, N)
    out = []
    for _ in range(R):
        xi = random_patterns(p, N, rng, out=buf)
        s = corrupted_state(xi[0], m0, rng, trials)
        out.append(_dynamics(xi, s.astype(np.float32), n, T, np.zeros(trials, dtype=int)))
    if runs is None:
        return out[0]
    return {k: np.stack([o[k] for o in out]) for k in ("m", "u2", "u2n")} | {"p": p}


def first_step(n: int, alpha: float, m0):
    r"""Exact first step :math:`m(1)=\operatorname{erf}(m_0^{n-1}/\sqrt{2\alpha(2n-3)!!})`.

    ``m0`` may be an array (entries in [-1, 1]). Book: {prf:ref}`cor-15-first-step` in
    book/15-dense-associative-memory/theory.md.
    """
    n = _order(n)
    alpha = real(alpha, "alpha", lo=0.0, lo_open=True)
    m0 = real_array(m0, "m0")
    if np.any(np.abs(m0) > 1):
        raise ValueError("m0 must have entries in [-1, 1]")
    return erf(m0 ** (n - 1) / np.sqrt(2.0 * alpha * double_factorial(2 * n - 3)))


def naive_map(n: int, alpha: float, m0: float, T: int) -> np.ndarray:
    r"""Iterated signal-to-noise map :math:`m\mapsto\operatorname{erf}(m^{n-1}/\sqrt{2\alpha c_n})`.

    Here :math:`c_n=(2n-3)!!`.

    For n = 2 this is the Hopfield map :math:`m\mapsto\operatorname{erf}(m/\sqrt{2\alpha})`.
    Returns (T+1,). It equals the effective process with R dropped ({prf:ref}`cor-15-naive`).
    """
    n, T = _order(n), positive_int(T, "T")
    alpha, m0 = real(alpha, "alpha", lo=0.0, lo_open=True), _m0(m0)
    m = np.empty(T + 1)
    m[0] = m0
    for t in range(T):
        m[t + 1] = first_step(n, alpha, m[t])
    return m


@dataclass(frozen=True)
class EffectiveSolution:
    r"""Order parameters of the effective process: m (T+1,), C, G (T+1, T+1), Sigma, R (T, T).

    ``G[t, s]`` is :math:`\partial\langle\sigma(t)\rangle/\partial\theta(s)` (zero for s >= t);
    ``Sigma`` and ``R`` are the noise covariance and retarded kernel for t, s < T.
    """

    m: np.ndarray
    C: np.ndarray
    G: np.ndarray
    Sigma: np.ndarray
    R: np.ndarray


def _solve(kind: str, n: int, alpha: float, m0: float, T: int, M: int, rng, retarded: bool):
    sig = np.empty((M, T + 1))
    sig[:, 0] = np.where(rng.random(M) < (1.0 + m0) / 2.0, 1.0, -1.0)
    phi = np.zeros((M, T))
    m, C, G = np.zeros(T + 1), np.eye(T + 1), np.zeros((T + 1, T + 1))
    Sigma, R = np.zeros((T, T)), np.zeros((T, T))
    for t in range(T + 1):
        m[t] = sig[:, t].mean()
        C[t, :t] = C[:t, t] = sig[:, :t].T @ sig[:, t] / M
        if t >= 1:  # Novikov: <sigma(t) phi(s')> = sum_s Sigma(s', s) G(t, s)
            c = phi[:, :t].T @ sig[:, t] / M
            G[t, :t] = np.linalg.lstsq(Sigma[:t, :t], c, rcond=1e-10)[0]
        if t == T:
            break
        if kind == "dam":  # eq-15-sigma and eq-15-retarded
            Sigma[t, : t + 1] = alpha * n**2 * bivariate_moment(n - 1, C[t, : t + 1])
            if retarded:
                R[t, :t] = (
                    alpha * n**2 * (n - 1) ** 2 * G[t, :t] * bivariate_moment(n - 2, C[t, :t])
                )
            signal = n * m[t] ** (n - 1)
        else:  # Hopfield (n = 2), eq-15-hopfield: L = (1 - G)^-1
            L = np.linalg.inv(np.eye(t + 1) - G[: t + 1, : t + 1])
            Sigma[t, : t + 1] = alpha * (L @ C[: t + 1, : t + 1] @ L.T)[t]
            if retarded:
                R[t, :t] = alpha * (G[: t + 1, : t + 1] @ L)[t, :t]
            signal = m[t]
        Sigma[:t, t] = Sigma[t, :t]
        # conditional Gaussian phi(t) | phi(<t)
        w = np.linalg.lstsq(Sigma[:t, :t], Sigma[:t, t], rcond=1e-10)[0] if t else np.zeros(0)
        var = max(Sigma[t, t] - Sigma[t, :t] @ w, 0.0)
        phi[:, t] = phi[:, :t] @ w + np.sqrt(var) * rng.standard_normal(M)
        h = signal + sig[:, :t] @ R[t, :t] + phi[:, t]
        sig[:, t + 1] = np.where(h >= 0, 1.0, -1.0)
    return EffectiveSolution(m, C, G, Sigma, R)


def solve_effective(
    n: int, alpha: float, m0: float, T: int, M: int, rng: np.random.Generator, *, retarded=True
) -> EffectiveSolution:
    r"""Monte-Carlo (Eissfeller-Opper) solution of the effective process for :math:`n\ge3`.

    M paths of :eq:`eq-15-effective`: draw :math:`\sigma(0)` with mean m0, then for each t build
    :math:`\Sigma(t,\cdot)` from C, the response :math:`G(t,\cdot)` by Novikov's theorem
    (:math:`G(t,\cdot)=\Sigma^{-1}\langle\sigma(t)\phi(\cdot)\rangle`), the kernel R, and draw
    :math:`\phi(t)\mid\phi(<t)`. ``retarded=False`` drops R. Book: {prf:ref}`prop-15-effective`
    in book/15-dense-associative-memory/theory.md.
    """
    n = _order(n)
    if n < 3:
        raise ValueError(f"n must be >= 3 for the dense memory (use solve_hopfield for 2), got {n}")
    alpha = real(alpha, "alpha", lo=0.0, lo_open=True)
    return _solve(
        "dam", n, alpha, _m0(m0), positive_int(T, "T"), positive_int(M, "M"),
        check_generator(rng), bool(retarded),
    )  # fmt: skip


def solve_hopfield(
    alpha: float, m0: float, T: int, M: int, rng: np.random.Generator, *, retarded=True
) -> EffectiveSolution:
    r"""Effective process of the parallel Hopfield model (n = 2, :math:`J_{ii}=0`, field halved).

    :math:`h(t)=m(t)+\alpha\sum_s[G(1-G)^{-1}](t,s)\sigma(s)+\phi(t)`,
    :math:`\langle\phi\phi^\top\rangle=\alpha(1-G)^{-1}C(1-G)^{-\top}` (Düring, Coolen and
    Sherrington 1998), solved by the same Monte Carlo as :func:`solve_effective`.
    Book: ``eq-15-hopfield`` in book/15-dense-associative-memory/theory.md.
    """
    alpha = real(alpha, "alpha", lo=0.0, lo_open=True)
    return _solve(
        "hop", 2, alpha, _m0(m0), positive_int(T, "T"), positive_int(M, "M"),
        check_generator(rng), bool(retarded),
    )  # fmt: skip


def hopfield_sigma11(alpha: float, m0):
    r"""Closed form of the Hopfield noise variance at t = 1, :math:`\Sigma(1,1)/\alpha`.

    :math:`1+2G m_0 m(1)+G^2` with :math:`G=G(1,0)=2\varphi_{\sqrt\alpha}(m_0)`, the density of
    :math:`h(0)=m_0+\phi(0)` at 0, and :math:`m(1)=\operatorname{erf}(m_0/\sqrt{2\alpha})`.
    """
    alpha = real(alpha, "alpha", lo=0.0, lo_open=True)
    m0 = np.asarray(m0, dtype=float)
    g = 2.0 * norm.pdf(m0, scale=np.sqrt(alpha))
    return 1.0 + 2.0 * g * m0 * erf(m0 / np.sqrt(2.0 * alpha)) + g**2


def basin_edge(
    n: int, alpha: float, T: int, M: int, rng: np.random.Generator, *, retarded=True,
    steps: int = 7, threshold: float = 0.9,
) -> float:  # fmt: skip
    r"""Basin edge :math:`m_c=\inf\{m_0: m(T)>\text{threshold}\}` by bisection on [0, 1].

    With ``retarded=False`` the effective process is the naive map, iterated exactly.
    """
    n, T, M, steps = (
        _order(n),
        positive_int(T, "T"),
        positive_int(M, "M"),
        positive_int(steps, "steps"),
    )
    threshold = real(threshold, "threshold", lo=-1.0, hi=1.0)
    lo, hi = 0.0, 1.0
    for _ in range(steps):
        mid = (lo + hi) / 2
        if retarded:
            mT = solve_effective(n, alpha, mid, T, M, rng).m[-1]
        else:
            mT = naive_map(n, alpha, mid, T)[-1]
        lo, hi = (lo, mid) if mT > threshold else (mid, hi)
    return (lo + hi) / 2


def convergence_time(m, eps: float) -> np.ndarray:
    r""":math:`T_\epsilon=\min\{t: m(t)\ge m(T)-\epsilon\}` along the last axis of m (..., T+1).

    Book: the definitions in book/15-dense-associative-memory/basins.md and ``fig-15-tconv``
    in book/15-dense-associative-memory/capacity.md.
    """
    m = real_array(m, "m")
    if m.ndim < 1 or m.shape[-1] < 1:
        raise ValueError("m must have a time axis")
    eps = real(eps, "eps", lo=0.0, lo_open=True)
    return np.argmax(m >= m[..., -1:] - eps, axis=-1)


def noisy_naive_map(
    n: int, alpha: float, m0: float, T: int, N: int, rng: np.random.Generator, size: int = 1
) -> np.ndarray:
    r"""The naive map with the sampling noise of N neurons: ``size`` paths of shape (size, T+1).

    Each step draws :math:`N(1+m(t+1))/2\sim\mathrm{Binomial}(N,(1+f(m(t)))/2)` with
    :math:`f(m)=\operatorname{erf}(m^{n-1}/\sqrt{2\alpha(2n-3)!!})`: what a network of N neurons
    would do if it followed the naive map (no retarded term) with independent errors. Used as the
    alternative in the power check of book/15-dense-associative-memory/basins.md.
    """
    n, T, N = _order(n), positive_int(T, "T"), positive_int(N, "N")
    alpha, m0 = real(alpha, "alpha", lo=0.0, lo_open=True), _m0(m0)
    rng, size = check_generator(rng), positive_int(size, "size")
    m = np.empty((size, T + 1))
    m[:, 0] = m0
    for t in range(T):
        q = (1.0 + first_step(n, alpha, np.clip(m[:, t], -1.0, 1.0))) / 2.0
        m[:, t + 1] = 2.0 * rng.binomial(N, q) / N - 1.0
    return m


def first_kernel_theory(n: int, alpha: float, m0: float) -> tuple[float, float]:
    r"""Closed forms of :math:`R(1,0)` and :math:`\Sigma(1,0)` of the effective process.

    :math:`G(1,0)=2\varphi_{\sqrt{\Sigma(0,0)}}(n m_0^{n-1})` (the density of :math:`h(0)` at 0),
    :math:`C(1,0)=m_0m(1)`, :math:`R(1,0)=\alpha n^2(n-1)^2G(1,0)K_{n-2}(C(1,0))` and
    :math:`\Sigma(1,0)=\alpha n^2K_{n-1}(C(1,0))`. Book: ``eq-15-r10`` in
    book/15-dense-associative-memory/theory.md.
    """
    n = _order(n)
    alpha, m0 = real(alpha, "alpha", lo=0.0, lo_open=True), _m0(m0)
    s00 = alpha * n**2 * double_factorial(2 * n - 3)
    G = 2.0 * norm.pdf(n * m0 ** (n - 1), scale=np.sqrt(s00))
    C = m0 * float(first_step(n, alpha, m0))
    R = alpha * n**2 * (n - 1) ** 2 * G * float(bivariate_moment(n - 2, C))
    return float(R), float(alpha * n**2 * bivariate_moment(n - 1, C))


def measure_first_kernel(
    N: int, n: int, alpha: float, m0: float, rng: np.random.Generator, *, trials: int = 1
) -> dict:
    r"""Direct measurement of :math:`R(1,0)` and :math:`\Sigma(1,0)` in the network.

    One pattern set, ``trials`` starts with overlap m0, one parallel step, then the field
    :math:`h_i(1)`. In the gauge :math:`g_i=\xi^1_ih_i(1)`, :math:`a_i=\xi^1_i\sigma_i(0)`,
    the effective process says :math:`g_i=n\,m(1)^{n-1}+R(1,0)a_i+\phi_i(1)` with
    :math:`\phi(1)` independent of :math:`a`, so half the gap between the group means
    estimates :math:`R(1,0)`. Returns a dict of (trials,) arrays: ``R`` (that estimate),
    ``se`` (its standard error :math:`\tfrac12\sqrt{s^2(1/N_++1/N_-)}`, s the pooled
    within-group SD), ``Sigma10`` (:math:`\alpha n^2` times the mean over :math:`\mu\ge2` of
    :math:`u_\mu(1)^{n-1}u_\mu(0)^{n-1}`). Book: ``eq-15-r10`` in
    book/15-dense-associative-memory/theory.md.
    """
    N, n = positive_int(N, "N"), _order(n)
    alpha, m0 = real(alpha, "alpha", lo=0.0, lo_open=True), _m0(m0)
    rng, trials = check_generator(rng), positive_int(trials, "trials")
    p = max(int(alpha * N ** (n - 1)), 2)
    xi = random_patterns(p, N, rng)
    s0 = corrupted_state(xi[0], m0, rng, trials).astype(np.float32)
    x0 = xi @ s0
    s1 = np.where(_kh_field(xi, s0, n, x0) >= 0, 1.0, -1.0).astype(np.float32)
    x1 = xi @ s1
    g = xi[0][:, None] * _kh_field(xi, s1, n, x1)  # (N, trials)
    a = xi[0][:, None] * s0
    plus = a > 0
    n_p, n_m = plus.sum(0), (~plus).sum(0)
    mu_p = np.where(plus, g, 0).sum(0) / n_p
    mu_m = np.where(~plus, g, 0).sum(0) / n_m
    resid = g - np.where(plus, mu_p, mu_m)
    s2 = (resid**2).sum(0) / (N - 2)
    u0, u1 = x0[1:].astype(np.float64) / np.sqrt(N), x1[1:].astype(np.float64) / np.sqrt(N)
    return {
        "R": (mu_p - mu_m) / 2.0,
        "se": 0.5 * np.sqrt(s2 * (1.0 / n_p + 1.0 / n_m)),
        "Sigma10": alpha * n**2 * np.mean((u0 * u1) ** (n - 1), axis=0),
        "p": p,
    }


@dataclass(frozen=True)
class FiniteSizeFit:
    r"""Result of :func:`finite_size_fit`: :math:`\bar m_N\approx a+bN^{-1/2}`.

    ``a`` is the extrapolation to :math:`N\to\infty` with standard error ``se_a``; ``b`` is the
    measured coefficient of the :math:`N^{-1/2}` correction (SE ``se_b``); ``chi2`` is the weighted
    residual sum of squares, with ``len(N) - 2`` degrees of freedom.
    """

    a: float
    b: float
    se_a: float
    se_b: float
    chi2: float

    def predict(self, N):
        """:math:`a+bN^{-1/2}` at the sizes N."""
        return self.a + self.b / np.sqrt(np.asarray(N, dtype=float))


def finite_size_fit(N, mean, se) -> FiniteSizeFit:
    r"""Weighted least-squares fit of :math:`\bar m_N=a+b\,N^{-1/2}` over network sizes.

    Parameters
    ----------
    N : (k,) distinct sizes, k >= 2.
    mean : (k,) the measured means :math:`\bar m_N`.
    se : (k,) their standard errors (> 0), used as weights :math:`1/\mathrm{SE}^2`; the
        covariance of (a, b) is :math:`(X^\top WX)^{-1}`, not rescaled by the residuals.

    Book: the finite-size extrapolation in book/15-dense-associative-memory/capacity.md.
    """
    N = real_array(N, "N", ndim=1)
    if N.size < 2 or np.any(N <= 0) or np.unique(N).size != N.size:
        raise ValueError("N must hold at least two distinct positive sizes")
    mean = real_array(mean, "mean", shape=N.shape)
    se = real_array(se, "se", shape=N.shape)
    if np.any(se <= 0):
        raise ValueError("se must be positive")
    x = 1.0 / np.sqrt(N)
    (b, a), cov = np.polyfit(x, mean, 1, w=1.0 / se, cov="unscaled")
    chi2 = float(np.sum(((mean - a - b * x) / se) ** 2))
    return FiniteSizeFit(
        float(a), float(b), float(np.sqrt(cov[1, 1])), float(np.sqrt(cov[0, 0])), chi2
    )
