# shellcheck shell=sh
# Prints yes when the first server runs embedded etcd (its etcd data directory $1 exists),
# else no.
if [ -d "$1" ]; then echo yes; else echo no; fi
