"""Collective patterns: well-formed, complete data flow, byte counts, LogGP evaluation, closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay import collectives as C
from signature.trace import OPS

SIZES = list(range(1, 20)) + [32, 33, 64]
L, o, g, G = 5e-6, 1e-6, 0.5e-6, 1e-9


def depends(pat: C.Pattern) -> np.ndarray:
    """dep[r, q]: rank r's final state depends on rank q's input (closure over rounds)."""
    dep = np.eye(pat.n, dtype=bool)
    for k in range(pat.n_rounds):
        a, b = pat.round_offsets[k], pat.round_offsets[k + 1]
        new = dep.copy()
        for s, d in zip(pat.src[a:b], pat.dst[a:b]):
            new[d] |= dep[s]
        dep = new
    return dep


def all_patterns(n):
    root = (n // 3) if n > 1 else 0
    yield "barrier", C.barrier_dissemination(n)
    yield "bcast", C.bcast_binomial(n, root, 100)
    yield "reduce", C.reduce_binomial(n, root, 100)
    yield "allreduce-rd", C.allreduce_recursive_doubling(n, 100)
    yield "allreduce-rab", C.allreduce_rabenseifner(n, 4096)
    yield "allgather-bruck", C.allgather_bruck(n, 10)
    yield "allgather-ring", C.allgather_ring(n, 10)
    if n & (n - 1) == 0:
        yield "allgather-rd", C.allgather_recursive_doubling(n, 10)
    yield "alltoall-pairwise", C.alltoall_pairwise(n, 10)
    yield "alltoall-bruck", C.alltoall_bruck(n, 10)
    yield "gather", C.gather_binomial(n, root, 10)
    yield "scatter", C.scatter_binomial(n, root, 10)
    yield "reduce-scatter", C.reduce_scatter_halving(n, 10)
    yield "scan", C.scan_recursive_doubling(n, 10)


@pytest.mark.parametrize("n", SIZES)
def test_patterns_are_well_formed(n):
    """Every pattern stays in 0..n-1, never sends to itself, and moves at most one message
    in and one out of a rank per round, with rounds in order."""
    for name, pat in all_patterns(n):
        assert pat.n == n
        assert len(pat.src) == len(pat.dst) == len(pat.nbytes) == len(pat.round)
        assert np.all((pat.src >= 0) & (pat.src < n) & (pat.dst >= 0) & (pat.dst < n)), name
        assert not np.any(pat.src == pat.dst), name
        assert np.all(np.diff(pat.round) >= 0), name
        for k in range(pat.n_rounds):
            a, b = pat.round_offsets[k], pat.round_offsets[k + 1]
            assert b > a, (name, "empty round")
            assert len(set(pat.src[a:b])) == b - a, (name, k, "two sends from one rank")
            assert len(set(pat.dst[a:b])) == b - a, (name, k, "two receives at one rank")
        assert np.all(pat.nbytes >= 0)


@pytest.mark.parametrize("n", SIZES)
def test_patterns_move_the_data_where_it_must_go(n):
    """Data flow: a broadcast reaches everyone, a reduction hears from everyone, all-to-all
    patterns connect every pair, a scan makes rank r depend on ranks 0..r."""
    root = (n // 3) if n > 1 else 0
    everyone = np.ones((n, n), bool)
    for name, pat in all_patterns(n):
        dep = depends(pat)
        if name in ("bcast", "scatter"):
            assert dep[:, root].all(), name
        elif name in ("reduce", "gather"):
            assert dep[root].all(), name
        elif name == "scan":
            assert np.array_equal(dep, np.tril(everyone)), name
        else:
            assert dep.all(), name


@pytest.mark.parametrize("n", [2, 5, 8, 13, 16])
def test_byte_counts(n):
    """Ring and pairwise move n(n-1) blocks; a binomial gather brings n-1 blocks to the
    root; Rabenseifner moves 2(1 - 1/p2) of the vector per rank (plus the fold)."""
    b = 10
    assert C.allgather_ring(n, b).nbytes.sum() == n * (n - 1) * b
    assert C.alltoall_pairwise(n, b).nbytes.sum() == n * (n - 1) * b
    g_ = C.gather_binomial(n, 2 % n, b)
    assert g_.nbytes[g_.dst == 2 % n].sum() == (n - 1) * b
    s = C.scatter_binomial(n, 1, b)
    assert s.nbytes[s.src == 1].sum() == (n - 1) * b
    p2 = 1 << (n.bit_length() - 1)
    vec = 4096
    rab = C.allreduce_rabenseifner(n, vec)
    fold = 2 * (n - p2) * vec
    assert rab.nbytes.sum() == 2 * p2 * (vec - vec // p2) + fold
    ag = C.allgather_bruck(n, b)
    assert np.all(np.bincount(ag.dst, weights=ag.nbytes, minlength=n) == (n - 1) * b)


def test_binomial_bcast_tree_on_8():
    """MPICH's order: the root sends to 4, then 2, then 1."""
    pat = C.bcast_binomial(8, 0, 1)
    rounds = [sorted(zip(pat.src[a:b].tolist(), pat.dst[a:b].tolist()))
              for a, b in zip(pat.round_offsets[:-1], pat.round_offsets[1:])]
    assert rounds == [[(0, 4)], [(0, 2), (4, 6)], [(0, 1), (2, 3), (4, 5), (6, 7)]]
    shifted = C.bcast_binomial(8, 3, 1)
    assert list(shifted.src[:1]) == [3] and list(shifted.dst[:1]) == [7]


