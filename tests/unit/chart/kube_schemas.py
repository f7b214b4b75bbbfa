"""Kubernetes' own schemas of the chart values it passes through to Kubernetes objects, and a tiny CLI.

``python -m tests.unit.chart.kube_schemas --write-values-schema`` puts them into the chart's
values.schema.json: each value below refers to its Kubernetes type, and ``definitions`` holds
those types and the ones they use, copied from the strict schemas ``kubernetes-validate`` ships
(unknown fields refused), at the newest Kubernetes version it knows: a field of a newer
release is taken, one no release has is refused.

Without them these values were free objects: a typo (``runAsNonroot``, ``readOnlyRootFileSystem``)
rendered, and the API server dropped the field or refused the Deployment after the rest of the
release was applied; ``securityContext: {runAsUser: "185"}`` failed the same way.
"""

from __future__ import annotations

import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate

from tests.unit.operator.crdcheck import VALUES_SCHEMA

VERSION = "1.37.0"  # the newest schemas of kubernetes-validate 1.37.0, the version pyproject.toml pins
# a value of the chart (its path in the values, "[]" for a list's items) -> the Kubernetes type it is
PASSED_THROUGH = {
    ("podSecurityContext",): "io.k8s.api.core.v1.PodSecurityContext",
    ("securityContext",): "io.k8s.api.core.v1.SecurityContext",
    ("operator", "affinity", "nodeAffinity"): "io.k8s.api.core.v1.NodeAffinity",
    ("operator", "affinity", "podAffinity"): "io.k8s.api.core.v1.PodAffinity",
    ("operator", "affinity", "podAntiAffinity"): "io.k8s.api.core.v1.PodAntiAffinity",
    ("driver", "rbac", "extraRules", "[]"): "io.k8s.api.rbac.v1.PolicyRule",
    ("networkPolicy", "extraDaemonIngress", "[]"): "io.k8s.api.networking.v1.NetworkPolicyIngressRule",
    ("networkPolicy", "egress", "extraRules", "[]"): "io.k8s.api.networking.v1.NetworkPolicyEgressRule",
}
PREFIX = "io.k8s."  # the copied types' names: none of the chart's own definitions starts so


def schema_dir() -> Path:
    return Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / f"v{VERSION}-local-strict"


@cache
def _kubernetes_definitions() -> dict[str, Any]:
    return dict(json.loads((schema_dir() / "_definitions.json").read_text())["$defs"])


def _plain(node: Any) -> Any:
    """A Kubernetes schema as the chart's draft-07 schema refers to it: references into
    ``#/definitions``, without the descriptions (the values' own say what they are) and the
    ``x-kubernetes-*`` extensions a JSON Schema validator does not read."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key.startswith("x-kubernetes-") or (key == "description" and isinstance(value, str)):
                continue
            if key == "$ref":
                value = "#/definitions/" + value.rsplit("/", 1)[1]
            out[key] = _plain(value)
        return out
    if isinstance(node, list):
        return [_plain(v) for v in node]
    return node


def _used(names: list[str]) -> dict[str, Any]:
    """The named definitions and every one they refer to, in name order."""
    known = _kubernetes_definitions()
    found: dict[str, Any] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found[name] = _plain(known[name])
        todo += [ref.rsplit("/", 1)[1] for ref in _refs(known[name])]
    return dict(sorted(found.items()))


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        return ([node["$ref"]] if isinstance(node.get("$ref"), str) else []) + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def _node(schema: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    node = schema
    for step in path:
        node = node["items"] if step == "[]" else node["properties"][step]
    return node


def with_kubernetes_schemas(values_schema: dict[str, Any]) -> dict[str, Any]:
    """The chart's schema with each passed-through value referring to its Kubernetes type."""
    out = json.loads(json.dumps(values_schema))
    definitions = {k: v for k, v in out["definitions"].items() if not k.startswith(PREFIX)}
    out["definitions"] = {**definitions, **_used(sorted(set(PASSED_THROUGH.values())))}
    for path, name in PASSED_THROUGH.items():
        node = _node(out, path)
        description = node.get("description")
        node.clear()
        node.update({"$ref": f"#/definitions/{name}"} | ({"description": description} if description else {}))
    return out


def write_values_schema() -> None:
    values = json.loads(VALUES_SCHEMA.read_text())
    VALUES_SCHEMA.write_text(json.dumps(with_kubernetes_schemas(values), indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write-values-schema"]:
        raise SystemExit("usage: python -m tests.unit.chart.kube_schemas --write-values-schema")
    write_values_schema()
