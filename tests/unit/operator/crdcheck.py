"""The SparkStreamingApp CRD as a validator of custom resources, and a tiny CLI.

``python -m tests.unit.operator.crdcheck --write-values-schema`` puts the same schema of an app's
spec into the chart's values.schema.json (``apps[].spec``).

``python -m tests.unit.operator.crdcheck docs/examples/*.yaml`` checks every SparkStreamingApp
in the files against the CRD's own ``openAPIV3Schema`` (jsonschema), prints one line per
problem (``spec.scaling.mode -> 'sometimes' is not one of [...]``) and exits 1 if there was
any. The API server prunes unknown fields instead of refusing them; ``kubectl`` refuses them
(strict field validation), and so does this check: every object node with ``properties`` that
does not preserve unknown fields gets ``additionalProperties: false``. Not checked here: the
CRD's CEL rules (``x-kubernetes-validations``; the operator's model has the same rules) and
defaulting, which only an API server runs.
"""

from __future__ import annotations

import copy
import sys
from functools import cache
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parents[3]
CRD_FILE = ROOT / "helm" / "spark-autoscaler" / "crds" / "sparkstreamingapps.yaml"


@cache
def crd() -> dict[str, Any]:
    return yaml.safe_load(CRD_FILE.read_text())


def strict(schema: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(schema)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
                node.setdefault("additionalProperties", False)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(out)
    return out


@cache
def validator() -> jsonschema.Draft7Validator:
    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return jsonschema.Draft7Validator(strict(schema))


def problems(obj: dict[str, Any]) -> list[str]:
    """``path -> message`` for each schema error, in a stable order."""
    errors = sorted(validator().iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{'.'.join(str(p) for p in e.absolute_path) or '(root)'} -> {e.message}" for e in errors]


def documents(path: Path) -> Iterator[dict[str, Any]]:
    for doc in yaml.safe_load_all(path.read_text()):
        if isinstance(doc, dict) and doc.get("kind") == "SparkStreamingApp":
            yield doc


VALUES_SCHEMA = ROOT / "helm" / "spark-autoscaler" / "values.schema.json"
HELM_EXACT_INTEGER_MAX = 2**53 - 1  # the largest integer every float64 below it is exact for


def values_spec_schema() -> dict[str, Any]:
    """The chart's schema of ``apps[].spec``: the CRD's ``spec`` made strict, without the
    Kubernetes extensions (``x-kubernetes-*``) a JSON Schema validator does not read. A bad app
    in the values is then refused at render, before Helm applies the rest of the release.
    Helm reads every number of the values as a float64, exact only up to 2^53: a larger
    integer bound is lowered to that (``maxRowsPerBatch: 9007199254740993`` rendered as
    ...992, a limit other than the one written)."""

    def plain(node: Any) -> Any:
        if isinstance(node, dict):
            out = {k: plain(v) for k, v in node.items() if not k.startswith("x-kubernetes-")}
            if out.get("type") == "integer" and out.get("maximum", 0) > HELM_EXACT_INTEGER_MAX:
                out["maximum"] = HELM_EXACT_INTEGER_MAX
            return out
        if isinstance(node, list):
            return [plain(v) for v in node]
        return node

    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return dict(plain(strict(schema)))


def write_values_schema() -> None:
    """Put :func:`values_spec_schema` into the chart's values.schema.json (after a CRD change)."""
    import json

    values = json.loads(VALUES_SCHEMA.read_text())
    values["properties"]["apps"]["items"]["properties"]["spec"] = values_spec_schema()
    VALUES_SCHEMA.write_text(json.dumps(values, indent=2, ensure_ascii=False) + "\n")


def main(argv: list[str]) -> int:
    if argv == ["--write-values-schema"]:
        write_values_schema()
        return 0
    bad = 0
    for name in argv:
        for doc in documents(Path(name)):
            for line in problems(doc):
                print(line)
                bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
