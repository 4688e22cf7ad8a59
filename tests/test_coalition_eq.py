"""Tests for lib.papers.coalition_eq (chapter 02): gains, the MASE LP, EWF, FTPL, the tree DP."""

import itertools

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.papers import coalition_eq as ce


def _game(seed, n=3, a=2):
    return ce.random_normal_form(n, a, np.random.default_rng(seed))


# --------------------------------------------------------------------------- deviations
def test_one_player_deviation_matrix_is_regret():
    u = np.array([0.2, 0.9, 0.5])
    game = ce.NormalFormGame(u[:, None])
    M, labels = ce.deviation_matrix(game, "all")
    assert labels == [((0,), (0,)), ((0,), (1,)), ((0,), (2,))]
    np.testing.assert_allclose(M, u[:, None] - u[None, :])


@given(seed=st.integers(0, 10_000))
@settings(max_examples=20, deadline=None)
def test_gain_is_zero_when_deviating_to_the_recommendation(seed):
    game = _game(seed)
    M, labels = ce.deviation_matrix(game, "all")
    for row, (S, a_hat) in zip(M, labels):
        for k in range(game.n_joint):
            a = game.joint(k)
            if tuple(a[i] for i in S) == a_hat:
                assert abs(row[k]) < 1e-12


def test_gain_matches_definition_by_brute_force():
    game = _game(3, n=3, a=3)
    M, labels = ce.deviation_matrix(game, "all")
    for row, (S, a_hat) in list(zip(M, labels))[::7]:
        for k in range(game.n_joint):
            a = list(game.joint(k))
            b = list(a)
            for i, x in zip(S, a_hat):
                b[i] = x
            want = np.mean([game.U[tuple(b)][i] - game.U[tuple(a)][i] for i in S])
            assert abs(row[k] - want) < 1e-12


@pytest.mark.parametrize("n,a", [(1, 3), (2, 2), (3, 3), (4, 2)])
def test_number_of_deviations_is_A_plus_1_to_the_N_minus_1(n, a):
    M, labels = ce.deviation_matrix(_game(0, n, a), "all")
    assert M.shape == ((a + 1) ** n - 1, a**n) and len(labels) == M.shape[0]


def test_coalition_families():
    assert ce.coalitions(3, "singletons") == [(0,), (1,), (2,)]
    assert ce.coalitions(3, "grand") == [(0, 1, 2)]
    assert len(ce.coalitions(4, 2)) == 4 + 6
    assert len(ce.coalitions(4, "all")) == 15


# --------------------------------------------------------------------------- LP
def test_prisoners_dilemma_mase():
    pd = ce.prisoners_dilemma()
    pi, v = ce.mase_lp(pd)
    np.testing.assert_allclose(pi, [0, 0.5, 0.5, 0], atol=1e-9)
    assert abs(v - 0.1) < 1e-9 and abs(ce.welfare(pd, pi) - 1.0) < 1e-9
    assert abs(ce.phi(pd, pi) - v) < 1e-12


def test_singleton_mase_is_at_most_zero_because_a_cce_exists():
    for seed in range(5):
        _, v = ce.mase_lp(_game(seed), "singletons")
        assert v <= 1e-9


def test_lp_beats_random_strategies():
    game = _game(7)
    _, v = ce.mase_lp(game)
    rng = np.random.default_rng(0)
    for p in rng.dirichlet(np.ones(game.n_joint), 200):
        assert ce.phi(game, p) >= v - 1e-9


def test_optimal_cce_is_a_cce_and_no_better_than_mase():
    game = _game(11, 3, 3)
    pi, vc = ce.mase_lp(game, cce=True)
    _, v = ce.mase_lp(game)
    assert ce.exploitability(game, pi) <= 1e-8 and vc >= v - 1e-9


def test_gain_variants_order():
    game = _game(5)
    p = np.full(game.n_joint, 1 / game.n_joint)
    lo, mid, hi = (ce.gain_variant(game, p, "all", h) for h in ("min", "mean", "max"))
    assert lo <= mid + 1e-12 <= hi + 2e-12


# --------------------------------------------------------------------------- EWF
def test_ewf_prisoners_dilemma_and_shape():
    eps = np.linspace(0, 0.5, 26)
    curve = ce.ewf_lp(ce.prisoners_dilemma(), eps)
    np.testing.assert_allclose(curve[[0, 5, 10, 20]], [0.4, 1.0, 1.0 + 0.2 / 3, 1.2], atol=1e-9)
    assert np.diff(curve).min() >= -1e-9 and np.diff(curve, 2).max() <= 1e-9


