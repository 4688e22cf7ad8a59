r"""Linear regions of ReLU networks and their connectivity graph (chapter 14).

Paper: B. B. Gaines, J. Bi, *Characterizing the Discrete Geometry of ReLU Networks*, ICLR 2026
(arXiv:2606.07728, OpenReview ``TgLW2DiRDG``).

Chapter folder: ``book/14-relu-region-graph/``.

A ReLU network with hidden layers of widths :math:`m_1,\dots,m_\ell` on :math:`\mathbb R^d` has
:math:`n=\sum_jm_j` neurons. The sign sequence :math:`S(x)\in\{-1,0,1\}^n` of the pre-activations
labels the cells of a polyhedral complex; the linear regions are the sign sequences without zeros,
and two regions are adjacent iff their sequences differ in exactly one entry and they share a
:math:`(d-1)`-face. The average degree of the connectivity graph is
:math:`\bar\delta=2N_{d-1}/N_d`, which the paper bounds by :math:`2d`.

Regions are enumerated by breadth-first search over sign sequences. Inside region :math:`s` every
pre-activation is affine, :math:`z=Ax+c`, and the region is
:math:`\{x:s_j(A_jx+c_j)>0\ \forall j\}`. Neuron :math:`i` bounds a facet iff the hyperplane
:math:`A_ix+c_i=0` meets the closure of the region in a :math:`(d-1)`-dimensional set; a cheap ray
test certifies most facets, and a linear program (HiGHS) settles the rest.
"""

from __future__ import annotations

import os
import sys
from collections import deque
from math import comb

import highspy
import networkx as nx
import numpy as np

from lib.validate import check_generator, nonnegative_int, positive, positive_int


# --------------------------------------------------------------------------- networks
def _check_net(Ws, bs, d=None):
    if (
        not isinstance(Ws, (list, tuple))
        or not isinstance(bs, (list, tuple))
        or len(Ws) == 0
        or len(Ws) != len(bs)
    ):
        raise ValueError(
            "Ws and bs must be non-empty lists of the same length "
            "(one weight matrix and bias per layer)"
        )
    Ws = [np.asarray(W, dtype=float) for W in Ws]
    bs = [np.asarray(b, dtype=float) for b in bs]
    prev = Ws[0].shape[1] if Ws[0].ndim == 2 else None
    for j, (W, b) in enumerate(zip(Ws, bs)):
        if W.ndim != 2 or W.shape[1] != prev:
            raise ValueError(f"Ws[{j}] must be a matrix with {prev} columns, got shape {W.shape}")
        if b.shape != (W.shape[0],):
            raise ValueError(f"bs[{j}] must have shape ({W.shape[0]},), got {b.shape}")
        prev = W.shape[0]
    if d is not None and Ws[0].shape[1] != d:
        raise ValueError(f"the network's input dimension is {Ws[0].shape[1]}, not {d}")
    return Ws, bs


def random_relu_net(d: int, widths, rng, bias_scale: float = 0.5):
    """Gaussian weights ``N(0, 1/fan_in)`` and biases ``N(0, bias_scale^2)``.

    The network is generic with probability one.
    """
    d = positive_int(d, "d")
    check_generator(rng)
    widths = [positive_int(m, "widths") for m in widths]
    if not widths:
        raise ValueError("widths must list at least one hidden layer")
    Ws, bs, prev = [], [], d
    for m in widths:
        Ws.append(rng.standard_normal((m, prev)) / np.sqrt(prev))
        bs.append(bias_scale * rng.standard_normal(m))
        prev = m
    return Ws, bs


