"""Wall time of each phase of ``make test``, recorded in ``_build/gate-times.json``.

The Makefile wraps every phase (install, lint, unit tests, nbval, Binder, build, browser) in
``$(call timed,PHASE,COMMAND)``, which runs ``python -m lib.sphinxext.gate record PHASE T0``
when the command succeeds. ``make bench`` and the status page read the file.

Usage: ``python -m lib.sphinxext.gate {start,record PHASE T0,show}``.
"""

from __future__ import annotations

import json
import sys
import time

from lib.records import BUILD

TIMES = BUILD / "gate-times.json"


def _load() -> dict:
    try:
        return json.loads(TIMES.read_text())
    except (OSError, json.JSONDecodeError):
        return {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "phases": {}}


def start() -> None:
    """Begin a new record (keeps an install phase timed just before, in the same run)."""
    old = _load()
    keep = {}
    install = old.get("phases", {}).get("install")
    if install is not None and time.time() - old.get("install_at", 0) < 3600:
        keep["install"] = install
    BUILD.mkdir(exist_ok=True)
    TIMES.write_text(
        json.dumps({"started": time.strftime("%Y-%m-%d %H:%M:%S"), "phases": keep}, indent=1)
    )


def record(phase: str, t0: float) -> None:
    data = _load()
    data.setdefault("phases", {})[phase] = round(time.time() - t0, 2)
    if phase == "install":
        data["install_at"] = time.time()
    BUILD.mkdir(exist_ok=True)
    TIMES.write_text(json.dumps(data, indent=1))


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["start"]:
        start()
    elif len(argv) == 3 and argv[0] == "record":
        record(argv[1], float(argv[2]))
    elif argv == ["show"]:
        print(json.dumps(_load(), indent=1))
    else:
        raise SystemExit("usage: python -m lib.sphinxext.gate {start,record PHASE T0,show}")


if __name__ == "__main__":
    main()
