"""Unit tests for lib.rank_one_dynamics (chapter 19), following section (g) of the brief."""

import numpy as np
import pytest

from lib.papers import rank_one_dynamics as rd


def gen(seed=0):
    return np.random.default_rng(seed)


# --------------------------------------------------------------------------- MP transform
@pytest.mark.parametrize("c", [0.3, 0.75, 2.0])
def test_mp_stieltjes_solves_quadratic_and_is_herglotz(c):
    z = np.array([0.5 + 0.3j, -2 + 0.01j, 3 + 1j, 10 + 5j, 1.0 + 1e-3j])
    m = rd.mp_stieltjes(z, c)
    assert np.allclose(c * z * m**2 + (z + c - 1) * m + 1, 0, atol=1e-12)
    assert np.all(m.imag > 0)
    big = 1e6 + 1e6j
    assert abs(rd.mp_stieltjes(big, c) * big + 1) < 1e-5  # m ~ -1/z


@pytest.mark.parametrize("c", [0.3, 0.75, 2.0, 4.0])
def test_mp_density_mass(c):
    from scipy.integrate import quad

    em, ep = rd.mp_edges(c)
    mass, _ = quad(lambda x: rd.mp_density(np.array([x]), c)[0], em, ep, limit=200)
    assert mass == pytest.approx(1 - max(0.0, 1 - 1 / c), abs=1e-7)


def test_spiked_transforms_match_finite_resolvent():
    # independent check of the Woodbury formulas: one large sample, z away from the spectrum
    p, n, lam = 1200, 1600, 1.3
    X, a, b = rd.sample_spiked(p, n, lam, gen(1))
    z = -0.7 + 0.9j
    R = np.linalg.inv(X @ X.T - z * np.eye(p))
    Rt = np.linalg.inv(X.T @ X - z * np.eye(n))
    s = rd.spiked_transforms(z, p / n, lam)
    assert abs(a @ R @ a - s["uu"]) < 0.03
    assert abs(b @ Rt @ b - s["vv"]) < 0.03
    assert abs(a @ R @ X @ b - s["uv"]) < 0.03
    assert abs(np.trace(R) / p - s["mu"]) < 0.01


# --------------------------------------------------------------------------- atoms and integrals
@pytest.mark.parametrize("c", [0.5, 2.0])
def test_outlier_threshold(c):
    thr = c**0.25
    assert rd.outlier(c, thr) is None
    assert rd.outlier(c, 0.9 * thr) is None
    theta, wu2, wv2 = rd.outlier(c, 1.1 * thr)
    assert theta > rd.mp_edges(c)[1]
    assert 0 < wu2 < 1 and 0 < wv2 < 1
    assert rd.bbp_overlaps(c, 0.5 * thr) == (0.0, 0.0)


def test_strong_signal_gives_perfect_overlap():
    qu, qv = rd.large_time_limit(0.75, 1e3, 0.3, 0.2)
    assert qu == pytest.approx(1, abs=1e-5) and qv == pytest.approx(1, abs=1e-5)


@pytest.mark.parametrize("c,lam", [(0.75, 1.5), (0.75, 0.4), (2.0, 1.5)])
def test_spectral_integral_methods_agree(c, lam):
    for which in rd.MEASURES:
        a = rd.spectral_integral(
            lambda z: np.exp(0.7 * z), which, c, lam, method="contour", n_nodes=2048
        )
        b = rd.spectral_integral(lambda x: np.exp(0.7 * x), which, c, lam, method="quadrature")
        assert a == pytest.approx(b, rel=1e-10)


def test_residue_and_zero_atoms():
    c, lam = 0.5, 1.2
    theta, wu2, _ = rd.outlier(c, lam)
    assert rd.residue("uu", c, lam, theta, radius=0.1) == pytest.approx(wu2, abs=1e-10)
    em = rd.mp_edges(c)[0]
    assert rd.residue("vv", c, lam, 0.0, radius=em / 2) == pytest.approx(
        rd.zero_atoms(c, lam)["vv"], abs=1e-10
    )
    assert rd.zero_atoms(2.0, lam)["uu"] > 0 and rd.zero_atoms(2.0, lam)["vv"] == 0
    with pytest.raises(ValueError, match="radius"):
        rd.residue("uu", c, lam, theta, radius=0.0)


