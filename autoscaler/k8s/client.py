"""Connecting to the API server: in a pod its service account, elsewhere a kubeconfig."""

from __future__ import annotations

import os
from pathlib import Path

import urllib3
from kubernetes import client, config

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def api_client(kubeconfig: str | None = None) -> client.ApiClient:
    """An ``ApiClient`` for this process: the pod's service account when running in a cluster
    (and no kubeconfig is named), else ``kubeconfig`` or ``$KUBECONFIG``/``~/.kube/config``."""
    configuration = client.Configuration()
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=configuration)
    else:
        # $KUBECONFIG read now: the client reads it once, when it is imported
        config.load_kube_config(config_file=kubeconfig or os.environ.get("KUBECONFIG"), client_configuration=configuration)
    return client.ApiClient(one_try(configuration))


def one_try(configuration: client.Configuration) -> client.Configuration:
    """No retries below ours: urllib3 would otherwise retry connection errors three times and a
    429 after its Retry-After on its own, hidden from our back-off, our logs and our counts
    (``autoscaler.k8s.retry`` is the one retry layer)."""
    configuration.retries = urllib3.util.Retry(total=0, respect_retry_after_header=False, raise_on_status=False, redirect=0)
    return configuration


def own_namespace(environ: dict[str, str] | None = None) -> str | None:
    """The namespace of this pod: ``$POD_NAMESPACE`` (downward API), else the service account's."""
    env = os.environ if environ is None else environ
    if env.get("POD_NAMESPACE"):
        return env["POD_NAMESPACE"]
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None
