# shellcheck shell=sh
# proxy.sh UNIT [PROXY TARGET AUTH LIMIT] — the proxy environment of the K3s unit UNIT (k3s or
# k3s-agent) where the unit takes it from, in systemd's order: the unit's Environment= (drop-ins
# included), then its EnvironmentFiles /etc/default/UNIT, /etc/sysconfig/UNIT and
# $K3S_SYSTEMD_DIR/UNIT.service.env (a later one wins). Only the proxy variables' lines are
# printed. With PROXY (a proxy URL without password) it probes the proxy once, bounded by LIMIT
# seconds: curl fetches the head of TARGET through it, else wget fetches TARGET (AUTH "auth":
# the proxy user and password come on standard input — a curl config whose first line, a
# comment, holds the proxy URL with the password for wget — never on the command line);
# without TARGET, or without curl and wget, it connects to the proxy's host and port (curl,
# else bash's /dev/tcp).
# Output: "@unitenv", "@file PATH" sections of lines, then "@probe TOOL EXIT HTTP CONNECT" and
# "@probe-err TEXT" (curl's first error line).
unit=$1 proxy=${2:-} target=${3:-} auth=${4:-} limit=${5:-10}
pat='^[[:space:]]*(export[[:space:]]+)?(CONTAINERD_)?(HTTP_PROXY|HTTPS_PROXY|NO_PROXY|http_proxy|https_proxy|no_proxy)='
echo "@unitenv"
if command -v systemctl >/dev/null 2>&1; then
  systemctl show -p Environment --value "$unit" 2>/dev/null | tr ' ' '\n' | grep -E "$pat" || true
fi
for f in "/etc/default/$unit" "/etc/sysconfig/$unit" "$K3S_SYSTEMD_DIR/$unit.service.env"; do
  if [ -r "$f" ]; then
    echo "@file $f"
    grep -E "$pat" "$f" || true
  fi
done
[ -n "$proxy" ] || exit 0
hostport=${proxy#*://}
hostport=${hostport#*@}
hostport=${hostport%%/*}
err=$(mktemp)
trap 'rm -f "$err"' EXIT
if command -v curl >/dev/null 2>&1; then
  cfg=/dev/null
  [ "$auth" = auth ] && cfg=-
  if [ -n "$target" ]; then
    out=$(curl -sS -I -o /dev/null --connect-timeout 5 --max-time "$limit" -w '%{http_code} %{http_connect}' \
      --noproxy '' -x "$proxy" -K "$cfg" "$target" 2>"$err") && rc=0 || rc=$?
  else
    out=$(curl -sS -o /dev/null --connect-timeout 5 --max-time "$limit" -w '%{http_code} 000' \
      --noproxy '*' "http://$hostport/" 2>"$err") && rc=0 || rc=$?
  fi
  echo "@probe curl $rc ${out:-000 000}"
  echo "@probe-err $(head -n 1 "$err")"
elif [ -n "$target" ] && command -v wget >/dev/null 2>&1; then
  # wget reads the proxy from the environment only: with AUTH the URL with its password is the
  # first line of standard input ("# proxy-url URL", a comment to curl).
  purl=$proxy
  if [ "$auth" = auth ] && IFS= read -r line; then
    case $line in "# proxy-url "*) purl=${line#"# proxy-url "} ;; esac
  fi
  # The limit through timeout(1): busybox 1.35's wget -T crashes.
  to=
  command -v timeout >/dev/null 2>&1 && to="timeout $limit"
  # shellcheck disable=SC2086 # $to is empty or "timeout N"
  http_proxy=$purl https_proxy=$purl HTTP_PROXY='' no_proxy='' NO_PROXY='' \
    $to wget -S -O /dev/null "$target" 2>"$err" && rc=0 || rc=$?
  code=$(sed -n 's/^ *HTTP\/[0-9.]* \([0-9][0-9][0-9]\).*/\1/p' "$err" | tail -n 1)
  echo "@probe wget $rc ${code:-000} 000"
  echo "@probe-err $(grep -v '^ ' "$err" | grep -v '^Connecting' | head -n 1)"
elif command -v bash >/dev/null 2>&1; then
  host=${hostport%:*} port=${hostport##*:}
  [ "$port" = "$hostport" ] && port=80
  host=${host#[} host=${host%]}
  if command -v timeout >/dev/null 2>&1; then
    # shellcheck disable=SC2016 # $0 and $1 expand in the inner bash
    timeout "$limit" bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$host" "$port" 2>"$err" && rc=0 || rc=$?
  else
    # shellcheck disable=SC2016
    bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$host" "$port" 2>"$err" && rc=0 || rc=$?
  fi
  echo "@probe tcp $rc 000 000"
  echo "@probe-err $(head -n 1 "$err")"
else
  echo "@probe none 0 000 000"
fi
