"""Why a phase has no order: the test that two ranks' calls are one cycle cut at other
calls (``model._is_rotation``) in time linear in their length."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from logical_model.model import _is_rotation


@settings(max_examples=200, deadline=None)
@given(a=st.lists(st.integers(0, 2), max_size=12), k=st.integers(0, 11), other=st.booleans(),
       b=st.lists(st.integers(0, 2), max_size=12))
def test_rotation_test_equals_every_rotation_compared(a, k, other, b):
    """``model._is_rotation`` (a search in a + a) says what comparing every rotation said."""
    a = [(x,) for x in a]
    b = [(x,) for x in b] if other else a[k % max(len(a), 1):] + a[:k % max(len(a), 1)]
    assert _is_rotation(a, b) == any(b == a[i:] + a[:i] for i in range(1, len(a)))
