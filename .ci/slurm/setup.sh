#!/usr/bin/env bash
# Install and start a single-node SLURM (controller + compute node on this machine) for the cluster tests.
#
# Why by hand: CI containers run as root without systemd, so the daemons are started directly and checked
# through their pid files. Idempotent: packages are installed once, slurm.conf is rewritten only when it
# changes, running daemons are kept (or restarted when the config changed). Exits non-zero with the reason
# and the daemons' log tails when anything does not come up.
#
# Environment knobs:
#   SLURM_CPUS            CPUs of the node (default: nproc)
#   SLURM_MEM_MARGIN_MB   memory kept back from `slurmd -C`'s RealMemory (default: max(512, 10%))
#   SLURM_WAIT_S          seconds to wait for each daemon / the node (default: 60)
#   SLURM_SKIP_INSTALL=1  do not call apt-get (packages must already be there)
set -euo pipefail

CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
RUN_DIR=/run/slurm
STATE_DIR=/var/lib/slurm
LOG_DIR=/var/log/slurm
WAIT_S=${SLURM_WAIT_S:-60}

log() { echo "[slurm-setup] $*"; }
die() {
  echo "[slurm-setup] ERROR: $*" >&2
  for f in "$LOG_DIR"/slurmctld.log "$LOG_DIR"/slurmd.log /var/log/munge/munged.log; do
    if [[ -s $f ]]; then echo "--- tail $f" >&2; tail -n 20 "$f" >&2; fi
  done
  exit 1
}

[[ $(id -u) -eq 0 ]] || die "must run as root (starts munged, slurmctld, slurmd)"

# alive PID: the process exists and is not a zombie (finished daemons can linger as zombies here)
alive() {
  local pid=$1
  [[ -n $pid && -r /proc/$pid/stat ]] || return 1
  local state
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
  [[ $state != Z && $state != X ]]
}
pid_from() { [[ -r $1 ]] && tr -dc '0-9' <"$1" || true; }
running() { alive "$(pid_from "$1")"; }

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local limit=$1 what=$2
  shift 2
  local start=$SECONDS
  until "$@" >/dev/null 2>&1; do
    ((SECONDS - start < limit)) || return 1
    sleep 1
  done
  log "$what: ok after $((SECONDS - start)) s"
}

# --- 1. packages -------------------------------------------------------------------------------------------
need_install=0
for pkg in slurm-wlm munge; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need_install=1
done
if ((need_install)); then
  [[ ${SLURM_SKIP_INSTALL:-0} == 1 ]] && die "slurm-wlm/munge not installed and SLURM_SKIP_INSTALL=1"
  log "installing slurm-wlm and munge (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || die "apt-get update failed"
  apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null || die "apt-get install failed"
else
  log "slurm-wlm and munge already installed"
fi
for bin in /usr/sbin/munged /usr/sbin/slurmctld /usr/sbin/slurmd /usr/bin/sinfo /usr/bin/scontrol; do
  [[ -x $bin ]] || die "$bin missing after install"
done

# --- 2. munge ----------------------------------------------------------------------------------------------
install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
install -d -o munge -g munge -m 0755 /run/munge
if [[ ! -s /etc/munge/munge.key ]]; then
  log "creating munge key"
  if command -v mungekey >/dev/null; then
    mungekey --create --keyfile=/etc/munge/munge.key --force
  else
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
  fi
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
if running /run/munge/munged.pid; then
  log "munged already running (pid $(pid_from /run/munge/munged.pid))"
else
  rm -f /run/munge/munged.pid /run/munge/munge.socket.2*
  log "starting munged"
  runuser -u munge -- /usr/sbin/munged || die "munged did not start"
fi
munge_ok() { munge -n | unmunge; }
wait_for 20 "munge round trip" munge_ok || die "munge -n | unmunge fails"

