"""The Kubernetes adapter: the only code that imports the ``kubernetes`` client.

* :mod:`~autoscaler.k8s.gateway`: :class:`KubeApi`, a thin gateway over the official client
  (custom resources with list+watch, server-side apply, status, events, ConfigMaps, pods,
  the Lease lock), answering plain JSON dicts, with typed errors and retries.
* :mod:`~autoscaler.k8s.retry`: the retry policies (tenacity): 429 and 5xx with back-off and
  ``Retry-After``; conflicts are never resent as they were.
* :mod:`~autoscaler.k8s.state`: :class:`ConfigMapStateStore`, the daemon's state in a ConfigMap.
* :mod:`~autoscaler.k8s.pods`: why requested executors wait, from the executor pods.
* :mod:`~autoscaler.k8s.leader`: Lease leader election with the client's own ``leaderelection``.

It sits beside ``autoscaler.spark`` and ``autoscaler.ops`` (the layers contract in
``pyproject.toml``): the daemon's composition root and the operator use it.
"""
