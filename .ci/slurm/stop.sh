#!/usr/bin/env bash
# Stop the single-node SLURM started by .ci/slurm/setup.sh: slurmd, slurmctld, then munged, by their pid files
# (never by name, so nothing else on the machine is touched). Pending jobs are cancelled first.
set -uo pipefail

log() { echo "[slurm-stop] $*"; }
alive() {
  [[ -n $1 && -r /proc/$1/stat ]] || return 1
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ $state != Z && $state != X ]]
}

if [[ ${SLURM_KEEP_JOBS:-0} != 1 ]] && command -v scancel >/dev/null && scontrol ping 2>/dev/null | grep -q UP; then
  scancel --user="$(id -un)" 2>/dev/null || true
fi

status=0
for entry in /run/slurm/slurmd.pid:slurmd /run/slurm/slurmctld.pid:slurmctld /run/munge/munged.pid:munged; do
  pidfile=${entry%%:*} name=${entry##*:}
  pid=$( [[ -r $pidfile ]] && tr -dc '0-9' <"$pidfile" )
  if ! alive "$pid"; then
    log "$name not running"
    rm -f "$pidfile"
    continue
  fi
  kill "$pid"
  for _ in $(seq 1 30); do alive "$pid" || break; sleep 0.5; done
  if alive "$pid"; then
    log "$name (pid $pid) ignored SIGTERM; sending SIGKILL"
    kill -9 "$pid" || status=1
  fi
  rm -f "$pidfile"
  log "stopped $name (pid $pid)"
done
exit $status
