"""The Spark JVMs the daemon starts read the log4j2 configurations it ships."""

from __future__ import annotations

import pytest

from autoscaler.spark.session import (
    CLUSTER_LOG_CONFIG,
    DRIVER_LOG_CONFIG,
    executors_on_this_machine,
    log_config_option,
    with_log_config,
)


@pytest.mark.parametrize(
    "master, local",
    [
        pytest.param("local-cluster[3,1,1024]", True, id="local-cluster"),
        pytest.param("spark://127.0.0.1:7077", True, id="standalone-on-loopback"),
        pytest.param("spark://localhost:7077", True, id="standalone-on-localhost"),
        pytest.param("spark://10.0.0.5:7077", False, id="standalone-elsewhere"),
        pytest.param("local[2]", False, id="local: no executor JVM"),
        pytest.param("k8s://https://kubernetes.default.svc", False, id="kubernetes"),
    ],
)
def test_executors_get_the_cluster_configuration_only_where_they_can_read_this_machines_files(master, local):
    assert executors_on_this_machine(master) is local
    conf = with_log_config({}, master)
    assert conf["spark.driver.extraJavaOptions"] == log_config_option(DRIVER_LOG_CONFIG)
    assert ("spark.executor.extraJavaOptions" in conf) is local


def test_a_users_own_jvm_options_are_kept_after_ours_so_their_log_configuration_wins():
    conf = with_log_config({"spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile=mine.xml -Xss4m"}, "local-cluster[1,1,512]")
    assert conf["spark.driver.extraJavaOptions"] == f"{log_config_option(DRIVER_LOG_CONFIG)} -Dlog4j2.configurationFile=mine.xml -Xss4m"
    assert conf["spark.executor.extraJavaOptions"] == log_config_option(CLUSTER_LOG_CONFIG)


def test_the_configurations_exist_and_send_the_drivers_events_as_json():
    driver = DRIVER_LOG_CONFIG.read_text()
    assert "JsonTemplateLayout" in driver and "rootLogger.level = error" in driver
    assert CLUSTER_LOG_CONFIG.is_file()
    assert log_config_option(DRIVER_LOG_CONFIG).startswith("-Dlog4j2.configurationFile=file:///")


def test_the_daemons_session_reports_a_quiet_trigger_at_once_unless_the_user_says_otherwise():
    from autoscaler.core.settings import SparkSettings
    from autoscaler.spark.session import spark_conf

    key = "spark.sql.streaming.noDataProgressEventInterval"
    assert spark_conf(SparkSettings(master="local[1]"))[key] == "1s"  # Spark's 10 s hid a quiet stream 10-12 s
    assert spark_conf(SparkSettings(master="local[1]", conf={key: "30s"}))[key] == "30s"


def test_the_daemons_session_drops_a_removed_executor_after_a_second_unless_the_user_says_otherwise():
    from autoscaler.core.settings import SparkSettings
    from autoscaler.spark.session import spark_conf

    key = "spark.standalone.executorRemoveDelayOnDisconnection"
    assert spark_conf(SparkSettings(master="local-cluster[2,1,512]"))[key] == "1s"  # Spark's 5 s held every removal 5 s
    assert spark_conf(SparkSettings(master="local-cluster[2,1,512]", conf={key: "5s"}))[key] == "5s"


def _ms(text: str) -> int:
    # the cases' durations read by the project's own parser (the daemon reads a live session's
    # with Spark's, which also takes Spark's other units)
    from datetime import timedelta

    from autoscaler.core.settings import parse_duration

    return round(parse_duration(text) / timedelta(milliseconds=1))


@pytest.mark.parametrize(
    "values, master, slow",
    [
        pytest.param({}, "local-cluster[2,1,512]", ["noDataProgressEventInterval is 10s", "executorRemoveDelayOnDisconnection is 5s"],
                     id="spark-defaults-on-standalone"),
        pytest.param({}, "local[2]", ["noDataProgressEventInterval is 10s"], id="no-standalone-setting-off-standalone"),
        pytest.param({"spark.sql.streaming.noDataProgressEventInterval": "1000ms",
                      "spark.standalone.executorRemoveDelayOnDisconnection": "500ms"}, "spark://10.0.0.5:7077", [], id="as-fast-or-faster"),
        pytest.param({"spark.sql.streaming.noDataProgressEventInterval": "30s",
                      "spark.standalone.executorRemoveDelayOnDisconnection": "1s"}, "spark://10.0.0.5:7077",
                     ["noDataProgressEventInterval is 30s"], id="the-users-own-slow-value"),
    ],
)
def test_a_session_the_daemon_did_not_build_is_told_which_settings_slow_it(values, master, slow):
    from autoscaler.spark.session import untimely_conf

    advice = untimely_conf(values, master, _ms)
    assert len(advice) == len(slow)
    for line, expected in zip(advice, slow, strict=True):
        assert expected in line and "the daemon's own session sets" in line


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(ConnectionRefusedError(111, "Connection refused"), id="jvm-gone"),
        pytest.param("py4j", id="py4j-network-error"),
    ],
)
def test_spark_that_fails_to_start_is_one_line_not_py4js_tracebacks(monkeypatch, failure):
    # `run --master 'local-cluster[100000,1,512]'` ran the driver JVM out of files, and the
    # console showed three chained py4j tracebacks (2026-12-01)
    from py4j.protocol import Py4JNetworkError

    from autoscaler.core.settings import SparkSettings
    from autoscaler.spark import session

    error = Py4JNetworkError("Answer from Java side is empty") if failure == "py4j" else failure

    def jvm_fails(conf):
        raise error

    monkeypatch.setattr(session, "launch_driver_jvm", jvm_fails)
    monkeypatch.setattr(session, "_kill_gateway_jvms", lambda: None)  # (this process's JVM is the suite's)
    with pytest.raises(session.SparkStartError) as info:
        session.build_session(SparkSettings(master="local-cluster[2,1,512]"))
    assert str(info.value).startswith(f"Spark did not start on master local-cluster[2,1,512]: {type(error).__name__}: ")
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_a_signal_while_spark_starts_is_not_taken_for_a_start_failure(monkeypatch):
    from autoscaler.core.settings import SparkSettings
    from autoscaler.spark import session

    def interrupted(conf):
        raise KeyboardInterrupt

    monkeypatch.setattr(session, "launch_driver_jvm", interrupted)
    monkeypatch.setattr(session, "_kill_gateway_jvms", lambda: None)
    with pytest.raises(KeyboardInterrupt):
        session.build_session(SparkSettings(master="local-cluster[2,1,512]"))


def test_every_command_tells_a_spark_start_failure_in_one_line_with_exit_code_1(monkeypatch, capsys, tmp_path):
    from autoscaler.cli import main
    from autoscaler.spark.session import SparkStartError

    def start_fails(*args, **kwargs):
        raise SparkStartError("Spark did not start on master local-cluster[2,1,512]: ConnectionRefusedError: [Errno 111] Connection refused")

    monkeypatch.setattr("autoscaler.app.driver.build_session", start_fails)
    pipelines = tmp_path / "p.py"
    pipelines.write_text("from autoscaler import pipeline\n\n@pipeline('a')\ndef a(spark, ctx):\n    return spark.readStream.format('rate').load()\n")
    code = main(["run", "--pipelines", str(pipelines), "--master", "local-cluster[2,1,512]", "--http-port", "0", "--log-format", "console"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "spark-autoscaler: error: Spark did not start on master local-cluster[2,1,512]: ConnectionRefusedError" in err
    assert "Traceback" not in err
