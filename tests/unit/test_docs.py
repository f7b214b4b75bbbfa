import ast
import functools
import re
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


# a path into this repository as the README and the docs write it; a name followed by a
# placeholder (`docs/img/sim-<trace>.png`, `sim-$t.json`, `{peak,p99}`, `*.json`) is a pattern, not a file
NAMED_PATH = re.compile(r"(?<![\w./-])((?:autoscaler|policies|tests|helm|docs|hack|docker|\.ci)/[\w./<>${},*-]*)(::\w+)?")
PLACEHOLDER = re.compile(r"[<>${}*]")
MARKDOWN_LINK = re.compile(r"\]\((?!https?:|mailto:|#)([^)#\s]+)")


def missing_references(doc: Path, root: Path = ROOT) -> list[str]:
    """The files, directories, tests and linked pages ``doc`` names that ``root`` does not have."""
    text, missing = doc.read_text(), []
    for match in NAMED_PATH.finditer(text):
        path, test = match.group(1).rstrip(".,-"), match.group(2)
        if PLACEHOLDER.search(path):
            continue
        if not (root / path).exists():
            missing.append(path)
        elif test and test[2:] not in _defined_names(root / path):
            missing.append(path + test)
    missing += [link for link in MARKDOWN_LINK.findall(text) if not (doc.parent / link).exists()]
    return missing


@functools.cache  # the README and the docs name the same few test modules dozens of times
def _defined_names(module: Path) -> set[str]:
    tree = ast.parse(module.read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def test_every_file_test_and_page_the_readme_and_docs_name_exists():
    """A claim points at a test (or a file, a result, a plot) a reader can open: a renamed test or a
    moved module leaves the docs pointing at nothing (the house plan's moves left six stale paths
    in docs/benchmarks.md, 2026-11-30)."""
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "helm").rglob("*.md"))]
    missing = {str(doc.relative_to(ROOT)): found for doc in docs if (found := missing_references(doc))}
    assert missing == {}


def test_the_reference_check_finds_a_moved_file_a_renamed_test_and_a_dead_link(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("def test_kept():\n    pass\n")
    (tmp_path / "docs").mkdir()
    doc = tmp_path / "docs" / "page.md"
    doc.write_text(
        "`tests/test_x.py::test_kept`, `tests/test_x.py::test_renamed`, `autoscaler/moved.py`, "
        "`docs/img/sim-<trace>.png`, `docs/results/{peak,p99}/`, [here](page.md), [there](gone.md#a), "
        "[web](https://example.com/x)\n"
    )
    assert missing_references(doc, tmp_path) == ["tests/test_x.py::test_renamed", "autoscaler/moved.py", "gone.md"]
