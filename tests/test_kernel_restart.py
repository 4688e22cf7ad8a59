"""conftest.py restarts an nbval kernel that dies at startup (the port race of two xdist workers
launching kernels at once), at most twice more, and never hides any other error."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _root_conftest():
    spec = importlib.util.spec_from_file_location("book_root_conftest", ROOT / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _notebook(mod, failures, monkeypatch, message="Kernel died before replying to kernel_info"):
    calls = []

    def fake_setup(self):
        calls.append(1)
        if len(calls) <= failures:
            raise RuntimeError(message)
        self.kernel = SimpleNamespace(kc=SimpleNamespace(execute=lambda *a, **k: None))

    monkeypatch.setattr(mod._nbval.IPyNbFile, "setup", fake_setup)
    monkeypatch.setattr(mod.time, "sleep", lambda s: None)
    nb = object.__new__(mod.MystNotebook)
    return nb, calls


@pytest.mark.parametrize("failures", [0, 1, 2])
def test_a_kernel_that_dies_at_startup_is_started_again(monkeypatch, failures):
    mod = _root_conftest()
    nb, calls = _notebook(mod, failures, monkeypatch)
    nb.setup()
    assert len(calls) == failures + 1
    assert callable(nb.kernel.execute_cell_input)


def test_three_deaths_in_a_row_are_reported(monkeypatch):
    mod = _root_conftest()
    nb, calls = _notebook(mod, 3, monkeypatch)
    with pytest.raises(RuntimeError, match="Kernel died"):
        nb.setup()
    assert len(calls) == 3


def test_other_errors_are_not_retried(monkeypatch):
    mod = _root_conftest()
    nb, calls = _notebook(mod, 1, monkeypatch, message="No such kernel named python3")
    with pytest.raises(RuntimeError, match="No such kernel"):
        nb.setup()
    assert len(calls) == 1
