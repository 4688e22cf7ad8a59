"""The seed sweep on Dask (lib.sphinxext.sweep): a tiny sweep on a two-worker LocalCluster.

A probe notebook passes at seed 0 and fails at seed 1; the sweep must record the claims of
each seed, record the failure without stopping, and summarise each claim's robustness as the
ledger shows it. A worker killed mid-task must be replaced and its task rerun.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from lib.sphinxext import sweep as sw

DATA = Path(__file__).resolve().parent / "data"
PROBE, SLOW = DATA / "sweep_probe.md", DATA / "sweep_slow.md"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    distributed = pytest.importorskip("distributed")
    marker = tmp_path_factory.mktemp("sweep") / "runs.txt"
    os.environ["SWEEP_TEST_MARKER"] = str(marker)  # inherited by the workers and their kernels
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    c = distributed.Client(cluster)
    c.marker = marker
    yield c
    c.close()
    cluster.close()
    os.environ.pop("SWEEP_TEST_MARKER", None)


def test_parse_seeds():
    assert sw.parse_seeds("0-3") == [0, 1, 2, 3]
    assert sw.parse_seeds("5, 1,2-3") == [1, 2, 3, 5]
    for bad in ("", "a", "3-1", "1;2"):
        with pytest.raises(ValueError, match="seeds"):
            sw.parse_seeds(bad)


def test_robustness_text():
    ok = {"verdict": "pass", "n_failing": 0}
    assert sw.robustness("x", {}, [])["text"] == "not swept"
    assert sw.robustness("x", {0: ok, 1: ok}, [0, 1])["text"] == "seeds: 2/2"
    r = sw.robustness("x", {0: ok, 1: {"verdict": "FAIL"}, 2: ok}, [0, 1, 2, 3])
    assert r["text"] == "seeds: 2/4 (fails at 1; not reached at 3)" and r["failing"] == [1, 3]
    nr = {"verdict": "not reproduced", "n_failing": 1}
    assert sw.robustness("x", {0: nr, 1: nr}, [0, 1])["text"].startswith("not reproduced at 2/2")


def test_tiny_sweep_records_each_seed_and_the_failure(client, tmp_path):
    results = sw.sweep([PROBE], [0, 1], root=tmp_path, client=client, progress=False)
    by_seed = {r["seed"]: r for r in results}
    assert by_seed[0]["error"] is None
    assert "00/sweep/seed-zero" in by_seed[1]["error"] or "AssertionError" in by_seed[1]["error"]
    ids0 = {r["id"] for r in by_seed[0]["records"]}
    ids1 = {r["id"]: r["verdict"] for r in by_seed[1]["records"]}
    assert ids0 == {"00/sweep/always", "00/sweep/seed-zero", "00/sweep/after"}
    assert ids1 == {"00/sweep/always": "pass", "00/sweep/seed-zero": "FAIL"}
    assert all(r["seed"] == 1 for r in by_seed[1]["records"])

    claims_dir = sw.sweep_dir("quick", tmp_path) / "claims"
    assert sorted(p.name for p in (claims_dir / "00__sweep__always").iterdir()) == [
        "seed-0.json",
        "seed-1.json",
    ]
    table = sw.robustness_table("quick", tmp_path)
    assert table["00/sweep/always"]["text"] == "seeds: 2/2"
    assert table["00/sweep/seed-zero"]["text"] == "seeds: 1/2 (fails at 1)"
    assert table["00/sweep/after"]["text"] == "seeds: 1/2 (not reached at 1)"


def test_a_killed_worker_is_replaced_and_its_task_rerun(client):
    marker = client.marker
    marker.write_text("")
    fut = client.submit(sw.run_notebook, str(SLOW), 0, "quick", pure=False, key="slow-probe")
    # wait until the notebook is running (its first line written), then kill its worker
    deadline = time.time() + 120
    while time.time() < deadline and not marker.read_text().split():
        time.sleep(0.1)
    assert marker.read_text().split(), "the notebook never started"
    addr = next((a for a, keys in client.processing().items() if keys), None)
    assert addr is not None, "no worker is processing the task"
    pid = client.run(os.getpid, workers=[addr])[addr]
    os.kill(pid, signal.SIGKILL)
    res = fut.result(timeout=240)
    assert res["error"] is None
    assert [r["id"] for r in res["records"]] == ["00/sweep/slow"]
    starts = marker.read_text().split()
    assert len(starts) == 2, f"expected the notebook to start twice (killed, then rerun): {starts}"


def test_worker_count_from_the_environment_is_validated(monkeypatch):
    from lib.sphinxext import sweep as sw

    monkeypatch.setenv("BOOK_SWEEP_WORKERS", "zero")
    with pytest.raises(ValueError, match="BOOK_SWEEP_WORKERS"):
        sw._client(None, 4)


def _probe_tree(tmp_path: Path) -> Path:
    """A book with one chapter (00) whose notebook is the probe; ``lib`` is this repo's."""
    root = tmp_path / "tree"
    (root / "book" / "00-probe").mkdir(parents=True)
    (root / "lib").symlink_to(Path(sw.ROOT) / "lib")
    (root / "book" / "00-probe" / "probe.md").write_text(PROBE.read_text())
    return root


def test_publish_keys_each_chapter_by_its_code(client, tmp_path):
    from lib.sphinxext.cache import result_stamps

    root = _probe_tree(tmp_path)
    nb = root / "book" / "00-probe" / "probe.md"
    stamps = result_stamps(root, "quick")
    sw.sweep([nb], [0, 1], root=root, client=client, progress=False, stamps=stamps)
    # resuming reruns only what did not run cleanly at this code (seed 1 fails)
    again = sw.sweep(
        [nb], [0, 1], root=root, client=client, progress=False, stamps=stamps, skip_done=True
    )
    assert [r["seed"] for r in again] == [1]
    out = sw.publish("quick", ["00"], root=root)
    assert out["published"] == ["00"], out
    data = sw.load_published("quick", root)
    entry = data["chapters"]["00"]
    assert entry["stamp"] == stamps["00"] and entry["seeds"] == [0, 1]
    assert entry["claims"]["00/sweep/seed-zero"]["verdict"] == {"0": "pass", "1": "FAIL"}
    assert entry["claims"]["00/sweep/after"]["verdict"] == {"0": "pass", "1": "not reached"}
    recs = [{"id": cid, "chapter": "00", "scale": "quick"} for cid in entry["claims"]]
    robust, state = sw.published_robustness(recs, root=root)
    assert state["00"]["state"] == "current"
    assert robust["00/sweep/always"]["text"] == "2/2 seeds (0, 1); measured 1"
    assert robust["00/sweep/seed-zero"]["failing"] == [1]
    assert "not reached at 1" in robust["00/sweep/after"]["text"]

    # a formatting-only edit keeps the sweep current; a change of code makes it stale
    nb.write_text(nb.read_text().replace("above(0), kind", "above(0),  kind"))
    assert sw.published_robustness(recs, root=root)[1]["00"]["state"] == "current"
    nb.write_text(nb.read_text().replace("1.0, above(0)", "2.0, above(0)"))
    robust, state = sw.published_robustness(recs, root=root)
    assert state["00"]["state"] == "stale"
    assert robust["00/sweep/always"]["text"].startswith("sweep stale")
    # publishing again without a sweep of the new code keeps the old entry, marked stale
    assert sw.publish("quick", ["00"], root=root)["published"] == []
    assert sw.load_published("quick", root)["chapters"]["00"]["stamp"] == stamps["00"]
