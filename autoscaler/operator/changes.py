"""Which spec change needs what: the operator's version of Flink's ``DiffType``.

Every field of the spec has one class:

* ``control``: the running daemon takes it through its REST control API (mode, bounds, pause,
  dry run, manual target, policy parameters, per-query rate limit and trigger, log level);
  no restart;
* ``restart``: it changes the pod (image, Spark configuration, resources, the policy, ...):
  the StatefulSet rolls and the queries resume from their checkpoints;
* ``immutable``: ``checkpointRoot`` (the checkpoints are there);
* ``replicas``: ``suspend`` (the StatefulSet's replicas, 0 or 1).

The restart hash covers the restart-class fields only (with the operator's defaults that
shape the pod), so a control change never rolls the pod. ``tests/unit/operator/test_changes.py``
checks that every field of the model has exactly one class, and the hash's two properties.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Mapping

from autoscaler.operator.model import SparkStreamingAppSpec
from autoscaler.operator.settings import OperatorSettings


class ChangeClass(StrEnum):
    CONTROL = "control"
    RESTART = "restart"
    IMMUTABLE = "immutable"
    REPLICAS = "replicas"


C, R = ChangeClass.CONTROL, ChangeClass.RESTART
FIELDS: dict[str, ChangeClass] = {
    "image": R,
    "imagePullPolicy": R,
    "imagePullSecrets": R,
    "pipelines": R,
    "checkpointRoot": ChangeClass.IMMUTABLE,
    "sparkConf": R,
    "settings": R,
    "driver": R,
    "executor": R,
    "scaling.mode": C,
    "scaling.minExecutors": C,
    "scaling.maxExecutors": C,
    "scaling.manualExecutors": C,
    "scaling.paused": C,
    "scaling.dryRun": C,
    "scaling.policy.params": C,
    "scaling.policy.name": R,
    "scaling.initialExecutors": R,
    "scaling.requestTimeout": R,
    "queries": C,
    "logLevel": C,
    "http": R,
    "suspend": ChangeClass.REPLICAS,
}


@dataclass(frozen=True)
class Changes:
    restart: tuple[str, ...] = ()
    control: tuple[str, ...] = ()
    immutable: tuple[str, ...] = ()
    replicas: bool = False

    @property
    def empty(self) -> bool:
        return not (self.restart or self.control or self.immutable or self.replicas)


def full_json(spec: SparkStreamingAppSpec) -> dict[str, Any]:
    """The spec with every default written out: two specs that mean the same compare equal."""
    return spec.model_dump(mode="json", by_alias=True)


def field_value(spec: Mapping[str, Any], path: str) -> Any:
    node: Any = spec
    for key in path.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def classify_change(old: SparkStreamingAppSpec, new: SparkStreamingAppSpec) -> Changes:
    """The fields that differ, by class (in the order of :data:`FIELDS`)."""
    a, b = full_json(old), full_json(new)
    changed = [path for path in FIELDS if field_value(a, path) != field_value(b, path)]
    return Changes(
        restart=tuple(p for p in changed if FIELDS[p] == R),
        control=tuple(p for p in changed if FIELDS[p] == C),
        immutable=tuple(p for p in changed if FIELDS[p] == ChangeClass.IMMUTABLE),
        replicas="suspend" in changed,
    )


def restart_inputs(spec: SparkStreamingAppSpec, settings: OperatorSettings) -> dict[str, Any]:
    """What the pod is made of: the restart-class (and immutable) fields and the operator's
    settings that shape the pod."""
    full = full_json(spec)
    fields = {p: field_value(full, p) for p, cls in FIELDS.items() if cls in (R, ChangeClass.IMMUTABLE)}
    shaping = settings.model_dump(
        mode="json",
        include={"app_defaults": True, "driver_service_account": True, "executor_service_account": True, "daemon": {"port": True, "token_secret": True}},
    )
    return {"spec": fields, "operator": shaping}


def restart_hash(spec: SparkStreamingAppSpec, settings: OperatorSettings) -> str:
    canonical = json.dumps(restart_inputs(spec, settings), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
