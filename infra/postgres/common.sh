# shellcheck shell=bash
# Shared by infra/postgres/up.sh (one server) and ha-up.sh (pg_auto_failover: a monitor, a
# primary and a synchronous standby): the binaries, running as the `postgres` OS user, where a
# server's files go, and the roles and database every profile has. Source it after infra/env.sh
# and infra/lib.sh, with ROOT set.

PG_MAJOR=${OSTINATO_PG_MAJOR:-15}
PGBIN=/usr/lib/postgresql/$PG_MAJOR/bin

# pg_install PACKAGE...: install the Debian packages whose marker file (the word after ':' in
# each argument, `package:path`) is missing, with apt-get, once. Needs root to install.
pg_install() {
  local missing=() spec
  for spec in "$@"; do
    [ -e "${spec#*:}" ] || missing+=("${spec%%:*}")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" -eq 0 ] || die "missing ${missing[*]} (install them, or run this as root)"
  log "installing ${missing[*]} with apt-get (one-off)"
  # Do not let the Debian package create and start its own 'main' cluster on :5432.
  if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
    mkdir -p /etc/postgresql-common
    echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.conf
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    "${missing[@]}" >/dev/null
  for spec in "$@"; do
    [ -e "${spec#*:}" ] || die "${spec%%:*} installed but ${spec#*:} is missing"
  done
}

# Run a command as the postgres OS user (PostgreSQL refuses to run as root).
if [ "$(id -u)" -eq 0 ]; then
  as_pg() {
    id postgres >/dev/null 2>&1 || die "OS user 'postgres' does not exist (install postgresql-$PG_MAJOR)"
    (cd / && runuser -u postgres -- "$@")
  }
else
  as_pg() { "$@"; }
fi
# chown to postgres (no-op when not root: then everything runs as the caller)
pg_own() { if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$@"; fi; }

# pg_base DIR [SUFFIX]: print where a server's files go: DIR itself, or
# /var/lib/ostinato/<hash of the checkout>[-SUFFIX] when the postgres OS user cannot traverse
# DIR's path (a clone under /root, mode 0700). DIR is created.
pg_base() {
  local dir=$1 suffix=${2:+-$2} hash
  hash=$(printf '%s' "$ROOT" | sha256sum | cut -c1-12)
  mkdir -p "$dir"
  chmod 0755 "$dir"
  if as_pg test -x "$dir" && as_pg test -r "$dir"; then
    echo "$dir"
  else
    echo "/var/lib/ostinato/$hash$suffix"
  fi
}

# Three roles (docs: README.md "Database roles"; the grants are in migration 0025_roles.sql):
#   ostinato        SUPERUSER: administration and the tests' fixtures (create/drop databases)
#                   only; no service connects with it.
#   ostinato_owner  owns the database, its schema objects and every table: migrations
#                   (`ostinato migrate`), `rebuild-projections`, `schema-dump` (CREATEDB here for
#                   its scratch database only; not in infra/k8s).
#   ostinato_app    what the services connect as (OSTINATO_DATABASE_URL): owns nothing, no
#                   attribute, only the table privileges 0025 grants.
# ensure_role_and_db PORT: idempotent, on the server (the primary) at 127.0.0.1:PORT, and it
# repairs an older data directory where `ostinato` owned everything: the database and the
# objects `ostinato` owns in it are reassigned to ostinato_owner.
ensure_role_and_db() {
  local psql=("$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$1")
  "${psql[@]}" -U postgres -d postgres <<'SQL'
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'ostinato') THEN
    CREATE ROLE ostinato SUPERUSER LOGIN;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'ostinato_owner') THEN
    CREATE ROLE ostinato_owner LOGIN;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'ostinato_app') THEN
    CREATE ROLE ostinato_app LOGIN;
  END IF;
END
$$;
ALTER ROLE ostinato_owner LOGIN NOSUPERUSER NOCREATEROLE CREATEDB NOREPLICATION NOBYPASSRLS;
ALTER ROLE ostinato_app LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB NOREPLICATION NOBYPASSRLS;
SELECT 'CREATE DATABASE ostinato OWNER ostinato_owner'
 WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'ostinato') \gexec
ALTER DATABASE ostinato OWNER TO ostinato_owner;
SQL
  # An older checkout's tables belong to `ostinato`: hand them to the owner (once; REASSIGN
  # also moves the databases `ostinato` owns, e.g. leftover test databases: harmless).
  "${psql[@]}" -U postgres -d ostinato <<'SQL'
SELECT 'REASSIGN OWNED BY ostinato TO ostinato_owner'
 WHERE EXISTS (SELECT 1 FROM pg_class WHERE relowner = 'ostinato'::regrole
                                        AND relnamespace = 'public'::regnamespace) \gexec
SQL
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
