#!/bin/sh
# Managed by k3strap: runs the official K3s install script, downloaded by this host from
# spec.k3s.installScriptURL (default https://get.k3s.io), checked against
# spec.k3s.installScriptSHA256 when given. The INSTALL_K3S_* environment passes through.
set -e
url=%s
want=%s
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
if command -v curl >/dev/null 2>&1; then
    curl -sfL -o "$tmp" "$url" || { echo "downloading the install script from $url failed" >&2; exit 1; }
elif command -v wget >/dev/null 2>&1; then
    wget -qO "$tmp" "$url" || { echo "downloading the install script from $url failed" >&2; exit 1; }
else
    echo "neither curl nor wget found to download $url" >&2; exit 1
fi
if [ -n "$want" ]; then
    got=$(sha256sum "$tmp" | cut -d' ' -f1)
    if [ "$got" != "$want" ]; then
        echo "the install script from $url has sha256 $got but spec.k3s.installScriptSHA256 is $want" >&2
        exit 4
    fi
fi
echo "[k3strap] running the install script from $url"
sh "$tmp"
