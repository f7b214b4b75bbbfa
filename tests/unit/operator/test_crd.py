"""The CRD: a valid CRD at the Kubernetes versions the chart supports, its samples, its messages,
and its agreement with the operator's model of the spec (the two descriptions must not drift)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from autoscaler.core.settings import parse_duration
from autoscaler.operator.model import OWNED_SETTINGS, OWNED_SPARK_CONF, SparkStreamingAppSpec, parse_spec
from tests.unit.operator.crdcheck import CRD_FILE, ROOT, crd, documents, problems
from tests.unit.operator.specs import BASE, SPECS

EXAMPLES = ROOT / "docs" / "examples"
GOOD = ["clicks-app.yaml", "rate-source-app.yaml"]


@pytest.mark.parametrize("version", ["1.29", "1.33", "1.37"])
def test_the_crd_is_a_valid_custom_resource_definition(version):
    assert kubernetes_validate.validate(crd(), version, strict=True) == version


def test_the_chart_holds_the_one_crd_the_operator_is_tested_with():
    assert sorted(p.name for p in CRD_FILE.parent.iterdir()) == ["sparkstreamingapps.yaml"]
    names = crd()["spec"]["names"]
    assert (crd()["spec"]["group"], names["kind"], names["plural"]) == ("streaming.sparkautoscaler.io", "SparkStreamingApp", "sparkstreamingapps")
    version = crd()["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}} and "scale" not in version["subresources"]  # no second autoscaler through /scale


def structural_problems(node: Any, path: str = "") -> list[str]:
    """Every node of a structural schema has a type, unless it preserves unknown fields."""
    out = []
    if isinstance(node, dict) and ("properties" in node or "items" in node or "type" in node or "x-kubernetes-preserve-unknown-fields" in node):
        if "type" not in node and not node.get("x-kubernetes-preserve-unknown-fields") and not node.get("x-kubernetes-int-or-string"):
            out.append(path or "(root)")
        for name, child in (node.get("properties") or {}).items():
            out += structural_problems(child, f"{path}.{name}")
        if isinstance(node.get("items"), dict):
            out += structural_problems(node["items"], f"{path}[]")
        if isinstance(node.get("additionalProperties"), dict):
            out += structural_problems(node["additionalProperties"], f"{path}{{}}")
    return out


def test_the_schema_is_structural():
    assert structural_problems(crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]) == []


@pytest.mark.parametrize("name", GOOD)
def test_the_samples_pass_the_crd_and_the_model(name):
    docs = list(documents(EXAMPLES / name))
    assert docs
    for doc in docs:
        assert problems(doc) == []
        spec, errors = parse_spec(doc["spec"])
        assert errors == [] and spec is not None


def test_the_bad_sample_is_refused_with_each_problem_named():
    [doc] = documents(EXAMPLES / "bad-app.yaml")
    assert problems(doc) == [
        "spec -> 'image' is a required property",
        "spec.scaling -> Additional properties are not allowed ('maxExecutor' was unexpected)",
        "spec.scaling.maxExecutors -> 0 is less than the minimum of 1",
        "spec.scaling.mode -> 'sometimes' is not one of ['auto', 'active', 'reactive']",
    ]
    _, errors = parse_spec(doc["spec"])
    assert "spec.image: Field required" in errors and "spec.scaling.maxExecutor: unknown field" in errors


def test_an_image_reference_the_runtimes_cannot_pull_is_refused_by_the_crd_and_the_model():
    """Each failed every pod with InvalidImageName after the app was accepted."""
    from autoscaler.operator.model import IMAGE

    assert crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["image"]["pattern"] == IMAGE
    for image in ["clicks:1.0:0.1.0", "Clicks:1", "clicks:1.0 beta", "ghcr.io//clicks", "https://ghcr.io/clicks", "clicks:"]:
        obj = {"apiVersion": "streaming.sparkautoscaler.io/v1alpha1", "kind": "SparkStreamingApp", "metadata": {"name": "a"}, "spec": {**BASE, "image": image}}
        assert [p.split(" -> ")[0] for p in problems(obj)] == ["spec.image"], image
        _, errors = parse_spec({**BASE, "image": image})
        assert any(e.startswith("spec.image: String should match pattern") for e in errors), errors
    for image in ["img:1", "localhost:5000/team/clicks:v1.2", "registry.example.com/clicks@sha256:" + "a" * 64]:
        assert parse_spec({**BASE, "image": image})[1] == []


@pytest.mark.parametrize(
    "scaling, message",
    [
        # the daemon's defaults (min 1, max 8) where the spec gives no bound (before, the model took
        # 0 and 100000, and only the check of the daemon's settings refused these two)
        ({"minExecutors": 9}, "scaling.minExecutors (9) exceeds the daemon's default maxExecutors (8): set scaling.maxExecutors too"),
        ({"initialExecutors": 0}, "scaling.initialExecutors (0) must lie within minExecutors and maxExecutors, [1, 8]"),
        ({"maxExecutors": 4, "initialExecutors": 5}, "scaling.initialExecutors (5) must lie within minExecutors and maxExecutors, [1, 4]"),
        # refused before only by the daemon's control API, each reconcile
        ({"maxExecutors": 4, "manualExecutors": 10}, "scaling.manualExecutors (10) must lie within minExecutors and maxExecutors, [1, 4]"),
    ],
)
def test_executor_counts_outside_the_bounds_the_daemon_will_hold_are_refused(scaling, message):
    spec, errors = parse_spec({**BASE, "scaling": scaling})
    assert spec is None and any(message in e for e in errors), errors


def test_executor_counts_within_the_bounds_are_taken():
    for scaling in [{"minExecutors": 8}, {"minExecutors": 0, "initialExecutors": 0}, {"maxExecutors": 20, "initialExecutors": 12, "manualExecutors": 20}]:
        assert parse_spec({**BASE, "scaling": scaling})[1] == [], scaling


# --- the model and the CRD agree ---------------------------------------------------------------------------

def cel_problems(spec: dict[str, Any]) -> list[str]:
    """The CRD's CEL rules (``x-kubernetes-validations``), which only an API server evaluates."""
    out = []
    pipelines = spec.get("pipelines")
    if isinstance(pipelines, dict) and ("module" in pipelines) == ("configMapRef" in pipelines):
        out.append("exactly one of module and configMapRef")
    scaling = spec.get("scaling")
    if isinstance(scaling, dict):
        lo, hi = scaling.get("minExecutors"), scaling.get("maxExecutors")
        if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
            out.append("minExecutors <= maxExecutors")
    return out


