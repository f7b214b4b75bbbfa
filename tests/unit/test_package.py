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
