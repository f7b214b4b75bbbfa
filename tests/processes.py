"""The processes a test started, read through psutil: those below a process, whether they still
run, what they run. A process that ends while it is read counts as gone, never as an error.

psutil's ``Process`` remembers when its process started: ``is_running()`` and ``kill()`` do not
take a pid the system has given to a new process since for the one the test saw (a bare pid
read from /proc would).
"""

from __future__ import annotations

import psutil


def below(pid: int, *, recursive: bool = True) -> list[psutil.Process]:
    """Every process below ``pid`` (only its children with ``recursive=False``); none once it is gone."""
    try:
        return psutil.Process(pid).children(recursive=recursive)
    except psutil.NoSuchProcess:
        return []


def named(processes: list[psutil.Process], name: str) -> list[psutil.Process]:
    """Those of ``processes`` whose executable is ``name`` (``java``, ``prometheus``)."""
    found = []
    for process in processes:
        try:
            if process.name() == name:
                found.append(process)
        except psutil.NoSuchProcess:
            continue
    return found


def running(process: psutil.Process) -> bool:
    """Still there and not a zombie (ended, its exit status not yet collected by its parent)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def command(process: psutil.Process) -> str:
    """Its command line, for a failure message; "(gone)" once it has ended."""
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return "(gone)"
