"""Bad input to the command line: each refused with a message naming what is wrong and exit code 2,
never a Python traceback (a sweep of bad inputs found these)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoscaler.cli import build_parser, main

PIPELINES = str(Path(__file__).parents[1] / "integration" / "sample_pipelines.py")


# `run` and `operator` configure the process's logging onto the stdout pytest captured for the test
pytestmark = pytest.mark.usefixtures("restore_logging")


@pytest.mark.parametrize("command", ["run", "demo"])
@pytest.mark.parametrize(
    "host, problem",
    [
        # an empty address binds every interface (0.0.0.0 and ::)
        pytest.param("", "must be an IP address or a host name, got an empty value (which binds every interface", id="empty"),
        # passed, then the server failed to start with a guess of "address in use"
        pytest.param("127.0.0.1:8090", "must be an address without a port, got '127.0.0.1:8090': set the port as http.port", id="with-a-port"),
        pytest.param(" 0.0.0.0", "must be an IP address or a host name (letters, digits, '-', '_' and '.', no spaces), got ' 0.0.0.0'", id="a-space"),
    ],
)
def test_an_http_host_no_server_can_bind_is_refused_before_anything_starts(command, host, problem, capsys):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args([command, "--http-host", host])
    assert info.value.code == 2
    assert f"--http-host: {problem}" in capsys.readouterr().err


@pytest.mark.parametrize(
    "content, problem",
    [
        pytest.param(None, " does not exist", id="missing"),  # the client said "No configuration found"
        pytest.param(b"\x83\xff", " is not UTF-8 text (invalid start byte)", id="not-utf-8"),
        pytest.param(b"a: [\n", " is not valid YAML", id="broken-yaml"),
        pytest.param(b"- a\n", " is no kubeconfig (TypeError", id="a-list"),
        pytest.param(b"a: 1\n", ": Invalid kube-config file. Expected key current-context", id="no-context"),
    ],
)
def test_a_kubeconfig_the_operator_cannot_use_is_named(tmp_path, monkeypatch, capsys, content, problem):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    path = tmp_path / "kubeconfig"
    if content is not None:
        path.write_bytes(content)
    assert main(["operator", "--once", "--kubeconfig", str(path)]) == 2
    assert f"cannot reach the Kubernetes API: kubeconfig {str(path)!r}{problem}" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["simulate", "--trace", "t.csv"], id="simulate"),
        pytest.param(["benchmark", "traces", "--results", "r"], id="benchmark-traces"),
    ],
)
@pytest.mark.parametrize(
    "option, value, problem",
    [
        pytest.param("--param", "a=[1", "'a=[1': the value cannot be read as YAML (expected ',' or ']', but got '<stream end>')", id="broken"),
        pytest.param("--setting", "executors.max=!!python/name:os.system", "'executors.max=!!python/name:os.system': the value cannot be read as YAML "
                     "(could not determine a constructor for the tag 'tag:yaml.org,2002:python/name:os.system')", id="python-tag"),
        pytest.param("--param", "a={b: 1, b: 2}", "'a={b: 1, b: 2}': the value cannot be read as YAML (found duplicate key 'b' (first on line 1))", id="duplicate-key"),
    ],
)
def test_a_param_or_setting_that_is_not_yaml_is_a_usage_error(capsys, argv, option, value, problem):
    # was a yaml error's traceback, once the command had begun
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args([*argv, option, value])
    assert info.value.code == 2
    assert f"argument {option}: {problem}" in capsys.readouterr().err


@pytest.mark.parametrize("value, problem", [("0", "'0' must be > 0"), ("a week", "'a week' is not a number")])
def test_benchmark_traces_days_that_are_no_positive_number_are_a_usage_error(capsys, value, problem):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["benchmark", "traces", "--results", "r", "--days", value])
    assert info.value.code == 2
    assert f"argument --days: {problem}" in capsys.readouterr().err


def test_a_param_value_is_read_as_yaml():
    args = build_parser().parse_args(["simulate", "--trace", "t.csv", "--param", "hindsight=7d", "--param", "levels=[1, 2]", "--setting", "dry_run="])
    assert (args.param, args.setting) == ([("hindsight", "7d"), ("levels", [1, 2])], [("dry_run", "")])


HEADER = '{"format": "spark-autoscaler-metrics", "version": 1}\n'


@pytest.mark.parametrize(
    "content, problem",
    [
        # were AttributeError, KeyError and ValueError tracebacks, the last from the render itself
        pytest.param("[1, 2]\n", ', line 1: not a spark-autoscaler-metrics v1 recording (expected the header {"format"', id="header-not-an-object"),
        pytest.param(HEADER + '{"x": 1}\n', ", line 2: expected a scrape {\"t\": <unix seconds>, \"samples\": [[name, {labels}, value], ...]} (KeyError: 't')", id="row-without-t"),
        pytest.param(HEADER + '{"t": 1, "samples": []}\n\n{"t": 2, "samples": 5}\n', ", line 4: expected a scrape", id="samples-not-a-list"),
        pytest.param(HEADER + '{"t": "NaN", "samples": []}\n', ", line 2: expected a scrape", id="time-not-finite"),
        # promtool builds a block for every 2 hours up to the last time: 1e300 hung it, with its temp dir left
        pytest.param(HEADER + '{"t": 1e300, "samples": []}\n', ", line 2: expected a scrape", id="time-beyond-year-9999"),
        pytest.param(HEADER + '{"t": 1.7e9, "samples": []}\n{"t": 1.8e9, "samples": []}\n', ": its scrapes span 1157 days, more than 400", id="span-of-years"),
        pytest.param(HEADER, ": a header and no scrapes", id="header-only"),
        pytest.param(b"\xff\xfe", ": not UTF-8 text (invalid start byte at byte 0)", id="not-utf-8"),
    ],
)
def test_a_recording_that_cannot_be_drawn_is_named_with_its_line(tmp_path, capsys, content, problem):
    path = tmp_path / "run.jsonl"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert main(["dashboard", "render", "--recording", str(path), "--output", str(tmp_path / "d.png")]) == 2
    assert f"--recording: {path}{problem}" in capsys.readouterr().err
    assert not (tmp_path / "d.png").exists()


PANEL = '{"type": "timeseries", "title": "t", "gridPos": {"x": 0, "y": 0, "w": 12, "h": 8}, "targets": [{"expr": "up"}]}'


@pytest.mark.parametrize(
    "content, problem",
    [
        # each was a Python traceback (JSONDecodeError, KeyError, AttributeError) with exit code 1
        pytest.param("{bad", ": not valid JSON (line 1, column 2: Expecting property name", id="not-json"),
        pytest.param("{}", ": a Grafana dashboard is a JSON object with a non-empty 'panels' list", id="no-panels"),
        pytest.param("[]", ": a Grafana dashboard is a JSON object with a non-empty 'panels' list", id="a-list"),
        pytest.param('{"panels": [{"type": "stat"}]}', ": panel 0: needs a 'gridPos' of whole numbers x, y, w and h", id="no-grid"),
        pytest.param('{"panels": [' + PANEL.replace('"w": 12', '"w": 30') + "]}", ": panel 0 ('t'): gridPos", id="beyond-24-columns"),
        pytest.param('{"panels": [' + PANEL.replace('[{"expr": "up"}]', '"up"') + "]}", ": panel 0 ('t'): 'targets' must be a list", id="targets-text"),
        pytest.param(None, " is not a file", id="a-directory"),  # was "not found"
    ],
)
def test_a_dashboard_that_cannot_be_drawn_is_named_before_prometheus_is_asked(tmp_path, capsys, content, problem):
    path = tmp_path / "board"
    if content is None:
        path.mkdir()
    else:
        path.write_text(content)
    # nothing listens on port 1: a file that passed would fail on the query instead
    assert main(["dashboard", "render", "--prometheus", "http://127.0.0.1:1", "--output", str(tmp_path / "d.png"), "--dashboard", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"--dashboard: {path}{problem}" in err and "Traceback" not in err
    assert not (tmp_path / "d.png").exists()


def test_the_shipped_dashboard_reads_as_drawable():
    from autoscaler.tools.dashboard.render import DASHBOARD, read_dashboard

    assert len(read_dashboard(DASHBOARD)["panels"]) > 10


@pytest.mark.parametrize("url", ["notaurl", "http://", "ftp://prometheus", "http://prometheus:99999"])
def test_a_prometheus_that_is_no_http_url_is_a_usage_error(tmp_path, capsys, url):
    # urllib's "unknown url type" was a ValueError traceback after the render began
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["dashboard", "render", "--prometheus", url, "--output", str(tmp_path / "d.png")])
    assert info.value.code == 2
    assert f"argument --prometheus: {url!r} is not an http:// or https:// URL with a host" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flags, message",
    [
        # a step under a millisecond was taken as one, silently; one too fine for --since was
        # Prometheus's "try decreasing the query resolution (?step=XX)", a flag the command lacks
        pytest.param(["--step", "1e-9"], "--step 1e-09: a Prometheus's timestamps are whole milliseconds; give at least 0.001", id="under-a-millisecond"),
        pytest.param(["--since", "7d", "--step", "1"], "--step 1 over --since 604800 s is 604,800 points a series; a Prometheus answers "
                     "at most 11,000: give --step 54.982 or more, or leave it out", id="too-many-points"),
    ],
)
def test_a_step_prometheus_would_refuse_is_named_before_it_is_asked(tmp_path, capsys, flags, message):
    assert main(["dashboard", "render", "--prometheus", "http://127.0.0.1:1", *flags, "--output", str(tmp_path / "d.png")]) == 2
    assert capsys.readouterr().err == f"spark-autoscaler: error: {message}\n"


@pytest.mark.parametrize("command, flag", [("demo", "--http-port"), ("operator", "--metrics-port")])
def test_a_port_out_of_range_is_refused_without_saying_what_0_means(command, flag, capsys):
    # the operator's 0 is no server, the others' any free port: the error said "any free port" for both
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args([command, flag, "99999"])
    assert info.value.code == 2
    assert f"argument {flag}: '99999' must be within 0..65535\n" in capsys.readouterr().err


def test_a_step_for_a_recording_is_refused(tmp_path, capsys):
    assert main(["dashboard", "render", "--recording", str(tmp_path / "r.jsonl"), "--step", "3", "--output", str(tmp_path / "d.png")]) == 2
    assert "--step goes with --prometheus" in capsys.readouterr().err


def test_a_prometheus_that_cannot_be_reached_is_named_not_the_query_sent(tmp_path, capsys):
    from autoscaler.runtime.net import free_port

    url = f"http://127.0.0.1:{free_port('127.0.0.1')}/prometheus"
    assert main(["dashboard", "render", "--prometheus", url, "--output", str(tmp_path / "d.png")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"spark-autoscaler: error: cannot reach the Prometheus at {url}: ") and "query_range" not in err, err


@pytest.mark.parametrize(
    "status, body, problem",
    [
        # a web page where Prometheus was expected: json.loads' traceback before
        pytest.param(200, "<html>hello</html>", "{url} answered, but not with the JSON of Prometheus's API: is it a Prometheus server?", id="a-web-page"),
        pytest.param(200, "[1, 2]", "{url} answered, but not with the JSON of Prometheus's API: is it a Prometheus server?", id="json-not-an-object"),
        # a proxy's error page: the encoded query was named, not the server
        pytest.param(502, "<html>Bad Gateway</html>", "the Prometheus at {url} answered HTTP 502", id="a-proxy-error"),
    ],
)
def test_a_server_that_is_no_prometheus_is_named(tmp_path, capsys, httpserver, status, body, problem):
    httpserver.expect_request("/prom/api/v1/query_range").respond_with_data(body, status=status)
    url = httpserver.url_for("/prom")
    assert main(["dashboard", "render", "--prometheus", url, "--output", str(tmp_path / "d.png")]) == 2
    assert capsys.readouterr().err == f"spark-autoscaler: error: {problem.format(url=url)}\n"


def test_what_the_recorder_writes_loads_in_time_order(tmp_path):
    from prometheus_client import CollectorRegistry, Gauge

    from autoscaler.tools.dashboard.recording import MetricsRecorder, Recording

    registry = CollectorRegistry()
    Gauge("executors", "", ["q"], registry=registry).labels(q="a").set(3)
    recorder = MetricsRecorder(registry, tmp_path / "run.jsonl")
    recorder.write(20.0)
    recorder.write(10.0)
    recorder.close()
    rec = Recording.load(tmp_path / "run.jsonl")
    assert rec.times == [10.0, 20.0] and rec.scrapes[0] == {("executors", frozenset({("q", "a")})): 3.0}


def test_a_reader_of_stdout_gone_ends_the_command_quietly_as_sigpipe_would():
    import os
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)  # `| head -1` having read its line and gone: every write is EPIPE
    try:
        done = subprocess.run([sys.executable, "-m", "autoscaler", "settings-doc"], stdout=write, stderr=subprocess.PIPE, text=True,
                              timeout=60, cwd=Path(__file__).parents[2])
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, "")  # was a BrokenPipeError traceback, twice, and exit code 120


def test_an_output_that_cannot_be_written_is_named(capsys):
    # /dev/full opens (the option's check passes) and every write fails: was an OSError traceback
    assert main(["settings-doc", "--output", "/dev/full"]) == 2
    assert "--output '/dev/full': cannot be written: No space left on device" in capsys.readouterr().err


def test_an_output_is_written_whole_or_not_at_all(tmp_path, monkeypatch, capsys):
    import os

    out = tmp_path / "settings.md"
    out.write_text("the old reference\n")

    def full_disk(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)  # the new text was written beside it; the disk filled as it was renamed
    assert main(["settings-doc", "--output", str(out)]) == 2
    assert f"--output {str(out)!r}: cannot be written: No space left on device" in capsys.readouterr().err
    assert out.read_text() == "the old reference\n" and [p.name for p in tmp_path.iterdir()] == ["settings.md"]


@pytest.mark.parametrize(
    "key, content, problem",
    [
        pytest.param("token_file", b"# ours\na b c\n", "line 2: expected `TOKEN` or `NAME TOKEN`", id="bad-line"),
        pytest.param("token_files", b"\xca\xfe\n", "is not UTF-8 text (invalid continuation byte)", id="not-utf-8"),
    ],
)
def test_run_check_reads_the_token_files_as_the_api_will(tmp_path, capsys, key, content, problem):
    # --check passed these; the daemon then stopped at start with the same problem
    tokens = tmp_path / "tokens"
    tokens.write_bytes(content)
    config = tmp_path / "autoscaler.yaml"
    config.write_text(f"http: {{{key}: {'[tokens]' if key == 'token_files' else 'tokens'}}}\n")
    assert main(["run", "--check", "--pipelines", PIPELINES, "--config", str(config)]) == 2
    where = "http.token_files.0" if key == "token_files" else "http.token_file"
    assert f"{where}: token file {str(tokens.resolve())!r} {problem}" in capsys.readouterr().err


def test_token_files_are_not_read_when_the_http_server_is_off(tmp_path):
    from autoscaler.app.compose import configure

    (tmp_path / "tokens").write_text("a b c\n")
    settings = configure(None, {"http.enabled": False, "http.token_file": str(tmp_path / "tokens")}, environ={})
    assert settings.http.token_file == tmp_path / "tokens"


@pytest.mark.parametrize(
    "args, problem",
    [
        pytest.param(["--policies", "nosuch"], "unknown policy 'nosuch'", id="unknown-policy"),
        pytest.param(["--policies", "default", "--param", "target_utilization=2"], "target_utilization", id="bad-param"),
        pytest.param(["--compare-to", "/nonexistent"], "--compare-to: '/nonexistent' is not a directory of results", id="no-comparison"),
    ],
)
def test_benchmark_traces_refused_leaves_no_results_directory(tmp_path, capsys, args, problem):
    trace = tmp_path / "small.csv"
    trace.write_text("timestamp,value\n2024-03-01 00:00:00,10\n2024-03-01 00:05:00,12\n")
    results = tmp_path / "results" / "deeper"
    assert main(["benchmark", "traces", "--results", str(results), "--traces", str(trace), *args]) == 2
    assert problem in capsys.readouterr().err
    assert not (tmp_path / "results").exists()  # was created before the refusal


def test_simulate_skips_a_row_a_year_after_the_rest_and_says_so(tmp_path, capsys):
    # was a year of 10-second ticks simulated without a word; then refused as a date typed wrong,
    # which refused a collector's real outage too: now the year is closed to one step and told
    trace = tmp_path / "gap.csv"
    trace.write_text("timestamp,value\n2015-01-01 00:00:00,1\n2015-01-01 00:05:00,2\n2015-01-01 00:10:00,3\n2016-01-01 00:10:00,3\n")
    assert main(["simulate", "--trace", str(trace), "--policy", "static", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["simulated_seconds"] == 4 * 300
    assert "spark-autoscaler: warning: trace" in captured.err and "the first between lines 4 and 5, the longest 365 days" in captured.err


def test_simulate_refuses_a_trace_whose_rows_go_back_across_a_year_typed_wrong(tmp_path, capsys):
    # merge by order would fold every row after the wrong year into its step (--days keeps a
    # regression quick: it refuses at load)
    trace = tmp_path / "gap.csv"
    trace.write_text("timestamp,value\n2015-01-01 00:00:00,1\n2015-01-01 00:05:00,2\n2016-01-01 00:10:00,3\n2015-01-01 00:15:00,3\n")
    assert main(["simulate", "--trace", str(trace), "--policy", "static", "--days", "0.01"]) == 2
    err = capsys.readouterr().err
    assert (f"spark-autoscaler: error: trace {str(trace)!r}: line 4: timestamp 2016-01-01 00:10:00 is 365 days after 2015-01-01 00:05:00 "
            "on line 3, and line 5 goes back to 2015-01-01 00:15:00: a date typed wrong? Fix it") in err


def test_demo_refuses_a_trace_it_would_compress_into_too_many_phases_before_spark_starts(tmp_path, monkeypatch, capsys):
    # microsecond timestamps at 150 s a day: a 1-second demo built 5.8e8 phases and hung
    def start_spark(*args, **kwargs):
        raise AssertionError("the demo went on to start Spark")

    monkeypatch.setattr("autoscaler.tools.demo.run.run_demo", start_spark)
    trace = tmp_path / "us.csv"
    trace.write_text("timestamp,value\n2015-01-01 00:00:00,1\n2015-01-01 00:00:00.000001,2\n2015-01-01 00:00:00.000002,3\n")
    assert main(["demo", "--trace", str(trace), "--duration", "1", "--no-http"]) == 2
    assert (
        "spark-autoscaler: error: trace 'us': its step of 1e-06 s lasts 1.74e-09 s at 150 seconds per day, so 1 s of replay would be "
        "5.76e+08 steps, over the 10,000 a replay may have; give a day at least 8.64e+06 seconds, or replay a shorter duration"
    ) in capsys.readouterr().err


def test_run_check_refuses_a_checkpoint_that_is_another_pipelines_default(tmp_path, capsys, monkeypatch):
    # a's checkpoint= was b's default (<checkpoint_root>/b), spelled relative: --check passed it and two queries wrote one checkpoint
    monkeypatch.chdir(tmp_path)
    module = tmp_path / "p.py"
    module.write_text("from autoscaler import pipeline\n@pipeline('a', checkpoint='ck/b/')\ndef a(s, c): pass\n@pipeline('b')\ndef b(s, c): pass\n")
    config = tmp_path / "autoscaler.yaml"
    config.write_text(f"pipelines: {{checkpoint_root: {str(tmp_path / 'ck')!r}}}\nhttp: {{enabled: false}}\n")
    assert main(["run", "--check", "--pipelines", str(module), "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"a, b share the checkpoint {str(tmp_path / 'ck' / 'b')!r} (b's by default: pipelines.checkpoint_root/b)" in err


def test_the_demo_refuses_more_executors_than_this_machine_has_room_for_before_spark_starts(monkeypatch, capsys, tmp_path):
    # asked for 100,000 the demo started worker JVMs until its Python workers failed to connect
    # back, and ran on, failing (2026-12-01)
    from autoscaler.tools.demo.run import executors_room_problem

    def start_spark(*args, **kwargs):
        raise AssertionError("the demo went on to start Spark")

    monkeypatch.setattr("autoscaler.tools.demo.run.run_demo", start_spark)
    assert main(["demo", "--duration", "1", "--no-http", "--max-executors", "100000"]) == 2
    err = capsys.readouterr().err
    assert "spark-autoscaler: error: --max-executors 100000: the demo runs a Spark worker and an executor JVM for each on this machine" in err
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       8000000 kB\nMemFree:         100000 kB\nMemAvailable:    4718592 kB\n")  # 4.5 GiB
    assert executors_room_problem(6, meminfo) is None  # the demo's default
    assert executors_room_problem(7, meminfo) == (
        "--max-executors 7: the demo runs a Spark worker and an executor JVM for each on this machine "
        "(about 0.75 GiB each), and 4.5 GiB are available: at most 6"
    )
    assert executors_room_problem(500, tmp_path / "no-such-file") is None  # unknown: not refused on a guess


def test_the_demo_refuses_a_peak_its_executors_could_never_carry_before_spark_starts(monkeypatch, capsys):
    # asked for 1e9 rows/s the demo started Spark and generated rows no executor could take; the
    # check after the run would have drained 1.8e11 rows first (2026-12-02)
    from autoscaler.tools.demo.run import DemoOptions, peak_rate_problem

    def start_spark(*args, **kwargs):
        raise AssertionError("the demo went on to start Spark")

    monkeypatch.setattr("autoscaler.tools.demo.run.run_demo", start_spark)
    assert main(["demo", "--duration", "1", "--no-http", "--peak-rate", "1e9"]) == 2
    assert (
        "spark-autoscaler: error: --peak-rate 1e+09: 6 one-core executor(s) at 1 ms of work a row carry at most 6000 rows/s "
        "before any overhead, so the backlog could only grow, and the check after the run drains it all; give at most 6000, "
        "or more --max-executors"
    ) in capsys.readouterr().err
    assert peak_rate_problem(6000, 6) is None and peak_rate_problem(2800, 3) is None
    for executors in (1, 2, 6):  # the default peak, sized to the cores the demo can use, is never refused
        assert peak_rate_problem(DemoOptions(max_executors=executors).peak(), executors) is None, executors
    assert peak_rate_problem(6000.5, 6) is not None and "at most 2000 rows/s" in (peak_rate_problem(2001, 2) or "")


def test_the_demo_refuses_a_port_in_use_before_spark_starts(monkeypatch, capsys):
    # the demo starts a Spark cluster and its driver before its HTTP server: a port in use was
    # told after 30-60 s of start-up, and uvicorn's own error line came first (2026-11-30)
    import socket

    def start_spark(*args, **kwargs):
        raise AssertionError("the demo went on to start Spark")

    monkeypatch.setattr("autoscaler.tools.demo.run.run_demo", start_spark)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["demo", "--duration", "1", "--http-port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"spark-autoscaler: error: cannot listen on 127.0.0.1:{port}: Address already in use" in err
    assert "--no-http serves nothing" in err


def test_the_demo_refuses_a_host_not_of_this_machine_before_spark_starts_with_any_port(monkeypatch, capsys):
    # with --http-port 0 the check was skipped: Spark started (26 s) before the refusal, exit 2
    # ("nothing was started") and the driver JVM still alive after it
    def start_spark(*args, **kwargs):
        raise AssertionError("the demo went on to start Spark")

    monkeypatch.setattr("autoscaler.tools.demo.run.run_demo", start_spark)
    assert main(["demo", "--duration", "1", "--http-host", "192.0.2.1", "--http-port", "0"]) == 2  # TEST-NET-1: no machine's
    err = capsys.readouterr().err
    assert "spark-autoscaler: error: cannot listen on 192.0.2.1:0: " in err and "assign" in err, err


@pytest.mark.parametrize(
    "content, problem",
    [
        pytest.param(None, "trace 'missing.csv' does not exist", id="missing"),  # said the default file was not found
        pytest.param("", "trace 'empty.csv' is empty", id="empty"),  # read by the first run, after its Spark cluster started
    ],
)
def test_benchmark_on_off_refuses_its_trace_before_spark_starts(tmp_path, monkeypatch, capsys, content, problem):
    def start_spark(*args, **kwargs):
        raise AssertionError("the benchmark went on to start Spark")

    monkeypatch.setattr("autoscaler.tools.bench.step_load.run_benchmark", start_spark)
    monkeypatch.chdir(tmp_path)
    name = "missing.csv" if content is None else "empty.csv"
    if content is not None:
        (tmp_path / name).write_text(content)
    assert main(["benchmark", "on-off", "--trace", name]) == 2
    assert f"spark-autoscaler: error: {problem}" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, problem",
    [
        # was pydantic's ValidationError traceback, exit 1
        pytest.param(["benchmark", "soak", "--master", "bogus://x"], "argument --master: 'bogus://x' is not a Spark master URL", id="soak-master"),
        # '' read as the working directory, and the results went to ./peak/
        pytest.param(["benchmark", "traces", "--results", ""], "argument --results: an empty path: name a directory", id="empty-results"),
    ],
)
def test_a_benchmark_option_of_no_use_is_a_usage_error(capsys, argv, problem):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(argv)
    assert info.value.code == 2
    assert problem in capsys.readouterr().err


def test_a_refused_demo_leaves_no_workdir_behind(tmp_path, capsys):
    # the directory was created before the other checks ran
    workdir = tmp_path / "new" / "work"
    assert main(["demo", "--workdir", str(workdir), "--max-executors", "100000"]) == 2
    assert "--max-executors 100000" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_sim_speed_refuses_warm_days_beyond_the_trace(tmp_path, capsys):
    # counted "0 instructions" with exit 0, or ran on for ever at 1e9 days
    trace = tmp_path / "t.csv"
    trace.write_text("timestamp,value\n" + "".join(f"2024-03-01 {h:02d}:00:00,{10 + h}\n" for h in range(6)))
    assert main(["benchmark", "sim-speed", "--trace", str(trace), "--days", "0.01", "--instructions", "--warm-days", "1000"]) == 2
    assert "--warm-days 1000: trace 't' covers 0.25 days" in capsys.readouterr().err
