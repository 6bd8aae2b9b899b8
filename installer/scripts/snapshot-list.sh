# shellcheck shell=sh
# k3s etcd-snapshot ls.
"$K3S_BIN" etcd-snapshot ls 2>/dev/null
