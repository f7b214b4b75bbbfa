"""An in-memory fake of OUR gateway protocols (``autoscaler.k8s.gateway``): ``KubeGateway`` for
the operator, ``ConfigMapApi`` for the state store. It is not an API server and does not
pretend to be one: it implements the dozen calls our code makes, with the semantics our code
relies on and nothing more:

* every write bumps a ``resourceVersion`` counter; a replace carrying a stale one gets
  :class:`Conflict` (409); a create of an existing name gets :class:`Conflict` (AlreadyExists);
* a spec change of an app bumps ``metadata.generation``; status writes do not;
* watches replay a change log from a ``resourceVersion``; :meth:`expire` makes older versions
  answer :class:`Gone` (410), as a compacted etcd does;
* server-side apply is modelled as "the applied object replaces ours": field ownership and
  merging are NOT modelled (they are the API server's; only a real cluster shows them).

Objects it stores and answers are checked with ``kubernetes-validate`` (built-in kinds) where
the test builds them, see :mod:`tests.kube`.
"""

from __future__ import annotations

import copy
import itertools
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from autoscaler.k8s.errors import Conflict, Gone, KubeError, NotFound
from autoscaler.k8s.gateway import ObjectList, WatchEvent


class FakeKube:
    def __init__(self) -> None:
        self._rv = itertools.count(1)
        self._lock = threading.RLock()
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}  # (kind, namespace, name)
        self.log: list[tuple[str, str, dict[str, Any]]] = []  # (rv, type, app) for watches
        self.expired_before = 0
        self.calls: list[tuple[str, str, str]] = []  # (verb, kind, name)
        self.fail: dict[tuple[str, str], list[KubeError]] = {}  # (verb, kind) -> errors to raise next
        self.pods_listed: list[dict[str, Any]] = []

    # --- test controls --------------------------------------------------------------------------

    def next_rv(self) -> str:
        return str(next(self._rv))

    def put_app(self, app: dict[str, Any]) -> dict[str, Any]:
        """Create or update an app as a user would (``kubectl apply``): spec changes bump the generation."""
        with self._lock:
            app = copy.deepcopy(app)
            md = app["metadata"]
            key = ("SparkStreamingApp", md["namespace"], md["name"])
            old = self.objects.get(key)
            if old is None:
                md.setdefault("uid", f"uid-{md['name']}")
                md["generation"] = 1
                md.setdefault("creationTimestamp", "2026-11-20T10:00:00Z")
                kind = "ADDED"
            else:
                md["uid"] = old["metadata"]["uid"]
                md["creationTimestamp"] = old["metadata"]["creationTimestamp"]
                md["generation"] = old["metadata"]["generation"] + (0 if old.get("spec") == app.get("spec") else 1)
                if "status" in old:
                    app["status"] = old["status"]
                kind = "MODIFIED"
            md["resourceVersion"] = self.next_rv()
            self.objects[key] = app
            self.log.append((md["resourceVersion"], kind, copy.deepcopy(app)))
            return copy.deepcopy(app)

    def delete_app(self, namespace: str, name: str) -> None:
        with self._lock:
            app = self.objects.pop(("SparkStreamingApp", namespace, name))
            app["metadata"]["resourceVersion"] = self.next_rv()
            self.log.append((app["metadata"]["resourceVersion"], "DELETED", app))

    def expire(self) -> None:
        """Compact history: a watch from any version seen so far answers 410 Gone."""
        with self._lock:
            self.expired_before = int(self.next_rv())

    def app(self, namespace: str, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.objects[("SparkStreamingApp", namespace, name)])

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        obj = self.objects.get((kind, namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(o) for (k, _, _), o in sorted(self.objects.items()) if k == kind]

    def _maybe_fail(self, verb: str, kind: str, name: str) -> None:
        self.calls.append((verb, kind, name))
        errors = self.fail.get((verb, kind))
        if errors:
            raise errors.pop(0)

    # --- KubeGateway: apps ----------------------------------------------------------------------

    def list_apps(self, namespace: str) -> ObjectList:
        with self._lock:
            self._maybe_fail("list", "SparkStreamingApp", "")
            items = [copy.deepcopy(o) for (k, ns, _), o in sorted(self.objects.items()) if k == "SparkStreamingApp" and ns == namespace]
            return ObjectList(items, str(int(self.next_rv()) - 1))

    def watch_apps(self, namespace: str, resource_version: str, timeout_seconds: int) -> Iterator[WatchEvent]:
        with self._lock:
            self._maybe_fail("watch", "SparkStreamingApp", "")
            if int(resource_version) < self.expired_before:
                raise Gone(f"watch sparkstreamingapps from {resource_version}", 410, "Expired", "too old resource version")
            events = [WatchEvent(t, copy.deepcopy(o)) for rv, t, o in self.log
                      if int(rv) > int(resource_version) and o["metadata"]["namespace"] == namespace]
        yield from events  # then the server ends the watch (its timeout)

    def patch_app_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._maybe_fail("patch", "SparkStreamingApp/status", name)
            key = ("SparkStreamingApp", namespace, name)
            if key not in self.objects:
                raise NotFound(f"patch sparkstreamingapps/{name}/status", 404, "NotFound")
            app = self.objects[key]
            app["status"] = _merge(app.get("status") or {}, dict(status))
            app["metadata"]["resourceVersion"] = self.next_rv()
            self.log.append((app["metadata"]["resourceVersion"], "MODIFIED", copy.deepcopy(app)))
            return copy.deepcopy(app)

    # --- KubeGateway: children ------------------------------------------------------------------

    def apply(self, obj: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        with self._lock:
            md = obj["metadata"]
            self._maybe_fail("apply", obj["kind"], md["name"])
            if dry_run:
                return copy.deepcopy(dict(obj))  # checked (a refusal queued in `fail` raises above), nothing stored
            key = (obj["kind"], md["namespace"], md["name"])
            old = self.objects.get(key)
            new = copy.deepcopy(dict(obj))
            if old is not None:
                for kept in ("binaryData", "status"):  # fields other managers own
                    if kept in old and kept not in new:
                        new[kept] = old[kept]
                new["metadata"]["uid"] = old["metadata"]["uid"]
                if _without_meta_rv(old) == _without_meta_rv(new):
                    return copy.deepcopy(old)  # an apply that changes nothing writes nothing
            else:
                new["metadata"]["uid"] = f"uid-{md['name']}-{obj['kind'].lower()}"
            new["metadata"]["resourceVersion"] = self.next_rv()
            self.objects[key] = new
            return copy.deepcopy(new)

    def get_statefulset(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._maybe_fail("get", "StatefulSet", name)
        return self.get("StatefulSet", namespace, name)

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._maybe_fail("get", "Pod", name)
        return self.get("Pod", namespace, name)

    def get_event(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._maybe_fail("get", "Event", name)
        return self.get("Event", namespace, name)

    def create_event(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._create("Event", namespace, body)

    def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._maybe_fail("patch", "Event", name)
            key = ("Event", namespace, name)
            if key not in self.objects:
                raise NotFound(f"patch events/{name}", 404, "NotFound")
            self.objects[key] = _merge(self.objects[key], dict(patch))
            self.objects[key]["metadata"]["resourceVersion"] = self.next_rv()
            return copy.deepcopy(self.objects[key])

    # --- ConfigMapApi ------------------------------------------------------------------------------

    def read_config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._maybe_fail("get", "ConfigMap", name)
        return self.get("ConfigMap", namespace, name)

    def create_config_map(self, namespace: str, body: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        return self._create("ConfigMap", namespace, body, dry_run=dry_run)

    def replace_config_map(self, namespace: str, name: str, body: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        with self._lock:
            self._maybe_fail("update", "ConfigMap", name)
            key = ("ConfigMap", namespace, name)
            old = self.objects.get(key)
            if old is None:
                raise NotFound(f"replace configmaps/{name}", 404, "NotFound")
            if body["metadata"].get("resourceVersion") != old["metadata"]["resourceVersion"]:
                raise Conflict(f"replace configmaps/{name}", 409, "Conflict", "the object has been modified; please apply your changes to the latest version and try again")
            new = copy.deepcopy(dict(body))
            new["metadata"] = {**new["metadata"], "resourceVersion": self.next_rv() if not dry_run else old["metadata"]["resourceVersion"]}
            if not dry_run:
                self.objects[key] = new
            return copy.deepcopy(new)

    # --- PodApi ---------------------------------------------------------------------------------------

    def list_pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        self._maybe_fail("list", "Pod", label_selector)
        return copy.deepcopy(self.pods_listed)

    # --- plumbing -------------------------------------------------------------------------------------

    def _create(self, kind: str, namespace: str, body: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        with self._lock:
            name = body["metadata"]["name"]
            self._maybe_fail("create", kind, name)
            key = (kind, namespace, name)
            if key in self.objects:
                raise Conflict(f"create {kind.lower()}s/{name}", 409, "AlreadyExists", f'{kind.lower()}s "{name}" already exists')
            new = copy.deepcopy(dict(body))
            new["metadata"] = {**new["metadata"], "namespace": namespace, "uid": f"uid-{name}-{kind.lower()}", "resourceVersion": self.next_rv()}
            if not dry_run:
                self.objects[key] = new
            return copy.deepcopy(new)


def _merge(old: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch (RFC 7386): null removes a key, objects merge, anything else replaces."""
    out = copy.deepcopy(old)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _without_meta_rv(obj: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(obj))
    out["metadata"] = {k: v for k, v in out["metadata"].items() if k not in ("resourceVersion",)}
    return out
