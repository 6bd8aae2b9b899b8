# shellcheck shell=sh
# k3s server --cluster-reset with the snapshot $1 (etcd restored, membership reset to this
# server); its log's tail on failure.
log="$K3STRAP_DIR/cluster-reset.log"
"$K3S_BIN" server --cluster-reset --cluster-reset-restore-path="$1" >/dev/null 2>"$log" || { tail -n 5 "$log" >&2; exit 1; }
