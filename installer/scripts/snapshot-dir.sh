# shellcheck shell=sh
# Prints the names of the files in the snapshot directory $1, one a line (nothing when it does
# not exist). A listing of the directory, not `k3s etcd-snapshot ls`: that asks the running K3s,
# and a resumed restore finds the servers stopped.
if [ -d "$1" ]; then ls -1A -- "$1"; fi
