#!/bin/bash
# A real single-node Slurm for tests, without systemd: munged (as user munge), slurmctld and
# slurmd started in the background from a slurm.conf generated under DIR, stopped by their PIDs.
#
#   scripts/slurm_local.sh start DIR   start; prints "export SLURM_CONF=DIR/slurm.conf"
#   scripts/slurm_local.sh stop DIR    cancel every job, stop the daemons started by `start DIR`
#   scripts/slurm_local.sh check       exit 0 when slurm-wlm and munge are installed, else 3
#
# Packages (Debian): slurm-wlm munge (scripts/setup.sh installs them). Every daemon's PID is in
# DIR/pids; logs are in DIR/log/. Ports are picked free, so several instances can coexist.
set -euo pipefail

usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

check() {
  local missing=()
  for cmd in munged slurmctld slurmd sbatch sinfo scontrol; do
    command -v "$cmd" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
  done
  if (( ${#missing[@]} )); then
    echo "slurm_local: not installed: ${missing[*]} (apt-get install slurm-wlm munge)" >&2
    return 3
  fi
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The PID in a file, if that process still runs the expected program with this instance's
# directory on its command line (PIDs get reused; other instances must not be touched).
alive_pid() {  # pidfile, program name, directory
  local pid cmd
  [[ -s "$1" ]] || return 1
  pid=$(<"$1")
  [[ "$pid" =~ ^[0-9]+$ && -r /proc/$pid/cmdline ]] || return 1
  cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline")
  [[ "$cmd" == *"$2"* && "$cmd" == *"$3"* ]] && echo "$pid"
}

start() {
  local dir=$1
  check || exit 3
  # munged and slurmd open /dev/null as unprivileged users; a regular file in its place (left by
  # a program that renamed over it as root) makes them fail with a misleading "Permission denied".
  if [[ ! -c /dev/null ]]; then
    echo "slurm_local: /dev/null is not a character device (restore it: rm /dev/null; mknod -m 666 /dev/null c 1 3)" >&2
    exit 1
  fi
  export PATH=$PATH:/usr/sbin
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if alive_pid "$dir/pids/slurmctld" slurmctld "$dir" >/dev/null; then
    echo "slurm_local: already running in $dir (stop it first)" >&2
    exit 1
  fi
  mkdir -p "$dir"/{state,spool,log,pids}
  local user run_munge=() mdir
  user=$(id -un)

  # munged runs as user munge, which must reach its directory: DIR may sit under a private
  # directory (pytest's), so munged's files live in a directory of their own under /tmp (mode
  # 711: munged refuses a socket directory others can write), named in DIR/munge_dir.
  mdir=$(mktemp -d /tmp/paratrain-munge.XXXXXX)
  echo "$mdir" >"$dir/munge_dir"
  chmod 711 "$mdir"
  head -c 1024 /dev/urandom >"$mdir/munge.key"
  chmod 400 "$mdir/munge.key"
  if [[ $(id -u) == 0 ]] && id munge >/dev/null 2>&1; then
    chown -R munge: "$mdir"
    run_munge=(runuser -u munge --)
  fi
  if ! "${run_munge[@]}" munged --socket="$mdir/munge.socket.2" --key-file="$mdir/munge.key" \
      --pid-file="$mdir/munged.pid" --log-file="$mdir/munged.log" --seed-file="$mdir/munged.seed"; then
    echo "slurm_local: munged did not start (log: $mdir/munged.log)" >&2
    stop "$dir"
    exit 1
  fi
  for _ in $(seq 50); do [[ -S "$mdir/munge.socket.2" && -s "$mdir/munged.pid" ]] && break; sleep 0.1; done
  cp "$mdir/munged.pid" "$dir/pids/munged"

  local node conf="$dir/slurm.conf"
  node=$(slurmd -C | head -n 1 | sed 's/ *$//')
  cat >"$conf" <<EOF
ClusterName=paratrain-test
SlurmctldHost=$(hostname -s)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$mdir/munge.socket.2
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=pmix
MailProg=/bin/true
ReturnToService=2
MinJobAge=3600
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/pids/slurmctld.conf.pid
SlurmdPidFile=$dir/pids/slurmd.conf.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
$node State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF=$conf
  slurmctld -D -i -f "$conf" >>"$dir/log/slurmctld.out" 2>&1 &
  echo $! >"$dir/pids/slurmctld"
  slurmd -D -f "$conf" >>"$dir/log/slurmd.out" 2>&1 &
  echo $! >"$dir/pids/slurmd"

  local state=""
  for _ in $(seq 150); do
    state=$(sinfo -h -o %t 2>/dev/null | head -n 1 || true)
    [[ "$state" == idle ]] && break
    sleep 0.2
  done
  if [[ "$state" != idle ]]; then
    echo "slurm_local: the node did not become idle (state '${state:-none}'); logs in $dir/log" >&2
    tail -n 20 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
    stop "$dir"
    exit 1
  fi
  echo "export SLURM_CONF=$conf"
}

stop() {
  local dir=$1
  dir=$(cd "$dir" 2>/dev/null && pwd) || { echo "slurm_local: no directory $1" >&2; return 0; }
  export PATH=$PATH:/usr/sbin SLURM_CONF=$dir/slurm.conf
  if alive_pid "$dir/pids/slurmctld" slurmctld "$dir" >/dev/null; then
    # Jobs first, so no slurmstepd outlives its slurmd.
    scancel --quiet --user="$(id -un)" 2>/dev/null || true
    for _ in $(seq 50); do
      [[ -z "$(squeue -h -o %i 2>/dev/null || true)" ]] && break
      sleep 0.2
    done
  fi
  local name pid mdir=""
  [[ -s "$dir/munge_dir" ]] && mdir=$(<"$dir/munge_dir")
  for name in slurmd slurmctld munged; do
    # munged's command line names its own directory, the others name DIR (their slurm.conf)
    pid=$(alive_pid "$dir/pids/$name" "$name" "$([[ $name == munged ]] && echo "$mdir" || echo "$dir")") || {
      rm -f "$dir/pids/$name"
      continue
    }
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
    rm -f "$dir/pids/$name"
  done
  # the munge directory this instance created (its name is ours: /tmp/paratrain-munge.*)
  if [[ "$mdir" == /tmp/paratrain-munge.* && -d "$mdir" ]]; then
    rm -rf "$mdir" "$dir/munge_dir"
  fi
}

case "${1:-}" in
  start) [[ $# == 2 ]] || usage; start "$2" ;;
  stop) [[ $# == 2 ]] || usage; stop "$2" ;;
  check) check ;;
  *) usage ;;
esac
