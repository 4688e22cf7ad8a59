"""Tests of the common helpers: scale, seed, claims, stats, plotting, device."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lib import claims, plotting, records, scale, seed, stats
from lib.device import default_device


# ----------------------------------------------------------------------------- scale
def test_scale_default_is_quick():
    assert scale.scale_name({}) == "quick"
    assert scale.scale_name({"BOOK_SCALE": " FULL "}) == "full"


def test_scale_rejects_unknown():
    with pytest.raises(ValueError, match="BOOK_SCALE"):
        scale.scale_name({"BOOK_SCALE": "huge"})


def test_sizes_picks_scale_and_is_read_only():
    q, f = {"n": 10}, {"n": 1000}
    assert scale.sizes(q, f, env={})["n"] == 10
    assert scale.sizes(q, f, env={"BOOK_SCALE": "full"})["n"] == 1000
    with pytest.raises(TypeError):
        scale.sizes(q, f, env={})["n"] = 3


def test_sizes_bad_input():
    with pytest.raises(ValueError, match="same keys"):
        scale.sizes({"n": 1}, {"m": 1}, env={})
    with pytest.raises(TypeError, match="quick"):
        scale.sizes([1], {"n": 1}, env={})


# ----------------------------------------------------------------------------- seed
def test_book_seed_parsing():
    assert seed.book_seed({}) == 0
    assert seed.book_seed({"BOOK_SEED": "7"}) == 7
    for bad in ("x", "-1", "1.5"):
        with pytest.raises(ValueError, match="BOOK_SEED"):
            seed.book_seed({"BOOK_SEED": bad})


def test_rng_streams_reproducible_and_distinct():
    a = seed.rng("07", "rates", 3, env={"BOOK_SEED": "1"}).random(5)
    b = seed.rng("07", "rates", 3, env={"BOOK_SEED": "1"}).random(5)
    c = seed.rng("07", "rates", 4, env={"BOOK_SEED": "1"}).random(5)
    d = seed.rng("07", "rates", 3, env={"BOOK_SEED": "2"}).random(5)
    assert np.array_equal(a, b)
    assert not np.allclose(a, c) and not np.allclose(a, d)


def test_rng_bad_labels():
    with pytest.raises(TypeError, match="stream labels"):
        seed.rng(1.5)
    with pytest.raises(ValueError, match="non-negative"):
        seed.rng(-3)


def test_torch_generator_reproducible():
    import torch

    g1 = seed.torch_generator("x", env={"BOOK_SEED": "5"})
    g2 = seed.torch_generator("x", env={"BOOK_SEED": "5"})
    assert torch.equal(torch.rand(4, generator=g1), torch.rand(4, generator=g2))


# ----------------------------------------------------------------------------- claims
@pytest.fixture
def ledger(tmp_path, monkeypatch):
    monkeypatch.setenv("BOOK_LEDGER_DIR", str(tmp_path))
    return tmp_path


def test_claim_pass_records(ledger):
    r = claims.claim(
        "00/test/pass", "x is in range", 0.5, claims.within(0, 1), kind="evidence", display=False
    )
    assert r.passed
    rec = json.loads((ledger / "00__test__pass.json").read_text())
    assert rec["verdict"] == "pass" and rec["chapter"] == "00" and rec["measured"] == 0.5
    assert claims.load_records(ledger)[0]["id"] == "00/test/pass"


def test_claim_failure_raises_with_id_measurement_and_criterion(ledger):
    with pytest.raises(AssertionError) as err:
        claims.claim(
            "00/test/fail",
            "x is small",
            [0.1, 3.0],
            claims.below(1),
            kind="evidence",
            display=False,
        )
    msg = str(err.value)
    assert "00/test/fail" in msg and "3" in msg and "< 1" in msg
    assert json.loads((ledger / "00__test__fail.json").read_text())["verdict"] == "FAIL"


def test_claim_with_a_long_array_records_its_range(ledger):
    r = claims.claim(
        "00/test/long",
        "many values",
        np.linspace(1, 2, 100),
        claims.above(0),
        kind="evidence",
        display=False,
    )
    rec = json.loads((ledger / "00__test__long.json").read_text())
    assert rec["measured"]["size"] == 100 and rec["measured_text"] == "100 values in [1, 2]"
    assert r.measured_text() == "100 values in [1, 2]"


def test_nan_never_passes(ledger):
    with pytest.raises(AssertionError):
        claims.claim(
            "00/test/nan", "nan", float("nan"), claims.above(-1e300), kind="evidence", display=False
        )


def test_not_reproduced_is_recorded_not_raised(ledger):
    r = claims.claim(
        "00/test/nr",
        "too small a scale",
        5.0,
        claims.below(1),
        not_reproduced="because n is tiny",
        kind="evidence",
        display=False,
    )
    assert r.verdict == claims.NOT_REPRODUCED and not r.passed
    assert "because n is tiny" in r.note


def test_close_to_elementwise():
    c = claims.close_to([1.0, 2.0], rtol=0.1)
    assert list(c.holds(np.array([1.05, 2.5]))) == [True, False]
    assert claims.close_to(0.0, atol=1e-3).holds(np.array(5e-4))


def test_claim_bad_input(ledger):
    with pytest.raises(ValueError, match="claim_id"):
        claims.claim("bad id", "s", 1.0, claims.above(0), kind="evidence")
    with pytest.raises(ValueError, match="statement"):
        claims.claim("00/a", " ", 1.0, claims.above(0), kind="evidence")
    with pytest.raises(TypeError, match="criterion"):
        claims.claim("00/a", "s", 1.0, (0, 1), kind="evidence")
    with pytest.raises(TypeError, match="measured"):
        claims.claim("00/a", "s", "one", claims.above(0), kind="evidence")
    with pytest.raises(ValueError, match="empty"):
        claims.claim("00/a", "s", [], claims.above(0), kind="evidence")
    with pytest.raises(TypeError, match="kind is required"):
        claims.claim("00/a", "s", 1.0, claims.above(0))
    with pytest.raises(ValueError, match="kind must be one of"):
        claims.claim("00/a", "s", 1.0, claims.above(0), kind="proof")
    with pytest.raises(TypeError, match="kind must be a string"):
        claims.claim("00/a", "s", 1.0, claims.above(0), kind=1)
    with pytest.raises(ValueError, match="lo must be <= hi"):
        claims.within(2, 1)
    with pytest.raises(ValueError, match="rtol"):
        claims.close_to(1.0)
    with pytest.raises(TypeError, match="threshold"):
        claims.above("1")


def test_claim_html_row_carries_id_and_kind():
    r = claims.ClaimResult("07/a/b", "s", 1.0, "> 0", "pass", 1, 0, kind="consistency")
    html = r._repr_html_()
    assert records.row_marker("07/a/b") in html and "consistency" in html
    assert records.ROW_RE.findall(html) == ["07/a/b"]


def test_record_follows_the_contract(ledger):
    claims.claim("00/test/kinds", "k", 1.0, claims.above(0), kind="sanity", display=False)
    (rec,) = records.load_records(ledger)
    assert tuple(rec) == records.RECORD_FIELDS and rec["kind"] == "sanity"
    assert records.ledger_dir() == ledger
    with pytest.raises(ValueError, match="contract"):
        records.write_record({"id": "00/x"}, ledger)


def test_ledger_dir_default_and_env(tmp_path):
    assert records.ledger_dir({}) == records.ROOT / "_build" / "ledger"
    assert records.ledger_dir({"BOOK_LEDGER_DIR": str(tmp_path)}) == tmp_path
    assert records.executed_dir(tmp_path) == tmp_path / "_build" / "executed"


def test_clear_records_by_chapter(ledger):
    for cid in ("01/a", "01/b", "07/a"):
        claims.claim(cid, "s", 1.0, claims.above(0), kind="evidence", display=False)
    assert records.clear_records({"01"}, ledger) == 2
    assert [r["id"] for r in records.load_records(ledger)] == ["07/a"]


# ----------------------------------------------------------------------------- stats
@settings(max_examples=40, deadline=None)
@given(slope=st.floats(-3, 3), logc=st.floats(-5, 5))
def test_loglog_slope_recovers_power_law(slope, logc):
    x = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    fit = stats.loglog_slope(x, np.exp(logc) * x**slope)
    assert fit.slope == pytest.approx(slope, abs=1e-9)
    assert fit.ci_low <= slope + 1e-9 and fit.ci_high >= slope - 1e-9


def test_loglog_slope_ci_covers_truth_at_nominal_rate():
    rng = np.random.default_rng(0)
    x = np.geomspace(10, 1000, 6)
    covered = 0
    for _ in range(400):
        y = 2.0 * x**-0.5 * np.exp(0.1 * rng.standard_normal(x.size))
        fit = stats.loglog_slope(x, y, level=0.9)
        covered += fit.ci_low <= -0.5 <= fit.ci_high
    assert 0.85 <= covered / 400 <= 0.95


def test_loglog_slope_bad_input():
    with pytest.raises(ValueError, match="positive"):
        stats.loglog_slope([1, 2, 3], [1, -1, 2])
    with pytest.raises(ValueError, match="at least 3"):
        stats.loglog_slope([1, 2], [1, 2])
    with pytest.raises(ValueError, match="same shape"):
        stats.loglog_slope([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="level"):
        stats.loglog_slope([1, 2, 3], [1, 2, 3], level=1.5)


def test_mc_mean_matches_numpy():
    a = np.random.default_rng(1).normal(size=(50, 3))
    m, se = stats.mc_mean(a)
    assert np.allclose(m, a.mean(0))
    assert np.allclose(se, a.std(0, ddof=1) / np.sqrt(50))
    with pytest.raises(ValueError, match="at least 2"):
        stats.mc_mean([1.0])
    with pytest.raises(ValueError, match="axis"):
        stats.mc_mean(a, axis=4)


# ----------------------------------------------------------------------------- plotting, device
def test_book_style_white_background():
    import matplotlib

    matplotlib.use("Agg")
    plotting.use_book_style()
    assert matplotlib.rcParams["figure.facecolor"] == "white"
    assert matplotlib.rcParams["lines.linewidth"] == 2.0


def test_slope_guide_draws_power_law():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    (line,) = plotting.slope_guide(ax, [1, 10, 100], -0.5, (1, 2.0))
    assert np.allclose(line.get_ydata(), [2.0, 2.0 / np.sqrt(10), 0.2])
    with pytest.raises(ValueError, match="positive"):
        plotting.slope_guide(ax, [1, 10], -0.5, (0, 1))
    plt.close(fig)


def test_default_device_is_cpu_or_cuda():
    import torch

    dev = default_device()
    assert dev.type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert default_device("cpu").type == "cpu"
    with pytest.raises(ValueError, match="prefer"):
        default_device("tpu")


def test_progress_is_quiet_at_quick_scale_and_a_bar_at_full():
    from lib.scale import progress

    items = [1, 2, 3]
    assert progress(items, env={"BOOK_SCALE": "quick"}) is items
    bar = progress(items, "x", env={"BOOK_SCALE": "full"})
    assert list(bar) == items and hasattr(bar, "update")


def test_torch_seeded_is_reproducible_and_leaves_global_state_alone():
    import torch

    before = torch.random.get_rng_state()
    with seed.torch_seeded("x", env={"BOOK_SEED": "3"}):
        a = torch.nn.Linear(3, 2).weight.detach().clone()
    assert torch.equal(torch.random.get_rng_state(), before)
    with seed.torch_seeded("x", env={"BOOK_SEED": "3"}):
        b = torch.nn.Linear(3, 2).weight.detach().clone()
    with seed.torch_seeded("x", env={"BOOK_SEED": "4"}):
        c = torch.nn.Linear(3, 2).weight.detach().clone()
    with seed.torch_seeded(seed=7):
        d = torch.nn.Linear(3, 2).weight.detach().clone()
    assert torch.equal(a, b) and not torch.equal(a, c) and not torch.equal(a, d)
    with pytest.raises(ValueError, match="stream"):
        with seed.torch_seeded():
            pass
    with pytest.raises(ValueError, match="not both"):
        with seed.torch_seeded("x", seed=1):
            pass
    with pytest.raises(ValueError, match="seed must be"):
        with seed.torch_seeded(seed=-1):
            pass
