"""The package type-checks: mypy with the settings in pyproject.toml ([tool.mypy]).

Value classes (``@value``) are dataclasses to the checker (``dataclass_transform``), settings are
checked with pydantic's plugin. A finding names the file and line, as mypy prints it.
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_type_checks():
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(ROOT / ".mypy_cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
