"""Collect the book's MyST notebooks for nbval, without committing any .ipynb.

With ``--nbval-lax`` (or ``--nbval``), every ``.md`` file under ``book/`` whose
front matter is a jupytext header becomes an nbval notebook: it is read through
jupytext and run cell by cell in a fresh kernel started in the notebook's own folder.
When all cells of a notebook pass, its outputs are saved under
:func:`lib.records.executed_dir` (``_build/executed/<path>.ipynb``) so that the book build
can reuse them instead of executing the notebook a second time (see
``lib/sphinxext/cache.py``).
"""

from __future__ import annotations

import time
from pathlib import Path
from unittest import mock

import pytest

from lib.records import executed_dir
from lib.sphinxext.cache import is_myst_notebook as _is_myst_notebook

ROOT = Path(__file__).resolve().parent

try:  # nbval is part of the stack; without it there is simply nothing to collect
    import nbval.plugin as _nbval
except ImportError:  # pragma: no cover
    _nbval = None


if _nbval is not None:

    class MystNotebook(_nbval.IPyNbFile):
        """An nbval notebook read from a MyST markdown file through jupytext."""

        def collect(self):
            import jupytext

            nb = jupytext.read(self.path)
            self._book_started = None
            self._book_outputs = {}
            self._book_seconds = 0.0
            with mock.patch.object(_nbval.nbformat, "read", lambda *a, **k: nb):
                yield from super().collect()

        def setup(self):
            # Two pytest-xdist workers start kernels at the same moment; jupyter_client picks
            # free ports by binding and releasing them, so both can pick the same port and one
            # kernel dies at startup ("Kernel died before replying to kernel_info", seen once
            # in CI). That is the launcher's race, not the notebook's: start again, at most
            # twice more, after a short pause.
            for attempt in range(3):
                try:
                    super().setup()
                    break
                except RuntimeError as err:
                    if "Kernel died" not in str(err) or attempt == 2:
                        raise
                    time.sleep(1.0 + attempt)
            kc = self.kernel.kc

            # nbval executes with store_history=False, which makes IPython ignore a trailing
            # ';' (it looks the cell up in its history). Run cells as Jupyter and the book
            # build do, so that the outputs match theirs.
            def execute_cell_input(cell_input, allow_stdin=None):
                return kc.execute(
                    cell_input, store_history=True, allow_stdin=allow_stdin, stop_on_error=False
                )

            self.kernel.execute_cell_input = execute_cell_input

    def pytest_collect_file(file_path, parent):
        opt = parent.config.option
        if not (getattr(opt, "nbval", False) or getattr(opt, "nbval_lax", False)):
            return None
        if file_path.suffix != ".md" or "_build" in file_path.parts or ".venv" in file_path.parts:
            return None
        if not _is_myst_notebook(file_path):
            return None
        return MystNotebook.from_parent(parent, path=file_path)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        outcome = yield
        report = outcome.get_result()
        nbfile = getattr(item, "parent", None)
        if call.when != "call" or not isinstance(nbfile, MystNotebook):
            return
        if report.passed and item.test_outputs is not None:
            nbfile._book_outputs[item.cell_num] = list(item.test_outputs)
            nbfile._book_seconds += report.duration
        n_code = sum(c.cell_type == "code" for c in nbfile.nb.cells)
        if len(nbfile._book_outputs) == n_code:
            _save_executed(nbfile, n_code)

    def _kernel_usage(nbfile) -> dict:
        """CPU seconds and peak resident memory of the notebook's kernel so far (Linux
        ``/proc``; empty where unavailable). CPU time is the budget's "one core" measure and,
        unlike wall time, hardly depends on what else the machine runs."""
        import os

        try:
            pid = nbfile.kernel.km.provisioner.process.pid
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks = os.sysconf("SC_CLK_TCK")
            cpu = (int(stat[11]) + int(stat[12])) / ticks  # utime + stime
            hwm = next(
                int(line.split()[1])
                for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                if line.startswith("VmHWM:")
            )
        except (AttributeError, OSError, StopIteration, ValueError, IndexError):
            return {}
        return {"cpu_seconds": round(cpu, 2), "peak_rss_gib": round(hwm / 2**20, 3)}

    def _save_executed(nbfile, n_code):
        import copy

        import nbformat

        nb = copy.deepcopy(nbfile.nb)
        k = 0
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            cell.outputs = nbfile._book_outputs[k]
            cell.execution_count = k + 1
            for out in cell.outputs:
                if out.get("output_type") == "execute_result":
                    out["execution_count"] = k + 1
                    out.setdefault("metadata", {})
                if out.get("output_type") == "display_data":
                    out.setdefault("metadata", {})
            k += 1
        nb.metadata["book_execution"] = {
            "seconds": round(nbfile._book_seconds, 3),
            "finished": time.time(),
            "by": "nbval",
            **_kernel_usage(nbfile),
        }
        rel = Path(nbfile.path).resolve().relative_to(ROOT)
        out = executed_dir(ROOT) / rel.with_suffix(".ipynb")
        out.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(out))