def test_ewf_infeasible_below_min_exploitability_raises():
    game = _game(2, 2, 3)
    _, v = ce.mase_lp(game, "singletons")
    ce.ewf_lp(game, [v + 1e-6])
    with pytest.raises(ValueError, match="eps_grid"):
        ce.ewf_lp(game, [v - 0.01])


# --------------------------------------------------------------------------- learning
def test_ftpl_meta_returns_distributions_and_converges_on_pd():
    pd = ce.prisoners_dilemma()
    M, _ = ce.deviation_matrix(pd)
    pi = ce.ftpl_meta(M, 2000, np.random.default_rng(0), chains=3)
    np.testing.assert_allclose(pi.sum(axis=1), 1.0)
    assert (pi @ M.T).max(axis=1).max() < 0.13


def test_hedge_selfplay_prisoners_dilemma_defects():
    pi = ce.hedge_selfplay(ce.prisoners_dilemma(), 500, 0.5)
    assert abs(pi.sum() - 1) < 1e-12 and pi[3] > 0.95


# --------------------------------------------------------------------------- graphs and DP
def test_udg_of_path_and_star():
    rng = np.random.default_rng(0)
    path = ce.random_polymatrix(nx.path_graph(6), 2, rng)
    star = ce.random_polymatrix(nx.star_graph(5), 2, rng)
    assert ce.tree_decomposition(ce.utility_dependency_graph(path))[0] == 2
    udg = ce.utility_dependency_graph(star)
    assert udg.number_of_edges() == 15
    # the normal-form route finds the same graph
    assert set(ce.utility_dependency_graph(path.to_normal_form()).edges) == set(
        ce.utility_dependency_graph(path).edges
    )


def test_dp_single_bag():
    rng = np.random.default_rng(1)
    tables = [((0, 1, 2), rng.normal(size=(3, 3, 3))), ((1,), rng.normal(size=3))]
    tree = nx.Graph()
    tree.add_node(frozenset({0, 1, 2}))
    a, v, ops = ce.min_sum_dp(tables, tree, 3)
    assert ops == 27
    assert abs(v - ce.brute_force_min(tables, 3, 3)[1]) < 1e-12


def test_dp_forest_decomposition():
    rng = np.random.default_rng(2)
    tables = [
        ((0, 1), rng.normal(size=(2, 2))),
        ((2, 3), rng.normal(size=(2, 2))),
        ((4,), np.array([1.0, 0.0])),
    ]
    tree = nx.Graph()
    tree.add_nodes_from([frozenset({0, 1}), frozenset({2, 3}), frozenset({4})])
    a, v, ops = ce.min_sum_dp(tables, tree, 2)
    best, vb = ce.brute_force_min(tables, 5, 2)
    assert abs(v - vb) < 1e-12 and ops == 4 + 4 + 2
    assert abs(sum(t[tuple(a[x] for x in s)] for s, t in tables) - vb) < 1e-12


@given(seed=st.integers(0, 10_000))
@settings(max_examples=15, deadline=None)
def test_dp_equals_brute_force_on_random_polymatrix(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 7))
    game = ce.random_polymatrix(nx.gnp_random_graph(n, 0.5, seed=seed), 2, rng)
    tables = [(s, t + rng.normal(size=t.shape)) for s, t in game.local_tables()]
    w, tree = ce.tree_decomposition(ce.utility_dependency_graph(game))
    _, v, ops = ce.min_sum_dp(tables, tree, 2)
    assert abs(v - ce.brute_force_min(tables, n, 2)[1]) < 1e-9
    assert ops <= tree.number_of_nodes() * 2 ** (w + 1)


def test_correlator_tables_reproduce_the_gain_matrix():
    rng = np.random.default_rng(4)
    game = ce.random_polymatrix(nx.cycle_graph(5), 2, rng)
    coals = ce.coalitions(5, 2)
    M, _ = ce.deviation_matrix(game, coals)
    mu = rng.uniform(size=M.shape[0])
    tables = ce.correlator_tables(game, coals, mu)
    loss = mu @ M
    for k, a in enumerate(itertools.product(range(2), repeat=5)):
        assert abs(sum(t[tuple(a[v] for v in s)] for s, t in tables) - loss[k]) < 1e-12


