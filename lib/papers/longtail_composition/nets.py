r"""Small networks for the composition experiment of chapter 13 (torch).

Paper: M. Zhou, H. Ma, R. Ge, *Memorizing Long-tail Data Can Help Generalization Through
Composition*, ICLR 2026 (arXiv:2510.16322). Chapter folder: ``book/13-memorization-composition/``.

The paper regresses the sum of three stacked images (MNIST digits, and one-shot Omniglot
characters) with per-channel networks whose outputs are aggregated, against a network that
mixes the channels from its first layer. Both datasets need downloads, so we substitute:

* *digits*: the glyphs ``0``-``9`` of the DejaVu Sans font that ships with matplotlib, rendered
  at ``size x size`` pixels with a random affine jitter and pixel noise (:func:`render_digits`);
* *one-shot glyphs*: random binary ``size x size`` patterns, one per value ``0``-``9``
  (:func:`one_shot_glyphs`), each used in exactly one training triple.

Models are *ensembles*: ``E`` independent copies trained at once with batched weights, one per
seed, so that a whole seed sweep costs one training loop. The channel-wise model computes

.. math::
    f(x^{(1)},x^{(2)},x^{(3)})=\sum_{c=1}^3 g(x^{(c)}),

with one shared MLP :math:`g`; the cross-channel model is an MLP on the concatenation.
"""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.font_manager import FontProperties
from matplotlib.path import Path
from matplotlib.textpath import TextPath
from torch import nn

from lib.validate import check_generator, nonnegative, positive, positive_int, real_array

__all__ = [
    "render_digits",
    "one_shot_glyphs",
    "zipf_digit_probs",
    "make_sum_data",
    "EnsembleMLP",
    "SumNet",
    "CrossChannelNet",
    "train_ensemble",
    "ensemble_mse",
]

_FONT = FontProperties(family="DejaVu Sans", weight="bold")


def _digit_path(digit: int) -> Path:
    path = TextPath((0, 0), str(digit), size=1.0, prop=_FONT)
    ext = path.get_extents()
    centre = np.array([(ext.x0 + ext.x1) / 2, (ext.y0 + ext.y1) / 2])
    scale = 0.8 / max(ext.width, ext.height)
    return Path((path.vertices - centre) * scale, path.codes)


def render_digits(
    labels, rng: np.random.Generator, size: int = 8, noise: float = 0.1
) -> np.ndarray:
    r"""Render digits ``labels`` (shape ``(N,)``, 0-9) as ``(N, size*size)`` images in [0, 1].

    Each image is the font glyph under a random rotation (about :math:`\pm6^\circ`), scale
    (0.9-1.05) and shift (:math:`\pm0.04` of the width), rasterised by 4x4 supersampling, plus
    Gaussian pixel noise of standard deviation ``noise`` (then clipped to [0, 1]).
    """
    labels = np.asarray(labels)
    if labels.ndim != 1 or np.any((labels < 0) | (labels > 9)) or labels.dtype.kind not in "iu":
        raise ValueError("labels must be a 1-D integer array with values in 0..9")
    check_generator(rng)
    size = positive_int(size, "size")
    noise = nonnegative(noise, "noise")
    sup = 4 * size
    u = (np.arange(sup) + 0.5) / sup - 0.5
    grid = np.stack(np.meshgrid(u, -u), axis=-1).reshape(-1, 2)
    paths = [_digit_path(d) for d in range(10)]
    out = np.empty((labels.size, size * size))
    theta = rng.uniform(-0.1, 0.1, labels.size)
    scale = rng.uniform(0.9, 1.05, labels.size)
    shift = rng.uniform(-0.04, 0.04, (labels.size, 2))
    for j, d in enumerate(labels):
        c, s_ = np.cos(theta[j]), np.sin(theta[j])
        # inverse affine map of the pixel grid into glyph coordinates
        pts = ((grid - shift[j]) @ np.array([[c, -s_], [s_, c]])) / scale[j]
        ink = paths[d].contains_points(pts).reshape(size, 4, size, 4).mean(axis=(1, 3))
        out[j] = ink.ravel()
    out += noise * rng.standard_normal(out.shape)
    return np.clip(out, 0.0, 1.0)


def one_shot_glyphs(
    m: int, rng: np.random.Generator, size: int = 8, density: float = 0.35
) -> np.ndarray:
    """``m`` random binary glyphs, shape ``(m, size*size)``: an offline stand-in for Omniglot."""
    m = positive_int(m, "m")
    check_generator(rng)
    size = positive_int(size, "size")
    density = positive(density, "density")
    return (rng.random((m, size * size)) < density).astype(float)


def zipf_digit_probs(a: float = 1.0) -> np.ndarray:
    r"""Digit frequencies :math:`q_j\propto (j+1)^{-a}`, ``0`` most common and ``9`` rarest."""
    a = nonnegative(a, "a")
    w = np.arange(1, 11, dtype=float) ** (-a)
    return w / w.sum()


