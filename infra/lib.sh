# shellcheck shell=bash
# Shared by the infra scripts: find and stop a server this checkout started.

log() { echo "[infra] $*"; }
die() { echo "[infra] ERROR: $*" >&2; exit 1; }

# show_log: the lines $OUT gained since this start began (offset $OUT_OFFSET), last 40.
show_log() {
  echo "----- $OUT (this start, last 40 lines) -----" >&2
  tail -c +$(( OUT_OFFSET + 1 )) "$OUT" 2>/dev/null | tail -n 40 >&2 || true
}

# cmdline_has PID TEXT: the process's command line contains TEXT (e.g. our config file path).
cmdline_has() {
  [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -qF -- "$2"
}

# cwd_is PID DIR: the process works in DIR (a server that chdirs to its data folder, as Redis
# does to --dir, is told from another clone's by it when its command line names no path).
cwd_is() {
  [ "/proc/$1/cwd" -ef "$2" ]
}

# is_ours PID TEXT [DIR]: it works in DIR, when given (a test builtin to bash, so checked
# first while scanning /proc), and its command line contains TEXT.
is_ours() {
  { [ -z "${3:-}" ] || cwd_is "$1" "$3"; } && cmdline_has "$1" "$2"
}

# find_ours PIDFILE TEXT [DIR]: print the pid of the process whose command line contains TEXT
# (and, with DIR, whose working directory is DIR), trusting the pid file first and scanning
# /proc when it is lost or stale.
find_ours() {
  local pidfile=$1 text=$2 dir=${3:-} pid="" p
  if [ -f "$pidfile" ]; then
    pid=$(cat "$pidfile" 2>/dev/null || true)
    if [ -n "$pid" ] && ! is_ours "$pid" "$text" "$dir"; then pid=""; fi
  fi
  if [ -z "$pid" ]; then
    for p in /proc/[0-9]*; do
      if is_ours "${p#/proc/}" "$text" "$dir" 2>/dev/null; then pid=${p#/proc/}; break; fi
    done
  fi
  echo "$pid"
}

# stop_ours NAME PIDFILE TEXT TIMEOUT [DIR]: SIGTERM, wait up to TIMEOUT seconds, then SIGKILL.
stop_ours() {
  local name=$1 pidfile=$2 text=$3 timeout=$4 dir=${5:-} pid deadline
  pid=$(find_ours "$pidfile" "$text" "$dir")
  if [ -z "$pid" ]; then
    rm -f "$pidfile"
    log "$name not running (for this checkout)"
    return 0
  fi
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$(( $(date +%s) + timeout ))
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      log "$name still running after ${timeout}s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      sleep 1
      break
    fi
    sleep 0.2
  done
  rm -f "$pidfile"
  log "$name stopped"
}
