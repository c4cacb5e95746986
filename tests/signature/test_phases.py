"""Phase detection on the bundled traces and on crafted token streams."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import TRACES
from signature import Signature, TraceFormatError, extract, load_trace
from signature.phases import cut_rank, find_anchor

ORIGINAL = sorted(TRACES.glob("*/P*.h5"))
SMALL = sorted(TRACES.glob("*/small/P*.h5"))
HELDOUT = sorted(TRACES.glob("*/heldout/P*.h5"))
APPS = ("stencil", "cg", "nbody", "fft2d", "sweep")


def expected_loop_weights(trace) -> list[int]:
    """The loop phases' weights, from the program's own iteration count (its --iters, as
    recorded in the trace) and loop structure (see each program's docstring)."""
    cmd = trace.meta["command"]
    n = int(cmd[cmd.index("--iters") + 1])
    P = trace.nprocs
    return {
        "stencil": [n - n // 10, n // 10],  # residual Allreduce every 10th iteration
        "cg": [n],
        "nbody": [(P - 1) * n],  # P-1 shifts inside every step
        "fft2d": [2 * n],  # forward and inverse transpose
        "sweep": [4 * n],  # 4 pipeline chunks per sweep
    }[trace.meta["app"]]


@pytest.mark.parametrize("path", ORIGINAL + SMALL + HELDOUT,
                         ids=[str(p.relative_to(TRACES)) for p in ORIGINAL + SMALL + HELDOUT])
def test_phases_and_weights_are_the_programs_loops(path):
    """Detected phases and weights equal the loop structure each program has, at every P and workload."""
    t = load_trace(path)
    sig = extract(t)
    kinds = [p.kind for p in sig.phases]
    assert kinds[0] == "initial" and kinds[-1] == "final"
    assert [p.weight for p in sig.loop_phases] == expected_loop_weights(t)
    assert len(sig.sequence) == sum(p.weight for p in sig.loop_phases)


@pytest.mark.parametrize("path", ORIGINAL + SMALL, ids=[str(p.relative_to(TRACES)) for p in ORIGINAL + SMALL])
def test_eq4_reproduces_the_runtime(path):
    """PET = sum TE_i * W_i on the traced run is within 5% of its measured runtime."""
    sig = extract(load_trace(path))
    assert sig.pet_error < 0.05, sig.table()
    assert 0 < sig.coverage <= 1.0


@pytest.mark.parametrize("path", ORIGINAL + SMALL, ids=[str(p.relative_to(TRACES)) for p in ORIGINAL + SMALL])
def test_phases_cover_95_percent_of_every_signature_run(path):
    """Every rank spends at least 95% of each signature run (P <= 16) inside the
    repeated phases, on average, and the slowest rank 90%; the held-out P = 64 runs,
    32x oversubscribed, spend longer starting up and are not signature runs."""
    sig = extract(load_trace(path))
    assert sig.coverage >= 0.95, sig.table()
    assert sig.coverage_slowest >= 0.90, sig.table()
    assert sig.coverage <= 1.0 + 1e-9 and 0 < sig.loop_span <= 1.0


def test_pipeline_drain_counts_as_loop_time():
    """In the sweep's wavefront the first ranks finish early and wait for the drain in
    the final Allreduce: the phase accounting charges that wait to the final part, the
    coverage counts it as the loop's (it waits for the last rank's last iteration)."""
    sig = extract(load_trace(TRACES / "sweep" / "P16.h5"))
    final = sig.phases[-1]
    assert final.stats["comm_mean"][0] > 5 * final.stats["comm_mean"][-1]  # rank 0 waits, the last rank does not
    in_phases = sum(p.te * p.weight for p in sig.loop_phases if p.weight >= 2) / sig.runtime
    assert sig.coverage > in_phases + 0.02


def test_stencil_phases_say_what_they_do():
    """The check phase (every 10th iteration) is the plain one plus the residual Allreduce."""
    t = load_trace(TRACES / "stencil" / "P16.h5")
    n = int(t.meta["command"][t.meta["command"].index("--iters") + 1])
    sig = extract(t)
    plain, check = sig.loop_phases
    assert plain.ops == ("Irecv", "Isend", "Waitall")
    assert check.ops == ("Irecv", "Isend", "Waitall", "Allreduce")
    # iterations 9, 19, 29, ... carry the check: the sequence shows it
    seq = sig.sequence
    assert list(np.flatnonzero(seq == check.id)) == list(range(9, n, 10))
    assert (plain.weight, check.weight) == (n - n // 10, n // 10)
    # per-rank templates: an interior rank of the 4x4 grid talks to 4 neighbours
    tpl = plain.rank_template(5)
    assert sorted(tpl["peer"][tpl["op"] == 13].tolist()) == [1, 4, 6, 9]  # Irecv peers
    assert np.all(plain.stats["cpu_mean"] > 0)


@pytest.mark.parametrize("app", APPS)
def test_phase_order_and_ops_agree_across_p(app):
    """The same program at different P gives the same phases in the same order with the same ops."""
    sigs = [extract(load_trace(p)) for p in sorted((TRACES / app).glob("P*.h5"))]
    assert len(sigs) >= 3
    ref = [(p.kind, p.ops) for p in sigs[0].phases if p.kind == "loop"]
    for s in sigs[1:]:
        assert [(p.kind, p.ops) for p in s.phases if p.kind == "loop"] == ref


def test_signature_round_trips_through_json(tmp_path):
    """A saved signature loads back equal, and an existing file is not overwritten."""
    sig = extract(load_trace(TRACES / "cg" / "P8.h5"))
    path = sig.save(tmp_path / "cg.signature.json")
    back = Signature.load(path)
    assert back.to_dict() == sig.to_dict()
    with pytest.raises(FileExistsError):
        sig.save(path)
    (tmp_path / "bad.json").write_text('{"kind": "something else"}')
    with pytest.raises(TraceFormatError, match="bad.json: .*not a sigex signature"):
        Signature.load(tmp_path / "bad.json")


def _drop_event(trace, rank: int, op_name: str):
    """A copy of ``trace`` without the first ``op_name`` event of ``rank``."""
    ev = trace.events
    idx = np.flatnonzero((ev["rank"] == rank) & (ev["op"] == trace.op_code(op_name)))[0]
    keep = np.ones(len(ev["op"]), bool)
    keep[idx] = False
    events = {k: v[keep] for k, v in ev.items()}
    ro = trace.rank_offsets.copy()
    ro[rank + 1:] -= 1
    return dataclasses.replace(trace, events=events, rank_offsets=ro), int(ev["seq"][idx])


def test_unmatched_messages_name_rank_and_event():
    """A Sendrecv removed from the trace leaves a receive without its send: named, not phased
    (the send it also removes leaves a message nobody receives, which alone would be a note:
    tests/signature/test_unreceived.py)."""
    t = load_trace(TRACES / "nbody" / "P4.h5")
    broken, _ = _drop_event(t, 2, "Sendrecv")
    with pytest.raises(TraceFormatError, match=r"unmatched point-to-point messages: rank \d receives "
                       r"\d+ messages from rank 2 but rank 2 sends \d+; the first unmatched"):
        extract(broken)


def test_truncated_rank_is_refused():
    """A trace whose run did not finish is refused by the detector, naming why."""
    t = load_trace(TRACES / "cg" / "P4.h5")
    t.meta["complete"] = False
    t.meta["incomplete_reason"] = "rank 3 has no end record (run crashed or was killed)"
    with pytest.raises(TraceFormatError, match="rank 3 has no end record"):
        extract(t)


def test_ranks_that_cut_differently_are_aligned_by_their_collectives():
    """A rank that skips the first Alltoall cuts one iteration fewer: its iterations are
    aligned with the others' by the collective calls they share, not refused, and the
    Alltoall loop keeps one phase."""
    t = load_trace(TRACES / "fft2d" / "small" / "P4.h5")
    n = 2 * int(t.meta["command"][t.meta["command"].index("--iters") + 1])  # two transposes a step
    broken, _ = _drop_event(t, 1, "Alltoall")
    sig = extract(broken, check=False)
    assert [(p.ops, p.weight) for p in sig.loop_phases] == [(("Alltoall",), n - 1)]
    assert abs(sig.pet - sig.runtime) < 0.05 * sig.runtime


# ---- the cutting algorithm on synthetic token streams ---------------------------------
def _tokens(text: str) -> np.ndarray:
    return np.array([ord(c) for c in text], np.uint64)


def _phases(text: str):
    tok = _tokens(text)
    init_end, starts, hashes, final_start = cut_rank(tok)
    bounds = list(starts) + [final_start]
    segs = [text[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    return text[:init_end], segs, text[final_start:]


def test_cut_handles_a_check_every_k_iterations():
    """abc x9 + abcR, ten times: 90 'abc' and 10 'abcR' iterations, the rest initial/final."""
    init, segs, final = _phases("XY" + ("abc" * 9 + "abcR") * 10 + "ZZ")
    assert init == "XY" and final == "ZZ"
    assert segs.count("abc") == 90 and segs.count("abcR") == 10


def test_cut_picks_the_iteration_start_not_a_rotation():
    """An initial token equal to the loop's last token does not rotate the iteration."""
    init, segs, final = _phases("R" + "hhRR" * 6 + "hhQ")
    assert init == "R" and set(segs) == {"hhRR"} and final == "hhQ"


def test_no_loop_means_no_iterations():
    """A stream without repeats is all initial part."""
    assert find_anchor(_tokens("abcdefg")) is None
    assert _phases("abcdefg") == ("abcdefg", [], "")


def _distinct(alphabet, **kw):
    return st.text(alphabet=alphabet, **kw).filter(lambda s: len(set(s)) == len(s))


@settings(max_examples=60, deadline=None)
@given(body=_distinct("abcdefgh", min_size=1, max_size=6), k=st.integers(3, 30),
       head=_distinct("XYZ", max_size=3), tail=_distinct("UVW", max_size=3))
def test_cut_recovers_any_loop(body, k, head, tail):
    """For any loop body of distinct tokens repeated k >= 3 times between a head and a tail
    that do not repeat, the iterations are exactly the k bodies."""
    init, segs, final = _phases(head + body * k + tail)
    assert segs == [body] * k
    assert init == head and final == tail


@pytest.mark.parametrize("counts, scattered", [
    ([28050, 760, 15941, 48507], True),        # hpcc RandomAccess rounds at P=4: each rank its own
    ([4346, 9498, 7758, 5467], True),
    ([4413, 4413, 4413, 2054, 2480, 2480], False),  # two k-point pools of pw.x: each agrees
    ([538, 494, 538, 485], False),             # HPL's process rows and columns: within 1.5x
    ([400, 400, 400, 0], False),               # a rank without the loop does not count
    ([12, 0, 0, 0], False),
])
def test_a_loop_is_dropped_only_when_its_counts_scatter(counts, scattered):
    """A loop is the program's when a quarter of its ranks (two at least) cut it alike or
    all counts lie within a factor 1.5; rounds that each rank runs at its own pace are not."""
    from signature.align import _scattered
    assert _scattered(np.array(counts)) is scattered
