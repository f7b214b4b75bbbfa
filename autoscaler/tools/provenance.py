"""Which code a benchmark result comes from, kept in the result itself.

Results are compared across changes and kept for weeks (``docs/results``); a figure is only
worth as much as the knowledge of what made it. Each result names the package version and,
when the code runs from a git checkout, its commit and whether the code that makes the figures
(``autoscaler/`` and ``policies/``) differed from that commit: a result of uncommitted code
cannot be made again from the commit alone.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Mapping

from autoscaler._version import __version__

# the directories whose code makes the figures (docs, tests and the chart do not)
CODE_DIRS = ("autoscaler", "policies")
_ROOT = Path(__file__).resolve().parents[2]


def code_version(root: Path = _ROOT) -> dict[str, Any]:
    """``{"version", "commit", "modified"}``: the package version; the commit of the checkout
    whose top is ``root`` (None when ``root`` is not the top of a git checkout, e.g. an
    installed wheel, or git is not there); whether files under :data:`CODE_DIRS`
    differ from it (None when the commit is)."""
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != root.resolve():
        # not a checkout, or a checkout around an installed copy (a venv inside a repository)
        return {"version": __version__, "commit": None, "modified": None}
    commit = _git(root, "rev-parse", "HEAD")
    # untracked files count (a new policy module changes figures); ignored ones do not
    changes = _git(root, "status", "--porcelain", "--", *CODE_DIRS)
    return {"version": __version__, "commit": commit, "modified": None if commit is None or changes is None else bool(changes)}


def code_label(code: Mapping[str, Any] | None) -> str:
    """A result's code in a few characters: the short commit (with ``+changes`` when its code
    was modified), the version when no commit is known, ``not recorded`` for results made
    before the code was kept."""
    if not isinstance(code, Mapping):
        return "not recorded"
    commit = code.get("commit")
    if not commit:
        return f"version {code.get('version', '?')}"
    return f"{str(commit)[:7]}{'+changes' if code.get('modified') else ''}"


def _git(root: Path, *args: str) -> str | None:
    """git's answer in ``root``, stripped; None when git fails or is not there."""
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None