def from_torch(model):
    """The hidden layers of a ``torch.nn.Sequential`` of ``Linear`` and ``ReLU`` modules.

    Every ``Linear`` followed by a ``ReLU`` is a hidden layer; a final ``Linear`` (the output) does
    not cut the input space and is dropped.
    """
    import torch.nn as tnn

    if not isinstance(model, tnn.Sequential):
        raise TypeError("model must be a torch.nn.Sequential")
    mods = list(model)
    Ws, bs = [], []
    for k, mod in enumerate(mods):
        if isinstance(mod, tnn.Linear):
            if k + 1 < len(mods) and isinstance(mods[k + 1], tnn.ReLU):
                Ws.append(mod.weight.detach().cpu().double().numpy().copy())
                bs.append(mod.bias.detach().cpu().double().numpy().copy())
        elif not isinstance(mod, tnn.ReLU):
            raise TypeError(f"only Linear and ReLU modules are supported, got {type(mod).__name__}")
    if not Ws:
        raise ValueError("model has no Linear layer followed by a ReLU")
    return Ws, bs


def widths_of(Ws) -> list[int]:
    return [W.shape[0] for W in Ws]


# --------------------------------------------------------------------------- geometry of one region
def preactivations(Ws, bs, X) -> np.ndarray:
    """All hidden pre-activations at the rows of ``X``: shape ``(N, n)``."""
    Ws, bs = _check_net(Ws, bs)
    H = np.atleast_2d(np.asarray(X, dtype=float))
    out = []
    for W, b in zip(Ws, bs):
        Z = H @ W.T + b
        out.append(Z)
        H = np.maximum(Z, 0)
    return np.concatenate(out, axis=1)


def sign_sequence(Ws, bs, X) -> np.ndarray:
    """Signs in ``{-1, 0, 1}`` of all pre-activations.

    ``int8`` of shape ``(n,)`` (or ``(N, n)`` for a batch).
    """
    X = np.asarray(X, dtype=float)
    s = np.sign(preactivations(Ws, bs, X)).astype(np.int8)
    return s[0] if X.ndim == 1 else s


def region_affine(Ws, bs, s):
    """``(A, c)`` with the pre-activations equal to ``A x + c`` on the region.

    The region is the one with sign sequence ``s``.
    """
    Ws, bs = _check_net(Ws, bs)
    s = np.asarray(s)
    n = sum(W.shape[0] for W in Ws)
    if s.shape != (n,):
        raise ValueError(f"s must have shape ({n},), got {s.shape}")
    d = Ws[0].shape[1]
    M, v = np.eye(d), np.zeros(d)
    rows_A, rows_c, k = [], [], 0
    for W, b in zip(Ws, bs):
        Z, z = W @ M, W @ v + b
        rows_A.append(Z)
        rows_c.append(z)
        mask = (s[k : k + W.shape[0]] > 0)[:, None]
        M, v = mask * Z, mask[:, 0] * z
        k += W.shape[0]
    return np.vstack(rows_A), np.concatenate(rows_c)


def interior_point(Ws, bs, s, *, cap: float = 1.0):
    """Chebyshev centre of the region.

    The radius is capped at ``cap`` so that unbounded regions have one.
    """
    A, c = region_affine(Ws, bs, s)
    s = np.asarray(s, dtype=float)
    norms = np.linalg.norm(A, axis=1)
    live = norms > 1e-12
    d = A.shape[1]
    # a dead neuron (all its inputs switched off here) has the constant pre-activation c_j: its
    # sign is forced
    if np.any(s[~live] * c[~live] <= 0):
        raise ValueError(
            "the sign sequence s has no interior (a constant pre-activation has the other sign)"
        )
    # s_j (A_j x + c_j) >= r |A_j|   <=>   -s_j A_j x + |A_j| r <= s_j c_j
    A_ub = np.hstack([-(s[live, None] * A[live]), norms[live, None]])
    res = _linprog(np.r_[np.zeros(d), -1.0], A_ub, s[live] * c[live], d, (0, cap))
    if res is None or res.x[-1] <= 0:
        raise ValueError("the sign sequence s has no interior (not a realisable region)")
    return res.x[:d], float(res.x[-1])


