#!/usr/bin/env bash
# A single-host Slurm cluster for `make test-slurm`: two node names (node1, node2) on loopback, one CPU each, in
# partition `debug`, everything under DIR (default /tmp/bench-slurm). Nothing global but munge's key and run folder.
#   scripts/slurm_cluster.sh start [DIR]   install slurm-wlm and munge where missing (apt-get, root), start munged,
#                                          slurmctld and two slurmd; prints `export SLURM_CONF=...` when ready
#   scripts/slurm_cluster.sh stop [DIR]    cancel every job, stop what start started
# Exit code 3: the packages cannot be installed here (not root, or no apt-get): the caller skips with that reason.
set -euo pipefail
action=${1:?start or stop}
dir=${2:-/tmp/bench-slurm}
conf=$dir/etc/slurm.conf
export SLURM_CONF=$conf

install() {
  command -v slurmctld >/dev/null && command -v munged >/dev/null && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "slurm-wlm and munge are not installed, and installing them needs root and apt-get" >&2
    exit 3
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >/dev/null || {
    echo "apt-get install slurm-wlm munge failed" >&2; exit 3; }
}

write_conf() {
  mkdir -p "$dir"/{etc,state,spool,log}
  cat > "$conf" <<CONF
ClusterName=bench
SlurmctldHost=localhost
SlurmctldPort=16817
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/jobcomp.txt
MinJobAge=300
EnforcePartLimits=ALL
NodeName=node1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=16818 CPUs=1 State=UNKNOWN
NodeName=node2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=16819 CPUs=1 State=UNKNOWN
PartitionName=debug Nodes=node1,node2 Default=YES MaxTime=INFINITE State=UP
CONF
}

start() {
  install
  write_conf
  mkdir -p /run/munge && chown munge:munge /run/munge
  if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged
  fi
  slurmctld
  slurmd -N node1
  slurmd -N node2
  for _ in $(seq 120); do
    if [ "$(sinfo -h -N -o '%N %t' 2>/dev/null | grep -c ' idle$')" = 2 ]; then
      echo "export SLURM_CONF=$conf"
      return 0
    fi
    sleep 0.5
  done
  echo "the cluster did not come up: $(sinfo -N 2>&1 | tr '\n' ' ')" >&2
  stop
  exit 1
}

stop() {
  scancel --state=PENDING,RUNNING 2>/dev/null || true
  scontrol shutdown 2>/dev/null || true
  sleep 2
  for f in "$dir"/slurmd-node1.pid "$dir"/slurmd-node2.pid "$dir"/slurmctld.pid /run/munge/munged.pid; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
  done
  for _ in $(seq 20); do
    pgrep -x slurmctld >/dev/null || pgrep -x slurmd >/dev/null || pgrep -x munged >/dev/null || return 0
    sleep 0.5
  done
}

"$action"
