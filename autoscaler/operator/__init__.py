"""The SparkStreamingApp operator (``spark-autoscaler operator``).

It turns each ``SparkStreamingApp`` into a daemon that is the Spark driver of the app (a
one-replica StatefulSet, its configuration, its state ConfigMap, a headless Service), takes
live changes to the daemon through the daemon's REST control API, mirrors the daemon's status
into the resource and its decisions into Kubernetes Events.

Pure parts (tested as functions): :mod:`model` (the spec), :mod:`changes` (which change needs a
restart), :mod:`config` (the daemon's configuration), :mod:`children` (the objects an app
owns), :mod:`control` (what to send to the daemon), :mod:`status` (conditions, phase),
:mod:`events` (which Events, named how). Effectful shell: :mod:`daemon_client`, :mod:`reconcile`
(one app), :mod:`watch` (list+watch), :mod:`controller` (work queue, workers, resync),
:mod:`main` (leader election, metrics, the command). Kubernetes is reached only through
``autoscaler.k8s`` (the layers contract in ``pyproject.toml``).
"""
