"""Compare lib.relu_regions with `relucent`, the authors' package (chapter 14).

relucent needs gurobipy (a commercial solver; pip installs it with a size-limited licence that is
enough for these small networks). It is therefore not a dependency of the book. To run this
comparison:

    python -m venv /tmp/rvenv
    /tmp/rvenv/bin/pip install relucent torch==2.13.0 networkx scipy
    PYTHONPATH=. /tmp/rvenv/bin/python benchmarks/relucent_compare.py

For each network both tools enumerate the complete region graph. The script prints the region
counts (they must be identical), the edge counts, and the time ratio. Edge counts need not agree:
relucent's dual graph joins every pair of regions whose sign sequences differ in one entry, while
ours joins regions that share a (d-1)-face (the paper's definition), and for networks of depth 2
or more a one-flip pair can be separated without sharing a facet. So the script also prints
``flip-facet``, the number of one-flip pairs of our regions minus our facet edges, next to
``rel-ours``, relucent's edge count minus ours: the two columns are expected to be equal, network by
network (both 0 for one hidden layer).
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
        f"{'ours s':>7s} {'relucent s':>10s} {'ratio':>6s} {'rel-ours':>8s} {'flip-facet':>10s}"
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
        S = np.array(list(G.nodes), dtype=np.int8)
        one_flip = int(((S[:, None, :] != S[None, :, :]).sum(-1) == 1).sum() // 2)
        print(
            f"d={d} {str(widths):12s} {G.number_of_nodes():8d} {n_rel:8d} {G.number_of_edges():7d} "
            f"{H.number_of_edges():8d} {t_ours:7.2f} {t_rel:10.2f} {t_rel / t_ours:6.2f} "
            f"{H.number_of_edges() - G.number_of_edges():8d} {one_flip - G.number_of_edges():10d}"
        )


if __name__ == "__main__":
    main()
