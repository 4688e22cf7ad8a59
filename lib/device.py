"""Device choice for heavy computation: the GPU when one is present, the CPU otherwise."""

from __future__ import annotations


def default_device(prefer: str | None = None):
    """Return a ``torch.device``: ``cuda`` if available, else ``cpu``.

    Parameters
    ----------
    prefer : {"cuda", "cpu", None}
        Force a device; ``"cuda"`` raises ``ValueError`` when no GPU is present.
    """
    import torch

    if prefer is not None and prefer not in ("cuda", "cpu"):
        raise ValueError(f"prefer must be 'cuda', 'cpu' or None, got {prefer!r}")
    if prefer == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda")
    if prefer == "cuda":
        raise ValueError("prefer='cuda' but no CUDA device is available")
    return torch.device("cpu")
