"""The topological sort the slot and run orders use equals networkx's (which it replaced
for speed: phases of thousands of calls are ordered once per rank class)."""

from __future__ import annotations

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from logical_model.statistical import _reaches, lex_topological

edges = st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), max_size=40)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 12), e=edges)
def test_the_order_is_networkx_lexicographical_topological_sort(n, e):
    e = [(a % n, b % n) for a, b in e]
    succ = [set() for _ in range(n)]
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    for a, b in e:
        succ[a].add(b)
        g.add_edge(a, b)
    try:
        want = list(nx.lexicographical_topological_sort(g, key=lambda v: v))
    except nx.NetworkXUnfeasible:
        want = None
    assert lex_topological(succ) == want


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 12), e=edges, a=st.integers(0, 11), b=st.integers(0, 11))
def test_reachability_is_networkx_has_path(n, e, a, b):
    succ = [set() for _ in range(n)]
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    for x, y in e:
        succ[x % n].add(y % n)
        g.add_edge(x % n, y % n)
    assert _reaches(succ, a % n, b % n) == nx.has_path(g, a % n, b % n)
