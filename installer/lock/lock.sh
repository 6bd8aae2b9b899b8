# shellcheck shell=sh
# The run lock: takes, takes over, refreshes or releases the lock file $2 for id $3 (holder text
# $4, TTL seconds $5, owner "MACHINE-ID:HOSTNAME" $6, pid $7, pid start time $8, and for
# takeover the id $9 of the lock the caller found and proved dead). Every operation runs under
# a mutex on the host (flock(1), or a mkdir lock where util-linux is missing), so reading a
# lock's age, deciding and replacing it is one atomic step: of many runs finding the same
# stale lock, exactly one takes it over. The file is replaced by rename (readers never see it
# half-written). Lines of the file: id, holder, owner, pid, pid start time. It prints
# "acquired", "took-over AGE HOLDER", "held AGE ID OWNER PID START HOLDER", "refreshed",
# "released", "lost HOLDER" or "busy" (the mutex was not free within 30 s).
op=$1 f=$2 id=$3 holder=$4 ttl=$5 owner=$6 pid=$7 start=$8 expect=$9
mkdir -p "$(dirname "$f")"
if command -v flock >/dev/null 2>&1; then
  exec 9>>"$f.mutex"
  flock -w 30 9 || { echo busy; exit 0; }
else
  n=0
  until mkdir "$f.mutex.d" 2>/dev/null; do
    n=$((n + 1)); [ "$n" -le 300 ] || { echo busy; exit 0; }
    sleep 0.1
  done
  trap 'rmdir "$f.mutex.d"' EXIT
fi
line() { sed -n "$1p" "$f" 2>/dev/null; }
age() { echo $(( $(date +%s) - $(stat -c %Y "$f" 2>/dev/null || date +%s) )); }
write() { printf '%s\n%s\n%s\n%s\n%s\n' "$id" "$holder" "$owner" "$pid" "$start" > "$f.new.$id" && mv -f "$f.new.$id" "$f"; }
case $op in
acquire|takeover)
  if [ ! -e "$f" ]; then write && echo acquired; exit 0; fi
  a=$(age) h=$(line 2) cur=$(line 1)
  if [ "$a" -gt "$ttl" ] || { [ "$op" = takeover ] && [ -n "$expect" ] && [ "$cur" = "$expect" ]; }; then
    write && echo "took-over $a $h"; exit 0
  fi
  o=$(line 3) p=$(line 4) st=$(line 5)
  echo "held $a ${cur:--} ${o:--} ${p:--} ${st:--} $h" ;;
refresh)
  if [ "$(line 1)" = "$id" ]; then touch "$f"; echo refreshed; else echo "lost $(line 2)"; fi ;;
release)
  if [ "$(line 1)" = "$id" ]; then rm -f "$f"; fi; echo released ;;
esac
