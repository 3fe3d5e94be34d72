"""structlog configuration: JSON when not on a terminal, readable on one (configured once per process).

A process that may well log nothing (``noemactl memory search``) configures it on first use
(:func:`configure_logging_on_first_use`): structlog, and the event loop its stdlib module imports,
load only when something logs or imports structlog (issue 32: a keyword search's start-up)."""

from __future__ import annotations

import contextlib
import importlib.machinery
import logging
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    import importlib.abc

    import structlog

__all__ = ["configure_logging", "configure_logging_on_first_use"]


@contextlib.contextmanager
def _without_rich() -> Iterator[None]:
    """rich hidden ("not installed") while structlog loads: without rich's traceback and
    pretty-printing support (which bring pygments and attrs, about 0.02 s of CPU on every start).
    structlog loads them when rich is installed (typer requires it), for its console renderer's
    exceptions and for ``show_locals`` tracebacks; here ``format_exc_info`` renders every exception
    as plain text before the renderer sees it, so neither is used. rich itself too: structlog.dev
    imports rich.console before it finds no rich.traceback, which a command printing JSON (`memory
    search --json`) would otherwise pay for (issue 32). Whoever imports structlog first decides."""
    hidden = [name for name in ("rich", "rich.traceback", "rich.pretty") if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # "not installed", for this import only
    try:
        yield
    finally:
        for name in hidden:
            if sys.modules.get(name, ...) is None:
                del sys.modules[name]


def _structlog() -> None:
    """Load structlog without rich (:func:`_without_rich`), unless something loaded it already."""
    if "structlog" not in sys.modules:
        with _without_rich():
            import structlog  # noqa: F401


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
    _pending.cancel()
    _structlog()  # loaded here without rich, unless something loaded it already
    import structlog

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
    _install(handler, numeric)


def _install(handler: logging.Handler, numeric: int) -> None:
    """Make ``handler`` the root logger's handler of ours at ``numeric``'s level (at least warnings),
    and log crashes. Ours replaces the one an earlier call installed; others (a test runner's
    capture) are kept."""
    handler.set_name(_HANDLER)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(max(numeric, logging.WARNING))
    _log_crashes()


def _crashed(
    what: str, kind: type[BaseException], exc: BaseException | None, tb: TracebackType | None, **more: object
) -> None:
    _pending.apply()  # a crash is logged as configured, whether or not anything logged before
    _structlog()
    import structlog

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


class _Pending:
    """The configuration :func:`configure_logging_on_first_use` postponed, applied by whichever
    comes first: a stdlib record reaching the root logger (:class:`_FirstRecord`), an import of
    structlog anywhere (:class:`_OnImport`), or a crash; :func:`configure_logging` cancels it."""

    def __init__(self) -> None:
        self._configure: Callable[[], None] | None = None
        self._finder: _OnImport | None = None

    def defer(self, configure: Callable[[], None]) -> None:
        self.cancel()
        self._configure = configure
        self._finder = _OnImport()
        sys.meta_path.insert(0, self._finder)

    def cancel(self) -> None:
        self._configure = None
        if self._finder is not None:
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(self._finder)
            self._finder = None

    def apply(self) -> None:
        configure = self._configure
        if configure is not None:
            configure()  # calls configure_logging, which cancels it


_pending = _Pending()


class _OnImport:
    """Finds structlog as the path finder does, with a loader that applies the pending
    configuration as soon as structlog is loaded: a module that imports it may log at once. (A
    finder and a loader by their methods, as the import system takes them: importlib.abc, their
    base classes, would load importlib.resources too.)"""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "structlog":
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = cast("importlib.abc.Loader", _ThenConfigure(spec.loader))
        return spec


class _ThenConfigure:
    """structlog's own loader, rich hidden while it runs (:func:`_without_rich`), then the pending
    configuration applied."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        with _without_rich():
            self._loader.exec_module(module)
        _pending.apply()


class _FirstRecord(logging.Handler):
    """The root logger's handler until something logs: the first record applies the pending
    configuration, which replaces this handler, and goes to the handler that replaced it."""

    def emit(self, record: logging.LogRecord) -> None:
        _pending.apply()
        for handler in logging.getLogger().handlers:
            ours = handler.get_name() == _HANDLER and not isinstance(handler, _FirstRecord)
            if ours and record.levelno >= handler.level:
                handler.handle(record)


def configure_logging_on_first_use(fmt: str = "auto", level: str = "info") -> None:
    """:func:`configure_logging`, postponed until something logs: the first stdlib record, the first
    import of structlog (every module that logs through it imports it) or a crash configures it
    exactly as it would have been, before that record is rendered. A command that logs nothing
    loads neither structlog nor the event loop for it (issue 32: a keyword search's start-up)."""
    if "structlog" in sys.modules:
        configure_logging(fmt, level)
        return
    _pending.defer(lambda: configure_logging(fmt, level))
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    _install(_FirstRecord(), numeric)
