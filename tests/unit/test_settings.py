import re
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.core.model import Mode
from autoscaler.core.settings import format_duration, parse_duration
from autoscaler.runtime.config import SettingsError, load_settings


@pytest.mark.parametrize(
    "text, seconds",
    [
        pytest.param("250ms", 0.25, id="ms"),
        pytest.param("30s", 30, id="s"),
        pytest.param("5m", 300, id="m"),
        pytest.param("1.5h", 5400, id="fractional-h"),
        pytest.param(12, 12, id="bare-number"),
        pytest.param("7", 7, id="bare-string"),
        pytest.param("5 m", 300, id="space-before-unit"),
        pytest.param("1h30m", 5400, id="hours-and-minutes"),
        pytest.param("2m30s", 150, id="minutes-and-seconds"),
        pytest.param("1d12h", 129600, id="days-and-hours"),
        pytest.param(" 1h 30m ", 5400, id="parts-with-spaces"),
        pytest.param("1h30m15s500ms", 5415.5, id="every-unit"),
    ],
)
def test_durations_parse(text, seconds):
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    "bad, message",
    [
        ("soon", "expected a duration such as 30s"),
        ("-5s", "expected a duration such as 30s"),
        (-5, "must not be negative"),
        ("5 parsecs", "expected a duration such as 30s"),
        ("30m1h", "each unit once, the largest first), got '30m1h'"),
        ("1h1h", "each unit once, the largest first"),
        ("1h30", "expected a duration such as 30s, 5m, 1h or 1h30m, got '1h30'"),
        ("3650d1s", "must be at most 3650d"),
        (True, "got a boolean"),
        (None, "expected a duration such as 30s"),
        ("3651d", "must be at most 3650d (about ten years), got '3651d'"),
        ("99999999999d", "must be at most 3650d"),  # beyond what timedelta holds
        (float("inf"), "must be a finite number of seconds"),
        (float("nan"), "must be a finite number of seconds"),
    ],
)
def test_bad_durations_are_rejected(bad, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_duration(bad)


def test_the_longest_duration_is_accepted():
    assert parse_duration("3650d") == timedelta(days=3650)


def test_duration_round_trips_through_format():
    for s in ("30s", "5m", "2h", "0.25s", "0s", "1234567.5s", "100000.25s", "0.000001s"):
        assert format_duration(parse_duration(s)) == s


@given(st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=3650)))
def test_every_duration_is_formatted_as_a_text_that_reads_back_exactly(value):
    assert parse_duration(format_duration(value)) == value


@given(st.lists(st.integers(0, 99), min_size=5, max_size=5).filter(any))
def test_a_combined_duration_is_the_sum_of_its_parts(counts):
    units = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1), ("ms", 0.001))
    text = "".join(f"{n}{unit}" for n, (unit, _) in zip(counts, units) if n)
    assert parse_duration(text).total_seconds() == pytest.approx(sum(n * size for n, (_, size) in zip(counts, units)))


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "autoscaler.yaml"
    p.write_text(text)
    return p


def test_defaults_are_valid():
    s = load_settings(environ={})
    assert s.mode == Mode.AUTO and s.executors.min == 1 and s.policy.name == "default"


def test_yaml_env_and_overrides_in_order_of_precedence(tmp_path):
    cfg = write(tmp_path, "mode: reactive\nexecutors: {min: 2, max: 5}\nreconcile_interval: 10s\n")
    s = load_settings(cfg, {"executors.max": 7}, environ={"SPARK_AUTOSCALER_MODE": "active"})
    assert s.mode == Mode.ACTIVE  # env beats file
    assert s.executors.max == 7  # flag beats file
    assert s.executors.min == 2
    assert s.reconcile_interval == timedelta(seconds=10)


def test_an_empty_environment_variable_counts_as_unset_as_docs_settings_says(tmp_path):
    cfg = write(tmp_path, "executors: {max: 5}\n")
    assert load_settings(cfg, environ={"SPARK_AUTOSCALER_EXECUTORS__MAX": ""}).executors.max == 5
    assert "an empty variable counts as unset" in (Path(__file__).parents[2] / "docs" / "settings.md").read_text()


