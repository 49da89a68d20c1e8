"""The re-timing's and the screen's round order: a seeded random permutation per round."""

import itertools
from collections import Counter

from versatil.training.retime import round_order


def test_each_round_is_a_permutation_drawn_from_the_seed_and_the_round():
    labels = ["ref", "b", "c"]
    orders = [round_order(labels, seed=7, index=i) for i in range(600)]
    assert all(sorted(o) == sorted(labels) for o in orders)
    # The same seed gives the same orders; another seed others.
    assert orders == [round_order(labels, seed=7, index=i) for i in range(600)]
    assert orders != [round_order(labels, seed=8, index=i) for i in range(600)]
    # Every permutation comes up, each near 1/6 of the time (600 rounds: 100 expected;
    # the seed is fixed, so these counts are too).
    counts = Counter(tuple(o) for o in orders)
    assert len(counts) == 6 and all(60 <= n <= 140 for n in counts.values()), counts
    # Unlike the fixed alternation (A B C, C B A, ...), the reference does not end one
    # round and start the next by rule: back to back about 1/9 of the time, not 1/2.
    back_to_back = sum(a[-1] == "ref" == b[0] for a, b in itertools.pairwise(orders))
    assert back_to_back < 0.2 * len(orders), back_to_back
    assert round_order(labels, seed=7, index=0) is not labels  # the input is left alone