def test_evaluate_binomial_bcast_by_hand():
    """Times of a binomial Bcast on 8 ranks entering at 0 (hop 8 us, NIC gap 3 us)."""
    pat = C.bcast_binomial(8, 0, 1000)
    fin, busy = C.evaluate(pat, np.zeros((1, 8)), L=L, o=o, g=2e-6, G=G, O=0.0, S=10**9)
    # round 0: 0 -> 4 (4 done at 8); round 1: 0 -> 2 at 3 (done 11), 4 -> 6 at 8 (16);
    # round 2: 0 -> 1 at 6 (14), 2 -> 3 at 11 (19), 4 -> 5 at 11 (19), 6 -> 7 at 16 (24)
    assert np.allclose(fin[0] * 1e6, [7, 14, 12, 19, 12, 19, 17, 24])
    # busy: one o per message sent or received
    assert np.allclose(busy[0] * 1e6, [3, 1, 2, 1, 3, 1, 2, 1])


def test_evaluate_batches_are_independent():
    """Evaluating instances together gives each the same bits as alone."""
    pat = C.allreduce_rabenseifner(6, 8192)
    rng = np.random.default_rng(1)
    entry = rng.random((5, 6)) * 1e-5
    kw = dict(L=L, o=o, g=g, G=G, O=0.0, S=4096)
    together = C.evaluate(pat, entry, **kw)[0]
    for i in range(5):
        assert np.array_equal(together[i], C.evaluate(pat, entry[i:i + 1], **kw)[0][0])


def test_exchange_serialises_the_send_and_receive_overheads():
    """In a round where a rank sends and receives, it pays o for the send, then o for the
    receive: a 2-rank exchange entering at 0 ends at L + 2o + sG + o... for both."""
    pat = C.allreduce_recursive_doubling(2, 1000)
    fin, busy = C.evaluate(pat, np.zeros((1, 2)), L=L, o=o, g=g, G=G, O=0.0, S=10**9)
    # each sends at 0 (CPU until 1); the other's data arrives at o + sG + L = 7: done 8
    assert np.allclose(fin * 1e6, 8)
    assert np.allclose(busy * 1e6, 2)
    late = C.evaluate(pat, np.array([[0.0, 20e-6]]), L=L, o=o, g=g, G=G, O=0.0, S=10**9)[0]
    # rank 1 sends at 20 (done 21), then processes rank 0's data (here since 7): 22
    assert np.allclose(late * 1e6, [28, 22])


