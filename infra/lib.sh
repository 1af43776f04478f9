# shellcheck shell=bash
# Shared by the infra scripts: build a Go server once per machine, start one and wait until it
# answers, find and stop a server this checkout started.

log() { echo "[infra] $*"; }
die() { echo "[infra] ERROR: $*" >&2; exit 1; }

# show_log: the lines $OUT gained since this start began (offset $OUT_OFFSET), last 40.
show_log() {
  echo "----- $OUT (this start, last 40 lines) -----" >&2
  tail -c +$(( ${OUT_OFFSET:-0} + 1 )) "$OUT" 2>/dev/null | tail -n 40 >&2 || true
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

# go_build NAME VERSION MODDIR PKG GO_MIN LDFLAGS [VAR=VALUE...]: build the Go package PKG
# inside our module MODDIR (its go.mod and go.sum pin every dependency, fetched from the Go
# module proxy) into $OSTINATO_CACHE/bin/NAME-VERSION, once per machine: reused while the stamp
# beside it (a hash of go.mod and go.sum) matches, built when missing or stale, one build at a
# time per cache (flock: two clones may start together). Go's caches are $OSTINATO_CACHE/go/mod
# and go/build, shared by every such build and clone. VAR=VALUE: more environment for `go build`
# (e.g. GOTOOLCHAIN=local). The toolchain: $OSTINATO_GO, else `go` on PATH, else
# /usr/local/go/bin/go (GO_MIN, e.g. 1.24.6, is only named when none is found). The built binary
# must answer `version` (GO_BUILD_VERSION_ARG: another argument, e.g. --version). Prints the
# binary's path on stdout; progress and errors go to stderr.
go_build() {
  local name=$1 version=$2 moddir=$3 pkg=$4 go_min=$5 ldflags=$6
  shift 6
  local bin="$OSTINATO_CACHE/bin/$name-$version" want go buildlog tmp t0
  want=$(cat "$moddir/go.mod" "$moddir/go.sum" | sha256sum | cut -c1-16)
  if _go_built "$bin" "$want"; then echo "$bin"; return 0; fi

  if [ -n "${OSTINATO_GO:-}" ]; then go=$OSTINATO_GO
  elif command -v go >/dev/null 2>&1; then go=$(command -v go)
  elif [ -x /usr/local/go/bin/go ]; then go=/usr/local/go/bin/go
  else die "no Go toolchain found (need Go >= $go_min: put go on PATH or set OSTINATO_GO)"; fi

  mkdir -p "$OSTINATO_CACHE/bin" "$OSTINATO_CACHE/go/mod" "$OSTINATO_CACHE/go/build"
  buildlog="$OSTINATO_CACHE/go-build-$name-$version.log"
  (
    flock 9
    if _go_built "$bin" "$want"; then exit 0; fi  # built by another start meanwhile
    tmp="$bin.tmp.$$"
    rm -f "$tmp"
    t0=$(date +%s)
    log "building $name $version with $("$go" version | cut -d' ' -f3) into $bin (one-off, several minutes cold; log $buildlog)" >&2
    # GOFLAGS=-modcacherw: the module cache stays deletable with a plain rm -rf.
    # CGO_ENABLED=0 and -trimpath: a static binary, as the upstreams' release builds.
    if ! (cd "$moddir" && env GOMODCACHE="$OSTINATO_CACHE/go/mod" GOCACHE="$OSTINATO_CACHE/go/build" \
          GOFLAGS=-modcacherw GOWORK=off CGO_ENABLED=0 "$@" \
          "$go" build -trimpath -ldflags "$ldflags" -o "$tmp" "$pkg") \
          >"$buildlog" 2>&1 </dev/null; then
      rm -f "$tmp"
      tail -n 40 "$buildlog" >&2
      die "go build of $name $version failed (log: $buildlog)"
    fi
    "$tmp" "${GO_BUILD_VERSION_ARG:-version}" >/dev/null 2>&1 || { rm -f "$tmp"; die "the built $name binary does not run ($tmp)"; }
    mv -f "$tmp" "$bin"
    echo "$want" >"$bin.stamp"  # last: a build cut short leaves no stamp, so the next one redoes it
    log "built $name $version ($(du -m "$bin" | cut -f1) MB) in $(( $(date +%s) - t0 ))s" >&2
  ) 9>"$OSTINATO_CACHE/.$name-$version.lock" || exit 1  # its die, even where errexit is off
  _go_built "$bin" "$want" || die "$name binary missing after build ($bin)"
  echo "$bin"
}

# _go_built BIN STAMP_WANTED: BIN exists and its stamp says it was built from this go.mod/go.sum.
_go_built() {
  [ -x "$1" ] && [ "$(cat "$1.stamp" 2>/dev/null)" = "$2" ]
}

# start_server NAME PIDFILE OUT COMMAND...: start COMMAND detached from the caller (nohup, and
# setsid: a Ctrl-C in `make` must not stop it), its output appended to OUT after a header line;
# the process writes its own pid to PIDFILE (an inner bash that `exec`s the command). Sets
# SERVER_PID, and OUT_OFFSET (OUT's size before: show_log shows this start's lines only).
start_server() {
  local name=$1 pidfile=$2 out=$3
  shift 3
  OUT_OFFSET=$(stat -c %s "$out" 2>/dev/null || echo 0)
  echo "===== $(date -u +%FT%TZ) $name: starting $1 =====" >>"$out"
  rm -f "$pidfile"
  # shellcheck disable=SC2016  # $$ and $@ expand in the inner bash
  nohup setsid bash -c 'echo $$ > "$1"; shift; exec "$@"' _ "$pidfile" "$@" \
    >>"$out" 2>&1 </dev/null &
  for _ in $(seq 50); do [ -s "$pidfile" ] && break; sleep 0.1; done
  # shellcheck disable=SC2034  # the caller's to read
  SERVER_PID=$(cat "$pidfile" 2>/dev/null) || die "$name did not start (no pid file); see $out"
}

# wait_server NAME PID T0 TIMEOUT PROBE WHAT STOP: until the command PROBE succeeds (then logs
# "NAME ready (WHAT, pid PID) in Ns" since T0); dies showing this start's lines of $OUT when the
# process exits first, or when TIMEOUT seconds since T0 pass (the process left running: STOP
# says how to stop it).
wait_server() {
  local name=$1 pid=$2 t0=$3 timeout=$4 probe=$5 what=$6 stop=$7
  local deadline=$(( t0 + timeout ))
  while :; do
    if ! kill -0 "$pid" 2>/dev/null; then
      show_log
      die "$name exited during start-up (log: $OUT)"
    fi
    if $probe; then
      log "$name ready ($what, pid $pid) in $(( $(date +%s) - t0 ))s"
      return 0
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      show_log
      die "$name did not become ready within ${timeout}s ($what; pid $pid still running; stop it with $stop)"
    fi
    sleep 0.5
  done
}

# npm_asset PACKAGE VERSION SHA256 DEST FILE...: an npm package's FILEs (and its LICENSE) copied
# into DEST once, from `npm pack` of the pinned VERSION checked against its SHA-256 (Swagger UI's
# assets, axe-core). Already there: nothing. Without npm: a note, and nothing (the caller says
# what goes without). A checksum mismatch: an error, nothing installed.
npm_asset() {
  local package=$1 version=$2 sha256=$3 dest=$4; shift 4
  local f have=1 work
  for f in "$@"; do [ -s "$dest/$f" ] || have=0; done
  [ "$have" -eq 1 ] && return 0
  command -v npm >/dev/null 2>&1 || { log "npm missing: $package not installed"; return 0; }
  work=$(mktemp -d)
  log "fetching $package $version (one-off)"
  (cd "$work" && npm pack "$package@$version" --silent >/dev/null) \
    || { rm -rf "$work"; die "$package $version: npm pack failed"; }
  echo "$sha256  $work/$package-$version.tgz" | sha256sum -c --quiet - \
    || { rm -rf "$work"; die "$package $version: checksum mismatch"; }
  tar -xzf "$work/$package-$version.tgz" -C "$work"
  rm -rf "$dest.partial" && mkdir -p "$dest.partial"
  for f in "$@" LICENSE; do cp "$work/package/$f" "$dest.partial/$f"; done
  rm -rf "$dest" && mv "$dest.partial" "$dest"
  rm -rf "$work"
}