def _bank_draw(bank: np.ndarray, labels: np.ndarray, rng: np.random.Generator, noise: float):
    """Images for ``labels`` from a bank of shape (10, per_digit, D), plus fresh pixel noise."""
    pick = rng.integers(0, bank.shape[1], labels.size)
    img = bank[labels.ravel(), pick] + noise * rng.standard_normal((labels.size, bank.shape[2]))
    return np.clip(img, 0.0, 1.0).reshape(*labels.shape, bank.shape[2])


def make_sum_data(
    n_train: int,
    n_test: int,
    rng: np.random.Generator,
    *,
    size: int = 8,
    zipf: float = 1.0,
    per_digit: int = 40,
    noise: float = 0.05,
    n_glyphs: int = 10,
) -> dict:
    r"""The three-image sum task with one-shot glyphs (stand-in for the paper's Fig. 2, Table 1).

    Two banks of ``per_digit`` rendered images per digit (:func:`render_digits`) are drawn, one
    for training and one for testing, so test images are never seen in training; every use of
    a bank image adds fresh pixel noise of standard deviation ``noise``.

    Training: ``n_train`` triples of digit images with digits drawn from
    :func:`zipf_digit_probs`; in addition, each of ``n_glyphs`` one-shot glyphs (glyph ``g`` has
    value ``g mod 10``) appears in exactly one extra triple, in a random channel, beside two
    random digits. Target: the sum.

    Test sets:

    * ``nine``: every triple has one '9' from the test bank (random channel); the other two
      digits are 0-4. The test bank renders the *same* font glyph with fresh jitter, so these
      '9's are near-copies of the training '9's, not new handwriting;
    * ``pair``: two distinct glyphs (a pair never seen together) and one fresh digit 0-4.

    Returns a dict with float32 tensors ``(x, y)`` per split (``x`` of shape
    ``(N, 3, size*size)``) and ``glyph_rows``, the training rows that carry a glyph.
    """
    n_train = positive_int(n_train, "n_train")
    n_test = positive_int(n_test, "n_test")
    check_generator(rng)
    per_digit = positive_int(per_digit, "per_digit")
    noise = nonnegative(noise, "noise")
    G = positive_int(n_glyphs, "n_glyphs")
    if G < 2:
        raise ValueError(f"n_glyphs must be at least 2, got {G}")
    q = zipf_digit_probs(zipf)
    labels = np.repeat(np.arange(10), per_digit)
    train_bank = render_digits(labels, rng, size, noise=0.0).reshape(10, per_digit, -1)
    test_bank = render_digits(labels, rng, size, noise=0.0).reshape(10, per_digit, -1)
    digits = rng.choice(10, size=(n_train, 3), p=q)
    x = _bank_draw(train_bank, digits, rng, noise)
    y = digits.sum(axis=1).astype(float)
    glyphs = one_shot_glyphs(G, rng, size)
    value = np.arange(G) % 10
    # one training triple per glyph: glyph g (value g mod 10) in a random channel, two digits
    g_digits = rng.choice(10, size=(G, 3), p=q)
    gx = _bank_draw(train_bank, g_digits, rng, noise)
    g_chan = rng.integers(0, 3, G)
    gx[np.arange(G), g_chan] = glyphs
    g_digits[np.arange(G), g_chan] = 0
    x = np.concatenate([x, gx])
    y = np.concatenate([y, value + g_digits.sum(axis=1)])
    # test: a fresh '9' plus two fresh digits from 0-4
    t_digits = rng.integers(0, 5, size=(n_test, 3))
    t_digits[np.arange(n_test), rng.integers(0, 3, n_test)] = 9
    x9 = _bank_draw(test_bank, t_digits, rng, noise)
    y9 = t_digits.sum(axis=1).astype(float)
    # test: two distinct glyphs plus a fresh digit 0-4, channels shuffled
    a = rng.integers(0, G, n_test)
    b = (a + rng.integers(1, G, n_test)) % G
    c = rng.integers(0, 5, n_test)
    xp = np.stack([glyphs[a], glyphs[b], _bank_draw(test_bank, c, rng, noise)], axis=1)
    perm = np.argsort(rng.random((n_test, 3)), axis=1)
    xp = xp[np.arange(n_test)[:, None], perm]
    yp = (value[a] + value[b] + c).astype(float)

    def f(z):
        return torch.as_tensor(z, dtype=torch.float32)

    return dict(
        train=(f(x), f(y)),
        nine=(f(x9), f(y9)),
        pair=(f(xp), f(yp)),
        glyph_rows=np.arange(n_train, n_train + G),
    )


