"""Connecting to the API server: in a pod its service account, elsewhere a kubeconfig."""

from __future__ import annotations

import os
from pathlib import Path

import urllib3
import yaml
from kubernetes import client, config

from autoscaler.runtime.config import file_problem

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class KubeconfigError(RuntimeError):
    """No client configuration: the kubeconfig (named) or the pod's service account is unusable."""


def api_client(kubeconfig: str | None = None) -> client.ApiClient:
    """An ``ApiClient`` for this process: the pod's service account when running in a cluster
    (and no kubeconfig is named), else ``kubeconfig`` or ``$KUBECONFIG``/``~/.kube/config``;
    :class:`KubeconfigError` naming the file and the problem when none can be loaded."""
    configuration = client.Configuration()
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        try:
            config.load_incluster_config(client_configuration=configuration)
        except config.ConfigException as exc:
            raise KubeconfigError(f"in-cluster configuration: {exc}") from None
    else:
        # $KUBECONFIG read now: the client reads it once, when it is imported
        _load_kubeconfig(kubeconfig, os.environ.get("KUBECONFIG"), configuration)
    return client.ApiClient(one_try(configuration))


def _load_kubeconfig(named: str | None, environ: str | None, configuration: client.Configuration) -> None:
    # the client says "No configuration found" for a file that is missing, and raises bare decoding,
    # YAML and type errors for one that is no kubeconfig: each names the file here
    where = f"kubeconfig {named!r}" if named else f"kubeconfig {environ!r} ($KUBECONFIG)" if environ else "kubeconfig ~/.kube/config"
    if named and (problem := file_problem(Path(named))):
        raise KubeconfigError(f"{where} {problem}")
    try:
        config.load_kube_config(config_file=named or environ, client_configuration=configuration)
    except config.ConfigException as exc:
        raise KubeconfigError(f"{where}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise KubeconfigError(f"{where} is not UTF-8 text ({exc.reason})") from None
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"{where} is not valid YAML: {exc}") from None
    except OSError as exc:
        raise KubeconfigError(f"{where} cannot be read: {exc.strerror or exc}") from None
    except Exception as exc:  # YAML of another shape: the client indexes it as it comes (TypeError, KeyError...)
        raise KubeconfigError(f"{where} is no kubeconfig ({type(exc).__name__}: {exc})") from None


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
