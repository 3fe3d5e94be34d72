"""``noemactl api``: serve the operator HTTP API alone, and show the operator token."""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from .common import exit_code

if TYPE_CHECKING:  # the API's settings bring its middleware (structlog, prometheus_client)
    from noema_api.settings import ApiSettings

__all__ = ["api_app", "register"]

api_app = typer.Typer(help="The operator HTTP API.", no_args_is_help=True)


def _settings(ctx: typer.Context, data_dir: Path | None) -> ApiSettings:
    from noema.runtime.locate import NotRunning, locate
    from noema.runtime.settings import SettingsError
    from noema_api.settings import ApiSettings, tokens_path

    # `noemactl --data-dir X api …` names the folder before the sub-command.
    if data_dir is None:
        data_dir = ctx.find_root().params.get("data_dir")
    try:
        settings = ApiSettings.from_env()
    except SettingsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    base = settings.base if data_dir is None else replace(settings.base, data_dir=data_dir)
    if not base.external:
        # The running instance's data folder, found as every other command finds it (from another
        # working directory too: the registry of running instances).
        with contextlib.suppress(NotRunning):
            base = replace(base, data_dir=locate(base).data_dir)
    tokens_file = settings.tokens_file if not settings.generate_tokens else tokens_path(base, {})
    return replace(settings, base=base, tokens_file=tokens_file)


@api_app.command()
def serve(
    ctx: typer.Context,
    data_dir: Path | None = typer.Option(None, "--data-dir", help="Data folder of the running instance."),
    host: str | None = typer.Option(None, help="Interface to listen on (default: $NOEMA_API_HOST)."),
    port: int | None = typer.Option(None, help="Port (default: $NOEMA_API_PORT or 8765)."),
) -> None:
    """Run the API alone against the running instance's servers (found like every other command).

    Useful beside `noemactl up` on another port, or against external servers
    (NOEMA_NATS_URL / NOEMA_DATABASE_URL).

    Example: noemactl api serve --port 8800
    """
    import asyncio

    from noema.runtime.locate import NotRunning, locate
    from noema.runtime.logging import configure_logging
    from noema_api.__main__ import main

    settings = _settings(ctx, data_dir)
    base = replace(
        settings.base, api_host=host or settings.base.api_host, api_port=port or settings.base.api_port
    )
    configure_logging(base.log_format, base.log_level)
    try:
        locate(base)
    except NotRunning as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exit_code(exc.kind)) from None
    asyncio.run(main(replace(settings, base=base)))


@api_app.command()
def token(
    ctx: typer.Context,
    data_dir: Path | None = typer.Option(None, "--data-dir", help="Data folder of the instance."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (name, token, file)."),
) -> None:
    """Print the operator token (all workspaces) of the running instance, found like every other
    command; with none running, that of the data folder (./var or NOEMA_DATA_DIR), creating its
    tokens file on first use (and saying so on stderr).

    Example: curl -H "Authorization: Bearer $(noemactl api token)" http://127.0.0.1:8765/v1/memories
    """
    from noema_api.auth import TokensError, ensure_tokens_file, operator_token

    settings = _settings(ctx, data_dir)
    path = settings.tokens_file
    try:
        if settings.generate_tokens and ensure_tokens_file(path):
            typer.echo(
                f"note: no running Noema found; created {path.resolve()}, the tokens file that "
                f"`noemactl up` in {settings.base.data_dir.resolve()} will use",
                err=True,
            )
        name, value = operator_token(path)
    except TokensError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    if as_json:
        typer.echo(json.dumps({"name": name, "token": value, "file": str(path)}))
    else:
        typer.echo(value)


def register(app: typer.Typer) -> None:
    """Add ``noemactl api`` to ``noemactl``."""
    app.add_typer(api_app, name="api")
