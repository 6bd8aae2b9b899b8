# shellcheck shell=sh
# The bring-up probe (installer/step_supervise.go): reports the server's state, one tick at a
# time, until killed: service state, restart count and the main process's start time (epoch
# seconds, host clock), subnet.env with its modification time, /readyz, the Node. One SSH
# channel for the whole bring-up. It judges nothing: after each tick it reads from standard
# input how long to nap before the next (seconds; the bring-up judge decides, installer/bringup:
# faster while the join gate waits for the uninitialized taint's removal); with no answer
# (standard input closed, or not a number) it naps $3 seconds. Arguments: unit node interval.
# When subnet.env appears during a nap, a quick tick (@quick: service and subnet.env only, no
# API call, no answer read) reports it at once; the full tick follows. Every tick ends with
# @end; each API call is bounded (--request-timeout=5s) so that a tick ends even when the API
# hangs — k3strap restarts a probe that delivers no @end for max(20 s, 5 intervals).
svc=$1 node=$2 interval=$3
ready=
service_and_subnet() {
  if command -v systemctl >/dev/null 2>&1; then
    echo "@service $(systemctl is-active "$svc" 2>/dev/null) $(systemctl show -p NRestarts --value "$svc" 2>/dev/null)"
    t=$(systemctl show -p ExecMainStartTimestamp --value "$svc" 2>/dev/null)
    [ -n "$t" ] && echo "@start $(date -d "$t" +%s 2>/dev/null)"
  else
    # OpenRC: supervise-daemon (install.sh's supervisor) keeps the respawn count (NRestarts'
    # meaning) and the child's last start (local time) in the service's options
    o=/run/openrc/options/$svc
    n=$(cat "$o/start_count" 2>/dev/null); n=${n:-0}
    if rc-service "$svc" status >/dev/null 2>&1; then echo "@service active $n"; else echo "@service inactive $n"; fi
    t=$(cat "$o/start_time" 2>/dev/null)
    [ -n "$t" ] && echo "@start $(date -d "$t" +%s 2>/dev/null)"
  fi
  if [ -r "$K3S_SUBNET_ENV" ]; then
    echo "@subnet-mtime $(stat -c %Y "$K3S_SUBNET_ENV" 2>/dev/null)"
    echo "@subnet $(tr '\n' ' ' < "$K3S_SUBNET_ENV")"
  else echo "@subnet-missing"; fi
}
while :; do
  service_and_subnet
  if [ "$ready" != ok ]; then ready=$("$K3S_BIN" kubectl --request-timeout=5s get --raw /readyz 2>/dev/null | head -c 200); echo "@readyz $ready"; fi
  if [ "$ready" = ok ]; then
    out=$("$K3S_BIN" kubectl --request-timeout=5s get node "$node" -o json 2>&1 | tr -d '\n')
    case "$out" in *"connection to the server"*|*"connection refused"*) ready= ;; esac
    echo "@node $out"
  fi
  echo "@end"
  nap=
  read -r nap || nap=$interval
  case "$nap" in ''|*[!0-9.]*) nap=$interval ;; esac
  # subnet.env is usually the last milestone: while it is missing, its arrival ends the nap
  # ($1 is the inner shell's). The nap does not hold the channel's output: when k3strap ends
  # the probe (SIGTERM, then the channel's close), the channel closes at once rather than when
  # an orphaned sleep ends.
  # shellcheck disable=SC2016
  if [ -r "$K3S_SUBNET_ENV" ] || ! command -v timeout >/dev/null 2>&1; then sleep "$nap" >/dev/null 2>&1
  else
    timeout "$nap" sh -c 'while [ ! -r "$1" ]; do sleep 0.05; done' _ "$K3S_SUBNET_ENV" >/dev/null 2>&1 || true
    if [ -r "$K3S_SUBNET_ENV" ]; then echo "@quick"; service_and_subnet; echo "@end"; fi
  fi
done