# --------------------------------------------------------------------------- finite-n dynamics
def test_init_with_overlap_exact():
    g = gen(2)
    w = rd._unit(g.standard_normal(50))
    w0 = rd.init_with_overlap(w, -0.37, g)
    assert np.linalg.norm(w0) == pytest.approx(1, abs=1e-14)
    assert w0 @ w == pytest.approx(-0.37, abs=1e-14)


def test_sample_spiked_shapes_and_scaling():
    X, u, v = rd.sample_spiked(200, 400, 0.0, gen(3))
    assert X.shape == (200, 400)
    assert np.linalg.norm(u) == pytest.approx(1) and np.linalg.norm(v) == pytest.approx(1)
    assert np.var(X) * 400 == pytest.approx(1, abs=0.02)  # Var Z_ij = 1/n
    assert np.all(v >= 0)  # Bernoulli direction
    for noise in ("rademacher", "student5"):
        X, _, _ = rd.sample_spiked(200, 400, 0.0, gen(4), noise=noise)
        assert np.var(X) * 400 == pytest.approx(1, abs=0.05)


def test_exact_flow_at_zero_and_unit_norms():
    X, u, v = rd.sample_spiked(30, 40, 1.5, gen(5))
    u0, v0 = rd.init_with_overlap(u, 0.3, gen(6)), rd.init_with_overlap(v, 0.2, gen(7))
    f = rd.exact_flow(X, u0, v0, [0.0, 1.0, 50.0], u, v, return_vectors=True)
    assert np.allclose(f["u"][0], u0) and np.allclose(f["v"][0], v0)
    assert np.allclose(np.linalg.norm(f["u"], axis=1), 1) and np.allclose(
        np.linalg.norm(f["v"], axis=1), 1
    )
    # at large t the flow sits at the top singular pair, with u^T X v = s_max
    assert f["obj"][-1] == pytest.approx(np.linalg.norm(X, 2), rel=1e-10)


def test_exact_flow_reuses_a_given_svd():
    X, u, v = rd.sample_spiked(30, 40, 1.5, gen(5))
    u0, v0 = rd.init_with_overlap(u, 0.3, gen(6)), rd.init_with_overlap(v, 0.2, gen(7))
    ts = [0.0, 1.0, 5.0]
    a = rd.exact_flow(X, u0, v0, ts, u, v)
    b = rd.exact_flow(X, u0, v0, ts, u, v, svd=np.linalg.svd(X, full_matrices=False))
    for key in ("qu", "qv", "obj"):
        assert np.array_equal(a[key], b[key])
    assert a["s_max"] == pytest.approx(np.linalg.norm(X, 2), rel=1e-12)
    with pytest.raises(ValueError, match="svd"):
        rd.exact_flow(X, u0, v0, ts, u, v, svd=np.linalg.svd(X.T, full_matrices=False))


def test_exact_flow_linear_norms_are_equal():
    # prop-19-linear: |y_u| = |y_v| along the linear flow, also at large t after the
    # e^{-t s_max} rescaling (sanity claim 19/prop-linear/equal-norms)
    for p, n in ((30, 40), (50, 20)):
        X, u, v = rd.sample_spiked(p, n, 1.5, gen(13))
        u0, v0 = rd.init_with_overlap(u, 0.3, gen(14)), rd.init_with_overlap(v, -0.2, gen(15))
        f = rd.exact_flow(X, u0, v0, np.linspace(0.0, 50.0, 26), u, v)
        assert np.max(np.abs(f["norm_gap"])) < 1e-12


