"""`spark-autoscaler --help` and each command's read as a man page: a description, every option
explained with its default, examples and exit codes."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest

from autoscaler.cli import _HelpFormatter, build_parser


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Every (sub)command parser with its words: ``("benchmark", "step-load")``."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


ALL = list(commands(build_parser()))
OPTIONS = [
    pytest.param(action, id=f"{' '.join(path) or 'spark-autoscaler'} {action.option_strings[-1]}")
    for path, parser in ALL
    for action in parser._actions
    if action.option_strings and not isinstance(action, argparse._HelpAction)
]


@pytest.mark.parametrize("action", OPTIONS)
def test_every_option_says_what_it_does_and_its_default(action):
    text = _HelpFormatter("x")._get_help_string(action) or ""
    assert len(text) > 10, f"{action.option_strings}: no help"
    has_default = action.default not in (None, False, [], argparse.SUPPRESS) and not isinstance(action, argparse._VersionAction)
    if has_default or action.default is None and action.option_strings[-1] in ("--mode", "--policy", "--master", "--max-executors"):
        assert "default" in text, f"{action.option_strings}: {text!r}"


@pytest.mark.parametrize("path, parser", [pytest.param(p, parser, id=" ".join(p) or "spark-autoscaler") for p, parser in ALL])
def test_every_command_has_a_description_examples_and_the_exit_codes(path, parser):
    assert parser.description and len(parser.description) > 40, path
    assert isinstance(parser.formatter_class, type) and issubclass(parser.formatter_class, _HelpFormatter), path
    text = parser.format_help()
    assert re.search(r"\nexamples?:\n  spark-autoscaler ", text), path
    assert text.count("\nexit codes:\n  0    ") == 1 and "  130  interrupted" in text, path


def test_the_help_shows_defaults_examples_and_exit_codes_as_written():
    from autoscaler.tools.demo.params import default_peak_rate, usable_cores

    demo = subprocess.run([sys.executable, "-m", "autoscaler", "demo", "--help"], capture_output=True, text=True, timeout=60, check=True).stdout

    def section(option: str) -> str:
        return " ".join(demo.split("\noptions:\n", 1)[1].split(f"\n  {option}", 1)[1].split("\n  --", 1)[0].split())

    for option, default in (("--mode", "active"), ("--max-executors", "6"), ("--seconds-per-day", "150.0")):
        assert f"(default: {default})" in section(option), (option, section(option))
    # the peak's default depends on the machine: the help says what it is here
    assert f"at most 2800: {default_peak_rate(6):g} here with 6 executors on {usable_cores()} cores" in section("--peak-rate"), section("--peak-rate")
    assert "\nexamples:\n  spark-autoscaler demo\n" in demo
    top = subprocess.run([sys.executable, "-m", "autoscaler", "--help"], capture_output=True, text=True, timeout=60, check=True).stdout
    assert "\nexit codes:\n  0    " in top and "  130  interrupted" in top


def test_run_documents_the_configurations_own_defaults():
    from autoscaler.core.settings import Settings

    run = dict(ALL)[("run",)].format_help()
    assert f"else {Settings().executors.max})" in " ".join(run.split())
