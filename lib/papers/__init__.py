"""One module (or subpackage) per paper, named after the idea.

=============================  ==============================================
module                         chapter folder
=============================  ==============================================
``grpo_offpolicy`` (package)   ``book/01-grpo-off-policy/``
``coalition_eq``               ``book/02-coalition-equilibrium/``
``coarse_gaussian``            ``book/03-coarse-gaussian-mean/``
``dp_iv``                      ``book/04-dp-iv-regression/``
``quasi_equivariant``          ``book/05-quasi-equivariant-metanetworks/``
``borda_dueling``              ``book/06-dueling-bandits-borda/``
``qlearning_d2z``              ``book/07-q-learning-pd2z/``
``disagreement``               ``book/08-disagreement-discrepancy/``
``saddle_to_saddle``           ``book/09-saddle-to-saddle/``
``benign_leaky``               ``book/10-benign-overfitting-leaky-relu/``
``actor_critic``               ``book/11-actor-critic-finite-time/``
``adversarial_fragility``      ``book/12-adversarial-fragility/``
``longtail_composition``       ``book/13-memorization-composition/``
``relu_regions``               ``book/14-relu-region-graph/``
``dense_memory``               ``book/15-dense-associative-memory/``
``noisy_prophet``              ``book/16-prophet-noisy-rewards/``
``length_generalization``      ``book/17-length-generalization/``
``fisher_metric``              ``book/18-fisher-neuromanifold/``
``rank_one_dynamics``          ``book/19-matrix-denoising-dynamics/``
=============================  ==============================================

Dependency rule (checked by ``import-linter`` in the gate, see ``pyproject.toml``): a paper
module imports only ``lib.validate``, ``lib.stats``, ``lib.device`` and outside libraries.
It never imports ``lib.claims``, ``lib.scale``, ``lib.seed``, ``lib.plotting``,
``lib.records`` or ``lib.sphinxext`` (scale, seeds, claims and plot style belong to the
notebook), and paper modules never import each other.
"""
