"""State stores: where the daemon remembers its history and operator overrides across restarts.

Every store implements :class:`autoscaler.runtime.ports.StateStore` (``load() -> dict | None``,
``save(dict)``) and passes the contract suite in ``tests/contracts/state_store.py``. The state
is a JSON object; a store keeps it whole (a save replaces the previous state atomically).
"""

from __future__ import annotations

from pathlib import Path

from autoscaler.core.settings import Settings
from autoscaler.runtime.ports import StateStore
from autoscaler.runtime.state.base import MemoryStateStore, StateStoreError
from autoscaler.runtime.state.file import FileStateStore

__all__ = ["FileStateStore", "MemoryStateStore", "StateStoreError", "open_state_store"]


def open_state_store(settings: Settings) -> StateStore | None:
    """The store the settings ask for: a local file when ``state.path`` is set, else none.

    A ConfigMap (``state.configmap``) is the Kubernetes adapter's, which this layer does not
    import: the composition root opens it (``autoscaler.app.compose.open_store``).
    """
    if settings.state.configmap is not None:
        raise StateStoreError("state.configmap: a ConfigMap store is opened by the composition root (autoscaler.app.compose.open_store)")
    if settings.state.path is not None:
        return FileStateStore(Path(settings.state.path))
    return None
