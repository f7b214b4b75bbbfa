"""Where a buffer read last tick continues (batch buffers, the rate history)."""

from __future__ import annotations

from typing import Sequence, TypeVar

T = TypeVar("T")


def count_after(items: Sequence[T], item: T, *, within: int | None = None) -> int | None:
    """How many items follow ``item`` in ``items``, or None when it is not there.

    Found by identity, searching back from the end (at most ``within`` places): a buffer read
    again on the next tick has grown at the end by a few items, so the last item seen last time
    tells where the new ones start.
    """
    limit = len(items) if within is None else min(len(items), within)
    for back in range(limit):
        if items[-1 - back] is item:
            return back
    return None
