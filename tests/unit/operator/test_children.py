"""The objects an app owns: valid Kubernetes objects, and what each must hold."""

from __future__ import annotations

import pytest
import yaml

from autoscaler.operator.changes import restart_hash
from autoscaler.operator.children import RESTART_HASH, desired_children, memory_request
from autoscaler.operator.config import MASTER, check_daemon_settings, daemon_settings
from autoscaler.operator.model import OPERATOR_ENV, parse_spec
from autoscaler.operator.settings import AppDefaults, OperatorSettings
from autoscaler.runtime.config import validate_settings
from tests.kube import validate
from tests.unit.operator.samples import SETTINGS, ref_of, sample, spec_of


def children(app=None, settings=SETTINGS):
    app = app or sample()
    spec = spec_of(app)
    return {o["kind"] + "/" + o["metadata"]["name"]: o for o in desired_children(ref_of(app), spec, settings, restart_hash(spec, settings))}


@pytest.mark.parametrize("file", ["clicks-app.yaml", "rate-source-app.yaml"])
def test_every_child_and_the_executor_template_are_valid_kubernetes_objects(file):
    objs = children(sample(file))
    n = sample(file)["metadata"]["name"]
    assert list(objs) == [f"ConfigMap/{n}-config", f"ConfigMap/{n}-state", f"Service/{n}", f"StatefulSet/{n}"]
    for obj in objs.values():
        validate(obj)
    template = yaml.safe_load(objs[f"ConfigMap/{n}-config"]["data"]["executor-pod-template.yaml"])
    validate(template)


def test_the_pods_run_where_the_app_places_them():
    toleration = {"key": "spot", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["streaming"]}]}]}}}
    objs = children(sample(driver={"nodeSelector": {"pool": "system"}, "tolerations": [{"key": "dedicated", "value": "spark", "effect": "NoSchedule"}],
                                   "affinity": affinity},
                           executor={"nodeSelector": {"pool": "spot"}, "tolerations": [toleration], "priorityClassName": "batch-low"}))
    driver = objs["StatefulSet/clicks"]["spec"]["template"]["spec"]
    assert (driver["nodeSelector"], driver["tolerations"], driver["affinity"]) == (
        {"pool": "system"}, [{"key": "dedicated", "value": "spark", "effect": "NoSchedule"}], affinity)
    executor = yaml.safe_load(objs["ConfigMap/clicks-config"]["data"]["executor-pod-template.yaml"])["spec"]
    assert (executor["nodeSelector"], executor["tolerations"], executor["priorityClassName"]) == ({"pool": "spot"}, [toleration], "batch-low")
    validate(objs["StatefulSet/clicks"])


def test_children_are_owned_by_the_app_without_finalizers():
    for obj in children().values():
        [owner] = obj["metadata"]["ownerReferences"]
        assert owner == {"apiVersion": "streaming.sparkautoscaler.io/v1alpha1", "kind": "SparkStreamingApp", "name": "clicks", "uid": "uid-clicks",
                         "controller": True}
        assert "finalizers" not in obj["metadata"]


def test_the_statefulset_runs_one_driver_pod_and_none_when_suspended():
    sts = children()["StatefulSet/clicks"]
    assert sts["spec"]["replicas"] == 1 and sts["spec"]["serviceName"] == "clicks"
    assert children(sample(suspend=True))["StatefulSet/clicks"]["spec"]["replicas"] == 0
    selector = sts["spec"]["selector"]["matchLabels"]
    assert selector.items() <= sts["spec"]["template"]["metadata"]["labels"].items()


def test_the_driver_pod_knows_its_address_and_stops_gracefully():
    pod = children()["StatefulSet/clicks"]["spec"]["template"]["spec"]
    [daemon] = pod["containers"]
    env = {e["name"]: e for e in daemon["env"]}
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert env["SPARK_LOCAL_IP"]["value"] == "$(POD_IP)"
    assert pod["terminationGracePeriodSeconds"] >= 120 + 60  # pipelines.stop_timeout + the session and HTTP server
    assert {p["name"]: p["containerPort"] for p in daemon["ports"]} == {"http": 8090, "driver-rpc": 7078, "blockmanager": 7079}
    assert daemon["readinessProbe"]["httpGet"]["path"] == "/readyz" and daemon["livenessProbe"]["httpGet"]["path"] == "/healthz"
    [check] = pod["initContainers"]
    assert check["args"][-1] == "--check" and check["image"] == daemon["image"]
    # the names the model keeps out of spec.driver.env are those the operator sets
    assert tuple(env) == OPERATOR_ENV
    # a failed start's last lines reach the pod's status (kubectl describe, the app's status)
    assert daemon["terminationMessagePolicy"] == check["terminationMessagePolicy"] == "FallbackToLogsOnError"


