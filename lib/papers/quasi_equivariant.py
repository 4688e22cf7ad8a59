r"""Quasi-equivariant metanetworks on the weights of ReLU MLPs (chapter 05).

Paper: V.-H. Tran, A. N. The, B. Guérand, T. N. Vo, T. M. Nguyen, *Quasi-Equivariant
Metanetworks*, ICLR 2026 (arXiv:2604.23720, OpenReview ``XMiDpi2mWY``); official code
``Fsoft-AIC/Quasi-NFN``.

Chapter folder: ``book/05-quasi-equivariant-metanetworks/``.

A ReLU MLP with widths :math:`n_0,\dots,n_L` has parameters
:math:`\theta=(W_i\in\mathbb R^{n_i\times n_{i-1}},b_i\in\mathbb R^{n_i})_{i=1}^L`. The group
:math:`G=\prod_{i=1}^{L-1}\mathcal M^+_{n_i}` of positive monomial matrices acts by

.. math::
    W_i\mapsto g_iW_ig_{i-1}^{-1},\qquad b_i\mapsto g_ib_i,\qquad g_0=g_L=I,

and leaves the realised function unchanged. A metanetwork layer :math:`F` is *quasi-equivariant*
if :math:`F(g\theta)=g'(g,\theta)F(\theta)` for some :math:`g'\in G`; the paper builds one as
:math:`F(\theta)=\alpha(\theta)\,\beta(\theta)` with :math:`\beta` strictly equivariant and
:math:`\alpha:\Theta\to G` arbitrary, so that :math:`g'=\alpha(g\theta)\,g\,\alpha(\theta)^{-1}`.

Conventions (torch, any float dtype): a parameter set is a list of pairs ``(W_i, b_i)`` with
shapes ``(..., n_i, n_{i-1})`` and ``(..., n_i)``; the leading dimensions ``...`` index networks
and, for metanetwork features, channels (``(B, C, ...)``). A group element is a list of
``L-1`` monomial matrices ``(..., n_i, n_i)``, :math:`g_i=D_iP_i`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from scipy import stats
from torch import nn

from lib.validate import check_generator, positive, positive_int, real, real_array

__all__ = [
    "check_widths",
    "init_params",
    "forward",
    "sample_group",
    "monomial_inverse",
    "act_group",
    "apply_scales",
    "functional_distance",
    "unflatten_params",
    "params_distance",
    "flatten_params",
    "MonomialLinear",
    "relu_features",
    "QuasiAlpha",
    "QuasiLayer",
    "channel_norm_pool",
    "InvariantNFN",
    "StatNet",
    "tensor_stats",
    "balanced_representative",
    "orbit_pair_lower_bound",
    "make_zoo",
    "tau_drop_bootstrap",
    "gl_quasi_matrix",
    "gl_condition_bound",
    "attention_logits",
]

Params = list[tuple[torch.Tensor, torch.Tensor]]
ACTS = ("relu", "tanh")


# --------------------------------------------------------------------------- checks
def check_widths(widths) -> tuple[int, ...]:
    """Validate MLP widths :math:`(n_0,\\dots,n_L)`, ``L >= 2`` (at least one hidden layer)."""
    if not isinstance(widths, (tuple, list)):
        raise TypeError(f"widths must be a tuple of ints, got {type(widths).__name__}")
    out = tuple(positive_int(w, "widths") for w in widths)
    if len(out) < 3:
        raise ValueError(f"widths must have at least 3 entries (one hidden layer), got {out}")
    return out


def _check_params(params, name: str = "params") -> tuple[int, ...]:
    if not isinstance(params, (list, tuple)) or len(params) < 2:
        raise ValueError(f"{name} must be a list of at least two (W, b) pairs")
    widths = [None]
    for i, pair in enumerate(params):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"{name}[{i}] must be a pair (W, b)")
        W, b = pair
        if not (isinstance(W, torch.Tensor) and isinstance(b, torch.Tensor)):
            raise TypeError(f"{name}[{i}] must hold torch tensors")
        if W.dim() < 2 or b.dim() < 1 or W.shape[-2] != b.shape[-1]:
            raise ValueError(
                f"{name}[{i}]: W must be (..., n_i, n_(i-1)) and b (..., n_i), got "
                f"{tuple(W.shape)} and {tuple(b.shape)}"
            )
        if widths[-1] is not None and W.shape[-1] != widths[-1]:
            raise ValueError(
                f"{name}[{i}]: W has {W.shape[-1]} columns but layer {i - 1} has {widths[-1]} units"
            )
        if widths[0] is None:
            widths[0] = W.shape[-1]
        widths.append(W.shape[-2])
    return tuple(widths)


def _check_act(act: str) -> str:
    if act not in ACTS:
        raise ValueError(f"act must be one of {ACTS}, got {act!r}")
    return act


# --------------------------------------------------------------------------- networks
def init_params(
    widths, batch_shape: Sequence[int] = (), *, gen: torch.Generator, scale=1.0, dtype=torch.float64
) -> Params:
    r"""Gaussian weights :math:`W_i\sim N(0,2s^2/n_{i-1})` (s = ``scale``), biases N(0, 0.01).

    ``scale`` is a float or a tensor broadcastable to ``batch_shape`` (one scale per network).
    Returns a list of ``(W_i, b_i)`` with shapes ``(*batch_shape, n_i, n_{i-1})`` and
    ``(*batch_shape, n_i)``.
    """
    widths = check_widths(widths)
    if not isinstance(gen, torch.Generator):
        raise TypeError(f"gen must be a torch.Generator, got {type(gen).__name__}")
    batch_shape = tuple(batch_shape)
    s = torch.as_tensor(scale, dtype=dtype)
    if torch.any(s <= 0):
        raise ValueError("scale must be positive")
    s = s.reshape(s.shape + (1, 1)) if s.dim() else s
    params = []
    for n_in, n_out in zip(widths[:-1], widths[1:], strict=True):
        W = torch.randn(*batch_shape, n_out, n_in, generator=gen, dtype=dtype)
        W = W * s * math.sqrt(2.0 / n_in)
        b = 0.1 * torch.randn(*batch_shape, n_out, generator=gen, dtype=dtype)
        params.append((W, b))
    return params


def forward(params: Params, x: torch.Tensor, act: str = "relu") -> torch.Tensor:
    r"""Realisation :math:`f(x;\theta)`: ``x`` of shape ``(P, n_0)`` or ``(..., P, n_0)``.

    Returns ``(..., P, n_L)``; the activation is applied after every layer but the last.
    """
    widths = _check_params(params)
    _check_act(act)
    if not isinstance(x, torch.Tensor) or x.shape[-1] != widths[0]:
        raise ValueError(f"x must be a tensor with last dimension n_0={widths[0]}")
    h = x
    phi = torch.relu if act == "relu" else torch.tanh
    for i, (W, b) in enumerate(params):
        h = h @ W.transpose(-1, -2) + b.unsqueeze(-2)
        if i < len(params) - 1:
            h = phi(h)
    return h


# --------------------------------------------------------------------------- the group
def sample_group(
    widths,
    batch_shape: Sequence[int] = (),
    *,
    gen: torch.Generator,
    scale_range=(0.5, 2.0),
    log_uniform: bool = True,
    permute: bool = True,
    signs: bool = False,
    dtype=torch.float64,
) -> list[torch.Tensor]:
    r"""Random :math:`g=(g_1,\dots,g_{L-1})`, :math:`g_i=D_iP_i`, each ``(*batch, n_i, n_i)``.

    Diagonal entries of :math:`D_i` are drawn from ``scale_range`` (log-uniform, or uniform as in
    the paper's augmentation :math:`U[1,10^k]`); with ``signs=True`` they are :math:`\pm1` instead
    (the group of a tanh network). Book: :prf:ref:`def-05-group` in book/05-.../symmetry.md.
    """
    widths = check_widths(widths)
    lo, hi = (positive(v, "scale_range") for v in scale_range)
    if lo > hi:
        raise ValueError(f"scale_range must have lo <= hi, got {scale_range}")
    batch_shape = tuple(batch_shape)
    out = []
    for n in widths[1:-1]:
        u = torch.rand(*batch_shape, n, generator=gen, dtype=dtype)
        if signs:
            d = torch.where(u < 0.5, -1.0, 1.0).to(dtype)
        elif log_uniform:
            d = torch.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))
        else:
            d = lo + u * (hi - lo)
        if permute:
            perm = torch.argsort(torch.rand(*batch_shape, n, generator=gen), dim=-1)
        else:
            perm = torch.arange(n).expand(*batch_shape, n)
        P = torch.nn.functional.one_hot(perm, n).to(dtype)  # P[j, perm[j]] = 1
        out.append(d.unsqueeze(-1) * P)
    return out


def monomial_inverse(g: torch.Tensor) -> torch.Tensor:
    r"""Inverse of a monomial matrix :math:`DP`: :math:`P^\top D^{-1}` (transpose, reciprocals)."""
    gt = g.transpose(-1, -2)
    return torch.where(gt != 0, 1.0 / torch.where(gt != 0, gt, 1.0), torch.zeros_like(gt))


def act_group(params: Params, g: Sequence[torch.Tensor], *, channel_dims: int = 0) -> Params:
    r"""The action :math:`W_i\mapsto g_iW_ig_{i-1}^{-1}`, :math:`b_i\mapsto g_ib_i` (eq-05-action).

    ``channel_dims`` extra dimensions (channels) sit between ``g``'s batch dimensions and the
    matrices; the same :math:`g` acts on every channel. Book: :prf:ref:`def-05-group`.
    """
    widths = _check_params(params)
    if len(g) != len(widths) - 2:
        raise ValueError(f"g must have {len(widths) - 2} hidden-layer elements, got {len(g)}")
    mats = []
    for i, gi in enumerate(g):
        if gi.shape[-1] != widths[i + 1] or gi.shape[-2] != widths[i + 1]:
            raise ValueError(f"g[{i}] must be ({widths[i + 1]}, {widths[i + 1]})")
        for _ in range(channel_dims):
            gi = gi.unsqueeze(-3)
        mats.append(gi)
    out = []
    L = len(params)
    for i, (W, b) in enumerate(params):
        if i < L - 1:
            W = mats[i] @ W
            b = (mats[i] @ b.unsqueeze(-1)).squeeze(-1)
        if i > 0:
            W = W @ monomial_inverse(mats[i - 1])
        out.append((W, b))
    return out


def apply_scales(params: Params, scales: Sequence[torch.Tensor]) -> Params:
    r"""Positive diagonal action :math:`W_i\mapsto a_iW_i/a_{i-1}^\top`, :math:`b_i\mapsto a_i b_i`.

    ``scales[i]`` has shape broadcastable to ``b_{i+1}`` (``(B, C, n)`` per channel, ``(B, 1, n)``
    shared over channels). Step 4 of the quasi layer. Raises ``ValueError`` on a non-positive
    scale (outside :math:`G`). Book: :prf:ref:`prop-05-construction`.
    """
    widths = _check_params(params)
    if not isinstance(scales, (list, tuple)) or len(scales) != len(widths) - 2:
        raise ValueError(f"scales must be a list of {len(widths) - 2} tensors")
    for i, a in enumerate(scales):
        if not isinstance(a, torch.Tensor):
            raise TypeError(f"scales[{i}] must be a torch tensor, got {type(a).__name__}")
        if torch.any(a <= 0):
            raise ValueError(
                f"scales[{i}] must be positive (a positive diagonal element of G); got min "
                f"{float(a.detach().min()):.3g} (eps >= 1 in 1 + eps sin(.) can do this)"
            )
    out = []
    L = len(params)
    for i, (W, b) in enumerate(params):
        if i < L - 1:
            a = scales[i]
            if a.shape[-1] != widths[i + 1]:
                raise ValueError(f"scales[{i}] must end in {widths[i + 1]}")
            W = a.unsqueeze(-1) * W
            b = a * b
        if i > 0:
            W = W / scales[i - 1].unsqueeze(-2)
        out.append((W, b))
    return out


def functional_distance(p1: Params, p2: Params, x_probe: torch.Tensor, act: str = "relu"):
    r""":math:`\max_x|f(x;\theta_1)-f(x;\theta_2)|` over the probe inputs, one per network."""
    if _check_params(p1, "p1") != _check_params(p2, "p2"):
        raise ValueError("p1 and p2 must have the same widths")
    d = (forward(p1, x_probe, act) - forward(p2, x_probe, act)).abs()
    return d.flatten(-2).amax(-1)


def flatten_params(params: Params, batch_dims: int = 1) -> torch.Tensor:
    """All entries of ``params`` as one vector per leading index: ``(*batch, d)``."""
    parts = []
    for W, b in params:
        parts += [W.flatten(batch_dims), b.flatten(batch_dims)]
    return torch.cat(parts, -1)


def unflatten_params(v: torch.Tensor, widths) -> Params:
    """Inverse of :func:`flatten_params` (one batch dimension): ``(B, d)`` to ``(W_i, b_i)``."""
    widths = check_widths(widths)
    out, k = [], 0
    for n_in, n_out in zip(widths[:-1], widths[1:], strict=True):
        W = v[..., k : k + n_out * n_in].reshape(*v.shape[:-1], n_out, n_in)
        k += n_out * n_in
        out.append((W, v[..., k : k + n_out]))
        k += n_out
    if k != v.shape[-1]:
        raise ValueError(f"v must have {k} entries in its last dimension, got {v.shape[-1]}")
    return out


def params_distance(p1: Params, p2: Params, batch_dims: int = 1) -> torch.Tensor:
    r""":math:`\|\theta_1-\theta_2\|_\infty` per leading index."""
    if _check_params(p1, "p1") != _check_params(p2, "p2"):
        raise ValueError("p1 and p2 must have the same widths")
    batch_dims = positive_int(batch_dims, "batch_dims")
    return (flatten_params(p1, batch_dims) - flatten_params(p2, batch_dims)).abs().amax(-1)


# --------------------------------------------------------------------------- strict layer
class MonomialLinear(nn.Module):
    r"""A strictly :math:`G`-equivariant linear layer on ``C_in`` channels of weight features.

    Under positive scalings only channel mixing survives on hidden-to-hidden blocks; the first
    layer may also mix over the fixed input index and with :math:`b_1`, the last over the fixed
    output index, and :math:`b_L` (invariant) may get a constant. Input features are lists of
    ``(W_i, b_i)`` of shapes ``(B, C_in, n_i, n_{i-1})``, ``(B, C_in, n_i)``. This is our
    reconstruction of the linear part of Monomial-NFN. Book: :prf:ref:`def-05-strict`.
    """

    def __init__(self, widths, c_in: int, c_out: int, dtype=torch.float64):
        super().__init__()
        self.widths = check_widths(widths)
        c_in, c_out = positive_int(c_in, "c_in"), positive_int(c_out, "c_out")
        self.c_in, self.c_out = c_in, c_out
        n, L = self.widths, len(self.widths) - 1
        s = 1.0 / math.sqrt(c_in)

        def p(*shape, fan=1):
            return nn.Parameter(torch.randn(*shape, dtype=dtype) * s / math.sqrt(fan))

        self.mix_W = nn.ParameterList([p(c_out, c_in) for _ in range(1, L - 1)])
        self.mix_b = nn.ParameterList([p(c_out, c_in) for _ in range(L - 1)])
        self.first_W = p(c_out, c_in, n[0], n[0], fan=n[0] + 1)
        self.first_Wb = p(c_out, c_in, n[0], fan=n[0] + 1)
        self.first_bW = p(c_out, c_in, n[0], fan=n[0] + 1)
        self.last_W = p(c_out, c_in, n[L], n[L], fan=n[L])
        self.last_b = p(c_out, c_in, n[L], n[L], fan=n[L])
        self.last_const = nn.Parameter(torch.zeros(c_out, n[L], dtype=dtype))

    def forward(self, Z: Params) -> Params:
        widths = _check_params(Z, "Z")
        if widths != self.widths or Z[0][0].shape[-3] != self.c_in:
            raise ValueError(f"Z must have widths {self.widths} and {self.c_in} channels")
        L = len(Z)
        out = []
        for i, (W, b) in enumerate(Z):
            if i == 0:
                Wn = torch.einsum("ockl,bcjl->bojk", self.first_W, W)
                Wn = Wn + torch.einsum("ock,bcj->bojk", self.first_Wb, b)
                bn = torch.einsum("oc,bcj->boj", self.mix_b[0], b)
                bn = bn + torch.einsum("ock,bcjk->boj", self.first_bW, W)
            elif i == L - 1:
                Wn = torch.einsum("ocjl,bclk->bojk", self.last_W, W)
                bn = torch.einsum("ocjl,bcl->boj", self.last_b, b) + self.last_const
            else:
                Wn = torch.einsum("oc,bcjk->bojk", self.mix_W[i - 1], W)
                bn = torch.einsum("oc,bcj->boj", self.mix_b[i], b)
            out.append((Wn, bn))
        return out


def relu_features(Z: Params) -> Params:
    """Entrywise ReLU on weight features (commutes with positive monomial matrices)."""
    return [(torch.relu(W), torch.relu(b)) for W, b in Z]


# --------------------------------------------------------------------------- the quasi layer
def tensor_stats(x: torch.Tensor, start_dim: int = 1) -> torch.Tensor:
    """Mean, unbiased variance and the 0/25/50/75/100 % quantiles (``torch.quantile``) of ``x``.

    As in the released code (a single entry gets variance 0). ``x`` is flattened from
    ``start_dim``; the result has shape ``(..., 7)``.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch tensor, got {type(x).__name__}")
    f = x.flatten(start_dim)
    qs = torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0], dtype=f.dtype)
    q = torch.quantile(f, qs, dim=-1).movedim(0, -1)
    # unbiased variance; a single entry (e.g. the output bias b_L of a 1-output net) gets 0
    var = f.var(-1, keepdim=True) if f.shape[-1] > 1 else torch.zeros_like(f[..., :1])
    return torch.cat([f.mean(-1, keepdim=True), var, q], -1)


