#!/usr/bin/env bash
# A real Slurm cluster on one machine, for tests: a controller (slurmctld)
# and N compute daemons (slurmd), each daemon in its own network namespace
# with its own address on a bridge, so each "node" is reached as on a real
# cluster. Debian's slurm-wlm and munge; needs root.
#
#   testcluster.sh up DIR N     start it; DIR/env holds what the tests read
#   testcluster.sh down DIR     stop every daemon, remove the namespaces
set -euo pipefail
cmd=${1:?up|down}; dir=$(realpath -m "${2:?dir}")
tag=$(printf '%s' "$dir" | md5sum | cut -c1-6)
br=prbr$tag
ns() { echo "prn$tag-$1"; }

down() {
  # Everything started from this directory's config, socket or jobs.
  pkill -9 -f -- "$dir/slurm.conf" 2>/dev/null || true
  pkill -9 -f -- "--socket $dir/munge/munge.socket" 2>/dev/null || true
  for n in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^prn$tag-" || true); do
    for p in $(ip netns pids "$n" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
    ip netns del "$n" 2>/dev/null || true
  done
  ip link del "$br" 2>/dev/null || true
}

if [ "$cmd" = down ]; then down; exit 0; fi
n=${3:?number of nodes}
mkdir -p "$dir"/{state,log,munge}
down
host=$(hostname -s)
ip link add "$br" type bridge
ip addr add 10.77.0.1/24 dev "$br"
ip link set "$br" up
nodes=""
for i in $(seq 1 "$n"); do
  ip netns add "$(ns $i)"
  ip link add "pv$tag$i" type veth peer name eth0 netns "$(ns $i)"
  ip link set "pv$tag$i" master "$br"
  ip link set "pv$tag$i" up
  ip netns exec "$(ns $i)" ip addr add "10.77.0.$((10 + i))/24" dev eth0
  ip netns exec "$(ns $i)" ip link set eth0 up
  ip netns exec "$(ns $i)" ip link set lo up
  nodes="$nodes node$i"
  echo "NodeName=node$i NodeAddr=10.77.0.$((10 + i)) NodeHostname=$host CPUs=$(nproc) Boards=1 SocketsPerBoard=1 CoresPerSocket=$(nproc) ThreadsPerCore=1 State=UNKNOWN" >> "$dir/nodes.conf.tmp"
done

# munge: its own key and socket.
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 0400 "$dir/munge/munge.key"
chmod 0700 "$dir/munge"
munged --force --key-file "$dir/munge/munge.key" --socket "$dir/munge/munge.socket" \
  --pid-file "$dir/munge/munged.pid" --log-file "$dir/log/munged.log" --seed-file "$dir/munge/seed"

cat > "$dir/slurm.conf" <<CONF
ClusterName=prorltest
SlurmctldHost=$host(10.77.0.1)
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/state/slurmd-%n
SlurmctldPidFile=$dir/state/slurmctld.pid
SlurmdPidFile=$dir/state/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/linear
MpiDefault=none
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=5
$(cat "$dir/nodes.conf.tmp")
PartitionName=main Nodes=$(echo $nodes | tr ' ' ',') Default=YES MaxTime=INFINITE State=UP
CONF
rm -f "$dir/nodes.conf.tmp"
export SLURM_CONF="$dir/slurm.conf"
slurmctld -f "$SLURM_CONF" -i
for i in $(seq 1 "$n"); do
  mkdir -p "$dir/state/slurmd-node$i"
  # nsenter, not ip netns exec: that one mounts a fresh /sys, without
  # the cgroup file systems slurmd looks for.
  nsenter --net="/var/run/netns/$(ns $i)" env SLURM_CONF="$SLURM_CONF" slurmd -f "$SLURM_CONF" -N "node$i"
done
# Wait until every node is idle.
for _ in $(seq 1 100); do
  idle=$(sinfo -h -N -o '%T' 2>/dev/null | grep -c idle || true)
  [ "$idle" = "$n" ] && break
  sleep 0.2
done
sinfo -N
{
  echo "SLURM_CONF=$SLURM_CONF"
  for i in $(seq 1 "$n"); do echo "NODE${i}_NS=$(ns $i)"; echo "NODE${i}_ADDR=10.77.0.$((10 + i))"; done
} > "$dir/env"
