"""Lease leader election with the official client's ``kubernetes.leaderelection``.

One operator replica leads (holds the ``coordination.k8s.io/v1`` Lease and renews it); the
others wait to take over. We do not write our own election: :class:`LeaderElector` only
checks the timings first (the client's ``Config`` calls ``sys.exit`` on a bad one, which would
end the operator without a word in its log) and points the client's ``LeaseLock`` at our
``ApiClient`` (it builds one from the global default configuration otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kubernetes import client
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

JITTER = 1.2  # the client's jitter factor: renew_deadline must exceed 1.2 x retry_period


@dataclass(frozen=True)
class LeaseTimings:
    """Seconds, as client-go's defaults: 15 s lease, 10 s renew deadline, 2 s retry period."""

    lease_duration: int = 15
    renew_deadline: int = 10
    retry_period: int = 2

    def problems(self) -> list[str]:
        """What the client's ``Config`` would ``sys.exit`` on, in words naming the values."""
        out = []
        for name in ("lease_duration", "renew_deadline", "retry_period"):
            if getattr(self, name) < 1:
                out.append(f"{name} must be at least 1 second, got {getattr(self, name)}")
        if self.lease_duration <= self.renew_deadline:
            out.append(f"lease_duration ({self.lease_duration}s) must exceed renew_deadline ({self.renew_deadline}s)")
        if self.renew_deadline <= JITTER * self.retry_period:
            out.append(f"renew_deadline ({self.renew_deadline}s) must exceed {JITTER} x retry_period ({self.retry_period}s)")
        return out


class LeaderElector:
    """Run ``on_started`` while this process holds the Lease ``namespace/name``.

    :meth:`run` blocks: it waits for the Lease, calls ``on_started`` in a thread, renews the
    Lease, and returns after ``on_stopped`` once it could not renew within the renew deadline.
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        timings: LeaseTimings,
        on_started: Callable[[], None],
        on_stopped: Callable[[], None],
    ) -> None:
        if problems := timings.problems():
            raise ValueError("leader election: " + "; ".join(problems))
        self.lock = LeaseLock(name, namespace, identity)
        self.lock.api_instance = client.CoordinationV1Api(api_client)
        config = electionconfig.Config(
            self.lock,
            lease_duration=timings.lease_duration,
            renew_deadline=timings.renew_deadline,
            retry_period=timings.retry_period,
            onstarted_leading=on_started,
            onstopped_leading=on_stopped,
        )
        self.election = leaderelection.LeaderElection(config)

    def run(self) -> None:
        self.election.run()
