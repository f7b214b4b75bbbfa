"""The gateway to the Kubernetes API: every call the daemon and the operator make, and nothing else.

:class:`KubeApi` wraps the official client (``kubernetes==37.*``). It answers plain JSON dicts,
exactly as the API server sent them: the generated v37 models validate responses strictly
(a StatefulSet without ``spec`` fails to deserialize), and the operator reasons about the
JSON it also writes. Calls are made with ``_preload_content=False`` and decoded here; errors
become the typed :mod:`~autoscaler.k8s.errors`; transient failures are retried
(:mod:`~autoscaler.k8s.retry`).

:class:`KubeGateway` is the protocol the operator is written against; its tests run it
against an in-memory fake of this protocol, and this class's HTTP calls are checked against
``pytest-httpserver`` answering schema-valid Kubernetes JSON (``tests/unit/k8s``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Protocol

import tenacity
import urllib3
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from autoscaler.k8s.errors import Gone, KubeError, NotFound, status_error
from autoscaler.k8s.retry import api_retrying

GROUP = "streaming.sparkautoscaler.io"
VERSION = "v1alpha1"
PLURAL = "sparkstreamingapps"
KIND = "SparkStreamingApp"
API_VERSION = f"{GROUP}/{VERSION}"
FIELD_MANAGER = "spark-autoscaler-operator"

MERGE_PATCH = "application/merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"  # JSON is YAML: the body goes as JSON


@dataclass(frozen=True)
class ObjectList:
    items: list[dict[str, Any]]
    resource_version: str


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK
    object: dict[str, Any]

    @property
    def resource_version(self) -> str | None:
        return self.object.get("metadata", {}).get("resourceVersion")


class ConfigMapApi(Protocol):
    """What the ConfigMap state store needs."""

    def read_config_map(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def create_config_map(self, namespace: str, body: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, Any]: ...

    def replace_config_map(self, namespace: str, name: str, body: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, Any]: ...


class PodApi(Protocol):
    """What the executor-pod summary needs."""

    def list_pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]: ...


class KubeGateway(Protocol):
    """Every call the operator makes (its Role in the chart allows exactly these)."""

    def list_apps(self, namespace: str) -> ObjectList: ...

    def watch_apps(self, namespace: str, resource_version: str, timeout_seconds: int) -> Iterator[WatchEvent]:
        """Events after ``resource_version`` until the server ends the watch; raises :class:`Gone` (410)."""
        ...

    def patch_app_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> dict[str, Any]: ...

    def apply(self, obj: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        """Server-side apply (our field manager, ``force``): creates or updates ``obj``'s fields;
        with ``dry_run``, the API server checks it all (admission included) and stores nothing."""
        ...

    def get_statefulset(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def get_event(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def create_event(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]: ...

    def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> dict[str, Any]: ...


CallObserver = Callable[[str, str, "int | None"], None]  # (verb, resource, status code or None)


class KubeApi:
    """The gateway over the official client; ``observe(verb, resource, code)`` sees every answer."""

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        retrying: Callable[[], tenacity.Retrying] = api_retrying,
        field_manager: str = FIELD_MANAGER,
        observe: CallObserver | None = None,
    ) -> None:
        self.api_client = api_client
        self.core = client.CoreV1Api(api_client)
        self.apps = client.AppsV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self._retrying = retrying
        self.field_manager = field_manager
        self._observe = observe

    # --- plumbing ---------------------------------------------------------------------------

    def _call(self, verb: str, resource: str, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        """One call with retries; the JSON body as a dict."""

        def once() -> dict[str, Any]:
            try:
                response = fn(*args, _preload_content=False, **kwargs)
            except ApiException as exc:
                self._seen(verb, resource, exc.status)
                raise status_error(what, exc.status, exc.body, exc.headers) from None
            except urllib3.exceptions.HTTPError as exc:  # refused, reset, timed out: no answer
                self._seen(verb, resource, None)
                raise KubeError(what, None, message=str(exc)) from None
            self._seen(verb, resource, response.status)
            data = response.data
            return json.loads(data) if data else {}

        result: dict[str, Any] = self._retrying()(once)
        return result

    def _seen(self, verb: str, resource: str, code: int | None) -> None:
        if self._observe is not None:
            self._observe(verb, resource, code)

    def _get_or_none(self, verb: str, resource: str, what: str, fn: Callable[..., Any], *args: Any) -> dict[str, Any] | None:
        try:
            return self._call(verb, resource, what, fn, *args)
        except NotFound:
            return None

    # --- SparkStreamingApps -----------------------------------------------------------------

    def list_apps(self, namespace: str) -> ObjectList:
        body = self._call("list", PLURAL, f"list {PLURAL} in {namespace}", self.custom.list_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL)
        return ObjectList(list(body.get("items") or []), str(body.get("metadata", {}).get("resourceVersion", "")))

    def watch_apps(self, namespace: str, resource_version: str, timeout_seconds: int) -> Iterator[WatchEvent]:
        what = f"watch {PLURAL} in {namespace} from resourceVersion {resource_version}"
        stream = watch.Watch().stream(
            self.custom.list_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout_seconds,
        )
        try:
            for event in stream:
                yield WatchEvent(str(event["type"]), event["raw_object"])
            self._seen("watch", PLURAL, 200)
        except ApiException as exc:
            # an ERROR event in the stream (410 when the version is too old) or a failed request
            self._seen("watch", PLURAL, exc.status)
            error = status_error(what, exc.status, exc.body, exc.headers)
            if exc.status == 410 and not isinstance(error, Gone):
                error = Gone(what, 410, str(exc.reason))
            raise error from None
        except urllib3.exceptions.HTTPError as exc:
            self._seen("watch", PLURAL, None)
            raise KubeError(what, None, message=str(exc)) from None

    def patch_app_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> dict[str, Any]:
        # a merge patch of /status: the operator is the only writer of status (it holds the Lease)
        return self._call(
            "patch",
            f"{PLURAL}/status",
            f"patch {PLURAL}/{name}/status in {namespace}",
            self.custom.patch_namespaced_custom_object_status,
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            name,
            {"status": dict(status)},
            _content_type=MERGE_PATCH,
        )

    # --- children -----------------------------------------------------------------------------

    def apply(self, obj: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        kind, meta = obj["kind"], obj["metadata"]
        patchers = {
            "ConfigMap": ("configmaps", self.core.patch_namespaced_config_map),
            "Service": ("services", self.core.patch_namespaced_service),
            "StatefulSet": ("statefulsets", self.apps.patch_namespaced_stateful_set),
        }
        if kind not in patchers:
            raise ValueError(f"apply: the operator does not own objects of kind {kind!r}")
        resource, patch = patchers[kind]
        return self._call(
            "patch",
            resource,
            f"apply {resource}/{meta['name']} in {meta['namespace']}",
            patch,
            meta["name"],
            meta["namespace"],
            dict(obj),
            field_manager=self.field_manager,
            force=True,
            _content_type=APPLY_PATCH,
            **({"dry_run": "All"} if dry_run else {}),
        )

    def get_statefulset(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get_or_none("get", "statefulsets", f"get statefulsets/{name} in {namespace}", self.apps.read_namespaced_stateful_set, name, namespace)

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get_or_none("get", "pods", f"get pods/{name} in {namespace}", self.core.read_namespaced_pod, name, namespace)

    # --- events -------------------------------------------------------------------------------

    def get_event(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get_or_none("get", "events", f"get events/{name} in {namespace}", self.core.read_namespaced_event, name, namespace)

    def create_event(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._call("create", "events", f"create events in {namespace}", self.core.create_namespaced_event, namespace, dict(body))

    def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        return self._call(
            "patch", "events", f"patch events/{name} in {namespace}", self.core.patch_namespaced_event, name, namespace, dict(patch),
            _content_type=MERGE_PATCH,
        )

    # --- ConfigMaps (the daemon's state) --------------------------------------------------------

    def read_config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get_or_none("get", "configmaps", f"get configmaps/{name} in {namespace}", self.core.read_namespaced_config_map, name, namespace)

    def create_config_map(self, namespace: str, body: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        return self._call(
            "create", "configmaps", f"create configmaps/{body['metadata']['name']} in {namespace}", self.core.create_namespaced_config_map,
            namespace, dict(body), dry_run="All" if dry_run else None,
        )

    def replace_config_map(self, namespace: str, name: str, body: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        return self._call(
            "update", "configmaps", f"replace configmaps/{name} in {namespace}", self.core.replace_namespaced_config_map,
            name, namespace, dict(body), dry_run="All" if dry_run else None,
        )

    # --- pods (the daemon's executors) ----------------------------------------------------------

    def list_pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        # resourceVersion=0: served from the API server's watch cache, cheap to ask every tick;
        # a second-old list is good enough to explain a wait
        body = self._call(
            "list", "pods", f"list pods -l {label_selector} in {namespace}", self.core.list_namespaced_pod, namespace,
            label_selector=label_selector, resource_version="0",
        )
        return list(body.get("items") or [])