# --------------------------------------------------------------------------- bad input
def test_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match="U"):
        ce.NormalFormGame(np.ones((2, 2, 3)))
    with pytest.raises(ValueError, match="U"):
        ce.NormalFormGame(np.full((2, 2, 2), 1.5))
    with pytest.raises(TypeError, match="game"):
        ce.mase_lp("pd")
    with pytest.raises(ValueError, match="kind"):
        ce.coalitions(3, "pairs")
    with pytest.raises(ValueError, match="coalitions"):
        ce.deviation_matrix(ce.prisoners_dilemma(), [(0, 5)])
    with pytest.raises(ValueError, match="aggregate"):
        ce.deviation_matrix(ce.prisoners_dilemma(), aggregate="median")
    with pytest.raises(ValueError, match="pi"):
        ce.phi(ce.prisoners_dilemma(), [0.5, 0.5, 0.5, 0.5])
    with pytest.raises(TypeError, match="rng"):
        ce.ftpl_meta(np.ones((2, 2)), 10, 0)
    with pytest.raises(ValueError, match="T"):
        ce.ftpl_meta(np.ones((2, 2)), 0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="lr"):
        ce.hedge_selfplay(ce.prisoners_dilemma(), 10, -1.0)
    with pytest.raises(ValueError, match="w"):
        ce.weighted_mase(ce.prisoners_dilemma(), 1.5)
    with pytest.raises(ValueError, match="method"):
        ce.tree_decomposition(nx.path_graph(3), "exact")
    with pytest.raises(ValueError, match="tables"):
        tree = nx.Graph()
        tree.add_node(frozenset({0}))
        ce.min_sum_dp([((0, 1), np.zeros((2, 2)))], tree, 2)
    with pytest.raises(ValueError, match="mats"):
        ce.PolymatrixGame(nx.path_graph(2), {}, 2)


def test_hedge_batch_equals_single_runs():
    games = [_game(s, 3, 2) for s in range(3)]
    batch = ce.hedge_selfplay(games, 50, 0.3)
    for g, row in zip(games, batch):
        np.testing.assert_allclose(row, ce.hedge_selfplay(g, 50, 0.3), atol=1e-14)


def test_gain_variant_batch_matches_single():
    pd = ce.prisoners_dilemma()
    ps = np.random.default_rng(0).dirichlet(np.ones(4), 5)
    for how in ("mean", "max", "min"):
        batch = ce.gain_variant(pd, ps, "all", how)
        np.testing.assert_allclose(batch, [ce.gain_variant(pd, p, "all", how) for p in ps])


def test_local_tables_match_the_polymatrix_definition():
    gen = np.random.default_rng(7)
    graph = nx.Graph([(0, 1), (1, 2), (2, 0), (2, 3)])
    game = ce.random_polymatrix(graph, 3, gen)
    tables = game.local_tables()
    for a in itertools.product(range(3), repeat=4):
        for k, (scope, table) in enumerate(tables):
            nbrs = list(graph.neighbors(k))
            want = sum(game.mats[(k, j)][a[k], a[j]] for j in nbrs) / len(nbrs)
            assert table[tuple(a[v] for v in scope)] == pytest.approx(want, abs=1e-12)


def test_size_guards_and_scope_checks():
    big = ce.NormalFormGame(np.zeros((2,) * 14 + (14,)))
    with pytest.raises(ValueError, match="coals"):
        ce.deviation_matrix(big, "all")
    with pytest.raises(ValueError, match="at most 25 players"):
        ce.hedge_selfplay(ce.NormalFormGame(np.zeros((1,) * 26 + (26,))), 2, 0.5)
    with pytest.raises(ValueError, match="tables"):
        ce.brute_force_min([((-1, 0), np.zeros((2, 2)))], 3, 2)
    with pytest.raises(ValueError, match="tol"):
        ce.utility_dependency_graph(ce.prisoners_dilemma(), tol=-1.0)


def test_epigraph_lp_is_shared_by_mase_and_weighted_mase():
    pd = ce.prisoners_dilemma()
    # weight 1/2 scales every row by 1/2: singletons + grand coalition = all coalitions of the PD
    _, v_half = ce.weighted_mase(pd, 0.5)
    _, v_all = ce.mase_lp(pd, "all")
    assert v_half == pytest.approx(v_all / 2, abs=1e-12)


def test_local_gains_equal_the_explicit_gain_matrix():
    game = ce.random_polymatrix(nx.cycle_graph(5), 2, np.random.default_rng(3))
    coals = ce.coalitions(5, 2)
    M, _ = ce.deviation_matrix(game, coals)
    nf = game.to_normal_form()
    prof = np.random.default_rng(4).integers(0, 2, size=(30, 5))
    pi = np.bincount([nf.index(p) for p in prof], minlength=nf.n_joint) / 30
    np.testing.assert_allclose(ce.local_gains(game, coals, prof), M @ pi, atol=1e-12)
    with pytest.raises(ValueError, match="profiles"):
        ce.local_gains(game, coals, np.full((3, 5), 2))


