"""structlog configuration: JSON when not on a terminal, readable on one (configured once per process)."""

from __future__ import annotations

import logging
import sys

import structlog

__all__ = ["configure_logging"]


class _Stderr:
    """Whatever ``sys.stderr`` is when a line is written, not when logging was configured: a stream
    swapped in and closed later (a test runner capturing a command's output) must not make every
    later log line fail."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(
    fmt: str = "auto", level: str = "info", observe: structlog.types.Processor | None = None
) -> None:
    """Configure structlog and the stdlib root logger; ``fmt`` is auto, json or console.

    ``observe`` sees every logged event before it is rendered (the heartbeat's last-error tap).
    """
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer()
    )
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            *([observe] if observe is not None else []),
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=_Stderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )
    logging.basicConfig(
        level=max(numeric, logging.WARNING), stream=sys.stderr, format="%(name)s: %(message)s"
    )
