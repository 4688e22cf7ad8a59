"""Unit tests for lib.grpo_lm (chapter 01, token-level GRPO)."""

import copy

import numpy as np
import pytest
import torch

from lib.papers.grpo_offpolicy import lm
from lib.seed import torch_seeded


@pytest.fixture(scope="module")
def task():
    return lm.AdditionTask.make(1)


def small_model(seed=0):
    with torch_seeded(seed=seed):
        return lm.TinyLM(d_model=16, n_layers=1, n_heads=2)


def test_task_encodes_addition(task):
    assert task.size == 100 and task.prompts.shape == (100, 4) and task.answers.shape == (100, 2)
    for j in (0, 37, 99):
        a, b = task.prompts[j, 0].item(), task.prompts[j, 2].item()
        ans = task.answers[j]
        assert ans[0].item() + 10 * ans[1].item() == a + b  # least significant digit first
    assert torch.all(task.prompts[:, 1] == lm.PLUS) and torch.all(task.prompts[:, 3] == lm.EQUALS)
    two = lm.AdditionTask.make(2)
    a = two.prompts[:, 0] * 10 + two.prompts[:, 1]
    b = two.prompts[:, 3] * 10 + two.prompts[:, 4]
    s = two.answers[:, 0] + 10 * two.answers[:, 1] + 100 * two.answers[:, 2]
    assert torch.equal(a + b, s)
    idx = torch.tensor([5, 6])
    assert task.reward(idx, task.answers[idx]).tolist() == [1.0, 1.0]
    assert task.reward(idx, task.answers[idx] + 1).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="n_digits"):
        lm.AdditionTask.make(4)
    with pytest.raises(ValueError, match="n_digits"):
        lm.AdditionTask.make(0)


def test_tiny_lm_shapes_seed_and_errors():
    m1, m2 = small_model(3), small_model(3)
    ids = torch.randint(12, (5, 7))
    assert m1(ids).shape == (5, 7, 12)
    assert torch.equal(m1(ids), m2(ids))
    with pytest.raises(ValueError, match="divisible"):
        lm.TinyLM(d_model=10, n_heads=4)
    with pytest.raises(ValueError, match="max_len"):
        m1(torch.zeros((1, 17), dtype=torch.long))


def test_model_is_causal():
    m = small_model(1)
    ids = torch.randint(12, (2, 6))
    ids2 = ids.clone()
    ids2[:, 4:] = (ids2[:, 4:] + 1) % 12
    assert torch.allclose(m(ids)[:, :4], m(ids2)[:, :4], atol=1e-6)


def test_sequence_logprobs_match_stepwise_softmax(task):
    m = small_model(2)
    p, a = task.prompts[:4], task.answers[:4]
    lp = lm.sequence_logprobs(m, p, a)
    ids = torch.cat([p, a], 1)
    for t in range(a.shape[1]):
        logits = m(ids[:, : p.shape[1] + t])[:, -1]
        ref = torch.log_softmax(logits, -1).gather(1, a[:, t : t + 1]).squeeze(1)
        assert torch.allclose(lp[:, t], ref, atol=1e-5)
    with pytest.raises(ValueError, match="prompts and responses"):
        lm.sequence_logprobs(m, p, a[:3])


def test_exact_success_matches_sampling_within_3_se(task):
    m = small_model(4)
    gen = torch.Generator().manual_seed(0)
    lm.supervised_warmup(m, task, 60, 32, 1e-2, gen)  # sharpen the model so success is not tiny
    exact = lm.exact_success(m, task)
    idx = torch.arange(task.size).repeat(200)
    out = lm.sample_answers(m, task.prompts[idx], task.answer_len, gen)
    rew = task.reward(idx, out).numpy()
    se = rew.std() / np.sqrt(rew.size)
    assert abs(rew.mean() - exact) < 3 * se + 1e-9