def test_relative_pipeline_module_is_resolved_against_the_config_file(tmp_path):
    (tmp_path / "p.py").write_text("")
    cfg = write(tmp_path, "pipelines: {module: p.py}\n")
    assert load_settings(cfg, environ={}).pipelines.module == str((tmp_path / "p.py").resolve())


def test_relative_token_file_and_state_path_are_resolved_against_the_config_file(tmp_path):
    (tmp_path / "token").write_text("secret\n")
    cfg = write(tmp_path, "http: {token_file: token}\nstate: {path: state/autoscaler.json}\n")
    s = load_settings(cfg, environ={})
    assert s.http.token_file == (tmp_path / "token").resolve()
    assert s.state.path == (tmp_path / "state" / "autoscaler.json").resolve()


def test_every_path_docs_settings_calls_relative_to_the_file_is(tmp_path, monkeypatch):
    from autoscaler.runtime.config import FILE_RELATIVE_KEYS

    conf = tmp_path / "conf"
    conf.mkdir()
    for name in ("p.py", "token", "more"):
        (conf / name).write_text("secret\n" if name != "p.py" else "")
    cfg = write(conf, "pipelines: {module: p.py, checkpoint_root: ck}\nhttp: {token_file: token, token_files: [more]}\n"
                      "state: {path: state.json}\n")
    monkeypatch.chdir(tmp_path)  # not the file's directory: `checkpoint_root: ck` was ./ck here
    s = load_settings(cfg, environ={})
    read = {"pipelines.module": Path(s.pipelines.module), "pipelines.checkpoint_root": s.pipelines.checkpoint_root,
            "http.token_file": s.http.token_file, "http.token_files": s.http.token_files[0], "state.path": s.state.path}
    assert set(read) == set(FILE_RELATIVE_KEYS)
    assert {key: path.parent for key, path in read.items()} == dict.fromkeys(read, conf.resolve())
    # a file: URI is a local directory too; another URI is kept as written
    assert load_settings(write(conf, "pipelines: {checkpoint_root: 'file:ck'}\n"), environ={}).pipelines.checkpoint_root == conf.resolve() / "ck"
    assert load_settings(write(conf, "pipelines: {checkpoint_root: 's3a://b/ck'}\n"), environ={}).pipelines.checkpoint_root == "s3a://b/ck"


def test_checkpoints_under_the_working_directory_of_a_relative_root_are_not_left_behind(tmp_path, monkeypatch):
    # a relative root was relative to the working directory before: taking the file's directory
    # would have restarted every query there without its offsets and state
    conf, run_dir = tmp_path / "conf", tmp_path / "run"
    (run_dir / "ck" / "q" / "offsets").mkdir(parents=True)
    conf.mkdir()
    cfg = write(conf, "pipelines: {checkpoint_root: ck}\n")
    monkeypatch.chdir(run_dir)
    with pytest.raises(SettingsError) as info:
        load_settings(cfg, environ={})
    assert info.value.problems == [
        f"pipelines.checkpoint_root: 'ck' is relative to the configuration file ({conf / 'ck'}), but the checkpoints are under the "
        f"working directory ({run_dir / 'ck'}), where a relative one was read before: move them, or write {str(run_dir / 'ck')!r}"
    ]
    (conf / "ck").mkdir()  # moved (or begun) beside the file: that one is used
    assert load_settings(cfg, environ={}).pipelines.checkpoint_root == conf / "ck"
    monkeypatch.chdir(conf)  # started from the file's directory: one place, as before
    (conf / "ck").rmdir()
    assert load_settings(cfg, environ={}).pipelines.checkpoint_root == conf / "ck"


def test_http_defaults_bind_to_loopback_on_8090():
    s = load_settings(environ={})
    assert (s.http.host, s.http.port, s.http.enabled, s.http.token_file) == ("127.0.0.1", 8090, True, None)


