# shellcheck shell=sh
# What diagnosing a K3s server needs, in one SSH command (run as root; arguments: the unit, the
# node name and the journal line fragments to keep from before the tail, one per line): the
# older journal lines holding one of those fragments (so the kubelet's command line is still
# evidence after hundreds of later lines), the unit's journal tail (400 lines), every pod and the node as JSON (through
# the host's own `k3s kubectl`), the K3s config files (config.yaml and its drop-ins, lexical
# order; secret keys never printed), whether flannel's subnet.env exists and the service state.
# ParseEvidence reads its output.
svc=$1 node=$2 keys=$3
echo "@journal"
journalctl -u "$svc" -n 20000 -o cat --no-pager 2>/dev/null |
  awk -v n=400 '{ if (NR > n) print b[NR % n]; b[NR % n] = $0 }' | grep -F -e "$keys" | tail -n 40
journalctl -u "$svc" -n 400 -o cat --no-pager 2>/dev/null || tail -n 400 "/var/log/$svc.log" 2>/dev/null
echo "@pods"
"$K3S_BIN" kubectl get pods -A -o json 2>/dev/null | tr -d '\n'; echo
echo "@node"
"$K3S_BIN" kubectl get node "$node" -o json 2>/dev/null | tr -d '\n'; echo
echo "@config"
for f in "$K3S_CONFIG" "$K3S_CONFIG".d/*.yaml; do
  [ -r "$f" ] && { echo "@file $f"; grep -v -E '^[[:space:]]*"?(token|agent-token|datastore-endpoint|etcd-s3-access-key|etcd-s3-secret-key|etcd-s3-session-token)"?[[:space:]]*:' "$f"; }
done
echo "@subnet $(test -e "$K3S_SUBNET_ENV" && echo present || echo missing)"
if command -v systemctl >/dev/null 2>&1; then echo "@service $(systemctl is-active "$svc" 2>/dev/null)"
elif rc-service "$svc" status >/dev/null 2>&1; then echo "@service active"   # OpenRC
else echo "@service inactive"; fi
echo "@end"
