"""CPU time of process trees, read from /proc (Linux), to split a benchmark's cost by component."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CpuMeter"]

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stats() -> dict[int, tuple[int, float, float]]:
    """pid → (parent pid, user + system CPU seconds, those of its children that exited and were
    waited for) for every live process (none without /proc)."""
    out: dict[int, tuple[int, float, float]] = {}
    if not CpuMeter.available():
        return out
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        own, reaped = int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])
        out[int(entry.name)] = (int(fields[1]), own / _TICK, reaped / _TICK)
    return out


def _tree_seconds(stats: dict[int, tuple[int, float, float]], root: int) -> float:
    """The CPU time of ``root`` and its descendants, living or exited (a PostgreSQL backend that
    closed before the measurement's end counts: the postmaster waited for it)."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            total += stats[pid][1] + stats[pid][2]
        todo.extend(children.get(pid, ()))
    return total


class CpuMeter:
    """CPU seconds used by named processes between start and stop.

    ``trees`` maps a name to a process id counted with its descendants (a server and its backends,
    those that exited meanwhile included), ``processes`` to one counted alone; None means not
    measurable (an external server). A process counted alone that exits before ``stop`` takes its
    CPU time with it, so measure long-lived ones.
    """

    def __init__(self, trees: dict[str, int | None], processes: dict[str, int | None] | None = None) -> None:
        self._trees = {name: pid for name, pid in trees.items() if pid is not None}
        self._alone = {name: pid for name, pid in (processes or {}).items() if pid is not None}
        self._start: dict[str, float] = {}

    @staticmethod
    def available() -> bool:
        return Path("/proc/self/stat").exists()

    def _read(self) -> dict[str, float]:
        stats = _stats()
        out = {name: _tree_seconds(stats, pid) for name, pid in self._trees.items()}
        out.update({name: stats.get(pid, (0, 0.0, 0.0))[1] for name, pid in self._alone.items()})
        return out

    def start(self) -> None:
        self._start = self._read()

    def stop(self) -> dict[str, float]:
        """CPU seconds per name since :meth:`start`."""
        return {name: seconds - self._start[name] for name, seconds in self._read().items()}