# Every cell of the complex meets any large enough box (all vertices lie in a bounded set), and
# bounded variables keep HiGHS away from the numerical failures we met on unbounded regions; BOX is
# far beyond the vertices of the networks in this book (weights of order one).
BOX = 1e4


class _LPResult:
    """The part of an LP solution the callers read: ``x`` and ``fun``."""

    def __init__(self, x, fun):
        self.x, self.fun = x, fun


_HIGHS = None


def _highs():
    """One HiGHS instance for the process, created with its banner silenced.

    HiGHS prints a banner on construction from C++, below Python's ``sys.stdout``, so the file
    descriptor itself is pointed at ``/dev/null`` for that moment.
    """
    global _HIGHS
    if _HIGHS is None:
        sys.stdout.flush()
        saved, null = os.dup(1), os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 1)
            h = highspy.Highs()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            os.close(null)
        h.setOptionValue("output_flag", False)
        _HIGHS = h
    return _HIGHS


def _highs_solve(cost, A, row_lo, row_hi, col_lo, col_hi, solver):
    """Minimise ``cost @ x`` s.t. ``row_lo <= A x <= row_hi``, ``col_lo <= x <= col_hi``."""
    m, k = A.shape
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = k, m
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = cost, col_lo, col_hi
    lp.row_lower_, lp.row_upper_ = row_lo, row_hi
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = np.arange(0, m * k + 1, k, dtype=np.int32)
    lp.a_matrix_.index_ = np.tile(np.arange(k, dtype=np.int32), m)
    lp.a_matrix_.value_ = np.ascontiguousarray(A, dtype=float).ravel()
    h = _highs()
    h.setOptionValue("solver", solver)
    h.passModel(lp)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    return _LPResult(np.array(h.getSolution().col_value), h.getInfo().objective_function_value)


def _linprog(cost, A_ub, b_ub, d, t_bounds, A_eq=None, b_eq=None):
    """Solve the LP in ``(x, t)`` with HiGHS: the simplex method, then the interior-point method.

    The model is passed to HiGHS directly (``highspy``): the same solver ``scipy.optimize.linprog``
    calls, without its per-call validation, which cost three quarters of the time on these small
    LPs. Returns None if both methods fail.
    """
    A = np.asarray(A_ub, dtype=float)
    lo = np.full(A.shape[0], -np.inf)
    hi = np.asarray(b_ub, dtype=float)
    if A_eq is not None:
        E = np.asarray(A_eq, dtype=float)
        A = np.vstack([A, E])
        lo = np.r_[lo, np.asarray(b_eq, dtype=float)]
        hi = np.r_[hi, np.asarray(b_eq, dtype=float)]
    t_lo, t_hi = (-np.inf if v is None else float(v) for v in t_bounds)
    col_lo = np.r_[np.full(d, -BOX), t_lo]
    col_hi = np.r_[np.full(d, BOX), t_hi]
    cost = np.asarray(cost, dtype=float)
    for solver in ("simplex", "ipm"):
        res = _highs_solve(cost, A, lo, hi, col_lo, col_hi, solver)
        if res is not None:
            return res
    return None


