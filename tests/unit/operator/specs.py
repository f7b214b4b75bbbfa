"""Specs of a SparkStreamingApp, good and bad in each field, for the property tests that the CRD,
the operator's model (``test_crd.py``) and the chart's render (``test_chart_schema.py``) refuse
the same ones."""

from __future__ import annotations

from hypothesis import strategies as st

BASE = {"image": "img:1", "pipelines": {"module": "m"}, "checkpointRoot": "s3a://b/c"}

values = {
    "image": st.sampled_from(["img:1", "", 5, "registry.example.com:5000/team/clicks:1.0-rc_1", "clicks@sha256:" + "a" * 64,
                              "clicks:1.0:0.1.0", "Clicks:1", "clicks:1.0 beta", "ghcr.io//clicks", "https://ghcr.io/clicks"]),
    "imagePullPolicy": st.sampled_from(["Always", "Never", "Sometimes"]),
    "imagePullSecrets": st.sampled_from([[], ["regcred"], ["Bad_Secret"], "regcred"]),
    "pipelines": st.sampled_from([{"module": "m"}, {"configMapRef": {"name": "cm"}}, {"configMapRef": {"name": "cm", "key": "p.py"}},
                                  {"module": ""}, {"configMapRef": {"name": "Bad_Name"}}, {"configMapRef": {}}, {}, {"module": "m", "configMapRef": {"name": "c"}},
                                  {"module": "m", "extra": 1}]),
    "checkpointRoot": st.sampled_from(["s3a://b/c", "/mnt/ck", "", "  ", "ck", None, "file:///mnt/ck", "file:ck", " /mnt/ck"]),
    "sparkConf": st.sampled_from([{}, {"spark.sql.shuffle.partitions": "8"}, {"spark.master": "local"}, {"spark.x": 1}]),
    "settings": st.sampled_from([{}, {"reconcile_interval": "10s"}, {"executors": {"max": 3}}, {"pipelines": 5}, {"pipelines": {"max_failures": 3}},
                                  {"pipelines": {"module": "x"}}, {"pipelines": None}]),
    "driver": st.sampled_from([{}, {"cores": 2, "memory": "2g"}, {"cores": 0}, {"memory": "2 GB"}, {"env": [{"name": "A", "value": "1"}]},
                               {"env": [{"value": "1"}]}, {"cpu": 1}, {"memory": "256m"}, {"env": [{"name": "HOME", "value": "/x"}]},
                               {"podLabels": {"team": "data-platform"}}, {"podLabels": {"team": "data platform"}},
                               {"podAnnotations": {"bad key!": "x"}}, {"podAnnotations": {"example.com/note": "any text at all"}},
                               {"env": [{"name": "A"}, {"name": "A", "value": "2"}]}, {"tolerations": [{"key": "spot", "operator": "Exists"}]},
                               {"tolerations": [{"key": "spot", "efect": "NoSchedule"}]}, {"tolerations": [{"effect": "NoScheduel"}]},
                               {"tolerations": [{"effect": "NoSchedule"}]}]),
    "executor": st.sampled_from([{}, {"cores": 4, "memory": "8g"}, {"cores": 65}, {"priorityClassName": "high"}, {"memory": 4}, {"memory": "400m"},
                                 {"nodeSelector": {"zone": "eu-west-1a"}}, {"nodeSelector": {"zone": "eu west"}},
                                 {"tolerations": [{"key": "spot", "effect": "NoExecute", "tolerationSeconds": 60}]},
                                 {"tolerations": [{"key": "spot", "tolerationSeconds": "60"}]}, {"tolerations": [{"operator": "exists"}]},
                                 {"tolerations": [{"key": "spot", "effect": "NoSchedule", "tolerationSeconds": 60}]}]),
    "scaling": st.fixed_dictionaries({}, optional={
        "mode": st.sampled_from(["auto", "active", "reactive", "sometimes"]),
        "minExecutors": st.sampled_from([0, 3, 9, -1, 100001, "2", True]),
        "maxExecutors": st.sampled_from([1, 5, 0, 12]),
        "initialExecutors": st.sampled_from([0, 2, 4, 20]),
        "manualExecutors": st.sampled_from([0, 7, -2]),
        "paused": st.sampled_from([True, False, "yes"]),
        "dryRun": st.sampled_from([True, "no"]),
        "requestTimeout": st.sampled_from(["5m", "1h30m", "30m1h", "5", "", "250ms", "3651d", "0s", "0m0.0s"]),
        "policy": st.sampled_from([{}, {"name": "default"}, {"params": {"horizon": "1h"}}, {"name": ""}, {"weights": 1}]),
        "maxExecutor": st.just(3),
    }),
    "queries": st.lists(st.fixed_dictionaries({"name": st.sampled_from(["q", "clicks", "bad name"])}, optional={
        "maxRowsPerBatch": st.sampled_from([1, 500, 0, 2**63]),
        "triggerInterval": st.sampled_from(["2s", "1m", "50ms", "2d", "2 s", "0s", "100ms", "24h"]),
    }), max_size=2, unique_by=lambda q: q["name"]),
    "logLevel": st.sampled_from(["INFO", "DEBUG", "TRACE"]),
    "http": st.sampled_from([{}, {"tokenSecretRef": {"name": "tokens"}}, {"tokenSecretRef": {}}]),
    "suspend": st.sampled_from([True, False, "true"]),
    "replicas": st.just(2),
}
SPECS = st.fixed_dictionaries({}, optional=values).map(lambda d: {k: v for k, v in {**BASE, **d}.items() if v is not None})