class EnsembleMLP(nn.Module):
    r"""``E`` independent ReLU MLPs with batched weights: ``(E, B, d_0)`` -> ``(E, B, d_L)``."""

    def __init__(self, ensemble: int, widths: list[int]):
        super().__init__()
        ensemble = positive_int(ensemble, "ensemble")
        if len(widths) < 2:
            raise ValueError(
                f"widths must list at least an input and an output width, got {widths}"
            )
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for a, b in zip(widths[:-1], widths[1:]):
            bound = 1.0 / np.sqrt(a)  # torch.nn.Linear's default initialisation range
            self.weights.append(nn.Parameter(torch.empty(ensemble, a, b).uniform_(-bound, bound)))
            self.biases.append(nn.Parameter(torch.empty(ensemble, 1, b).uniform_(-bound, bound)))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = torch.baddbmm(b, h, w)
            if i < len(self.weights) - 1:
                h = torch.relu(h)
        return h


class SumNet(nn.Module):
    r"""Channel-wise model :math:`f=\sum_c g(x^{(c)})`, one shared MLP :math:`g` (paper's "Sum")."""

    def __init__(self, ensemble: int, in_dim: int, hidden: int = 256):
        super().__init__()
        self.g = EnsembleMLP(ensemble, [in_dim, hidden, hidden, 1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        E, B, C, D = x.shape
        return self.g(x.reshape(E, B * C, D)).reshape(E, B, C).sum(-1)


class CrossChannelNet(nn.Module):
    """Cross-channel model: one MLP on the concatenated channels (the paper's "Cross-channel")."""

    def __init__(self, ensemble: int, in_dim: int, channels: int = 3, hidden: int = 256):
        super().__init__()
        self.f = EnsembleMLP(ensemble, [channels * in_dim, hidden, hidden, 1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        E, B, C, D = x.shape
        return self.f(x.reshape(E, B, C * D)).squeeze(-1)


def train_ensemble(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    weight_decay,
    lr: float = 1e-3,
    epochs: int = 60,
    batch: int = 128,
    generator: torch.Generator,
    paired: bool = False,
) -> nn.Module:
    r"""Adam with decoupled weight decay (AdamW) on the mean squared error, per ensemble member.

    ``weight_decay`` has one entry :math:`\lambda_e` per ensemble member ``e`` (shape ``(E,)``):
    before each Adam step the member's weights are multiplied by :math:`1-\eta\lambda_e`, exactly as
    ``torch.optim.AdamW`` does; :math:`\lambda=0` lets the model memorise single examples. The
    decay is applied to *every* parameter, biases included (``torch.optim.AdamW`` with a single
    parameter group does the same). ``x`` has shape ``(N, C, D)`` and ``y`` shape ``(N,)``. The
    ensemble's loss is the sum of the members' losses, so members do not interact.

    Shuffles: with ``paired=False`` each member sees its own shuffles. With ``paired=True`` the
    ensemble size ``E`` must be even and member ``e + E/2`` sees exactly the shuffles of member
    ``e``; together with equal initialisations this makes a *paired* comparison of two weight
    decays (only the decay differs within a pair).
    """
    wd = real_array(weight_decay, "weight_decay", ndim=1)
    if np.any(wd < 0):
        raise ValueError("weight_decay must be non-negative")
    lr = positive(lr, "lr")
    epochs = positive_int(epochs, "epochs")
    batch = positive_int(batch, "batch")
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    ensemble, N = wd.size, x.shape[0]
    shrink = torch.as_tensor(1.0 - lr * wd, dtype=torch.float32).reshape(-1, 1, 1)
    params = list(model.parameters())
    if any(p.shape[0] != ensemble for p in params):
        raise ValueError(
            f"weight_decay must have one entry per ensemble member ({params[0].shape[0]})"
        )
    if paired and ensemble % 2:
        raise ValueError(f"paired=True needs an even ensemble size, got {ensemble}")
    opt = torch.optim.Adam(params, lr=lr)
    for _ in range(epochs):
        if paired:
            half = torch.argsort(torch.rand(ensemble // 2, N, generator=generator), dim=1)
            order = torch.cat([half, half])
        else:
            order = torch.argsort(torch.rand(ensemble, N, generator=generator), dim=1)
        for start in range(0, N, batch):
            idx = order[:, start : start + batch]
            loss = ((model(x[idx]) - y[idx]) ** 2).mean(dim=1).sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            with torch.no_grad():
                for p in params:  # decoupled weight decay, as in AdamW
                    p.mul_(shrink)
            opt.step()
    return model


@torch.no_grad()
def ensemble_mse(model: nn.Module, x: torch.Tensor, y: torch.Tensor, ensemble: int) -> np.ndarray:
    """Mean squared error of each ensemble member on ``(x, y)``: shape ``(E,)``."""
    ensemble = positive_int(ensemble, "ensemble")
    y = torch.as_tensor(y, dtype=torch.float32)
    if y.ndim != 1 or y.shape[0] != x.shape[0]:
        raise ValueError(f"y must have shape ({x.shape[0]},), got {tuple(y.shape)}")
    pred = model(x.unsqueeze(0).expand(ensemble, *x.shape))
    return ((pred - y) ** 2).mean(dim=1).numpy().astype(float)