@pytest.mark.parametrize("op,n,nbytes", [("Bcast", 16, 1000), ("Bcast", 16, 100000),
                                         ("Barrier", 16, 0), ("Allreduce", 16, 8),
                                         ("Allreduce", 8, 65536), ("Scan", 8, 64),
                                         ("Reduce", 32, 64)])
def test_closed_form_matches_the_algorithm_for_powers_of_two(op, n, nbytes):
    """With a small gap and everyone entering together, the closed form is the time of
    the pattern's last member to within one overhead per round."""
    pat = C.pattern_for(op, n, 0, nbytes)
    fin, _ = C.evaluate(pat, np.zeros((1, n)), L=L, o=o, g=1e-9, G=G, O=0.0, S=65536)
    closed = C.closed_form_cost(op, n, nbytes, L=L, o=o, G=G, O=0.0, S=65536)
    assert closed == pytest.approx(fin.max(), abs=o * pat.n_rounds + 1e-12)


def test_algorithm_selection():
    """Allreduce switches to Rabenseifner at ALLREDUCE_SHORT bytes; linear-round
    algorithms give way to Bruck above LINEAR_ROUNDS_MAX members."""
    assert C.pattern_for("Allreduce", 8, 0, C.ALLREDUCE_SHORT - 1).algorithm == "recursive-doubling"
    assert C.pattern_for("Allreduce", 8, 0, C.ALLREDUCE_SHORT).algorithm == "rabenseifner"
    assert C.pattern_for("Allgather", 8, 0, 8).algorithm == "recursive-doubling"
    assert C.pattern_for("Allgather", 6, 0, 8).algorithm == "bruck"
    assert C.pattern_for("Allgather", 8, 0, C.ALLGATHER_LONG).algorithm == "ring"
    assert C.pattern_for("Alltoall", 8, 0, 8).algorithm == "pairwise"
    big = C.LINEAR_ROUNDS_MAX + 1
    assert C.pattern_for("Alltoall", big, 0, 8).algorithm == "bruck"
    assert C.pattern_for("Alltoall", big, 0, 8).n_rounds == (big - 1).bit_length()
    with pytest.raises(ValueError, match="no pattern for collective 'Foo'"):
        C.pattern_for("Foo", 4, 0, 8)
    with pytest.raises(ValueError, match="recursive doubling needs a power-of-two n"):
        C.allgather_recursive_doubling(6, 8)


def test_every_collective_op_has_a_pattern_and_a_closed_form():
    """Every blocking and nonblocking collective of the trace format maps to a base
    collective with a pattern and a closed form."""
    blocking = ["Barrier", "Bcast", "Reduce", "Allreduce", "Gather", "Gatherv", "Scatter",
                "Scatterv", "Allgather", "Allgatherv", "Alltoall", "Alltoallv", "Alltoallw",
                "Reduce_scatter", "Reduce_scatter_block", "Scan", "Exscan"]
    names = blocking + ["I" + n[0].lower() + n[1:] for n in blocking]
    neighbor = [f"{p}eighbor_{k}" for p in ("N", "In") for k in
                ("allgather", "allgatherv", "alltoall", "alltoallv", "alltoallw")]
    window = ["Win_create", "Win_free", "Win_fence"]  # synchronise the window's communicator
    assert set(names + neighbor + window) <= set(OPS)
    assert {OPS[c] for c in C.COLLECTIVE_OPS} == set(names + neighbor + window)
    assert {C.COLLECTIVE_OPS[OPS.index(n)] for n in window} == {"Barrier"}
    assert len(names) == 34
    assert C.COLLECTIVE_OPS[OPS.index("Ialltoallw")] == "Alltoall"  # bytes per peer, as Alltoallv
    assert {C.COLLECTIVE_OPS[OPS.index(n)] for n in neighbor} == {"Neighbor"}
    with pytest.raises(ValueError, match="neighbourhood collective's pattern comes from its topology"):
        C.pattern_for("Neighbor", 4, 0, 8)
    for name in names:
        base = C.COLLECTIVE_OPS[OPS.index(name)]
        assert C.pattern_for(base, 5, 1, 64).n == 5
        assert C.closed_form_cost(base, 5, 64, L=L, o=o, G=G) > 0