def facet_neurons(
    Ws,
    bs,
    s,
    *,
    x0=None,
    tol: float = 1e-9,
    skip=None,
    stats: dict | None = None,
    use_ray: bool = True,
) -> list[int]:
    r"""Neurons whose zero set bounds a facet of region ``s``.

    First a ray test: from an interior point ``x0``, move straight toward hyperplane :math:`i`; if
    no other constraint is violated at the foot point, the foot lies on the face and :math:`i` is a
    facet (no LP). Otherwise an LP maximises the slack :math:`t` of the other constraints on the
    hyperplane (:math:`t\le1`); :math:`i` is a facet iff :math:`t^*>` ``tol``. Neurons in ``skip``
    (already settled) are not tested. ``stats`` counts ``"ray"`` certificates and ``"lp"`` solves.
    """
    A, c = region_affine(Ws, bs, s)
    s = np.asarray(s, dtype=float)
    n, d = A.shape
    norms = np.linalg.norm(A, axis=1)
    live = norms > 1e-12  # a dead neuron (constant pre-activation) bounds nothing
    if x0 is None:
        x0, _ = interior_point(Ws, bs, s)
    g = s * (A @ x0 + c)  # slacks at x0 (all positive)
    An = A / np.where(live, norms, 1.0)[:, None]
    gn = g / np.where(live, norms, 1.0)  # distances to the hyperplanes
    cos = An @ An.T  # cosines between normals
    out = []
    skip = set() if skip is None else set(skip)
    for i in range(n):
        if not live[i] or i in skip:
            continue
        # foot point x0 - gn_i s_i An_i; slack of j there: gn_j - gn_i s_i s_j cos_ij (in distance
        # units)
        slack = gn - gn[i] * s[i] * s * cos[i]
        slack[i] = np.inf
        if use_ray and np.all(slack[live] > 1e-9):
            out.append(i)
            if stats is not None:
                stats["ray"] = stats.get("ray", 0) + 1
            continue
        others = live.copy()
        others[i] = False
        A_ub = np.hstack([-(s[others, None] * A[others]), norms[others, None]])
        res = _linprog(
            np.r_[np.zeros(d), -1.0],
            A_ub,
            s[others] * c[others],
            d,
            (None, 1.0),
            A_eq=np.hstack([A[i], 0.0])[None],
            b_eq=[-c[i]],
        )
        if stats is not None:
            stats["lp"] = stats.get("lp", 0) + 1
        if res is not None and -res.fun > tol:
            out.append(i)
    return out


# --------------------------------------------------------------------------- enumeration
def enumerate_regions(
    Ws, bs, x0=None, *, max_regions: int | None = None, stats: dict | None = None
) -> nx.Graph:
    """Breadth-first search over the linear regions; returns the connectivity graph.

    Nodes are sign sequences as tuples of ``+-1`` (attribute ``point``: an interior point); an edge
    joins regions across a facet, with attribute ``neuron`` (the flipped index). Adjacency is
    symmetric, so a neuron already known to separate ``s`` from a visited neighbour is not tested
    again. Raises ``RuntimeError`` if more than ``max_regions`` regions are found.

    Book: prf:`def-14-graph` in book/14-relu-region-graph/theory.md.
    """
    Ws, bs = _check_net(Ws, bs)
    d = Ws[0].shape[1]
    x0 = np.zeros(d) if x0 is None else np.asarray(x0, dtype=float)
    s0 = sign_sequence(Ws, bs, x0)
    if np.any(s0 == 0):
        raise ValueError("x0 lies on a bent hyperplane; choose another starting point")
    G = nx.Graph()
    key0 = tuple(int(v) for v in s0)
    G.add_node(key0, point=interior_point(Ws, bs, s0)[0])
    queue, done = deque([key0]), set()
    while queue:
        key = queue.popleft()
        if key in done:
            continue
        done.add(key)
        s = np.array(key, dtype=np.int8)
        known = {G.edges[key, nb]["neuron"] for nb in G.neighbors(key)}
        for i in facet_neurons(Ws, bs, s, x0=G.nodes[key]["point"], skip=known, stats=stats):
            t = s.copy()
            t[i] = -t[i]
            nkey = tuple(int(v) for v in t)
            if nkey not in G:
                if max_regions is not None and G.number_of_nodes() >= max_regions:
                    raise RuntimeError(f"more than max_regions = {max_regions} regions")
                point = interior_point(Ws, bs, t)[0]
                if not np.array_equal(sign_sequence(Ws, bs, point), t):
                    raise RuntimeError(f"interior point of region {nkey} has another sign sequence")
                G.add_node(nkey, point=point)
                queue.append(nkey)
            G.add_edge(key, nkey, neuron=i)
    return G


