"""Single-timescale actor-critic with a neural critic, on a scalar control problem with an exact J.

Paper: Xuyang Chen, Fengzhuo Zhang, Keyu Yan, Lin Zhao, *Finite-Time Analysis of Actor-Critic
Methods with Deep Neural Network Approximation*, ICLR 2026 (OpenReview ``V05qqNqBpY``).
Chapter: ``book/11-actor-critic-finite-time/``.

The algorithm (average reward, one Markov trajectory per chain, horizon-constant steps
:math:`\\alpha=c/\\sqrt T`, :math:`\\beta=\\gamma=1/\\sqrt T`):

.. math::

    \\delta_t &= r_t-\\eta_t+\\hat V(\\omega_t;s_{t+1})-\\hat V(\\omega_t;s_t),\\\\
    \\eta_{t+1} &= \\eta_t+\\gamma(r_t-\\eta_t),\\\\
    \\omega_{t+1} &= \\mathrm{Proj}_{B(\\omega_0,R)}\\big(\\omega_t+\\beta\\delta_t
        \\nabla_\\omega\\hat V(\\omega_t;s_t)\\big),\\\\
    \\theta_{t+1} &= \\theta_t+\\alpha\\delta_t\\nabla_\\theta\\log\\pi_{\\theta_t}(a_t|s_t).

The test problem (ours): :math:`s'=As+Ba+\\sigma_w\\xi`, :math:`\\pi_\\theta(a|s)=N(k s,\\sigma^2)`
with :math:`k=k_{max}\\tanh\\theta`, reward :math:`r=e^{-s^2/2}-\\rho(1-e^{-a^2/2})`. Its average
reward has the closed form (eq-11-J in the chapter)

.. math::  J(\\theta)=(1+v)^{-1/2}-\\rho+\\rho\\,(1+\\sigma^2+k^2v)^{-1/2},\\qquad
           v=\\frac{B^2\\sigma^2+\\sigma_w^2}{1-(A+Bk)^2},

and its differential value function is an explicit geometric series (eq-11-h).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar

from lib.validate import check_generator, positive, positive_int, real, real_array

__all__ = [
    "ScalarLQ",
    "gain",
    "stationary_var",
    "exact_J",
    "exact_grad_J",
    "optimal_theta",
    "differential_value",
    "reward",
    "env_step",
    "sample_action",
    "grad_log_pi",
    "init_critic",
    "critic_value",
    "critic_value_and_grad",
    "project_ball",
    "mixing_time",
    "ACRun",
    "single_timescale_ac",
    "tail_average",
    "critic_error",
    "oracle_ascent",
    "long_run_noise",
]


# --------------------------------------------------------------------------- environment
@dataclass(frozen=True)
class ScalarLQ:
    """The scalar problem: dynamics :math:`(A,B,\\sigma_w)`, policy noise :math:`\\sigma`,
    action-cost weight :math:`\\rho`, gain bound :math:`k_{max}`.

    Raises ``ValueError`` when :math:`|A|+|B|k_{max}\\ge 1` (then some policy is not ergodic).
    Book: :prf:ref:`asm-11-toy` in book/11-actor-critic-finite-time/theory.md.
    """

    A: float = 0.5
    B: float = 0.4
    sigma_w: float = 0.5
    sigma: float = 0.5
    rho: float = 0.5
    k_max: float = 1.0

    def __post_init__(self):
        real(self.A, "A")
        real(self.B, "B")
        positive(self.sigma_w, "sigma_w")
        positive(self.sigma, "sigma")
        real(self.rho, "rho", lo=0.0)
        positive(self.k_max, "k_max")
        if abs(self.A) + abs(self.B) * self.k_max >= 1:
            raise ValueError(
                "A, B, k_max: need |A| + |B| k_max < 1 for every policy to be ergodic, got "
                f"{abs(self.A) + abs(self.B) * self.k_max:.3g}"
            )

    @property
    def contraction(self) -> float:
        """:math:`\\bar c=|A|+|B|k_{max}`, a bound on :math:`|A+Bk|` for every policy."""
        return abs(self.A) + abs(self.B) * self.k_max


def _env(env) -> ScalarLQ:
    if not isinstance(env, ScalarLQ):
        raise TypeError(f"env must be a ScalarLQ, got {type(env).__name__}")
    return env


def gain(env: ScalarLQ, theta) -> np.ndarray:
    """Policy gain :math:`k(\\theta)=k_{max}\\tanh\\theta` (elementwise)."""
    return _env(env).k_max * np.tanh(np.asarray(theta, dtype=float))


def stationary_var(env: ScalarLQ, k) -> np.ndarray:
    """Stationary variance :math:`v(k)=(B^2\\sigma^2+\\sigma_w^2)/(1-(A+Bk)^2)` of the state."""
    env = _env(env)
    c = env.A + env.B * np.asarray(k, dtype=float)
    return (env.B**2 * env.sigma**2 + env.sigma_w**2) / (1.0 - c**2)


def exact_J(env: ScalarLQ, theta) -> np.ndarray:
    """Average reward :math:`J(\\theta)` in closed form (eq-11-J), elementwise in ``theta``.

    Book: :prf:ref:`prop-11-closed-form` in book/11-actor-critic-finite-time/theory.md.
    """
    env = _env(env)
    k = gain(env, theta)
    v = stationary_var(env, k)
    return 1 / np.sqrt(1 + v) - env.rho + env.rho / np.sqrt(1 + env.sigma**2 + k**2 * v)


def exact_grad_J(env: ScalarLQ, theta) -> np.ndarray:
    """:math:`\\nabla J(\\theta)` by the chain rule through :math:`k(\\theta)` and :math:`v(k)`.

    Book: :prf:ref:`prop-11-closed-form` in book/11-actor-critic-finite-time/theory.md.
    """
    env = _env(env)
    tanh = np.tanh(np.asarray(theta, dtype=float))
    k = env.k_max * tanh
    c = env.A + env.B * k
    q = env.B**2 * env.sigma**2 + env.sigma_w**2
    one_minus_c2 = 1 - c * c
    v = q / one_minus_c2
    dv = 2 * q * env.B * c / (one_minus_c2 * one_minus_c2)
    u = 1 + env.sigma**2 + k * k * v
    # x**-1.5 written as 1 / (x sqrt x): the same value, several times faster on large arrays
    dJ_dk = -0.5 * dv / ((1 + v) * np.sqrt(1 + v)) - 0.5 * env.rho * (2 * k * v + k * k * dv) / (
        u * np.sqrt(u)
    )
    return dJ_dk * env.k_max * (1 - tanh * tanh)


def optimal_theta(env: ScalarLQ) -> tuple[float, float]:
    """:math:`(\\theta^\\star, J^\\star)` by bounded scalar minimisation of :math:`-J`."""
    res = minimize_scalar(
        lambda x: -float(exact_J(env, x)),
        bounds=(-6.0, 6.0),
        method="bounded",
        options={"xatol": 1e-10},
    )
    return float(res.x), float(-res.fun)


def differential_value(env: ScalarLQ, theta: float, s, n_terms: int | None = None) -> np.ndarray:
    """Differential value :math:`h_\\theta(s)=\\sum_{t\\ge0}(\\mathbb E[r_t|s_0=s]-J(\\theta))`
    (eq-11-h), normalised so that :math:`\\mathbb E_{\\mu_\\theta}h_\\theta=0`.

    Starting from :math:`s_0=s`, :math:`s_t\\sim N(c^ts, v(1-c^{2t}))` with :math:`c=A+Bk`, and
    both reward terms are Gaussian integrals; the series converges like :math:`c^{2t}`.

    Parameters
    ----------
    theta : float
    s : array_like, any shape
    n_terms : int, optional
        Number of terms (default: enough that :math:`c^{2t}<10^{-16}`).

    Book: :prf:ref:`prop-11-closed-form` in book/11-actor-critic-finite-time/theory.md.
    """
    env = _env(env)
    theta = real(theta, "theta")
    s = np.asarray(s, dtype=float)
    k = float(gain(env, theta))
    c = env.A + env.B * k
    v = float(stationary_var(env, k))
    if n_terms is None:
        n_terms = int(np.ceil(np.log(1e-16) / np.log(max(c**2, 1e-300)))) + 2
    n_terms = positive_int(n_terms, "n_terms")
    t = np.arange(n_terms).reshape((-1,) + (1,) * s.ndim)
    ct = c**t
    vt = v * (1 - ct**2)
    m = ct * s
    state = np.exp(-(m**2) / (2 * (1 + vt))) / np.sqrt(1 + vt)
    ua = 1 + env.sigma**2 + k**2 * vt
    action = env.rho * np.exp(-(k**2) * m**2 / (2 * ua)) / np.sqrt(ua) - env.rho
    return (state + action - float(exact_J(env, theta))).sum(axis=0)


# --------------------------------------------------------------------------- sampling
def reward(env: ScalarLQ, s, a) -> np.ndarray:
    """:math:`r(s,a)=e^{-s^2/2}-\\rho(1-e^{-a^2/2})\\in[-\\rho,1]`."""
    env = _env(env)
    s = np.asarray(s, dtype=float)
    a = np.asarray(a, dtype=float)
    return np.exp(-0.5 * s**2) - env.rho * (1 - np.exp(-0.5 * a**2))


def env_step(env: ScalarLQ, s, a, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One transition for every chain: returns ``(r, s_next)``, each of the shape of ``s``."""
    env = _env(env)
    check_generator(rng)
    s = np.asarray(s, dtype=float)
    a = np.asarray(a, dtype=float)
    if s.shape != a.shape:
        raise ValueError(f"a must have the shape of s {s.shape}, got {a.shape}")
    s_next = env.A * s + env.B * a + env.sigma_w * rng.standard_normal(s.shape)
    return reward(env, s, a), s_next


