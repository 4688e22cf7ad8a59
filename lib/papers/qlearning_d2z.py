r"""Synchronous Q-learning with decay-to-zero step sizes (LD2Z / PD2Z-ν).

Paper: S. Bonnerjee, Z. Lou, W. B. Wu, *Sharp asymptotic theory for Q-learning with
LD2Z learning rate and its generalization*, ICLR 2026 (arXiv:2604.04218, OpenReview
``WjEAMyLDoh``). Chapter 07 of the book.

Chapter folder: ``book/07-q-learning-pd2z/``.

Central update (generative model, every pair ``(s, a)`` sampled at every step):

.. math::
    Q_{t,n} = (1-\eta_{t,n})\,Q_{t-1,n} + \eta_{t,n}\,\widehat{\mathcal B}_t Q_{t-1,n},
    \qquad \eta_{t,n} = \eta\,(1 - t/n)^{\nu}.

Its linearisation around :math:`Q^\star` is the Gaussian chain
:math:`Y_t = (I - \eta_{t,n} G) Y_{t-1} + \eta_{t,n}\aleph_t`, :math:`G = I-\gamma H_{\pi^\star}`,
:math:`\aleph_t\sim\mathcal N(0,\Gamma)`, whose tail-average covariance is computed
exactly by :func:`gaussian_tail_cov`.

Vectors over state-action pairs use the flat index ``i = s * n_actions + a``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lib.validate import check_generator, positive_int

# Moves: up, right, down, left as (row, column) offsets.
_MOVES = np.array([(-1, 0), (0, 1), (1, 0), (0, -1)])


@dataclass
class GridMDP:
    """A slippery grid world with two teleporting special states.

    States are the cells of a ``size x size`` grid in row-major order; actions are
    up/right/down/left. From an ordinary state the intended move happens with
    probability ``1 - slip + slip/4`` and each of the four moves with ``slip/4``; a move
    off the grid leaves the agent in place with reward ``off_grid``. From a special
    state ``s`` with ``specials[s] = (dest, R)`` every action moves to ``dest`` with
    reward ``R``. The reward ``tie_eps * a`` is added to action ``a`` so that optimal
    actions are unique (Assumption 3.2 of the paper needs this). Optional reward noise
    ``reward_noise * T`` with ``T`` standard normal (``noise_df=None``) or Student-t with
    ``noise_df > 2`` degrees of freedom rescaled to unit variance.

    Attributes (after construction)
    -------------------------------
    next_state, reward, prob : arrays of shape ``(d, 4)``
        For pair ``i`` the four possible outcomes: next state, reward, probability.
    """

    size: int = 4
    gamma: float = 0.1
    slip: float = 0.1
    specials: dict = field(default_factory=lambda: {1: (13, 10.0), 3: (11, 5.0)})
    off_grid: float = -1.0
    tie_eps: float = 0.2
    reward_noise: float = 0.0
    noise_df: float | None = None

    def __post_init__(self):
        self.size = positive_int(self.size, "size")
        if not (0.0 < self.gamma < 1.0):
            raise ValueError(f"gamma must be in (0, 1), got {self.gamma}")
        if not (0.0 <= self.slip <= 1.0):
            raise ValueError(f"slip must be in [0, 1], got {self.slip}")
        if self.tie_eps < 0:
            raise ValueError(f"tie_eps must be >= 0, got {self.tie_eps}")
        if self.reward_noise < 0:
            raise ValueError(f"reward_noise must be >= 0, got {self.reward_noise}")
        if self.noise_df is not None and not self.noise_df > 2:
            raise ValueError(f"noise_df must be > 2 (finite variance) or None, got {self.noise_df}")
        S = self.size**2
        for s, (dest, _) in self.specials.items():
            if not (0 <= s < S and 0 <= dest < S):
                raise ValueError(
                    f"specials entry {s}: ({dest}, ...) is outside the {self.size}x{self.size} grid"
                )
        self.n_states, self.n_actions = S, 4
        d = S * 4
        ns = np.zeros((d, 4), dtype=np.int64)
        rw = np.zeros((d, 4))
        pr = np.zeros((d, 4))
        for s in range(S):
            row, col = divmod(s, self.size)
            for a in range(4):
                i = s * 4 + a
                if s in self.specials:
                    dest, R = self.specials[s]
                    ns[i, :] = dest
                    rw[i, :] = R + self.tie_eps * a
                    pr[i] = [1.0, 0.0, 0.0, 0.0]
                    continue
                for k, (dr, dc) in enumerate(_MOVES):
                    r2, c2 = row + dr, col + dc
                    inside = 0 <= r2 < self.size and 0 <= c2 < self.size
                    ns[i, k] = r2 * self.size + c2 if inside else s
                    rw[i, k] = (0.0 if inside else self.off_grid) + self.tie_eps * a
                    pr[i, k] = (1 - self.slip + self.slip / 4) if k == a else self.slip / 4
        self.next_state, self.reward, self.prob = ns, rw, pr
        self._cum = np.cumsum(pr, axis=1)[:, :3]
        self._base = 4 * np.arange(d)
        self._ns_flat, self._r_flat = ns.ravel(), rw.ravel()
        self._qstar = None

    @property
    def d(self) -> int:
        """Number of state-action pairs."""
        return self.n_states * self.n_actions

    @property
    def noise_var(self) -> float:
        return float(self.reward_noise**2)

    def transition_matrix(self) -> np.ndarray:
        """``P`` of shape ``(d, S)``: ``P[i, s'] = P(s' | s, a)``."""
        P = np.zeros((self.d, self.n_states))
        np.add.at(P, (np.repeat(np.arange(self.d), 4), self.next_state.ravel()), self.prob.ravel())
        return P

    def mean_reward(self) -> np.ndarray:
        """``r`` of shape ``(d,)``."""
        return (self.prob * self.reward).sum(axis=1)

    def bellman(self, Q: np.ndarray) -> np.ndarray:
        """Exact Bellman optimality operator ``(BQ)(s,a) = r + gamma * P max_a' Q``."""
        Q = np.asarray(Q, dtype=float)
        if Q.shape != (self.d,):
            raise ValueError(f"Q must have shape ({self.d},), got {Q.shape}")
        V = Q.reshape(self.n_states, self.n_actions).max(axis=1)
        return self.mean_reward() + self.gamma * (self.prob * V[self.next_state]).sum(axis=1)

    def greedy(self, Q: np.ndarray) -> np.ndarray:
        """Greedy action per state, shape ``(S,)``."""
        return np.asarray(Q).reshape(self.n_states, self.n_actions).argmax(axis=1)

    def policy_matrix(self, policy: np.ndarray) -> np.ndarray:
        """``H_pi`` of shape ``(d, d)``: ``H[(s,a),(s',a')] = P(s'|s,a) 1{a' = pi(s')}``."""
        P = self.transition_matrix()
        H = np.zeros((self.d, self.d))
        cols = np.arange(self.n_states) * self.n_actions + np.asarray(policy)
        H[:, cols] = P
        return H

    def q_star(self, tol: float = 1e-12, max_iter: int = 100_000) -> np.ndarray:
        """Optimal ``Q*`` (value iteration, then an exact policy-evaluation solve)."""
        if self._qstar is not None:
            return self._qstar.copy()
        Q = np.zeros(self.d)
        r = self.mean_reward()
        for _ in range(max_iter):
            Qn = self.bellman(Q)
            done = np.max(np.abs(Qn - Q)) < tol
            Q = Qn
            if done:
                break
        # Polish: Q* solves (I - gamma H_pi*) Q = r exactly for its greedy policy.
        for _ in range(10):
            G = np.eye(self.d) - self.gamma * self.policy_matrix(self.greedy(Q))
            Qn = np.linalg.solve(G, r)
            if np.array_equal(self.greedy(Qn), self.greedy(Q)):
                Q = Qn
                break
            Q = Qn
        if np.max(np.abs(self.bellman(Q) - Q)) > max(tol, 1e-10):
            raise RuntimeError("value iteration did not converge")
        self._qstar = Q
        return Q.copy()

    def min_action_gap(self) -> float:
        """Smallest gap between the best and second-best action values of ``Q*``."""
        Qs = np.sort(self.q_star().reshape(self.n_states, self.n_actions), axis=1)
        return float(np.min(Qs[:, -1] - Qs[:, -2]))

    def linearization(self):
        """``(G, Gamma)``: ``G = I - gamma H_{pi*}`` and the Bellman-noise covariance.

        ``Gamma`` is diagonal because the pairs are sampled independently:
        ``Gamma_ii = Var(R + gamma max_a' Q*(s', a'))`` (plus the reward-noise variance).

        Book: eq:`eq-07-G` in book/07-q-learning-pd2z/theory.md.
        """
        Q = self.q_star()
        G = np.eye(self.d) - self.gamma * self.policy_matrix(self.greedy(Q))
        V = Q.reshape(self.n_states, self.n_actions).max(axis=1)
        target = self.reward + self.gamma * V[self.next_state]
        mean = (self.prob * target).sum(axis=1)
        var = (self.prob * (target - mean[:, None]) ** 2).sum(axis=1)
        var = np.where(var < 1e-15 * (1 + mean**2), 0.0, var) + self.noise_var
        return G, np.diag(var)

    # -- sampling -------------------------------------------------------------------
    def sample(self, n_chains: int, rng: np.random.Generator):
        """One synchronous draw for every pair in every chain: ``(next_state, reward)``,
        each of shape ``(n_chains, d)`` (inverse-CDF sampling of the four outcomes)."""
        ns, r, _, _ = self._draw(n_chains, rng)
        return ns, r

    def _draw(self, n_chains: int, rng: np.random.Generator):
        """``(next_state, reward, outcome, noise)``: ``outcome`` in ``0..3`` indexes the
        four rows of the outcome tables, ``noise`` is the unit-variance reward noise
        (``None`` without noise); all of shape ``(n_chains, d)``."""
        U = rng.random((n_chains, self.d))
        c = self._cum
        # inverse CDF over the four outcomes: k = #{thresholds <= U}
        k = (U >= c[:, 0]).astype(np.intp)
        k += U >= c[:, 1]
        k += U >= c[:, 2]
        kf = k + self._base  # flat index 4*i + k into the (d, 4) outcome tables
        ns = self._ns_flat[kf]
        r = self._r_flat[kf]
        z = None
        if self.reward_noise > 0:
            if self.noise_df is None:
                z = rng.standard_normal((n_chains, self.d))
            else:
                z = rng.standard_t(self.noise_df, (n_chains, self.d)) / np.sqrt(
                    self.noise_df / (self.noise_df - 2)
                )
            r = r + self.reward_noise * z
        return ns, r, k, z


