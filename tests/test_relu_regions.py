"""Unit tests for lib.relu_regions (chapter 14), following section (g) of the brief."""

import networkx as nx
import numpy as np
import pytest

from lib.papers import relu_regions as rr


def gen(seed=0):
    return np.random.default_rng(seed)


def test_region_affine_reproduces_preactivations():
    g = gen(1)
    Ws, bs = rr.random_relu_net(3, [5, 4, 3], g)
    X = g.standard_normal((100, 3)) * 2
    S = rr.sign_sequence(Ws, bs, X)
    Z = rr.preactivations(Ws, bs, X)
    for x, s, z in zip(X, S, Z):
        A, c = rr.region_affine(Ws, bs, s)
        assert np.allclose(A @ x + c, z, atol=1e-12)


def test_interior_point_has_the_right_sign_sequence():
    g = gen(2)
    Ws, bs = rr.random_relu_net(2, [5, 5], g)
    for x in g.standard_normal((30, 2)) * 3:
        s = rr.sign_sequence(Ws, bs, x)
        p, r = rr.interior_point(Ws, bs, s)
        assert r > 0 and np.array_equal(rr.sign_sequence(Ws, bs, p), s)


def _some_regions(d, widths, seed, k):
    Ws, bs = rr.random_relu_net(d, widths, gen(seed))
    G = rr.enumerate_regions(Ws, bs)
    return Ws, bs, G, [np.array(key, dtype=np.int8) for key in list(G.nodes)[:k]]


def test_facets_are_symmetric_and_handshake_holds():
    Ws, bs, G, regions = _some_regions(2, [5, 4], 3, 20)
    for s in regions:
        for i in rr.facet_neurons(Ws, bs, s, use_ray=False):
            t = s.copy()
            t[i] = -t[i]
            assert i in rr.facet_neurons(Ws, bs, t, use_ray=False)
    assert sum(dict(G.degree).values()) == 2 * G.number_of_edges()


def test_ray_test_and_lp_agree():
    Ws, bs, _, regions = _some_regions(3, [6, 4], 4, 25)
    for s in regions:
        assert rr.facet_neurons(Ws, bs, s) == rr.facet_neurons(Ws, bs, s, use_ray=False)


def test_xor_like_hand_example():
    # two lines x1 = 0 and x2 = 0: four quadrants, each adjacent to two others
    Ws, bs = [np.eye(2)], [np.zeros(2)]
    G = rr.enumerate_regions(Ws, bs, x0=np.array([0.3, 0.7]))
    assert G.number_of_nodes() == 4 and G.number_of_edges() == 4
    assert all(deg == 2 for _, deg in G.degree)
    assert nx.diameter(G) == 2


def test_dead_neurons_are_handled():
    # a second-layer neuron reading only a switched-off first-layer neuron is constant there
    Ws = [np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[1.0, 0.0], [0.0, 0.0]])]
    bs = [np.zeros(2), np.array([-0.5, 1.0])]  # the last neuron is constant +1 everywhere
    G = rr.enumerate_regions(Ws, bs, x0=np.array([0.2, 0.3]))
    assert all(key[3] == 1 for key in G.nodes)
    # quadrants, with x1 = 0.5 splitting the two with x1 > 0
    assert G.number_of_nodes() == rr.brute_force_graph(Ws, bs).number_of_nodes() == 6
    with pytest.raises(ValueError, match="no interior"):
        rr.interior_point(Ws, bs, np.array([1, 1, 1, -1]))


def test_enumeration_matches_brute_force():
    g = gen(5)
    for d, w in ((2, [4, 3]), (3, [3, 3])):
        Ws, bs = rr.random_relu_net(d, w, g)
        G, H = rr.enumerate_regions(Ws, bs), rr.brute_force_graph(Ws, bs)
        assert set(G.nodes) == set(H.nodes)
        assert {frozenset(e) for e in G.edges} == {frozenset(e) for e in H.edges}