def test_every_setting_comes_from_its_environment_variable(tmp_path):
    s = load_settings(
        environ={
            "SPARK_AUTOSCALER_HTTP__PORT": "9100",
            "SPARK_AUTOSCALER_STATE__PATH": str(tmp_path / "s.json"),
            "SPARK_AUTOSCALER_EXECUTORS__MAX": "12",
            "SPARK_AUTOSCALER_NORMALIZE__SCALE_DOWN_DELAY": "2m",
            "SPARK_AUTOSCALER_SPARK__CONF": '{"spark.executor.memoryOverhead": "1g"}',  # a mapping takes JSON
            "SPARK_AUTOSCALER_POLICY__PARAMS__HORIZON": "1h",  # ... or one entry per variable
            "SPARK_AUTOSCALER_DRY_RUN": "true",
            "SPARK_AUTOSCALER_MODE": "",  # empty: not set
        }
    )
    assert s.http.port == 9100 and s.state.path == tmp_path / "s.json" and s.executors.max == 12
    assert s.normalize.scale_down_delay == timedelta(minutes=2) and s.dry_run and s.mode == Mode.AUTO
    assert s.spark.conf == {"spark.executor.memoryOverhead": "1g"} and s.policy.params == {"horizon": "1h"}


def test_a_spark_property_from_its_own_variable_keeps_its_case():
    # variables are read case-blind: the entry was spark.executor.extrajavaoptions, which Spark
    # does not know, and the option was silently not set
    s = load_settings(environ={"SPARK_AUTOSCALER_SPARK__CONF__spark.executor.extraJavaOptions": "-Dx=1",
                               "spark_autoscaler_spark__conf__spark.sql.adaptive.coalescePartitions.enabled": "false",
                               "SPARK_AUTOSCALER_POLICY__PARAMS__HORIZON": "1h"})
    assert s.spark.conf == {"spark.executor.extraJavaOptions": "-Dx=1", "spark.sql.adaptive.coalescePartitions.enabled": "false"}
    assert s.policy.params == {"horizon": "1h"}  # a parameter's name is lower case however written
    with pytest.raises(SettingsError, match="'SPARK_EXECUTOR_MEMORY': not a Spark property"):
        load_settings(environ={"SPARK_AUTOSCALER_SPARK__CONF__SPARK_EXECUTOR_MEMORY": "1g"})


def test_every_documented_key_has_the_variable_the_reference_names():
    from autoscaler.runtime.config import env_var, setting_variables

    variables = set(setting_variables())
    assert env_var("executors.max") == "SPARK_AUTOSCALER_EXECUTORS__MAX" in variables
    assert env_var("http.token_file") in variables and env_var("slo.target_lag") in variables
    for name, value in [("SPARK_AUTOSCALER_SLO__TARGET_LAG", "2m"), ("SPARK_AUTOSCALER_HISTORY__RATE_STEP", "10m")]:
        assert name in variables and load_settings(environ={name: value}) is not None


def test_an_environment_file_or_flag_value_that_is_wrong_names_its_key():
    with pytest.raises(SettingsError, match="executors.max: Input should be a valid integer"):
        load_settings(environ={"SPARK_AUTOSCALER_EXECUTORS__MAX": "lots"})


@pytest.mark.parametrize(
    "yaml_text, problem",
    [
        # YAML 1.1 reads 1e9 (no dot) as text: the message alone ("unable to parse string") hid why
        pytest.param("executors: {max: 1e9}\n", "executors.max: Input should be a valid integer, unable to parse string as an integer, got '1e9'", id="exponent-as-text"),
        pytest.param("mode: ACTIVE\n", "mode: Input should be 'auto', 'reactive' or 'active', got 'ACTIVE'", id="case"),
        pytest.param("http: {port: 70000}\n", "http.port: Input should be less than or equal to 65535, got 70000", id="out-of-range"),
        # a setting that may hold a secret is never repeated
        pytest.param("http: {token_env: 12345}\n", "http.token_env: Input should be a valid string", id="secret-not-repeated"),
    ],
)
def test_a_wrong_value_is_told_as_it_was_read(tmp_path, yaml_text, problem):
    path = tmp_path / "c.yaml"
    path.write_text(yaml_text)
    with pytest.raises(SettingsError) as info:
        load_settings(path, environ={})
    assert info.value.problems == [problem]