def test_single_member_collectives_cost_nothing():
    """A collective over one rank has no messages and no cost."""
    for name in set(C.COLLECTIVE_OPS.values()) - {"Neighbor"}:
        assert C.pattern_for(name, 1, 0, 64).n_messages == 0
        assert C.closed_form_cost(name, 1, 64, L=L, o=o, G=G) == 0.0


# ---- evaluation on views equals plain gathers ------------------------------------------------

def reference_evaluate(pat, entry, L, o, g, G, O, S):
    """The LogGP rounds with plain gathers and scatters, one message at a time per member,
    overheads added round by round (send, then receive): what :func:`C.evaluate` computes
    on views, kept terms and a bincount."""
    T = np.array(entry, dtype=np.float64, copy=True)
    B = T.shape[0]
    nic = np.full_like(T, -np.inf)
    busy = np.zeros_like(T)
    par = [np.broadcast_to(np.asarray(x, np.float64), (B, pat.n_messages)) for x in (L, o, g, G, O)]
    for k in range(pat.n_rounds):
        a, b = int(pat.round_offsets[k]), int(pat.round_offsets[k + 1])
        src, dst = pat.src[a:b], pat.dst[a:b]
        s = pat.nbytes[a:b].astype(np.float64)
        Lk, ok, gk, Gk, Ok = (p[:, a:b] for p in par)
        cpu, gap, lat, oL = ok + s * Ok, gk + s * Gk, ok + s * Gk + Lk, ok + Lk
        ts = np.maximum(T[:, src], nic[:, src])
        rdv = pat.nbytes[a:b] >= S
        start = np.where(rdv, np.maximum(ts + oL, T[:, dst]) + oL, ts)
        arrive = start + lat
        nic[:, src] = ts + gap
        T[:, src] = start + cpu
        T[:, dst] = np.maximum(arrive, T[:, dst]) + cpu
        busy[:, src] += cpu
        busy[:, dst] += cpu
    return T, busy


@pytest.mark.parametrize("n", [2, 6, 16, 48, 128, 256, 300])
@pytest.mark.parametrize("per_message", [False, True])
def test_evaluate_on_views_equals_plain_gathers_bit_for_bit(n, per_message):
    """Rounds evaluated in place on rolled and xor-paired views (short distances through a
    permutation), with kept cost terms and overheads summed by bincount, give exactly the
    bits of plain per-message gathers; eager and rendezvous sizes, three instances, one
    link or a link per message."""
    rng = np.random.default_rng(n)
    entry = rng.random((3, n)) * 1e-5
    for op, nbytes in (("Barrier", 0), ("Allreduce", 8), ("Allreduce", 1 << 16), ("Allgather", 700),
                       ("Alltoall", 300), ("Alltoall", 5000), ("Bcast", 9000), ("Scan", 64),
                       ("Reduce_scatter", 900), ("Gather", 100)):
        pat = C.pattern_for(op, n, 1 % n, nbytes)
        if per_message:
            fast = rng.random((1, pat.n_messages)) < 0.5
            kw = {k: np.where(fast, v * 0.3, v) for k, v in dict(L=L, o=o, g=g, G=G, O=1e-11).items()}
        else:
            kw = dict(L=L, o=o, g=g, G=G, O=1e-11)
        got, busy = C.evaluate(pat, entry, **kw, S=4096)
        want, want_busy = reference_evaluate(pat, entry, S=4096, **kw)
        assert np.array_equal(got, want), (op, n)
        assert np.array_equal(busy, want_busy), (op, n)


