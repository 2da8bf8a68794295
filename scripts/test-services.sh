#!/usr/bin/env bash
# Make sure the servers the test suite talks to are up: PostgreSQL, MariaDB and Redis on loopback.
# Installs them from Debian's packages when absent (fresh machines), starts them when stopped, and
# waits until each answers. Tests create and drop their own uniquely-named databases.
set -euo pipefail
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

wait_for() {  # name, command...
  local name=$1; shift
  for _ in $(seq 1 120); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  echo "$name did not come up" >&2
  return 1
}

pg_up() { pg_isready -h 127.0.0.1 -p 5432 -q; }
maria_up() { mariadb-admin -h 127.0.0.1 -P 3306 -u root ping >/dev/null 2>&1; }
redis_up() { [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = "PONG" ]; }

missing=()
command -v pg_ctlcluster >/dev/null || missing+=(postgresql)
command -v mariadbd >/dev/null || missing+=(mariadb-server)
command -v redis-server >/dev/null || missing+=(redis-server)
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! pg_up; then
  log "starting PostgreSQL"
  version=$(ls /etc/postgresql | sort -V | tail -1)
  $SUDO pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  wait_for PostgreSQL pg_up
fi
# Loopback connections as postgres without a password (what the tests use), as on the CI machines.
if ! psql -h 127.0.0.1 -U postgres -tAc 'select 1' >/dev/null 2>&1; then
  log "allowing trust auth for loopback connections to PostgreSQL"
  hba=$($SUDO -u postgres psql -tAc 'show hba_file' 2>/dev/null || su postgres -c "psql -tAc 'show hba_file'")
  $SUDO sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
  $SUDO -u postgres psql -tAc 'select pg_reload_conf()' >/dev/null 2>&1 || su postgres -c "psql -tAc 'select pg_reload_conf()'" >/dev/null
fi

if ! maria_up; then
  log "starting MariaDB"
  $SUDO mkdir -p /run/mysqld && $SUDO chown mysql:mysql /run/mysqld 2>/dev/null || true
  $SUDO start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql
  wait_for MariaDB maria_up
fi
if ! mariadb -h 127.0.0.1 -u root -e 'select 1' >/dev/null 2>&1; then
  log "allowing passwordless root over TCP for MariaDB"
  $SUDO mariadb -e "ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD(''); FLUSH PRIVILEGES;"
fi

if ! redis_up; then
  log "starting Redis"
  $SUDO mkdir -p /var/lib/redis /var/log/redis
  $SUDO redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
  wait_for Redis redis_up
fi
log "PostgreSQL, MariaDB and Redis are up"
