"""Render the settings reference from the declarations in :mod:`autoscaler.core.settings`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from autoscaler.core.settings import Settings, format_duration


def _default(value: Any) -> str:
    from datetime import timedelta
    from enum import Enum
    from pathlib import Path

    if isinstance(value, timedelta):
        return f"`{format_duration(value)}`"
    if isinstance(value, Enum):
        return f"`{value.value}`"
    if isinstance(value, (Path, str)):
        return f"`{value}`"
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, dict):
        return "`{}`" if not value else f"`{value}`"
    return f"`{value}`"


def _rows(model: type[BaseModel], prefix: str) -> list[str]:
    rows: list[str] = []
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            rows.extend(_rows(annotation, f"{key}."))
            continue
        default = field.get_default(call_default_factory=True)
        rows.append(f"| `{key}` | {_default(default)} | {field.description or ''} |")
    return rows


def render_settings_doc() -> str:
    from autoscaler.core.settings import ENVIRONMENT

    lines = [
        "# Settings reference",
        "",
        "Generated from `autoscaler/settings.py` by `spark-autoscaler settings-doc`; do not edit by hand.",
        "",
        "Durations accept `250ms`, `30s`, `5m`, `1h`, `2d`, combinations such as `1h30m` (largest unit first) or a number of seconds, up to `3650d`. Unknown keys are errors.",
        "",
        "| key | default | meaning |",
        "| --- | --- | --- |",
        *_rows(Settings, ""),
        "",
        "## Environment variables",
        "",
        "Environment variables override the file; command-line flags override both.",
        "",
        "| variable | key |",
        "| --- | --- |",
        *[f"| `{var}` | `{key}` |" for var, key in ENVIRONMENT.items()],
        "",
    ]
    return "\n".join(lines)