def test_flow_rhs_is_tangent():
    X, u, v = rd.sample_spiked(10, 12, 1.0, gen(8))
    r = rd.flow_rhs(X)(0.0, np.concatenate([u, v]))
    assert abs(r[:10] @ u) < 1e-12 and abs(r[10:] @ v) < 1e-12


def test_riemannian_gd_unit_norms_and_one_step():
    X, u, v = rd.sample_spiked(20, 30, 1.5, gen(9))
    u0, v0 = rd.init_with_overlap(u, 0.1, gen(10)), rd.init_with_overlap(v, 0.1, gen(11))
    out = rd.riemannian_gd(X, u0, v0, 0.1, 1, u, v)
    o = u0 @ X @ v0
    u1 = u0 + 0.1 * (X @ v0 - o * u0)
    assert out["qu"][1] == pytest.approx(u1 @ u / np.linalg.norm(u1), abs=1e-14)
    out = rd.riemannian_gd(X, u0, v0, 0.05, 200, u, v, record_every=50)
    assert out["t"].tolist() == pytest.approx([0, 2.5, 5, 7.5, 10])
    assert np.linalg.norm(out["u"]) == pytest.approx(1) and np.linalg.norm(
        out["v"]
    ) == pytest.approx(1)


# --------------------------------------------------------------------------- deterministic curves
def test_curves_at_time_zero():
    d = rd.deterministic_curves([0.0], 0.75, 1.5, 0.3, -0.2)
    assert d["qu"][0] == pytest.approx(0.3, abs=1e-12)
    assert d["qv"][0] == pytest.approx(-0.2, abs=1e-12)
    assert d["obj"][0] == pytest.approx(
        1.5 * 0.3 * -0.2, abs=1e-12
    )  # u^T X v -> lam alpha_u alpha_v


@pytest.mark.parametrize("c,lam", [(0.75, 1.5), (0.75, 0.3), (2.0, 1.5)])
def test_curves_match_contour_evaluation(c, lam):
    # second implementation: the formula of Theorem 1 term by term, by contour integrals of l1..l4
    au, av, t = 0.3, 0.2, 1.7
    ch = lambda z, k=1: np.cosh(k * t * np.sqrt(z + 0j))
    l3 = lambda z: np.sinh(t * np.sqrt(z + 0j)) / np.sqrt(z + 0j)  # contour nodes avoid z = 0
    l2 = lambda z: np.sinh(2 * t * np.sqrt(z + 0j)) / (2 * np.sqrt(z + 0j))
    I = lambda f, w: rd.spectral_integral(f, w, c, lam, method="contour", n_nodes=4096)
    qu = au * I(ch, "uu") + av * I(l3, "uv")
    qv = av * I(ch, "vv") + au * I(l3, "uv")
    ph = (
        au**2 * I(lambda z: (1 + ch(z, 2)) / 2, "uu")
        + (1 - au**2) * I(lambda z: (1 + ch(z, 2)) / 2, "mu")
        + 2 * au * av * I(l2, "uv")
        + av**2 * I(lambda z: (ch(z, 2) - 1) / 2, "vv")
        + (1 - av**2) * I(lambda z: (ch(z, 2) - 1) / 2, "mut")
    )
    d = rd.deterministic_curves([t], c, lam, au, av)
    assert d["qu"][0] == pytest.approx(qu / np.sqrt(ph), rel=1e-9)
    assert d["qv"][0] == pytest.approx(qv / np.sqrt(ph), rel=1e-9)
    assert d["log_p"][0] == pytest.approx(np.log(ph), rel=1e-9)


def test_sign_rule_and_critical_alpha():
    c, lam, av = 0.75, 1.5, 0.4
    au = rd.critical_alpha_u(c, lam, av)
    assert rd.sign_bracket(c, lam, au, av) == pytest.approx(0, abs=1e-14)
    assert rd.large_time_limit(c, lam, au + 0.1, av)[0] > 0
    assert rd.large_time_limit(c, lam, au - 0.1, av)[0] < 0
    with pytest.raises(ValueError, match="alpha_u"):
        rd.critical_alpha_u(4.0, 0.1, 0.9)


