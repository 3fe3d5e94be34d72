"""Which database role each process signs in as: settings per role, and the environment `up`
gives each child."""

from __future__ import annotations

from noema.adapters.postgres.roles import DB_ROLES, roles_sql
from noema.runtime.settings import Located, Settings
from noema_cli.supervisor import SERVICES, child_env

OWNER, PROJECTOR, READER = "postgresql://o@db/n", "postgresql://p@db/n", "postgresql://r@db/n"


def test_each_role_falls_back_to_the_one_url_so_single_url_setups_keep_working() -> None:
    one = Located.of(Settings.from_env({"NOEMA_NATS_URL": "nats://x", "NOEMA_DATABASE_URL": OWNER}))
    assert {one.database_url_for(r) for r in ("owner", "projector", "reader")} == {OWNER}
    given = Settings.from_env(
        {
            "NOEMA_NATS_URL": "nats://x",
            "NOEMA_DATABASE_URL": OWNER,
            "NOEMA_DATABASE_URL_PROJECTOR": PROJECTOR,
            "NOEMA_DATABASE_URL_READER": READER,
        }
    )
    roles = Located.of(given)
    assert [roles.database_url_for(r) for r in ("owner", "projector", "reader")] == [OWNER, PROJECTOR, READER]
    assert Settings.from_env(roles.to_env()) == given


def test_every_child_of_up_gets_only_its_own_roles_url() -> None:
    settings = Located(
        nats_url="nats://x", database_url=OWNER, database_url_projector=PROJECTOR, database_url_reader=READER
    )
    base = {"PATH": "/bin", "NOEMA_DATABASE_URL_READER": "postgresql://stale"}
    for name in SERVICES:
        env = child_env(base, settings, name)
        assert env["NOEMA_DATABASE_URL"] == (PROJECTOR if name == "projector" else READER), name
        assert "NOEMA_DATABASE_URL_PROJECTOR" not in env
        assert "NOEMA_DATABASE_URL_READER" not in env
        assert OWNER not in env.values()
        assert env["PATH"] == "/bin"


def test_no_role_is_a_superuser_or_may_create_roles_and_only_the_projector_bypasses_row_security() -> None:
    sql = roles_sql(dict.fromkeys(DB_ROLES, "pw"))
    for kind, name in DB_ROLES.items():
        line = next(line for line in sql.splitlines() if f"CREATE ROLE {name} " in line)
        assert "NOSUPERUSER" in line
        assert "NOCREATEROLE" in line
        assert ("BYPASSRLS" in line.replace("NOBYPASSRLS", "")) == (kind == "projector")