@pytest.mark.parametrize("d,m", [(2, 5), (3, 6)])
def test_shallow_closed_form(d, m):
    Ws, bs = rr.random_relu_net(d, [m], gen(6))
    G = rr.enumerate_regions(Ws, bs)
    assert (G.number_of_nodes(), G.number_of_edges()) == rr.shallow_counts(m, d)
    assert rr.shallow_counts(16, 4)[0] == 2517  # the paper's depth-1 row


def test_bounds_helpers():
    assert rr.product_upper_bound([3, 4]) == 20
    assert rr.moore_lower_bound(1, 3) == 0
    assert (
        rr.moore_lower_bound(4, 3) == 1 and rr.moore_lower_bound(5, 3) == 2
    )  # 1 + 3 = 4, 1 + 3 + 6 = 10
    G = nx.path_graph(10)
    lo, hi, mid = rr.diameter_estimate(G, gen(7), k=5)
    assert lo <= 9 <= hi and mid == 0.5 * (lo + hi)
    assert rr.avg_degree(G) == pytest.approx(1.8)


def test_shallow_closed_form_avg_degree_increases_to_2d():
    # the property behind the claims 14/thm-3.7/increasing and 14/thm-3.7/near-2d
    for d in (2, 3, 4):
        counts = [rr.shallow_counts(m, d) for m in range(d + 1, 201)]
        avg = [2 * n_edges / n_regions for n_regions, n_edges in counts]
        assert np.all(np.diff(avg) > 0) and avg[-1] < 2 * d
    assert 5.9 <= 2 * rr.shallow_counts(200, 3)[1] / rr.shallow_counts(200, 3)[0] <= 6.0


def test_moore_lower_bound_never_exceeds_the_diameter():
    # the property behind the claim 14/thm-3.8/moore-lower: it holds for every connected graph
    # the Petersen graph is a Moore graph: the bound is attained
    assert rr.moore_lower_bound(10, 3) == 2 == nx.diameter(nx.petersen_graph())
    graphs = [nx.path_graph(7), nx.cycle_graph(9), nx.grid_2d_graph(4, 5), nx.hypercube_graph(4)]
    graphs += [nx.random_regular_graph(3, 20, seed=s) for s in range(5)]
    graphs += [nx.random_labeled_tree(15, seed=s) for s in range(5)]
    Ws, bs = rr.random_relu_net(2, [4, 3], gen(9))
    graphs.append(rr.enumerate_regions(Ws, bs))
    for G in graphs:
        if not nx.is_connected(G):
            continue
        max_deg = max(deg for _, deg in G.degree)
        assert rr.moore_lower_bound(G.number_of_nodes(), max_deg) <= nx.diameter(G)


def test_from_torch():
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(
        torch.nn.Linear(3, 4),
        torch.nn.ReLU(),
        torch.nn.Linear(4, 2),
        torch.nn.ReLU(),
        torch.nn.Linear(2, 1),
    )
    Ws, bs = rr.from_torch(model)
    assert rr.widths_of(Ws) == [4, 2]
    x = np.random.default_rng(8).standard_normal(3)
    h = model[:4](torch.tensor(x, dtype=torch.float32)).detach().numpy()
    assert np.allclose(np.maximum(rr.preactivations(Ws, bs, x)[0, 4:], 0), h, atol=1e-6)
    with pytest.raises(TypeError, match="Sequential"):
        rr.from_torch(torch.nn.Linear(2, 2))


