#!/usr/bin/env bash
# The machine's CPU use every 20 s ("<elapsed> s <busy>%", busy = all cores' non-idle time), until killed:
# make test writes it to .netbox/cpu.log to show how well its lanes fill the two cores.
set -euo pipefail
read_cpu() { awk '/^cpu /{print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
prev=$(read_cpu)
start=$SECONDS
while sleep 20; do
  now=$(read_cpu)
  echo "$prev $now" | awk -v t=$((SECONDS - start)) '{printf "%5d s %3d%%\n", t, 100 * ($3 - $1) / ($4 - $2)}'
  prev=$now
done
