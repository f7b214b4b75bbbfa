"""Bad input to the command line: each refused with a message naming what is wrong and exit code 2,
never a Python traceback (a sweep of bad inputs found these)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscaler.cli import build_parser, main

PIPELINES = str(Path(__file__).parents[1] / "integration" / "sample_pipelines.py")


@pytest.mark.parametrize("command", ["run", "demo"])
def test_an_empty_http_host_is_refused_before_anything_starts(command, capsys):
    # an empty address binds every interface (0.0.0.0 and ::)
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args([command, "--http-host", ""])
    assert info.value.code == 2
    assert "--http-host: an empty address binds every interface" in capsys.readouterr().err


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
