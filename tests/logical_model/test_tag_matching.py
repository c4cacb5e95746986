"""Statistical channels pair each message with the receive MPI gives it: per (sender,
receiver, communicator) in order, and per tag where every receive names its tag. A
server that takes a flag (tag 9) and coordinates (tag 7) from a rank in another order
than the rank sends them (GROMACS's PME ranks: the flag for the next step is received
at the end of this one) must not have its flag paired with a coordinates receive."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from logical_model.statistical import match
from signature.trace import OP_CODE

ISEND, IRECV, RECV, SENDRECV = (OP_CODE[n] for n in ("Isend", "Irecv", "Recv", "Sendrecv"))
SENDS, RECVS, BOTH = frozenset((ISEND,)), frozenset((IRECV, RECV)), frozenset((SENDRECV,))


def _two_ranks(sent: list[int], received: list[int], recv_op=IRECV):
    """Rank 0 sends rank 1 messages with the tags ``sent`` (run 0 for tag 7, 1 for tag
    9; tag t's messages t bytes long), rank 1 posts receives with the tags ``received``
    (runs 2 and 3). Returns (per_p, run_idx) for :func:`match`."""
    n = len(sent)
    op = np.array([ISEND] * n + [recv_op] * len(received), np.int64)
    tag = np.array(sent + received, np.int64)
    peer = np.array([1] * n + [0] * len(received), np.int64)
    runs = np.array([0 if t == 7 else 1 for t in sent] + [2 if t == 7 else 3 for t in received], np.int64)
    offs = np.array([0, n, n + len(received)])
    per_p = {2: (op, peer, np.full(len(op), -1, np.int64), np.zeros(len(op), np.int64),
                 np.where(np.arange(len(op)) < n, tag, 0), offs, tag)}
    return per_p, {2: runs}


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_messages_pair_with_receives_of_their_tag_in_any_interleaving(data):
    sent = data.draw(st.lists(st.sampled_from([7, 9]), min_size=1, max_size=12))
    # the receiver takes each tag's messages in order, interleaving the two tags as it likes
    sevens, nines = sent.count(7), sent.count(9)
    picks = data.draw(st.permutations([7] * sevens + [9] * nines))
    chans = match(*_two_ranks(sent, list(picks)), SENDS, RECVS, BOTH)
    got = {(c.send, c.recv): (c.messages[2], c.bytes[2]) for c in chans}
    want = {k: v for k, v in {(0, 2): (sevens, 7 * sevens), (1, 3): (nines, 9 * nines)}.items() if v[0]}
    assert got == want


def test_receives_of_any_tag_or_of_a_sendrecv_pair_in_order():
    """Where a receive of the pair names no tag (MPI_ANY_TAG, recorded as -1), the
    messages go to the receives in order, as MPI gives them."""
    per_p, idx = _two_ranks([9, 7], [7, 9])
    per_p[2][6][3] = -1  # the second receive takes any tag
    chans = match(per_p, idx, SENDS, RECVS, BOTH)
    assert {(c.send, c.recv) for c in chans} == {(1, 2), (0, 3)}


def test_without_tags_messages_pair_in_order():
    per_p, idx = _two_ranks([9, 7], [7, 9])
    per_p = {2: per_p[2][:6]}
    assert {(c.send, c.recv) for c in match(per_p, idx, SENDS, RECVS, BOTH)} == {(1, 2), (0, 3)}
