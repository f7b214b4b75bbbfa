"""The daemon as the Spark driver in a pod: its address and identity from the downward API,
and a clear refusal of a loopback driver address (executors in other pods could never connect)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autoscaler.spark.kubernetes import DriverAddressError, kubernetes_driver_conf

ROOT = Path(__file__).resolve().parents[3]
K8S = "k8s://https://kubernetes.default.svc"
POD = {"POD_NAME": "clicks-0", "POD_NAMESPACE": "analytics", "POD_IP": "10.1.2.3"}


@pytest.mark.parametrize(
    "conf, environ, expected_conf, expected_env",
    [
        pytest.param({}, POD, {"spark.driver.host": "10.1.2.3", "spark.kubernetes.driver.pod.name": "clicks-0", "spark.kubernetes.namespace": "analytics"},
                     {"SPARK_LOCAL_IP": "10.1.2.3"}, id="downward-api"),
        pytest.param({"spark.driver.host": "10.9.9.9", "spark.kubernetes.namespace": "other"}, POD,
                     {"spark.kubernetes.driver.pod.name": "clicks-0"}, {"SPARK_LOCAL_IP": "10.1.2.3"}, id="what-the-user-set-stays"),
        pytest.param({}, {**POD, "SPARK_LOCAL_IP": "10.1.2.3"}, {"spark.driver.host": "10.1.2.3", "spark.kubernetes.driver.pod.name": "clicks-0",
                     "spark.kubernetes.namespace": "analytics"}, {}, id="operator-sets-spark-local-ip"),
        pytest.param({}, {"SPARK_LOCAL_IP": "10.4.4.4"}, {"spark.driver.host": "10.4.4.4"}, {}, id="no-downward-api"),
    ],
)
def test_a_k8s_master_takes_the_pods_address_and_identity(conf, environ, expected_conf, expected_env):
    assert kubernetes_driver_conf(K8S, conf, environ) == (expected_conf, expected_env)


def test_other_masters_are_left_alone():
    assert kubernetes_driver_conf("local-cluster[2,1,512]", {}, {"SPARK_LOCAL_IP": "127.0.0.1"}) == ({}, {})
    assert kubernetes_driver_conf("spark://host:7077", {}, {}) == ({}, {})


@pytest.mark.parametrize(
    "conf, environ, named",
    [
        pytest.param({}, {"SPARK_LOCAL_IP": "127.0.0.1"}, "SPARK_LOCAL_IP=127.0.0.1", id="spark-local-ip"),
        pytest.param({"spark.driver.host": "localhost"}, POD, "spark.driver.host=localhost", id="driver-host"),
        pytest.param({"spark.driver.bindAddress": "::1"}, POD, "spark.driver.bindAddress=::1", id="bind-address-ipv6"),
        pytest.param({}, {}, "none of POD_IP, SPARK_LOCAL_IP and spark.driver.host is set", id="nothing-set-means-the-loopback-default"),
    ],
)
def test_a_loopback_driver_address_is_refused_naming_it(conf, environ, named):
    with pytest.raises(DriverAddressError) as info:
        kubernetes_driver_conf(K8S, conf, environ)
    message = str(info.value)
    assert message.startswith("k8s master with a loopback driver address") and named in message
    assert "set SPARK_LOCAL_IP to the pod IP" in message


def run_check(config, **env):
    """``spark-autoscaler run --check`` in its own process (it configures logging for the process)."""
    base = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), "HOME": os.environ.get("HOME", "/tmp")}
    return subprocess.run([sys.executable, "-m", "autoscaler", "run", "--config", str(config), "--check"], capture_output=True, text=True,
                          timeout=120, env={**base, **env}, cwd=ROOT)


def test_run_check_refuses_a_k8s_master_on_loopback(tmp_path):
    (tmp_path / "p.py").write_text("from autoscaler import pipeline\n\n@pipeline('q')\ndef q(spark, ctx):\n    return None\n")
    config = tmp_path / "autoscaler.yaml"
    config.write_text(f"spark: {{master: '{K8S}'}}\npipelines: {{module: p.py}}\n")
    refused = run_check(config)
    assert refused.returncode == 2 and "k8s master with a loopback driver address" in refused.stderr
    passed = run_check(config, POD_IP="10.1.2.3")  # the operator's pod: the same check passes
    assert passed.returncode == 0 and "configuration valid; pipelines: q" in passed.stdout
