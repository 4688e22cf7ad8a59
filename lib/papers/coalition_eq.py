r"""Coalition-robust equilibrium: MASE, its LP, FTPL on the meta-game, and the tree DP (ch. 02).

Paper: M. Liu, G. Farina, A. Ozdaglar, *Computing Equilibrium beyond Unilateral Deviation*,
ICLR 2026 (OpenReview ``XXNexSaay2``; extended version arXiv:2604.28186).

Chapter folder: ``book/02-coalition-equilibrium/``.

A coalition :math:`S` deviates *coarsely* to a fixed joint action :math:`\hat a_S`; its average
gain against a correlated strategy :math:`\pi\in\Delta(\mathcal A)` is

.. math::
    g_{S,\hat a_S}(\pi)=\frac1{|S|}\sum_{i\in S}\mathbb E_{a\sim\pi}
    \big[U_i(\hat a_S,a_{-S})-U_i(a)\big],

and a MASE minimises :math:`\Phi(\pi)=\max_{S,\hat a_S}g_{S,\hat a_S}(\pi)`. Stacking the gains
as rows of a matrix :math:`M` (one row per deviation, one column per joint action) gives
:math:`\Phi(\pi)=\max_d(M\pi)_d`, so MASE is the LP :math:`\min z` s.t. :math:`M\pi\le z`,
:math:`\pi\in\Delta`.

Joint actions are indexed in C order (``numpy.ravel_multi_index`` over the action counts).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import networkx as nx
import numpy as np
from networkx.algorithms import approximation as nx_approx
from scipy.optimize import linprog

from lib.validate import check_generator, positive, positive_int, real, real_array

MAX_MATRIX_ENTRIES = 2**26
"""Largest gain matrix :func:`deviation_matrix` builds (rows x joint actions)."""

__all__ = [
    "NormalFormGame",
    "PolymatrixGame",
    "prisoners_dilemma",
    "stag_hunt",
    "chicken",
    "random_normal_form",
    "random_polymatrix",
    "coalitions",
    "deviation_matrix",
    "mase_lp",
    "phi",
    "gain_variant",
    "exploitability",
    "welfare",
    "ewf_lp",
    "weighted_mase",
    "ftpl_meta",
    "hedge_selfplay",
    "utility_dependency_graph",
    "tree_decomposition",
    "min_sum_dp",
    "brute_force_min",
    "correlator_tables",
    "succinct_ftpl",
    "succinct_ftpl_chains",
    "path_of_bags",
    "local_gains",
]


# --------------------------------------------------------------------------- games
class NormalFormGame:
    r"""A finite game in normal form.

    Parameters
    ----------
    U : array_like, shape ``(A_1, ..., A_N, N)``
        ``U[a_1, ..., a_N, i]`` is :math:`U_i(a)\in[0,1]`.
    """

    def __init__(self, U):
        U = real_array(U, "U")
        if U.ndim < 2:
            raise ValueError(f"U must have shape (A_1, ..., A_N, N), got {U.shape}")
        n = U.ndim - 1
        if U.shape[-1] != n:
            raise ValueError(
                f"U must have a last axis of length N = {n} (one utility per player), "
                f"got shape {U.shape}"
            )
        if np.any(U < 0) or np.any(U > 1):
            raise ValueError("U must take values in [0, 1]")
        self.U = U
        self.N = n
        self.actions = U.shape[:-1]

    @property
    def n_joint(self) -> int:
        """Number of joint actions :math:`|\\mathcal A|`."""
        return int(np.prod(self.actions))

    def joint(self, index: int) -> tuple[int, ...]:
        """The joint action with flat index ``index``."""
        return tuple(int(x) for x in np.unravel_index(index, self.actions))

    def index(self, a: Sequence[int]) -> int:
        """Flat index of the joint action ``a``."""
        return int(np.ravel_multi_index(tuple(a), self.actions))


def prisoners_dilemma() -> NormalFormGame:
    """PD with :math:`(R,S,T,P)=(0.6,0,1,0.2)`; action 0 = C, 1 = D."""
    r, s, t, p = 0.6, 0.0, 1.0, 0.2
    return NormalFormGame([[[r, r], [s, t]], [[t, s], [p, p]]])


def stag_hunt() -> NormalFormGame:
    """Stag Hunt: SS=(1,1), SH=(0,0.6), HS=(0.6,0), HH=(0.6,0.6); action 0 = S, 1 = H."""
    return NormalFormGame([[[1, 1], [0, 0.6]], [[0.6, 0], [0.6, 0.6]]])


def chicken() -> NormalFormGame:
    """Chicken: swerve/swerve (0.7,0.7), swerve/dare (0.3,1), dare/dare (0,0); 0 = swerve."""
    return NormalFormGame([[[0.7, 0.7], [0.3, 1]], [[1, 0.3], [0, 0]]])


def random_normal_form(n_players: int, n_actions: int, rng) -> NormalFormGame:
    """Utilities i.i.d. uniform on [0, 1]."""
    n = positive_int(n_players, "n_players")
    a = positive_int(n_actions, "n_actions")
    check_generator(rng)
    return NormalFormGame(rng.uniform(size=(a,) * n + (n,)))


class PolymatrixGame:
    r"""A polymatrix game :math:`U_k(a)=\frac1{\deg k}\sum_{j\sim k}M_{kj}[a_k,a_j]\in[0,1]`.

    Parameters
    ----------
    graph : networkx.Graph
        Interaction graph on nodes ``0..N-1``.
    mats : dict
        ``mats[(k, j)]``, shape ``(A, A)``, entries in [0, 1], for every ordered pair of
        neighbours.
    A : int
        Actions per player.
    """

    def __init__(self, graph, mats, A: int):
        if not isinstance(graph, nx.Graph):
            raise TypeError(f"graph must be a networkx.Graph, got {type(graph).__name__}")
        n = graph.number_of_nodes()
        if n == 0 or set(graph.nodes) != set(range(n)):
            raise ValueError("graph must have nodes 0..N-1 with N >= 1")
        self.A = positive_int(A, "A")
        self.graph = graph
        self.N = n
        self.mats = {}
        for k, j in itertools.chain(graph.edges, ((j, k) for k, j in graph.edges)):
            if (k, j) not in mats:
                raise ValueError(f"mats is missing the matrix for the ordered pair {(k, j)}")
            m = real_array(mats[(k, j)], "mats", shape=(self.A, self.A))
            if np.any(m < 0) or np.any(m > 1):
                raise ValueError("mats must take values in [0, 1]")
            self.mats[(k, j)] = m

    def neighbourhood(self, k: int) -> tuple[int, ...]:
        """:math:`N(k)`: player ``k`` and its neighbours, sorted."""
        return tuple(sorted({k, *self.graph.neighbors(k)}))

    def local_tables(self) -> list[tuple[tuple[int, ...], np.ndarray]]:
        r"""``[(N(k), U_k as a table over a_{N(k)})]`` for every player ``k``."""
        out = []
        for k in range(self.N):
            scope = self.neighbourhood(k)
            table = np.zeros((self.A,) * len(scope))
            deg = max(len(scope) - 1, 1)
            pos = scope.index(k)
            for j in self.graph.neighbors(k):
                shape = [1] * len(scope)
                shape[pos] = self.A
                shape[scope.index(j)] = self.A
                m = self.mats[(k, j)] if pos < scope.index(j) else self.mats[(k, j)].T
                table = table + m.reshape(shape) / deg
            out.append((scope, table))
        return out

    def to_normal_form(self) -> NormalFormGame:
        """The same game as a :class:`NormalFormGame` (``A**N`` joint actions)."""
        if self.A**self.N > 2**20:
            raise ValueError(f"A**N = {self.A**self.N} is too large for the normal form")
        U = np.zeros((self.A,) * self.N + (self.N,))
        for k, (scope, table) in enumerate(self.local_tables()):
            U[..., k] = _expand(table, scope, tuple(range(self.N)))
        return NormalFormGame(U)


def random_polymatrix(graph, A: int, rng) -> PolymatrixGame:
    """Polymatrix game on ``graph`` with i.i.d. uniform [0, 1] edge matrices."""
    check_generator(rng)
    if not isinstance(graph, nx.Graph):
        raise TypeError(f"graph must be a networkx.Graph, got {type(graph).__name__}")
    A = positive_int(A, "A")
    mats = {}
    for k, j in sorted(graph.edges):
        mats[(k, j)] = rng.uniform(size=(A, A))
        mats[(j, k)] = rng.uniform(size=(A, A))
    return PolymatrixGame(graph, mats, A)


def _check_game(game) -> NormalFormGame:
    if isinstance(game, PolymatrixGame):
        return game.to_normal_form()
    if not isinstance(game, NormalFormGame):
        raise TypeError(f"game must be a NormalFormGame, got {type(game).__name__}")
    return game


# --------------------------------------------------------------------------- deviations
def coalitions(N: int, kind="all") -> list[tuple[int, ...]]:
    """The coalition family :math:`\\mathcal S`, sorted by size then lexicographically.

    ``kind`` is ``"all"`` (every non-empty subset), ``"singletons"``, ``"grand"`` (the grand
    coalition only) or an int ``k`` (every subset of size at most ``k``).
    """
    N = positive_int(N, "N")
    if kind == "all":
        max_size = N
    elif kind == "singletons":
        max_size = 1
    elif kind == "grand":
        return [tuple(range(N))]
    elif isinstance(kind, int) and not isinstance(kind, bool):
        max_size = positive_int(kind, "kind")
    else:
        raise ValueError(f"kind must be 'all', 'singletons', 'grand' or an int, got {kind!r}")
    return [
        c for size in range(1, min(max_size, N) + 1) for c in itertools.combinations(range(N), size)
    ]


def _check_coalitions(coals, N: int) -> list[tuple[int, ...]]:
    if isinstance(coals, (str, int)):
        return coalitions(N, coals)
    out = []
    for c in coals:
        c = tuple(int(i) for i in c)
        if len(c) == 0 or len(set(c)) != len(c) or min(c) < 0 or max(c) >= N:
            raise ValueError(f"coalitions must be non-empty sets of players in 0..{N - 1}")
        out.append(tuple(sorted(c)))
    if not out:
        raise ValueError("coalitions must not be empty")
    return out


def deviation_matrix(game, coals="all", *, aggregate: str = "mean"):
    r"""The gain matrix :math:`M_{(S,\hat a_S),a}` of the MASE LP.

    Book: prf:`thm-02-existence` in book/02-coalition-equilibrium/theory.md (eq. ``eq-02-M``).

    Parameters
    ----------
    game : NormalFormGame or PolymatrixGame
    coals : list of tuples or str
        The coalition family :math:`\mathcal S` (see :func:`coalitions`).
    aggregate : {"mean", "max"}
        ``"mean"``: one row per deviation, the average gain of the members (MASE).
        ``"max"``: one row per (deviation, member), that member's gain; the maximum over
        rows is then the maximum-within-coalition gain, still linear in :math:`\pi`.

    Returns
    -------
    M : ndarray, shape (n_rows, n_joint)
    labels : list of ``(S, a_hat_S)`` (with the member appended for ``"max"``)
    """
    game = _check_game(game)
    coals = _check_coalitions(coals, game.N)
    if aggregate not in ("mean", "max"):
        raise ValueError(f"aggregate must be 'mean' or 'max', got {aggregate!r}")
    acts = game.actions
    n_rows = sum(int(np.prod([acts[i] for i in S])) for S in coals)
    if n_rows * game.n_joint > MAX_MATRIX_ENTRIES:
        raise ValueError(
            f"coals: the gain matrix would have {n_rows} x {game.n_joint} entries, more than "
            f"{MAX_MATRIX_ENTRIES}; use fewer coalitions or the succinct routines "
            "(correlator_tables, min_sum_dp)"
        )
    rows, labels = [], []
    for S in coals:
        members = [(i,) for i in S] if aggregate == "max" else [S]
        for mem in members:
            # V = the utility averaged over the members (eq-02-gain)
            V = game.U[..., list(mem)].mean(axis=-1)
            rest = [j for j in range(game.N) if j not in S]
            W = np.transpose(V, list(S) + rest)  # axes: (S..., rest...)
            kS = int(np.prod([acts[i] for i in S]))
            W = W.reshape((kS,) + tuple(acts[j] for j in rest))
            # deviation value U(a_hat_S, a_{-S}) does not depend on a_S: broadcast over S
            D = np.expand_dims(W, axis=tuple(1 + i for i in S))
            D = np.broadcast_to(D, (kS,) + acts)
            M = (D - V[None]).reshape(kS, -1)
            rows.append(M)
            for a_hat in itertools.product(*(range(acts[i]) for i in S)):
                labels.append((S, a_hat) + ((mem[0],) if aggregate == "max" else ()))
    return np.vstack(rows), labels


def _solve(c, A_ub, b_ub, A_eq, b_eq, bounds):
    return linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq, bounds=bounds, method="highs-ds")


def _lp(c, A_ub, b_ub, A_eq, b_eq, bounds, what: str):
    res = _solve(c, A_ub, b_ub, A_eq, b_eq, bounds)
    if res.status != 0:
        raise ValueError(f"{what}: the LP has no solution ({res.message})")
    return res


def _epigraph_lp(M, what: str, A_ub0=None):
    r"""Solve :math:`\min z` s.t. :math:`M\pi\le z\mathbf 1`, ``A_ub0 @ pi <= 0``,
    :math:`\pi\in\Delta`; returns ``(pi, z)``."""
    n = M.shape[1]
    A_ub = np.hstack([M, -np.ones((M.shape[0], 1))])
    if A_ub0 is not None:
        A_ub = np.vstack([A_ub, np.hstack([A_ub0, np.zeros((A_ub0.shape[0], 1))])])
    c = np.zeros(n + 1)
    c[-1] = 1.0
    A_eq = np.hstack([np.ones((1, n)), np.zeros((1, 1))])
    bounds = [(0, None)] * n + [(None, None)]
    res = _lp(c, A_ub, np.zeros(A_ub.shape[0]), A_eq, [1.0], bounds, what)
    pi = np.clip(res.x[:n], 0, None)
    return pi / pi.sum(), float(res.x[-1])


def mase_lp(game, coals="all", *, aggregate: str = "mean", cce: bool = False):
    r"""Solve the MASE LP :math:`\min z` s.t. :math:`M\pi\le z\mathbf 1`, :math:`\pi\in\Delta`.

    Book: prf:`thm-02-existence` in book/02-coalition-equilibrium/theory.md.

    With ``cce=True`` the unilateral rows are also required to be :math:`\le 0`: the
    "optimal CCE" baseline (the CCE with the smallest coalition gain). The dual simplex
    returns a vertex of the feasible polytope.

    Returns
    -------
    pi : ndarray, shape (n_joint,)
    value : float, :math:`\Phi(\pi^\star)`
    """
    game = _check_game(game)
    M, _ = deviation_matrix(game, coals, aggregate=aggregate)
    Ms = deviation_matrix(game, "singletons")[0] if cce else None
    return _epigraph_lp(M, "mase_lp", Ms)


def _check_pi(game: NormalFormGame, pi) -> np.ndarray:
    pi = real_array(pi, "pi").reshape(-1)
    if pi.size != game.n_joint:
        raise ValueError(f"pi must have {game.n_joint} entries (one per joint action)")
    if np.any(pi < -1e-12) or abs(pi.sum() - 1) > 1e-8:
        raise ValueError("pi must be a probability vector over joint actions")
    return pi


def phi(game, pi, coals="all") -> float:
    r""":math:`\Phi(\pi)=\max_{S,\hat a_S}g_{S,\hat a_S}(\pi)` (coalition exploitability).

    Book: prf:`def-02-mase` (eq. ``eq-02-gain``) in book/02-coalition-equilibrium/theory.md.
    """
    game = _check_game(game)
    pi = _check_pi(game, pi)
    M, _ = deviation_matrix(game, coals)
    return float(np.max(M @ pi))


def gain_variant(game, pi, coals="all", how: str = "mean"):
    """The coalition gain with the members' gains combined by ``how`` (mean, max or min).

    Book: section "Mean, max or min inside a coalition" of
    book/02-coalition-equilibrium/theory.md (``"mean"`` is eq. ``eq-02-gain``).

    ``"min"``: a coalition deviates only if every member gains (the non-convex variant).
    ``pi`` may be one strategy, shape ``(n_joint,)`` (returns a float), or a batch, shape
    ``(k, n_joint)`` (returns an array of ``k`` values).
    """
    game = _check_game(game)
    arr = real_array(pi, "pi")
    single = arr.ndim == 1
    batch = np.stack([_check_pi(game, p) for p in np.atleast_2d(arr)])
    if how not in ("mean", "max", "min"):
        raise ValueError(f"how must be 'mean', 'max' or 'min', got {how!r}")
    if how == "mean":
        M, _ = deviation_matrix(game, coals)
        out = (batch @ M.T).max(axis=1)
    else:
        M, labels = deviation_matrix(game, coals, aggregate="max")
        g = batch @ M.T  # one column per (deviation, member)
        groups: dict = {}
        for k, lab in enumerate(labels):
            groups.setdefault(lab[:2], []).append(k)
        comb = np.max if how == "max" else np.min
        out = np.max(np.stack([comb(g[:, ix], axis=1) for ix in groups.values()]), axis=0)
    return float(out[0]) if single else out


def exploitability(game, pi) -> float:
    r""":math:`\max_i\max_{a_i'}\mathbb E_\pi[U_i(a_i',a_{-i})-U_i(a)]` (unilateral gap)."""
    return phi(game, pi, "singletons")


def welfare(game, pi) -> float:
    r"""Social welfare :math:`\mathbb E_\pi\sum_iU_i(a)`."""
    game = _check_game(game)
    pi = _check_pi(game, pi)
    return float(pi @ game.U.sum(axis=-1).reshape(-1))


def ewf_lp(game, eps_grid) -> np.ndarray:
    r"""Equilibrium welfare frontier :math:`\mathrm{EWF}(\varepsilon)=\max\{\mathrm{SW}(\pi):
    \mathrm{Expl}(\pi)\le\varepsilon\}` on a grid.

    Book: prf:`prop-02-ewf` in book/02-coalition-equilibrium/theory.md.

    Raises ``ValueError`` (naming ``eps_grid``) if some :math:`\varepsilon` is below
    :math:`\min_\pi\mathrm{Expl}(\pi)`, where the LP is infeasible.
    """
    game = _check_game(game)
    eps = real_array(eps_grid, "eps_grid", ndim=1)
    Ms, _ = deviation_matrix(game, "singletons")
    sw = game.U.sum(axis=-1).reshape(-1)
    n = game.n_joint
    out = np.empty(eps.size)
    for k, e in enumerate(eps):
        res = _solve(-sw, Ms, np.full(Ms.shape[0], e), np.ones((1, n)), [1.0], [(0, None)] * n)
        if res.status == 2:
            raise ValueError(
                f"eps_grid contains {e}, below the smallest exploitability of any "
                f"correlated strategy; the EWF LP is infeasible there"
            )
        if res.status != 0:
            raise ValueError(f"ewf_lp: the LP failed at eps={e} ({res.message})")
        out[k] = -res.fun
    return out


def weighted_mase(game, w: float):
    r"""Weighted MASE: :math:`\min_\pi\max\{w\,\mathrm{Expl}(\pi),(1-w)\,g_{[N]}(\pi)\}`.

    Singleton gains are weighted by ``w``, the grand coalition's by ``1 - w`` (our reading
    of the paper's weighting; the grand coalition's best gain is the welfare deficit
    :math:`(\max_a\mathrm{SW}(a)-\mathrm{SW}(\pi))/N`). Returns ``(pi, value)``.

    Book: prf:`prop-02-ewf` in book/02-coalition-equilibrium/theory.md (the weighted route).
    """
    game = _check_game(game)
    w = real(w, "w", lo=0.0, hi=1.0)
    Ms, _ = deviation_matrix(game, "singletons")
    Mg, _ = deviation_matrix(game, "grand")
    return _epigraph_lp(np.vstack([w * Ms, (1 - w) * Mg]), "weighted_mase")


# --------------------------------------------------------------------------- learning
def ftpl_meta(M, T: int, rng, *, chains: int = 1, noise_scale: float | None = None) -> np.ndarray:
    r"""FTPL for both sides of the meta-game :math:`\min_\pi\max_\mu\mu^\top M\pi`.

    Book: prf:`thm-02-ftpl` in book/02-coalition-equilibrium/learning.md.

    The correlator plays :math:`a_t=\arg\min_a(L_a-\xi_a)` and the deviator
    :math:`d_t=\arg\max_d(G_d+\zeta_d)` with fresh :math:`\xi,\zeta\sim\mathrm{Exp}` of
    scale :math:`1/\eta`, :math:`\eta=1/\sqrt T`; then :math:`L\mathrel{+}=M_{d_t,\cdot}`,
    :math:`G\mathrel{+}=M_{\cdot,a_t}`. Independent chains run side by side. ``noise_scale``
    replaces the scale :math:`\sqrt T` (for power checks with a wrong scale).

    Returns
    -------
    pi_bar : ndarray, shape (chains, n_joint)
        The empirical distribution of :math:`a_1..a_T` of each chain.
    """
    M = real_array(M, "M", ndim=2)
    T = positive_int(T, "T")
    chains = positive_int(chains, "chains")
    check_generator(rng)
    n_dev, n_joint = M.shape
    scale = np.sqrt(T) if noise_scale is None else positive(noise_scale, "noise_scale")  # 1/eta
    L = np.zeros((chains, n_joint))
    G = np.zeros((chains, n_dev))
    counts = np.zeros((chains, n_joint))
    idx = np.arange(chains)
    MT = np.ascontiguousarray(M.T)
    for _ in range(T):
        a = np.argmin(L - rng.exponential(scale, size=L.shape), axis=1)
        d = np.argmax(G + rng.exponential(scale, size=G.shape), axis=1)
        L += M[d]
        G += MT[a]
        counts[idx, a] += 1
    return counts / T


def hedge_selfplay(game, T: int, lr: float) -> np.ndarray:
    r"""Independent Hedge (full information, from uniform) for every player.

    Player :math:`i` plays :math:`x_i^t\propto\exp(\mathrm{lr}\sum_{s<t}u_i^s)`, with
    :math:`u_i^s(a_i)=\mathbb E_{a_{-i}\sim x_{-i}^s}U_i(a_i,a_{-i})`. Returns the time average of
    the product distributions, flattened (the correlated strategy that no-regret play
    approaches, a CCE in the limit). ``game`` may also be a list of games with the same action
    counts; they then run side by side and the result has one row per game.
    """
    batch = isinstance(game, (list, tuple))
    games = [_check_game(g) for g in (game if batch else [game])]
    if not games:
        raise ValueError("game must not be an empty list")
    if any(g.actions != games[0].actions for g in games):
        raise ValueError("game: every game in the list must have the same action counts")
    T = positive_int(T, "T")
    lr = positive(lr, "lr")
    U = np.stack([g.U for g in games])  # (B, A_1..A_N, N)
    N, acts, B = games[0].N, games[0].actions, len(games)
    if N > 25:
        raise ValueError(f"game: hedge_selfplay supports at most 25 players, got N = {N}")
    cum = [np.zeros((B, a)) for a in acts]
    avg = np.zeros((B,) + acts)
    letters = "abcdefghijklmnopqrstuvwxy"[:N]
    specs = [
        "Z"
        + letters
        + ","
        + ",".join("Z" + letters[j] for j in range(N) if j != i)
        + "->Z"
        + letters[i]
        for i in range(N)
    ]
    for _ in range(T):
        x = []
        for c in cum:
            z = np.exp(lr * (c - c.max(axis=1, keepdims=True)))
            x.append(z / z.sum(axis=1, keepdims=True))
        joint = x[0]
        for xi in x[1:]:
            joint = joint[..., None] * xi.reshape((B,) + (1,) * (joint.ndim - 1) + (-1,))
        avg += joint
        for i in range(N):
            others = [x[j] for j in range(N) if j != i]
            cum[i] += np.einsum(specs[i], U[..., i], *others, optimize=False)
    out = (avg / T).reshape(B, -1)
    return out if batch else out[0]


# --------------------------------------------------------------------------- graphs
def utility_dependency_graph(game, *, tol: float = 1e-12) -> nx.Graph:
    r"""The UDG: a clique on every :math:`N(k)`, the players whose actions enter :math:`U_k`.

    Book: prf:`def-02-udg` in book/02-coalition-equilibrium/treewidth.md.

    For a :class:`NormalFormGame`, player ``j`` enters :math:`U_k` when changing :math:`a_j`
    moves :math:`U_k` by more than ``tol`` somewhere.
    """
    tol = real(tol, "tol", lo=0.0)
    if isinstance(game, PolymatrixGame):
        scopes = [game.neighbourhood(k) for k in range(game.N)]
        n = game.N
    elif isinstance(game, NormalFormGame):
        n = game.N
        scopes = []
        for k in range(n):
            Uk = game.U[..., k]
            scopes.append(tuple(j for j in range(n) if j == k or np.ptp(Uk, axis=j).max() > tol))
    else:
        raise TypeError(f"game must be a NormalFormGame or PolymatrixGame, got {type(game)}")
    G = nx.Graph()
    G.add_nodes_from(range(n))
    for scope in scopes:
        G.add_edges_from(itertools.combinations(scope, 2))
    return G


def tree_decomposition(G, method: str = "min_fill"):
    """A tree decomposition from networkx's heuristics; returns ``(width, tree)``.

    The tree's nodes are frozensets (bags). The width is an upper bound on the treewidth.
    """
    if not isinstance(G, nx.Graph):
        raise TypeError(f"G must be a networkx.Graph, got {type(G).__name__}")
    if G.number_of_nodes() == 0:
        raise ValueError("G must have at least one node")
    if method == "min_fill":
        return nx_approx.treewidth_min_fill_in(G)
    if method == "min_degree":
        return nx_approx.treewidth_min_degree(G)
    raise ValueError(f"method must be 'min_fill' or 'min_degree', got {method!r}")


def _expand(table: np.ndarray, scope: tuple[int, ...], bag: tuple[int, ...]) -> np.ndarray:
    """View ``table`` (axes in ``scope`` order) with axes in ``bag`` order, size 1 elsewhere."""
    order = sorted(range(len(scope)), key=lambda k: bag.index(scope[k]))
    t = np.transpose(table, order)
    shape = [1] * len(bag)
    for k in order:
        shape[bag.index(scope[k])] = table.shape[k]
    return t.reshape(shape)


def _check_tables(tables, A: int):
    out = []
    for scope, table in tables:
        scope = tuple(int(v) for v in scope)
        table = real_array(table, "tables", shape=(A,) * len(scope))
        if len(set(scope)) != len(scope):
            raise ValueError("tables must have scopes without repeated variables")
        out.append((scope, table))
    return out


def min_sum_dp(tables, tree, A: int):
    r"""Minimise :math:`\sum_k h_k(a_{s_k})` over :math:`a\in[A]^N` by dynamic programming on a
    tree decomposition.

    Book: prf:`thm-02-ftpl` (the correlator's oracle) in book/02-coalition-equilibrium/learning.md.

    Parameters
    ----------
    tables : list of ``(scope, h)``
        ``scope`` a tuple of variables, ``h`` an array of shape ``(A,)*len(scope)``. Every
        scope must lie inside some bag.
    tree : networkx.Graph
        A tree (or forest) whose nodes are bags (iterables of variables).
    A : int
        Values per variable.

    Returns
    -------
    a : dict variable -> value, the minimiser (variables in some bag)
    value : float, the minimum
    ops : int, :math:`\sum_BA^{|B|}`, the bag assignments enumerated
    """
    A = positive_int(A, "A")
    if not isinstance(tree, nx.Graph) or tree.number_of_nodes() == 0:
        raise ValueError("tree must be a non-empty networkx.Graph of bags")
    if not nx.is_forest(tree):
        raise ValueError("tree must be a tree or a forest")
    tables = _check_tables(tables, A)
    bags = {node: tuple(sorted(node)) for node in tree.nodes}
    own: dict = {node: [] for node in tree.nodes}
    for scope, table in tables:
        home = next((nd for nd, b in bags.items() if set(scope) <= set(b)), None)
        if home is None:
            raise ValueError(f"tables: the scope {scope} lies in no bag of tree")
        own[home].append((scope, table))
    ops, total, assign = 0, 0.0, {}
    for comp in nx.connected_components(tree):
        root = min(comp, key=lambda nd: bags[nd])
        order = list(nx.dfs_preorder_nodes(tree, root))
        parent = dict(nx.dfs_predecessors(tree, root))
        full, msgs = {}, {}
        for nd in reversed(order):  # upward pass
            bag = bags[nd]
            t = np.zeros((A,) * len(bag))
            for scope, table in own[nd]:
                t = t + _expand(table, scope, bag)
            for ch in tree.neighbors(nd):
                if parent.get(ch) == nd:
                    sep, m = msgs[ch]
                    t = t + _expand(m, sep, bag)
            ops += A ** len(bag)
            full[nd] = t
            if nd in parent:
                sep = tuple(v for v in bag if v in bags[parent[nd]])
                drop = tuple(k for k, v in enumerate(bag) if v not in sep)
                msgs[nd] = (sep, t.min(axis=drop) if drop else t)
        total += float(full[root].min())
        for nd in order:  # downward pass: argmin consistent with the parent's choice
            bag = bags[nd]
            idx = tuple(assign[v] if v in assign else slice(None) for v in bag)
            sub = full[nd][idx]
            free = [v for v in bag if v not in assign]
            if free:
                best = np.unravel_index(int(np.argmin(sub)), sub.shape)
                for v, x in zip(free, best):
                    assign[v] = int(x)
    return assign, total, ops


def brute_force_min(tables, N: int, A: int):
    """Minimise the same sum by enumerating all ``A**N`` assignments; returns ``(a, value)``."""
    N = positive_int(N, "N")
    A = positive_int(A, "A")
    if A**N > 2**22:
        raise ValueError(f"A**N = {A**N} is too large to enumerate")
    tables = _check_tables(tables, A)
    total = np.zeros((A,) * N)
    allv = tuple(range(N))
    for scope, table in tables:
        if max(scope, default=0) >= N or min(scope, default=0) < 0:
            raise ValueError(f"tables: the scope {scope} has a variable outside 0..{N - 1}")
        total = total + _expand(table, scope, allv)
    k = int(np.argmin(total))
    return tuple(int(x) for x in np.unravel_index(k, total.shape)), float(total.min())


def correlator_tables(game, coals, mu) -> list[tuple[tuple[int, ...], np.ndarray]]:
    r"""The correlator's loss :math:`a\mapsto\sum_d\mu_dM_{d,a}` as local tables over the
    :math:`N(i)`.

    Book: prf:`thm-02-ftpl` in book/02-coalition-equilibrium/learning.md. Deviation
    :math:`d=(S,\hat a_S)` adds, for each member :math:`i`, the table
    :math:`\frac{\mu_d}{|S|}\big(U_i(\hat a_S,a_{N(i)\setminus S})-U_i(a_{N(i)})\big)` over
    :math:`N(i)`; rows of ``mu`` follow :func:`deviation_matrix` (``aggregate="mean"``).
    """
    if not isinstance(game, PolymatrixGame):
        raise TypeError(f"game must be a PolymatrixGame, got {type(game).__name__}")
    coals = _check_coalitions(coals, game.N)
    n_rows = sum(game.A ** len(S) for S in coals)
    mu = real_array(mu, "mu", shape=(n_rows,))
    local = game.local_tables()
    out = [(scope, np.zeros_like(t)) for scope, t in local]
    r = 0
    for S in coals:
        for a_hat in itertools.product(range(game.A), repeat=len(S)):
            w = mu[r] / len(S)
            r += 1
            if w == 0:
                continue
            for i in S:
                scope, t = local[i]
                # fix the members' actions on the axes they share with N(i)
                idx = tuple(a_hat[S.index(v)] if v in S else slice(None) for v in scope)
                dev = t[idx]
                keep = tuple(v for v in scope if v not in S)
                dev = _expand(dev, keep, scope) if keep else np.reshape(dev, (1,) * len(scope))
                out[i] = (scope, out[i][1] + w * (dev - t))
    return out


# --------------------------------------------------------------------------- succinct FTPL
class _LocalDeviations:
    """Every (deviation, member) pair of a polymatrix game, in flat local-table form.

    Deviation ``d = (S, a_hat_S)`` (rows in :func:`deviation_matrix` order) contributes, for each
    member ``i``, :math:`\\frac1{|S|}(U_i(\\hat a_S,a_{N(i)\\setminus S})-U_i(a_{N(i)}))`, a
    function of the local profile :math:`a_{N(i)}` only.
    """

    def __init__(self, game: PolymatrixGame, coals):
        self.game = game
        self.coals = _check_coalitions(coals, game.N)
        A = game.A
        local = game.local_tables()
        self.scopes = [s for s, _ in local]
        self.tables = [t for _, t in local]
        self.strides = [A ** np.arange(len(s) - 1, -1, -1) for s in self.scopes]
        self.offsets = np.cumsum([0] + [t.size for t in self.tables])[:-1]
        self.flat = np.concatenate([t.reshape(-1) for t in self.tables])
        players, devs, weights, deltas = [], [], [], []
        d = 0
        for S in self.coals:
            for a_hat in itertools.product(range(A), repeat=len(S)):
                for i in S:
                    scope, t = self.scopes[i], self.tables[i]
                    idx = tuple(a_hat[S.index(v)] if v in S else slice(None) for v in scope)
                    keep = tuple(v for v in scope if v not in S)
                    dev = t[idx]
                    dev = _expand(dev, keep, scope) if keep else np.reshape(dev, (1,) * len(scope))
                    players.append(i)
                    devs.append(d)
                    weights.append(1.0 / len(S))
                    deltas.append(((np.broadcast_to(dev, t.shape) - t) / len(S)).reshape(-1))
                d += 1
        self.n_dev = d
        self.pair_player = np.array(players)
        self.pair_dev = np.array(devs)
        self.pair_deltas = deltas  # flat table increment of each (deviation, member) pair
        self.pairs_of_dev = [np.flatnonzero(self.pair_dev == k) for k in range(d)]
        size = max(t.size for t in self.tables)
        # gain of pair p at local index c: delta_tab[p, c]
        self.delta_tab = np.zeros((len(deltas), size))
        for p, dl in enumerate(deltas):
            self.delta_tab[p, : dl.size] = dl

    def local_index(self, profiles: np.ndarray) -> np.ndarray:
        """Local flat index of every player's neighbourhood, shape ``(n_profiles, N)``."""
        return np.stack(
            [profiles[:, list(s)] @ st for s, st in zip(self.scopes, self.strides)], axis=1
        )

    def gains(self, profiles: np.ndarray) -> np.ndarray:
        """Mean over ``profiles`` (shape ``(n, N)``) of every deviation's gain, shape ``(n_dev,)``.

        Equals ``deviation_matrix(game, coals)[0] @ pi_bar`` for the empirical ``pi_bar``.
        """
        loc = self.local_index(profiles)[:, self.pair_player]  # (n, pairs)
        g = self.delta_tab[np.arange(loc.shape[1])[None, :], loc].mean(axis=0)
        return np.bincount(self.pair_dev, weights=g, minlength=self.n_dev)


def succinct_ftpl(game, coals, T: int, rng, *, tree=None):
    r"""FTPL on the meta-game of a polymatrix game without the explicit gain matrix.

    Book: prf:`thm-02-ftpl` in book/02-coalition-equilibrium/learning.md (the paper's
    algorithm, as we reconstruct it; run in book/02-coalition-equilibrium/treewidth.md).

    The correlator keeps its cumulative loss :math:`\sum_{s<t}M_{d_s,\cdot}` as local tables over
    the :math:`N(i)` (each round adds the chosen deviation's member tables, as in
    :func:`correlator_tables`), perturbs every table entry by an independent
    :math:`\mathrm{Exp}` draw of scale :math:`\sqrt T` (subtracted), and best-responds with
    :func:`min_sum_dp` on a tree decomposition of the UDG: :math:`A^{w+1}` work per bag, never
    the :math:`A^N` joint actions. The deviator runs FTPL over the deviations, its cumulative
    gains updated locally from the correlator's profile. ``coals`` is a list of coalitions or a
    kind accepted by :func:`coalitions`.

    Returns
    -------
    profiles : ndarray, shape (T, N)
        The correlator's joint actions :math:`a_1..a_T`; :math:`\bar\pi` is their empirical law.
    phi_bar : float
        :math:`\Phi(\bar\pi)=\max_d\frac1T\sum_tg_d(a_t)`, computed locally.
    ops : int
        Bag assignments enumerated by the DP over all rounds.
    mu_bar : ndarray, shape (n_dev,)
        The deviator's empirical mixture. By LP duality
        :math:`V^\star\ge\min_a(\bar\mu^\top M)_a`, which :func:`correlator_tables` and
        :func:`min_sum_dp` compute locally: a certified lower bound on the MASE value.
    """
    if not isinstance(game, PolymatrixGame):
        raise TypeError(f"game must be a PolymatrixGame, got {type(game).__name__}")
    T = positive_int(T, "T")
    check_generator(rng)
    loc = _LocalDeviations(game, coals)
    if tree is None:
        _, tree = tree_decomposition(utility_dependency_graph(game))
    scale = np.sqrt(T)
    L = [np.zeros(t.shape) for t in loc.tables]
    G = np.zeros(loc.n_dev)
    mu_bar = np.zeros(loc.n_dev)
    profiles = np.zeros((T, game.N), dtype=int)
    ops = 0
    for t in range(T):
        noisy = [(s, Li - rng.exponential(scale, size=Li.shape)) for s, Li in zip(loc.scopes, L)]
        a, _, k = min_sum_dp(noisy, tree, game.A)
        ops += k
        prof = np.array([a[v] for v in range(game.N)])
        profiles[t] = prof
        d = int(np.argmax(G + rng.exponential(scale, size=G.shape)))
        mu_bar[d] += 1.0 / T
        for p in loc.pairs_of_dev[d]:
            i = loc.pair_player[p]
            L[i] = L[i] + loc.pair_deltas[p].reshape(L[i].shape)
        G += loc.gains(prof[None])
    return profiles, float(loc.gains(profiles).max()), ops, mu_bar


def local_gains(game, coals, profiles) -> np.ndarray:
    r"""Every deviation's gain :math:`(M\bar\pi)_d` against the empirical law of ``profiles``.

    Book: eq. ``eq-02-gain`` in book/02-coalition-equilibrium/theory.md. Computed from the local
    tables only (never the :math:`A^N` joint actions); rows follow :func:`deviation_matrix`.
    ``profiles`` has shape ``(n, N)``, entries in ``0..A-1``.
    """
    if not isinstance(game, PolymatrixGame):
        raise TypeError(f"game must be a PolymatrixGame, got {type(game).__name__}")
    prof = np.asarray(profiles)
    if prof.ndim != 2 or prof.shape[1] != game.N or prof.shape[0] == 0:
        raise ValueError(f"profiles must have shape (n, {game.N}) with n >= 1, got {prof.shape}")
    if not np.issubdtype(prof.dtype, np.integer) or prof.min() < 0 or prof.max() >= game.A:
        raise ValueError(f"profiles must hold integer actions in 0..{game.A - 1}")
    return _LocalDeviations(game, coals).gains(prof)


# --------------------------------------------------------------------------- batched FTPL
def path_of_bags(N: int, width: int) -> nx.Graph:
    r"""A path-shaped tree decomposition of the UDG of a path (``width=2``) or a cycle
    (``width=4``) polymatrix game on ``N`` players.

    Book: the rate experiment of book/02-coalition-equilibrium/treewidth.md. Path: bags
    :math:`\{j,j+1,j+2\}`, :math:`j=0..N-3` (:math:`|\mathcal T|=N-2`). Cycle: players 0 and 1
    in every bag with a sliding window of three, :math:`\{0,1,j,j+1,j+2\}`, :math:`j=2..N-3`
    (:math:`|\mathcal T|=N-4`); it covers every edge :math:`\{i,i\pm1\},\{i,i\pm2\}` of the
    squared cycle.
    """
    N = positive_int(N, "N")
    if width == 2:
        if N < 3:
            raise ValueError(f"N must be at least 3 for width 2, got {N}")
        bags = [frozenset((j, j + 1, j + 2)) for j in range(N - 2)]
    elif width == 4:
        if N < 5:
            raise ValueError(f"N must be at least 5 for width 4, got {N}")
        bags = [frozenset((0, 1, j, j + 1, j + 2)) for j in range(2, N - 2)]
    else:
        raise ValueError(f"width must be 2 (path) or 4 (cycle), got {width!r}")
    tree = nx.Graph()
    tree.add_nodes_from(bags)
    tree.add_edges_from(zip(bags[:-1], bags[1:]))
    return tree


class _BatchedDP:
    """Min-sum DP over a tree decomposition, vectorised over a leading batch axis.

    Every bag's variables are ordered separator-with-parent first, so a message is a reshape
    and a ``min`` over the trailing axis, and the downward pass is one gather and one argmin.
    Tables are given flat, all players' tables concatenated (``offsets``), as in
    :class:`_LocalDeviations`.
    """

    def __init__(self, scopes, offsets, tree, A: int, N: int):
        if not nx.is_tree(tree):
            raise ValueError("tree must be a tree (one connected component)")
        self.A, self.N = A, N
        nodes = list(tree.nodes)
        root = min(nodes, key=lambda nd: tuple(sorted(nd)))
        self.order = list(nx.dfs_preorder_nodes(tree, root))
        parent = dict(nx.dfs_predecessors(tree, root))
        self.parent = [self.order.index(parent[nd]) if nd in parent else -1 for nd in self.order]
        self.vars, self.n_sep, self.decode = [], [], []
        for k, nd in enumerate(self.order):
            pv = set(self.order[self.parent[k]]) if self.parent[k] >= 0 else set()
            sep = sorted(v for v in nd if v in pv)
            rest = sorted(v for v in nd if v not in pv)
            self.vars.append(tuple(sep + rest))
            self.n_sep.append(len(sep))
            n = len(nd)
            self.decode.append(
                np.array(list(itertools.product(range(A), repeat=n)), dtype=int).reshape(-1, n)
            )
        # each player's table goes to the first bag (in DFS order) that contains its scope
        self.gather = [[] for _ in self.vars]
        for i, scope in enumerate(scopes):
            k = next((k for k, bv in enumerate(self.vars) if set(scope) <= set(bv)), None)
            if k is None:
                raise ValueError(f"tree: the scope {scope} lies in no bag")
            dec = self.decode[k]
            strides = A ** np.arange(len(scope) - 1, -1, -1)
            cols = [self.vars[k].index(v) for v in scope]
            self.gather[k].append(offsets[i] + dec[:, cols] @ strides)
        self.gather = [np.stack(g) if g else None for g in self.gather]
        # message of child k, indexed by the parent's flat assignment
        self.msg_index, self.sep_of_parent = [None] * len(self.order), [None] * len(self.order)
        for k, bv in enumerate(self.vars):
            p = self.parent[k]
            if p < 0:
                continue
            sep = bv[: self.n_sep[k]]
            strides = A ** np.arange(len(sep) - 1, -1, -1)
            cols = [self.vars[p].index(v) for v in sep]
            self.msg_index[k] = self.decode[p][:, cols] @ strides
        self.children = [
            [c for c in range(len(self.order)) if self.parent[c] == k]
            for k in range(len(self.order))
        ]
        self.ops = sum(A ** len(bv) for bv in self.vars)

    def solve(self, flat, bag_noise=None):
        """Minimise per batch row; ``flat`` (B, total) tables, ``bag_noise`` a list of (B, A^|B|)
        arrays added to each bag (or None). Returns ``(profiles (B, N), values (B,))``."""
        B, A = flat.shape[0], self.A
        full = [None] * len(self.order)
        msgs = [None] * len(self.order)
        for k in reversed(range(len(self.order))):
            g = self.gather[k]
            t = flat[:, g].sum(axis=1) if g is not None else np.zeros((B, A ** len(self.vars[k])))
            if bag_noise is not None:
                t = t + bag_noise[k]
            for c in self.children[k]:
                t = t + msgs[c][:, self.msg_index[c]]
            full[k] = t
            if self.parent[k] >= 0:
                msgs[k] = t.reshape(B, A ** self.n_sep[k], -1).min(axis=2)
        rows = np.arange(B)
        choice = [None] * len(self.order)
        prof = np.zeros((B, self.N), dtype=int)
        values = full[0].min(axis=1)
        for k in range(len(self.order)):
            p = self.parent[k]
            if p < 0:
                choice[k] = np.argmin(full[k], axis=1)
            else:
                sep = self.msg_index[k][choice[p]]
                sub = full[k].reshape(B, A ** self.n_sep[k], -1)[rows, sep]
                choice[k] = sep * sub.shape[1] + np.argmin(sub, axis=1)
            prof[:, list(self.vars[k])] = self.decode[k][choice[k]]
        return prof, values


def succinct_ftpl_chains(
    game,
    coals,
    T,
    rng,
    *,
    tree=None,
    noise: str = "players",
    noise_scale=None,
):
    r"""FTPL on the meta-game of a polymatrix game, independent chains side by side.

    Book: prf:`thm-02-ftpl`; the rate experiment of book/02-coalition-equilibrium/treewidth.md.
    The same algorithm as :func:`succinct_ftpl` (cumulative losses kept as local tables, the
    correlator's perturbed best response by the tree DP, the deviator's FTPL over deviations),
    vectorised over chains. With ``noise="bags"`` the correlator's perturbation is one
    independent :math:`\mathrm{Exp}` draw per bag assignment (the perturbation whose
    be-the-leader term is :math:`\sum_B(1+|B|\ln A)/\eta`), with ``"players"`` one per entry
    of every player's table over :math:`N(i)`.

    Parameters
    ----------
    T : int or array_like of int, shape (chains,)
        Each chain's horizon :math:`T_c`; all chains run to :math:`\max_cT_c` and chain
        :math:`c` is read off at round :math:`T_c`.
    noise_scale : None, float or array_like, shape (chains,)
        The perturbation scale :math:`1/\eta` of each chain; ``None`` gives
        :math:`\sqrt{T_c}` (the theorem's :math:`\eta=1/\sqrt T`).

    Returns
    -------
    phi_bar : ndarray, shape (chains,)
        :math:`\Phi(\bar\pi)=\max_dG_{T_c}(d)/T_c`.
    lower : ndarray, shape (chains,)
        :math:`\min_a(\bar\mu^\top M)_a=\min_aL_{T_c}(a)/T_c\le V^\star`. ``phi_bar - lower`` is
        the duality gap :math:`(R^{\rm c}_T+R^{\rm d}_T)/T`, the sum of the two sides' regrets.
    """
    if not isinstance(game, PolymatrixGame):
        raise TypeError(f"game must be a PolymatrixGame, got {type(game).__name__}")
    check_generator(rng)
    horizons = np.atleast_1d(np.asarray(T))
    if horizons.ndim != 1 or not np.issubdtype(horizons.dtype, np.integer) or horizons.min() < 1:
        raise ValueError("T must be a positive int or a 1-d array of positive ints")
    C = horizons.size
    if noise not in ("players", "bags"):
        raise ValueError(f"noise must be 'players' or 'bags', got {noise!r}")
    if noise_scale is None:
        scale = np.sqrt(horizons.astype(float))
    else:
        scale = np.broadcast_to(real_array(noise_scale, "noise_scale"), (C,)).astype(float)
        if np.any(scale <= 0):
            raise ValueError("noise_scale must be positive")
    loc = _LocalDeviations(game, coals)
    if tree is None:
        _, tree = tree_decomposition(utility_dependency_graph(game))
    A, N = game.A, game.N
    total = int(loc.flat.size)
    dp = _BatchedDP(loc.scopes, loc.offsets, tree, A, N)
    # Dev[d] = the flat table increment of deviation d (its members' tables), eq-02-M locally
    Dev = np.zeros((loc.n_dev, total))
    for p, dl in enumerate(loc.pair_deltas):
        i = loc.pair_player[p]
        Dev[loc.pair_dev[p], loc.offsets[i] : loc.offsets[i] + dl.size] += dl
    # gain of (deviation, member) pair p at member i's local index c: delta_flat[p * width + c];
    # each deviation has at most two pairs here (missing ones point at a zero entry)
    width_tab = loc.delta_tab.shape[1]
    delta_flat = np.append(loc.delta_tab.reshape(-1), 0.0)
    n_pairs = len(loc.pair_player)
    per_dev = max(len(ix) for ix in loc.pairs_of_dev)
    dev_pairs = np.full((loc.n_dev, per_dev), n_pairs)
    for k, ix in enumerate(loc.pairs_of_dev):
        dev_pairs[k, : len(ix)] = ix
    base = np.arange(n_pairs) * width_tab
    # local flat index of player i's neighbourhood: profile @ W
    W = np.zeros((N, N), dtype=int)
    for i, (s, st) in enumerate(zip(loc.scopes, loc.strides)):
        W[list(s), i] = st
    L = np.zeros((C, total))
    G = np.zeros((C, loc.n_dev))
    phi_bar, lower = np.empty(C), np.empty(C)
    bag_cuts = np.cumsum([A ** len(v) for v in dp.vars])[:-1]
    n_bag = int(sum(A ** len(v) for v in dp.vars))
    active = np.arange(C)  # chains still running, in the order of the rows of L and G
    col = scale[:, None]
    for t in range(1, int(horizons.max()) + 1):
        if noise == "players":
            prof, _ = dp.solve(L - col * rng.standard_exponential((active.size, total)))
        else:
            xi = -col * rng.standard_exponential((active.size, n_bag))
            prof, _ = dp.solve(L, np.split(xi, bag_cuts, axis=1))
        d = np.argmax(G + col * rng.standard_exponential(G.shape), axis=1)
        L += Dev[d]
        pair_gain = delta_flat[base + (prof @ W)[:, loc.pair_player]]
        pair_gain = np.append(pair_gain, np.zeros((active.size, 1)), axis=1)
        G += pair_gain[:, dev_pairs].sum(axis=2)
        done = horizons[active] == t
        if done.any():
            phi_bar[active[done]] = G[done].max(axis=1) / t
            lower[active[done]] = dp.solve(L[done])[1] / t
            keep = ~done
            active, L, G, col = active[keep], L[keep], G[keep], col[keep]
    return phi_bar, lower
