from pathlib import Path

from autoscaler.tools.settings_doc import render_settings_doc

ROOT = Path(__file__).resolve().parents[2]


def test_settings_reference_is_generated_from_the_declarations():
    assert (ROOT / "docs" / "settings.md").read_text() == render_settings_doc(), (
        "docs/settings.md is stale: run `spark-autoscaler settings-doc --output docs/settings.md`"
    )


def test_every_setting_has_a_description():
    reference = render_settings_doc().split("## Renamed", 1)[0]
    rows = [line for line in reference.splitlines() if line.startswith("| `")]
    assert len(rows) > 40 and all(not line.rstrip().endswith("|  |") for line in rows)


def test_the_metrics_table_in_the_operations_guide_is_current():
    import re

    from autoscaler.ops.metrics import render_metrics_table

    text = (ROOT / "docs" / "operations.md").read_text()
    table = re.search(r"<!-- metrics-table:[^>]*-->\n(.*?)<!-- /metrics-table -->", text, re.S)
    assert table is not None
    assert table.group(1) == render_metrics_table(), (
        "docs/operations.md's metrics table is stale: paste the output of `python -m autoscaler.ops.metrics`"
    )


def test_the_simulator_calibration_table_in_the_benchmarks_is_current():
    import re

    from autoscaler.tools.sim.config import render_calibration_table

    text = (ROOT / "docs" / "benchmarks.md").read_text()
    table = re.search(r"<!-- calibration-table:[^>]*-->\n(.*?)<!-- /calibration-table -->", text, re.S)
    assert table is not None
    assert table.group(1) == render_calibration_table(), (
        "docs/benchmarks.md's calibration table is stale: paste the output of `python -m autoscaler.tools.sim.config`"
    )


def test_the_first_hour_page_shows_the_live_view_as_the_demo_prints_it():
    """The page's capture is a real run: its header and legend are the demo's current ones."""
    from autoscaler.tools.demo.run import LiveView

    page = (ROOT / "docs" / "first-hour.md").read_text()
    assert f"\n{LiveView.HEADER}\n{LiveView.LEGEND}\n" in page, "docs/first-hour.md is stale: paste a new run of `spark-autoscaler demo`"
    assert "\nsummary: executor-seconds " in page and "(audit #" in page