def test_moves_describe_the_rounds():
    """Rounds where every member sends are recognised as shifts or xor pairings."""
    assert C.alltoall_bruck(2048, 8).moves[:3] == [("roll", 1), ("roll", 2), ("roll", 4)]
    assert C.allgather_bruck(12, 8).moves[0] == ("roll", 11)
    assert C.allreduce_recursive_doubling(16, 8).moves[:3] == [("xor", 1), ("xor", 2), ("xor", 4)]
    assert C.bcast_binomial(16, 0, 8).moves == [None] * 4


@pytest.mark.parametrize("n,cores", [(16, 4), (48, 8), (256, 64), (300, 7)])
def test_link_costs_equal_per_message_parameters(n, cores):
    """Costs from two links and the members' nodes are those of five per-message
    parameter arrays chosen by the same nodes, term by term and in the overhead totals."""
    from types import SimpleNamespace as Link

    net = Link(L=5e-6, o=1e-6, g=2e-6, G=1e-9, O=1e-11)
    loc = Link(L=0.5e-6, o=0.3e-6, g=0.2e-6, G=2e-10, O=0.0)
    rng = np.random.default_rng(n)
    world = np.stack([np.arange(n), rng.permutation(n)])  # two instances, members on nodes
    nodes = world // cores
    for op, nbytes in (("Allreduce", 8), ("Allreduce", 1 << 16), ("Alltoall", 300), ("Gather", 64),
                       ("Bcast", 100000)):
        pat = C.pattern_for(op, n, 0, nbytes)
        intra = nodes[:, pat.src] == nodes[:, pat.dst]
        par = {x: np.where(intra, getattr(loc, x), getattr(net, x)) for x in "LogGO"}
        want = C.costs(pat, **par, S=4096)
        got = C.link_costs(pat, nodes, net, loc, 4096)
        entry = rng.random((2, n)) * 1e-5
        a, b = C.evaluate(pat, entry, costs_=got), C.evaluate(pat, entry, costs_=want)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]), op
        assert np.array_equal(got.busy, want.busy), op


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 9), edges=st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8)), max_size=40))
def test_neighbor_pattern_rounds_send_and_receive_once_per_member(n, edges):
    """Every edge once (repeated edges too), and in each round a member sends at most one
    message and receives at most one, as evaluate() and the compiled kernel assume."""
    src = np.array([a % n for a, _ in edges], np.int64)
    dst = np.array([b % n for _, b in edges], np.int64)
    pat = C.neighbor_pattern(n, src, dst, np.arange(len(edges)) + 1)
    assert sorted(zip(pat.src.tolist(), pat.dst.tolist(), pat.nbytes.tolist())) == \
        sorted(zip(src.tolist(), dst.tolist(), (np.arange(len(edges)) + 1).tolist()))
    for k in range(pat.n_rounds):
        a, b = pat.round_offsets[k], pat.round_offsets[k + 1]
        assert len(set(pat.src[a:b].tolist())) == b - a and len(set(pat.dst[a:b].tolist())) == b - a
        assert np.all(pat.round[a:b] == k)


def test_neighbor_pattern_is_one_round_of_the_given_edges():
    """Edges of one displacement are one round: each edge once, sorted by sender."""
    pat = C.neighbor_pattern(3, np.array([2, 0, 1]), np.array([0, 1, 2]), np.array([8, 16, 24]))
    assert pat.n_rounds == 1 and pat.src.tolist() == [0, 1, 2] and pat.dst.tolist() == [1, 2, 0]
    assert pat.nbytes.tolist() == [16, 24, 8]
    # closed form: the busiest sender's overheads and bytes, one latency, one receive overhead
    cost = C.neighbor_closed_form_cost(pat, L=L, o=o, G=G)
    assert cost == pytest.approx(o + 23 * G + L + o)