def step_sizes(
    kind: str, n: int, eta: float, nu: float = 1.0, alpha: float | None = None
) -> np.ndarray:
    r"""The step-size schedule :math:`(\eta_t)_{t=1}^n`, shape ``(n,)``.

    ``"const"``: :math:`\eta`; ``"poly"``: :math:`\eta t^{-\alpha}`;
    ``"pd2z"``: :math:`\eta(1-t/n)^\nu` (LD2Z is ``nu=1``), so :math:`\eta_{n,n}=0`.

    Book: prf:`def-07-schedules` in book/07-q-learning-pd2z/theory.md.
    """
    n = positive_int(n, "n")
    if not (0 < eta <= 1):
        raise ValueError(f"eta must be in (0, 1], got {eta}")
    t = np.arange(1, n + 1, dtype=float)
    if kind == "const":
        return np.full(n, float(eta))
    if kind == "poly":
        if alpha is None or not (0 < alpha <= 1):
            raise ValueError(f"alpha must be in (0, 1] for kind='poly', got {alpha}")
        return eta * t ** (-alpha)
    if kind == "pd2z":
        if not nu > 0:
            raise ValueError(f"nu must be > 0, got {nu}")
        return eta * (1.0 - t / n) ** nu
    raise ValueError(f"kind must be 'const', 'poly' or 'pd2z', got {kind!r}")


