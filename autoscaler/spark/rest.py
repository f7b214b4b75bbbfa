"""The driver's monitoring REST API (``/api/v1``), served by the Spark UI of the application."""

from __future__ import annotations

import json
import urllib.request
from typing import Any


def driver_api(spark: Any, resource: str) -> str | None:
    """The address of ``resource`` of this application (``executors``, ``stages``); None when the
    UI is off (``spark.ui.enabled=false``), which serves none."""
    sc = spark.sparkContext
    return f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/{resource}" if sc.uiWebUrl else None


def get_json(url: str, timeout: float) -> Any:
    """GET ``url`` and parse its JSON body; ``OSError`` (unreachable, an HTTP error, a timeout) or
    ``ValueError`` (not JSON) for the caller to handle."""
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.load(resp)
