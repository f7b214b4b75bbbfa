"""The operator's configuration file is read as the daemon's is: every problem named, never a traceback."""

from __future__ import annotations

import re

import pytest

from autoscaler.operator.settings import OperatorSettingsError, load_operator_settings


@pytest.mark.parametrize(
    "content, problem",
    [
        # was a bare UnicodeDecodeError
        pytest.param(b"\xca\xfe\xba\xbe", "is not UTF-8 text (invalid continuation byte)", id="not-utf-8"),
        pytest.param(b"workers: [\n", "is not valid YAML", id="broken-yaml"),
        pytest.param(b"- a\n", "must hold a mapping", id="not-a-mapping"),
        pytest.param(b"workers: 2\nworkers: 3\n", "is not valid YAML: found duplicate key 'workers' (first on line 1)", id="duplicate-key"),
    ],
)
def test_a_config_file_that_cannot_be_read_is_named(tmp_path, content, problem):
    path = tmp_path / "operator.yaml"
    path.write_bytes(content)
    with pytest.raises(OperatorSettingsError) as info:
        load_operator_settings(path)
    assert f"config file {str(path)!r} {problem}" in str(info.value)


def test_a_missing_config_file_is_named(tmp_path):
    with pytest.raises(OperatorSettingsError, match=re.escape(f"config file {str(tmp_path / 'nope.yaml')!r} does not exist")):
        load_operator_settings(tmp_path / "nope.yaml")


@pytest.mark.parametrize("section", ["5", "", "[a]"], ids=["number", "empty", "list"])
def test_a_flag_under_a_section_the_file_sets_to_no_mapping_names_the_section(tmp_path, section):
    # --lease-name over `leaderElection: 5` indexed the 5: a TypeError
    path = tmp_path / "operator.yaml"
    path.write_text(f"leaderElection: {section}\n")
    with pytest.raises(OperatorSettingsError, match="leaderElection: Input should be a valid dictionary"):
        load_operator_settings(path, {"leaderElection.leaseName": "foo"})


def test_a_boolean_where_a_number_is_declared_is_named(tmp_path):
    # YAML reads yes as true, and pydantic took true for 1: `workers: yes` ran one worker
    path = tmp_path / "operator.yaml"
    path.write_text("workers: yes\n")
    with pytest.raises(OperatorSettingsError, match=re.escape("workers: expected a number, got the boolean true")):
        load_operator_settings(path)
