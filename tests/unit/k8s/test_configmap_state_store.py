"""The ConfigMap state store: the state-store contract (on an in-memory fake of our ConfigMap
protocol), and its HTTP calls (against ``pytest-httpserver`` answering schema-valid JSON):
gzip, the size limit, a conflicting writer, the dry-run check."""

from __future__ import annotations

import base64
import gzip
import json
import random
from datetime import datetime, timedelta, timezone

import pytest

from autoscaler.app.compose import open_store
from autoscaler.k8s.errors import Conflict
from autoscaler.k8s.state import KEY, MAX_BYTES, ConfigMapStateStore, compress
from autoscaler.runtime.config import SettingsError, load_settings
from autoscaler.runtime.state import StateStoreError
from autoscaler.runtime.state.base import encode_state
from autoscaler.runtime.state.schema import restore_state
from tests.contracts.state_store import StateStoreContract
from tests.fakekube import FakeKube
from tests.kube import config_map, kube_api, status

CM = "/api/v1/namespaces/analytics/configmaps"


class TestConfigMapStateStore(StateStoreContract):
    @pytest.fixture
    def open_store(self):
        kube = FakeKube()
        return lambda: ConfigMapStateStore(kube, "analytics", "clicks-state")


class TestConfigMapCreatedEmptyByTheOperator(StateStoreContract):
    """The operator creates the ConfigMap (labels, owner reference) before the daemon starts."""

    @pytest.fixture
    def open_store(self):
        kube = FakeKube()
        kube.apply(config_map("clicks-state", labels={"app.kubernetes.io/instance": "clicks"}))
        return lambda: ConfigMapStateStore(kube, "analytics", "clicks-state")


def stored(kube: FakeKube) -> dict:
    obj = kube.get("ConfigMap", "analytics", "clicks-state")
    assert obj is not None
    return json.loads(gzip.decompress(base64.b64decode(obj["binaryData"][KEY])))


def test_the_state_is_gzip_compressed_json_and_the_operators_labels_stay():
    kube = FakeKube()
    kube.apply(config_map("clicks-state", labels={"app.kubernetes.io/instance": "clicks"}))
    ConfigMapStateStore(kube, "analytics", "clicks-state").save({"control": {"paused": True}})
    assert stored(kube) == {"version": 1, "state": {"control": {"paused": True}}}
    assert kube.get("ConfigMap", "analytics", "clicks-state")["metadata"]["labels"] == {"app.kubernetes.io/instance": "clicks"}


def test_an_unchanged_state_is_not_written_again():
    kube = FakeKube()
    store = ConfigMapStateStore(kube, "analytics", "clicks-state")
    store.save({"v": 1})
    writes = len([c for c in kube.calls if c[0] in ("create", "update")])
    store.save({"v": 1})
    assert len([c for c in kube.calls if c[0] in ("create", "update")]) == writes


def week_of_rates(queries: int) -> dict:
    """What the default settings keep: every query's mean rate per 5 minutes over 8 days."""
    rng = random.Random(7)
    start = datetime(2026, 11, 1, tzinfo=timezone.utc)
    steps = int(timedelta(days=8) / timedelta(minutes=5))
    rates = [[(start + i * timedelta(minutes=5)).isoformat(), f"query-{q:02d}", round(rng.uniform(100, 50_000), 3)]
             for q in range(queries) for i in range(steps)]
    return {"history": {"rates": rates}}


def test_twenty_queries_with_eight_days_of_rates_fit_the_configmap():
    state = week_of_rates(20)
    restore_state(state, "rates")  # the daemon's own state format
    text = encode_state(state)
    data = compress(text)
    assert len(text) > 3_000_000 and len(data) < 400_000 < MAX_BYTES  # measured: 3.6 MB of JSON, 386 KB compressed (9.4x)
    kube = FakeKube()
    ConfigMapStateStore(kube, "analytics", "clicks-state").save(state)
    assert stored(kube)["state"] == state