class QuasiAlpha(nn.Module):
    r"""The map :math:`\alpha:\Theta\to G`, scales :math:`a_i=1+\varepsilon\sin(\mathrm{MLP}_i(s))`.

    ``s`` holds 14 statistics (7 of :math:`W_i`, 7 of :math:`b_i`) of each hidden layer,
    concatenated and layer-normalised; each hidden layer has a gated residual MLP
    :math:`h=\mathrm{GELU}(\mathrm{LN}(W_1s))`, :math:`h\leftarrow h\odot\sigma(W_gh)`. With
    ``shared=True`` one scale vector acts on all channels (output ``(B, 1, n_i)``), otherwise one
    per channel (``(B, C, n_i)``, the released code's default). :math:`\varepsilon` is learnable,
    initialised at ``eps`` (0.01 in the released CNN-zoo layer). Only ReLU networks have a
    continuous symmetry (Remark 4.1): ``act='tanh'`` raises.

    :math:`|\varepsilon|<1` is what makes every scale positive whatever the MLP outputs, i.e.
    :math:`\alpha(\theta)\in G`. The released code leaves the learnable :math:`\varepsilon`
    unconstrained; here :meth:`forward` raises ``ValueError`` naming ``eps`` once
    :math:`|\varepsilon|\ge1`, and :meth:`project_eps_` (call it after each optimiser step) keeps
    it in :math:`[-\bar\varepsilon,\bar\varepsilon]`, :math:`\bar\varepsilon<1`.
    Book: :prf:ref:`rem-05-identity-component`.
    """

    def __init__(
        self,
        widths,
        channels: int,
        *,
        shared: bool,
        hidden: int = 32,
        eps: float = 0.01,
        act: str = "relu",
        dtype=torch.float64,
    ):
        super().__init__()
        if _check_act(act) != "relu":
            raise ValueError(
                f"act={act!r}: a tanh network's symmetry group (signed permutations) is finite, so "
                "a continuous alpha can only be constant (Remark 4.1); use act='relu'"
            )
        self.widths = check_widths(widths)
        self.channels = positive_int(channels, "channels")
        self.shared = bool(shared)
        eps = positive(eps, "eps")
        if eps >= 1:
            raise ValueError(f"eps must be < 1 so that the scales stay positive, got {eps}")
        hidden = positive_int(hidden, "hidden")
        n_stats = 14 * (len(self.widths) - 2)
        self.eps = nn.Parameter(torch.tensor(eps, dtype=dtype))
        self.norm = nn.LayerNorm(n_stats, dtype=dtype)
        k = 1 if self.shared else self.channels
        self.inp = nn.ModuleList()
        self.gate = nn.ModuleList()
        self.outp = nn.ModuleList()
        self.hid_norm = nn.ModuleList()
        for n in self.widths[1:-1]:
            self.inp.append(nn.Linear(n_stats, hidden, dtype=dtype))
            self.hid_norm.append(nn.LayerNorm(hidden, dtype=dtype))
            self.gate.append(nn.Linear(hidden, hidden, dtype=dtype))
            self.outp.append(nn.Linear(hidden, k * n, dtype=dtype))

    def project_eps_(self, bound: float) -> bool:
        r"""Clip the learnable :math:`\varepsilon` in place to :math:`|\varepsilon|\le` ``bound``.

        ``bound`` (:math:`\bar\varepsilon`) must lie in (0, 1): every scale then stays in
        :math:`[1-\bar\varepsilon,1+\bar\varepsilon]`, positive, so :math:`\alpha(\theta)\in G`.
        Returns ``True`` if the clip changed :math:`\varepsilon` (the constraint was active).
        """
        bound = real(bound, "bound", lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        with torch.no_grad():
            old = float(self.eps)
            self.eps.clamp_(-bound, bound)
            return float(self.eps) != old

    def forward(self, Z: Params) -> list[torch.Tensor]:
        _check_params(Z, "Z")
        eps = float(self.eps.detach())
        if not abs(eps) < 1:
            raise ValueError(
                f"eps (the learnable QuasiAlpha.eps) must satisfy |eps| < 1, so that "
                f"1 + eps sin(.) is a positive scale (an element of G) for every input; got "
                f"eps = {eps:.4g}. Call project_eps_(bound) after each optimiser step."
            )
        stats = []
        for W, b in Z[:-1]:
            stats += [tensor_stats(W), tensor_stats(b)]
        s = self.norm(torch.cat(stats, -1))
        k = 1 if self.shared else self.channels
        out = []
        for i, n in enumerate(self.widths[1:-1]):
            h = nn.functional.gelu(self.hid_norm[i](self.inp[i](s)))
            h = h * torch.sigmoid(self.gate[i](h))
            a = 1.0 + self.eps * torch.sin(self.outp[i](h))
            out.append(a.reshape(-1, k, n))
        return out


class QuasiLayer(nn.Module):
    r"""The quasi-equivariant layer :math:`F(\theta)=\alpha(\beta(\theta))\beta(\theta)` (Prop. C).

    Our :math:`\alpha` reads its statistics from :math:`\beta`'s *output*; the released code takes
    them from the layer's *input* after a learned channel-mixing map. Both are allowed by Prop. C
    (:math:`\alpha` may be any map). :math:`\varepsilon` is learnable, as in the released code (an
    unconstrained ``nn.Parameter``); :class:`QuasiAlpha` raises once :math:`|\varepsilon|\ge1`
    (scales could leave :math:`G`) and :meth:`QuasiAlpha.project_eps_` keeps it inside.

    Book: :prf:ref:`prop-05-construction` in book/05-quasi-equivariant-metanetworks/symmetry.md.
    """

    def __init__(self, widths, c_in: int, c_out: int, *, shared: bool, eps: float = 0.01, **kw):
        super().__init__()
        self.beta = MonomialLinear(widths, c_in, c_out)
        self.alpha = QuasiAlpha(widths, c_out, shared=shared, eps=eps, **kw)

    def forward(self, Z: Params) -> Params:
        Y = self.beta(Z)
        return apply_scales(Y, self.alpha(Y))


def channel_norm_pool(Z: Params, tiny: float = 1e-300) -> torch.Tensor:
    r"""Invariant pool: normalise each entry across channels, then average over permuted indices.

    Entry :math:`z_{c}` becomes :math:`z_c/\|z_{\cdot}\|_2`; a group element shared by all channels
    multiplies every channel of one entry by the same positive factor and cancels. Hidden
    indices are averaged (permutation invariance); the fixed input/output indices are kept.
    Returns ``(B, F)``. Book: :prf:ref:`lem-05-cancellation`.
    """
    _check_params(Z, "Z")
    L = len(Z)
    feats = []
    for i, (W, b) in enumerate(Z):
        Wn = W / torch.sqrt((W * W).sum(1, keepdim=True) + tiny)
        bn = b / torch.sqrt((b * b).sum(1, keepdim=True) + tiny)
        if i == 0:
            feats.append(Wn.mean(-2).flatten(1))
        elif i == L - 1:
            feats.append(Wn.mean(-1).flatten(1))
        else:
            feats.append(Wn.mean((-1, -2)))
        feats.append(bn.flatten(1) if i == L - 1 else bn.mean(-1))
    return torch.cat(feats, -1)


class InvariantNFN(nn.Module):
    r"""Invariant metanetwork: strict layers, the last one optionally quasi, ReLU, pool, MLP head.

    ``quasi`` is ``None`` (strict), ``"shared"`` or ``"per"`` (one scale vector per channel,
    the released default). Mirrors the released CNN-zoo model (hidden channels, only the last
    layer quasi, channel-normalising pool, Linear-ReLU-Linear-ReLU-Linear head).
    """

    def __init__(
        self, widths, channels=(1, 8, 4), *, quasi=None, head=32, eps=0.01, dtype=torch.float64
    ):
        super().__init__()
        if quasi not in (None, "shared", "per"):
            raise ValueError(f"quasi must be None, 'shared' or 'per', got {quasi!r}")
        self.widths = check_widths(widths)
        if not isinstance(channels, (tuple, list)) or len(channels) < 2:
            raise ValueError(f"channels must be a tuple of at least 2 ints, got {channels!r}")
        channels = tuple(positive_int(c, "channels") for c in channels)
        if channels[0] != 1:
            raise ValueError(f"channels must start with 1 (one input channel), got {channels}")
        self.layers = nn.ModuleList()
        for k, (ci, co) in enumerate(zip(channels[:-1], channels[1:], strict=True)):
            if quasi is not None and k == len(channels) - 2:
                self.layers.append(QuasiLayer(widths, ci, co, shared=quasi == "shared", eps=eps))
            else:
                self.layers.append(MonomialLinear(widths, ci, co))
        L = len(self.widths) - 1
        n_feat = channels[-1] * (self.widths[0] + 1 + 2 * (L - 2) + 2 * self.widths[-1])
        self.head = nn.Sequential(
            nn.Linear(n_feat, head, dtype=dtype),
            nn.ReLU(),
            nn.Linear(head, head, dtype=dtype),
            nn.ReLU(),
            nn.Linear(head, 1, dtype=dtype),
        )

    def project_eps_(self, bound: float) -> bool:
        """Clip the quasi layer's learnable eps to ``[-bound, bound]`` (see
        :meth:`QuasiAlpha.project_eps_`); ``False`` for a strict model. Returns whether it clipped.
        """
        active = False
        for module in self.modules():
            if isinstance(module, QuasiAlpha):
                active = module.project_eps_(bound) or active
        return active

    def features(self, params: Params) -> Params:
        Z = [(W.unsqueeze(1), b.unsqueeze(1)) for W, b in params]
        for layer in self.layers:
            Z = relu_features(layer(Z))
        return Z

    def forward(self, params: Params) -> torch.Tensor:
        return self.head(channel_norm_pool(self.features(params))).squeeze(-1)


class StatNet(nn.Module):
    """Baseline on per-tensor statistics (mean, variance, quantiles); not scale invariant."""

    def __init__(self, widths, head=32, dtype=torch.float64):
        super().__init__()
        L = len(check_widths(widths)) - 1
        self.head = nn.Sequential(
            nn.Linear(14 * L, head, dtype=dtype),
            nn.ReLU(),
            nn.Linear(head, head, dtype=dtype),
            nn.ReLU(),
            nn.Linear(head, 1, dtype=dtype),
        )

    def forward(self, params: Params) -> torch.Tensor:
        s = torch.cat([torch.cat([tensor_stats(W), tensor_stats(b)], -1) for W, b in params], -1)
        return self.head(s).squeeze(-1)


# --------------------------------------------------------------------------- expressivity
def balanced_representative(params: Params, iters: int = 1) -> Params:
    r"""Rescale each hidden neuron so that :math:`\|(W_i[j,:],b_i[j])\|=\|W_{i+1}[:,j]\|`.

    With :math:`s_j=\sqrt{\|\mathrm{out}_j\|/\|\mathrm{in}_j\|}` the map is exact after one sweep
    for one hidden layer; deeper networks need several sweeps (``iters``). It is quasi- but not
    strictly equivariant: :math:`T(D\theta)=T(\theta)`. Book: :prf:ref:`thm-05-strict-bound`.
    """
    _check_params(params)
    iters = positive_int(iters, "iters")
    p = [(W, b) for W, b in params]
    for _ in range(iters):
        for i in range(len(p) - 1):
            W, b = p[i]
            n_in = torch.sqrt((W * W).sum(-1) + b * b)
            n_out = torch.sqrt((p[i + 1][0] ** 2).sum(-2))
            s = torch.sqrt(n_out / n_in)
            p[i] = (s.unsqueeze(-1) * W, s * b)
            p[i + 1] = (p[i + 1][0] / s.unsqueeze(-2), p[i + 1][1])
    return p


def orbit_pair_lower_bound(t: torch.Tensor, r: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    r"""Least squared error of any :math:`\alpha\beta` on one orbit pair, for an invariant target.

    Here :math:`\beta` is strict, :math:`\alpha\in[1-\varepsilon,1+\varepsilon]`, and the pair is
    :math:`(\theta,D\theta)`.

    An entry with target :math:`t` whose group factor between the pair is :math:`r` must be
    predicted as :math:`u` and :math:`\rho u` with :math:`\rho\in r[c^{-1},c]`,
    :math:`c=(1+\varepsilon)/(1-\varepsilon)`, so the error is at least
    :math:`t^2\min_\rho(\rho-1)^2/(1+\rho^2)` (eq-05-pair-bound). ``eps=0`` is the strictly
    equivariant case. Book: :prf:ref:`thm-05-strict-bound`.
    """
    eps = real(eps, "eps", lo=0.0)
    if eps >= 1:
        raise ValueError(f"eps must be in [0, 1), got {eps}")
    if not isinstance(t, torch.Tensor) or not isinstance(r, torch.Tensor):
        raise TypeError("t and r must be torch tensors")
    if torch.any(r <= 0):
        raise ValueError("r must be positive")
    if not torch.all(torch.isfinite(t)):
        raise ValueError("t must be finite")
    slack = math.log((1 + eps) / (1 - eps))
    lr = torch.log(r)
    lrho = torch.sign(lr) * torch.clamp(lr.abs() - slack, min=0.0)
    rho = torch.exp(lrho)
    return t * t * (rho - 1) ** 2 / (1 + rho * rho)


# --------------------------------------------------------------------------- the zoo
def make_zoo(
    widths,
    n_models: int,
    *,
    gen: torch.Generator,
    n_points: int = 256,
    max_steps: int = 150,
    dtype=torch.float64,
):
    r"""Train ``n_models`` small ReLU MLPs at once on a 2-D two-class task (batched GD).

    Every network draws its own learning rate (log-uniform in [0.02, 1]), initial scale
    ([0.3, 2]), number of steps ([10, ``max_steps``]) and training-label noise ([0, 0.4]).
    The task: label 1 inside the circle :math:`x_1^2+x_2^2<1.2` for :math:`x\sim N(0,I_2)`. All
    networks train in one batched loop (stacked parameters, batched matmuls). Returns
    ``(params, test_acc, hyper)`` with ``params`` the trained list of ``(W_i, b_i)`` of shapes
    ``(M, n_i, n_{i-1})``, ``test_acc`` ``(M,)`` on 1024 clean test points, and the draws.
    """
    widths = check_widths(widths)
    if widths[0] != 2 or widths[-1] != 1:
        raise ValueError(f"widths must start with 2 and end with 1 for the zoo task, got {widths}")
    M = positive_int(n_models, "n_models")
    n_points = positive_int(n_points, "n_points")
    max_steps = positive_int(max_steps, "max_steps")

    def u(lo, hi):
        return lo + (hi - lo) * torch.rand(M, generator=gen, dtype=dtype)

    lr = torch.exp(u(math.log(0.02), 0.0))
    scale = u(0.3, 2.0)
    steps = torch.floor(u(10, max_steps + 1)).clamp(max=max_steps)
    noise = u(0.0, 0.4)
    x = torch.randn(n_points, 2, generator=gen, dtype=dtype)
    y = ((x * x).sum(-1) < 1.2).to(dtype)
    flip = torch.rand(M, n_points, generator=gen, dtype=dtype) < noise[:, None]
    y_tr = torch.where(flip, 1 - y, y)
    xt = torch.randn(1024, 2, generator=gen, dtype=dtype)
    yt = ((xt * xt).sum(-1) < 1.2).to(dtype)
    params = init_params(widths, (M,), gen=gen, scale=scale, dtype=dtype)
    leaves = [t.clone().requires_grad_(True) for pair in params for t in pair]
    lr_b = [lr.reshape((M,) + (1,) * (t.dim() - 1)) for t in leaves]
    for step in range(max_steps):
        p = list(zip(leaves[0::2], leaves[1::2], strict=True))
        logits = forward(p, x).squeeze(-1)
        loss = nn.functional.binary_cross_entropy_with_logits(logits, y_tr, reduction="none")
        grads = torch.autograd.grad(loss.mean(-1).sum(), leaves)
        active = (steps > step).to(dtype)
        with torch.no_grad():
            for t, g, lb in zip(leaves, grads, lr_b, strict=True):
                t -= lb * active.reshape(lb.shape) * g
    p = [(W.detach(), b.detach()) for W, b in zip(leaves[0::2], leaves[1::2], strict=True)]
    with torch.no_grad():
        acc = ((forward(p, xt).squeeze(-1) > 0).to(dtype) == yt).to(dtype).mean(-1)
    hyper = dict(lr=lr, scale=scale, steps=steps, noise=noise)
    return p, acc, hyper


def tau_drop_bootstrap(
    pred_a, pred_b, y, *, n_boot: int, rng: np.random.Generator
) -> tuple[float, np.ndarray]:
    r"""Drop :math:`\tau(a,y)-\tau(b,y)` of Kendall's :math:`\tau`, and paired bootstrap replicates.

    ``pred_a``, ``pred_b``, ``y`` are arrays of shape ``(n,)`` (predictions on the same networks
    before and after augmentation, and the true accuracies); the bootstrap resamples networks.
    Returns ``(drop, replicates of shape (n_boot,))``.
    """
    a = real_array(pred_a, "pred_a", ndim=1)
    b = real_array(pred_b, "pred_b", shape=a.shape)
    t = real_array(y, "y", shape=a.shape)
    n_boot = positive_int(n_boot, "n_boot")
    check_generator(rng)
    drop = stats.kendalltau(a, t)[0] - stats.kendalltau(b, t)[0]
    idx = rng.integers(0, a.size, size=(n_boot, a.size))
    reps = np.array(
        [stats.kendalltau(a[i], t[i])[0] - stats.kendalltau(b[i], t[i])[0] for i in idx]
    )
    return float(drop), reps


# --------------------------------------------------------------------------- attention
def gl_quasi_matrix(gamma: torch.Tensor, eps: float) -> torch.Tensor:
    r""":math:`A=I+\varepsilon\sin(\Gamma)` for ``gamma`` of shape ``(..., d_h, d_h)``."""
    eps = positive(eps, "eps")
    if not isinstance(gamma, torch.Tensor):
        raise TypeError(f"gamma must be a torch tensor, got {type(gamma).__name__}")
    if gamma.dim() < 2 or gamma.shape[-1] != gamma.shape[-2]:
        raise ValueError(f"gamma must be (..., d_h, d_h), got {tuple(gamma.shape)}")
    eye = torch.eye(gamma.shape[-1], dtype=gamma.dtype)
    return eye + eps * torch.sin(gamma)


def gl_condition_bound(eps: float, d_h: int) -> float:
    r"""Bound :math:`\kappa_2(I+\varepsilon\sin\Gamma)\le(1+\varepsilon d_h)/(1-\varepsilon d_h)`.

    Valid for :math:`\varepsilon d_h<1`.

    Book: :prf:ref:`prop-05-gl-invertible`.
    """
    eps = positive(eps, "eps")
    d_h = positive_int(d_h, "d_h")
    if eps * d_h >= 1:
        raise ValueError(f"eps * d_h must be < 1, got {eps * d_h}")
    return (1 + eps * d_h) / (1 - eps * d_h)


def attention_logits(X: torch.Tensor, WQ: torch.Tensor, WK: torch.Tensor) -> torch.Tensor:
    r"""Attention logits :math:`XW_Q(XW_K)^\top`; invariant under :math:`(W_QA,W_KA^{-\top})`."""
    return (X @ WQ) @ (X @ WK).transpose(-1, -2)
