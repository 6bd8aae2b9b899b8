# shellcheck shell=sh
# systemctl VERB UNIT ($1 $2): stop, start or restart a K3s unit.
systemctl "$1" "$2"
