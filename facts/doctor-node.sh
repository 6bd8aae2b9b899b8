# shellcheck shell=sh
# What doctor needs from one node (run as root): between @host-facts and @host-facts-end what
# host.sh (in K3STRAP_HOST_SH) prints, the host facts preflight gathers too (the clock, memory,
# free disk, addresses, hostname, the K3s binary's version); which unit runs (k3s or
# k3s-agent) with its state, restart count and last start, the unit's journal tail (300
# lines), the K3s config file and drop-ins (lines with a key matching SECRET_KEYS left out),
# flannel's subnet.env, the first certificate of every K3s certificate file (server/tls/*.crt,
# server/tls/*/*.crt, agent/*.crt; PEM, parsed locally — no openssl needed); between @network
# and @network-end what network.sh (in K3STRAP_NETWORK_SH) prints, and between @proxy and
# @proxy-end what proxy.sh (in K3STRAP_PROXY_SH) prints of the unit's proxy environment.
# ParseDoctorNode reads it.
# Its one argument holds journal line fragments, one per line: the journal lines older than the
# tail that contain one of them are printed first ("@keylines"), so that a diagnosis still sees
# the kubelet's command line of a long-running unit.
PATH=$PATH:$K3S_BIN_DIR:/usr/sbin:/sbin
keys=$1
echo "@host-facts"
sh -c "$K3STRAP_HOST_SH" k3strap-host
echo "@host-facts-end"
# OpenRC (no systemctl, /sbin/openrc-run): the service is the script install.sh writes to
# /etc/init.d, its state rc-service's, its restart count and main process's start what
# supervise-daemon keeps in the service's options (start_count, start_time in local time), its
# journal install.sh's log file /var/log/UNIT.log (the service's output_log and error_log).
openrc=
if ! command -v systemctl >/dev/null 2>&1 && [ -x /sbin/openrc-run ]; then openrc=1; fi
svc=
for u in k3s k3s-agent; do
  if [ -n "$openrc" ]; then
    if [ -f "/etc/init.d/$u" ]; then svc=$u; break; fi
  elif [ -n "$(systemctl show -p FragmentPath --value "$u" 2>/dev/null)" ]; then svc=$u; break; fi
done
echo "@unit $svc"
if [ -n "$svc" ] && [ -n "$openrc" ]; then
  echo "@unitstate"
  if rc-service "$svc" status >/dev/null 2>&1; then
    echo "ActiveState=active"; echo "SubState=running"
    o=/run/openrc/options/$svc
    echo "NRestarts=$(cat "$o/start_count" 2>/dev/null || echo 0)"
    t=$(cat "$o/start_time" 2>/dev/null)
    if [ -n "$t" ] && e=$(date -d "$t" +%s 2>/dev/null) && at=$(date -u -d "@$e" '+%a %Y-%m-%d %H:%M:%S UTC' 2>/dev/null); then
      echo "ActiveEnterTimestamp=$at"; echo "ExecMainStartTimestamp=$at"
    fi
  else
    echo "ActiveState=inactive"; echo "SubState=dead"
  fi
  echo "@keylines"
  awk -v n=300 '{ if (NR > n) print b[NR % n]; b[NR % n] = $0 }' "/var/log/$svc.log" 2>/dev/null | grep -F -e "$keys" | tail -n 40
  echo "@journal"
  tail -n 300 "/var/log/$svc.log" 2>/dev/null
elif [ -n "$svc" ]; then
  echo "@unitstate"
  systemctl show "$svc" -p ActiveState -p SubState -p NRestarts -p ActiveEnterTimestamp -p ExecMainStartTimestamp 2>/dev/null
  echo "@keylines"
  journalctl -u "$svc" -n 20000 -o short --no-pager 2>/dev/null | grep -v '^-- ' |
    awk -v n=300 '{ if (NR > n) print b[NR % n]; b[NR % n] = $0 }' | grep -F -e "$keys" | tail -n 40
  echo "@journal"
  journalctl -u "$svc" -n 300 -o short --no-pager 2>/dev/null | grep -v '^-- '
fi
echo "@config"
for f in "$K3S_CONFIG" "$K3S_CONFIG".d/*.yaml "$K3S_CONFIG".d/*.yml; do
  [ -r "$f" ] && { echo "@file $f"; grep -v -i -E "^[[:space:]]*\"?($SECRET_KEYS)\"?[[:space:]]*:" "$f"; }
done
if [ -r "$K3S_SUBNET_ENV" ]; then echo "@subnet present $(stat -c %Y "$K3S_SUBNET_ENV" 2>/dev/null)"; cat "$K3S_SUBNET_ENV"; else echo "@subnet missing"; fi
for f in "$K3S_DATA_DIR"/server/tls/*.crt "$K3S_DATA_DIR"/server/tls/*/*.crt "$K3S_DATA_DIR"/agent/*.crt; do
  [ -r "$f" ] && { echo "@cert $f"; sed -n '/-BEGIN CERTIFICATE-/,/-END CERTIFICATE-/{p;/-END CERTIFICATE-/q}' "$f"; }
done
echo "@network"
sh -c "$K3STRAP_NETWORK_SH" k3strap-network ""
echo "@network-end"
if [ -n "$svc" ]; then
  echo "@proxy"
  K3S_SYSTEMD_DIR=$K3S_SYSTEMD_DIR sh -c "$K3STRAP_PROXY_SH" k3strap-proxy "$svc"
  echo "@proxy-end"
fi
# The clock again at the end, as gather.sh does: Go averages both (facts.Host.SetClockSkew).
echo "@host-facts"
printf '\n@@ clock end\n'
date +%s.%N 2>/dev/null
echo "@host-facts-end"
echo "@end"