def test_bad_input_is_rejected_with_named_argument():
    with pytest.raises(ValueError, match="Ws"):
        rr.region_affine([np.ones((2, 3)), np.ones((2, 4))], [np.ones(2), np.ones(2)], np.ones(4))
    with pytest.raises(ValueError, match="bs"):
        rr.sign_sequence([np.ones((2, 3))], [np.ones(3)], np.ones(3))
    with pytest.raises(ValueError, match="same length"):
        rr.sign_sequence([np.ones((2, 3))], [], np.ones(3))
    with pytest.raises(ValueError, match="s must"):
        rr.region_affine([np.eye(2)], [np.zeros(2)], np.ones(3))
    with pytest.raises(ValueError, match="bent hyperplane"):
        rr.enumerate_regions([np.eye(2)], [np.zeros(2)], x0=np.zeros(2))
    with pytest.raises(RuntimeError, match="max_regions"):
        rr.enumerate_regions(*rr.random_relu_net(2, [6], gen()), max_regions=3)
    with pytest.raises(ValueError, match="max_neurons"):
        rr.brute_force_graph(*rr.random_relu_net(2, [15], gen()))
    with pytest.raises(ValueError, match="widths"):
        rr.random_relu_net(2, [], gen())
    with pytest.raises(TypeError, match="rng"):
        rr.random_relu_net(2, [3], 5)
    with pytest.raises(ValueError, match="n_regions"):
        rr.moore_lower_bound(0, 3)


def test_tree_diameter_matches_networkx_on_random_trees():
    gen = np.random.default_rng(0)
    for n in (1, 2, 5, 40, 200):
        T = nx.random_labeled_tree(n, seed=int(gen.integers(2**31))) if n > 1 else nx.empty_graph(1)
        assert rr.tree_diameter(T) == nx.diameter(T)
    with pytest.raises(ValueError, match="tree"):
        rr.tree_diameter(nx.cycle_graph(5))


def test_moore_lower_bound_small_degrees():
    # maximum degree 1: a connected graph is one edge (two nodes) or a single node
    assert rr.moore_lower_bound(2, 1) == 1 == nx.diameter(nx.path_graph(2))
    assert rr.moore_lower_bound(1, 1) == 0 and rr.moore_lower_bound(1, 0) == 0
    with pytest.raises(ValueError, match="max_degree"):
        rr.moore_lower_bound(3, 1)
    with pytest.raises(ValueError, match="max_degree"):
        rr.moore_lower_bound(2, 0)
    # maximum degree 2: paths and cycles, 1 + 2D nodes within distance D
    assert rr.moore_lower_bound(5, 2) == 2 and rr.moore_lower_bound(6, 2) == 3


def test_polygon_area_shoelace():
    assert rr.polygon_area([[0, 0], [2, 0], [2, 3], [0, 3]]) == pytest.approx(6.0)
    assert rr.polygon_area([[0, 0], [1, 0], [0, 1]]) == pytest.approx(0.5)


def test_polygons_match_enumeration_and_the_plane_euler_formula():
    # the independent HalfspaceIntersection route gives the BFS graph, the polygons tile the box,
    # and 2 N_1 = 4 N_2 - 4 - r with r the number of unbounded regions (thm-14-avg-degree-2d)
    L = 1e5
    for widths, seed in (([4], 10), ([4, 3], 11), ([3, 3, 2], 12)):
        Ws, bs = rr.random_relu_net(2, widths, gen(seed))
        polys, H = rr.polygon_complex_2d(Ws, bs, box=L)
        G = rr.enumerate_regions(Ws, bs)
        assert set(G.nodes) == set(H.nodes)
        assert {frozenset(e) for e in G.edges} == {frozenset(e) for e in H.edges}
        area = sum(rr.polygon_area(V) for V in polys.values())
        assert area == pytest.approx(4 * L * L, rel=1e-9)
        r = sum(1 for V in polys.values() if np.any(np.isclose(np.abs(V), L)))
        assert 2 * G.number_of_edges() == 4 * G.number_of_nodes() - 4 - r
    # two crossing lines: four quadrants, all unbounded: 2 * 4 = 16 - 4 - 4
    polys, H = rr.polygon_complex_2d([np.eye(2)], [np.zeros(2)], box=10.0)
    assert len(polys) == 4 and H.number_of_edges() == 4
    with pytest.raises(ValueError, match="input dimension"):
        rr.polygon_complex_2d([np.ones((2, 3))], [np.zeros(2)])
