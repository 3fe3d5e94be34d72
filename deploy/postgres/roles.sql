-- Noema's database roles on an external PostgreSQL (what `noemactl up` does for its embedded server).
-- Run once as a superuser, in the database Noema uses, with a password per role:
--
--   psql "$SUPERUSER_URL" -v ON_ERROR_STOP=1 \
--        -v owner_password="$(openssl rand -hex 24)" \
--        -v projector_password="$(openssl rand -hex 24)" \
--        -v reader_password="$(openssl rand -hex 24)" \
--        -v schema=noema -f deploy/postgres/roles.sql
--
-- Then give Noema one URL per role (docs/security.md, "PostgreSQL"):
--   NOEMA_DATABASE_URL            postgresql://noema_owner:…@host/db      migrations, replay
--   NOEMA_DATABASE_URL_PROJECTOR  postgresql://noema_projector:…@host/db  the projector
--   NOEMA_DATABASE_URL_READER     postgresql://noema_reader:…@host/db     every other process
-- The first process that runs as the owner migrates the schema and grants the other two their
-- rights on it (noema.adapters.postgres.roles.grant_roles); rerunning this script is harmless and
-- resets the passwords. Keep it in step with roles_sql() in libs/noema/adapters/postgres/roles.py.

SELECT format('CREATE ROLE %I', r) FROM unnest(ARRAY['noema_owner', 'noema_projector', 'noema_reader']) AS r
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) \gexec

-- None is a superuser or may create roles or databases. The projector writes every workspace's rows
-- (with COPY, which row-level security forbids), so it alone bypasses row security.
ALTER ROLE noema_owner LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS NOREPLICATION
    PASSWORD :'owner_password';
ALTER ROLE noema_projector LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE BYPASSRLS NOREPLICATION
    PASSWORD :'projector_password';
ALTER ROLE noema_reader LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS NOREPLICATION
    PASSWORD :'reader_password';

-- Row security lets an index serve only LEAKPROOF conditions; full-text matching reveals nothing but
-- its result, so mark it, or every text search of the reader scans its workspace (rerun this after
-- a major-version upgrade, which resets the built-in functions).
ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) LEAKPROOF;

-- pgvector needs a superuser the first time; the owner may then create schemas (its own, and
-- replay's scratch schemas) in this database.
CREATE EXTENSION IF NOT EXISTS vector SCHEMA public;
SELECT format('GRANT CREATE, CONNECT ON DATABASE %I TO noema_owner', current_database()) \gexec
SELECT format('CREATE SCHEMA IF NOT EXISTS %I AUTHORIZATION noema_owner', :'schema') \gexec
SELECT format('ALTER SCHEMA %I OWNER TO noema_owner', :'schema') \gexec
