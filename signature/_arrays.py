"""Index arithmetic on event arrays that the signature and the replay both need.

Kept below both packages (the replay builds on the signature, never the reverse):
concatenated ranges of indices, the events a (rank, seq) table names, and the latest
(or next) row of a table with a query's key relative to a position.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ranges", "find_events", "lookup"]


def ranges(start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """The integers of the ranges [start[i], start[i] + length[i]) one after the other
    (none where length[i] <= 0)."""
    n = np.maximum(np.asarray(length, np.int64), 0)
    total = int(n.sum())
    if not total:
        return np.zeros(0, np.int64)
    return np.repeat(np.asarray(start, np.int64) - np.cumsum(n) + n, n) + np.arange(total)


def find_events(rank: np.ndarray, seq: np.ndarray, q_rank: np.ndarray, q_seq: np.ndarray) -> np.ndarray:
    """Index of the event of each (``q_rank``, ``q_seq``) among events sorted by (``rank``,
    ``seq``), as a trace's are; -1 where there is none (a completions table's rows name
    their wait this way)."""
    rank, seq = np.asarray(rank, np.int64), np.asarray(seq, np.int64)
    q_rank, q_seq = np.asarray(q_rank, np.int64), np.asarray(q_seq, np.int64)
    out = np.full(len(q_rank), -1, np.int64)
    if not len(rank) or not len(q_rank):
        return out
    span = int(max(seq.max(), q_seq.max())) + 1
    key = rank * span + seq
    want = q_rank * span + q_seq
    i = np.minimum(np.searchsorted(key, want), len(key) - 1)
    hit = key[i] == want
    out[hit] = i[hit]
    return out


def lookup(table_key, table_pos, query_key, query_pos, *, side: str) -> np.ndarray:
    """Index of the table row with the query's key and the largest position below the
    query's (``side="before"``) or the smallest at or above it (``"after"``); -1 if none.
    Table rows have distinct (key, position) pairs. One sort of the table on
    (key, position) combined in one int64, then one search per query."""
    out = np.full(len(query_key), -1, np.int64)
    if not len(table_key) or not len(query_key):
        return out
    span = int(max(table_pos.max(), query_pos.max())) + 2
    lo = int(min(table_key.min(), query_key.min()))
    width = int(max(table_key.max(), query_key.max())) - lo + 1
    if width * span < (1 << 62):
        tk, qk = table_key - lo, query_key - lo
    else:  # sparse keys: number the table's densely (queries with another key match nothing)
        uk, tk = np.unique(table_key, return_inverse=True)
        tk = tk.reshape(-1).astype(np.int64)
        q = np.minimum(np.searchsorted(uk, query_key), len(uk) - 1)
        qk = np.where(uk[q] == query_key, q, -1).astype(np.int64)
    tc = tk * span + (table_pos + 1)
    order = np.argsort(tc)  # (key, position) pairs are distinct: any sort is stable
    tcs = tc[order]
    qc = qk * span + (query_pos + 1)
    if side == "before":
        i = np.searchsorted(tcs, qc, side="left") - 1
        ok = i >= 0
    else:
        i = np.searchsorted(tcs, qc, side="left")
        ok = i < len(tcs)
    i = np.clip(i, 0, len(tcs) - 1)
    ok &= (tcs[i] // span == qk) & (qk >= 0)
    out[ok] = order[i[ok]]
    return out