# --- 3. slurm.conf -----------------------------------------------------------------------------------------
install -d -m 0755 "$CONF_DIR" "$RUN_DIR" "$STATE_DIR/slurmctld" "$STATE_DIR/slurmd" "$LOG_DIR"
cpus=${SLURM_CPUS:-$(nproc)}
real_mem=$(/usr/sbin/slurmd -C 2>/dev/null | tr ' ' '\n' | sed -n 's/^RealMemory=//p' | head -n1)
[[ $real_mem =~ ^[0-9]+$ ]] || die "could not read RealMemory from 'slurmd -C'"
margin=${SLURM_MEM_MARGIN_MB:-$((real_mem / 10 > 512 ? real_mem / 10 : 512))}
mem=$((real_mem - margin))
((mem > 256)) || die "RealMemory $real_mem MB less margin $margin MB leaves nothing for jobs"

new_conf=$(cat <<EOF
# Written by .ci/slurm/setup.sh: single node, no systemd, no cgroups, no accounting database.
ClusterName=ci
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
# keep finished jobs visible to squeue/scontrol for a while (no sacct without accounting)
MinJobAge=600
KillWait=10
SlurmctldPidFile=$RUN_DIR/slurmctld.pid
SlurmdPidFile=$RUN_DIR/slurmd.pid
SlurmdSpoolDir=$STATE_DIR/slurmd
StateSaveLocation=$STATE_DIR/slurmctld
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus Boards=1 SocketsPerBoard=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
)
conf_changed=0
if [[ ! -f $CONF ]] || [[ $(cat "$CONF") != "$new_conf" ]]; then
  printf '%s\n' "$new_conf" >"$CONF.tmp" && mv "$CONF.tmp" "$CONF"
  conf_changed=1
  log "wrote $CONF (CPUs=$cpus RealMemory=$mem MB of $real_mem MB)"
fi

stop_daemon() {  # stop_daemon PIDFILE NAME
  local pid
  pid=$(pid_from "$1")
  if alive "$pid"; then
    log "stopping $2 (pid $pid) to apply the new config"
    kill "$pid"
    for _ in $(seq 1 20); do alive "$pid" || break; sleep 0.5; done
    alive "$pid" && kill -9 "$pid"
  fi
  rm -f "$1"
}
if ((conf_changed)); then
  stop_daemon "$RUN_DIR/slurmd.pid" slurmd
  stop_daemon "$RUN_DIR/slurmctld.pid" slurmctld
fi

# --- 4. daemons --------------------------------------------------------------------------------------------
if running "$RUN_DIR/slurmctld.pid"; then
  log "slurmctld already running (pid $(pid_from "$RUN_DIR/slurmctld.pid"))"
else
  log "starting slurmctld"
  /usr/sbin/slurmctld || die "slurmctld did not start"
fi
wait_for "$WAIT_S" "scontrol ping" bash -c 'scontrol ping | grep -q "is UP"' \
  || die "slurmctld does not answer 'scontrol ping' after $WAIT_S s"

if running "$RUN_DIR/slurmd.pid"; then
  log "slurmd already running (pid $(pid_from "$RUN_DIR/slurmd.pid"))"
else
  log "starting slurmd -N localhost"
  /usr/sbin/slurmd -N localhost || die "slurmd did not start"
fi

node_state() { sinfo -h -N -n localhost -o '%t' 2>/dev/null | head -n1; }
start=$SECONDS
resumed=0
while :; do
  state=$(node_state)
  case $state in
    idle | mix | alloc) break ;;
    down* | drain* | drng* | fail*)
      if ((!resumed)); then
        log "node is '$state': resuming it"
        scontrol update nodename=localhost state=resume || true
        resumed=1
      fi ;;
  esac
  ((SECONDS - start < WAIT_S)) || die "node localhost is '${state:-unknown}' after $WAIT_S s (want idle); reason: $(sinfo -h -R -o '%E' 2>/dev/null)"
  sleep 1
done
log "node localhost is $state after $((SECONDS - start)) s"
sinfo
