"""noemactl — operate Noema: start it, feed it observations, inspect and replay its memory.

Every command finds the running instance from the same data folder / settings as `up`
(--data-dir or NOEMA_DATA_DIR, default ./var; or NOEMA_NATS_URL and NOEMA_DATABASE_URL for
external servers).
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import typer

from noema_events.vocabulary import CHANNELS, RELATIONS
from noema_sdk.limits import MAX_CONTENT

from . import lazy, params, search
from .argv import Utf8Group
from .common import (
    AsOfOption,
    DataDir,
    JsonOption,
    caller,
    completes,
    err,
    escape,
    fail,
    operator_name,
    out,
    print_json,
    progress_bar,
    read_memory,
    run,
    run_app,
    state,
    use,
)
from .render import worker_table

params.install()  # plain values converted without pydantic (a search's start-up, noema_cli.params)

root = typer.Typer(
    name="noemactl",
    cls=Utf8Group,
    help=__doc__,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)
memory_app = typer.Typer(help="Inspect long-term memory.", no_args_is_help=True)
root.add_typer(memory_app, name="memory")


def _version(given: bool) -> None:
    if given:
        from noema import __version__

        print(f"noemactl {__version__}")
        raise typer.Exit()


@root.callback()
def _main(
    data_dir: Path | None = DataDir(),
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_version, help="Print the version and exit."
    ),
) -> None:
    from noema.runtime.settings import Settings, SettingsError

    state.json = False  # until a command's own --json says otherwise
    state.as_of = None  # until a read given --as-of answers (one process runs several commands in tests)
    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        fail(str(exc), 2)
        raise AssertionError from None
    state.settings = replace(settings, data_dir=data_dir) if data_dir else settings
    # structlog and the event loop load when something logs, not for a command that logs nothing
    # (--help of a group, a keyword search; issue 32).
    from noema.runtime.logging import configure_logging_on_first_use

    configure_logging_on_first_use(settings.log_format, "warning")


@root.command()
def up(data_dir: Path | None = DataDir()) -> None:
    """Start Noema: embedded NATS + PostgreSQL (unless external URLs are set), all workers and the API.

    Runs in the foreground until Ctrl-C. Whatever exits (a worker, NATS, PostgreSQL) is restarted
    with backoff, never given up on. A second `up` reuses the data folder (and a PostgreSQL left
    running by an `up` that was killed). Exits 5 when another `up` runs in the data folder or the
    API port (NOEMA_API_PORT) is taken.

    Example: noemactl up --data-dir /var/lib/noema
    """
    from noema.runtime.logging import configure_logging
    from noema.runtime.settings import SettingsError

    from .supervisor import Supervisor

    use(data_dir)
    configure_logging(state.settings.log_format, state.settings.log_level)
    try:
        code = Supervisor(state.settings).run()
    except SettingsError as exc:
        fail(str(exc), 2)
        return
    except RuntimeError as exc:
        fail(str(exc))
        return
    raise typer.Exit(code)


@root.command()
def observe(
    text: str = typer.Argument(
        ...,
        help=f"What was observed, at most {MAX_CONTENT:,} characters; - reads it from standard input "
        "(UTF-8, one final newline dropped).",
    ),
    workspace: str = typer.Option(..., "--workspace", "-w", help="Workspace (tenant)."),
    mind: str = typer.Option(..., "--mind", "-m", help="Mind/agent the observation belongs to."),
    channel: str = typer.Option(
        "user",
        "--channel",
        "-c",
        help="operator, user, system, tool, source or low.",
        autocompletion=completes(CHANNELS),
    ),
    salience: float | None = typer.Option(None, help="How much it stands out, 0..1 (estimated when absent)."),
    importance: float | None = typer.Option(None, help="How much it matters, 0..1."),
    observation_id: str | None = typer.Option(
        None, "--id", help="Observation id (retries with the same id are stored once)."
    ),
    subject: list[str] | None = typer.Option(
        None,
        "--subject",
        "-s",
        help="Who or what it is about, an opaque key such as person:4711 (repeat): "
        "`noemactl erase --subject` erases it by that key (docs/privacy.md).",
    ),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Publish an observation to the observation stream.

    Example: noemactl observe "the deploy key rotates on Fridays" --workspace acme --mind ops

    Example: git log -1 --format=%B | noemactl observe - -w acme -m ops
    """
    use(data_dir)
    from noema.client import InvalidObservation, build_observation

    if text == "-":
        text = _stdin_text()
    if len(text) > MAX_CONTENT:
        fail(
            f"the observation is {len(text):,} characters; at most {MAX_CONTENT:,} are accepted: "
            "shorten it, or split it into several observations",
            2,
        )
        return

    try:
        obs = build_observation(
            text,
            workspace=workspace,
            mind=mind,
            channel=channel,
            salience=salience,
            importance=importance,
            observation_id=observation_id,
            subjects=subject or (),
        )
    except InvalidObservation as exc:
        fail(f"invalid observation: {exc}", 2)
        return
    seq, duplicate = run_app(lambda app: app.publish_observation(obs))
    if as_json:
        print_json({"observation_id": obs.id, "seq": seq, "duplicate": duplicate})
    elif duplicate:
        out.print(
            f"observation {obs.id} was already stored at seq {seq}; this one was not stored again "
            "(ids are global: give a new --id for a new observation)"
        )
    else:
        out.print(f"observation {obs.id} stored at seq {seq}")