def tail_length(n: int, nu: float = 1.0, c: float = 1.0) -> int:
    r"""Tail-averaging window :math:`m_n = \lfloor c\, n^{\nu/(\nu+1)} \rfloor` (Thm 3.5).

    Book: prf:`def-07-schedules` in book/07-q-learning-pd2z/theory.md.
    Book: prf:`thm-07-clt` in book/07-q-learning-pd2z/theory.md (the window).
    """
    n = positive_int(n, "n")
    if not (nu > 0 and c > 0):
        raise ValueError(f"nu and c must be > 0, got nu={nu}, c={c}")
    return int(min(n, max(1, np.floor(c * n ** (nu / (nu + 1)) + 1e-9))))


def _check_etas(etas):
    etas = np.asarray(etas, dtype=float)
    if etas.ndim != 1 or etas.size == 0:
        raise ValueError(f"etas must be a non-empty 1-D array, got shape {etas.shape}")
    if np.any(~np.isfinite(etas)) or np.any(etas < 0) or np.any(etas > 1):
        raise ValueError("etas must lie in [0, 1]")
    return etas


def run_sync_q(
    mdp: GridMDP,
    etas,
    n_chains: int,
    rng: np.random.Generator,
    Q0=None,
    tail_m: int | None = None,
    keep_from: int | None = None,
    track_error: bool = True,
    count_outcomes: bool = False,
):
    r"""Run synchronous Q-learning on ``n_chains`` independent chains at once.

    Parameters
    ----------
    mdp : GridMDP
    etas : array (n,)
        Step sizes :math:`\eta_{1..n}`.
    n_chains : int
    rng : numpy Generator (all randomness; the same seed gives the same draws).
    Q0 : array (d,) or (n_chains, d), optional
        Initial value (default 0).
    tail_m : int, optional
        Also return the tail Polyak-Ruppert average of the last ``tail_m`` iterates.
    keep_from : int, optional
        Keep the iterates :math:`Q_t` for ``keep_from <= t <= n`` (for partial sums).
    track_error : bool
        Record :math:`|Q_t - Q^\star|_\infty` for every ``t``.
    count_outcomes : bool
        Also return ``outcomes``, the sufficient statistics of the run's own transitions
        for :func:`plugin_gamma`: ``counts`` (C, d, 4), how often each of the four outcomes of
        every pair was drawn, and with reward noise ``noise_sum`` (C, d, 4), the noise summed
        per outcome, and ``noise_sq`` (C, d), its sum of squares. The random draws are the
        same as without counting.

    Returns
    -------
    dict with ``last`` (C, d), ``full`` (C, d) (average of :math:`Q_1..Q_n`), and
    ``tail`` (C, d), ``kept`` (C, n-keep_from+1, d), ``path_err`` (C, n), ``outcomes``
    when asked.

    Book: eq:`eq-07-update` in book/07-q-learning-pd2z/theory.md.
    """
    if not isinstance(mdp, GridMDP):
        raise TypeError(f"mdp must be a GridMDP, got {type(mdp).__name__}")
    etas = _check_etas(etas)
    n_chains = positive_int(n_chains, "n_chains")
    check_generator(rng)
    n, d = etas.size, mdp.d
    if tail_m is not None and not (1 <= tail_m <= n):
        raise ValueError(f"tail_m must be in [1, n={n}], got {tail_m}")
    if keep_from is not None and not (1 <= keep_from <= n):
        raise ValueError(f"keep_from must be in [1, n={n}], got {keep_from}")
    Q = np.zeros((n_chains, d))
    if Q0 is not None:
        Q0 = np.asarray(Q0, dtype=float)
        if Q0.shape not in ((d,), (n_chains, d)):
            raise ValueError(f"Q0 must have shape ({d},) or ({n_chains}, {d}), got {Q0.shape}")
        Q[:] = Q0
    qstar = mdp.q_star() if track_error else None
    full = np.zeros((n_chains, d))
    tail = np.zeros((n_chains, d)) if tail_m else None
    kept = np.empty((n_chains, n - keep_from + 1, d)) if keep_from else None
    path_err = np.empty((n_chains, n)) if track_error else None
    if count_outcomes:
        counts = np.zeros((n_chains, d, 4), dtype=np.int64)
        noisy = mdp.reward_noise > 0
        noise_sum = np.zeros((n_chains, d, 4)) if noisy else None
        noise_sq = np.zeros((n_chains, d)) if noisy else None
    A, g = mdp.n_actions, mdp.gamma
    for t in range(1, n + 1):
        ns, r, k, z = mdp._draw(n_chains, rng)
        if count_outcomes:
            for o in range(4):
                hit = k == o
                counts[:, :, o] += hit
                if noisy:
                    noise_sum[:, :, o] += np.where(hit, z, 0.0)
            if noisy:
                noise_sq += z * z
        V = _max_over_actions(Q, A)
        # empirical Bellman operator: R_t(s,a) + gamma * max_a' Q(s'_t(s,a), a')
        target = r + g * np.take_along_axis(V, ns, axis=1)
        # Q_t = (1 - eta_t) Q_{t-1} + eta_t * target
        Q += etas[t - 1] * (target - Q)
        full += Q
        if tail_m and t > n - tail_m:
            tail += Q
        if keep_from and t >= keep_from:
            kept[:, t - keep_from] = Q
        if track_error:
            path_err[:, t - 1] = np.abs(Q - qstar).max(axis=1)
    out = {"last": Q, "full": full / n}
    if tail_m:
        out["tail"] = tail / tail_m
    if keep_from:
        out["kept"] = kept
    if track_error:
        out["path_err"] = path_err
    if count_outcomes:
        out["outcomes"] = {"counts": counts, "noise_sum": noise_sum, "noise_sq": noise_sq}
    return out


