"""structlog configuration: JSON when not on a terminal, readable on one (configured once per process)."""

from __future__ import annotations

import logging
import sys
import threading
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING

__all__ = ["configure_logging"]


def _structlog() -> ModuleType:
    """structlog, loaded without rich's traceback and pretty-printing support (which bring pygments
    and attrs, about 0.02 s of CPU on every start). structlog loads them when rich is installed (typer
    requires it), for its console renderer's exceptions and for ``show_locals`` tracebacks; here
    ``format_exc_info`` renders every exception as plain text before the renderer sees it, so neither
    is used. Whoever imports structlog first decides: a command imports this module first."""
    if "structlog" in sys.modules:
        return sys.modules["structlog"]
    # rich itself too: structlog.dev imports rich.console before it finds no rich.traceback, which
    # a command printing JSON (`memory search --json`) would otherwise pay for (issue 32).
    hidden = [name for name in ("rich", "rich.traceback", "rich.pretty") if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # "not installed", for this import only
    try:
        import structlog
    finally:
        for name in hidden:
            if sys.modules.get(name, ...) is None:
                del sys.modules[name]
    return structlog


if TYPE_CHECKING:
    import structlog
else:
    structlog = _structlog()

_HANDLER = "noema"


class _Stderr:
    """Whatever ``sys.stderr`` is when a line is written, not when logging was configured: a stream
    swapped in and closed later (a test runner capturing a command's output) must not make every
    later log line fail.

    Every record arrives as one ``write`` of the record and its newline (structlog's
    :class:`~structlog.WriteLogger`, the stdlib's :class:`~logging.StreamHandler`), passed on to
    the file in one piece: the processes of ``up`` share one log file (and a pod's containers one
    stream), and a record written in two pieces lets another process's record land between its
    text and its newline — two records on one line, which no log reader can parse."""

    def write(self, text: str) -> int:
        stream = sys.stderr
        binary = getattr(stream, "buffer", None)
        if binary is None:  # a text-only stand-in (a test runner's capture)
            return stream.write(text)
        stream.flush()  # whatever the text layer still holds goes first
        binary.write(text.encode(stream.encoding or "utf-8", "backslashreplace"))
        binary.flush()
        return len(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(
    fmt: str = "auto", level: str = "info", observe: structlog.types.Processor | None = None
) -> None:
    """Configure structlog and the stdlib root logger; ``fmt`` is auto, json or console.

    Records of stdlib loggers (uvicorn's, asyncio's, libraries') are rendered by the same renderer,
    so a process writes one format to its stream: a JSON log has no plain-text line in it.
    ``observe`` sees every logged event before it is rendered (the heartbeat's last-error tap).
    """
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer()
    )
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    stamp = structlog.processors.TimeStamper(fmt="iso", utc=True)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            *([observe] if observe is not None else []),
            stamp,
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.WriteLoggerFactory(file=_Stderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(_Stderr())
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, structlog.processors.add_log_level, stamp],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    handler.set_name(_HANDLER)
    root = logging.getLogger()
    # Ours replaces the one an earlier call installed; others (a test runner's capture) are kept.
    for old in [h for h in root.handlers if h.get_name() == _HANDLER]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(max(numeric, logging.WARNING))
    _log_crashes()


def _crashed(
    what: str, kind: type[BaseException], exc: BaseException | None, tb: TracebackType | None, **more: object
) -> None:
    structlog.get_logger("noema.crash").critical(what, exc_info=(kind, exc, tb), **more)


def _uncaught(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    # The interpreter then exits with status 1, as it does after printing a traceback.
    _crashed("uncaught exception: the process exits", kind, exc, tb)


def _uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    thread = args.thread.name if args.thread else None
    _crashed(
        "uncaught exception in a thread", args.exc_type, args.exc_value, args.exc_traceback, thread=thread
    )


def _unraisable(unraisable: sys.UnraisableHookArgs) -> None:
    what = unraisable.err_msg or "Exception ignored in"
    kind, exc, tb = unraisable.exc_type, unraisable.exc_value, unraisable.exc_traceback
    _crashed(what, kind, exc, tb, where=repr(unraisable.object))


def _log_crashes() -> None:
    """An exception nothing caught (at the top of the process, in a thread, in a finalizer) is
    logged as one record of the configured format, its traceback in the ``exception`` field, in
    place of the interpreter's plain-text traceback: a JSON log stays JSON to its last line."""
    sys.excepthook = _uncaught
    threading.excepthook = _uncaught_in_thread
    sys.unraisablehook = _unraisable
