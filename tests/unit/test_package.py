"""The package's public names, as the README and the docs use them."""

import subprocess
import sys


def test_attach_stays_the_function_after_its_module_is_imported():
    import autoscaler
    import autoscaler.app.attached

    assert autoscaler.attach is autoscaler.app.attached.attach
    from autoscaler import attach

    assert attach is autoscaler.app.attached.attach and callable(autoscaler.attach)


def test_importing_the_package_and_declaring_pipelines_does_not_import_pyspark():
    code = "import sys, autoscaler; autoscaler.pipeline; autoscaler.attach; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.strip() == "False"


def test_ci_runs_exactly_the_test_command_the_readme_gives():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    commands = re.search(r"```bash\n(.*?)```", readme, re.S).group(1).splitlines()
    install_and_demo, test = [line for line in commands if line and not line.startswith("#")][:2]
    assert install_and_demo == "pip install -e '.[demo]' && spark-autoscaler demo"
    assert f'TEST_COMMAND="{test}"' in (root / ".ci" / "run").read_text()
    assert test.startswith("python3 -m pip install -e '.[test]' && lint-imports && ruff check && mypy && ")


def test_the_wheel_ships_the_monitoring_files_the_demo_trace_and_the_spark_log_configurations(tmp_path):
    """The dashboard renderer and the Helm chart read the package's own monitoring files, and
    every Spark JVM the daemon starts reads its log4j2 configuration from the package: they
    must be in an installed wheel, not only in the repository."""
    import shutil
    import zipfile
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for name in ("autoscaler", "policies"):
        shutil.copytree(root / name, tmp_path / "src" / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(root / name, tmp_path / "src")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(tmp_path / "src")],
        check=True, capture_output=True, timeout=300,
    )
    [wheel] = (tmp_path / "dist").glob("spark_autoscaler-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for shipped in (
        "autoscaler/ops/monitoring/dashboards/spark-autoscaler.json",
        "autoscaler/ops/monitoring/rules/alerts.yaml",
        "autoscaler/ops/monitoring/rules/recording.yaml",
        "autoscaler/tools/demo/traces/nyc_taxi.csv",
        "autoscaler/spark/log4j2-driver.properties",
        "autoscaler/spark/log4j2-cluster.properties",
        "policies/predictive.py",
    ):
        assert shipped in names, shipped
    assert not any(name.startswith(("tests/", "helm/", "docs/")) for name in names)