def brute_force_graph(Ws, bs, *, max_neurons: int = 14) -> nx.Graph:
    """The same graph by exhaustion, for checking :func:`enumerate_regions` on small networks.

    Every one of the ``2^n`` sign sequences is tested for an interior (an LP each); every region's
    facets are then found by LP alone (no ray test). Exponential in ``n``: refuses
    ``n > max_neurons``.

    Book: prf:`def-14-graph` in book/14-relu-region-graph/theory.md.
    """
    Ws, bs = _check_net(Ws, bs)
    n = sum(W.shape[0] for W in Ws)
    if n > max_neurons:
        raise ValueError(
            f"brute force over 2^{n} sign sequences refused (max_neurons = {max_neurons})"
        )
    G = nx.Graph()
    for code in range(2**n):
        s = np.where((code >> np.arange(n)) & 1, 1, -1).astype(np.int8)
        try:
            point, _ = interior_point(Ws, bs, s)
        except ValueError:
            continue
        G.add_node(tuple(int(v) for v in s), point=point)
    for key in list(G.nodes):
        s = np.array(key, dtype=np.int8)
        for i in facet_neurons(Ws, bs, s, x0=G.nodes[key]["point"], use_ray=False):
            t = list(key)
            t[i] = -t[i]
            G.add_edge(key, tuple(t), neuron=i)
    return G


# ---------------------------------------------------------------- an independent check in d = 2
def _chebyshev_centre(H: np.ndarray):
    """Centre and radius of the largest disc in ``{x: H[:, :2] x + H[:, 2] <= 0}`` (linprog)."""
    from scipy.optimize import linprog

    norms = np.linalg.norm(H[:, :2], axis=1)
    res = linprog(
        [0.0, 0.0, -1.0],
        A_ub=np.hstack([H[:, :2], norms[:, None]]),
        b_ub=-H[:, 2],
        bounds=[(None, None), (None, None), (0, None)],
        method="highs",
    )
    if res.status != 0:
        return None, 0.0
    return res.x[:2], float(res.x[2])