def _stdin_text() -> str:
    """Standard input as text (``observe -``): UTF-8, without the one newline that ends it."""
    raw = sys.stdin.buffer.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        fail(f"standard input is not UTF-8 (byte {exc.start}): send the observation as UTF-8 text", 2)
    return text.removesuffix("\n").removesuffix("\r")


@memory_app.command("search")
def memory_search(
    query: str = typer.Argument(..., help="What to look for."),
    workspace: str | None = typer.Option(None, "--workspace", "-w", help="Workspace (default: all)."),
    mode: str = typer.Option(
        "hybrid",
        help="keyword (full text), vector (embeddings alone), semantic (full text and vectors fused by "
        "reciprocal rank) or hybrid (every voice, explained; the default).",
        autocompletion=completes(search.MODES),
    ),
    profile: str = typer.Option(
        "hybrid",
        help="With --mode hybrid: hybrid (voices + MMR) or weighted (the plain weighted fusion).",
        autocompletion=completes(search.PROFILES),
    ),
    mind: str | None = typer.Option(None, "--mind", "-m", help="Only memories of this mind."),
    kind: list[str] | None = search.Choices("kind", "Memory kind(s)."),
    epistemic_kind: list[str] | None = search.Choices("epistemic-kind", "Epistemic kind(s)."),
    domain: list[str] | None = typer.Option(None, "--domain", help="Domain(s), e.g. ops or repo:web/ci."),
    status: list[str] | None = search.Choices(
        "status", "Status(es) (default: active; all with --include-inactive)."
    ),
    since: datetime | None = search.Instant("since", "Only what happened at or after this time."),
    until: datetime | None = search.Instant("until", "Only what happened before this time."),
    repo: str | None = typer.Option(None, help="Current repository: its memories rank first."),
    strict: bool = typer.Option(False, help="Keyword syntax of web search (quotes, OR, -word)."),
    include_inactive: bool = typer.Option(False, help="Also retracted, superseded, archived, expired."),
    limit: int = typer.Option(10, min=1, max=100),
    explain: bool = typer.Option(False, "--explain", help="Show every score component."),
    agent: str | None = typer.Option(None, "--agent", "-a", help="Search as this agent (needs --workspace)."),
    role: str | None = typer.Option(
        None, "--role", "-r", help="Search with this role's grants (strict mode)."
    ),
    as_of: str | None = AsOfOption(),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Search memory, best first, each result with its origin event (and with --explain, its score).

    Example: noemactl memory search "deploy key" --workspace acme --explain
    """
    from noema.application.memory_reads import SearchOptions

    use(data_dir)
    options = SearchOptions(
        mode=mode,
        profile=profile,
        limit=limit,
        mind=mind,
        kinds=tuple(kind or ()),
        epistemic_kinds=tuple(epistemic_kind or ()),
        domains=tuple(domain or ()),
        statuses=tuple(status or ()),
        since=since,
        until=until,
        repo=repo,
        strict=strict,
        include_inactive=include_inactive,
    )
    if (agent or role) and not workspace:
        fail("--agent/--role search inside one workspace: give --workspace too", 2)
    who = caller(workspace, agent, role) if (agent or role) and workspace else None

    found, note = read_memory(
        lambda app: app.search(who, query, options, workspace), workspace, lambda r: not r.results, as_of
    )
    response = dataclasses.asdict(found)
    if as_json:
        print_json(response)
        return
    for voice, why in response["unavailable"].items():
        out.print(escape(f"note: the {voice} voice was not heard ({why})"), highlight=False)
    if not response["results"]:
        out.print(f"no matching memories{note}")
        return
    out.print(search.results_table(response["results"], explain, repo))
    if explain:
        for line in search.explanations(response["results"], repo):
            out.print(line, highlight=False, markup=False, soft_wrap=True)
        timings = ", ".join(f"{k} {v:.1f} ms" for k, v in response["timings_ms"].items())
        if response.get("intent"):
            weights = ", ".join(f"{k} {v:.2f}" for k, v in response["weights"].items())
            out.print(f"intent: {response['intent']} (voice weights: {weights}); timings: {timings}")
        else:
            out.print(f"mode: {response['mode']}; timings: {timings}")


@memory_app.command("relate")
def memory_relate(
    from_id: str = typer.Argument(..., help="Source memory id (or unique prefix)."),
    to_id: str = typer.Argument(..., help="Target memory id (or unique prefix)."),
    relation: str = typer.Option(
        ...,
        "--relation",
        "-r",
        help="related_to, supports, contradicts, derived_from, "
        "supersedes, part_of, caused_by or episodic_next.",
        autocompletion=completes(RELATIONS),
    ),
    confidence: float = typer.Option(1.0, min=0.0, max=1.0, help="Confidence in the edge."),
    source: str = typer.Option("operator", help="Where the edge comes from."),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Relate two memories of the same mind (the database refuses edges across minds).

    Example: noemactl memory relate 3f0c1a2b 9a0d822b --relation supports
    """
    use(data_dir)
    actor = f"operator:{operator_name()}"
    rel_id = run_app(
        lambda app: app.relate(from_id, to_id, relation, confidence=confidence, source=source, actor=actor)
    )
    if as_json:
        print_json({"relationship_id": rel_id})
    else:
        out.print(f"relationship {rel_id} published")


@memory_app.command("embed-missing")
def memory_embed_missing(
    batch: int = typer.Option(64, min=1, max=1024, help="Texts per embedding call."),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Backfill: embed every memory that has no vector for the current model (NOEMA_EMBEDDER).

    Example: noemactl memory embed-missing
    """
    use(data_dir)
    if state.settings.embedder == "none":
        fail("no embedder configured (NOEMA_EMBEDDER=none)", 2)
    with progress_bar("embedding", disable=as_json) as report:
        started = time.perf_counter()
        done, model = run_app(lambda app: app.embed_missing(batch=batch, progress=report))
        elapsed = time.perf_counter() - started
    result = {
        "embedded": done,
        "model": model,
        "seconds": round(elapsed, 2),
        "per_s": done / elapsed if elapsed > 0 else 0.0,
    }
    if as_json:
        print_json(result)
    else:
        out.print(f"embedded {result['embedded']} memories with {result['model']} ({result['per_s']:.1f}/s)")


@root.command()
def preamble(
    task: str = typer.Argument(..., help="The task description the agent is dispatched with."),
    workspace: str = typer.Option(..., "--workspace", "-w"),
    agent: str = typer.Option(
        ..., "--agent", "-a", help="The agent being dispatched (its notes are included)."
    ),
    role: str = typer.Option(
        "agent", "--role", "-r", help="The agent's role (its grants apply in strict mode)."
    ),
    repo: str | None = typer.Option(None, help="Current repository: its facts rank first."),
    as_of: str | None = AsOfOption(),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Print the dispatch preamble: active policies, the agent's notes, keyword-matched facts.

    Example: noemactl preamble "rotate the deploy key for the billing service" -w acme -a ops
    """
    from noema.application.preamble import MIN_TASK_CHARS

    use(data_dir)
    who = caller(workspace, agent, role)
    result = dataclasses.asdict(run_app(lambda app: app.preamble(who, task, repo), as_of))
    if as_json:
        print_json(result)
    else:
        out.print(result["text"], highlight=False, markup=False)
        if len(task.strip()) < MIN_TASK_CHARS:
            err.print(
                f"note: no facts are matched for a task under {MIN_TASK_CHARS} characters (requirements "
                "§8): describe the task in a sentence to get the facts that match it",
                highlight=False,
            )


@root.command("decay-tick")
def decay_tick(
    workspace: list[str] | None = typer.Option(None, "--workspace", "-w", help="Only these workspaces."),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Publish a decay tick now: the memories that faded below the threshold or passed valid_until
    in the last NOEMA_DECAY_INTERVAL (the decay worker does this every interval; a tick changes no
    activation, which reads compute at their time).

    Example: noemactl decay-tick --workspace acme
    """
    use(data_dir)
    ticked = run_app(lambda app: app.decay_tick(workspace or None))
    if as_json:
        print_json({"workspaces": ticked})
    else:
        out.print(f"decay tick published for {len(ticked)} workspace(s): {', '.join(ticked) or '-'}")


@root.command()
def prepare(
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Apply the database migrations and create or update the streams: what `up` does first.

    With external servers (a Kubernetes Job, a one-shot compose service) run it once before the
    workers, with the operator's NATS credentials: the workers' own identities may read the streams
    but not create or change them. Idempotent.

    Example: NOEMA_NATS_USER=noema-operator NOEMA_NATS_PASSWORD=... noemactl prepare
    """
    from .supervisor import prepare as prepare_servers

    use(data_dir)
    run(prepare_servers)
    if as_json:
        print_json({"prepared": True})
    else:
        out.print("migrations applied; streams ready")


def _workers() -> tuple[str, ...]:
    """The kinds of process ``status --expect`` takes (the settings load when completing)."""
    from noema.runtime.settings import WORKERS

    return WORKERS


@root.command()
def status(
    expect: list[str] | None = typer.Option(
        None,
        "--expect",
        "-e",
        help="Check only this kind of process (repeatable; default: NOEMA_STATUS_WORKERS, else all): "
        "attend, projector, embed, retrieve, decay, conflicts, api or service.",
        autocompletion=completes(_workers),
    ),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Exit 0 when every part of Noema works; otherwise print a FAIL line per problem and exit 1
    (exit 3 when the only parts not working yet are starting: just started, taking their claim).

    Checks NATS and the streams, PostgreSQL, the projector's lag, and per process (attend, projector,
    embed, retrieve, decay, conflicts, api, agent service) a fresh heartbeat (running and connected),
    its last error, and that its durable consumer keeps up: not stalled (work waits, nothing is
    acknowledged for NOEMA_STALL_AFTER, or no live process), not lagging (backlog over NOEMA_MAX_LAG),
    not behind (a backlog older than a minute that would take over NOEMA_MAX_DRAIN to work off).
    With NOEMA_EMBEDDER=openai:<URL>, also that the embedding server answers (named while it does not).
    Then a table per worker: live processes, backlog (waiting + in flight), rate (acknowledged per
    second over the last minute), drain estimate and state; --json gives it as "workers".
    Thresholds: NOEMA_HEARTBEAT_STALE (20 s), NOEMA_STALL_AFTER (60 s), NOEMA_MAX_LAG (10000),
    NOEMA_MAX_DRAIN (600 s; 0: off). The same checks answer GET /readyz. A probe for one process
    gives --expect with its kind, so that it does not wait for the others.

    Example: noemactl status   (or: noemactl status --expect projector --json)
    """
    from noema.runtime.settings import WORKERS

    use(data_dir)
    if expect:
        unknown = sorted(set(expect) - set(WORKERS))
        if unknown:
            fail(f"--expect {', '.join(unknown)}: not a process kind; use one of {', '.join(WORKERS)}", 2)
        state.settings = replace(state.settings, status_workers=tuple(dict.fromkeys(expect)))
    from .commands import status as system_status

    report = run(system_status)
    if as_json:
        print_json(report)
    else:
        for check in report["checks"]:
            mark = "ok" if check["ok"] else "wait" if check["state"] == "starting" else "FAIL"
            colour = {"ok": "green", "wait": "yellow", "FAIL": "red"}[mark]
            line = escape(f"{check['name']}: {check['detail']}")  # details quote errors, brackets and all
            out.print(f"[{colour}]{mark}[/] {line}", highlight=False)
        if report["workers"]:
            out.print(worker_table(report["workers"]))
        failed = sum(not c["ok"] for c in report["checks"])
        if report["starting"]:
            out.print(f"starting: {failed} part(s) taking their claim", highlight=False)
        elif failed:
            out.print(f"{failed} problem(s)", highlight=False)
    if report["starting"]:
        raise typer.Exit(3)
    if not report["healthy"]:
        raise typer.Exit(1)


def _register(module: str, *on: typer.Typer) -> Callable[[], None]:
    """Import ``noema_cli.<module>`` and add its commands to ``on`` (its ``register``)."""

    def load() -> None:
        importlib.import_module(f"{__package__}.{module}").register(*on)

    load.__qualname__ = f"noema_cli.{module}.register"
    return load


# The command modules, each imported when one of its commands is looked up (noema_cli.lazy), in
# the order they are listed: the names each one registers are declared here, and checked when it
# loads. `noemactl memory search` imports none of them (issue 32: a keyword search's start-up).
lazy.later(_register("api_cmd", root), groups={root: ("api",)})
lazy.later(_register("dlq_cmd", root), groups={root: ("dlq",)})
lazy.later(_register("agent_cmd", root), groups={root: ("agent",)})
lazy.later(
    _register("knowledge_cmd", root),
    commands={root: ("domains", "conflicts", "remember", "consolidate", "harmonize")},
    groups={root: ("fact", "policy", "grant", "notes", "wm", "decisions")},
)
lazy.later(_register("memory_cmd", memory_app), commands={memory_app: ("list", "timeline", "show")})
lazy.later(_register("replay_cmd", root), commands={root: ("replay",)})
lazy.later(_register("projection_cmd", root), groups={root: ("projection",)})
lazy.later(
    _register("operator_cmd", root, memory_app),
    commands={memory_app: ("retract", "archive", "restore", "correct", "add")},
)
lazy.later(_register("audit_cmd", root), commands={root: ("why",)}, groups={root: ("audit",)})
lazy.later(_register("erase_cmd", root), commands={root: ("erase", "compact")})
lazy.later(_register("mcp_cmd", root), groups={root: ("mcp",)})


def __getattr__(name: str) -> typer.Typer:
    """``app``: the whole tree as typer sees it (``typer.main.get_command(app)``, ``typer.testing``),
    every command module loaded and registered."""
    if name == "app":
        lazy.load_all()
        return root
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Entry point of the ``noemactl`` script: the command tree, each command converted when the
    command line names it (:mod:`noema_cli.lazy`)."""
    lazy.command(root)()


if __name__ == "__main__":
    sys.exit(main())  # type: ignore[func-returns-value]
