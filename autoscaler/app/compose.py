"""The composition root: the one place that wires a daemon.

Driver mode, attach, the simulator and the test harness all build their daemon here:
:func:`configure` loads the policies (built-in and third-party) and then the settings;
:func:`assemble` puts a reconciler (with its realizer, state store and audit trail), the loop
and, where asked for, the Prometheus metrics around the ports a caller brings (the cluster
observer and the actuators: real Spark, the simulated application, or the fakes of the tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from prometheus_client import CollectorRegistry

from autoscaler.core.model import TickRecord
from autoscaler.core.settings import Settings
from autoscaler.ops.auth import ApiAuth, TokenFileError
from autoscaler.ops.metrics import Metrics
from autoscaler.runtime.audit import AuditTrail
from autoscaler.runtime.clock import Clock
from autoscaler.runtime.config import SettingsError, file_problem, load_settings
from autoscaler.runtime.loop import ReconcileLoop
from autoscaler.runtime.ports import (
    ClusterObserver,
    ExecutorActuator,
    QueryActuator,
    StateStore,
)
from autoscaler.runtime.reconciler import Reconciler
from autoscaler.runtime.state import StateStoreError, open_state_store
from policies.registry import load_policies

__all__ = ["Daemon", "assemble", "configure", "load_policies", "new_metrics", "open_store", "token_file_problems"]


def configure(
    path: str | Path | None = None, overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Load the policies, then the settings (file < environment < ``overrides``), all checked,
    the token files read as the REST API will read them."""
    load_policies()
    settings = load_settings(path, overrides, environ)
    if problems := token_file_problems(settings):
        raise SettingsError(problems)
    return settings


def token_file_problems(settings: Settings) -> list[str]:
    """Why each token file the HTTP server would read cannot be used, by its key: read by the API's
    own reader (``ApiAuth``), so ``run --check`` finds the bad line, bytes that are not UTF-8 or a
    file that cannot be read that stopped the daemon at start. One missing or no file is told by
    the settings already (``file_problem``)."""
    http = settings.http
    if not http.enabled:
        return []
    files = [("http.token_file", http.token_file)] if http.token_file is not None else []
    files += [(f"http.token_files.{i}", path) for i, path in enumerate(http.token_files)]
    problems = []
    for key, path in files:
        if file_problem(path) is None:
            try:
                ApiAuth({}, token_files=(path,))
            except TokenFileError as exc:
                problems.append(f"{key}: {exc}")
    return problems


def open_store(settings: Settings, environ: Mapping[str, str] | None = None) -> StateStore | None:
    """The state store the settings ask for: a ConfigMap (``state.configmap``, on Kubernetes), a
    file (``state.path``), or none. The runtime knows the file store; the Kubernetes one is
    picked here, so the runtime never imports the Kubernetes adapter."""
    if settings.state.configmap is None:
        return open_state_store(settings)
    from autoscaler.k8s.client import api_client, own_namespace
    from autoscaler.k8s.gateway import KubeApi
    from autoscaler.k8s.state import ConfigMapStateStore

    namespace, _, name = settings.state.configmap.rpartition("/")
    namespace = namespace or own_namespace(dict(environ) if environ is not None else None) or ""
    if not namespace:
        raise StateStoreError(
            f"state.configmap {settings.state.configmap!r}: no namespace (not in a pod, and POD_NAMESPACE is unset); write NAMESPACE/NAME"
        )
    try:
        client = api_client()
    except Exception as exc:  # the client's config loaders raise their own types
        raise StateStoreError(f"state ConfigMap {namespace}/{name}: cannot reach the Kubernetes API: {exc}") from exc
    return ConfigMapStateStore(KubeApi(client), namespace, name)


def new_metrics(settings: Settings, application: str) -> Metrics:
    """The daemon's metrics on a registry of their own (what ``/metrics`` serves)."""
    metrics = Metrics(CollectorRegistry(), application=application, policy=settings.policy.name)
    metrics.configure(settings)
    return metrics


@dataclass
class Daemon:
    """A wired daemon: run ``loop`` (or tick ``reconciler``) to scale."""

    settings: Settings
    clock: Clock
    reconciler: Reconciler
    loop: ReconcileLoop
    metrics: Metrics | None

    @property
    def audit(self) -> AuditTrail:
        return self.reconciler.audit

    @property
    def registry(self) -> CollectorRegistry | None:
        return self.metrics.registry if self.metrics is not None else None


def assemble(
    settings: Settings,
    *,
    observer: ClusterObserver,
    executors: ExecutorActuator,
    queries: QueryActuator | None,
    clock: Clock,
    state_store: StateStore | None = None,
    metrics: Metrics | None = None,
    audit: AuditTrail | None = None,
    on_tick: Callable[[TickRecord], None] | None = None,
) -> Daemon:
    """A reconciler and its loop around these ports; ``metrics`` (see :func:`new_metrics`) are fed
    every tick and every failed one, ``on_tick`` sees each record after them."""
    load_policies()

    def tick_done(record: TickRecord) -> None:
        if metrics is not None:
            metrics.observe_tick(record)
        if on_tick is not None:
            on_tick(record)

    def tick_failed(phase: str, _exc: BaseException) -> None:
        if metrics is not None:
            metrics.tick_failed(phase)

    reconciler = Reconciler(
        settings=settings,
        observer=observer,
        executors=executors,
        queries=queries,
        clock=clock,
        state_store=state_store,
        on_tick=tick_done if metrics is not None or on_tick is not None else None,
        audit=audit,
    )
    loop = ReconcileLoop(reconciler, clock, settings.reconcile_interval, on_error=tick_failed)
    return Daemon(settings, clock, reconciler, loop, metrics)
