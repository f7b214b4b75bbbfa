"""Connecting to the API server: in a pod its service account, elsewhere a kubeconfig."""

from __future__ import annotations

import os
from pathlib import Path

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
    return client.ApiClient(configuration)


def own_namespace(environ: dict[str, str] | None = None) -> str | None:
    """The namespace of this pod: ``$POD_NAMESPACE`` (downward API), else the service account's."""
    env = os.environ if environ is None else environ
    if env.get("POD_NAMESPACE"):
        return env["POD_NAMESPACE"]
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None
