"""The house plan holds: the pure core imports no framework, and ``lint-imports`` (the README's
test command runs it) fails as soon as a module crosses a layer."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORKS = ("pyspark", "py4j", "fastapi", "prometheus_client", "uvicorn", "structlog", "yaml", "kubernetes")


def test_the_core_and_the_policies_import_no_framework():
    code = (
        "import sys, autoscaler.core.decide, autoscaler.core.settings, policies.registry; "
        "policies.registry.load_policies(plugins=False); "
        f"print(sorted(m for m in {FRAMEWORKS!r} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True, cwd=ROOT)
    assert done.stdout.strip() == "[]"


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [shutil.which("lint-imports") or "lint-imports", "--config", str(tree / "pyproject.toml"), "--no-cache"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tree,
        env={"PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin", "PYTHONPATH": str(tree)},
    )


@pytest.fixture
def tree(tmp_path):
    """A copy of the two packages and the contracts."""
    for name in ("autoscaler", "policies"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "*.csv", "*.json"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    "module, added, contract",
    [
        pytest.param("autoscaler/core/leak.py", "import pyspark\n", "The decision core and the policies do no I/O", id="core-imports-spark"),
        pytest.param("autoscaler/core/leak.py", "from autoscaler.runtime.reconciler import Reconciler\n", "Layers:", id="core-imports-the-runtime"),
        pytest.param("autoscaler/runtime/leak.py", "import autoscaler.tools.sim.runner\n", "Layers:", id="runtime-imports-the-simulator"),
        pytest.param("policies/static.py", "import policies.reactive\n", "Policies do not import each other", id="a-policy-imports-another"),
        pytest.param("autoscaler/runtime/leak.py", "import kubernetes\n", "Only the Kubernetes adapter talks to Kubernetes", id="runtime-imports-kubernetes"),
        pytest.param("autoscaler/operator/leak.py", "import kubernetes.client\n", "Only the Kubernetes adapter talks to Kubernetes", id="operator-imports-kubernetes"),
        pytest.param("autoscaler/spark/leak.py", "import autoscaler.k8s.gateway\n", "Layers:", id="spark-imports-its-sibling-k8s"),
        pytest.param("autoscaler/app/leak.py", "import autoscaler.operator.reconcile\n", "Layers:", id="app-imports-its-sibling-operator"),
        pytest.param("autoscaler/k8s/leak.py", "import pyspark\n", "Only the Spark adapter talks to Spark", id="k8s-imports-spark"),
        pytest.param("autoscaler/ops/leak.py", "import matplotlib\n", "Nothing the daemon runs imports the tools", id="ops-imports-matplotlib"),
        pytest.param("autoscaler/app/leak.py", "import pyarrow\n", "Nothing the daemon runs imports the tools", id="app-imports-pyarrow"),
        pytest.param("autoscaler/operator/leak.py", "import autoscaler.tools.sim.runner\n", "Nothing the daemon runs imports the tools", id="operator-imports-the-simulator"),
        pytest.param("autoscaler/core/fine.py", "import math\n", None, id="nothing-crossed"),
    ],
)
def test_lint_imports_fails_when_a_module_crosses_a_layer(tree, module, added, contract):
    path = tree / module
    path.write_text((path.read_text() if path.exists() else "") + added)
    done = lint_imports(tree)
    if contract is None:
        assert done.returncode == 0, done.stdout + done.stderr
        assert "0 broken" in done.stdout
    else:
        assert done.returncode != 0, done.stdout
        # lint-imports wraps a long contract name over lines: read its verdicts unwrapped
        unwrapped = " ".join(done.stdout.split())
        assert re.search(re.escape(contract) + r"(?:(?!KEPT).)*?BROKEN", unwrapped), done.stdout


def test_no_module_imports_itself_through_others():
    """No import cycle at all: grimp's graph holds every import, type-only and function-level ones included."""
    import grimp

    graph = grimp.build_graph("autoscaler", "policies")
    modules = set(graph.modules)
    imports = {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}
    assert [m for m in sorted(modules) if _reaches(imports, m)] == []


def _reaches(imports: dict[str, set[str]], start: str) -> bool:
    """Whether ``start`` is reachable from its own imports."""
    seen, todo = set(), list(imports[start])
    while todo:
        module = todo.pop()
        if module == start:
            return True
        if module not in seen:
            seen.add(module)
            todo.extend(imports[module])
    return False