def model_only_problems(spec: dict[str, Any]) -> list[str]:
    """What the model adds to the schema, each named in the model's docstring."""
    out = []
    scaling = spec.get("scaling") if isinstance(spec.get("scaling"), dict) else {}
    # each bound as the daemon holds it: the spec's, else its default (1 and 8)
    lo, hi = scaling.get("minExecutors", 1), scaling.get("maxExecutors", 8)
    if isinstance(lo, int) and isinstance(hi, int) and ("minExecutors" not in scaling or "maxExecutors" not in scaling) and lo > hi:
        out.append("minExecutors within the default maxExecutors")
    for name in ("initialExecutors", "manualExecutors"):
        count = scaling.get(name)
        if isinstance(count, int) and not isinstance(count, bool) and isinstance(lo, int) and isinstance(hi, int) and not lo <= count <= hi:
            out.append(f"{name} within the bounds")
    for text in [scaling.get("requestTimeout"), *[q.get("triggerInterval") for q in spec.get("queries") or () if isinstance(q, dict)]]:
        if isinstance(text, str) and text in ("3651d",):
            out.append("duration at most ten years")
    for q in spec.get("queries") or ():
        if isinstance(q, dict) and q.get("triggerInterval") in ("50ms", "2d", "0s"):
            out.append("trigger within 100ms .. 24h")
    if isinstance(spec.get("sparkConf"), dict) and set(spec["sparkConf"]) & set(OWNED_SPARK_CONF):
        out.append("sparkConf the operator owns")
    if isinstance(spec.get("settings"), dict) and set(spec["settings"]) & set(OWNED_SETTINGS):
        out.append("settings the operator owns")
    if isinstance(spec.get("settings"), dict) and isinstance(spec["settings"].get("pipelines"), dict) and "module" in spec["settings"]["pipelines"]:
        out.append("pipeline settings the operator owns")
    if isinstance(spec.get("settings"), dict) and spec["settings"].get("pipelines") is not None and not isinstance(spec["settings"]["pipelines"], dict):
        out.append("settings.pipelines a mapping")
    if spec.get("checkpointRoot") in ("ck", "file:ck"):
        out.append("checkpointRoot not relative")
    if spec.get("checkpointRoot") == " /mnt/ck":
        out.append("checkpointRoot without a space around it")
    driver = spec.get("driver") if isinstance(spec.get("driver"), dict) else {}
    if driver.get("memory") == "256m" or (spec.get("executor") or {}).get("memory") == "400m":
        out.append("memory at least 450m")
    if any(isinstance(e, dict) and e.get("name") == "HOME" for e in driver.get("env") or ()):
        out.append("env the operator sets")
    if [e.get("name") for e in driver.get("env") or () if isinstance(e, dict)] == ["A", "A"]:
        out.append("env names once each")
    if driver.get("tolerations") == [{"effect": "NoSchedule"}]:
        out.append("a toleration without a key is Exists")
    if (spec.get("executor") or {}).get("tolerations") == [{"key": "spot", "effect": "NoSchedule", "tolerationSeconds": 60}]:
        out.append("tolerationSeconds only with NoExecute")
    if (driver.get("podLabels") == {"team": "data platform"} or driver.get("podAnnotations") == {"bad key!": "x"}
            or (spec.get("executor") or {}).get("nodeSelector") == {"zone": "eu west"}):
        out.append("label and annotation syntax")
    return out


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SPECS)
def test_the_model_accepts_exactly_what_the_crd_and_its_rules_accept(spec):
    obj = {"apiVersion": "streaming.sparkautoscaler.io/v1alpha1", "kind": "SparkStreamingApp", "metadata": {"name": "a"}, "spec": copy.deepcopy(spec)}
    schema_ok = problems(obj) == []
    parsed, errors = parse_spec(spec)
    expected = schema_ok and not cel_problems(spec) and not model_only_problems(spec)
    assert (parsed is not None) == expected, (problems(obj), cel_problems(spec), model_only_problems(spec), errors)


