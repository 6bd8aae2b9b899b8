# shellcheck shell=sh
# Reads the new token on stdin (never on k3strap's command lines or in its logs) and runs
# `k3s token rotate` with the current server token as K3S_TOKEN. K3s's --new-token has no
# environment variable, so the new token is on k3s's own argv while it runs (root-only host;
# the documented way).
IFS= read -r new
K3S_TOKEN=$(cat "$K3S_SERVER_TOKEN") exec "$K3S_BIN" token rotate --new-token "$new" >/dev/null