def sample_action(env: ScalarLQ, theta, s, rng: np.random.Generator) -> np.ndarray:
    """:math:`a\\sim N(k(\\theta)s,\\sigma^2)`, elementwise over chains."""
    env = _env(env)
    check_generator(rng)
    s = np.asarray(s, dtype=float)
    return gain(env, theta) * s + env.sigma * rng.standard_normal(s.shape)


def grad_log_pi(env: ScalarLQ, theta, s, a) -> np.ndarray:
    """Score :math:`\\nabla_\\theta\\log\\pi_\\theta(a|s)=\\frac{(a-ks)s}{\\sigma^2}k_{max}
    (1-\\tanh^2\\theta)`."""
    env = _env(env)
    theta = np.asarray(theta, dtype=float)
    s = np.asarray(s, dtype=float)
    a = np.asarray(a, dtype=float)
    k = gain(env, theta)
    return (a - k * s) * s / env.sigma**2 * env.k_max * (1 - np.tanh(theta) ** 2)


# --------------------------------------------------------------------------- neural critic
def init_critic(width: int, n_chains: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Parameters :math:`\\omega_0` of one 1-m-m-1 tanh critic per chain (NTK scaling).

    Returns ``[W1 (n,m), b1 (n,m), W2 (n,m,m), b2 (n,m), w3 (n,m)]``, all :math:`N(0,1)`.
    """
    m = positive_int(width, "width")
    n = positive_int(n_chains, "n_chains")
    check_generator(rng)
    shapes = [(n, m), (n, m), (n, m, m), (n, m), (n, m)]
    return [rng.standard_normal(sh) for sh in shapes]


def _check_omega(omega) -> list:
    if not isinstance(omega, (list, tuple)) or len(omega) not in (1, 5):
        raise ValueError("omega must be a list of 5 MLP blocks or 1 linear block")
    omega = [np.asarray(w, dtype=float) for w in omega]
    n = omega[0].shape[0]
    if len(omega) == 1:
        if omega[0].shape != (n, 1):
            raise ValueError(f"omega: the linear block must be (n, 1), not {omega[0].shape}")
        return omega
    m = omega[0].shape[1] if omega[0].ndim == 2 else -1
    want = [(n, m), (n, m), (n, m, m), (n, m), (n, m)]
    if m < 1 or [w.shape for w in omega] != want:
        raise ValueError(f"omega: block shapes must be {want}, got {[w.shape for w in omega]}")
    return omega


def _forward(omega, s):
    """Hidden layers and value for states ``s`` of shape ``(n,)`` or ``(n, g)``."""
    if len(omega) == 1:  # linear critic V = w s
        w = omega[0][:, 0]
        return None, None, (w * s.T).T
    W1, b1, W2, b2, w3 = omega
    m = W1.shape[1]
    x = s[..., None]  # (n, [g,] 1)
    sh = (W1.shape[0],) + (1,) * (s.ndim - 1) + (m,)
    h1 = np.tanh(W1.reshape(sh) * x + b1.reshape(sh))
    pre = np.einsum("nij,n...j->n...i", W2, h1) / np.sqrt(m)
    h2 = np.tanh(pre + b2.reshape(sh))
    return h1, h2, (w3.reshape(sh) * h2).sum(axis=-1) / np.sqrt(m)


def init_linear_critic(n_chains: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Parameters of one linear critic :math:`\\hat V(w;s)=ws` per chain: ``[w (n,1)]``,
    :math:`N(0,1)`. The feature :math:`s` is odd, the toy's :math:`h_\\theta` is even, so
    :math:`\\mathbb E_\\mu[s\\,h_\\theta(s)]=0` and no :math:`w` fits :math:`h_\\theta`.

    Book: :prf:ref:`prop-11-linear-critic` in book/11-actor-critic-finite-time/ablations.md.
    """
    n = positive_int(n_chains, "n_chains")
    check_generator(rng)
    return [rng.standard_normal((n, 1))]


def critic_value(omega, s) -> np.ndarray:
    """:math:`\\hat V(\\omega;s)=w_3^\\top\\tanh(W_2\\tanh(W_1s+b_1)/\\sqrt m+b_2)/\\sqrt m`
    (or :math:`ws` for a one-block linear critic).

    ``s`` has shape ``(n,)`` (one state per chain) or ``(n, g)`` (a grid per chain); the value
    has the shape of ``s``.
    """
    omega = _check_omega(omega)
    s = real_array(s, "s")
    if s.ndim not in (1, 2) or s.shape[0] != omega[0].shape[0]:
        raise ValueError(f"s must have shape (n,) or (n, g) with n = {omega[0].shape[0]}")
    return _forward(omega, s)[2]


def critic_value_and_grad(omega, s) -> tuple[np.ndarray, list[np.ndarray]]:
    """:math:`\\hat V(\\omega;s)` (shape ``(n,)``) and :math:`\\nabla_\\omega\\hat V` (a list shaped
    like ``omega``), by hand-written backpropagation, one state per chain."""
    omega = _check_omega(omega)
    s = real_array(s, "s", shape=(omega[0].shape[0],))
    if len(omega) == 1:
        return omega[0][:, 0] * s, [s[:, None].copy()]
    W1, b1, W2, b2, w3 = omega
    m = W1.shape[1]
    rm = 1 / np.sqrt(m)
    h1, h2, V = _forward(omega, s)
    g_w3 = h2 * rm
    g2 = w3 * rm * (1 - h2**2)
    g_W2 = g2[:, :, None] * (h1[:, None, :] * rm)
    g1 = np.matmul(g2[:, None, :], W2)[:, 0, :] * rm * (1 - h1**2)
    return V, [g1 * s[:, None], g1, g_W2, g2, g_w3]


def _radius(radius, n: int) -> np.ndarray:
    """A radius :math:`R>0` (``inf`` allowed) per chain, from a number or an array ``(n,)``."""
    if np.ndim(radius) == 0:
        return np.full(n, positive(radius, "radius", allow_inf=True))
    arr = real_array(radius, "radius", shape=(n,), finite=False)
    if np.any(np.isnan(arr)) or np.any(arr <= 0):
        raise ValueError("radius must be > 0 (inf allowed) for every chain")
    return arr


def project_ball(omega, omega0, radius) -> list[np.ndarray]:
    """Euclidean projection of each chain's :math:`\\omega` onto :math:`B(\\omega_0,R)`.

    ``radius`` is one :math:`R` for every chain or an array of shape ``(n,)`` (``inf``: no
    projection for that chain)."""
    if len(omega) != len(omega0):
        raise ValueError("omega0 must have as many parameter blocks as omega")
    diff = [w - w0 for w, w0 in zip(omega, omega0)]
    n = diff[0].shape[0]
    radius = _radius(radius, n)
    norm = np.sqrt(sum((d.reshape(n, -1) ** 2).sum(axis=1) for d in diff))
    scale = np.minimum(1.0, radius / np.maximum(norm, 1e-300))
    return [w0 + d * scale.reshape((n,) + (1,) * (d.ndim - 1)) for w0, d in zip(omega0, diff)]


def mixing_time(contraction: float, T: int, kappa: float = 1.0) -> int:
    """:math:`\\tau_T=\\min\\{i\\ge0:\\kappa\\rho^{i-1}\\le T^{-1/2}\\}` with :math:`\\rho` the
    contraction factor (the paper's burn-in; the first :math:`\\tau_T` iterates are dropped).

    On the toy the chain is geometrically but not uniformly ergodic, so no :math:`\\kappa` holds
    for every start; taking :math:`\\kappa=1` and :math:`\\rho=\\bar c` (the worst-case
    contraction of the mean) is our convention, not the paper's constant.
    """
    rho = real(contraction, "contraction", lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    T = positive_int(T, "T")
    kappa = positive(kappa, "kappa")
    i = 1 + np.log(T**-0.5 / kappa) / np.log(rho)
    return max(0, int(np.ceil(i)))


# --------------------------------------------------------------------------- the algorithm
@dataclass
class ACRun:
    """Trajectories of :func:`single_timescale_ac`, each of shape ``(T+1, n)``: actor
    :math:`\\theta_t`, reward estimate :math:`\\eta_t`; final critic ``omega`` and its
    initialisation ``omega0``; ``drift`` :math:`\\|\\omega_T-\\omega_0\\|` (shape ``(n,)``);
    ``update_ms``, the mean of
    :math:`(\\delta_t\\nabla_\\theta\\log\\pi_{\\theta_t}(a_t|s_t))^2` over the second half
    :math:`[T_i/2,T_i)` of each chain's horizon (shape ``(n,)``)."""

    theta: np.ndarray
    eta: np.ndarray
    omega: list
    omega0: list
    drift: np.ndarray
    update_ms: np.ndarray


def _steps(x, n, name):
    arr = (
        np.broadcast_to(np.asarray(x, dtype=float), (n,)).copy()
        if np.ndim(x) == 0
        else (real_array(x, name, shape=(n,)))
    )
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} must be finite and >= 0, got min {arr.min()}")
    return arr


def single_timescale_ac(
    env: ScalarLQ,
    theta0: float,
    T: int,
    alpha,
    beta,
    gamma,
    n_chains: int,
    width: int,
    rng: np.random.Generator,
    *,
    radius=np.inf,
    decay: bool = False,
    sign=1.0,
    horizon=None,
    critic: str = "mlp",
    omega0=None,
) -> ACRun:
    """Run the single-timescale actor-critic on ``n_chains`` independent chains side by side.

    Parameters
    ----------
    theta0 : float
        :math:`\\theta_0` (the same for every chain).
    T : int
        Number of steps.
    alpha, beta, gamma : float or array of shape ``(n_chains,)``
        Actor, critic and reward steps (constant in :math:`t`, the paper's choice; a per-chain
        array lets runs of different horizons :math:`\\alpha=c/\\sqrt{T_i}` share one loop).
    width : int
        Hidden width :math:`m` of the critic.
    radius : float or array of shape ``(n_chains,)``
        Projection radius :math:`R` of the critic ball around :math:`\\omega_0`, one for every
        chain or one per chain (``inf``: no projection).
    decay : bool
        If true, every step is multiplied by :math:`1/\\sqrt{1+t}` (the decaying schedule).
    sign : float or array of shape ``(n_chains,)``
        +1 for ascent; -1 flips the actor update (a control that must fail); one for every chain
        or one per chain.
    critic : {"mlp", "linear"}
        The 1-m-m-1 tanh network of :func:`init_critic`, or the linear critic :math:`ws` of
        :func:`init_linear_critic` (then ``width`` is ignored).
    omega0 : list of arrays, optional
        The critic's initial parameters :math:`\\omega_0` (shaped as :func:`init_critic` or
        :func:`init_linear_critic` returns them for ``n_chains`` and ``width``); default: a random
        initialisation drawn from ``rng``. Setting a chain's output weights :math:`w_3` to zero and
        its ``beta`` to zero gives the critic :math:`\\hat V\\equiv0` (a biased-critic control).
    horizon : int array of shape ``(n_chains,)``, optional
        Per-chain horizon :math:`T_i\\le T`: chain ``i`` stops updating after :math:`T_i` steps
        (its chain keeps moving), so its final ``omega`` is :math:`\\omega_{T_i}`.

    Book: :prf:ref:`alg-11-ac` in book/11-actor-critic-finite-time/theory.md.
    """
    env = _env(env)
    theta0 = real(theta0, "theta0")
    T = positive_int(T, "T")
    n = positive_int(n_chains, "n_chains")
    check_generator(rng)
    alpha = _steps(alpha, n, "alpha")
    beta = _steps(beta, n, "beta")
    gamma = _steps(gamma, n, "gamma")
    radius = _radius(radius, n)
    sign = real_array(sign, "sign")
    if sign.ndim == 0:
        sign = np.full(n, float(sign))
    elif sign.shape != (n,):
        raise ValueError(f"sign must be a number or an array of shape ({n},), got {sign.shape}")
    if not np.all((sign == 1.0) | (sign == -1.0)):
        raise ValueError(f"sign must be +1 or -1 for every chain, got {np.unique(sign)}")
    if critic not in ("mlp", "linear"):
        raise ValueError(f"critic must be 'mlp' or 'linear', got {critic!r}")
    if horizon is None:
        horizon = np.full(n, T)
    horizon = np.asarray(horizon)
    if horizon.shape != (n,) or not np.issubdtype(horizon.dtype, np.integer):
        raise ValueError(f"horizon must be an integer array of shape ({n},)")
    if np.any(horizon < 1) or np.any(horizon > T):
        raise ValueError(f"horizon must lie in [1, T={T}]")
    if omega0 is None:
        omega0 = init_critic(width, n, rng) if critic == "mlp" else init_linear_critic(n, rng)
    else:
        omega0 = _check_omega(omega0)
        if len(omega0) != (5 if critic == "mlp" else 1) or omega0[0].shape[0] != n:
            raise ValueError(f"omega0 must be a {critic} critic for n_chains = {n} chains")
        if critic == "mlp" and omega0[0].shape[1] != positive_int(width, "width"):
            raise ValueError(f"omega0 must have width {width}, got {omega0[0].shape[1]}")
    omega = [np.array(w, dtype=float) for w in omega0]
    thetas = np.empty((T + 1, n))
    etas = np.empty((T + 1, n))
    thetas[0], etas[0] = theta0, 0.0
    update_ss = np.zeros(n)
    half = horizon // 2
    # Chains are run in segments between consecutive horizons; a chain whose horizon has passed
    # is dropped from the working arrays (it no longer updates, and its Markov chain is no longer
    # observed), so a horizon T_i costs T_i steps, not T. Within a segment the parameters of all
    # active chains live in one flat array (n_active, P), and the blocks are views into it.
    block_shapes = [w.shape[1:] for w in omega0]
    sizes = [int(np.prod(sh)) for sh in block_shapes]
    edges = np.cumsum([0] + sizes)

    def views(flat):
        k = flat.shape[0]
        return [
            flat[:, e0:e1].reshape((k,) + sh) for e0, e1, sh in zip(edges, edges[1:], block_shapes)
        ]

    flat = np.concatenate([np.asarray(w, dtype=float).reshape(n, -1) for w in omega0], axis=1)
    flat0 = flat.copy()
    act = np.arange(n)
    theta = np.full(n, theta0)
    eta = np.zeros(n)
    # Start every chain in the stationary law of its initial policy.
    s = rng.standard_normal(n) * np.sqrt(stationary_var(env, gain(env, theta0)))
    t_start = 0
    for t_end in np.unique(horizon):
        al, be, ga, ra = alpha[act], beta[act], gamma[act], radius[act]
        al = al * sign[act]
        hf = half[act]
        project = bool(np.isfinite(ra).any())
        uss = np.zeros(act.size)
        buf_theta = np.empty((t_end - t_start, act.size))
        buf_eta = np.empty_like(buf_theta)
        om = views(flat)
        for t in range(t_start, t_end):
            f = 1 / np.sqrt(1 + t) if decay else 1.0
            a = sample_action(env, theta, s, rng)
            r, s_next = env_step(env, s, a, rng)
            V, G = critic_value_and_grad(om, s)
            V_next = _forward(om, s_next)[2]
            # TD error delta_t (eq-11-td)
            delta = r - eta + V_next - V
            score = grad_log_pi(env, theta, s, a)
            eta = eta + f * ga * (r - eta)
            step = f * be * delta
            flat += step[:, None] * np.concatenate([g.reshape(act.size, -1) for g in G], axis=1)
            if project:
                # Euclidean projection onto B(omega_0, R), chain by chain (as project_ball)
                d = flat - flat0
                norm = np.sqrt(np.einsum("ij,ij->i", d, d))
                scale = np.minimum(1.0, ra / np.maximum(norm, 1e-300))
                np.add(flat0, d * scale[:, None], out=flat)
            theta = theta + f * al * delta * score
            if t >= hf.min():
                uss += (delta * score) ** 2 * (t >= hf)
            s = s_next
            buf_theta[t - t_start], buf_eta[t - t_start] = theta, eta
        thetas[t_start + 1 : t_end + 1, act] = buf_theta
        etas[t_start + 1 : t_end + 1, act] = buf_eta
        update_ss[act] = uss + update_ss[act]
        done = horizon[act] == t_end
        for w_out, w in zip(omega, om):
            w_out[act[done]] = w[done]
        # a finished chain keeps its last actor and reward estimate
        thetas[t_end + 1 :, act[done]] = theta[done]
        etas[t_end + 1 :, act[done]] = eta[done]
        keep = ~done
        act = act[keep]
        flat, flat0 = flat[keep], flat0[keep]
        theta, eta, s = theta[keep], eta[keep], s[keep]
        t_start = int(t_end)
    omega0 = [np.asarray(w) for w in omega0]
    drift = np.sqrt(sum(((w - w0).reshape(n, -1) ** 2).sum(axis=1) for w, w0 in zip(omega, omega0)))
    return ACRun(thetas, etas, omega, omega0, drift, update_ss / (horizon - half))


def tail_average(x, T, tau) -> np.ndarray:
    """:math:`E_T=\\frac1{T-\\tau}\\sum_{t=\\tau}^{T-1}x_t` per chain, for ``x`` of shape
    ``(>=T, n)``; ``T`` and ``tau`` are ints or arrays of shape ``(n,)`` (one horizon per chain)."""
    x = real_array(x, "x", ndim=2, finite=False)
    n = x.shape[1]
    T = np.broadcast_to(np.asarray(T, dtype=int), (n,))
    tau = np.broadcast_to(np.asarray(tau, dtype=int), (n,))
    if np.any(T > x.shape[0]) or np.any(tau < 0) or np.any(tau >= T):
        raise ValueError("T, tau: need 0 <= tau < T <= len(x)")
    c = np.vstack([np.zeros((1, n)), np.cumsum(x, axis=0)])
    cols = np.arange(n)
    return (c[T, cols] - c[tau, cols]) / (T - tau)


def critic_error(env: ScalarLQ, omega, theta, n_nodes: int = 40) -> np.ndarray:
    """Relative :math:`L^2(\\mu_\\theta)` error of the centred critic against :math:`h_\\theta`,
    per chain: :math:`\\|\\hat V-\\mathbb E_\\mu\\hat V-h_\\theta\\|/\\|h_\\theta\\|` (Gauss-Hermite
    quadrature under :math:`\\mu_\\theta=N(0,v)`). ``theta`` has shape ``(n,)``."""
    env = _env(env)
    theta = real_array(theta, "theta", ndim=1)
    x, w = np.polynomial.hermite_e.hermegauss(positive_int(n_nodes, "n_nodes"))
    w = w / w.sum()
    sd = np.sqrt(stationary_var(env, gain(env, theta)))
    grid = sd[:, None] * x[None, :]
    V = critic_value(omega, grid)
    V = V - (V * w).sum(axis=1, keepdims=True)
    h = np.stack([differential_value(env, th, g) for th, g in zip(theta, grid)])
    return np.sqrt(((V - h) ** 2 * w).sum(axis=1) / ((h**2) * w).sum(axis=1))


def oracle_ascent(
    env: ScalarLQ,
    theta0: float,
    T: int,
    alpha,
    noise_sd: float,
    n_chains: int,
    rng: np.random.Generator,
    *,
    horizon=None,
) -> np.ndarray:
    """Noisy gradient ascent on the exact :math:`J`, the actor of :func:`single_timescale_ac` with a
    perfect critic and white noise:
    :math:`\\theta_{t+1}=\\theta_t+\\alpha(\\nabla J(\\theta_t)+\\sigma_\\xi\\xi_t)`,
    :math:`\\xi_t\\sim N(0,1)` i.i.d. (eq-11-oracle).

    ``alpha`` is a float or an array of shape ``(n_chains,)``; ``horizon`` (integer array of shape
    ``(n_chains,)``) stops chain ``i`` after :math:`T_i` steps. Returns :math:`\\theta_t`, shape
    ``(T+1, n_chains)``.

    Book: :prf:ref:`prop-11-oracle` in book/11-actor-critic-finite-time/rate.md.
    """
    env = _env(env)
    theta0 = real(theta0, "theta0")
    T = positive_int(T, "T")
    n = positive_int(n_chains, "n_chains")
    noise_sd = real(noise_sd, "noise_sd", lo=0.0)
    check_generator(rng)
    alpha = _steps(alpha, n, "alpha")
    horizon = np.full(n, T) if horizon is None else np.asarray(horizon)
    if horizon.shape != (n,) or not np.issubdtype(horizon.dtype, np.integer):
        raise ValueError(f"horizon must be an integer array of shape ({n},)")
    if np.any(horizon < 1) or np.any(horizon > T):
        raise ValueError(f"horizon must lie in [1, T={T}]")
    xi = rng.standard_normal((T, n))
    # exact_grad_J tabulated on a fine grid (spacing 2.5e-4; linear interpolation error < 1e-8),
    # which makes one step a single np.interp call
    grid = np.linspace(-5.0, 5.0, 40001)
    table = exact_grad_J(env, grid)
    theta = np.empty((T + 1, n))
    theta[0] = theta0
    # segments between consecutive horizons; a chain stops (and stays put) after its horizon
    t_start, act = 0, np.arange(n)
    th = theta[0].copy()
    for t_end in np.unique(horizon):
        al, noise = alpha[act], noise_sd * xi[:, act]
        for t in range(t_start, t_end):
            th = th + al * (np.interp(th, grid, table) + noise[t])
            theta[t + 1, act] = th
        done = horizon[act] == t_end
        theta[t_end + 1 :, act[done]] = th[done]
        act, th, t_start = act[~done], th[~done], int(t_end)
    return theta


def long_run_noise(
    env: ScalarLQ, theta: float, T: int, n_chains: int, rng: np.random.Generator, burn: int = 50
) -> dict:
    """Long-run variances, at a fixed policy :math:`\\theta`, of the actor's update direction with
    the exact critic, :math:`x_t=(r_t-J+h_\\theta(s_{t+1})-h_\\theta(s_t))
    \\nabla_\\theta\\log\\pi_\\theta(a_t|s_t)`, and of the reward :math:`r_t`.

    The long-run variance :math:`\\sigma^2_\\infty=\\lim_T T\\mathrm{Var}(\\bar x_T)` is estimated
    from the variance across ``n_chains`` independent stationary chains of their ``T``-step means
    (one batch per chain). Returns a dict with ``lrv_x``, ``lrv_r``, ``var_x``, ``var_r`` and
    their standard errors ``se_lrv_x``, ``se_lrv_r`` (chi-square, :math:`\\sqrt{2/(n-1)}`).

    Book: :prf:ref:`prop-11-oracle` in book/11-actor-critic-finite-time/rate.md.
    """
    env = _env(env)
    theta = real(theta, "theta")
    T = positive_int(T, "T")
    n = positive_int(n_chains, "n_chains")
    burn = positive_int(burn, "burn")
    if n < 2:
        raise ValueError("n_chains must be >= 2")
    check_generator(rng)
    J = float(exact_J(env, theta))
    s = rng.standard_normal(n) * np.sqrt(stationary_var(env, gain(env, theta)))
    sx = np.zeros(n)
    sr = np.zeros(n)
    sxx = srr = 0.0
    h = differential_value(env, theta, s)
    for t in range(burn + T):
        a = sample_action(env, theta, s, rng)
        r, s_next = env_step(env, s, a, rng)
        h_next = differential_value(env, theta, s_next)
        x = (r - J + h_next - h) * grad_log_pi(env, theta, s, a)
        if t >= burn:
            sx += x
            sr += r
            sxx += float((x**2).sum())
            srr += float(((r - J) ** 2).sum())
        s, h = s_next, h_next
    lrv_x = float(T * np.var(sx / T, ddof=1))
    lrv_r = float(T * np.var(sr / T, ddof=1))
    se = np.sqrt(2 / (n - 1))
    return dict(
        lrv_x=lrv_x,
        lrv_r=lrv_r,
        var_x=sxx / (n * T),
        var_r=srr / (n * T),
        se_lrv_x=lrv_x * se,
        se_lrv_r=lrv_r * se,
    )
