"""The operator wired for scenario tests: the in-memory fake of our gateway protocol
(:class:`tests.fakekube.FakeKube`) for Kubernetes, the real daemon REST app (``tests.harness``:
the real reconciler, API and HTTP server over the fake Spark cluster) for the daemon.

The test plays what only a cluster would do and the operator only reads: the StatefulSet
controller's status and the driver pod (:meth:`World.run_pod`). It never plays an API server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autoscaler.operator.config import AppRef
from autoscaler.operator.controller import Controller
from autoscaler.operator.daemon_client import DaemonClient, token_from_file
from autoscaler.operator.reconcile import AppReconciler, EventRecorder, Outcome
from autoscaler.operator.settings import OperatorSettings
from autoscaler.runtime.clock import FakeClock
from tests.fakekube import FakeKube
from tests.harness import TOKEN
from tests.kube import validate

OPERATOR = "k8s-operator"


@dataclass
class World:
    kube: FakeKube
    clock: FakeClock
    controller: Controller
    reconciler: AppReconciler
    daemon_url: str
    outcomes: list[Outcome] = field(default_factory=list)

    def app(self, name: str = "clicks", namespace: str = "analytics") -> dict[str, Any]:
        return self.kube.app(namespace, name)

    def status(self, name: str = "clicks") -> dict[str, Any]:
        return self.app(name).get("status") or {}

    def condition(self, type_: str, name: str = "clicks") -> dict[str, Any] | None:
        return next((c for c in self.status(name).get("conditions") or () if c["type"] == type_), None)

    def events(self, reason: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.kube.of_kind("Event") if reason is None or e["reason"] == reason]

    def sync(self, name: str = "clicks", namespace: str = "analytics") -> Outcome:
        """What the watch delivers, then one pass of the app (as a worker would run it)."""
        self.controller.on_list(namespace, self.kube.list_apps(namespace).items)
        outcome = self.reconciler.reconcile(self.controller.cache[f"{namespace}/{name}"])
        self.outcomes.append(outcome)
        return outcome

    def drain(self) -> int:
        """Process every key that is due, as the workers would (get, process, done)."""
        done = 0
        while (key := self.controller.queue.get(timeout=0)) is not None:
            try:
                self.controller.process(key)
            finally:
                self.controller.queue.done(key)
            done += 1
        return done

    def run_pod(self, name: str = "clicks", namespace: str = "analytics", uid: str = "pod-1", ready: bool = True) -> dict[str, Any]:
        """The StatefulSet controller and the kubelet: the pod runs the current template."""
        sts = self.kube.get("StatefulSet", namespace, name)
        assert sts is not None, "the operator applied no StatefulSet"
        template = sts["spec"]["template"]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{name}-0", "namespace": namespace, "uid": uid, "labels": template["metadata"]["labels"],
                         "annotations": template["metadata"]["annotations"], "resourceVersion": self.kube.next_rv()},
            "spec": template["spec"],
            "status": {"phase": "Running", "podIP": "10.0.0.7",
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False", "lastProbeTime": None,
                                       "lastTransitionTime": "2026-11-20T10:00:00Z"}],
                       "containerStatuses": [{"name": "daemon", "ready": ready, "started": True, "restartCount": 0,
                                              "image": template["spec"]["containers"][0]["image"], "imageID": "",
                                              "state": {"running": {"startedAt": "2026-11-20T10:00:00Z"}}}]},
        }
        self.kube.objects[("Pod", namespace, f"{name}-0")] = validate(pod)
        revision = f"{name}-{sts['metadata']['resourceVersion']}"
        sts["status"] = {"observedGeneration": 1, "replicas": 1, "readyReplicas": 1 if ready else 0, "currentReplicas": 1, "updatedReplicas": 1,
                         "currentRevision": revision, "updateRevision": revision}
        sts["metadata"]["generation"] = 1
        self.kube.objects[("StatefulSet", namespace, name)] = validate(sts)
        return pod

    def roll_pending(self, name: str = "clicks", namespace: str = "analytics") -> None:
        """A new template the StatefulSet controller has not rolled out yet."""
        sts = self.kube.objects[("StatefulSet", namespace, name)]
        sts["status"] = {**sts.get("status", {}), "updateRevision": f"{name}-next"}


def world(daemon_url: str, tmp_path: Path, settings: OperatorSettings | None = None) -> World:
    token_file = tmp_path / "operator-token"
    token_file.write_text(f"{OPERATOR} {TOKEN}\n")
    settings = settings or OperatorSettings(namespaces=["analytics"])
    kube, clock = FakeKube(), FakeClock()
    token = token_from_file(token_file, OPERATOR)

    def daemon(ref: AppRef, pod: dict[str, Any]) -> DaemonClient:
        return DaemonClient(daemon_url, token=token, timeout=5, sleep=lambda s: None)

    events = EventRecorder(kube, clock, settings.events_repeat_interval, "operator-0")
    reconciler = AppReconciler(kube, settings, clock=clock, daemon=daemon, events=events)
    return World(kube, clock, Controller(kube, reconciler, settings), reconciler, daemon_url)