@pytest.mark.parametrize(
    "variable, problem",
    [
        pytest.param("SPARK_AUTOSCALER_MAX_EXECUTORS", "SPARK_AUTOSCALER_MAX_EXECUTORS is no longer read; set SPARK_AUTOSCALER_EXECUTORS__MAX (executors.max)", id="renamed"),
        pytest.param("SPARK_MASTER", "SPARK_MASTER is no longer read; set SPARK_AUTOSCALER_SPARK__MASTER (spark.master)", id="renamed-master"),
        pytest.param("SPARK_AUTOSCALER_EXECUTOR__MAX", "SPARK_AUTOSCALER_EXECUTOR__MAX is not a setting (did you mean SPARK_AUTOSCALER_EXECUTORS__MAX?)", id="typo"),
        pytest.param("SPARK_AUTOSCALER_NOTHING_LIKE_IT", "SPARK_AUTOSCALER_NOTHING_LIKE_IT is not a setting", id="unknown"),
    ],
)
def test_a_variable_that_names_no_setting_is_an_error_not_ignored(variable, problem):
    with pytest.raises(SettingsError) as info:
        load_settings(environ={variable: "3"})
    assert info.value.problems == [f"environment: {problem}"]


@pytest.mark.parametrize(
    "variable, value, problem",
    [
        pytest.param("SPARK_AUTOSCALER_EXECUTORS", "not json", "SPARK_AUTOSCALER_EXECUTORS (executors) is not JSON (Expecting value: line 1 column 1 (char 0)); it takes a JSON object, or one variable per key", id="section"),
        pytest.param("SPARK_AUTOSCALER_HTTP__TOKEN_FILES", "/x", 'SPARK_AUTOSCALER_HTTP__TOKEN_FILES (http.token_files) is not JSON (Expecting value: line 1 column 1 (char 0)); it takes a JSON list, e.g. ["/a", "/b"]', id="list"),
        pytest.param("spark_autoscaler_policy__params", "{bad", "spark_autoscaler_policy__params (policy.params) is not JSON", id="mapping-in-lower-case"),
    ],
)
def test_a_variable_of_a_section_list_or_mapping_that_is_not_json_is_named(variable, value, problem):
    # was pydantic_settings' own SettingsError, naming the section only, as a traceback
    with pytest.raises(SettingsError) as info:
        load_settings(environ={variable: value})
    assert info.value.problems[0].startswith(f"environment: {problem}")


def test_the_token_variable_is_not_taken_for_a_setting():
    assert load_settings(environ={"SPARK_AUTOSCALER_API_TOKEN": "secret-token"}).http.token_env == "SPARK_AUTOSCALER_API_TOKEN"


@pytest.mark.parametrize("source", ["file", "environment", "flag"])
def test_a_token_variable_of_ones_own_with_the_prefix_is_not_taken_for_a_setting(tmp_path, source):
    # `http.token_env: SPARK_AUTOSCALER_TOKEN` was refused: "SPARK_AUTOSCALER_TOKEN is not a setting"
    environ = {"SPARK_AUTOSCALER_TOKEN": "secret-token"}
    path, flags = None, {}
    if source == "file":
        path = write(tmp_path, "http: {token_env: SPARK_AUTOSCALER_TOKEN}\n")
    elif source == "environment":
        environ["SPARK_AUTOSCALER_HTTP__TOKEN_ENV"] = "SPARK_AUTOSCALER_TOKEN"
    else:
        flags = {"http.token_env": "SPARK_AUTOSCALER_TOKEN"}
    assert load_settings(path, overrides=flags, environ=environ).http.token_env == "SPARK_AUTOSCALER_TOKEN"
    with pytest.raises(SettingsError, match="SPARK_AUTOSCALER_TOKEN is not a setting"):  # named by none: a typo, as before
        load_settings(environ={"SPARK_AUTOSCALER_TOKEN": "secret-token"})


def test_a_settings_own_variable_cannot_hold_the_token():
    with pytest.raises(SettingsError, match="http.token_env: SPARK_AUTOSCALER_EXECUTORS__MAX is the variable of a setting"):
        load_settings(overrides={"http.token_env": "SPARK_AUTOSCALER_EXECUTORS__MAX"}, environ={})


