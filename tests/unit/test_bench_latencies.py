"""Waiting for more batches (the latency benchmark, the integration tests), on a stand-in host (no Spark)."""

from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

from autoscaler.core.evaluate import batches_since, newest_start

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


class SlidingHost:
    """A query whose buffer is full: each new batch pushes the oldest out, as the 240-batch window does."""

    def __init__(self, size: int) -> None:
        self.starts = [T0 + timedelta(seconds=2 * i) for i in range(size)]

    def batch(self) -> None:
        self.starts = self.starts[1:] + [self.starts[-1] + timedelta(seconds=2)]

    def views(self):
        return [SimpleNamespace(samples=[SimpleNamespace(started_at=t) for t in self.starts])]


def _batches_after(host, since, count):
    return lambda: batches_since(host.views()[0].samples, since) >= count


def _newest_start(host):
    return newest_start(host.views()[0].samples)


def test_waiting_for_more_batches_counts_new_ones_when_the_buffer_is_full():
    host = SlidingHost(240)
    done = _batches_after(host, _newest_start(host), 3)
    assert not done()
    host.batch()
    host.batch()
    assert not done()
    host.batch()
    assert done()  # the buffer's length stayed 240 throughout


def test_waiting_from_no_batch_counts_every_batch():
    host = SlidingHost(0)
    done = _batches_after(host, _newest_start(host), 2)
    host.starts = [T0]
    assert not done()
    host.starts = [T0, T0 + timedelta(seconds=2)]
    assert done()