def _max_over_actions(Q, A):
    """``max_a Q[:, s*A + a]`` for every state, shape (C, S) (faster than a strided max)."""
    V = Q[:, 0::A].copy()
    for a in range(1, A):
        np.maximum(V, Q[:, a::A], out=V)
    return V


def forgetting_factor(etas, gamma: float) -> np.ndarray:
    r"""Exact contraction of a constant offset, shape (n,).

    :math:`\prod_{j\le t}(1-(1-\gamma)\eta_j)`.

    Book: prf:`lem-07-forgetting` in book/07-q-learning-pd2z/theory.md.
    """
    etas = _check_etas(etas)
    if not (0 < gamma < 1):
        raise ValueError(f"gamma must be in (0, 1), got {gamma}")
    return np.cumprod(1.0 - (1.0 - gamma) * etas)


def _check_G_Gamma(G, Gamma):
    G = np.asarray(G, dtype=float)
    Gamma = np.asarray(Gamma, dtype=float)
    if G.ndim != 2 or G.shape[0] != G.shape[1]:
        raise ValueError(f"G must be a square matrix, got shape {G.shape}")
    if Gamma.shape != G.shape:
        raise ValueError(f"Gamma must have the shape of G {G.shape}, got {Gamma.shape}")
    if not np.allclose(Gamma, Gamma.T):
        raise ValueError("Gamma must be symmetric")
    return G, Gamma