def test_every_field_of_the_model_is_in_the_crd():
    """Walk the model's fields (by their camelCase names) against the CRD's properties."""
    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]

    def walk(model: type, node: dict[str, Any], path: str) -> list[str]:
        missing = []
        for name, field in model.model_fields.items():
            alias = field.alias or name
            child = (node.get("properties") or {}).get(alias)
            if child is None:
                missing.append(f"{path}{alias}")
                continue
            inner = field.annotation
            if getattr(inner, "__origin__", None) is list:
                if hasattr(inner.__args__[0], "model_fields"):
                    missing += walk(inner.__args__[0], child["items"], f"{path}{alias}[].")
                continue
            for candidate in getattr(inner, "__args__", (inner,)):  # X | None
                if isinstance(candidate, type) and hasattr(candidate, "model_fields"):
                    missing += walk(candidate, child, f"{path}{alias}.")
        return missing

    assert walk(SparkStreamingAppSpec, schema, "") == []
    assert set(schema["properties"]) == {f.alias or n for n, f in SparkStreamingAppSpec.model_fields.items()}


@pytest.mark.parametrize("text", ["5m", "1h30m", "250ms", "1d12h", "0.5s"])
def test_a_duration_the_crd_accepts_is_one_the_daemon_reads(text):
    obj = {"apiVersion": "x", "kind": "SparkStreamingApp", "metadata": {}, "spec": {**BASE, "scaling": {"requestTimeout": text}}}
    assert problems(obj) == [] and parse_duration(text).total_seconds() > 0


@pytest.mark.parametrize("text", ["0s", "0m0s", "0.0s", "00ms", "0d0h0m0s0ms"])
def test_a_request_timeout_of_zero_is_refused_by_the_crd_as_the_daemon_refuses_it(text):
    # a zero duration has no digit 1-9; the CRD took it, and the operator only found it from the daemon's settings
    obj = {"apiVersion": "x", "kind": "SparkStreamingApp", "metadata": {}, "spec": {**BASE, "scaling": {"requestTimeout": text}}}
    assert problems(obj) == [f"spec.scaling.requestTimeout -> {text!r} does not match '[1-9]'"]
    assert parse_duration(text).total_seconds() == 0


@pytest.mark.parametrize("text", ["0s", "0m0s", "0.0s", "00ms", "0d0h0m0s0ms"])
def test_a_request_timeout_of_zero_is_refused_by_the_model_named_by_its_field(text):
    # the model took it (only the daemon's settings, checked later, refused it); now refused as the CRD refuses it,
    # with the daemon's PositiveDuration message
    spec, errors = parse_spec({**BASE, "scaling": {"requestTimeout": text}})
    assert spec is None and errors == ["spec.scaling.requestTimeout: must be more than 0, got 0s"]


