"""Unit tests for lib.papers.dense_memory (chapter 15), following item (g) of the plan."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import erf

from lib.papers import dense_memory as dm


def gen(seed=0):
    return np.random.default_rng(seed)


# --------------------------------------------------------------------------- Gaussian moments
@pytest.mark.parametrize("r", range(0, 7))
def test_kr_at_one_is_double_factorial(r):
    assert dm.bivariate_moment(r, 1.0) == dm.double_factorial(2 * r - 1)


@pytest.mark.parametrize("r", range(0, 7))
def test_kr_at_zero(r):
    expected = dm.double_factorial(r - 1) ** 2 if r % 2 == 0 else 0
    assert dm.bivariate_moment(r, 0.0) == expected


def test_kr_small_cases_and_monte_carlo():
    c = np.array([-0.5, 0.3, 0.9])
    np.testing.assert_allclose(dm.bivariate_moment(2, c), 1 + 2 * c**2)
    np.testing.assert_allclose(dm.bivariate_moment(3, c), 9 * c + 6 * c**3)
    z = gen(1).standard_normal((2, 200_000))
    U, V = z[0], 0.6 * z[0] + 0.8 * z[1]
    s = (U * V) ** 2
    assert abs(s.mean() - dm.bivariate_moment(2, 0.6)) < 5 * s.std() / np.sqrt(s.size)


@given(st.integers(0, 6), st.floats(-1, 1))
@settings(max_examples=40, deadline=None)
def test_kr_parity(r, c):
    assert dm.bivariate_moment(r, -c) == pytest.approx((-1) ** r * dm.bivariate_moment(r, c))


# --------------------------------------------------------------------------- field
@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_field_matches_bruteforce(n):
    g = gen(n)
    xi = 2.0 * g.integers(0, 2, (50, 20)) - 1
    s = 2.0 * g.integers(0, 2, 20) - 1
    np.testing.assert_allclose(
        dm.kh_field(xi, s, n), dm.kh_field_bruteforce(xi, s, n), rtol=1e-9, atol=1e-12
    )


def test_field_n2_is_twice_hebbian_with_zero_diagonal():
    g = gen(3)
    xi = 2.0 * g.integers(0, 2, (7, 30)) - 1
    s = 2.0 * g.integers(0, 2, 30) - 1
    J = xi.T @ xi / 30
    np.fill_diagonal(J, 0)
    np.testing.assert_allclose(dm.kh_field(xi, s, 2), 2 * J @ s, atol=1e-12)


def test_field_vectorised_over_states():
    g = gen(4)
    xi = 2.0 * g.integers(0, 2, (9, 16)) - 1
    S = 2.0 * g.integers(0, 2, (16, 3)) - 1
    H = dm.kh_field(xi, S, 3)
    for k in range(3):
        np.testing.assert_allclose(H[:, k], dm.kh_field(xi, S[:, k], 3))


def test_mirror_state_maps_to_pattern_for_n3():
    xi = 2.0 * gen(5).integers(0, 2, (1, 40)) - 1
    s1 = np.sign(dm.kh_field(xi, -xi[0], 3))
    np.testing.assert_array_equal(s1, xi[0])


# --------------------------------------------------------------------------- simulation
def test_corrupted_state_has_exact_overlap():
    target = 2.0 * gen(6).integers(0, 2, 100) - 1
    S = dm.corrupted_state(target, 0.6, gen(7), K=5)
    np.testing.assert_allclose(target @ S / 100, 0.6)


def test_simulate_shapes_and_single_pattern_retrieval():
    out = dm.simulate_dam(64, 3, 1e-4, 0.2, 2, gen(8), trials=3)  # p = 1
    assert out["m"].shape == (3, 3) and out["p"] == 1
    np.testing.assert_allclose(out["m"][:, 1:], 1.0)


def test_random_patterns_are_pm1_balanced_and_reuse_the_buffer():
    buf = dm.pattern_buffer(300, 257)  # a size that is not a multiple of 8
    xi = dm.random_patterns(300, 257, gen(20), out=buf)
    assert xi is buf and xi.dtype == np.float32 and xi.flags.f_contiguous
    assert set(np.unique(xi)) == {-1.0, 1.0}
    assert abs(xi.mean()) < 5 / np.sqrt(xi.size)
    # rows and columns are not correlated (a stuck bit or a repeated block would show)
    c = np.corrcoef(xi[:, :50].T)[np.triu_indices(50, 1)]
    assert np.abs(c).max() < 5 / np.sqrt(300)
    np.testing.assert_array_equal(dm.random_patterns(300, 257, gen(20)), xi)


def test_float32_dynamics_equals_float64():
    g = gen(21)
    xi = dm.random_patterns(int(0.1 * 256**2), 256, g)
    s0 = dm.corrupted_state(xi[0], 0.6, g, 3)
    a = dm.parallel_dynamics(xi, s0, 3, 4)
    b = dm.parallel_dynamics(xi.astype(np.float64), s0, 3, 4)
    for k in ("m", "u2", "u2n"):
        np.testing.assert_array_equal(a[k], b[k])


def test_parallel_dynamics_targets_and_one_step_by_hand():
    g = gen(22)
    xi = dm.random_patterns(40, 32, g)
    s0 = np.stack([xi[0], xi[3]], axis=1)  # column k starts at pattern target[k]
    out = dm.parallel_dynamics(xi, s0, 3, 1, target=[0, 3])
    np.testing.assert_allclose(out["m"][:, 0], 1.0)
    s1 = np.where(dm.kh_field(xi.astype(float), s0, 3) >= 0, 1.0, -1.0)
    np.testing.assert_allclose(out["m"][:, 1], [xi[0] @ s1[:, 0] / 32, xi[3] @ s1[:, 1] / 32])
    u = (xi.astype(float) @ s0) / np.sqrt(32)
    np.testing.assert_allclose(out["u2"][0, 0], np.mean(np.delete(u[:, 0], 0) ** 2))
    np.testing.assert_allclose(out["u2n"][1, 0], np.mean(np.delete(u[:, 1], 3) ** 4))


def test_incremental_overlaps_equal_a_plain_reference():
    # the dynamics updates x = xi sigma from the flipped neurons only; a plain float64 loop that
    # recomputes everything from kh_field must give the same trajectories exactly
    g = gen(25)
    for N, alpha, m0, T in ((64, 0.1, 0.3, 6), (128, 0.1, 0.8, 5)):
        xi = dm.random_patterns(int(alpha * N**2), N, g)
        s0 = dm.corrupted_state(xi[0], m0, g, 3)
        out = dm.parallel_dynamics(xi, s0, 3, T)
        x64, s = xi.astype(np.float64), s0.copy()
        for t in range(T + 1):
            np.testing.assert_array_equal(out["m"][:, t], xi[0] @ s / N)
            s = np.where(dm.kh_field(x64, s, 3) >= 0, 1.0, -1.0)


def test_simulate_runs_axis_and_identical_trials_at_m0_one():
    out = dm.simulate_dam(64, 3, 0.02, 1.0, 3, gen(23), trials=3, runs=2)
    assert out["m"].shape == (2, 3, 4)
    # at m0 = 1 the dynamics is deterministic given the patterns: trials are copies
    np.testing.assert_array_equal(out["m"][:, 0], out["m"][:, 2])
    assert not np.array_equal(out["u2"][0], out["u2"][1])  # different pattern sets


def test_finite_size_fit_recovers_line_and_covariance():
    N = np.array([256, 512, 1024])
    se = np.array([0.03, 0.01, 0.02])
    fit = dm.finite_size_fit(N, 0.9 - 2.0 / np.sqrt(N), se)
    assert fit.a == pytest.approx(0.9) and fit.b == pytest.approx(-2.0)
    assert fit.chi2 == pytest.approx(0.0, abs=1e-20)
    X = np.c_[np.ones(3), 1 / np.sqrt(N)]
    cov = np.linalg.inv(X.T @ np.diag(se**-2) @ X)
    assert fit.se_a == pytest.approx(np.sqrt(cov[0, 0]))
    assert fit.se_b == pytest.approx(np.sqrt(cov[1, 1]))
    np.testing.assert_allclose(fit.predict(N), 0.9 - 2.0 / np.sqrt(N))


def test_finite_size_fit_intercept_is_unbiased_with_the_stated_se():
    # Monte Carlo: z = (a - truth) / se_a is standard normal when the model holds
    g, N, se = gen(24), np.array([256, 512, 1024]), np.array([0.02, 0.01, 0.01])
    z = []
    for _ in range(2000):
        y = 0.8 + 1.5 / np.sqrt(N) + se * g.standard_normal(3)
        f = dm.finite_size_fit(N, y, se)
        z.append((f.a - 0.8) / f.se_a)
    assert abs(np.mean(z)) < 0.1 and abs(np.std(z) - 1) < 0.05


# --------------------------------------------------------------------------- effective process
def test_first_step_and_naive_map():
    assert dm.first_step(3, 0.1, 0.8) == pytest.approx(erf(0.64 / np.sqrt(0.6)))
    m = dm.naive_map(3, 0.1, 0.8, 3)
    assert m[0] == 0.8 and m[2] == pytest.approx(dm.first_step(3, 0.1, m[1]))


def test_effective_small_alpha_retrieves_in_one_step():
    sol = dm.solve_effective(3, 1e-6, 0.3, 3, 2000, gen(9))
    np.testing.assert_allclose(sol.m[1:], 1.0)


def test_effective_first_step_matches_erf():
    M = 200_000
    sol = dm.solve_effective(3, 0.05, 0.6, 1, M, gen(10))
    assert abs(sol.m[1] - dm.first_step(3, 0.05, sol.m[0])) < 3 / np.sqrt(M)


def test_effective_noise_diagonal_and_causal_response():
    sol = dm.solve_effective(4, 0.01, 0.7, 4, 20_000, gen(11))
    np.testing.assert_allclose(np.diag(sol.Sigma), 0.01 * 16 * 15)
    assert np.all(np.triu(sol.G) == 0)


def test_mirror_symmetry_for_even_n():
    a = dm.naive_map(4, 0.01, 0.6, 4)
    b = dm.naive_map(4, 0.01, -0.6, 4)
    np.testing.assert_allclose(a, -b)
    sa = dm.solve_effective(4, 0.01, 0.9, 3, 50_000, gen(12)).m
    sb = dm.solve_effective(4, 0.01, -0.9, 3, 50_000, gen(12)).m
    np.testing.assert_allclose(sa, -sb, atol=0.02)


def test_hopfield_sigma11_closed_form_limits():
    assert dm.hopfield_sigma11(0.1, 5.0) == pytest.approx(1.0)
    sol = dm.solve_hopfield(0.1, 0.6, 2, 100_000, gen(13))
    assert sol.Sigma[1, 1] / 0.1 == pytest.approx(dm.hopfield_sigma11(0.1, 0.6), rel=0.05)


def test_first_kernel_theory_closed_form():
    # n = 3: G(1,0) = 2 pdf(3 m0^2; sd sqrt(27 alpha)), C = m0 m(1), R = 36 alpha G C
    a, m0 = 0.1, 0.8
    G = 2 * np.exp(-((3 * m0**2) ** 2) / (2 * 27 * a)) / np.sqrt(2 * np.pi * 27 * a)
    C = m0 * erf(m0**2 / np.sqrt(6 * a))
    R, S10 = dm.first_kernel_theory(3, a, m0)
    assert R == pytest.approx(36 * a * G * C)
    assert S10 == pytest.approx(9 * a * (1 + 2 * C**2))
    # n = 4 uses K_2 = 1 + 2 C^2
    R4, _ = dm.first_kernel_theory(4, 0.01, 0.7)
    G4 = 2 * dm.norm.pdf(4 * 0.7**3, scale=np.sqrt(0.01 * 16 * 15))
    C4 = 0.7 * dm.first_step(4, 0.01, 0.7)
    assert R4 == pytest.approx(0.01 * 144 * G4 * (1 + 2 * C4**2))


def test_first_kernel_matches_solver():
    sol = dm.solve_effective(3, 0.1, 0.8, 2, 100_000, gen(14))
    assert sol.R[1, 0] == pytest.approx(dm.first_kernel_theory(3, 0.1, 0.8)[0], rel=0.05)


def test_measure_first_kernel_single_pattern_has_no_kernel():
    # p = 2 patterns at tiny alpha: the measured R is close to 0 and the SE is finite
    out = dm.measure_first_kernel(64, 3, 1e-5, 0.6, gen(15), trials=3)
    assert out["R"].shape == (3,) and np.all(np.isfinite(out["se"]))
    assert np.all(np.abs(out["R"]) < 0.05)


def test_noisy_naive_map_large_N_follows_map():
    m = dm.noisy_naive_map(3, 0.05, 0.8, 4, 10**7, gen(16), size=2)
    np.testing.assert_allclose(m, np.tile(dm.naive_map(3, 0.05, 0.8, 4), (2, 1)), atol=2e-3)
    assert np.all(np.abs(dm.noisy_naive_map(3, 0.05, 0.5, 3, 64, gen(17), size=50)) <= 1)


def test_convergence_time():
    m = np.array([[0.5, 0.8, 0.995, 1.0], [0.5, 0.5, 0.5, 0.5]])
    np.testing.assert_array_equal(dm.convergence_time(m, 0.01), [2, 0])


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: dm.bivariate_moment(-1, 0.5), "r"),
        (lambda: dm.bivariate_moment(2, 1.5), "c"),
        (lambda: dm.kh_field(np.ones((2, 3)), np.ones(3), 1), "n"),
        (lambda: dm.kh_field(np.zeros((2, 3)), np.ones(3), 3), "xi"),
        (lambda: dm.kh_field(np.ones((2, 3)), np.ones(4), 3), "s"),
        (lambda: dm.simulate_dam(16, 3, -0.1, 0.5, 2, gen()), "alpha"),
        (lambda: dm.simulate_dam(16, 3, 0.1, 1.5, 2, gen()), "m0"),
        (lambda: dm.solve_effective(2, 0.1, 0.5, 2, 10, gen()), "n"),
        (lambda: dm.solve_effective(3, 0.0, 0.5, 2, 10, gen()), "alpha"),
        (lambda: dm.solve_effective(3, 0.1, 0.5, 0, 10, gen()), "T"),
        (lambda: dm.convergence_time([0.1, 0.2], -1.0), "eps"),
        (lambda: dm.first_step(3, 0.1, 1.5), "m0"),
        (lambda: dm.first_kernel_theory(3, 0.1, -2.0), "m0"),
        (lambda: dm.noisy_naive_map(3, 0.1, 0.5, 3, 0, gen()), "N"),
        (lambda: dm.random_patterns(4, 8, gen(), out=np.empty((4, 8))), "out"),
        (lambda: dm.random_patterns(4, 8, gen(), out=np.empty((4, 8), np.float32)), "out"),
        (lambda: dm.parallel_dynamics(np.zeros((3, 4), np.float32), np.ones((4, 1)), 3, 2), "xi"),
        (lambda: dm.parallel_dynamics(np.ones((3, 4)), np.ones((5, 1)), 3, 2), "s0"),
        (lambda: dm.parallel_dynamics(np.ones((3, 4)), 2 * np.ones((4, 1)), 3, 2), "s0"),
        (lambda: dm.parallel_dynamics(np.ones((3, 4)), np.ones((4, 1)), 3, 2, target=3), "target"),
        (lambda: dm.simulate_dam(16, 3, 0.1, 0.5, 2, gen(), runs=0), "runs"),
        (lambda: dm.finite_size_fit([256, 256], [0.9, 0.9], [0.1, 0.1]), "N"),
        (lambda: dm.finite_size_fit([256, 512], [0.9, 0.9], [0.1, 0.0]), "se"),
        (lambda: dm.finite_size_fit([256, 512], [0.9], [0.1, 0.1]), "mean"),
    ],
)
def test_bad_input_raises_value_error_naming_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_bad_types_raise_type_error():
    with pytest.raises(TypeError, match="rng"):
        dm.simulate_dam(16, 3, 0.1, 0.5, 2, 0)
    with pytest.raises(TypeError, match="n"):
        dm.kh_field(np.ones((2, 3)), np.ones(3), 3.0)
    with pytest.raises(TypeError, match="r"):
        dm.bivariate_moment(2.0, 0.1)
    with pytest.raises(TypeError, match="xi"):
        dm.parallel_dynamics(np.ones((3, 4), dtype=int), np.ones((4, 1)), 3, 2)
    with pytest.raises(TypeError, match="target"):
        dm.parallel_dynamics(np.ones((3, 4)), np.ones((4, 1)), 3, 2, target=0.5)