def gaussian_tail_cov(G, Gamma, etas, m: int) -> np.ndarray:
    r"""Exact covariance of the tail average :math:`\bar Y_n=\frac1m\sum_{t>n-m} Y_t`.

    :math:`Y_t=(I-\eta_t G)Y_{t-1}+\eta_t\aleph_t`, :math:`Y_0=0`,
    :math:`\aleph_t\sim\mathcal N(0,\Gamma)`. Then :math:`\bar Y_n=\sum_s B_s\aleph_s` with
    :math:`B_s=\frac{\eta_s}{m}R_s`, :math:`R_{n+1}=0`,
    :math:`R_s=\mathbb 1\{s>n-m\}I+R_{s+1}(I-\eta_{s+1}G)` (backward recursion), and the
    covariance is :math:`\sum_s B_s\Gamma B_s^\top`.

    Book: prf:`prop-07-cov` in book/07-q-learning-pd2z/theory.md.
    """
    G, Gamma = _check_G_Gamma(G, Gamma)
    etas = _check_etas(etas)
    n, d = etas.size, G.shape[0]
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or not (1 <= m <= n):
        raise ValueError(f"m must be an integer in [1, n={n}], got {m!r}")
    I = np.eye(d)
    R = np.zeros((d, d))
    Sigma = np.zeros((d, d))
    for s in range(n, 0, -1):
        step_next = I - etas[s] * G if s < n else I  # R_{n+1} = 0, so unused at s = n
        R = (I if s > n - m else 0.0) + R @ step_next
        B = (etas[s - 1] / m) * R
        Sigma += B @ Gamma @ B.T
    return Sigma


def gaussian_tail_cov_forward(G, Gamma, etas, m: int) -> np.ndarray:
    r"""Same covariance as :func:`gaussian_tail_cov` by a forward moment recursion.

    Tracks :math:`P_t=\mathrm{Cov}(Y_t)`, :math:`X_t=\mathrm{Cov}(S_t,Y_t)` and
    :math:`W_t=\mathrm{Cov}(S_t)` for the running tail sum :math:`S_t`. An independent
    second algorithm, used to check the first.

    Book: prf:`prop-07-cov` in book/07-q-learning-pd2z/theory.md (the forward check after it).
    """
    G, Gamma = _check_G_Gamma(G, Gamma)
    etas = _check_etas(etas)
    n, d = etas.size, G.shape[0]
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or not (1 <= m <= n):
        raise ValueError(f"m must be an integer in [1, n={n}], got {m!r}")
    I = np.eye(d)
    P = np.zeros((d, d))
    X = np.zeros((d, d))
    W = np.zeros((d, d))
    for t in range(1, n + 1):
        A = I - etas[t - 1] * G
        P = A @ P @ A.T + etas[t - 1] ** 2 * Gamma
        X = X @ A.T  # Cov(S_{t-1}, Y_t)
        if t > n - m:
            W = W + X + X.T + P
            X = X + P
    return W / m**2


