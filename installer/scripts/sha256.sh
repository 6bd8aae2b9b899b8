# shellcheck shell=sh
# Prints the sha256 of file $1, or "missing" with $2 = or-missing when it does not exist.
if [ "$2" = or-missing ] && [ ! -f "$1" ]; then echo missing; exit 0; fi
sha256sum "$1" | cut -d' ' -f1
