"""The scale knob: ``BOOK_SCALE`` is ``quick`` (default) or ``full``.

Notebooks never read the environment variable themselves; they call :func:`sizes`
with the chapter's two parameter sets and get the one for the current scale.
``quick`` is what CI, Binder and the published book run (each notebook well under
a minute on two CPU cores); ``full`` is closer to the paper and may take hours.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

ENV_VAR = "BOOK_SCALE"
SCALES = ("quick", "full")


def scale_name(env: Mapping[str, str] | None = None) -> str:
    """Return the current scale, ``"quick"`` or ``"full"``.

    Parameters
    ----------
    env : mapping, optional
        Where to look the variable up (defaults to ``os.environ``); useful in tests.
    """
    env = os.environ if env is None else env
    raw = env.get(ENV_VAR, "quick")
    value = raw.strip().lower()
    if value == "":
        value = "quick"
    if value not in SCALES:
        raise ValueError(f"{ENV_VAR} must be one of {SCALES}, got {raw!r}")
    return value


def is_quick(env: Mapping[str, str] | None = None) -> bool:
    """True when the book runs at quick scale."""
    return scale_name(env) == "quick"


def sizes(
    quick: Mapping[str, Any], full: Mapping[str, Any], *, env: Mapping[str, str] | None = None
) -> Mapping[str, Any]:
    """Return the chapter's size parameters for the current scale.

    Parameters
    ----------
    quick, full : mapping
        The parameter sets for the two scales. They must have the same keys, so a
        notebook cannot silently depend on a parameter that one scale lacks.

    Returns
    -------
    A read-only mapping (``quick`` or ``full``).
    """
    for name, value in (("quick", quick), ("full", full)):
        if not isinstance(value, Mapping):
            raise TypeError(
                f"{name} must be a mapping of size parameters, got {type(value).__name__}"
            )
    if set(quick) != set(full):
        diff = sorted(set(quick) ^ set(full))
        raise ValueError(f"quick and full must have the same keys; they differ in {diff}")
    chosen = quick if scale_name(env) == "quick" else full
    return MappingProxyType(dict(chosen))


def progress(iterable, desc: str = "", env: Mapping[str, str] | None = None):
    """``iterable`` wrapped in a tqdm progress bar at full scale.

    Unchanged (quiet) at quick scale.
    """
    if is_quick(env):
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc)