def simulate_Y(
    G,
    Gamma,
    etas,
    n_chains: int,
    rng: np.random.Generator,
    tail_m: int | None = None,
    keep_from: int | None = None,
):
    r"""Simulate the Gaussian chains :math:`Y_t=(I-\eta_t G)Y_{t-1}+\eta_t\aleph_t`, :math:`Y_0=0`.

    ``Gamma`` must be diagonal (it is for synchronous sampling), so it is never
    Cholesky-factored (it is singular on deterministic pairs).
    Returns a dict with ``last``, and ``tail``/``kept`` as in :func:`run_sync_q`.

    Book: eq:`eq-07-Y` in book/07-q-learning-pd2z/theory.md.
    """
    G, Gamma = _check_G_Gamma(G, Gamma)
    etas = _check_etas(etas)
    n_chains = positive_int(n_chains, "n_chains")
    check_generator(rng)
    if np.any(np.abs(Gamma - np.diag(np.diag(Gamma))) > 0):
        raise ValueError("Gamma must be diagonal")
    sd = np.sqrt(np.clip(np.diag(Gamma), 0, None))
    n, d = etas.size, G.shape[0]
    if tail_m is not None and not (1 <= tail_m <= n):
        raise ValueError(f"tail_m must be in [1, n={n}], got {tail_m}")
    if keep_from is not None and not (1 <= keep_from <= n):
        raise ValueError(f"keep_from must be in [1, n={n}], got {keep_from}")
    Y = np.zeros((n_chains, d))
    tail = np.zeros((n_chains, d)) if tail_m else None
    kept = np.empty((n_chains, n - keep_from + 1, d)) if keep_from else None
    GT = G.T
    for t in range(1, n + 1):
        aleph = rng.standard_normal((n_chains, d)) * sd
        Y = Y - etas[t - 1] * (Y @ GT) + etas[t - 1] * aleph
        if tail_m and t > n - tail_m:
            tail += Y
        if keep_from and t >= keep_from:
            kept[:, t - keep_from] = Y
    out = {"last": Y}
    if tail_m:
        out["tail"] = tail / tail_m
    if keep_from:
        out["kept"] = kept
    return out


def max_tail_partial_sum(X, center=None) -> np.ndarray:
    r"""Statistic of Thm 4.1: :math:`\max_{k\le t\le n}|\sum_{l=t}^n (X_l-c)|_\infty`.

    ``X`` has shape ``(C, L, d)`` (the kept iterates :math:`l=k..n`); ``center`` is
    :math:`Q^\star` (shape ``(d,)``) or ``None`` for already-centred paths. Returns ``(C,)``.

    Book: prf:`thm-07-sip` in book/07-q-learning-pd2z/theory.md.
    """
    X = np.asarray(X, dtype=float)
    if X.ndim != 3:
        raise ValueError(f"X must have shape (chains, times, d), got {X.shape}")
    if center is not None:
        center = np.asarray(center, dtype=float)
        if center.shape != (X.shape[2],):
            raise ValueError(f"center must have shape ({X.shape[2]},), got {center.shape}")
        X = X - center
    rev = np.cumsum(X[:, ::-1, :], axis=1)  # sum_{l=t}^n for t = n, n-1, ..., k
    return np.abs(rev).max(axis=(1, 2))


def brownian_tail_statistic(
    G, Gamma, L: int, n_chains: int, rng: np.random.Generator
) -> np.ndarray:
    r"""The same statistic for the Brownian (FCLT) surrogate: partial sums of i.i.d.
    :math:`G^{-1}\aleph_l`, :math:`l=1..L` (what a functional CLT would use)."""
    G, Gamma = _check_G_Gamma(G, Gamma)
    L = positive_int(L, "L")
    n_chains = positive_int(n_chains, "n_chains")
    check_generator(rng)
    sd = np.sqrt(np.clip(np.diag(Gamma), 0, None))
    Ginv_T = np.linalg.inv(G).T
    incr = (rng.standard_normal((n_chains, L, G.shape[0])) * sd) @ Ginv_T
    return max_tail_partial_sum(incr)


