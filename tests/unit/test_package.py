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
