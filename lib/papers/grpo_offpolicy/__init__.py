"""Off-policy GRPO (chapter 01, ``book/01-grpo-off-policy/``).

Paper: Y. Mroueh et al., *Revisiting Group Relative Policy Optimization: Insights into On-Policy
and Off-Policy Training*, ICLR 2026 (arXiv:2505.22257, OpenReview ``XXfOf22o3K``).

Chapter folder: ``book/01-grpo-off-policy/``.

- :mod:`lib.papers.grpo_offpolicy.tabular`: the exact tabular analysis and the bandit trainer
  (numpy);
- :mod:`lib.papers.grpo_offpolicy.lm`: token-level GRPO on a tiny transformer (torch).
"""
