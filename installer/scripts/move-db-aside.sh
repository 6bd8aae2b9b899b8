# shellcheck shell=sh
# Stops unit $3 and moves a server's datastore directory $1 aside to $2 (once: a resumed restore
# finds it moved), so that the server rejoins the restored cluster afresh.
if command -v systemctl >/dev/null 2>&1; then systemctl stop "$3" || true; else rc-service "$3" stop || true; fi
if [ -d "$1" ] && [ ! -e "$2" ]; then mv "$1" "$2"; elif [ -e "$2" ]; then rm -rf "$1"; fi
