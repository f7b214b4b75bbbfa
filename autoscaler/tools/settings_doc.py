"""Render the settings reference from the declarations in :mod:`autoscaler.core.settings`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from autoscaler.core.settings import Settings, format_duration
from autoscaler.runtime.config import (
    ENV_DELIMITER,
    ENV_PREFIX,
    FILE_RELATIVE_KEYS,
    NOT_SETTINGS,
    RENAMED,
    env_var,
)


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
        rows.append(f"| `{key}` | `{env_var(key)}` | {_default(default)} | {field.description or ''} |")
    return rows


def render_settings_doc() -> str:
    lines = [
        "# Settings reference",
        "",
        "Generated from `autoscaler/core/settings.py` by `spark-autoscaler settings-doc`; do not edit by hand.",
        "",
        "Sources, lowest precedence first: the defaults below, the YAML file (`--config`), environment "
        "variables, command-line flags. Every key has an environment variable: "
        f"`{ENV_PREFIX}` and the key with `{ENV_DELIMITER}` between its levels; a mapping "
        "(`spark.conf`, `policy.params`) takes JSON, or one entry per variable "
        f"(`{env_var('policy.params')}{ENV_DELIMITER}HORIZON=1h`). A variable with the prefix that is no "
        f"setting is an error (except the token's, which `http.token_env` names: `{sorted(NOT_SETTINGS)[0]}` unless set); an empty "
        "variable counts as unset (the file or the default applies).",
        "",
        f"A relative path in the YAML file ({', '.join(f'`{key}`' for key in FILE_RELATIVE_KEYS)}) is relative "
        "to the file; given by a variable, a flag or left at its default, to the working directory. A relative "
        "`pipelines.checkpoint_root` in the file was relative to the working directory until 2026-12-02: while the "
        "checkpoints are only there, the daemon refuses to start, naming both places. The same holds for a "
        "pipeline's own `checkpoint=`: relative in a `.py` pipeline file, it is relative to that file (in a dotted "
        "module, installed code, to the working directory, as Spark reads it).",
        "",
        "Durations accept `250ms`, `30s`, `5m`, `1h`, `2d`, combinations such as `1h30m` (largest unit first) or a number of seconds, up to `3650d`. Unknown keys are errors.",
        "",
        "| key | environment variable | default | meaning |",
        "| --- | --- | --- | --- |",
        *_rows(Settings, ""),
        "",
        "## Renamed environment variables",
        "",
        "Read until version 0.1; setting one now is an error that names its successor.",
        "",
        "| old variable | now |",
        "| --- | --- |",
        *[f"| `{old}` | `{env_var(key)}` |" for old, key in RENAMED.items()],
        "",
    ]
    return "\n".join(lines)