@pytest.mark.parametrize(
    "yaml_text, problem",
    [
        pytest.param("mdoe: active\n", "mdoe: unknown key", id="unknown-top-level-key"),
        pytest.param("executors: {min: 4, max: 2}\n", "executors: min (4) must not exceed max (2)", id="min-above-max"),
        pytest.param("executors: {min: two}\n", "executors.min: Input should be a valid integer", id="wrong-type"),
        pytest.param("executors: {max: 3000000000}\n", "executors.max: Input should be less than or equal to 100000", id="max-beyond-a-java-int"),
        pytest.param("executors: {initial: 9, max: 4}\n", "initial (9) must lie within", id="initial-outside"),
        pytest.param("mode: turbo\n", "mode: Input should be 'auto', 'reactive' or 'active'", id="bad-mode"),
        pytest.param("reconcile_interval: soon\n", "reconcile_interval: expected a duration", id="bad-duration"),
        pytest.param("reconcile_interval: 0s\n", "reconcile_interval: must be at least 100ms, got 0s", id="spinning-interval"),
        pytest.param("request_timeout: 0s\n", "request_timeout: must be more than 0, got 0s", id="every-request-not-granted"),
        pytest.param("policy: {name: magic}\n", "policy: unknown policy 'magic'", id="unknown-policy"),
        pytest.param("policy: {params: {target_utilization: 2}}\n", "policy: policy 'default': params.target_utilization", id="bad-policy-param"),
        pytest.param("pipelines: {module: missing.py}\n", "pipelines.module: pipeline file", id="missing-pipeline-file"),
        pytest.param("pipelines: {module: no_such_module_xyz}\n", "cannot be imported", id="missing-pipeline-module"),
        # find_spec raised ModuleNotFoundError or ImportError for these, a traceback of `run --check`
        pytest.param("pipelines: {module: no_such_package_xyz.pipelines}\n", "pipeline module 'no_such_package_xyz.pipelines' cannot be imported (No module named 'no_such_package_xyz')", id="missing-parent-package"),
        pytest.param("pipelines: {module: json.decoder.nothing}\n", "pipeline module 'json.decoder.nothing' cannot be imported (__path__ attribute not found", id="parent-not-a-package"),
        pytest.param("pipelines: {module: .relative}\n", "pipeline module '.relative' is not a dotted module name", id="relative-module"),
        pytest.param("pipelines: {module: a..b}\n", "pipeline module 'a..b' is not a dotted module name", id="empty-part"),
        pytest.param("- a\n- b\n", "must hold a mapping", id="not-a-mapping"),
        pytest.param("executors: [\n", "is not valid YAML", id="broken-yaml"),
        # PyYAML keeps the last of two equal keys: the first block was dropped without a word
        pytest.param("executors:\n  max: 20\nmode: active\nexecutors:\n  min: 2\n",
                     "found duplicate key 'executors' (first on line 1)\n  in \"<unicode string>\", line 4, column 1", id="duplicate-section"),
        pytest.param("executors: {max: 4, max: 5}\n", "found duplicate key 'max' (first on line 1)", id="duplicate-key-in-a-section"),
        pytest.param("http: {port: 70000}\n", "http.port: Input should be less than or equal to 65535", id="port-out-of-range"),
        pytest.param("http: {token_file: /nonexistent/token}\n", "http.token_file: '/nonexistent/token' does not exist", id="missing-token-file"),
        # an empty address binds every interface (0.0.0.0 and ::), the opposite of what was meant
        pytest.param("http: {host: ''}\n", "http.host: must be an IP address or a host name, got an empty value", id="empty-http-host"),
        # `run --check` said valid, then the server did not start ("address in use or not available?")
        pytest.param("http: {host: '127.0.0.1:8090'}\n", "http.host: must be an address without a port, got '127.0.0.1:8090': set the port as http.port", id="host-with-port"),
        pytest.param("http: {host: '[::1]'}\n", "http.host: must be an IPv6 address without brackets, got '[::1]'", id="bracketed-ipv6"),
        pytest.param("http: {host: 'my host'}\n", "http.host: must be an IP address or a host name (letters, digits, '-', '_' and '.', no spaces), got 'my host'", id="space-in-host"),
        pytest.param("http: {token_env: 'A-B'}\n", "http.token_env: String should match pattern", id="bad-token-env-name"),
        pytest.param("audit: {max_count: 0}\n", "audit.max_count: Input should be greater than or equal to 1", id="audit-count-zero"),
        # infinite or astronomic factors passed and then overflowed math.ceil on every tick
        pytest.param("normalize: {max_scale_up_factor: .inf}\n", "normalize.max_scale_up_factor: Input should be a finite number", id="infinite-scale-up-factor"),
        pytest.param("normalize: {max_scale_up_factor: 1e308}\n", "normalize.max_scale_up_factor: Input should be less than or equal to 100000", id="astronomic-scale-up-factor"),
        pytest.param("normalize: {max_batch_triggers: .inf}\n", "normalize.max_batch_triggers: Input should be a finite number", id="infinite-batch-triggers"),
        # NaN was "Input should be less than or equal to 1000": no setting takes a number that is not finite
        pytest.param("normalize: {max_batch_triggers: .nan}\n", "normalize.max_batch_triggers: Input should be a finite number", id="nan-batch-triggers"),
        pytest.param("normalize: {dead_band: .nan}\n", "normalize.dead_band: Input should be a finite number", id="nan-dead-band"),
        # the settings read keys case-blind (for the environment): `Executors:` beside `executors:` was dropped
        pytest.param("executors:\n  max: 3\nExecutors:\n  max: 50\n", "Executors: unknown key (did you mean executors?)", id="miscased-section"),
        pytest.param("Dry_Run: true\n", "Dry_Run: unknown key (did you mean dry_run?)", id="miscased-key"),
        # read as if there were no such setting
        pytest.param('"executors.max": 5\n', "executors.max: unknown key; a file nests its settings: write executors: {max: ...}", id="dotted-key"),
        pytest.param("executors: {max: 3}\n1: 2\n", "key 1 is not a setting's name (a key must be text)", id="number-as-a-key"),
        pytest.param("executors: {max: 3}\n2020-01-01: 2\n", "key datetime.date(2020, 1, 1) is not a setting's name", id="date-as-a-key"),
        pytest.param("policy:\n  params:\n    x: " + "[" * 3000 + "]" * 3000 + "\n", "is nested too deeply to be a configuration", id="nested-too-deeply"),
        # YAML reads yes/no/on/off as booleans, and pydantic took true for 1: `dead_band: on` ignored every change
        pytest.param("normalize: {dead_band: on}\n", "normalize.dead_band: expected a number, got the boolean true (YAML reads yes, no, on and off as booleans)", id="on-for-a-number"),
        pytest.param("http: {port: yes}\n", "http.port: expected a number, got the boolean true", id="yes-for-a-port"),
        pytest.param("executors: {max: no}\n", "executors.max: expected a number, got the boolean false", id="no-for-a-count"),
        # a master Spark does not know failed only once the session started, after `run --check` said valid
        pytest.param("spark: {master: 'locall[4]'}\n", "spark.master: 'locall[4]' is not a Spark master URL (local, local[N]", id="misspelt-master"),
        pytest.param("spark: {master: 'local-cluster[4,1,512'}\n", "spark.master: 'local-cluster[4,1,512' is not a Spark master URL", id="unclosed-master"),
        pytest.param("spark: {master: ''}\n", "spark.master: '' is not a Spark master URL", id="empty-master"),
        # passed --check, then Spark refused them at start (or waited for executors that never come)
        pytest.param("spark: {master: 'local[0]'}\n", "spark.master: the threads must be at least 1, got 'local[0]'", id="no-threads"),
        pytest.param("spark: {master: 'local-cluster[2,0,512]'}\n", "spark.master: the workers, cores per worker and MiB per worker must each be at least 1", id="no-cores"),
        pytest.param("spark: {master: 'local-cluster[0,1,512]'}\n", "spark.master: the workers, cores per worker and MiB per worker must each be at least 1", id="no-workers"),
        pytest.param("spark: {conf: {spark.executor.cores: abc}}\n", "spark.conf: spark.executor.cores: must be a whole number of at least 1, got 'abc'", id="cores-not-a-number"),
        pytest.param("spark: {conf: {spark.executor.cores: 0}}\n", "spark.conf: spark.executor.cores: must be a whole number of at least 1, got 0", id="no-executor-cores"),
        pytest.param("spark: {conf: {spark.executor.memory: null}}\n", "spark.conf: spark.executor.memory: must be a string, number or boolean, got None",
                     id="null-spark-conf"),
        # a space around a path: ` /data/s.json` was a relative path under the file's directory
        pytest.param("state: {path: ' /data/s.json'}\n", "state.path: has a space at its start or end, got ' /data/s.json'", id="space-before-a-path"),
        pytest.param("pipelines: {checkpoint_root: '/ck '}\n", "pipelines.checkpoint_root: has a space at its start or end, got '/ck '", id="space-after-a-root"),
        pytest.param("pipelines: {module: 'p.py '}\n", "pipelines.module: has a space at its start or end, got 'p.py '", id="space-after-a-module"),
        pytest.param("http: {token_files: [' more']}\n", "http.token_files.0: has a space at its start or end", id="space-before-a-token-file"),
        # accepted: no batch fed a decision, every stop cut its batch short, a nameless application
        pytest.param("window: {metrics_window: 0s}\n", "window.metrics_window: must be more than 0, got 0s", id="no-metrics-window"),
        pytest.param("pipelines: {stop_timeout: 0s}\n", "pipelines.stop_timeout: must be more than 0, got 0s", id="no-stop-timeout"),
        pytest.param("spark: {app_name: '  '}\n", "spark.app_name: String should match pattern '\\S', got '  '", id="blank-app-name"),
        # contradictions that were silent
        pytest.param("history: {rate_step: 9d}\n", "history: rate_step (216h) must not exceed rate_max_age (192h)", id="step-longer-than-memory"),
        pytest.param("executors: {cores: 2}\nspark: {conf: {spark.executor.cores: 4}}\n",
                     "executors.cores (2) contradicts spark.conf spark.executor.cores (4), the cores Spark gives each executor: set one of them", id="two-executor-sizes"),
        # accepted, then the batch buffer overflowed its C size after Spark had started
        pytest.param("window: {max_samples: 100000000000000000000}\n", "window.max_samples: Input should be less than or equal to 100000, got 100000000000000000000", id="samples-overflow"),
        pytest.param("history: {max_count: 10000000000}\n", "history.max_count: Input should be less than or equal to 1000000", id="history-too-long"),
        pytest.param("audit: {max_count: 10000000000}\n", "audit.max_count: Input should be less than or equal to 1000000", id="audit-too-long"),
        # the union of a path and a URI named its internals (lax-or-strict[...]), twice
        pytest.param("pipelines: {checkpoint_root: 5}\n", "pipelines.checkpoint_root: must name a directory or a URI as text (checkpoints, s3a://bucket/checkpoints), got 5", id="number-as-checkpoint-root"),
        pytest.param("pipelines: {checkpoint_root: [a]}\n", "pipelines.checkpoint_root: must name a directory or a URI as text", id="list-as-checkpoint-root"),
        # Spark ignores a property without its prefix with a warning in its log
        pytest.param("spark: {conf: {executor.memory: 1g}}\n", "spark.conf: 'executor.memory': not a Spark property (they start with 'spark.'", id="not-a-spark-property"),
        # the builder's master came from the setting, then this replaced it
        pytest.param("spark: {conf: {spark.master: 'local[2]'}}\n", "spark.conf: spark.master: set it as the setting spark.master, not in spark.conf", id="master-in-conf"),
        pytest.param("spark: {conf: {spark.app.name: x}}\n", "spark.conf: spark.app.name: set it as the setting spark.app_name, not in spark.conf", id="app-name-in-conf"),
    ],
)
def test_invalid_configuration_names_key_and_problem(tmp_path, yaml_text, problem):
    with pytest.raises(SettingsError) as info:
        load_settings(write(tmp_path, yaml_text), environ={})
    assert problem in str(info.value)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "fe80::1%eth0", "localhost", "driver.spark.svc.cluster.local", "spark_driver"])