def test_sign_of_curve_at_40_follows_the_bracket():
    # thm-19-bbp: kappa_+ = sqrt(lam^4 - c)/lam * bracket, and at t = 40 the bulk is negligible,
    # so sign q~_u(40) = sign of the bracket (sanity claim 19/thm-2/sign-rule)
    c, lam = 0.75, 1.5
    _, wu2, wv2 = rd.outlier(c, lam)
    g = gen(16)
    tried = 0
    while tried < 10:
        au, av = g.uniform(-1, 1, size=2)
        bracket = rd.sign_bracket(c, lam, au, av)
        if abs(bracket) <= 0.05:
            continue
        tried += 1
        kappa = au * np.sqrt(wu2) + av * np.sqrt(wv2)
        assert kappa == pytest.approx(np.sqrt(lam**4 - c) / lam * bracket, rel=1e-12)
        qu40 = rd.deterministic_curves([40.0], c, lam, au, av)["qu"][0]
        assert np.sign(qu40) == np.sign(bracket)


def test_early_stopping_time():
    t_hat = rd.early_stopping_time(0.7, 0.75, 1.5, 0.3, 0.2, t_max=20.0)
    d = rd.deterministic_curves([t_hat], 0.75, 1.5, 0.3, 0.2)
    assert min(d["qu"][0], d["qv"][0]) == pytest.approx(0.7, abs=1e-8)
    assert (
        rd.early_stopping_time(0.95, 0.75, 1.5, 0.3, 0.2, t_max=20.0) == np.inf
    )  # BBP overlap < 0.95


# --------------------------------------------------------------------------- bad input
def test_bad_input_is_rejected_with_named_argument():
    X, u, v = rd.sample_spiked(10, 12, 1.0, gen(12))
    with pytest.raises(ValueError, match="u0"):
        rd.exact_flow(X, 2 * u, v, [1.0], u, v)
    with pytest.raises(ValueError, match="v0"):
        rd.riemannian_gd(X, u, v[:5], 0.1, 3, u, v)
    with pytest.raises(ValueError, match="alpha_u"):
        rd.deterministic_curves([1.0], 0.75, 1.5, 1.2, 0.2)
    with pytest.raises(ValueError, match="alpha"):
        rd.init_with_overlap(u, -1.5, gen())
    with pytest.raises(ValueError, match="lam"):
        rd.outlier(0.75, -1.0)
    with pytest.raises(ValueError, match="c must"):
        rd.mp_stieltjes(1j, 0.0)
    with pytest.raises(ValueError, match="c must"):
        rd.spiked_transforms(1j, -2.0, 1.0)
    with pytest.raises(TypeError, match="c must"):
        rd.outlier("0.5", 1.0)
    with pytest.raises(ValueError, match="eta"):
        rd.riemannian_gd(X, u, v, -0.1, 3, u, v)
    with pytest.raises(ValueError, match="ts"):
        rd.exact_flow(X, u, v, [-1.0], u, v)
    with pytest.raises(ValueError, match="which"):
        rd.spectral_integral(np.exp, "xy", 0.5, 1.0)
    with pytest.raises(ValueError, match="method"):
        rd.spectral_integral(np.exp, "uu", 0.5, 1.0, method="simpson")
    with pytest.raises(ValueError, match="c != 1"):
        rd.spectral_integral(np.exp, "uu", 1.0, 1.0)
    with pytest.raises(TypeError, match="rng"):
        rd.sample_spiked(5, 5, 1.0, 42)
    with pytest.raises(ValueError, match="noise"):
        rd.sample_spiked(5, 5, 1.0, gen(), noise="cauchy")
    with pytest.raises(ValueError, match="X"):
        rd.flow_rhs(np.ones(3))
    with pytest.raises(ValueError, match="gamma"):
        rd.early_stopping_time(1.5, 0.75, 1.5, 0.3, 0.2, t_max=5.0)
