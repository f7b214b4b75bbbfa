"""Helpers for the append-only sequences the reconciler reads every tick (batch buffers, rate history)."""

from __future__ import annotations

import bisect
import itertools
from typing import Any, Iterable, Iterator, Sequence, TypeVar, overload

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


class Timeline(Sequence[T]):
    """An immutable sequence for a history that grows at its end and is cut at its front every
    tick (the scaling history's recommendations: 500 of them).

    A tuple copies every item twice a tick there (the append, then the cut) and touches each
    item's reference count four times. Here the newest items sit in a short tail that an append
    copies (at most ``CHUNK`` of them), and a cut moves an offset into the older part; once the
    tail is full, both parts are joined into one, so an item is copied about once per ``CHUNK``
    appends. Equal to any tuple or timeline with the same items; the items must be in order for
    :meth:`bisect_left`.
    """

    __slots__ = ("_head", "_start", "_tail")
    CHUNK = 64

    def __init__(self, items: Iterable[T] = ()) -> None:
        self._head: tuple[T, ...] = tuple(items)
        self._start = 0  # items of _head before this were cut
        self._tail: tuple[T, ...] = ()

    @classmethod
    def _of(cls, head: tuple[T, ...], start: int, tail: tuple[T, ...]) -> Timeline[T]:
        new = cls.__new__(cls)
        new._head, new._start, new._tail = head, start, tail
        return new

    def appended(self, item: T) -> Timeline[T]:
        """This timeline with ``item`` at its end."""
        tail = self._tail + (item,)
        if len(tail) < self.CHUNK:
            return self._of(self._head, self._start, tail)
        return self._of(self._head[self._start :] + tail, 0, ())

    def cut(self, count: int) -> Timeline[T]:
        """This timeline without its first ``count`` items."""
        if count <= 0:
            return self
        start = self._start + count
        if start < len(self._head):
            # the cut items stay referenced until the next join (at most CHUNK appends away)
            return self._of(self._head, start, self._tail)
        return self._of(self._tail[start - len(self._head) :], 0, ())

    def bisect_left(self, value: Any) -> int:
        """Where ``value`` would go among the (ordered) items, as :func:`bisect.bisect_left`."""
        head = self._head
        i = bisect.bisect_left(head, value, self._start)
        if i < len(head):
            return i - self._start
        return len(head) - self._start + bisect.bisect_left(self._tail, value)

    def __len__(self) -> int:
        return len(self._head) - self._start + len(self._tail)

    def __iter__(self) -> Iterator[T]:
        return itertools.chain(itertools.islice(self._head, self._start, None), self._tail)

    def __reversed__(self) -> Iterator[T]:
        return itertools.chain(reversed(self._tail), itertools.islice(reversed(self._head), len(self._head) - self._start))

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...
    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        size = len(self)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("timeline index out of range")
        in_head = len(self._head) - self._start
        return self._head[self._start + index] if index < in_head else self._tail[index - in_head]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Timeline, tuple)):
            return len(self) == len(other) and tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Timeline({tuple(self)!r})"

    def __reduce__(self) -> tuple[type, tuple[tuple[T, ...]]]:
        return type(self), (tuple(self),)