def polygon_complex_2d(Ws, bs, box: float = 1e5, *, min_radius: float = 1e-9):
    r"""The linear regions of a network on :math:`\mathbb R^2` as polygons clipped to a box.

    An independent route to the region graph, for checking :func:`enumerate_regions`: it uses no
    facet test, no ray test and no ``interior_point``. Starting from the square
    :math:`[-L,L]^2` (``L = box``), the pieces are split neuron by neuron, layer by layer: on a
    piece every neuron of the next layer is affine (its inputs' signs are fixed by the earlier
    splits). If it changes sign on the piece's vertices the piece is cut in two, each half
    computed by ``scipy.spatial.HalfspaceIntersection`` (interior point: a Chebyshev centre from
    ``scipy.optimize.linprog``). Halves whose largest inscribed disc has radius below
    ``min_radius`` are empty.

    Returns ``(polygons, G)``: ``polygons`` maps each sign sequence (tuple of ``+-1``) to the
    vertices of its polygon, counter-clockwise, shape (k, 2); ``G`` joins two polygons that share
    a polygon edge of positive length lying on a bent hyperplane (edges on the box are not
    edges), with attribute ``neuron``. If every vertex of the complex lies inside the box, ``G``
    is the connectivity graph.

    Book: prf:`thm-14-avg-degree-2d` in book/14-relu-region-graph/theory.md (the polygons).
    """
    from scipy.spatial import ConvexHull, HalfspaceIntersection

    Ws, bs = _check_net(Ws, bs, d=2)
    L = positive(box, "box")
    tol = 1e-9 * L
    # a piece: (signs so far, halfspaces rows (a1, a2, b) meaning a.x + b <= 0, vertices, M, v)
    # where the current layer's inputs are M x + v on the piece
    square = np.array([[1.0, 0, -L], [-1.0, 0, -L], [0, 1.0, -L], [0, -1.0, -L]])
    corners = np.array([[L, L], [-L, L], [-L, -L], [L, -L]])
    pieces = [((), square, corners, np.eye(2), np.zeros(2))]
    for W, b in zip(Ws, bs):
        layer = []
        for signs, H, V, M, v in pieces:
            A, c = W @ M, W @ v + b  # this layer's pre-activations: A x + c on the piece
            todo = [(signs, H, V)]
            for j in range(W.shape[0]):
                nxt = []
                for sg, Hs, Vs in todo:
                    f = Vs @ A[j] + c[j]
                    if np.all(f > tol) or np.all(f < -tol):
                        nxt.append((sg + (1 if f[0] > 0 else -1,), Hs, Vs))
                        continue
                    for sign in (1, -1):
                        Hn = np.vstack([Hs, np.r_[-sign * A[j], -sign * c[j]]])
                        x0, r = _chebyshev_centre(Hn)
                        if r < min_radius:
                            continue
                        pts = HalfspaceIntersection(Hn, x0).intersections
                        hull = ConvexHull(pts)
                        nxt.append((sg + (sign,), Hn, pts[hull.vertices]))
                todo = nxt
            mask_rows = []
            for sg, Hs, Vs in todo:
                on = (np.array(sg[-W.shape[0] :]) > 0)[:, None]
                mask_rows.append((sg, Hs, Vs, on * A, on[:, 0] * c))
            layer += mask_rows
        pieces = layer
    # an edge of a polygon lies on bent hyperplane i iff the pre-activation of neuron i (a plain
    # forward pass, continuous on the closed polygon) vanishes at both of its ends
    polygons, G = {}, nx.Graph()
    edges_on = {}  # (neuron, signs) -> list of segments
    scale = 1.0 + L * sum(np.abs(W).sum() for W in Ws)
    for sg, _, V, _, _ in pieces:
        key = tuple(int(t) for t in sg)
        polygons[key] = V
        G.add_node(key)
        Z = np.abs(preactivations(Ws, bs, V))  # (k, n)
        for k in range(len(V)):
            p, q = V[k], V[(k + 1) % len(V)]
            if np.linalg.norm(q - p) <= tol:
                continue
            if np.isclose(abs(p[0]), L) and np.isclose(p[0], q[0]):
                continue  # on a vertical side of the box
            if np.isclose(abs(p[1]), L) and np.isclose(p[1], q[1]):
                continue
            hit = np.flatnonzero((Z[k] <= 1e-9 * scale) & (Z[(k + 1) % len(V)] <= 1e-9 * scale))
            for i in hit:
                edges_on.setdefault((int(i), key), []).append((p, q))
    for (i, key), segs in edges_on.items():
        other = list(key)
        other[i] = -other[i]
        other = tuple(other)
        for p, q in segs:
            direction = (q - p) / np.linalg.norm(q - p)
            for p2, q2 in edges_on.get((i, other), []):
                lo1, hi1 = sorted((0.0, float((q - p) @ direction)))
                a2, b2 = float((p2 - p) @ direction), float((q2 - p) @ direction)
                lo2, hi2 = min(a2, b2), max(a2, b2)
                if min(hi1, hi2) - max(lo1, lo2) > tol:
                    G.add_edge(key, other, neuron=i)
    return polygons, G


def polygon_area(V) -> float:
    """Area of a polygon with vertices ``V`` (k, 2) in order (the shoelace formula)."""
    V = np.asarray(V, dtype=float)
    x, y = V[:, 0], V[:, 1]
    return 0.5 * abs(float(x @ np.roll(y, -1) - y @ np.roll(x, -1)))