def test_succinct_ftpl_outputs_and_duality():
    game = ce.random_polymatrix(nx.cycle_graph(5), 2, np.random.default_rng(5))
    coals = ce.coalitions(5, 2)
    M, _ = ce.deviation_matrix(game, coals)
    _, v = ce.mase_lp(game, coals)
    prof, phi_bar, ops, mu_bar = ce.succinct_ftpl(game, coals, 200, np.random.default_rng(6))
    assert prof.shape == (200, 5) and mu_bar.shape == (M.shape[0],)
    assert mu_bar.sum() == pytest.approx(1.0) and ops > 0
    nf = game.to_normal_form()
    pi = np.bincount([nf.index(p) for p in prof], minlength=nf.n_joint) / 200
    assert phi_bar == pytest.approx((M @ pi).max(), abs=1e-12)
    assert (mu_bar @ M).min() <= v + 1e-12 <= phi_bar + 2e-12
    with pytest.raises(TypeError, match="game"):
        ce.succinct_ftpl(ce.prisoners_dilemma(), "all", 10, np.random.default_rng(0))
    with pytest.raises(ValueError, match="T"):
        ce.succinct_ftpl(game, coals, 0, np.random.default_rng(0))


@pytest.mark.parametrize("graph, width", [(nx.path_graph(7), 2), (nx.cycle_graph(7), 4)])
def test_path_of_bags_is_a_decomposition_of_the_udg(graph, width):
    game = ce.random_polymatrix(graph, 2, np.random.default_rng(1))
    tree = ce.path_of_bags(7, width)
    assert nx.is_tree(tree) and max(len(b) for b in tree.nodes) == width + 1
    for u, v in ce.utility_dependency_graph(game).edges:
        assert any({u, v} <= b for b in tree.nodes)
    for v in range(7):  # running intersection: the bags holding v are connected
        assert nx.is_connected(tree.subgraph([b for b in tree.nodes if v in b]))
    with pytest.raises(ValueError, match="width"):
        ce.path_of_bags(7, 3)
    with pytest.raises(ValueError, match="N"):
        ce.path_of_bags(4, 4)


def test_batched_dp_equals_brute_force():
    game = ce.random_polymatrix(nx.cycle_graph(7), 2, np.random.default_rng(2))
    loc = ce._LocalDeviations(game, 2)
    dp = ce._BatchedDP(loc.scopes, loc.offsets, ce.path_of_bags(7, 4), 2, 7)
    flat = np.random.default_rng(3).normal(size=(6, loc.flat.size))
    prof, values = dp.solve(flat)
    for b in range(6):
        tables = [
            (s, flat[b, o : o + 2 ** len(s)].reshape((2,) * len(s)))
            for s, o in zip(loc.scopes, loc.offsets)
        ]
        _, brute = ce.brute_force_min(tables, 7, 2)
        assert values[b] == pytest.approx(brute, abs=1e-12)
        assert sum(t[tuple(prof[b][list(s)])] for s, t in tables) == pytest.approx(brute)


def test_succinct_ftpl_chains_matches_the_single_chain_loop():
    # same generator, player noise, one chain: the same trajectory as succinct_ftpl
    game = ce.random_polymatrix(nx.cycle_graph(6), 2, np.random.default_rng(3))
    coals = ce.coalitions(6, 2)
    tree = ce.path_of_bags(6, 4)
    _, phi, _, mu = ce.succinct_ftpl(game, coals, 300, np.random.default_rng(9), tree=tree)
    phi2, low2 = ce.succinct_ftpl_chains(game, coals, 300, np.random.default_rng(9), tree=tree)
    low = ce.min_sum_dp(ce.correlator_tables(game, coals, mu), tree, 2)[1]
    assert phi2[0] == pytest.approx(phi, abs=1e-12)
    assert low2[0] == pytest.approx(low, abs=1e-12)


def test_succinct_ftpl_chains_duality_and_inputs():
    game = ce.random_polymatrix(nx.path_graph(6), 3, np.random.default_rng(4))
    coals = ce.coalitions(6, 2)
    _, v = ce.mase_lp(game, coals)
    T = np.array([50, 50, 120, 120])
    phi, low = ce.succinct_ftpl_chains(
        game, coals, T, np.random.default_rng(5), tree=ce.path_of_bags(6, 2), noise="bags"
    )
    assert phi.shape == low.shape == (4,)
    assert np.all(low <= v + 1e-12) and np.all(v <= phi + 1e-12)
    with pytest.raises(ValueError, match="noise"):
        ce.succinct_ftpl_chains(game, coals, 10, np.random.default_rng(0), noise="edges")
    with pytest.raises(ValueError, match="T"):
        ce.succinct_ftpl_chains(game, coals, [0, 3], np.random.default_rng(0))
    with pytest.raises(ValueError, match="noise_scale"):
        ce.succinct_ftpl_chains(game, coals, 10, np.random.default_rng(0), noise_scale=-1.0)
    with pytest.raises(TypeError, match="game"):
        ce.succinct_ftpl_chains(ce.prisoners_dilemma(), "all", 10, np.random.default_rng(0))
