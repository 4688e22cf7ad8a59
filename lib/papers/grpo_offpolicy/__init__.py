"""Off-policy GRPO (chapter 01, ``book/01-grpo-off-policy/``).

- :mod:`lib.papers.grpo_offpolicy.tabular`: the exact tabular analysis and the bandit trainer
  (numpy);
- :mod:`lib.papers.grpo_offpolicy.lm`: token-level GRPO on a tiny transformer (torch).
"""
