"""What can be checked of the image without Docker (our machines have none; hack/e2e-kind.sh
builds it): it runs as the Spark image's user, its base is pinned, and it installs exactly the
package's runtime dependencies except PySpark (the Spark image's own PySpark is used)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "docker" / "Dockerfile").read_text()


def instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE)  # continued lines
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_the_image_ends_as_the_spark_user_not_root():
    users = [arg for op, arg in instructions() if op == "USER"]
    assert users[-1].strip() == "185"


def test_the_base_image_is_pinned():
    [base] = [arg for op, arg in instructions() if op == "FROM"]
    assert base.startswith("spark:${SPARK_VERSION}-") and "latest" not in base
    assert 'ARG SPARK_VERSION=4.3.0' in DOCKERFILE  # the pyspark line the suite runs on (pyproject: pyspark==4.3.*)


def test_the_image_installs_the_runtime_dependencies_but_pyspark():
    wanted = [d for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"] if not d.startswith("pyspark")]
    installed = re.findall(r'"([^"]+)"', next(arg for op, arg in instructions() if op == "RUN" and "pip install" in arg))
    assert [d.split("#")[0].strip() for d in wanted] == installed