def test_greedy_and_sampling(task):
    m = small_model(5)
    out1 = lm.sample_answers(m, task.prompts[:10], 2, None, greedy=True)
    out2 = lm.sample_answers(m, task.prompts[:10], 2, None, greedy=True)
    assert torch.equal(out1, out2) and out1.shape == (10, 2)
    assert 0.0 <= lm.greedy_accuracy(m, task) <= 1.0
    with pytest.raises(ValueError, match="length"):
        lm.sample_answers(m, task.prompts[:2], 0, None)


def test_warmup_lowers_loss_and_rejects_bad_lr(task):
    m = small_model(6)
    losses = lm.supervised_warmup(m, task, 80, 32, 1e-2, torch.Generator().manual_seed(1))
    assert np.mean(losses[-10:]) < np.mean(losses[:10])
    with pytest.raises(ValueError, match="lr"):
        lm.supervised_warmup(m, task, 1, 2, 0.0, torch.Generator())
    with pytest.raises(ValueError, match="steps"):
        lm.supervised_warmup(m, task, 0, 2, 1e-3, torch.Generator())


def test_token_clip_loss_inside_and_outside_window():
    logp_alpha = torch.log(torch.full((2, 3), 0.5))
    logp_k = logp_alpha.clone()
    adv = torch.tensor([1.0, -1.0])
    inside = logp_alpha + 0.05
    loss, frac = lm.token_clip_loss(inside, logp_k, logp_alpha, adv, 0.2)
    ratio = torch.exp(inside - logp_alpha)
    assert torch.isclose(loss, -(ratio.mean(1) * adv).mean()) and frac == 0.0
    far = logp_alpha + 1.0  # ratio e > 1.2: clipped for a > 0 only
    _, frac = lm.token_clip_loss(far, logp_k, logp_alpha, adv, 0.2)
    assert frac == pytest.approx(0.5)
    with pytest.raises(ValueError, match="clip"):
        lm.token_clip_loss(inside, logp_k, logp_alpha, adv, 0.0)
    with pytest.raises(ValueError, match="adv"):
        lm.token_clip_loss(inside, logp_k, logp_alpha, adv[:1], 0.2)


def test_grpo_train_lm_runs_and_respects_structure(task):
    m = small_model(7)
    lm.supervised_warmup(m, task, 60, 32, 1e-2, torch.Generator().manual_seed(2))
    hp = dict(iters=6, B=4, G=4, lr=1e-3, eval_every=3)
    h1 = lm.grpo_train_lm(
        copy.deepcopy(m), task, v=1, i=1, gen=torch.Generator().manual_seed(3), **hp
    )
    assert h1["steps"].tolist() == [0, 3, 6] and len(h1["batch_reward"]) == 6
    assert np.all(h1["clip_frac"] == 0) and np.all(h1["off_centre"] == 0)
    h2 = lm.grpo_train_lm(
        copy.deepcopy(m), task, v=3, i=1, mask=True, gen=torch.Generator().manual_seed(3), **hp
    )
    assert np.all(h2["clip_frac"] == 0) and np.all(h2["off_centre"][::3] == 0)
    h3 = lm.grpo_train_lm(
        copy.deepcopy(m), task, v=1, i=4, gen=torch.Generator().manual_seed(3), **hp
    )
    assert h3["J"][0] == pytest.approx(h1["J"][0])


def test_grpo_train_lm_bad_input(task):
    m = small_model(8)
    base = dict(v=1, i=1, iters=1, B=2, G=2, lr=1e-3, gen=torch.Generator())
    with pytest.raises(ValueError, match="G must be at least 2"):
        lm.grpo_train_lm(m, task, **{**base, "G": 1})
    with pytest.raises(TypeError, match="gen"):
        lm.grpo_train_lm(m, task, **{**base, "gen": np.random.default_rng()})
    with pytest.raises(ValueError, match="i must be a positive integer"):
        lm.grpo_train_lm(m, task, **{**base, "i": 0})
    with pytest.raises(ValueError, match="eps"):
        lm.grpo_train_lm(m, task, **base, eps=0.0)