# -- the plug-in Gaussian bootstrap -------------------------------------------------------
def plugin_gamma(mdp: GridMDP, Qbar, outcomes: dict) -> np.ndarray:
    r"""Plug-in Bellman-noise variances :math:`\widehat\Gamma_{jj}`, shape ``(C, d)``.

    For every chain, the variance of the targets
    :math:`R_t(j)+\gamma\max_{a'}\bar Q_n(s'_t(j),a')` over the run's own ``N`` transitions
    of pair :math:`j` (divisor ``N``): the Bellman-noise variance
    :math:`\Gamma_{jj}=\operatorname{Var}(R+\gamma\max_{a'}Q^\star(s',a'))` with
    :math:`\bar Q_n` plugged in for :math:`Q^\star` and the empirical kernel for :math:`P`.
    ``outcomes`` is the ``outcomes`` entry of :func:`run_sync_q` (``count_outcomes=True``);
    ``Qbar`` has shape ``(C, d)``. With the outcome counts :math:`N_{jk}` and the centred
    outcome values :math:`a_{jk}` the variance is
    :math:`\frac1N\big[\sum_kN_{jk}a_{jk}^2+2\sigma\sum_ka_{jk}\zeta_{jk}+\sigma^2\sum z^2\big]
    -\big(\frac{\sigma}{N}\sum z\big)^2`, exactly the sample variance of the targets.

    Book: eq:`eq-07-plugin` in book/07-q-learning-pd2z/clt.md.
    """
    if not isinstance(mdp, GridMDP):
        raise TypeError(f"mdp must be a GridMDP, got {type(mdp).__name__}")
    if not isinstance(outcomes, dict) or "counts" not in outcomes:
        raise ValueError("outcomes must be the 'outcomes' dict of run_sync_q(count_outcomes=True)")
    counts = np.asarray(outcomes["counts"], dtype=float)
    Qbar = np.asarray(Qbar, dtype=float)
    if Qbar.ndim != 2 or Qbar.shape[1] != mdp.d:
        raise ValueError(f"Qbar must have shape (C, {mdp.d}), got {Qbar.shape}")
    if counts.shape != (Qbar.shape[0], mdp.d, 4):
        raise ValueError(f"counts must have shape {(Qbar.shape[0], mdp.d, 4)}, got {counts.shape}")
    N = counts.sum(axis=2)
    if np.any(N < 2):
        raise ValueError("outcomes must hold at least two transitions of every pair")
    V = _max_over_actions(Qbar, mdp.n_actions)  # (C, S)
    # outcome values a_jk = r(j, k) + gamma * Vbar(s'(j, k)), shape (C, d, 4)
    a = mdp.reward[None] + mdp.gamma * V[:, mdp.next_state]
    a = a - (counts * a).sum(axis=2, keepdims=True) / N[..., None]  # centre at the count mean
    second = (counts * a * a).sum(axis=2)
    if mdp.reward_noise > 0:
        sig = mdp.reward_noise
        zeta, zsq = np.asarray(outcomes["noise_sum"]), np.asarray(outcomes["noise_sq"])
        second = second + 2 * sig * (a * zeta).sum(axis=2) + sig**2 * zsq
        return np.clip(second / N - (sig * zeta.sum(axis=2) / N) ** 2, 0.0, None)
    return np.clip(second / N, 0.0, None)


