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
