#!/usr/bin/env bash
# A throwaway PostgreSQL server from Debian's packages, for the team-store tests.
#   postgres_server.sh start DIR   starts one in DIR (a new directory) on a free
#                                  127.0.0.1 port, with password authentication,
#                                  and prints the URL of its database "team"
#   postgres_server.sh stop DIR    stops it
#   postgres_server.sh restart DIR restarts it on the same port (clients are cut off)
# The server refuses to run as root: as root it runs as the `postgres` user
# that Debian's postgresql package creates.
set -euo pipefail
action=$1
dir=$2
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$bindir/initdb" ] || { echo "postgres_server.sh: no PostgreSQL server (apt install postgresql)" >&2; exit 2; }

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case $action in
start)
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres "$dir"
  password=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
  echo "$password" >"$dir/pw"
  [ "$(id -u)" = 0 ] && chown postgres "$dir/pw"
  as_owner "$bindir/initdb" -D "$dir/data" -U gputriage --pwfile="$dir/pw" --auth-host=scram-sha-256 \
    --auth-local=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; exit 1; }
  port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  echo "$port" >"$dir/port"
  as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=100" start >/dev/null ||
    { cat "$dir/server.log" >&2; exit 1; }
  as_owner "$bindir/createdb" -h "$dir" -p "$port" -U gputriage team
  echo "postgresql://gputriage:$password@127.0.0.1:$port/team"
  ;;
stop)
  [ -d "$dir/data" ] && as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  ;;
restart)
  port=$(cat "$dir/port")
  as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -m fast -w -t 60 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=100" restart >/dev/null
  ;;
psql)  # postgres_server.sh psql DIR SQL: runs SQL in "team", unaligned rows
  as_owner "$bindir/psql" -h "$dir" -p "$(cat "$dir/port")" -U gputriage -d team -v ON_ERROR_STOP=1 -At -c "$3"
  ;;
*)
  echo "usage: postgres_server.sh start|stop|restart|psql DIR [SQL]" >&2
  exit 2
  ;;
esac