def test_a_state_too_large_for_a_configmap_is_refused_naming_it_and_the_previous_state_is_kept():
    kube = FakeKube()
    store = ConfigMapStateStore(kube, "analytics", "clicks-state", max_bytes=50_000)
    store.save({"good": True})
    with pytest.raises(StateStoreError) as info:
        store.save(week_of_rates(3))
    message = str(info.value)
    assert "state ConfigMap analytics/clicks-state" in message and "more than the 50,000 a ConfigMap can hold" in message
    assert "history.rate_max_age" in message
    assert ConfigMapStateStore(kube, "analytics", "clicks-state").load() == {"good": True}


def test_a_conflicting_writer_is_read_again_and_written_over_once():
    kube = FakeKube()
    store = ConfigMapStateStore(kube, "analytics", "clicks-state")
    store.save({"v": 1})
    other = kube.get("ConfigMap", "analytics", "clicks-state")
    other["metadata"]["labels"] = {"by": "operator"}
    kube.replace_config_map("analytics", "clicks-state", other)  # someone else wrote meanwhile
    store.save({"v": 2})
    assert stored(kube)["state"] == {"v": 2}
    assert kube.get("ConfigMap", "analytics", "clicks-state")["metadata"]["labels"] == {"by": "operator"}  # kept


def test_two_conflicts_in_a_row_mean_a_second_writer_and_are_an_error():
    kube = FakeKube()
    store = ConfigMapStateStore(kube, "analytics", "clicks-state")
    store.save({"v": 1})
    kube.fail[("update", "ConfigMap")] = [Conflict("replace configmaps/clicks-state", 409, "Conflict", "modified")] * 2
    with pytest.raises(StateStoreError, match="changed by another writer twice in a row.*second daemon"):
        store.save({"v": 2})


def test_a_configmap_deleted_meanwhile_is_created_again():
    kube = FakeKube()
    store = ConfigMapStateStore(kube, "analytics", "clicks-state")
    store.save({"v": 1})
    del kube.objects[("ConfigMap", "analytics", "clicks-state")]
    store.save({"v": 2})
    assert stored(kube)["state"] == {"v": 2}


@pytest.mark.parametrize(
    "binary, problem",
    [
        pytest.param({KEY: base64.b64encode(b"not gzip").decode()}, "is not gzip-compressed", id="not-gzip"),
        pytest.param({KEY: base64.b64encode(compress('{"version": 9, "state": {}}')).decode()}, "unsupported state format version 9", id="future"),
    ],
)
def test_an_unreadable_state_names_the_configmap(binary, problem):
    kube = FakeKube()
    kube.apply(config_map("clicks-state", binary=binary))
    with pytest.raises(StateStoreError) as info:
        ConfigMapStateStore(kube, "analytics", "clicks-state").load()
    assert "state ConfigMap analytics/clicks-state" in str(info.value) and problem in str(info.value)


# --- the HTTP calls ---------------------------------------------------------------------------------


def body(request) -> dict:
    """The JSON a POST or PUT sent. The v37 client sends these without a Content-Type (the
    API server then reads JSON, its first media type: apiserver's NegotiateInputSerializer);
    only PATCH needs one, and the gateway always sets it."""
    assert request.headers.get("Content-Type", "application/json").startswith("application/json")
    return json.loads(request.get_data())


def test_first_save_creates_then_replaces_with_the_resource_version_it_wrote(httpserver):
    httpserver.expect_ordered_request(f"{CM}/clicks-state", method="GET").respond_with_json(
        status(404, "NotFound", 'configmaps "clicks-state" not found'), status=404)
    created = config_map("clicks-state", binary={KEY: base64.b64encode(compress(encode_state({"v": 1}))).decode()}, rv="41")
    httpserver.expect_ordered_request(CM, method="POST").respond_with_json(created, status=201)
    replaced = config_map("clicks-state", binary={KEY: base64.b64encode(compress(encode_state({"v": 2}))).decode()}, rv="42")
    httpserver.expect_ordered_request(f"{CM}/clicks-state", method="PUT").respond_with_json(replaced)
    store = ConfigMapStateStore(kube_api(httpserver.url_for("/")), "analytics", "clicks-state")
    assert store.load() is None
    store.save({"v": 1})
    store.save({"v": 2})
    httpserver.check_assertions()
    (post, _), (put, _) = httpserver.log[1], httpserver.log[2]
    assert body(post)["binaryData"][KEY] == created["binaryData"][KEY]
    assert body(put)["metadata"]["resourceVersion"] == "41"  # optimistic: the version it wrote
    assert gzip.decompress(base64.b64decode(body(put)["binaryData"][KEY])) == encode_state({"v": 2}).encode()


