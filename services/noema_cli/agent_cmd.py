"""``noemactl agent``: the NATS credentials of agents on the embedded server (add, list, remove).

An agent's identity may publish its own observations, call its own agent endpoints and read its
own replies, nothing else (docs/security.md). A running server picks a change up at once (config
reload); a stopped one at its next start.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from .common import DataDir, JsonOption, fail, out, print_json, state, use

if TYPE_CHECKING:  # the credential store, the names and the server's files: loaded by an agent command
    from noema.runtime.credentials import AgentRecord, CredentialStore

__all__ = ["agent_app", "register"]

agent_app = typer.Typer(help="Agents' NATS credentials on the embedded server.", no_args_is_help=True)


def _data_dir() -> Path:
    if state.settings.nats_url is not None:
        fail(
            "NOEMA_NATS_URL names an external NATS server: its users are configured there, not by "
            "noemactl (docs/security.md lists what an agent's user may do)",
            2,
        )
    from noema.runtime.embedded import resolve_data_dir

    try:
        return resolve_data_dir(state.settings.data_dir)
    except RuntimeError as exc:
        fail(str(exc), 2)


def _store(folder: Path) -> CredentialStore:
    from noema.runtime.credentials import CredentialStore

    return CredentialStore(folder)


def _check(kind: str, value: str) -> None:
    from noema_sdk.protocol import NAME_PATTERN

    # The names become NATS subject tokens and part of the user name.
    if not re.match(NAME_PATTERN, value):
        fail(f"--{kind} {value!r}: use 1-64 letters, digits, '_' or '-'", 2)


def _described(record: AgentRecord, url: str | None) -> dict[str, Any]:
    from noema.runtime.identities import inbox_prefix
    from noema.topology import Topology

    topology = Topology(record.prefix)
    return {
        "workspace": record.workspace,
        "agent": record.agent,
        "role": record.role,
        "user": record.user,
        "password": record.password,
        "inbox_prefix": inbox_prefix(record.user),
        "url": url,
        "prefix": topology.prefix,
        "observation_subject": topology.observation_subject(record.workspace, record.agent),
        "request_subjects": f"{topology.prefix}.agent.{record.workspace}.{record.role}.{record.agent}.>",
    }


def _running_url(data_dir: Path) -> str | None:
    from noema.runtime.locate import read_state

    running = read_state(data_dir)
    url = running.get("nats_plain_url") if running else None
    return str(url) if url else None


async def _accepted(url: str, record: AgentRecord, timeout: float = 10.0) -> bool:
    # A reload is asynchronous: wait (bounded) until the server takes the new password, so the
    # credentials printed work the moment they are printed.
    from noema.adapters.jetstream import credentials_accepted

    return await credentials_accepted(url, record.user, record.password, timeout)


def _apply(data_dir: Path) -> bool:
    """Rewrite the server's config; True when a running server reloaded it."""
    from noema.runtime.cluster import reload_embedded_nats

    return reload_embedded_nats(data_dir, prefix=state.settings.prefix, partitions=state.settings.partitions)


@agent_app.command("add")
def add(
    workspace: str = typer.Option(..., "--workspace", "-w", help="The agent's workspace."),
    agent: str = typer.Option(..., "--agent", "-a", help="The agent's name (its mind)."),
    role: str = typer.Option("agent", "--role", "-r", help="Its role (the service applies its grants)."),
    as_json: bool = JsonOption(),
    data_dir: Path | None = DataDir(),
) -> None:
    """Create (or replace, with a new password) an agent's NATS credentials and print them.

    The agent may publish observations on <prefix>.obs.WORKSPACE.AGENT, call
    <prefix>.agent.WORKSPACE.ROLE.AGENT.<operation> and read replies below its inbox prefix; nothing
    else. Give it the user, password, inbox prefix and URL printed here (docs/sdk.md).

    Example: noemactl agent add --workspace acme --agent alice --role engineer
    """
    import asyncio  # not at the top, as nats below: `noemactl --help` loads neither

    use(data_dir)
    for kind, value in (("workspace", workspace), ("agent", agent), ("role", role)):
        _check(kind, value)
    folder = _data_dir()
    record = _store(folder).add_agent(workspace, agent, role, state.settings.prefix)
    url = _running_url(folder)
    reloaded = _apply(folder)
    if reloaded and url and not asyncio.run(_accepted(url, record)):
        fail(f"the running NATS server did not take {record.user}'s credentials; see {folder / 'nats.log'}")
    info = _described(record, url)
    if as_json:
        print_json(info)
        return
    for key in ("user", "password", "inbox_prefix", "url", "observation_subject", "request_subjects"):
        out.print(f"{key}: {info[key] or '(start Noema with `noemactl up`; the URL is in noema.json)'}")
    if not reloaded:
        out.print("Noema is not running: the credentials take effect at the next `noemactl up`.")


@agent_app.command("list")
def list_agents(as_json: bool = JsonOption(), data_dir: Path | None = DataDir()) -> None:
    """List the agents that have NATS credentials (without their passwords).

    Example: noemactl agent list --json
    """
    use(data_dir)
    folder = _data_dir()
    rows = [
        {k: v for k, v in _described(r, None).items() if k not in ("password", "url")}
        for r in _store(folder).agents()
    ]
    if as_json:
        print_json(rows)
        return
    if not rows:
        out.print("no agent credentials yet: add one with `noemactl agent add`")
    for row in rows:
        out.print(f"{row['workspace']}/{row['agent']} (role {row['role']}): user {row['user']}")


@agent_app.command("remove")
def remove(
    workspace: str = typer.Option(..., "--workspace", "-w", help="The agent's workspace."),
    agent: str = typer.Option(..., "--agent", "-a", help="The agent's name."),
    as_json: bool = JsonOption(),
    data_dir: Path | None = DataDir(),
) -> None:
    """Revoke an agent's NATS credentials; a running server disconnects it at once.

    Example: noemactl agent remove --workspace acme --agent alice
    """
    use(data_dir)
    folder = _data_dir()
    if not _store(folder).remove_agent(workspace, agent):
        fail(f"no credentials for agent {agent!r} in workspace {workspace!r} (see `noemactl agent list`)", 2)
    reloaded = _apply(folder)
    if as_json:
        print(json.dumps({"removed": f"{workspace}/{agent}", "reloaded": reloaded}))
        return
    out.print(
        f"removed {workspace}/{agent}" + ("" if reloaded else " (takes effect at the next `noemactl up`)")
    )


def register(app: typer.Typer) -> None:
    """Add ``noemactl agent`` to ``noemactl``."""
    app.add_typer(agent_app, name="agent")
