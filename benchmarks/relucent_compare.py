"""Compare lib.relu_regions with `relucent`, the authors' package (chapter 14).

relucent needs gurobipy (a commercial solver; pip installs it with a size-limited licence that is
enough for these small networks). It is therefore not a dependency of the book. To run this
comparison:

    python -m venv /tmp/rvenv
    /tmp/rvenv/bin/pip install relucent torch==2.13.0 networkx scipy
    PYTHONPATH=. /tmp/rvenv/bin/python benchmarks/relucent_compare.py

For each network both tools enumerate the complete region graph; the script prints region and edge
counts (they must be identical) and the time ratio.
"""

import time

import numpy as np
import relucent
import torch

from lib.papers import relu_regions as rr

ARCHS = [(2, [8]), (3, [8]), (2, [6, 6]), (3, [6, 6]), (2, [5, 5, 5]), (4, [6, 6])]


def to_torch(Ws, bs):
    layers = []
    for W, b in zip(Ws, bs):
        lin = torch.nn.Linear(W.shape[1], W.shape[0]).double()
        with torch.no_grad():
            lin.weight.copy_(torch.tensor(W))
            lin.bias.copy_(torch.tensor(b))
        layers += [lin, torch.nn.ReLU()]
    out = torch.nn.Linear(Ws[-1].shape[0], 1).double()
    return torch.nn.Sequential(*layers, out)


def main():
    gen = np.random.default_rng(2026)
    print(
        f"{'network':18s} {'ours N_d':>8s} {'relucent':>8s} {'ours E':>7s} {'relucent':>8s} "
        f"{'ours s':>7s} {'relucent s':>10s} {'ratio':>6s}"
    )
    for d, widths in ARCHS:
        Ws, bs = rr.random_relu_net(d, widths, gen)
        t0 = time.perf_counter()
        G = rr.enumerate_regions(Ws, bs)
        t_ours = time.perf_counter() - t0
        model = to_torch(Ws, bs)
        t0 = time.perf_counter()
        cplx = relucent.Complex(model)
        cplx.bfs()
        H = cplx.dual_graph()
        t_rel = time.perf_counter() - t0
        n_rel = sum(1 for _ in H.nodes)
        print(
            f"d={d} {str(widths):12s} {G.number_of_nodes():8d} {n_rel:8d} {G.number_of_edges():7d} "
            f"{H.number_of_edges():8d} {t_ours:7.2f} {t_rel:10.2f} {t_rel / t_ours:6.2f}"
        )


if __name__ == "__main__":
    main()