def test_a_409_is_read_again_and_written_on_the_fresh_version(httpserver):
    old = config_map("clicks-state", rv="41")
    httpserver.expect_ordered_request(f"{CM}/clicks-state", method="GET").respond_with_json(old)
    httpserver.expect_ordered_request(f"{CM}/clicks-state", method="PUT").respond_with_json(
        status(409, "Conflict", "Operation cannot be fulfilled on configmaps \"clicks-state\": the object has been modified"), status=409)
    fresh = config_map("clicks-state", rv="57", labels={"by": "operator"}, managers=[("spark-autoscaler-operator", "2026-11-20T10:03:00Z")])
    httpserver.expect_ordered_request(f"{CM}/clicks-state", method="GET").respond_with_json(fresh)
    httpserver.expect_ordered_request(f"{CM}/clicks-state", method="PUT").respond_with_json({**fresh, "metadata": {**fresh["metadata"], "resourceVersion": "58"}})
    store = ConfigMapStateStore(kube_api(httpserver.url_for("/")), "analytics", "clicks-state")
    store.load()
    store.save({"v": 1})
    httpserver.check_assertions()
    second_put = httpserver.log[3][0]
    assert body(second_put)["metadata"]["resourceVersion"] == "57" and body(second_put)["metadata"]["labels"] == {"by": "operator"}


def test_the_start_up_check_is_a_server_side_dry_run(httpserver):
    httpserver.expect_ordered_request(f"{CM}/clicks-state", method="GET").respond_with_json(
        status(404, "NotFound", 'configmaps "clicks-state" not found'), status=404)
    httpserver.expect_ordered_request(CM, method="POST", query_string={"dryRun": "All"}).respond_with_json(
        status(403, "Forbidden", 'configmaps is forbidden: User "system:serviceaccount:analytics:spark-autoscaler-driver" cannot create resource "configmaps"'),
        status=403)
    store = ConfigMapStateStore(kube_api(httpserver.url_for("/")), "analytics", "clicks-state")
    with pytest.raises(StateStoreError, match=r"state ConfigMap analytics/clicks-state: cannot be written: .*403 Forbidden.*cannot create"):
        store.check_writable()
    httpserver.check_assertions()
    assert httpserver.log[1][0].method == "POST"


# --- the setting ----------------------------------------------------------------------------------------


def test_the_setting_picks_the_configmap_store_in_the_pods_namespace(monkeypatch, tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: k, cluster: {server: 'https://127.0.0.1:6443'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    store = open_store(load_settings(None, {"state.configmap": "clicks-state"}, environ={}), environ={"POD_NAMESPACE": "analytics"})
    assert isinstance(store, ConfigMapStateStore) and (store.namespace, store.name) == ("analytics", "clicks-state")
    store = open_store(load_settings(None, {"state.configmap": "other/s"}, environ={}), environ={})
    assert isinstance(store, ConfigMapStateStore) and (store.namespace, store.name) == ("other", "s")


@pytest.mark.parametrize(
    "overrides, problem",
    [
        pytest.param({"state.configmap": "Bad_Name"}, "state.configmap: String should match pattern", id="not-a-dns-name"),
        pytest.param({"state.configmap": "s", "state.path": "/tmp/s.json"}, "state: set either path (a file) or configmap (Kubernetes), not both",
                     id="both-stores"),
    ],
)
def test_bad_configmap_settings_are_named(overrides, problem):
    with pytest.raises(SettingsError) as info:
        load_settings(None, overrides, environ={})
    assert problem in str(info.value)
