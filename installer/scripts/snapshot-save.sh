# shellcheck shell=sh
# k3s etcd-snapshot save (it reads config.yaml, so the inventory's etcd-snapshot-dir and
# etcd-s3* settings apply), named $1 when given; prints K3s's log so that the caller finds the
# snapshot's name.
name=$1
set -- "$K3S_BIN" etcd-snapshot save
[ -n "$name" ] && set -- "$@" --name "$name"
"$@" 2>&1
