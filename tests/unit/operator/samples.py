"""Apps for the operator's tests: the documented samples, with what the API server adds."""

from __future__ import annotations

import copy
from typing import Any

from autoscaler.operator.config import AppRef
from autoscaler.operator.model import SparkStreamingAppSpec, parse_spec
from autoscaler.operator.settings import OperatorSettings
from tests.unit.operator.crdcheck import ROOT, documents

SETTINGS = OperatorSettings()


def sample(file: str = "clicks-app.yaml", **spec_changes: Any) -> dict[str, Any]:
    """The sample app of ``docs/examples/<file>`` as the API server stores it (uid, generation)."""
    [doc] = documents(ROOT / "docs" / "examples" / file)
    app = copy.deepcopy(doc)
    app["metadata"].update(uid=f"uid-{app['metadata']['name']}", generation=1, resourceVersion="1", creationTimestamp="2026-11-20T10:00:00Z")
    app["spec"].update(spec_changes)
    return app


def spec_of(app: dict[str, Any]) -> SparkStreamingAppSpec:
    spec, problems = parse_spec(app["spec"])
    assert spec is not None, problems
    return spec


def ref_of(app: dict[str, Any]) -> AppRef:
    return AppRef.of(app)
