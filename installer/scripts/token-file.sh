# shellcheck shell=sh
# Writes the token file $1 from stdin (0600, atomically), keeping a full token's
# K10<CA hash>::server: prefix when the file held one.
IFS= read -r new
f=$1
cur=$(cat "$f" 2>/dev/null || true)
case "$cur" in K10*::server:*) new="${cur%%::server:*}::server:$new" ;; esac
mkdir -p "$(dirname "$f")"; umask 077
printf '%s\n' "$new" > "$f.k3strap-tmp" && mv "$f.k3strap-tmp" "$f"
