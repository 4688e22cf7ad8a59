"""Token-level GRPO for a language model, in torch (chapter 01).

Paper: *Revisiting Group Relative Policy Optimization: Insights into On-Policy and Off-Policy
Training*, ICLR 2026 (arXiv:2505.22257, OpenReview ``XXfOf22o3K``).

Chapter folder: ``book/01-grpo-off-policy/``.

The task is few-digit addition with a verifiable answer. A prompt is ``a + b =`` written
with the most significant digit first; the answer is the ``n + 1`` digits of ``a + b``
written least significant digit first (the order a causal model can compute), and the
reward is 1 for an exact match. Because the answer is unique, the success probability of a
policy at temperature 1 on a prompt is ``pi(answer | prompt)``, a product of token
probabilities; averaged over a fixed set of problems it is an *exact* expected reward,
computed in one teacher-forced pass (``exact_success``).

``grpo_train_lm`` runs the chapter's Algorithm 1 with token-level ratios: the sampler (a
copy of the weights) is synced every ``v`` steps, each batch gets ``i`` optimiser steps, and
the clip window of each token is centred at ``pi_k / alpha`` of that token. Token-level
clipping is a heuristic; the theory is about whole-sequence ratios.

The model is any ``torch.nn.Module`` mapping token ids ``(N, T)`` to logits ``(N, T, V)``
(``TinyLM`` in the book).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from lib.validate import positive_int

__all__ = [
    "AdditionTask",
    "TinyLM",
    "sequence_logprobs",
    "exact_success",
    "greedy_accuracy",
    "sample_answers",
    "supervised_warmup",
    "token_clip_loss",
    "grpo_train_lm",
]

PLUS, EQUALS = 10, 11
VOCAB = 12


# --------------------------------------------------------------------------- the task
@dataclass
class AdditionTask:
    """All ``10^(2n)`` problems ``a + b`` with ``n``-digit operands (leading zeros allowed)."""

    n_digits: int
    prompts: torch.Tensor  # (N, 2n + 2) long
    answers: torch.Tensor  # (N, n + 1) long

    @classmethod
    def make(cls, n_digits: int) -> AdditionTask:
        n = positive_int(n_digits, "n_digits")
        if n > 3:
            raise ValueError(
                f"n_digits must be at most 3 (10^(2n) problems are enumerated), got {n}"
            )
        base = 10**n
        a, b = np.divmod(np.arange(base * base), base)

        def digits(x, k, lsd_first):
            d = np.stack([(x // 10**j) % 10 for j in range(k)], axis=1)
            return d if lsd_first else d[:, ::-1]

        prompts = np.concatenate(
            [
                digits(a, n, False),
                np.full((a.size, 1), PLUS),
                digits(b, n, False),
                np.full((a.size, 1), EQUALS),
            ],
            axis=1,
        )
        answers = digits(a + b, n + 1, True)
        return cls(n, torch.as_tensor(prompts.copy()), torch.as_tensor(answers.copy()))

    @property
    def size(self) -> int:
        return int(self.prompts.shape[0])

    @property
    def answer_len(self) -> int:
        return int(self.answers.shape[1])

    def to(self, device) -> AdditionTask:
        """The same task with its tensors on ``device``."""
        return AdditionTask(self.n_digits, self.prompts.to(device), self.answers.to(device))

    def reward(self, idx: torch.Tensor, responses: torch.Tensor) -> torch.Tensor:
        """1.0 where ``responses`` (rows aligned with problem indices ``idx``) match the answer."""
        return (responses == self.answers[idx]).all(dim=-1).to(torch.float32)


# --------------------------------------------------------------------------- models
class TinyLM(nn.Module):
    """A small causal transformer (pre-norm, learned positions, no dropout).

    Build it inside ``lib.seed.torch_seeded(...)`` for a reproducible initialisation.
    """

    def __init__(
        self,
        vocab: int = VOCAB,
        d_model: int = 64,
        n_layers: int = 2,
        n_heads: int = 4,
        max_len: int = 16,
    ):
        super().__init__()
        for name, val in (
            ("vocab", vocab),
            ("d_model", d_model),
            ("n_layers", n_layers),
            ("n_heads", n_heads),
            ("max_len", max_len),
        ):
            positive_int(val, name)
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        # Initial weights come from torch's default initialisation; a notebook builds the
        # model inside lib.seed.torch_seeded(...) for a reproducible draw.
        self._build(vocab, d_model, n_layers, n_heads, max_len)

    def _build(self, vocab, d_model, n_layers, n_heads, max_len):
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model,
            n_heads,
            4 * d_model,
            dropout=0.0,
            batch_first=True,
            norm_first=True,
            activation="gelu",
        )
        self.blocks = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)
        self.max_len = max_len

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        T = ids.shape[1]
        if T > self.max_len:
            raise ValueError(f"sequence length {T} exceeds max_len {self.max_len}")
        h = self.tok(ids) + self.pos(torch.arange(T, device=ids.device))
        causal = nn.Transformer.generate_square_subsequent_mask(T, device=ids.device)
        h = self.blocks(h, mask=causal, is_causal=True)
        return self.head(self.norm(h))


# --------------------------------------------------------------------------- log-probabilities
def sequence_logprobs(
    model: nn.Module, prompts: torch.Tensor, responses: torch.Tensor
) -> torch.Tensor:
    """Per-token log-probabilities ``log pi(y_t | prompt, y_<t)``, shape ``(N, A)``."""
    if prompts.ndim != 2 or responses.ndim != 2 or prompts.shape[0] != responses.shape[0]:
        raise ValueError(
            f"prompts and responses must be (N, P) and (N, A), got {tuple(prompts.shape)} "
            f"and {tuple(responses.shape)}"
        )
    ids = torch.cat([prompts, responses], dim=1)
    logits = model(ids[:, :-1])[:, prompts.shape[1] - 1 :, :]
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, responses.unsqueeze(-1)).squeeze(-1)


@torch.no_grad()
def exact_success(model: nn.Module, task: AdditionTask, idx=None, batch: int = 4096) -> float:
    """Mean over problems ``idx`` (all by default) of ``pi(answer | prompt)``: the exact expected
    reward of sampling at temperature 1."""
    idx = torch.arange(task.size) if idx is None else torch.as_tensor(idx)
    idx = idx.to(task.prompts.device)
    batch = positive_int(batch, "batch")
    total = 0.0
    for s in range(0, len(idx), batch):
        j = idx[s : s + batch]
        total += float(
            sequence_logprobs(model, task.prompts[j], task.answers[j]).sum(-1).exp().sum()
        )
    return total / len(idx)


@torch.no_grad()
def sample_answers(
    model: nn.Module, prompts: torch.Tensor, length: int, gen: torch.Generator, greedy: bool = False
) -> torch.Tensor:
    """Autoregressive sampling (temperature 1) or greedy decoding of ``length`` tokens."""
    length = positive_int(length, "length")
    ids = prompts
    for _ in range(length):
        logits = model(ids)[:, -1, :].float()
        if greedy:
            nxt = logits.argmax(-1, keepdim=True)
        else:
            nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)
        ids = torch.cat([ids, nxt], dim=1)
    return ids[:, prompts.shape[1] :]


@torch.no_grad()
def greedy_accuracy(model: nn.Module, task: AdditionTask, idx=None) -> float:
    """Share of problems ``idx`` solved by greedy decoding."""
    idx = (torch.arange(task.size) if idx is None else torch.as_tensor(idx)).to(task.prompts.device)
    out = sample_answers(model, task.prompts[idx], task.answer_len, None, greedy=True)
    return float(task.reward(idx, out).mean())


# --------------------------------------------------------------------------- training
def supervised_warmup(
    model: nn.Module, task: AdditionTask, steps: int, batch: int, lr: float, gen: torch.Generator
) -> list:
    """Cross-entropy on the answer tokens of uniformly drawn problems (Adam). Returns the losses."""
    steps, batch = positive_int(steps, "steps"), positive_int(batch, "batch")
    if not lr > 0:
        raise ValueError(f"lr must be positive, got {lr!r}")
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        j = torch.randint(task.size, (batch,), generator=gen, device=gen.device).to(
            task.prompts.device
        )
        loss = -sequence_logprobs(model, task.prompts[j], task.answers[j]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def token_clip_loss(logp, logp_k, logp_alpha, adv, clip: float, weights=None):
    """Negative clipped surrogate with token-level ratios; returns ``(loss, inactive_fraction)``.

    ``logp`` (with gradient), ``logp_k`` and ``logp_alpha`` are per-token log-probabilities of
    the sampled responses under the learner, the learner at the start of the step and the
    sampler, shape ``(N, A)``; ``adv`` is the sequence advantage ``(N,)``; ``weights`` ``(N,)``
    are the per-sequence weights (mask and normalisation), default ``1/N``. The window of each token
    is ``[max(rho_k - clip, 0), rho_k + clip]`` with ``rho_k = pi_k / alpha``.
    """
    if not clip > 0:
        raise ValueError(f"clip must be positive, got {clip!r}")
    if logp.shape != logp_k.shape or logp.shape != logp_alpha.shape or adv.shape != logp.shape[:1]:
        raise ValueError("logp, logp_k, logp_alpha must share shape (N, A) and adv must be (N,)")
    ratio = torch.exp(logp - logp_alpha)
    ratio_k = torch.exp(logp_k - logp_alpha)
    a = adv[:, None]
    lo = torch.clamp(ratio_k - clip, min=0.0)
    hi = ratio_k + clip
    obj = torch.minimum(ratio * a, torch.maximum(torch.minimum(ratio, hi), lo) * a)
    inactive = ((ratio > hi) & (a > 0)) | ((ratio < lo) & (a < 0))
    w = torch.full_like(adv, 1.0 / adv.shape[0]) if weights is None else weights
    loss = -(obj.mean(dim=1) * w).sum()
    return loss, float(inactive.float().mean())


def grpo_train_lm(
    model: nn.Module,
    task: AdditionTask,
    *,
    v: int,
    i: int,
    iters: int,
    B: int,
    G: int,
    lr: float,
    clip: float = 0.2,
    eps: float = 1e-4,
    mask: bool = False,
    gen: torch.Generator,
    eval_idx=None,
    eval_every: int = 10,
    progress=None,
) -> dict:
    """Token-level GRPO with sampler sync period ``v`` and ``i`` Adam steps per batch (trains
    ``model`` in place). Every ``eval_every`` steps (and at the end) records the exact expected
    reward on ``eval_idx``. Returns ``steps``, ``J``, ``batch_reward``, ``clip_frac`` (share of
    sampled tokens with no gradient, over the inner steps), ``kept`` (share of groups with reward
    variance) and ``off_centre`` (share of sampled tokens with ``|pi_k/alpha - 1| > clip``: those a
    clip centred at 1 would treat as outside the window). ``gen`` must live on the model's device.

    Book: prf:`alg-01-grpo` in book/01-grpo-off-policy/training.md (token-level ratios; see
    book/01-grpo-off-policy/token_level.md).
    """
    v, i, iters = positive_int(v, "v"), positive_int(i, "i"), positive_int(iters, "iters")
    B, G = positive_int(B, "B"), positive_int(G, "G")
    eval_every = positive_int(eval_every, "eval_every")
    if G < 2:
        raise ValueError("G must be at least 2 (group statistics)")
    if not lr > 0:
        raise ValueError(f"lr must be positive, got {lr!r}")
    if not eps > 0:
        raise ValueError(f"eps must be positive, got {eps!r}")
    if not isinstance(gen, torch.Generator):
        raise TypeError(f"gen must be a torch.Generator, got {type(gen).__name__}")
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    server = copy.deepcopy(model).eval()
    hist = {"steps": [], "J": [], "batch_reward": [], "clip_frac": [], "kept": [], "off_centre": []}

    def record(k):
        hist["steps"].append(k)
        hist["J"].append(exact_success(model, task, eval_idx))

    record(0)
    loop = range(iters) if progress is None else progress(range(iters))
    for k in loop:
        synced = k % v == 0
        if synced:
            server.load_state_dict(model.state_dict())
        idx = torch.randint(task.size, (B,), generator=gen, device=gen.device).to(
            task.prompts.device
        )
        idx = idx.repeat_interleave(G)
        prompts = task.prompts[idx]
        resp = sample_answers(server, prompts, task.answer_len, gen)
        r = task.reward(idx, resp).view(B, G)
        adv = (
            (r - r.mean(1, keepdim=True)) / torch.sqrt(r.var(1, unbiased=False, keepdim=True) + eps)
        ).view(-1)
        nonzero = (r.var(1, unbiased=False) > 0).float()
        keep = nonzero if mask else torch.ones_like(nonzero)
        n_keep = float(keep.sum())
        with torch.no_grad():
            logp_alpha = sequence_logprobs(server, prompts, resp)
            logp_k = logp_alpha.clone() if synced else sequence_logprobs(model, prompts, resp)
            # tokens a clip centred at 1 (PPO on alpha) would already treat as outside the window
            off_centre = float(
                (torch.abs(torch.exp(logp_k - logp_alpha) - 1) > clip).float().mean()
            )
        frac = []
        if n_keep > 0:
            w = (keep / (G * n_keep)).repeat_interleave(G)
            for _ in range(i):
                loss, f = token_clip_loss(
                    sequence_logprobs(model, prompts, resp), logp_k, logp_alpha, adv, clip, w
                )
                opt.zero_grad()
                loss.backward()
                opt.step()
                frac.append(f)
        hist["batch_reward"].append(float(r.mean()))
        hist["clip_frac"].append(float(np.mean(frac)) if frac else 0.0)
        hist["kept"].append(float(nonzero.mean()))
        hist["off_centre"].append(off_centre)
        if (k + 1) % eval_every == 0 or k + 1 == iters:
            record(k + 1)
    return {key: np.array(val) for key, val in hist.items()}