def test_addresses_a_server_binds_to_are_taken(host):
    # a Docker Compose service name has an underscore: not DNS's, but resolvers take it
    assert load_settings(None, {"http.host": host}, environ={}).http.host == host


def test_a_token_files_name_with_a_space_is_refused_without_repeating_it(tmp_path):
    # a token pasted where its file's name belongs must not reach the console
    with pytest.raises(SettingsError) as info:
        load_settings(write(tmp_path, "http: {token_file: 's3cr3t '}\n"), environ={})
    assert info.value.problems == ["http.token_file: has a space at its start or end"]


def test_one_executor_size_given_twice_alike_is_no_contradiction(tmp_path):
    s = load_settings(write(tmp_path, "executors: {cores: 4}\nspark: {conf: {spark.executor.cores: '4'}}\n"), environ={})
    assert s.executors.cores == 4


def test_keys_merged_from_an_anchor_may_be_overridden(tmp_path):
    from autoscaler.runtime.config import read_yaml_mapping

    cfg = write(tmp_path, "executors: &base {min: 1, max: 4}\nnormalize: {dead_band: 0.1}\nspark:\n  conf: {<<: {a: '1'}, a: '2'}\n")
    assert read_yaml_mapping(cfg)["spark"]["conf"] == {"a": "2"}


