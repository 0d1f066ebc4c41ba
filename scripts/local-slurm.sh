#!/usr/bin/env bash
# A private single-node SLURM on this machine, for the `slurm` test tier and for trying the
# batch scripts in slurm/ before a real cluster. Debian/Ubuntu, as root, without systemd or
# cgroups.
#
#   scripts/local-slurm.sh install install (apt-get) SLURM and munge, if they are missing
#   scripts/local-slurm.sh up      install them, write the instance's configuration, start its
#                                  munged, slurmctld and slurmd, wait until the node is idle
#   scripts/local-slurm.sh down    stop the instance's daemons
#   scripts/local-slurm.sh status  say whether they run and what sinfo shows
#   scripts/local-slurm.sh env     print `export SLURM_CONF=...`: eval it to talk to the instance
#
# The instance is private: everything it has lives in $LOCAL_SLURM_DIR (default
# /var/lib/local-slurm): its slurm.conf (clients find it through SLURM_CONF, which this script
# exports for itself), its own plugstack.conf, its state, spool, pid and log files, and its own
# munged with its own key and socket (munge/). Its daemons listen on their own ports:
# $LOCAL_SLURM_PORT for slurmctld and the next one for slurmd (default: the first free pair from
# 16817 up, kept while the instance exists). So it runs beside a SLURM the machine already has
# (a login node, a workstation with its own cluster): it never reads or writes /etc/slurm, never
# uses the system's munge socket or key, and never touches SLURM's default ports 6817/6818.
#
# `up` is idempotent: with the daemons running it only waits for the node (and applies changed
# settings with `scontrol reconfigure`). Each `up` that starts slurmctld starts it with a clean
# job state (-c).
#
# Partitions (the same node in both):
#   normal  the default; its jobs can be pre-empted (PreemptMode=REQUEUE) with
#           GraceTime=$LOCAL_SLURM_GRACE_TIME s (default 60) between SIGTERM and SIGKILL
#   urgent  PriorityTier=10: its jobs pre-empt the normal partition's (preempt/partition_prio)
# LOCAL_SLURM_CRED_EXPIRE=N sets cred_expire=N (5 at least: SLURM ignores a smaller value): a
# requeued job is held N + 1 s before it may start again (SLURM's default: 120, so 121 s).
# LOCAL_SLURM_SCHED_INTERVAL=S: the scheduler looks at pending jobs every S s (default 5).
# LOCAL_SLURM_KILL_WAIT=S: KillWait, the seconds between the SIGTERM that ends a job (at its time
# limit, or when a pre-emption's GraceTime is over) and the SIGKILL (default 30, SLURM's).
# LOCAL_SLURM_SEND_USER_SIGNAL=1 adds SlurmctldParameters=preempt_send_user_signal (a
# pre-emption then sends the job's --signal, e.g. B:USR1, instead of SIGTERM to the steps).
set -euo pipefail

DIR="${LOCAL_SLURM_DIR:-/var/lib/local-slurm}"
CONF="$DIR/slurm.conf"
export SLURM_CONF="$CONF"
MUNGE_DIR="$DIR/munge"
MUNGE_SOCKET="$MUNGE_DIR/munge.socket"
MARK="# written by evo scripts/local-slurm.sh"
GRACE_TIME="${LOCAL_SLURM_GRACE_TIME:-60}"
FIRST_PORT=16817
PACKAGES=(slurmctld slurmd slurm-client munge libpmix2 libpmix-dev) # libpmix-dev: the libpmix.so that srun --mpi=pmix loads
PATH="$PATH:/usr/sbin:/sbin"                                          # munged, slurmd, mungekey

say() { echo "local-slurm: $*"; }
die() {
    echo "local-slurm: error: $*" >&2
    exit 1
}

