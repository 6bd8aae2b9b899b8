package installer

// resetScript uninstalls K3s through the scripts its install left (k3s-agent-uninstall.sh,
// k3s-uninstall.sh), then removes k3strap's own files, so that `apply` starts from scratch.
const resetScript = `did=
for s in /usr/local/bin/k3s-agent-uninstall.sh /usr/local/bin/k3s-uninstall.sh; do
  if [ -x "$s" ]; then "$s" >/dev/null 2>&1 || { echo "$s failed" >&2; exit 1; }; did=1; fi
done
rm -rf /var/lib/k3strap /etc/rancher/k3s
if [ -n "$did" ]; then echo "@k3strap reset"; else echo "@k3strap nothing"; fi`
