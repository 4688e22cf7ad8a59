"""Length generalization of limit transformers: hardmax attention, simulation by short inputs.

Paper: Z. Izzo, E. Nichani, J. D. Lee, *Quantitative Bounds for Length Generalization in
Transformers*, ICLR 2026 (arXiv:2510.27015, OpenReview ``TLSUIyBIfs``).
Book chapter: ``book/17-length-generalization/``.

The paper's proofs all rest on one *simulation principle* (``prop-17-simulation`` in
``theory.md``): if every input :math:`x` has a short input :math:`z`, :math:`|z|\\le N`, with
:math:`|f(x)-f(z)|,|g(x)-g(z)|\\le\\delta`, then

.. math::  |f(x)-g(x)| \\le \\sup_{|z|\\le N}|f(z)-g(z)| + 2\\delta .

With :math:`p`-bit arithmetic and logits scaled by :math:`\\log N`, a logit :math:`a` gets the
unnormalised weight :math:`N^{-(a^\\star-a)}`, which rounds to zero once :math:`N\\ge 2^{p/\\gamma}`
(:math:`\\gamma` = logit margin): attention becomes the uniform average over the argmax positions
(``lem-17-hardmax``). This module implements that attention, a one-layer limit transformer
written through its attainable tables (keys that ignore or see tokens), the deterministic short
simulation of a long input and its error bounds, the Markov block subsampling of the paper's
Lemma 5.3, the exact length thresholds of two toy classes, the shapes of the paper's bounds, and a
small batched transformer with periodic positional codes trained on SimpleTask and ModPTask (torch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.special import gammaln

from lib.validate import check_generator, positive, positive_int, real, real_array

__all__ = [
    "finite_precision_softmax",
    "hardmax",
    "hardmax_threshold",
    "logit_margin",
    "OneLayerLT",
    "random_one_layer_lt",
    "simulate_short",
    "present_rule_bound",
    "largest_remainder",
    "block_subsample",
    "suffix_statistic_average",
    "sticky_drifting_chain",
    "bootstrap_loglog_slopes",
    "attainable_stats",
    "max_gap",
    "min_train_length",
    "thm41_N",
    "thm52_N",
    "absence_probability",
    "sample_dirichlet_strings",
    "simple_task_target",
    "StackedAttentionReadout",
    "task_batch",
    "simple_task_batch",
    "train_stacked",
    "train_simple_task",
    "length_curve",
]


# --------------------------------------------------------------------------- finite precision
def finite_precision_softmax(logits, n_ctx: int, bits: float) -> np.ndarray:
    """Attention weights of a ``bits``-bit limit transformer at context length ``n_ctx``.

    The unnormalised weight of logit :math:`a_j` is :math:`s_j=N^{-(a^\\star-a_j)}` (logits times
    :math:`\\log N` after subtracting the max :math:`a^\\star`); it is rounded to zero when
    :math:`s_j\\le 2^{-p}`, decided in the log domain: :math:`(a^\\star-a_j)\\log_2N\\ge p`.
    The maximal logit is never dropped. ``bits=inf`` gives the exact softmax of :math:`a\\log N`.

    Parameters
    ----------
    logits : array, shape (..., T)
        :math:`a_{i,j}` over the key axis (last).
    n_ctx : int
        :math:`N\\ge1`, the context length that scales the logits.
    bits : float
        :math:`p>0` (``np.inf`` allowed).

    Returns
    -------
    array, shape (..., T): weights summing to one over the last axis.

    Book: :prf:ref:`lem-17-hardmax` in book/17-length-generalization/theory.md.
    """
    a = real_array(logits, "logits")
    if a.ndim < 1 or a.shape[-1] == 0:
        raise ValueError(f"logits must have a non-empty last axis, got shape {a.shape}")
    n = positive_int(n_ctx, "n_ctx")
    p = positive(bits, "bits", allow_inf=True)
    gap = a.max(axis=-1, keepdims=True) - a  # a* - a >= 0
    log2_s = -gap * math.log2(n)  # log2 of N^{-(a*-a)}
    keep = -log2_s < p  # rounded to 0 iff s <= 2^{-p}
    s = np.where(keep, np.exp2(log2_s), 0.0)
    return s / s.sum(axis=-1, keepdims=True)


def hardmax(logits) -> np.ndarray:
    """Uniform weights on the argmax positions (exact ties), shape as ``logits``.

    Book: :prf:ref:`lem-17-hardmax` in book/17-length-generalization/theory.md.
    """
    a = real_array(logits, "logits")
    if a.ndim < 1 or a.shape[-1] == 0:
        raise ValueError(f"logits must have a non-empty last axis, got shape {a.shape}")
    top = (a == a.max(axis=-1, keepdims=True)).astype(float)
    return top / top.sum(axis=-1, keepdims=True)


def hardmax_threshold(bits: float, gamma: float) -> float:
    """:math:`2^{p/\\gamma}`: from this context length on, every non-maximal weight rounds to 0.

    Book: :prf:ref:`lem-17-hardmax` in book/17-length-generalization/theory.md.
    """
    p = positive(bits, "bits")
    g = positive(gamma, "gamma")
    return float(2.0 ** (p / g))


def logit_margin(logit_values) -> float:
    """:math:`\\gamma`: smallest gap between distinct attainable logits (inf if only one)."""
    v = np.unique(real_array(logit_values, "logit_values").ravel())
    if v.size == 0:
        raise ValueError("logit_values must not be empty")
    return float(np.diff(v).min()) if v.size > 1 else math.inf


# ------------------------------------------------------------------ one-layer limit transformer
@dataclass(frozen=True)
class OneLayerLT:
    """A batch of ``M`` one-layer, :math:`\\tau`-local, :math:`\\Delta`-periodic limit transformers.

    Each model is written through the tables it can attain (any such table is realised by
    embeddings, periodic positional codes and a bilinear form of large enough width):

    * ``logit_table`` (M, S, Δ, Δ): :math:`\\Lambda[y,r,r']` = token-blind key logit of a key at
      residue :math:`r'` for a query token :math:`y` at residue :math:`r` (keys ignore tokens, so
      whole residue classes tie: this is what makes the model *count*); or (M, S, Δ, S, Δ):
      :math:`\\Lambda[y,r,s,r']`, keys that see their token :math:`s` (argmax sets are unions of
      (token, residue) classes, and a rare class can decide the output);
    * ``phi`` (M, τ+1): local bias :math:`\\phi(t)` added to the key at offset
      :math:`t\\le\\tau` from the query;
    * ``values`` (M, S, Δ, d): :math:`V(E_s+P_r)`; ``embed`` (M, S, Δ, d): residual stream
      :math:`E_y+P_r`;
    * readout :math:`f=w^\\top(h+B\\,\\mathrm{relu}(Ah+b))` with ``A`` (M,h,d), ``b`` (M,h),
      ``B`` (M,d,h), ``w_out`` (M,d).

    Positions are 1-indexed; position :math:`j` has residue :math:`j\\bmod\\Delta`.
    """

    logit_table: np.ndarray
    phi: np.ndarray
    values: np.ndarray
    embed: np.ndarray
    A: np.ndarray
    b: np.ndarray
    B: np.ndarray
    w_out: np.ndarray

    def __post_init__(self):
        lt = real_array(self.logit_table, "logit_table")
        blind = lt.ndim == 4 and lt.shape[2] == lt.shape[3]
        seeing = lt.ndim == 5 and lt.shape[3:] == lt.shape[1:3]
        if not (blind or seeing):
            raise ValueError(
                f"logit_table must have shape (M, S, Δ, Δ) or (M, S, Δ, S, Δ), got {lt.shape}"
            )
        M, S, D = lt.shape[:3]
        real_array(self.phi, "phi", ndim=2, shape=(M, None))
        d = real_array(self.values, "values", ndim=4, shape=(M, S, D, None)).shape[-1]
        real_array(self.embed, "embed", shape=(M, S, D, d))
        h = real_array(self.A, "A", shape=(M, None, d)).shape[1]
        real_array(self.b, "b", shape=(M, h))
        real_array(self.B, "B", shape=(M, d, h))
        real_array(self.w_out, "w_out", shape=(M, d))

    @property
    def n_models(self) -> int:
        return self.logit_table.shape[0]

    @property
    def n_tokens(self) -> int:
        return self.logit_table.shape[1]

    @property
    def period(self) -> int:
        return self.logit_table.shape[2]

    @property
    def tau(self) -> int:
        return self.phi.shape[1] - 1

    @property
    def keys_see_tokens(self) -> bool:
        return self.logit_table.ndim == 5

    def logits(self, x) -> np.ndarray:
        """Logits of the last query over all keys, shape (M, T)."""
        x = _tokens(x, self.n_tokens)
        T, D = x.size, self.period
        r = np.arange(1, T + 1) % D
        if self.keys_see_tokens:
            a = self.logit_table[:, x[-1], T % D][:, x, r]  # Λ[y, r_T, x_j, r_j], (M, T)
        else:
            a = self.logit_table[:, x[-1], T % D][:, r].copy()  # Λ[y, r_T, r_j], (M, T)
        k = min(self.tau, T - 1)
        a[:, T - 1 - np.arange(k + 1)] += self.phi[:, : k + 1]  # local bias phi(t), t = T - j
        return a

    def argmax_far_classes(self, x) -> tuple[np.ndarray, np.ndarray]:
        """Far (token, residue) classes in the hardmax argmax set, and the local positions in it.

        Far keys are the positions before the last :math:`\\tau+1`; class :math:`c=s\\Delta+r`
        for token :math:`s` at residue :math:`r`. Returns ``F`` (M, S·Δ) bool and ``n_local``
        (M,): how many of the last :math:`\\tau+1` positions attain the maximal logit.
        """
        x = _tokens(x, self.n_tokens)
        T, D, t = x.size, self.period, self.tau
        a = self.logits(x)
        top = a == a.max(axis=1, keepdims=True)  # (M, T)
        n_far = max(T - t - 1, 0)
        cls = x[:n_far] * D + np.arange(1, n_far + 1) % D  # (token, residue) class of far keys
        onehot = np.zeros((n_far, self.n_tokens * D))
        onehot[np.arange(n_far), cls] = 1.0
        return top[:, :n_far].astype(float) @ onehot > 0, top[:, n_far:].sum(axis=1)

    def reads_far_counts(self, x, *, argmax=None) -> np.ndarray:
        """Whether the hardmax output depends on how often far classes occur, shape (M,) bool.

        The output is a weighted average over the argmax set, and the weights of far classes
        depend on their counts unless the argmax set holds a single far class and no local
        position (output = that class's value) or no far position at all (output reads the suffix
        only). Pairs (model, input) where it does not are *vacuous* for a simulation check.
        ``argmax``: the output of :meth:`argmax_far_classes` for ``x``, if already computed.
        """
        F, n_local = self.argmax_far_classes(x) if argmax is None else argmax
        n_cls = F.sum(axis=1)
        return (n_cls >= 2) | ((n_cls >= 1) & (n_local >= 1))

    def forward(self, x, bits: float = math.inf, *, exact_hardmax: bool = False) -> np.ndarray:
        """Output at the last position, shape (M,): explicit attention over all ``T`` keys.

        ``bits`` selects the :math:`p`-bit attention of :func:`finite_precision_softmax` with
        :math:`N=T`; ``exact_hardmax=True`` uses :func:`hardmax` instead.
        """
        x = _tokens(x, self.n_tokens)
        T, D, S = x.size, self.period, self.n_tokens
        a = self.logits(x)
        w = hardmax(a) if exact_hardmax else finite_precision_softmax(a, T, bits)
        cls = x * D + np.arange(1, T + 1) % D  # (token, residue) class of each key
        onehot = np.zeros((T, S * D))
        onehot[np.arange(T), cls] = 1.0
        W = w @ onehot  # attention mass per class, (M, S*Δ)
        attn = np.einsum("mc,mcd->md", W, self.values.reshape(self.n_models, S * D, -1))
        h = self.embed[:, x[-1], T % D] + attn
        hid = np.maximum(np.einsum("mhd,md->mh", self.A, h) + self.b, 0.0)
        return np.einsum("md,md->m", self.w_out, h + np.einsum("mdh,mh->md", self.B, hid))

    @cached_property
    def _lipschitz_value_scale(self) -> np.ndarray:
        return self.readout_lipschitz() * self.value_bound()

    def readout_lipschitz(self) -> np.ndarray:
        """:math:`\\|w\\|_2(1+\\|B\\|_2\\|A\\|_2)`: Lipschitz constant of the readout in
        :math:`h`, shape (M,)."""
        nA = np.linalg.norm(self.A, ord=2, axis=(1, 2))
        nB = np.linalg.norm(self.B, ord=2, axis=(1, 2))
        return np.linalg.norm(self.w_out, axis=1) * (1.0 + nA * nB)

    def value_bound(self) -> np.ndarray:
        """:math:`V_{\\max}=\\max_{s,r}\\|V(E_s+P_r)\\|_2`, shape (M,)."""
        return np.linalg.norm(self.values, axis=-1).reshape(self.n_models, -1).max(axis=1)


def _tokens(x, S: int) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"x must be a non-empty 1-D integer array, got shape {arr.shape}")
    if arr.min() < 0 or arr.max() >= S:
        raise ValueError(f"x must have tokens in 0..{S - 1}")
    return arr.astype(np.int64)


def random_one_layer_lt(
    n_models: int,
    S: int,
    Delta: int,
    tau: int,
    d: int,
    hidden: int,
    rng,
    *,
    logit_range: int = 3,
    keys_see_tokens: bool = False,
) -> OneLayerLT:
    """``n_models`` random one-layer limit transformers, integer logits (:math:`\\gamma=1`).

    Logit tables and local biases are integers in :math:`[-r, r]` (``r = logit_range``), so every
    attainable logit is an integer and the logit margin is at least 1; the rest is Gaussian with
    variance :math:`1/\\text{fan-in}`. ``keys_see_tokens`` draws a table (M, S, Δ, S, Δ) whose key
    logit depends on the key's token too.
    """
    M = positive_int(n_models, "n_models")
    S, D = positive_int(S, "S"), positive_int(Delta, "Delta")
    t = positive_int(tau + 1, "tau + 1") - 1
    d, h = positive_int(d, "d"), positive_int(hidden, "hidden")
    g = check_generator(rng)
    r = positive_int(logit_range, "logit_range")
    table_shape = (M, S, D, S, D) if keys_see_tokens else (M, S, D, D)
    return OneLayerLT(
        logit_table=g.integers(-r, r + 1, table_shape).astype(float),
        phi=g.integers(-r, r + 1, (M, t + 1)).astype(float),
        values=g.standard_normal((M, S, D, d)) / np.sqrt(d),
        embed=g.standard_normal((M, S, D, d)) / np.sqrt(d),
        A=g.standard_normal((M, h, d)) / np.sqrt(d),
        b=g.standard_normal((M, h)) / np.sqrt(d),
        B=g.standard_normal((M, d, h)) / np.sqrt(h),
        w_out=g.standard_normal((M, d)) / np.sqrt(d),
    )


# --------------------------------------------------------------------- deterministic simulation
def largest_remainder(counts, slots: int) -> np.ndarray:
    """Integers :math:`a_s\\ge0`, :math:`\\sum a_s=k`, :math:`|a_s-kc_s/\\sum c|<1` (Hamilton)."""
    c = real_array(counts, "counts", ndim=1)
    if c.min() < 0 or c.sum() <= 0:
        raise ValueError("counts must be non-negative with a positive sum")
    k = int(slots)
    if k < 0:
        raise ValueError(f"slots must be >= 0, got {k}")
    q = k * c / c.sum()
    a = np.floor(q).astype(np.int64)
    extra = k - int(a.sum())
    if extra > 0:
        a[np.argsort(-(q - a), kind="stable")[:extra]] += 1
    return a


def simulate_short(
    x, n: int, Delta: int, tau: int, *, copy_suffix: bool = True, keep_present: bool = False
) -> np.ndarray:
    """A short input :math:`z`, :math:`|z|\\le n`, that a one-layer hardmax limit transformer cannot
    tell from :math:`x` up to :math:`O(1/n)`.

    (i) copy the last :math:`\\tau+1` tokens; (ii) prefix length :math:`m'\\le n-\\tau-1` with
    :math:`m'+\\tau+1\\equiv T \\pmod\\Delta`; (iii) for each residue :math:`r` give the prefix
    slots of residue :math:`r` tokens in the proportions of :math:`x`'s prefix positions of residue
    :math:`r` (largest remainder); (iv) fill the slots. With ``copy_suffix=False`` (a control) the
    suffix is not copied: all :math:`|z|` positions are filled from the residue histograms of the
    whole of :math:`x`.

    The :math:`O(1/n)` bound (eq. ``eq-17-det-bound``) needs **token-blind keys**: then each
    argmax class is a whole residue class of size :math:`\\approx T/\\Delta` and rounding its
    token proportions costs :math:`O(\\Delta/n)`. With keys that see tokens, a rare token inside an
    argmax class must be copied exactly. For the same reason this function does **not** apply the
    rule "count :math:`\\ge1` for every token present" of the general construction: largest
    remainder may round a token of share below :math:`\\Delta/n` in a residue class to zero, which
    token-blind keys do not see beyond its :math:`O(\\Delta/n)` share of the average.
    ``keep_present=True`` applies it, for keys that see tokens: each token present among the prefix
    positions of residue :math:`r` first gets one slot, and the remaining slots are shared by
    largest remainder (needs at least as many slots per residue as tokens present).

    Book: :prf:ref:`prop-17-deterministic` and :prf:ref:`prop-17-present` in
    book/17-length-generalization/simulation.md.
    """
    x = np.asarray(x)
    if x.ndim != 1 or not np.issubdtype(x.dtype, np.integer) or x.size == 0:
        raise ValueError("x must be a non-empty 1-D integer array")
    D = positive_int(Delta, "Delta")
    t = positive_int(tau + 1, "tau + 1") - 1
    n = positive_int(n, "n")
    if n < t + 1 + D:
        raise ValueError(f"n must be >= tau + 1 + Delta = {t + 1 + D}, got {n}")
    T = x.size
    if T <= n:
        return x.copy()
    keep = t + 1 if copy_suffix else 0
    m = n - keep
    m -= (m + keep - T) % D  # m + keep ≡ T (mod Δ)
    src = x[: T - keep]
    pos_src = np.arange(1, src.size + 1) % D
    pos_z = np.arange(1, m + 1) % D
    S = int(x.max()) + 1
    z = np.empty(m, dtype=x.dtype)
    for r in range(D):
        slots = np.flatnonzero(pos_z == r)
        if slots.size == 0:
            continue
        counts = np.bincount(src[pos_src == r], minlength=S)
        if keep_present:
            present = (counts > 0).astype(np.int64)
            if slots.size < present.sum():
                raise ValueError(
                    f"n = {n} leaves {slots.size} slots at residue {r} for {present.sum()} tokens "
                    "present: keep_present needs n >= tau + 1 + Delta * |Sigma|"
                )
            alloc = present + largest_remainder(counts, slots.size - present.sum())
        else:
            alloc = largest_remainder(counts, slots.size)
        z[slots] = np.repeat(np.arange(S), alloc)
    return np.concatenate([z, x[T - keep :]]) if keep else z


def present_rule_bound(model: OneLayerLT, x, z, *, argmax=None) -> np.ndarray:
    """Our bound on :math:`|f(x)-f(z)|` for ``z = simulate_short(x, n, Δ, τ, keep_present=True)``,
    shape (M,):

    .. math:: 2L_{\\rm out}V_{\\max}\\Big(\\frac{2|F|+\\tau+1}{\\lambda C_F}+\\delta\\Big),

    with :math:`F` the far argmax classes of :math:`x`, :math:`C_F` their count in :math:`x`'s
    prefix, :math:`\\lambda_r=(m_r-k_r)/M_r` (slots of residue :math:`r` in :math:`z`'s prefix,
    tokens present, positions in :math:`x`'s prefix), :math:`\\lambda=\\min_r\\lambda_r` and
    :math:`\\delta=\\max_r\\lambda_r/\\lambda-1`. ``inf`` where :math:`C_F=0` (the output reads
    the suffix only, and :math:`f(z)=f(x)`). ``argmax``: ``model.argmax_far_classes(x)``, if
    already computed.

    Book: :prf:ref:`prop-17-present` in book/17-length-generalization/simulation.md.
    """
    x, z = _tokens(x, model.n_tokens), _tokens(z, model.n_tokens)
    D, t, S = model.period, model.tau, model.n_tokens
    if z.size >= x.size:
        raise ValueError("z must be shorter than x")
    px, pz = x[: x.size - t - 1], z[: z.size - t - 1]
    rx, rz = np.arange(1, px.size + 1) % D, np.arange(1, pz.size + 1) % D
    M_r = np.bincount(rx, minlength=D)
    m_r = np.bincount(rz, minlength=D)
    counts = np.bincount(px * D + rx, minlength=S * D)  # C_c, class c = s * D + r
    k_r = (counts.reshape(S, D) > 0).sum(axis=0)
    lam_r = (m_r - k_r) / M_r
    lam = lam_r.min()
    if lam <= 0:
        raise ValueError("z leaves no slot beyond the present tokens at some residue")
    F, _ = model.argmax_far_classes(x) if argmax is None else argmax
    C_F = F.astype(float) @ counts
    size_F = F.sum(axis=1)
    with np.errstate(divide="ignore"):
        rel = (2 * size_F + t + 1) / (lam * C_F) + lam_r.max() / lam - 1
    return 2 * model._lipschitz_value_scale * rel


# --------------------------------------------------------------------------- Lemma 5.3
def block_subsample(T: int, n: int, tau: int, rng, B: int | None = None) -> np.ndarray:
    """Kept indices (sorted) of a keep/skip Markov chain over positions ``0..T-1``.

    Keep-runs are geometric with mean :math:`B`
    (default :math:`\\lceil(\\tau+1)^{2/3}n^{1/3}\\rceil`),
    skip-runs geometric with mean :math:`B(T/n-1)`, so about ``n`` positions are kept in long
    contiguous blocks at random places. The chain starts in its stationary law; a chain that
    keeps at most :math:`\\tau` positions (no window at all; rare unless :math:`n/B` is small) is
    redrawn, i.e. the law is conditioned on keeping at least :math:`\\tau+1`. Requires
    :math:`n\\le T/2` (mean skip-run :math:`\\ge B\\ge1`): a geometric skip-run is at least 1,
    so for :math:`n>T/2` far fewer than ``n`` positions would be kept.

    Book: :prf:ref:`lem-17-subsampling` in book/17-length-generalization/simulation.md.
    """
    T, n = positive_int(T, "T"), positive_int(n, "n")
    t = positive_int(tau + 1, "tau + 1") - 1
    g = check_generator(rng)
    if 2 * n > T:
        raise ValueError(f"n must be <= T/2 = {T / 2:g} (skip-runs are >= 1), got {n}")
    if B is None:
        B = math.ceil((t + 1) ** (2 / 3) * n ** (1 / 3))
    B = positive_int(B, "B")
    mean_skip = B * (T / n - 1)
    cycles = int(2 * T / (B + mean_skip)) + 16
    while True:  # redraw the (rare) chains that keep fewer than tau + 1 positions
        runs = np.empty(0, dtype=np.int64)
        state0 = g.random() < n / T
        while runs.sum() < T:
            keep = g.geometric(1.0 / B, cycles)
            skip = g.geometric(1.0 / mean_skip, cycles)
            pair = np.stack([keep, skip], 1) if state0 else np.stack([skip, keep], 1)
            runs = np.concatenate([runs, pair.ravel()])
        states = np.zeros(runs.size, dtype=bool)
        states[0 if state0 else 1 :: 2] = True  # runs alternate keep/skip from state0
        kept = np.flatnonzero(np.repeat(states, runs)[:T])
        if kept.size > t:
            return kept


def suffix_statistic_average(x, U, tau: int) -> float:
    """:math:`\\frac1{T-\\tau}\\sum_{t>\\tau}q(x_{t-\\tau:t},\\mu(x_{\\le t}))` with
    :math:`q(w,\\mu)=\\tanh\\langle U[w],\\mu\\rangle`.

    ``U`` has shape (S**(τ+1), S): one vector per window :math:`w` (window read as a base-S
    number, oldest token first). :math:`|q|\\le1` and :math:`q` is :math:`\\max|U|`-Lipschitz in
    :math:`\\mu` for the :math:`\\ell_1` norm.
    """
    x = np.asarray(x)
    t = positive_int(tau + 1, "tau + 1") - 1
    U = real_array(U, "U", ndim=2)
    S = U.shape[1]
    if U.shape[0] != S ** (t + 1):
        raise ValueError(
            f"U must have shape (S**(tau+1), S) = ({S ** (t + 1)}, {S}), got {U.shape}"
        )
    if x.ndim != 1 or x.size <= t or not np.issubdtype(x.dtype, np.integer):
        raise ValueError(f"x must be a 1-D integer array longer than tau = {t}")
    T = x.size
    code = np.zeros(T - t, dtype=np.int64)
    for k in range(t + 1):  # window x_{t-tau..t} as a base-S number
        code = code * S + x[k : T - t + k]
    inner = np.zeros(T - t)  # <U[w_t], counts(x_{<=t})>, one token at a time (S is small)
    for s in range(S):
        inner += U[code, s] * np.cumsum(x == s)[t:]
    return float(np.tanh(inner / np.arange(t + 1, T + 1)).mean())  # mu = counts / t


def sticky_drifting_chain(T: int, S: int, stay: float, rng) -> np.ndarray:
    """A length-``T`` string: with prob. ``stay`` repeat the last token, else draw from a law that
    drifts linearly from one Dirichlet(1) draw to another over the string."""
    T, S = positive_int(T, "T"), positive_int(S, "S")
    p = real(stay, "stay", lo=0.0, hi=1.0, hi_open=True)
    g = check_generator(rng)
    p0, p1 = g.dirichlet(np.ones(S)), g.dirichlet(np.ones(S))
    frac = np.arange(T)[:, None] / max(T - 1, 1)
    law = (1 - frac) * p0 + frac * p1
    fresh = (law.cumsum(1) > g.random((T, 1))).argmax(1)
    move = g.random(T) >= p
    move[0] = True
    idx = np.maximum.accumulate(np.where(move, np.arange(T), 0))
    return fresh[idx]


def bootstrap_loglog_slopes(
    x, values, rng, *, weights=None, rms: bool = False, n_boot: int = 400
) -> np.ndarray:
    """Two-way bootstrap of the log-log slope of an averaged error against ``x``.

    ``values`` (A, K, B): errors for A units of one kind (strings, instances), K values of
    :math:`x` and B units of another kind (models, draws). Each replicate resamples the A and the B
    units with replacement, reduces over them (weighted mean, or root mean square if ``rms``) and
    fits the slope of :math:`\\log` statistic against :math:`\\log x`. ``weights`` (A, B), optional,
    non-negative (e.g. a 0/1 mask of non-vacuous pairs). Returns the slopes, shape (n_boot,); their
    SD is the noise of the slope used to set criteria.

    Book: :prf:ref:`prop-17-deterministic` and :prf:ref:`lem-17-subsampling` in
    book/17-length-generalization/simulation.md.
    """
    lx = np.log(real_array(x, "x", ndim=1))
    v = real_array(values, "values", ndim=3, shape=(None, lx.size, None))
    A, K, Bn = v.shape
    w = np.ones((A, Bn)) if weights is None else real_array(weights, "weights", shape=(A, Bn))
    if np.any(w < 0):
        raise ValueError("weights must be non-negative")
    g = check_generator(rng)
    nb = positive_int(n_boot, "n_boot")
    ia, ib = g.integers(0, A, (nb, A)), g.integers(0, Bn, (nb, Bn))
    out = np.empty(nb)
    xc = lx - lx.mean()
    for r in range(nb):
        ww = w[ia[r]][:, ib[r]]  # (A, B)
        vv = v[ia[r]][:, :, ib[r]]  # (A, K, B)
        vv = vv**2 if rms else vv
        stat = np.einsum("akb,ab->k", vv, ww) / ww.sum()
        ly = np.log(np.sqrt(stat) if rms else stat)
        out[r] = xc @ (ly - ly.mean()) / (xc @ xc)
    return out


# --------------------------------------------------------------------------- exact toy thresholds
def _class_sizes(N: int, Delta: int, k: int) -> np.ndarray:
    T = np.arange(1, N + 1)
    return (T - k) // Delta + 1 if k >= 1 else T // Delta  # #{t<=T : t ≡ k mod Δ}


def attainable_stats(task: str, N: int, Delta: int | None = None, k: int = 1) -> np.ndarray:
    """Sorted statistic values that inputs of length :math:`\\le N` can produce.

    * ``"simple"``: :math:`m=(c_0-c_1)/(c_0+c_1)=2c_0/T-1`, :math:`1\\le T\\le N`;
    * ``"modp"``: fraction of ones among positions :math:`t\\equiv k\\pmod\\Delta` (1-indexed).

    Values are formed from exact reduced integer pairs :math:`(c/g, q/g)`, :math:`g=\\gcd(c,q)`, so
    equal rationals are merged exactly (no floating-point near-duplicates).

    Book: :prf:ref:`prop-17-toy` in book/17-length-generalization/theory.md.
    """
    N = positive_int(N, "N")
    if task == "simple":
        dens = np.arange(1, N + 1)
        num_scale = 2.0
        offset = -1.0
    elif task == "modp":
        if Delta is None:
            raise ValueError("Delta is required for task 'modp'")
        D = positive_int(Delta, "Delta")
        if not (0 <= k < D):
            raise ValueError(f"k must be in 0..Delta-1, got {k}")
        sizes = _class_sizes(N, D, k)
        dens = np.unique(sizes[sizes > 0])
        if dens.size == 0:
            raise ValueError(f"no position <= N = {N} is ≡ k = {k} (mod Delta = {D})")
        num_scale, offset = 1.0, 0.0
    else:
        raise ValueError(f"task must be 'simple' or 'modp', got {task!r}")
    # exact rationals c/q as reduced integer pairs, so that equal values are merged exactly
    num = np.concatenate([np.arange(q + 1) for q in dens])
    den = np.concatenate([np.full(q + 1, q) for q in dens])
    g = np.gcd(num, den)
    num, den = num // g, den // g
    key = np.unique(num * (den.max() + 1) + den)  # one integer per reduced pair (num, den)
    vals = num_scale * (key // (den.max() + 1)) / (key % (den.max() + 1)) + offset
    return np.sort(vals)


def max_gap(v) -> float:
    """Largest gap between consecutive sorted values of ``v``."""
    v = np.sort(real_array(v, "v", ndim=1))
    if v.size < 2:
        raise ValueError("v needs at least two values")
    return float(np.diff(v).max())


def min_train_length(task: str, eps: float, L: float, Delta: int | None = None) -> int:
    """Smallest :math:`N` with :math:`L\\cdot\\mathrm{gap}_N\\le\\varepsilon`, by bisection over
    :math:`N` on the enumerated attainable set (the gap is non-increasing: the sets are nested).

    For two :math:`L`-Lipschitz readouts agreeing on all lengths :math:`\\le N`,
    :math:`\\sup|f-g|=L\\cdot\\mathrm{gap}_N` at worst (a tent in the largest gap).

    Book: :prf:ref:`prop-17-toy` in book/17-length-generalization/theory.md.
    """
    e, Lc = positive(eps, "eps"), positive(L, "L")

    def ok(N: int) -> bool:
        return Lc * max_gap(attainable_stats(task, N, Delta)) <= e * (1 + 1e-9)  # rounding slack

    lo, hi = 1, 2
    while not ok(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:  # invariant: not ok(lo) or lo == 1, ok(hi)
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return 1 if ok(1) else hi


# --------------------------------------------------------------------------- shapes of the bounds
def thm41_N(bits, gamma, L, Delta, S, tau, eps, const: float = 1.0) -> float:
    """Shape of Theorem 4.1 (constant 1):
    :math:`\\max\\{2^{p/\\gamma},\\,L^2\\Delta^7|\\Sigma|^6\\tau^2/\\varepsilon^2\\}`."""
    return max(
        hardmax_threshold(bits, gamma),
        positive(const, "const")
        * positive(L, "L") ** 2
        * positive_int(Delta, "Delta") ** 7
        * positive_int(S, "S") ** 6
        * positive_int(tau, "tau") ** 2
        / positive(eps, "eps") ** 2,
    )


def thm52_N(C, gamma_f, gamma_g, eps, form: str = "power") -> float:
    """Shape of Theorem 5.2: ``power`` :math:`(C/\\varepsilon)^{\\max(1/\\gamma_f,1/\\gamma_g,3)}`,
    or ``product`` :math:`C\\,\\varepsilon^{-\\max(\\cdot)}` (the two printed forms)."""
    C, e = positive(C, "C"), positive(eps, "eps")
    ex = max(1 / positive(gamma_f, "gamma_f"), 1 / positive(gamma_g, "gamma_g"), 3.0)
    if form == "power":
        return (C / e) ** ex
    if form == "product":
        return C * e ** (-ex)
    raise ValueError(f"form must be 'power' or 'product', got {form!r}")


# ------------------------------------------------------------------ Dirichlet inputs (Thm 4.2)
def absence_probability(T, alpha_s: float, alpha_total: float) -> np.ndarray:
    """:math:`P(\\text{token } s \\text{ absent from } x_{1:T})=E(1-\\pi_s)^T` for
    :math:`\\pi\\sim\\mathrm{Dir}(\\alpha)`:
    :math:`\\frac{\\Gamma(A)\\Gamma(A-\\alpha_s+T)}{\\Gamma(A-\\alpha_s)\\Gamma(A+T)}\\sim
    \\frac{\\Gamma(A)}{\\Gamma(A-\\alpha_s)}T^{-\\alpha_s}`, :math:`A=\\sum\\alpha`.

    Book: :prf:ref:`prop-17-absence` in book/17-length-generalization/theory.md.
    """
    T = real_array(T, "T")
    if np.any(T < 0):
        raise ValueError("T must be >= 0")
    a = positive(alpha_s, "alpha_s")
    A = positive(alpha_total, "alpha_total")
    if A <= a:
        raise ValueError("alpha_total must exceed alpha_s")
    return np.exp(gammaln(A) + gammaln(A - a + T) - gammaln(A - a) - gammaln(A + T))


def sample_dirichlet_strings(batch: int, T: int, alpha, rng) -> np.ndarray:
    """``batch`` strings of length ``T``: :math:`\\pi\\sim\\mathrm{Dir}(\\alpha)` per string,
    tokens i.i.d. :math:`\\pi`."""
    b, T = positive_int(batch, "batch"), positive_int(T, "T")
    al = real_array(alpha, "alpha", ndim=1)
    if al.size < 2 or np.any(al <= 0):
        raise ValueError("alpha must have >= 2 positive entries")
    g = check_generator(rng)
    pi = g.dirichlet(al, b)  # (batch, S)
    u = g.random((b, T, 1))
    return (pi.cumsum(1)[:, None, :] < u).sum(-1).clip(max=al.size - 1)


def simple_task_target(x, omega: float) -> np.ndarray:
    """SimpleTask: :math:`\\sin(\\omega(c_0-c_1)/(c_0+c_1))` over the last axis of binary ``x``."""
    x = np.asarray(x)
    T = x.shape[-1]
    m = (T - 2 * x.sum(-1)) / T
    return np.sin(real(omega, "omega") * m)


# --------------------------------------------------------------------- tiny transformer (torch)
TASKS = ("simple", "modp")


def _periods(tasks, params) -> tuple[list, np.ndarray, np.ndarray]:
    """Task names, parameters and periods :math:`\\Delta_i` (1 for SimpleTask) of a stack."""
    tasks = [tasks] if isinstance(tasks, str) else list(tasks)
    for t in tasks:
        if t not in TASKS:
            raise ValueError(f"tasks must be 'simple' or 'modp', got {t!r}")
    par = real_array(params, "params", ndim=1)
    if par.size != len(tasks) or par.size == 0:
        raise ValueError(f"params must have one entry per task ({len(tasks)}), got {par.size}")
    D = np.ones(par.size, dtype=np.int64)
    for i, t in enumerate(tasks):
        if t == "modp":
            if par[i] != round(par[i]) or par[i] < 2:
                raise ValueError(f"params of a 'modp' task is the period Delta >= 2, got {par[i]}")
            D[i] = int(par[i])
    return tasks, par, D


def task_batch(tasks, params, n_max, batch: int, rng, *, fixed_length: bool = False):
    """Training or test data for ``M`` models, one task each, in (token, residue) count form.

    * ``"simple"`` (SimpleTask, parameter :math:`\\omega`): binary strings with
      :math:`\\pi\\sim\\mathrm{Dir}(1,1)` per string, target
      :math:`\\sin(\\omega(c_0-c_1)/(c_0+c_1))`; no positions (:math:`\\Delta=1`).
    * ``"modp"`` (ModPTask, parameter :math:`\\Delta\\ge2`): the token at position :math:`t`
      (1-indexed) is 1 with probability :math:`p_{t\\bmod\\Delta}`, the :math:`p_r` i.i.d.
      Uniform(0,1) per string (our periodic input law: with one :math:`\\pi` for all residues, the
      other residues would predict the target at long lengths); target
      :math:`\\rho=\\#\\{t\\equiv1:x_t=1\\}/\\#\\{t\\le T:t\\equiv1\\}` (:math:`k=1`, the class
      of position 1, which every length has).

    Lengths are uniform on :math:`1..N_i` (``n_max[i]``), or all :math:`N_i` if ``fixed_length``.
    A string is exchangeable within each residue class given its law, so the counts and the last
    token are drawn directly. Returns ``counts`` (M, b, 2, Δmax): tokens per (token, residue),
    ``last`` (M, b), ``res`` (M, b) :math:`=T\\bmod\\Delta_i`, ``lengths`` (M, b) and
    ``target`` (M, b).
    """
    tasks, par, D = _periods(tasks, params)
    g = check_generator(rng)
    b = positive_int(batch, "batch")
    n_max = np.asarray(n_max)
    if n_max.shape != par.shape or not np.issubdtype(n_max.dtype, np.integer) or n_max.min() < 1:
        raise ValueError("n_max must be positive integers, one per task")
    M, Dm = par.size, int(D.max())
    if fixed_length:
        L = np.broadcast_to(n_max[:, None], (M, b)).astype(np.int64)
    else:
        L = (g.random((M, b)) * n_max[:, None]).astype(np.int64) + 1
    r = np.arange(Dm)
    Dv, Lv = D[:, None, None], L[..., None]
    # number of positions 1 <= t <= T with t ≡ r (mod Δ_i); none for r >= Δ_i
    npos = np.where(r == 0, Lv // Dv, (Lv - r) // Dv + 1)
    npos = np.where(r < Dv, np.maximum(npos, 0), 0)
    modp = np.array([t == "modp" for t in tasks])
    p = g.random((M, b, Dm))
    p = np.where(modp[:, None, None], p, p[..., :1])  # SimpleTask: one law per string
    res = L % D[:, None]
    at_last = (r == res[..., None]).astype(np.int64)
    p_last = np.take_along_axis(p, res[..., None], -1)[..., 0]
    last = (g.random((M, b)) < p_last).astype(np.int64)
    ones = g.binomial(npos - at_last, p) + at_last * last[..., None]
    counts = np.stack([npos - ones, ones], 2).astype(float)
    y = np.sin(par[:, None] * (L - 2 * ones[..., 0]) / L)  # SimpleTask
    if modp.any():
        k = 1  # the residue class of position 1
        y = np.where(modp[:, None], ones[..., k] / np.maximum(npos[..., k], 1), y)
    return counts, last, res, L, y


def simple_task_batch(omegas, n_max, batch: int, rng, *, fixed_length: bool = False):
    """SimpleTask data in the form ``(counts (M,b,2), last, lengths, target)``: the
    :math:`\\Delta=1` case of :func:`task_batch`."""
    om = real_array(omegas, "omegas", ndim=1)
    counts, last, _, L, y = task_batch(
        ["simple"] * om.size, om, n_max, batch, rng, fixed_length=fixed_length
    )
    return counts[..., 0], last, L, y


class StackedAttentionReadout:
    """``M`` independent one-layer, one-head transformers, trained together (every weight has a
    leading model axis). Model :math:`i` has period :math:`\\Delta_i` (``periods``; 1 means no
    positional encoding) and reads position :math:`j` as :math:`y_j=E_{x_j}+P_{j\\bmod\\Delta_i}`
    (``P`` is zero for :math:`\\Delta_i=1`). Only the last query is computed:

    .. math:: h=y_T+\\sum_{j\\le T}\\mathrm{softmax}_j
              \\big(\\langle W_qy_T,W_ky_j\\rangle/\\sqrt d\\big)W_vy_j,
              \\qquad f=w^\\top\\mathrm{relu}(W_1h+b_1)+c.

    Keys and values of position :math:`j` depend on its (token, residue) class alone, so the
    softmax sum regroups exactly by class: :math:`\\sum_cn_ce^{\\ell_c}W_vy_c/\\sum_cn_ce^{\\ell_c}`
    with class counts :math:`n_c`. :meth:`from_counts` computes that (cost independent of
    :math:`T`); :meth:`__call__` runs the explicit attention over a padded sequence, and a unit
    test checks that the two agree. Plain softmax: no :math:`\\log N` scaling, no rounding.

    Book: :numref:`fig-17-train-curves` in book/17-length-generalization/training.md.
    """

    def __init__(self, M: int, S: int, d: int, hidden: int, gen, *, periods=None, dtype=None):
        import torch

        dtype = torch.float64 if dtype is None else dtype

        M, S = positive_int(M, "M"), positive_int(S, "S")
        d, h = positive_int(d, "d"), positive_int(hidden, "hidden")
        per = np.ones(M, dtype=np.int64) if periods is None else np.asarray(periods)
        if per.shape != (M,) or not np.issubdtype(per.dtype, np.integer) or per.min() < 1:
            raise ValueError(f"periods must be M = {M} positive integers")

        def p(*shape, scale):
            return (
                (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale)
                .to(dtype)
                .requires_grad_()
            )

        self.E = p(M, S, d, scale=1.0)
        self.P = p(M, int(per.max()), d, scale=1.0)
        self.Wq, self.Wk, self.Wv = (p(M, d, d, scale=d**-0.5) for _ in range(3))
        self.W1, self.b1 = p(M, d, h, scale=d**-0.5), p(M, 1, h, scale=0.0)
        self.w2, self.c = p(M, h, 1, scale=h**-0.5), p(M, 1, scale=0.0)
        self.d, self.periods = d, torch.from_numpy(per)
        self._pe = torch.from_numpy((per > 1).astype(float)).to(dtype)[:, None, None]  # P off: Δ=1
        self.dtype = dtype

    def parameters(self):
        return [self.E, self.P, self.Wq, self.Wk, self.Wv, self.W1, self.b1, self.w2, self.c]

    def _readout(self, h):
        import torch

        hid = torch.relu(torch.bmm(h, self.W1) + self.b1)
        return torch.bmm(hid, self.w2)[..., 0] + self.c

    def _attend(self, q_in, k_in, log_mult, weights_only=False):
        """Attention of queries ``q_in`` (M,b,d) over keys ``k_in`` (M,b,K,d) or (M,K,d)."""
        import torch

        q = torch.bmm(q_in, self.Wq)
        if k_in.dim() == 3:  # keys shared by the batch: one class table per model
            s = torch.bmm(q, torch.bmm(k_in, self.Wk).transpose(1, 2)) / math.sqrt(self.d)
            w = torch.softmax(s + log_mult, dim=-1)
            if weights_only:
                return w
            return q_in + torch.bmm(w, torch.bmm(k_in, self.Wv))
        k = torch.einsum("mbtd,mde->mbte", k_in, self.Wk)
        s = torch.einsum("mbe,mbte->mbt", q, k) / math.sqrt(self.d)
        w = torch.softmax(s + log_mult, dim=-1)
        return q_in + torch.einsum(
            "mbt,mbte->mbe", w, torch.einsum("mbtd,mde->mbte", k_in, self.Wv)
        )

    def __call__(self, tokens, lengths):
        """Explicit forward: ``tokens`` (M, batch, T) long, ``lengths`` (M, batch) -> (M, batch)."""
        import torch

        M, nb, T = tokens.shape
        res = torch.arange(1, T + 1)[None, :] % self.periods[:, None]  # (M, T)
        pe = torch.gather(self.P * self._pe, 1, res[..., None].expand(-1, -1, self.d))
        emb = self.E[torch.arange(M)[:, None, None], tokens] + pe[:, None]  # (M, b, T, d)
        idx = (lengths - 1)[..., None, None].expand(-1, -1, 1, self.d)
        last = torch.gather(emb, 2, idx)[:, :, 0]
        pad = torch.arange(T)[None, None, :] >= lengths[..., None]
        mult = torch.zeros(pad.shape, dtype=emb.dtype).masked_fill(pad, -torch.inf)
        return self._readout(self._attend(last, emb, mult))

    def from_counts(self, counts, last, res=None, *, attention: bool = False):
        """Same output from class counts ``counts`` (M, batch, S) or (M, batch, S, Δmax), last
        tokens ``last`` (M, batch) and last residues ``res`` (M, batch) :math:`=T\\bmod\\Delta_i`
        (default 0). ``attention=True`` returns instead the attention mass of each (token, residue)
        class, shape (M, batch, S, Δmax)."""
        import torch

        M, nb, S = counts.shape[:3]
        cnt = counts.reshape(M, nb, S, -1)
        Dm = cnt.shape[-1]
        P = (self.P * self._pe)[:, :Dm]
        if Dm < self.P.shape[1] and (self.periods > Dm).any():
            raise ValueError("counts must have a residue axis of length max(periods)")
        cls = (self.E[:, :, None, :] + P[:, None, :, :]).reshape(M, S * Dm, self.d)
        res = torch.zeros_like(last) if res is None else res
        q_in = cls[torch.arange(M)[:, None], last * Dm + res]  # y_T = E_{x_T} + P_{T mod Δ}
        log_mult = torch.log(cnt.reshape(M, nb, S * Dm).to(self.dtype))  # n_c = 0: weight 0
        if attention:
            return self._attend(q_in, cls, log_mult, weights_only=True).reshape(M, nb, S, Dm)
        return self._readout(self._attend(q_in, cls, log_mult))


def train_stacked(
    tasks, params, n_train, steps: int, rng, gen, *, d=8, hidden=64, batch=256, lr=1e-2, dtype=None
):
    """Train ``M=len(tasks)`` models of :class:`StackedAttentionReadout` at once, model ``i`` on
    task ``tasks[i]`` with parameter ``params[i]`` (:math:`\\omega` or :math:`\\Delta`).

    Model ``i`` sees fresh batches each step (:func:`task_batch`) with lengths uniform on
    :math:`1..N_i` (``n_train[i]``); Adam with cosine decay, squared loss summed over models.

    Book: :numref:`fig-17-train-curves` in book/17-length-generalization/training.md.
    """
    import torch

    tasks, par, D = _periods(tasks, params)
    g = check_generator(rng)
    steps = positive_int(steps, "steps")
    model = StackedAttentionReadout(par.size, 2, d, hidden, gen, periods=D, dtype=dtype)
    opt = torch.optim.Adam(model.parameters(), lr=positive(lr, "lr"), foreach=True)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    for _ in range(steps):
        counts, last, res, _, y = task_batch(tasks, par, n_train, batch, g)
        out = model.from_counts(*(torch.from_numpy(a) for a in (counts, last, res)))
        loss = ((out - torch.from_numpy(y).to(model.dtype)) ** 2).mean(1).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    return model


def train_simple_task(omegas, n_train, steps: int, rng, gen, **kw):
    """:func:`train_stacked` with every model on SimpleTask (``omegas`` :math:`\\omega_i`)."""
    om = real_array(omegas, "omegas", ndim=1)
    return train_stacked(["simple"] * om.size, om, n_train, steps, rng, gen, **kw)


def length_curve(model, tasks, params, lengths, n_eval: int, rng) -> np.ndarray:
    """Normalised test loss :math:`E(f-f^\\star)^2/\\mathrm{Var}f^\\star` at fixed lengths.

    ``lengths`` (M, K): the test lengths of each model. Returns (M, K).
    """
    import torch

    tasks, par, _ = _periods(tasks, params)
    g = check_generator(rng)
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.ndim != 2 or lengths.shape[0] != par.size:
        raise ValueError(f"lengths must have shape (M, K) with M = {par.size}")
    out = np.empty(lengths.shape)
    with torch.no_grad():
        for k in range(lengths.shape[1]):
            counts, last, res, _, y = task_batch(
                tasks, par, lengths[:, k], positive_int(n_eval, "n_eval"), g, fixed_length=True
            )
            f = model.from_counts(*(torch.from_numpy(a) for a in (counts, last, res)))
            f = f.double().numpy()
            out[:, k] = ((f - y) ** 2).mean(1) / y.var(1)
    return out
