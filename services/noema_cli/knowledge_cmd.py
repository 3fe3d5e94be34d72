"""``noemactl`` commands of workspace knowledge: facts, policies, grants, domains, conflicts, notes,
working memory, the hot tier, consolidate, harmonize and meeting decisions.

Without ``--agent``/``--role`` a command acts as the operator running the CLI (operators may do
everything); with them it acts as that agent, under that role's grants.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from noema_events.vocabulary import VERACITIES

from . import search
from .common import (
    AsOfOption,
    DataDir,
    JsonOption,
    caller,
    clip,
    completes,
    err,
    out,
    print_json,
    run_app,
    run_read,
    use,
)
from .render import erased_content

if TYPE_CHECKING:  # rich: loaded by what prints a table, not by --help or --json
    from rich.table import Table

__all__ = ["register"]

fact_app = typer.Typer(help="Facts: semantic memories of a domain and topic.", no_args_is_help=True)
policy_app = typer.Typer(help="Policies: normative rules every dispatch receives.", no_args_is_help=True)
grant_app = typer.Typer(help="Access grants (role, domain) → none | read | write.", no_args_is_help=True)
notes_app = typer.Typer(help="Agents' private notes.", no_args_is_help=True)
wm_app = typer.Typer(help="Working memory: what a mind is holding.", no_args_is_help=True)
decisions_app = typer.Typer(help="Meeting decisions (facts of the decisions domain).", no_args_is_help=True)


def Workspace() -> Any:
    """The ``--workspace`` option (required)."""
    return typer.Option(..., "--workspace", "-w", help="Workspace (tenant).")


def Agent() -> Any:
    """The ``--agent`` option."""
    return typer.Option(None, "--agent", "-a", help="Act as this agent (default: as the operator).")


def Role() -> Any:
    """The ``--role`` option."""
    return typer.Option(None, "--role", "-r", help="The agent's role (its grants apply).")


def Repo() -> Any:
    """The ``--repo`` option."""
    return typer.Option(None, "--repo", help="Repository slug: a repository-scoped domain / ranks first.")


def _when(value: Any) -> str:
    return value.isoformat(timespec="seconds") if isinstance(value, datetime) else str(value or "")


def _none(rows: Any) -> bool:
    """Whether a read found nothing (then a typo in the workspace's name is worth a word)."""
    return not rows


def _show(rows: list[dict[str, Any]], columns: list[str], empty: str) -> None:
    out.print(_table(rows, columns) if rows else empty)


def _table(rows: list[dict[str, Any]], columns: list[str], clip_width: int = 60) -> Table:
    from rich.table import Table

    table = Table(*columns)
    for r in rows:
        table.add_row(
            *(
                clip(str(r.get(c) or ""), clip_width)
                if c in ("content", "rule", "winner_content", "loser_content")
                else (str(r.get(c))[:8] if c.endswith("id") and r.get(c) else _when(r.get(c)))
                for c in columns
            )
        )
    return table


# --- facts --------------------------------------------------------------------------------------


@fact_app.command("propose")
def fact_propose(
    content: str = typer.Argument(..., help="The fact."),
    workspace: str = Workspace(),
    domain: str = typer.Option(..., "--domain", "-d", help="Domain, e.g. ops or repo:billing/architecture."),
    topic: str = typer.Option(..., "--topic", "-t", help="Topic within the domain (the fact's slot)."),
    agent: str | None = Agent(),
    role: str | None = Role(),
    repo: str | None = Repo(),
    veracity: str = typer.Option(
        "stated", help="stated, tool, imported or inferred.", autocompletion=completes(VERACITIES)
    ),
    memory_type: str = typer.Option(
        "fact", "--type", help="Memory type (decay class), e.g. fact, convention."
    ),
    valid_until: datetime | None = search.Instant("valid-until", "Expiry: the fact stops being true then."),
    source: list[str] | None = typer.Option(None, "--source", help="Source observation id(s)."),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Propose a fact. The same fact again raises its confidence; a contradicting one is decided by the
    conflicts worker (see `noemactl conflicts`).

    Example: noemactl fact propose "Deploys happen on Fridays" -w acme -d ops -t deploy-day
    """
    use(data_dir)
    who = caller(workspace, agent, role)
    result = run_app(
        lambda app: app.knowledge.propose_fact(
            who,
            domain,
            topic,
            content,
            veracity=veracity,
            memory_type=memory_type,
            source_observation_ids=source or (),
            repo=repo,
            valid_until=valid_until,
        )
    )
    if as_json:
        print_json(vars(result))
    else:
        out.print(f"fact {result.memory_id} {result.outcome} in {result.domain} / {result.topic}")
    if valid_until is not None and valid_until <= datetime.now(UTC):
        err.print(
            "note: --valid-until is already past: the fact is recorded as expired, so it is not listed, "
            "searched or put in preambles (`fact list --all` shows it)"
        )


@fact_app.command("supersede")
def fact_supersede(
    old_id: str = typer.Argument(..., help="The active fact to replace (its id or a unique prefix)."),
    content: str = typer.Argument(..., help="The new content."),
    workspace: str = Workspace(),
    reason: str = typer.Option("", help="Why."),
    veracity: str = typer.Option(
        "stated", help="stated, tool, imported or inferred.", autocompletion=completes(VERACITIES)
    ),
    agent: str | None = Agent(),
    role: str | None = Role(),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Replace a fact explicitly (it stays, superseded, with a conflict row naming the rule `explicit`).
    The id may be shortened to a unique prefix of at least 6 characters (`fact list` shows 8).

    Example: noemactl fact supersede 3f0c1a2b "Deploys happen on Tuesdays" -w acme
    """
    use(data_dir)
    who = caller(workspace, agent, role)

    async def work(app: Any) -> tuple[str, Any]:
        full = await app.knowledge.resolve_fact_id(who, old_id)
        return full, await app.knowledge.supersede_fact(who, full, content, reason=reason, veracity=veracity)

    superseded, result = run_app(work)
    if as_json:
        print_json({**vars(result), "superseded": superseded})
    else:
        out.print(f"fact {result.memory_id} supersedes {superseded}")


@fact_app.command("list")
def fact_list(
    workspace: str = Workspace(),
    domain: str | None = typer.Option(
        None, "--domain", "-d", help="Only this domain (name or repo:<slug>/name)."
    ),
    topic: str | None = typer.Option(None, "--topic", "-t", help="Only this topic."),
    repo: str | None = Repo(),
    include_inactive: bool = typer.Option(
        False, "--all", help="Also expired, superseded, retracted and archived facts."
    ),
    agent: str | None = Agent(),
    role: str | None = Role(),
    limit: int = typer.Option(100, min=1, max=1000),
    as_of: str | None = AsOfOption(),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """List facts (in strict mode, those the role may read).

    Example: noemactl fact list -w acme -d ops
    """
    use(data_dir)
    who = caller(workspace, agent, role)
    rows, note = run_read(
        lambda app: app.knowledge.list_facts(
            who, domain=domain, topic=topic, repo=repo, include_inactive=include_inactive, limit=limit
        ),
        workspace,
        _none,
        as_of,
    )
    if as_json:
        print_json(rows)
        return
    columns = ["id", "domain", "topic", "content", "agent", "veracity", "confidence", "mention_count"]
    _show([_fact_row(r) for r in rows], [*columns, "status", "valid_until"], f"no facts{note}")


def _fact_row(row: dict[str, Any]) -> dict[str, Any]:
    """A fact as the table shows it: one an operator entered (`memory add`, POST /v1/memories) has
    no proposing agent and no veracity, and says so; no topic is a dash."""
    operator = not row.get("agent") and row.get("veracity") is None
    return row | {
        "agent": row.get("agent") or ("(operator entry)" if operator else "-"),
        "veracity": row.get("veracity") or ("operator" if operator else "-"),
        "topic": row.get("topic") or "-",
    }


# --- policies -----------------------------------------------------------------------------------


@policy_app.command("propose")
def policy_propose(
    rule: str = typer.Argument(..., help="The rule."),
    workspace: str = Workspace(),
    domain: str = typer.Option(..., "--domain", "-d", help="The domain (name, or repo:<slug>/name)."),
    repo: str | None = Repo(),
    required_role: str | None = typer.Option(None, help="Advisory: the role the rule is meant for."),
    agent: str | None = Agent(),
    role: str | None = Role(),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Propose a policy (needs write on the domain; exit 3 when the role lacks it).

    Example: noemactl policy propose "Never deploy on Fridays" -w acme -d ops
    """
    use(data_dir)
    who = caller(workspace, agent, role)
    policy_id = run_app(
        lambda app: app.knowledge.propose_policy(who, domain, rule, repo=repo, required_role=required_role)
    )
    if as_json:
        print_json({"policy_id": policy_id})
    else:
        out.print(f"policy {policy_id} proposed")


@policy_app.command("supersede")
def policy_supersede(
    policy_id: str = typer.Argument(..., help="The active policy (its id or a unique prefix)."),
    rule: str | None = typer.Argument(None, help="The new rule (omit to deactivate the policy)."),
    workspace: str = Workspace(),
    reason: str = typer.Option("", help="Why."),
    agent: str | None = Agent(),
    role: str | None = Role(),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Replace a policy with a new rule, or deactivate it. The id may be shortened to a unique prefix
    of at least 6 characters (`policy list` shows 8).

    Example: noemactl policy supersede 3f0c1a2b "Deploy Monday to Thursday" -w acme
    """
    use(data_dir)
    who = caller(workspace, agent, role)

    async def work(app: Any) -> tuple[str, str | None]:
        full = await app.knowledge.resolve_policy_id(who, policy_id)
        return full, await app.knowledge.supersede_policy(who, full, rule, reason=reason)

    superseded, new = run_app(work)
    if as_json:
        print_json({"policy_id": new, "superseded": superseded})
    else:
        out.print(f"policy {superseded} " + (f"superseded by {new}" if new else "deactivated"))


@policy_app.command("list")
def policy_list(
    workspace: str = Workspace(),
    include_inactive: bool = typer.Option(False, "--all", help="Also superseded policies."),
    agent: str | None = Agent(),
    role: str | None = Role(),
    as_of: str | None = AsOfOption(),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """List policies by domain.

    Example: noemactl policy list -w acme
    """
    use(data_dir)
    who = caller(workspace, agent, role)
    rows, note = run_read(
        lambda app: app.knowledge.list_policies(who, include_inactive=include_inactive),
        workspace,
        _none,
        as_of,
    )
    if as_json:
        print_json(rows)
        return
    _show(
        rows,
        ["id", "domain", "rule", "required_role", "active", "superseded_by", "proposed_by"],
        f"no policies{note}",
    )


# --- grants and domains -------------------------------------------------------------------------


@grant_app.command("set")
def grant_set(
    role: str = typer.Argument(..., help="Role, or * for every role without a grant of its own."),
    domain: str = typer.Argument(..., help="Domain, e.g. hr or repo:billing/architecture."),
    access: str = typer.Argument(..., help="none, read or write."),
    workspace: str = Workspace(),
    repo: str | None = Repo(),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Set an access grant (operators only). In compatible mode reads are not gated: `none` refuses
    policy writes there but hides the domain only once the workspace is strict; a note says so.

    Example: noemactl grant set intern hr none -w acme
    """
    use(data_dir)
    who = caller(workspace)

    async def work(app: Any) -> tuple[dict[str, Any], str]:
        result = await app.knowledge.set_grant(who, role, domain, access, repo=repo)
        return result, await app.knowledge.access_mode(workspace)

    result, mode = run_app(work)
    if as_json:
        print_json(result)
    else:
        out.print(f"{role} → {result['domain']}: {access} (was {result['previous'] or 'unset'})")
    if access == "none" and mode == "compatible":
        err.print(
            f"note: {workspace} is in compatible mode, where reads are not gated: `none` keeps {role} "
            f"from proposing policies in {result['domain']} but not from reading it. The grant is kept "
            f"and hides the domain once the workspace is strict (noemactl grant mode strict -w {workspace}).",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )


@grant_app.command("list")
def grant_list(
    workspace: str = Workspace(),
    as_of: str | None = AsOfOption(),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """List grants and the workspace's access mode.

    Example: noemactl grant list -w acme
    """
    use(data_dir)

    async def work(app: Any) -> dict[str, Any]:
        return {
            "access_mode": await app.knowledge.access_mode(workspace),
            "grants": await app.knowledge.list_grants(workspace),
        }

    result, note = run_read(work, workspace, lambda r: not r["grants"], as_of)
    if as_json:
        print_json(result)
        return
    out.print(f"access mode: {result['access_mode']}")
    columns = ["role", "domain", "access", "seeded", "changed_by", "updated_at"]
    _show(result["grants"], columns, f"no grants{note}")


@grant_app.command("mode")
def grant_mode(
    mode: str = typer.Argument(..., help="compatible (no grant row means read) or strict (means none)."),
    workspace: str = Workspace(),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Set a workspace's access mode (operators only).

    Example: noemactl grant mode strict -w acme
    """
    use(data_dir)
    who = caller(workspace)
    run_app(lambda app: app.knowledge.set_access_mode(who, mode))
    if as_json:
        print_json({"workspace": workspace, "access_mode": mode})
    else:
        out.print(f"{workspace}: access mode {mode}")


def domains(
    workspace: str = Workspace(),
    agent: str | None = Agent(),
    role: str | None = Role(),
    as_of: str | None = AsOfOption(),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """List the workspace's domains (created on first use).

    Example: noemactl domains -w acme
    """
    use(data_dir)
    who = caller(workspace, agent, role)
    rows, note = run_read(lambda app: app.knowledge.list_domains(who), workspace, _none, as_of)
    if as_json:
        print_json(rows)
    else:
        _show(rows, ["domain", "name", "repo", "created_by", "created_at"], f"no domains yet{note}")


def conflicts(
    workspace: str = Workspace(),
    domain: str | None = typer.Option(
        None, "--domain", "-d", help="Only this domain (name or repo:<slug>/name)."
    ),
    agent: str | None = Agent(),
    role: str | None = Role(),
    as_of: str | None = AsOfOption(),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """List recorded conflicts, newest first: both sides and the rule that decided.

    Example: noemactl conflicts -w acme -d ops
    """
    use(data_dir)
    who = caller(workspace, agent, role)
    rows, note = run_read(lambda app: app.knowledge.list_conflicts(who, domain), workspace, _none, as_of)
    if as_json:
        print_json(rows)
        return
    columns = ["domain", "topic", "rule", "winner_content", "loser_content", "decided_by", "created_at"]
    _show(rows, columns, f"no conflicts recorded{note}")


# --- notes, working memory, hot tier ------------------------------------------------------------


@notes_app.command("show")
def notes_show(
    workspace: str = Workspace(),
    agent: str = typer.Option(..., "--agent", "-a", help="Whose notes."),
    as_of: str | None = AsOfOption(),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Show an agent's notes (operators may read every agent's).

    Example: noemactl notes show -w acme -a ops-agent
    """
    use(data_dir)
    who = caller(workspace)
    notes, note = run_read(lambda app: app.knowledge.get_notes(who, agent), workspace, _none, as_of)
    if as_json:
        print_json({"agent": agent, "notes": notes})
    else:
        out.print(notes or f"(no notes){note}", highlight=False, markup=False)


@notes_app.command("set")
def notes_set(
    notes: str = typer.Argument(..., help="The whole new notes."),
    workspace: str = Workspace(),
    agent: str = typer.Option(..., "--agent", "-a", help="Whose notes."),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Replace an agent's notes (as the operator).

    Example: noemactl notes set "halfway through the auth refactor" -w acme -a ops-agent
    """
    use(data_dir)
    who = caller(workspace)
    run_app(lambda app: app.knowledge.set_notes(who, agent, notes))
    if as_json:
        print_json({"agent": agent, "notes": notes})
    else:
        out.print(f"notes of {agent} updated")


@wm_app.command("show")
def wm_show(
    workspace: str = Workspace(),
    mind: str = typer.Option(
        ..., "--mind", "-m", help="The mind (an agent's or a service's stream of experience)."
    ),
    as_of: str | None = AsOfOption(),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Show what a mind holds in working memory, heaviest first.

    Example: noemactl wm show -w acme -m ops
    """
    use(data_dir)
    wm, note = run_read(
        lambda app: app.knowledge.working_memory(workspace, mind), workspace, lambda w: not w["items"], as_of
    )
    if as_json:
        print_json(wm)
        return
    if not wm["items"]:
        out.print(f"{workspace}/{mind}: working memory is empty{note}")
        return
    out.print(
        f"{workspace}/{mind}: {len(wm['items'])} of {wm['capacity']} items (as of {_when(wm['updated_at'])})"
    )
    items = [{**i, "content": erased_content(i["content"], i.get("erased_at"))} for i in wm["items"]]
    out.print(_table(items, ["memory_id", "weight", "entered_at", "status", "content"]))


def remember(
    content: str = typer.Argument(..., help="What to keep for this session."),
    workspace: str = Workspace(),
    agent: str = typer.Option(..., "--agent", "-a"),
    session: str = typer.Option(..., "--session", "-s"),
    domain: str | None = typer.Option(None, "--domain", "-d", help="Where it belongs if promoted."),
    topic: str | None = typer.Option(None, "--topic", "-t", help="Only this topic."),
    importance: float | None = typer.Option(None, min=0.0, max=1.0, help="At 0.6 or more, promoted."),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Write a session-scoped hot-tier item (`consolidate` may promote it to a fact).

    Example: noemactl remember "staging is rebuilt on Sundays" -w acme -a ops -s s1 -d ops
    """
    use(data_dir)
    who = caller(workspace, agent, "agent")
    result = run_app(
        lambda app: app.knowledge.remember(
            who, session, content, domain=domain, topic=topic, importance=importance
        )
    )
    if as_json:
        print_json(vars(result))
    else:
        out.print(f"hot-tier item {result.memory_id} {result.outcome}")


def consolidate(
    workspace: str = Workspace(),
    domain: str | None = typer.Option(
        None, "--domain", "-d", help="Only this domain (name or repo:<slug>/name)."
    ),
    stale_after_hours: float = typer.Option(24.0, min=0.0, help="Archive hot-tier items older than this."),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Promote hot-tier items worth keeping, merge near-duplicate facts, archive stale items.

    Example: noemactl consolidate -w acme
    """
    use(data_dir)
    who = caller(workspace)
    report = run_app(
        lambda app: app.knowledge.consolidate(who, domain, stale_after=timedelta(hours=stale_after_hours))
    )
    if as_json:
        print_json(vars(report))
        return
    out.print(
        f"promoted {len(report.promoted)}, merged {sum(len(m['merged']) for m in report.merged)} "
        f"into {len(report.merged)}, archived {len(report.archived)}"
    )


def harmonize(
    workspace: str = Workspace(),
    domain: str | None = typer.Option(
        None, "--domain", "-d", help="Only this domain (name or repo:<slug>/name)."
    ),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Reconcile beliefs that diverged between agents (corroborate agreement, record contradictions).

    Example: noemactl harmonize -w acme
    """
    use(data_dir)
    who = caller(workspace)
    report = run_app(lambda app: app.knowledge.harmonize(who, domain))
    if as_json:
        print_json(vars(report))
    else:
        out.print(f"corroborated {len(report.corroborated)}, conflicts recorded {len(report.conflicts)}")


@decisions_app.command("record")
def decisions_record(
    decisions: list[str] = typer.Argument(..., help='Each decision; "topic: text" names its topic.'),
    workspace: str = Workspace(),
    meeting: str = typer.Option(..., "--meeting", help="The meeting's name."),
    agent: str | None = Agent(),
    role: str | None = Role(),
    repo: str | None = Repo(),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Record a meeting's decisions as facts of the decisions domain.

    Example: noemactl decisions record "release-train: ship every second Tuesday" -w acme --meeting weekly
    """
    use(data_dir)
    who = caller(workspace, agent, role)
    results = run_app(lambda app: app.knowledge.record_meeting_decisions(who, meeting, decisions, repo=repo))
    if as_json:
        print_json([vars(r) for r in results])
        return
    for r in results:
        out.print(f"decision {r.memory_id} {r.outcome} ({r.topic})")


def register(app: typer.Typer) -> None:
    """Add the knowledge commands to ``noemactl``."""
    app.add_typer(fact_app, name="fact")
    app.add_typer(policy_app, name="policy")
    app.add_typer(grant_app, name="grant")
    app.add_typer(notes_app, name="notes")
    app.add_typer(wm_app, name="wm")
    app.add_typer(decisions_app, name="decisions")
    for command in (domains, conflicts, remember, consolidate, harmonize):
        app.command()(command)