def test_every_container_is_non_root_with_a_read_only_root_filesystem():
    pod = children()["StatefulSet/clicks"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for c in pod["containers"] + pod["initContainers"]:
        sc = c["securityContext"]
        assert (sc["readOnlyRootFilesystem"], sc["allowPrivilegeEscalation"], sc["capabilities"]) == (True, False, {"drop": ["ALL"]})
    assert any(v.get("emptyDir") for v in pod["volumes"] if v["name"] == "tmp")


def test_the_service_is_headless_and_publishes_a_daemon_that_is_not_ready():
    svc = children()["Service/clicks"]["spec"]
    assert svc["clusterIP"] == "None" and svc["publishNotReadyAddresses"] is True
    assert svc["ports"] == [{"name": "http", "port": 8090, "targetPort": "http", "protocol": "TCP"}]


def test_tokens_are_whole_secret_volumes_so_a_rotation_reaches_the_files():
    pod = children(sample(http={"tokenSecretRef": {"name": "people"}}))["StatefulSet/clicks"]["spec"]["template"]["spec"]
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    assert secrets == {"operator-token": "spark-autoscaler-control-token", "user-tokens": "people"}
    assert not any("subPath" in m for m in pod["containers"][0]["volumeMounts"])


def test_the_executor_template_has_no_token_its_labels_and_the_security_context():
    template = yaml.safe_load(children()["ConfigMap/clicks-config"]["data"]["executor-pod-template.yaml"])
    assert template["spec"]["automountServiceAccountToken"] is False
    assert template["metadata"]["labels"]["spark-autoscaler.io/role"] == "executor"
    assert template["metadata"]["labels"]["spark-autoscaler.io/app"] == "clicks"
    [c] = template["spec"]["containers"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    relaxed = OperatorSettings(app_defaults=AppDefaults(executor_read_only_root_filesystem=False))
    template = yaml.safe_load(children(settings=relaxed)["ConfigMap/clicks-config"]["data"]["executor-pod-template.yaml"])
    assert template["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is False


def test_the_spark_configuration_runs_the_daemon_as_the_driver_on_kubernetes():
    app = sample()
    data = daemon_settings(ref_of(app), spec_of(app), SETTINGS)
    conf = data["spark"]["conf"]
    assert data["spark"]["master"] == MASTER and data["spark"]["app_name"] == "analytics-clicks"
    assert conf["spark.kubernetes.namespace"] == "analytics" and conf["spark.submit.deployMode"] == "client"
    assert conf["spark.kubernetes.container.image"] == app["spec"]["image"]
    assert conf["spark.kubernetes.allocation.maxPendingPods"] == "12"  # maxExecutors
    assert conf["spark.executor.cores"] == conf["spark.kubernetes.executor.request.cores"] == "2" and data["executors"]["cores"] == 2
    assert conf["spark.dynamicAllocation.enabled"] == "false"
    assert (conf["spark.driver.port"], conf["spark.blockManager.port"]) == ("7078", "7079")
    assert conf["spark.kubernetes.authenticate.executor.serviceAccountName"] == "spark-autoscaler-executor"
    assert conf["spark.sql.streaming.stateStore.providerClass"].endswith("RocksDBStateStoreProvider")  # the user's sparkConf
    assert data["state"] == {"configmap": "clicks-state"} and data["request_timeout"] == "5m"


def test_the_daemon_accepts_the_configuration_it_is_given():
    for file in ("clicks-app.yaml", "rate-source-app.yaml"):
        app = sample(file)
        settings, problems = check_daemon_settings(ref_of(app), spec_of(app), SETTINGS)
        assert problems == [] and settings is not None
        assert validate_settings(yaml.safe_load(children(app)[f"ConfigMap/{app['metadata']['name']}-config"]["data"]["autoscaler.yaml"]),
                                 check_files=False).spark.master == MASTER


@pytest.mark.parametrize(
    "settings_, problem",
    [
        pytest.param({"normalize": {"dead_band": 2}}, "spec.settings.normalize.dead_band: Input should be less than or equal to 1, got 2", id="bad-value"),
        pytest.param({"normalise": {}}, "spec.settings.normalise: unknown key", id="unknown-key"),
        pytest.param({"reconcile_interval": "10ms"}, "spec.settings.reconcile_interval: must be at least 100ms", id="too-fast"),
    ],
)
def test_settings_the_daemon_would_refuse_are_named_by_their_spec_field(settings_, problem):
    app = sample(settings=settings_)
    _, problems = check_daemon_settings(ref_of(app), spec_of(app), SETTINGS)
    assert any(p.startswith(problem) for p in problems), problems


def test_a_request_timeout_the_daemon_would_refuse_is_named_by_its_spec_field():
    # the model refuses it first, with the same words; the daemon's verdict stays the second line
    assert parse_spec({**sample()["spec"], "scaling": {"requestTimeout": "0s"}})[1] == ["spec.scaling.requestTimeout: must be more than 0, got 0s"]
    app = sample()
    spec = spec_of(app)
    spec = spec.model_copy(update={"scaling": spec.scaling.model_copy(update={"request_timeout": "0s"})})  # past the model
    _, problems = check_daemon_settings(ref_of(app), spec, SETTINGS)
    assert problems == ["spec.scaling.requestTimeout: must be more than 0, got 0s"]


def test_policy_parameters_are_checked_by_the_policy_and_an_unknown_policy_is_left_to_the_pod():
    app = sample(scaling={"policy": {"name": "target-utilization", "params": {"target_utilisation": 0.5}}})
    _, problems = check_daemon_settings(ref_of(app), spec_of(app), SETTINGS)
    assert problems == ["spec.scaling.policy: policy 'target-utilization': params.target_utilisation: unknown parameter"]
    app = sample(scaling={"policy": {"name": "my-plugin"}})  # a plugin of the user's image
    assert check_daemon_settings(ref_of(app), spec_of(app), SETTINGS)[1] == []


def test_a_control_change_updates_the_config_but_not_the_pod():
    before = children()
    after = children(sample(scaling={**sample()["spec"]["scaling"], "maxExecutors": 20}))
    assert before["StatefulSet/clicks"] == after["StatefulSet/clicks"]
    assert before["ConfigMap/clicks-config"] != after["ConfigMap/clicks-config"]  # the next pod starts with 20
    assert before["StatefulSet/clicks"]["spec"]["template"]["metadata"]["annotations"][RESTART_HASH].startswith("sha256:")


@pytest.mark.parametrize("spark, pod", [("1g", "1408Mi"), ("2g", "2432Mi"), ("8g", "9011Mi"), ("512m", "896Mi")])
def test_a_pod_holds_the_jvm_and_sparks_overhead(spark, pod):
    assert memory_request(spark) == pod


@pytest.mark.parametrize("root", ["s3a://analytics-checkpoints/clicks", "hdfs://namenode:8020/checkpoints/logs", "gs://bucket/ck/"])
def test_the_daemon_reads_back_the_checkpoint_root_uri_the_operator_writes(tmp_path, root):
    # the daemon typed it Path: s3a://... became a directory on the driver pod's disk, lost with the pod
    from autoscaler.runtime.config import read_config_file

    app = sample(checkpointRoot=root)
    settings, problems = check_daemon_settings(ref_of(app), spec_of(app), SETTINGS)
    assert problems == [] and settings is not None and settings.pipelines.checkpoint_root == root
    config = tmp_path / "autoscaler.yaml"
    config.write_text(children(app)["ConfigMap/clicks-config"]["data"]["autoscaler.yaml"])  # what `run --config` reads in the pod
    assert validate_settings(read_config_file(config), check_files=False).pipelines.checkpoint_root == root


def test_a_blank_checkpoint_root_is_named_by_its_spec_field():
    # the model (and the CRD's pattern) refuses it first; the daemon's verdict stays the second line
    assert parse_spec({**sample()["spec"], "checkpointRoot": "  "})[1] == [
        "spec.checkpointRoot: must name a directory or a URI (s3a://bucket/checkpoints), got an empty value"
    ]
    app = sample()
    spec = spec_of(app).model_copy(update={"checkpoint_root": "  "})  # past the model
    assert check_daemon_settings(ref_of(app), spec, SETTINGS)[1] == [
        "spec.checkpointRoot: must name a directory or a URI (s3a://bucket/checkpoints), got an empty value"
    ]