# --------------------------------------------------------------------------- counts and bounds
def shallow_counts(m: int, d: int) -> tuple[int, int]:
    r"""One hidden layer of ``m`` neurons in general position in :math:`\mathbb R^d`.

    :math:`N_d=\sum_{i\le d}\binom mi` regions and
    :math:`N_{d-1}=m\sum_{i\le d-1}\binom{m-1}i` facets (edges).

    Book: prf:`prop-14-shallow` in book/14-relu-region-graph/theory.md.
    """
    m, d = positive_int(m, "m"), positive_int(d, "d")
    return sum(comb(m, i) for i in range(d + 1)), m * sum(comb(m - 1, i) for i in range(d))


def avg_degree(G: nx.Graph) -> float:
    r""":math:`\bar\delta=2|E|/|V|`.

    Book: prf:`def-14-graph` in book/14-relu-region-graph/theory.md.
    """
    if G.number_of_nodes() == 0:
        raise ValueError("G has no nodes")
    return 2 * G.number_of_edges() / G.number_of_nodes()


def moore_lower_bound(n_regions: int, max_degree: int) -> int:
    r"""Smallest :math:`D` with :math:`1+\Delta\sum_{r<D}(\Delta-1)^r\ge N_d`.

    A connected graph of maximum degree :math:`\Delta` and diameter :math:`D` has at most that many
    nodes. For :math:`\Delta\le1` the sum stops growing (:math:`\Delta=0`: one node;
    :math:`\Delta=1`: at most two), so a larger ``n_regions`` is impossible and raises
    ``ValueError``.

    Book: prf:`thm-14-diameter` in book/14-relu-region-graph/theory.md (the Moore lower bound).
    """
    n_regions = positive_int(n_regions, "n_regions")
    max_degree = nonnegative_int(max_degree, "max_degree")
    if max_degree <= 1:
        if n_regions > max_degree + 1:
            raise ValueError(
                f"no connected graph with max_degree = {max_degree} has n_regions = {n_regions} "
                f"nodes (at most {max_degree + 1})"
            )
        return n_regions - 1
    D, reach = 0, 1
    while reach < n_regions:
        D += 1
        reach += max_degree * (max_degree - 1) ** (D - 1)
    return D


def product_upper_bound(widths) -> int:
    r"""The paper's :math:`\prod_j(m_j+1)`.

    Book: prf:`thm-14-diameter` in book/14-relu-region-graph/theory.md (the upper bound).
    """
    out = 1
    for m in widths:
        out *= positive_int(m, "widths") + 1
    return out


def diameter_estimate(G: nx.Graph, rng, k: int = 50):
    """The paper's estimator: ``(lower, upper, midpoint)``.

    Lower: the best of ``k`` double-sweep lower bounds (``networkx.approximation.diameter`` from
    random seeds). Upper: the smallest diameter of a BFS tree rooted at one of the ``k``
    highest-degree nodes.
    """
    check_generator(rng)
    k = positive_int(k, "k")
    nodes = list(G.nodes)
    lower = 0
    for _ in range(k):
        lower = max(lower, nx.approximation.diameter(G, seed=int(rng.integers(2**31))))
    hubs = sorted(nodes, key=G.degree, reverse=True)[:k]
    upper = min(tree_diameter(nx.bfs_tree(G, h).to_undirected()) for h in hubs)
    return lower, upper, 0.5 * (lower + upper)


def tree_diameter(T: nx.Graph) -> int:
    """Exact diameter of a tree by a double sweep: the node farthest from any node is an end of
    a longest path, so its eccentricity is the diameter (two BFS instead of one per node)."""
    if T.number_of_nodes() == 0:
        raise ValueError("T must have at least one node")
    if T.number_of_edges() != T.number_of_nodes() - 1 or not nx.is_connected(T):
        raise ValueError("T must be a tree (connected, with one edge fewer than nodes)")
    start = next(iter(T.nodes))
    dist = nx.single_source_shortest_path_length(T, start)
    end = max(dist, key=dist.get)
    return max(nx.single_source_shortest_path_length(T, end).values())