def tail_cov_basis(G, etas, m: int) -> np.ndarray:
    r"""Basis :math:`S_j=\sum_sB_se_je_j^\top B_s^\top`, shape ``(d, d, d)`` (``S[j]``).

    For a diagonal noise covariance the tail covariance of :func:`gaussian_tail_cov` is
    linear in the diagonal, :math:`\Sigma_n(\Gamma)=\sum_j\Gamma_{jj}S_j`, so one basis
    serves every plug-in :math:`\widehat\Gamma`. :math:`B_s` is the coefficient of
    :math:`\aleph_s` in the tail average (backward recursion of :func:`gaussian_tail_cov`);
    :math:`S_j=C_j^\top C_j` with :math:`C_j` the stacked :math:`j`-th columns of the
    :math:`B_s`.

    Book: eq:`eq-07-basis` in book/07-q-learning-pd2z/clt.md.
    """
    G = np.asarray(G, dtype=float)
    if G.ndim != 2 or G.shape[0] != G.shape[1]:
        raise ValueError(f"G must be a square matrix, got shape {G.shape}")
    etas = _check_etas(etas)
    n, d = etas.size, G.shape[0]
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or not (1 <= m <= n):
        raise ValueError(f"m must be an integer in [1, n={n}], got {m!r}")
    I = np.eye(d)
    R = np.zeros((d, d))
    S = np.zeros((d, d, d))
    block, chunk = [], 256
    for s in range(n, 0, -1):
        step_next = I - etas[s] * G if s < n else I
        R = (I if s > n - m else 0.0) + R @ step_next
        block.append((etas[s - 1] / m) * R)
        if len(block) == chunk or s == 1:
            Cj = np.stack(block).transpose(2, 0, 1)  # (j, s, i) = B_s[i, j]
            S += Cj.transpose(0, 2, 1) @ Cj
            block = []
    return S


def plugin_band_radius(
    S, gamma_hat, level, n_boot: int, rng: np.random.Generator, chunk: int = 64
) -> np.ndarray:
    r"""Gaussian-bootstrap radius of a simultaneous band for :math:`\bar Q_n-Q^\star`.

    Returns shape ``(C,)`` for a scalar ``level`` and ``(C, L)`` for ``L`` levels.

    For each chain :math:`c`, :math:`\widehat\Sigma_c=\sum_j\widehat\Gamma_{c,jj}S_j`; draw
    ``n_boot`` replicates :math:`\widehat\Sigma_c^{1/2}\xi`, :math:`\xi\sim\mathcal N(0,I)`,
    and return the ``level`` quantile of :math:`\max_i|\cdot|`. The band
    :math:`\{Q:\max_i|\bar Q_{n,i}-Q_i|\le r_c\}` then covers :math:`Q^\star` with probability
    close to ``level``. ``S`` is :func:`tail_cov_basis` ``(d, d, d)``, ``gamma_hat`` is
    :func:`plugin_gamma` ``(C, d)``. The square root is symmetric (eigenvalues clipped at 0),
    so a singular :math:`\widehat\Sigma_c` is harmless.

    Book: eq:`eq-07-band` in book/07-q-learning-pd2z/clt.md.
    """
    S = np.asarray(S, dtype=float)
    gamma_hat = np.asarray(gamma_hat, dtype=float)
    if S.ndim != 3 or S.shape[0] != S.shape[1] or S.shape[1] != S.shape[2]:
        raise ValueError(f"S must have shape (d, d, d), got {S.shape}")
    d = S.shape[0]
    if gamma_hat.ndim != 2 or gamma_hat.shape[1] != d:
        raise ValueError(f"gamma_hat must have shape (C, {d}), got {gamma_hat.shape}")
    if np.any(gamma_hat < 0) or not np.all(np.isfinite(gamma_hat)):
        raise ValueError("gamma_hat must be finite and non-negative")
    levels = np.atleast_1d(np.asarray(level, dtype=float))
    if levels.ndim != 1 or not np.all((levels > 0.0) & (levels < 1.0)):
        raise ValueError(f"level must be a number or 1-D array in (0, 1), got {level}")
    n_boot = positive_int(n_boot, "n_boot")
    check_generator(rng)
    C = gamma_hat.shape[0]
    radius = np.empty((C, levels.size))
    flat = S.reshape(d, d * d)
    for lo in range(0, C, chunk):
        g = gamma_hat[lo : lo + chunk]
        Sig = (g @ flat).reshape(-1, d, d)  # Sigma_n(Gamma_hat_c) = sum_j Gamma_jj S_j
        w, U = np.linalg.eigh(Sig)
        root = U * np.sqrt(np.clip(w, 0.0, None))[:, None, :]  # root @ root.T = Sigma
        xi = rng.standard_normal((g.shape[0], n_boot, d))
        reps = xi @ root.transpose(0, 2, 1)  # (c, b, d), rows ~ N(0, Sigma_c)
        radius[lo : lo + chunk] = np.quantile(np.abs(reps).max(axis=2), levels, axis=1).T
    return radius[:, 0] if np.ndim(level) == 0 else radius
