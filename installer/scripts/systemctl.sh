# shellcheck shell=sh
# systemctl VERB UNIT ($1 $2): stop, start or restart a K3s unit (OpenRC: its rc-service).
if command -v systemctl >/dev/null 2>&1; then systemctl "$1" "$2"; else rc-service "$2" "$1"; fi