running() { # running NAME: the daemon whose pid file is $DIR/NAME.pid is alive
    local pid
    pid="$(cat "$DIR/$1.pid" 2>/dev/null)" || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

install_packages() {
    local missing=() package
    for package in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null || die "no apt-get: install ${missing[*]} yourself"
    say "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

check_ours() {
    if [ -e "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
        die "$CONF exists and was not written by this script; not touching it (set LOCAL_SLURM_DIR to another directory)"
    fi
}

port_in_use() { # port_in_use PORT: something accepts connections on it
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

controller_port() { # the instance's slurmctld port: given, kept from its configuration, or the first free pair
    local port
    if [ -n "${LOCAL_SLURM_PORT:-}" ]; then
        echo "$LOCAL_SLURM_PORT"
        return 0
    fi
    port="$(sed -n 's/^SlurmctldPort=//p' "$CONF" 2>/dev/null || true)"
    if [ -n "$port" ]; then
        echo "$port"
        return 0
    fi
    for port in $(seq "$FIRST_PORT" 2 "$((FIRST_PORT + 200))"); do
        if ! port_in_use "$port" && ! port_in_use "$((port + 1))"; then
            echo "$port"
            return 0
        fi
    done
    die "no free pair of ports in $FIRST_PORT-$((FIRST_PORT + 201)); set LOCAL_SLURM_PORT"
}

render_config() { # the slurm.conf for this node and these settings, on stdout
    local node cpus sockets cores threads memory port auth sched
    node="$(hostname -s)"
    port="$(controller_port)"
    # the node's real shape, as slurmd sees it (CPUs, sockets, cores, memory in MB)
    read -r cpus sockets cores threads memory < <(slurmd -C | awk '/^NodeName/ {
        for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        print v["CPUs"], v["Boards"] * v["SocketsPerBoard"], v["CoresPerSocket"], v["ThreadsPerCore"], v["RealMemory"] }')
    sched="${LOCAL_SLURM_SCHED_INTERVAL:-5}"
    auth="socket=$MUNGE_SOCKET"
    [ -n "${LOCAL_SLURM_CRED_EXPIRE:-}" ] && auth="$auth,cred_expire=$LOCAL_SLURM_CRED_EXPIRE"
    cat <<EOF
$MARK; \`scripts/local-slurm.sh up\` rewrites it.
# A private instance: clients reach it with SLURM_CONF=$CONF.
ClusterName=evolocal
SlurmctldHost=$node
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
# its own munged (socket and key in $MUNGE_DIR), for authentication and job credentials
AuthType=auth/munge
AuthInfo=$auth
CryptoType=crypto/munge
PlugStackConfig=$DIR/plugstack.conf
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/slurmd
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
# no systemd and no cgroups here: follow processes through /proc, no task binding
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
# one job per node at a time: a job in the urgent partition always has to pre-empt
SelectType=select/linear
SchedulerType=sched/backfill
# look at pending jobs every $sched s (default 30 s and 60 s), so a requeued job starts soon after its hold
SchedulerParameters=bf_interval=$sched,sched_interval=$sched
# pre-emption by partition: urgent jobs requeue normal ones after their GraceTime
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
KillWait=${LOCAL_SLURM_KILL_WAIT:-30}
$([ -n "${LOCAL_SLURM_SEND_USER_SIGNAL:-}" ] && echo "SlurmctldParameters=preempt_send_user_signal")
NodeName=$node CPUs=$cpus Sockets=$sockets CoresPerSocket=$cores ThreadsPerCore=$threads RealMemory=$memory State=UNKNOWN
PartitionName=normal Nodes=$node Default=YES MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE GraceTime=$GRACE_TIME
PartitionName=urgent Nodes=$node MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF
EOF
}

write_config() {
    local rendered
    check_ours
    mkdir -p "$DIR/state" "$DIR/slurmd" "$DIR/log"
    rendered="$(render_config)"
    printf '%s\n' "$rendered" >"$CONF"
    : >"$DIR/plugstack.conf" # no SPANK plugins (and the system's plugstack.conf is not read)
}

munge_works() {
    munge --socket="$MUNGE_SOCKET" -n 2>/dev/null | unmunge --socket="$MUNGE_SOCKET" >/dev/null 2>&1
}

start_munge() {
    munge_works && return 0
    mkdir -p "$MUNGE_DIR"
    [ -s "$MUNGE_DIR/munge.key" ] || mungekey --create --keyfile="$MUNGE_DIR/munge.key"
    chown -R munge:munge "$MUNGE_DIR"
    chmod 0755 "$MUNGE_DIR" # clients reach the socket through it; the key stays 0400
    chmod 0400 "$MUNGE_DIR/munge.key"
    rm -f "$MUNGE_SOCKET"
    runuser -u munge -- munged --socket="$MUNGE_SOCKET" --key-file="$MUNGE_DIR/munge.key" \
        --pid-file="$MUNGE_DIR/munged.pid" --log-file="$MUNGE_DIR/munged.log" --seed-file="$MUNGE_DIR/munged.seed"
    local _
    for _ in $(seq 50); do
        if munge_works; then
            cp "$MUNGE_DIR/munged.pid" "$DIR/munged.pid"
            return 0
        fi
        sleep 0.1
    done
    die "munged did not start; see $MUNGE_DIR/munged.log"
}

wait_idle() {
    local _ state=""
    for _ in $(seq 150); do
        state="$(sinfo -h -N -p normal -o %t 2>/dev/null | head -n 1)"
        case "$state" in
            idle | mix | alloc) return 0 ;;
            down* | drain*) scontrol update NodeName="$(hostname -s)" State=RESUME 2>/dev/null || true ;;
        esac
        sleep 0.2
    done
    die "the node is not idle after 30 s (sinfo: '${state}'); see $DIR/log/slurmctld.log and slurmd.log"
}

up() {
    [ "$(id -u)" -eq 0 ] || die "run as root (it installs packages and starts daemons)"
    install_packages
    check_ours
    if running slurmctld && running slurmd; then
        if [ "$(render_config)" != "$(cat "$CONF" 2>/dev/null)" ]; then # other settings asked for
            write_config
            scontrol reconfigure
            say "reconfigured"
        fi
        wait_idle
        say "already up"
        return 0
    fi
    down quiet
    write_config
    start_munge
    slurmctld -c
    slurmd
    wait_idle
    say "up: $(sinfo -h -o '%P %a %D %t' | tr '\n' ' ')(SLURM_CONF=$CONF; logs in $DIR/log)"
}

down() {
    local name pid _
    if running slurmctld; then # end the jobs first, so that no slurmstepd outlives slurmd
        squeue -h -o %i | xargs -r scancel
        for _ in $(seq 100); do
            [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
            sleep 0.1
        done
    fi
    for name in slurmd slurmctld munged; do
        running "$name" || continue
        pid="$(cat "$DIR/$name.pid")"
        kill -TERM "$pid"
        for _ in $(seq 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            echo "local-slurm: $name ($pid) did not stop in 10 s; killing it" >&2
            kill -KILL "$pid"
        fi
        rm -f "$DIR/$name.pid"
    done
    [ "${1:-}" = quiet ] || say "down"
}

status() {
    local name
    for name in munged slurmctld slurmd; do
        if running "$name"; then say "$name runs ($(cat "$DIR/$name.pid"))"; else say "$name stopped"; fi
    done
    say "SLURM_CONF=$CONF"
    sinfo 2>/dev/null || true
}

case "${1:-}" in
    install)
        [ "$(id -u)" -eq 0 ] || die "run as root (it installs packages)"
        install_packages
        ;;
    up) up ;;
    down) down ;;
    status) status ;;
    env) echo "export SLURM_CONF=$CONF" ;;
    *)
        echo "usage: $0 install|up|down|status|env" >&2
        exit 2
        ;;
esac