def test_all_problems_are_reported_at_once(tmp_path):
    with pytest.raises(SettingsError) as info:
        load_settings(write(tmp_path, "mode: x\nreconcile_interval: y\nfoo: 1\n"), environ={})
    assert len(info.value.problems) == 3


def test_missing_config_file(tmp_path):
    with pytest.raises(SettingsError, match="does not exist"):
        load_settings(tmp_path / "nope.yaml", environ={})


def test_a_pipeline_module_or_token_file_that_is_a_directory_is_named_so(tmp_path):
    (tmp_path / "dir.py").mkdir()
    with pytest.raises(SettingsError, match="pipeline file .* is not a file"):
        load_settings(None, {"pipelines.module": str(tmp_path / "dir.py")}, environ={})
    with pytest.raises(SettingsError, match="token_file: .* is not a file"):
        load_settings(None, {"http.token_file": str(tmp_path)}, environ={})


def test_a_config_that_is_a_directory_or_not_text_names_the_problem(tmp_path):
    with pytest.raises(SettingsError, match="is not a file"):
        load_settings(tmp_path, environ={})
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xca\xfe\xba\xbe")
    with pytest.raises(SettingsError, match=re.escape("is not UTF-8 text (invalid continuation byte)")):
        load_settings(binary, environ={})