def test_the_crds_rules_each_have_their_counterpart_in_the_model():
    rules = []

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            rules.extend(r["rule"] for r in node.get("x-kubernetes-validations") or ())
            for value in node.values():
                collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    collect(crd())
    assert sorted(rules) == sorted([
        "has(self.module) != has(self.configMapRef)",
        "self == oldSelf",  # checkpointRoot: the controller compares with the last applied spec
        "!has(self.minExecutors) || !has(self.maxExecutors) || self.minExecutors <= self.maxExecutors",
    ])
    assert parse_spec({**BASE, "pipelines": {}})[1] == ["spec.pipelines: set exactly one of pipelines.module and pipelines.configMapRef"]
    assert parse_spec({**BASE, "scaling": {"minExecutors": 5, "maxExecutors": 2}})[1] == [
        "spec.scaling: scaling.minExecutors must not exceed scaling.maxExecutors"]


@pytest.mark.parametrize("root", ["ck", "./ck", "file:ck"])
def test_a_relative_checkpoint_root_is_refused_it_would_be_lost_with_the_pod(root):
    assert parse_spec({**BASE, "checkpointRoot": root})[1] == [
        f"spec.checkpointRoot: {root!r} is relative: under the pod's working directory, lost with the pod; give a URI "
        "(s3a://bucket/ck) or the absolute path of a mounted volume"]
    assert parse_spec({**BASE, "checkpointRoot": "/mnt/ck"})[1] == [] and parse_spec({**BASE, "checkpointRoot": "file:///mnt/ck"})[1] == []


def test_the_model_names_the_field_to_use_instead_of_an_owned_key():
    _, errors = parse_spec({**BASE, "sparkConf": {"spark.executor.cores": "4"}, "settings": {"executors": {"max": 3}, "pipelines": {"module": "x"}}})
    assert errors == [
        "spec.sparkConf: spark.executor.cores: set by the operator (set spec.executor.cores)",
        "spec.settings: executors: written by the operator (set spec.scaling and spec.executor); "
        "pipelines.module: written by the operator (set spec.pipelines)",
    ]


def test_examples_folder_yaml_parses():
    for path in Path(EXAMPLES).glob("*.yaml"):
        list(yaml.safe_load_all(path.read_text()))


@pytest.mark.parametrize(
    "change, problem",
    [
        # refused by the API server on the children (the ConfigMap applied, the StatefulSet not) or by Spark at start
        pytest.param({"driver": {"podLabels": {"team": "data platform"}}}, "spec.driver.podLabels: team: value 'data platform' is not a Kubernetes label value",
                     id="label-value-with-a-space"),
        pytest.param({"driver": {"nodeSelector": {"-bad": "x"}}}, "spec.driver.nodeSelector: key '-bad' is not a Kubernetes label or annotation key",
                     id="label-key"),
        pytest.param({"driver": {"podAnnotations": {"a/b/c": "x"}}}, "spec.driver.podAnnotations: key 'a/b/c' is not a Kubernetes label", id="annotation-key"),
        pytest.param({"driver": {"env": [{"name": "X", "value": "1"}, {"name": "X", "value": "2"}]}}, "spec.driver.env: X listed more than once",
                     id="env-twice"),
        pytest.param({"driver": {"env": [{"name": "POD_IP", "value": "1"}]}}, "spec.driver.env: POD_IP: set by the operator", id="env-the-operators"),
        pytest.param({"executor": {"memory": "400m"}}, "spec.executor.memory: '400m' is less than the 450m a Spark JVM starts with", id="executor-memory"),
        pytest.param({"driver": {"memory": "1k"}}, "spec.driver.memory: '1k' is less than the 450m", id="driver-memory"),
        pytest.param({"settings": {"pipelines": ["a"]}}, "spec.settings: pipelines: must be a mapping of pipeline settings, got ['a']", id="pipelines-a-list"),
    ],
)
def test_what_the_children_or_spark_would_refuse_is_named_by_its_field(change, problem):
    spec, errors = parse_spec({**BASE, **change})
    assert spec is None and any(problem in e for e in errors), errors
