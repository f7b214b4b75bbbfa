"""The driver on Kubernetes (client mode, a ``k8s://`` master): its address and identity.

In client mode the daemon's process *is* the driver, in a pod; executors are pods Spark
creates and they connect back to the driver. The pod's identity comes from the downward API
(the operator sets ``POD_NAME``, ``POD_NAMESPACE`` and ``POD_IP``):

* ``spark.driver.host``: the pod IP, not a Service name (a Service's DNS name resolves only
  for Ready pods, and the daemon is Ready only after its first tick) nor the default
  reverse-DNS host name, which executors may not resolve;
* ``SPARK_LOCAL_IP``: the pod IP, so the driver binds to it (the daemon defaults it to
  127.0.0.1 for the local clusters it starts elsewhere);
* ``spark.kubernetes.driver.pod.name``: executor pods get an owner reference to the driver
  pod and are deleted with it;
* ``spark.kubernetes.namespace``: executors are created next to the driver.

Each is set only when absent. A loopback driver address is refused: executors in other pods
could never connect, and Spark would only say so in timeouts.
"""

from __future__ import annotations

import ipaddress
from typing import Mapping

LOOPBACK_HINT = "executors could not connect; set SPARK_LOCAL_IP to the pod IP (the downward API's status.podIP, as POD_IP)"


class DriverAddressError(ValueError):
    """A ``k8s://`` master with a driver address executors cannot reach."""


def is_kubernetes(master: str) -> bool:
    return master.startswith("k8s://")


def is_loopback(host: str) -> bool:
    name = host.strip().strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a host name: executors resolve it


def kubernetes_driver_conf(master: str, conf: Mapping[str, str], environ: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Spark configuration and environment variables to add for a ``k8s://`` master (nothing
    for another master); raises :class:`DriverAddressError` for a loopback driver address."""
    if not is_kubernetes(master):
        return {}, {}
    pod_ip = environ.get("POD_IP") or None
    local_ip = environ.get("SPARK_LOCAL_IP") or None
    for source, value in (("spark.driver.host", conf.get("spark.driver.host")), ("spark.driver.bindAddress", conf.get("spark.driver.bindAddress")),
                          ("SPARK_LOCAL_IP", local_ip)):
        if value and is_loopback(value):
            raise DriverAddressError(f"k8s master with a loopback driver address ({source}={value}): {LOOPBACK_HINT}")
    host = conf.get("spark.driver.host") or pod_ip or local_ip
    if host is None:
        raise DriverAddressError(
            "k8s master with a loopback driver address (none of POD_IP, SPARK_LOCAL_IP and spark.driver.host is set, "
            f"so the driver would bind to 127.0.0.1): {LOOPBACK_HINT}"
        )
    add_conf = {"spark.driver.host": host} if "spark.driver.host" not in conf else {}
    for key, variable in (("spark.kubernetes.driver.pod.name", "POD_NAME"), ("spark.kubernetes.namespace", "POD_NAMESPACE")):
        if key not in conf and environ.get(variable):
            add_conf[key] = environ[variable]
    # bind to the address executors are told, not to the daemon's loopback default
    add_env = {"SPARK_LOCAL_IP": pod_ip or host} if local_ip is None else {}
    return add_conf, add_env