URI_ROOTS = ["s3a://bucket/ck", "gs://bucket/ck/", "hdfs://namenode:8020/checkpoints", "abfss://ck@account.dfs.core.windows.net/apps",
             "hdfs:/checkpoints"]  # the default name node, one slash: Hadoop reads the scheme


@pytest.mark.parametrize("root", URI_ROOTS)
@pytest.mark.parametrize("source", ["yaml", "environment", "flag"])
def test_a_uri_checkpoint_root_is_kept_as_written(tmp_path, root, source):
    # typed Path, s3a://bucket/ck became PosixPath('s3a:/bucket/ck'): a local directory under the working directory
    cfg = write(tmp_path, f"pipelines: {{checkpoint_root: {root!r}}}\n" if source == "yaml" else "{}\n")
    environ = {"SPARK_AUTOSCALER_PIPELINES__CHECKPOINT_ROOT": root} if source == "environment" else {}
    overrides = {"pipelines.checkpoint_root": root} if source == "flag" else {}
    assert load_settings(cfg, overrides, environ=environ).pipelines.checkpoint_root == root


@pytest.mark.parametrize(
    "root, kept",
    [
        pytest.param("checkpoints", Path("checkpoints"), id="relative"),
        pytest.param("/w/ck", Path("/w/ck"), id="absolute"),
        pytest.param(Path("/w/ck"), Path("/w/ck"), id="a-path"),
        pytest.param("file:///w/ck", Path("/w/ck"), id="file-uri"),
        pytest.param("file:/w/ck", Path("/w/ck"), id="hadoop-file-uri"),
    ],
)
def test_a_local_checkpoint_root_is_a_path_and_a_file_uri_its_directory(root, kept):
    assert load_settings(None, {"pipelines.checkpoint_root": root}, environ={}).pipelines.checkpoint_root == kept
    assert load_settings(environ={}).pipelines.checkpoint_root == Path("checkpoints")


@pytest.mark.parametrize("root", ["", "   ", "\t\n", "file://", "file:"])
def test_an_empty_checkpoint_root_is_refused_by_name(root):
    # Path('') is Path('.'): every query checkpointed straight into the working directory
    with pytest.raises(SettingsError) as info:
        load_settings(None, {"pipelines.checkpoint_root": root}, environ={})
    assert info.value.problems == [
        "pipelines.checkpoint_root: must name a directory or a URI (s3a://bucket/checkpoints), got an empty value"
    ]


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[2,3]", "local-cluster[3, 1, 1024]", "spark://a:7077,b:7077",
                                    "k8s://https://10.0.0.1:443", "yarn"])
def test_every_master_url_spark_takes_is_taken(master):
    assert load_settings(None, {"spark.master": master}, environ={}).spark.master == master
