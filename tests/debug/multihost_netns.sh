#!/bin/sh
# multihost_netns.sh STAGESCOPE CONFIG [TORCHRUN]: a multimodule run split across two "hosts".
#
# Two network namespaces joined by a veth pair (10.200.0.1 and 10.200.0.2, addresses that
# exist only inside the namespaces) stand in for two machines.  Rank 0 (the encoder) runs on
# host A and hosts the TCPStore; ranks 1-2 (the llm pipeline) run on host B.  Every rank is a
# plain `stagescope worker` with the torchrun environment (RANK, WORLD_SIZE, MASTER_ADDR,
# MASTER_PORT) and nothing else: each rank finds the address it advertises to Gloo by itself
# (the local address of its route to MASTER_ADDR), no STAGESCOPE_GLOO_HOST.  Each host writes its
# shards next to a run file path in its own directory; `stagescope merge --config` then
# creates the run file and merges them, and the transfer checksums must equal those of the
# same config run on one host (`stagescope run`, then `check --against`).
# Host B's monotonic clock is 5000 s ahead (a time namespace, where the kernel has them): the
# ranks' clock offsets must be estimated within their uncertainty and the merged run must be
# on one timeline.  Then the same hosts are launched by TORCHRUN (two nodes, the agent's
# store), once to completion and once with rank 2 SIGKILLed on host B (every survivor and merge
# must name it, not a hang), and finally host B's ranks are forced onto loopback, which must be
# diagnosed at rendezvous.
# Exit 77 (CTest SKIP) where namespaces cannot be created (not root, no CAP_NET_ADMIN).
set -u
exe=$1
config=$2
torchrun=${3:-}  # optional: torchrun from the project's venv (the torchrun phase is skipped without)
tag=$$
nsA=stagescope-a-$tag
nsB=stagescope-b-$tag
work=$(mktemp -d "${TMPDIR:-/tmp}/stagescope-netns-XXXXXX")

if ! command -v ip >/dev/null 2>&1; then
  echo "SKIP: the 'ip' tool (iproute2) is not installed"
  exit 77
fi
if ! ip netns add "$nsA" 2>"$work/netns.err"; then
  echo "SKIP: cannot create a network namespace: $(cat "$work/netns.err") (needs root / CAP_NET_ADMIN)"
  rm -rf "$work"
  exit 77
fi

cleanup() {
  for ns in "$nsA" "$nsB"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

fail() {
  echo "FAIL: $*"
  for f in "$work"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -20 "$f"; }; done
  exit 1
}

ip netns add "$nsB" || fail "ip netns add $nsB"
ip link add "ssa$tag" type veth peer name "ssb$tag" || fail "ip link add veth"
ip link set "ssa$tag" netns "$nsA" || fail "move veth end to $nsA"
ip link set "ssb$tag" netns "$nsB" || fail "move veth end to $nsB"
ip -n "$nsA" addr add 10.200.0.1/24 dev "ssa$tag" || fail "address in $nsA"
ip -n "$nsB" addr add 10.200.0.2/24 dev "ssb$tag" || fail "address in $nsB"
for ns in "$nsA" "$nsB"; do
  ip -n "$ns" link set lo up
done
ip -n "$nsA" link set "ssa$tag" up
ip -n "$nsB" link set "ssb$tag" up
if command -v ping >/dev/null 2>&1; then
  ip netns exec "$nsA" ping -c 1 -W 2 10.200.0.2 >/dev/null 2>&1 || fail "no route between the namespaces"
fi

# The config with a generous timeout: the hosts start their ranks independently.
sed 's/^timeout_seconds = .*/timeout_seconds = 60/' "$config" >"$work/config.toml"
# hostA/ and hostB/ are not made here: each host's workers create the folder of their -o.
mkdir -p "$work/merged" "$work/single"
port=29500

# Each host also gets its own host name where a UTS namespace can be made (recorded per rank).
uts=""
if command -v unshare >/dev/null 2>&1 && unshare --uts true 2>/dev/null; then uts="unshare --uts"; fi

# Host B's clocks: where a time namespace can be made, host B "booted" 5000 s before host A
# (CLOCK_MONOTONIC shifted by +5000 s), so the ranks must align their clocks at rendezvous.
shift_s=5000
timens_ok=""
if unshare --time --monotonic $shift_s --fork true 2>/dev/null; then timens_ok=1; fi
timens() {
  case "$1" in *hostB) [ -n "$timens_ok" ] && echo "unshare --time --monotonic $shift_s --fork" ;; esac
}

# worker NS HOSTDIR RANK [VAR=VALUE...]
worker() {
  ns=$1 hostdir=$2 r=$3
  shift 3
  ip netns exec "$ns" $uts $(timens "$hostdir") env -u STAGESCOPE_GLOO_HOST -u GLOO_SOCKET_IFNAME RANK="$r" \
    LOCAL_RANK="$r" WORLD_SIZE=3 MASTER_ADDR=10.200.0.1 MASTER_PORT=$port "$@" \
    HOSTDIR="$hostdir" EXE="$exe" OUT="$work/$hostdir/run.db" CFG="$work/config.toml" UTS="$uts" \
    sh -c '[ -n "$UTS" ] && hostname "stagescope-${HOSTDIR##*/}"; exec "$EXE" worker "$CFG" --out "$OUT"' \
    >"$work/rank$r.log" 2>&1
}

start=$(date +%s)
worker "$nsA" hostA 0 &
p0=$!
worker "$nsB" hostB 1 &
p1=$!
worker "$nsB" hostB 2 &
p2=$!
rc=0
for p in $p0 $p1 $p2; do wait "$p" || rc=1; done
[ $rc -eq 0 ] || fail "a rank failed"
echo "ranks finished in $(( $(date +%s) - start )) s: rank 0 in $nsA (10.200.0.1), ranks 1-2 in $nsB (10.200.0.2)"
grep -h "iteration" "$work"/rank*.log

# Each host wrote its own shards next to its own run file path.
[ -f "$work/hostA/run.db.rank0.shard" ] || fail "host A has no shard for rank 0"
[ -f "$work/hostB/run.db.rank1.shard" ] && [ -f "$work/hostB/run.db.rank2.shard" ] ||
  fail "host B has no shards for ranks 1-2"
ls "$work/hostA" "$work/hostB"

"$exe" merge "$work/merged/run.db" "$work/hostA/run.db.rank0.shard" \
  "$work/hostB/run.db.rank1.shard" "$work/hostB/run.db.rank2.shard" \
  --config "$work/config.toml" || fail "merge --config"

"$exe" run "$work/config.toml" -o "$work/single/run.db" -q || fail "single-host run"

# Same transfers, same checksums, same gradients and losses, bitwise.
"$exe" check "$work/merged/run.db" --against "$work/single/run.db" || fail "check --against"
if command -v sqlite3 >/dev/null 2>&1; then
  echo "merged run, rank -> host:"
  sqlite3 "$work/merged/run.db" "SELECT rank, host FROM ranks ORDER BY rank"
fi
echo "transfer checksums equal to the single-host run"

# One timeline: host B's ranks measured its +5000 s offset at rendezvous, within the recorded
# uncertainty, and the merged run's bubble is the one-host run's, give or take a few points.
if [ -n "$timens_ok" ] && command -v sqlite3 >/dev/null 2>&1; then
  echo "clock offsets (rank, recorded offset ns, estimate):"
  sqlite3 "$work/merged/run.db" "SELECT rank, clock_offset_ns FROM ranks ORDER BY rank"
  sqlite3 "$work/merged/run.db" "SELECT rank, message FROM diagnoses WHERE kind = 'clock' ORDER BY rank, rowid"
  for r in 1 2; do
    off=$(sqlite3 "$work/merged/run.db" "SELECT clock_offset_ns FROM ranks WHERE rank = $r")
    unc=$(sqlite3 "$work/merged/run.db" "SELECT CAST(substr(message, instr(message, '+- ') + 3) AS INTEGER) FROM diagnoses WHERE kind = 'clock' AND rank = $r AND message LIKE '%(start)%'")
    err=$(( off - shift_s * 1000000000 ))
    [ ${err#-} -le $(( unc + 1000000 )) ] ||
      fail "rank $r: offset $off ns, true ${shift_s}e9 ns, error $err ns beyond uncertainty $unc ns (+1 ms)"
    echo "rank $r: true offset ${shift_s}000000000 ns, estimate $off ns, error $err ns, uncertainty +- $unc ns"
  done
  off0=$(sqlite3 "$work/merged/run.db" "SELECT clock_offset_ns FROM ranks WHERE rank = 0")
  [ "$off0" = 0 ] || fail "rank 0 (the reference) has offset $off0"
  "$exe" compare "$work/single/run.db" "$work/merged/run.db" >"$work/compare.txt" 2>&1
  # Without alignment, host B's spans sat 5000 s after host A's (median step ~5,000,000 ms,
  # bubble 100 %).  The bound below is that gross error, not a speed claim.
  grep -E "step time|bubble measured" "$work/compare.txt"
  step=$(grep "step time (median)" "$work/compare.txt" | awk -F'|' '{print $4}' | tr -dc '0-9.')
  awk -v s="$step" 'BEGIN { exit !(s != "" && s < 60000) }' ||
    fail "merged run's median step time is '$step' ms: the ranks are not on one timeline"
  # The exported trace spans the run, not the 5000 s between the hosts' boots.
  "$exe" export "$work/merged/run.db" --chrome-trace "$work/trace.json" >/dev/null ||
    fail "export of the merged run"
  if command -v python3 >/dev/null 2>&1; then
    span=$(python3 -c 'import json,sys; e=[x for x in json.load(open(sys.argv[1]))["traceEvents"] if x.get("ph")=="X"]; print(int((max(x["ts"]+x["dur"] for x in e)-min(x["ts"] for x in e))/1e6))' "$work/trace.json")
    echo "exported trace spans $span s"
    [ "$span" -lt 60 ] || fail "the exported trace spans $span s: the hosts are not on one timeline"
  fi
fi

# The same two hosts launched by torchrun (static rendezvous: node 0 = host A with 1 rank, node 1
# = host B, in its time namespace, with 2 ranks).  The ranks use the agent's store
# (TORCHELASTIC_USE_AGENT_STORE), so nothing may log a bind error; merge, then bitwise equal.
if [ -n "$torchrun" ] && [ -x "$torchrun" ]; then
  mkdir -p "$work/tr/hostA" "$work/tr/hostB"
  node() {  # node NS HOSTDIR NODE_RANK NPROC
    ip netns exec "$1" $uts $(timens "$2") env -u STAGESCOPE_GLOO_HOST -u GLOO_SOCKET_IFNAME \
      HOSTDIR="$2" UTS="$uts" TR="$torchrun" NR="$3" NP="$4" EXE="$exe" CFG="$work/config.toml" \
      OUT="$work/$2/run.db" \
      sh -c '[ -n "$UTS" ] && hostname "stagescope-${HOSTDIR##*/}"; exec "$TR" --nnodes 2 \
        --nproc-per-node "$NP" --node-rank "$NR" --master-addr 10.200.0.1 --master-port 29510 \
        --rdzv-id nstest --no-python "$EXE" worker "$CFG" --out "$OUT"' \
      >"$work/node$3.log" 2>&1
  }
  node "$nsA" tr/hostA 0 1 &
  n0=$!
  node "$nsB" tr/hostB 1 2 &
  n1=$!
  wait $n0 || fail "torchrun node 0 failed"
  wait $n1 || fail "torchrun node 1 failed"
  ! grep -l "failed to bind" "$work"/node*.log || fail "a torchrun rank logged a bind error"
  "$exe" merge "$work/tr/merged.db" "$work"/tr/hostA/run.db.rank*.shard \
    "$work"/tr/hostB/run.db.rank*.shard --config "$work/config.toml" || fail "merge of torchrun shards"
  "$exe" check "$work/tr/merged.db" --against "$work/single/run.db" >"$work/tr/check.txt" 2>&1 ||
    fail "torchrun run differs from the single-host run: $(tail -3 "$work/tr/check.txt")"
  if command -v sqlite3 >/dev/null 2>&1; then
    echo "torchrun run: rank, host, clock offset ns:"
    sqlite3 "$work/tr/merged.db" "SELECT rank, host, clock_offset_ns FROM ranks ORDER BY rank"
  fi
  echo "torchrun across the two hosts: completed, bitwise equal to the single-host run"

  # A rank killed on one host under torchrun: rank 2 (host B) SIGKILLs itself in iteration 1 and
  # records nothing.  Rank 1 (same host) finds its process gone; rank 0 (host A) sees its
  # heartbeat stop.  Each survivor's first line names rank 2 and its fate (never a hang), and
  # merge marks the run failed with rank 2 as the cause.
  mkdir -p "$work/kill/hostA" "$work/kill/hostB"
  cp "$work/config.toml" "$work/kill.toml"
  printf '\n[[faults]]\nkind = "kill"\nrank = 2\niteration = 1\n' >>"$work/kill.toml"
  knode() {  # knode NS HOSTDIR NODE_RANK NPROC
    ip netns exec "$1" $uts $(timens "$2") env -u STAGESCOPE_GLOO_HOST -u GLOO_SOCKET_IFNAME \
      HOSTDIR="$2" UTS="$uts" TR="$torchrun" NR="$3" NP="$4" EXE="$exe" CFG="$work/kill.toml" \
      OUT="$work/$2/run.db" LOGS="$work/$2/logs" \
      sh -c '[ -n "$UTS" ] && hostname "stagescope-${HOSTDIR##*/}"; exec "$TR" --nnodes 2 \
        --nproc-per-node "$NP" --node-rank "$NR" --master-addr 10.200.0.1 --master-port 29520 \
        --rdzv-id nskill --log-dir "$LOGS" --redirects 3 --no-python "$EXE" worker "$CFG" --out "$OUT"' \
      >"$work/knode$3.log" 2>&1
  }
  start=$(date +%s)
  knode "$nsA" kill/hostA 0 1 &
  n0=$!
  knode "$nsB" kill/hostB 1 2 &
  n1=$!
  wait $n0 && fail "torchrun node 0 succeeded although rank 2 was killed"
  wait $n1 && fail "torchrun node 1 succeeded although rank 2 was killed"
  echo "killed rank 2 on host B: both torchrun nodes failed after $(( $(date +%s) - start )) s"
  # survivor RANK HOSTDIR LOCAL_RANK WHAT: its first line names rank 2's death (WHAT: how it saw it)
  survivor() {
    log=$(find "$work/$2/logs" -path "*/attempt_0/$3/stderr.log" | head -n 1)
    [ -n "$log" ] || fail "rank $1 left no stderr log under $work/$2/logs"
    # The first line of stagescope's (torch's own c10 log lines, "[W1201 12:04:11.96 socket.cpp:207]
    # ...", e.g. a reverse DNS lookup that fails inside the namespaces, are not ours to order).
    first=$(grep -v '^\[[WIE][0-9]' "$log" | grep -m 1 .)
    echo "rank $1: $first"
    case "$first" in
      "stagescope: rank $1: root cause: rank 2 (host "*"stopped heartbeating at "*"without a record of why") ;;
      *) fail "rank $1's first line does not name rank 2's death: $first" ;;
    esac
    case "$first" in *"$4"*) ;; *) fail "rank $1 does not say '$4'" ;; esac
  }
  survivor 1 kill/hostB 0 "process gone"
  if [ -n "$uts" ]; then
    survivor 0 kill/hostA 0 "silent for"  # another host: no /proc to look at, the heartbeat stopped
  else
    survivor 0 kill/hostA 0 "rank 2 (host "
  fi
  "$exe" merge "$work/kill/merged.db" "$work"/kill/hostA/run.db.rank*.shard \
    "$work"/kill/hostB/run.db.rank*.shard --config "$work/kill.toml" >"$work/kill/merge.txt" 2>&1
  mrc=$?
  cat "$work/kill/merge.txt"
  [ $mrc -eq 10 ] || fail "merge of the killed run: exit $mrc, expected 10"
  grep -q "run failed: rank 2 (host .*stopped heartbeating" "$work/kill/merge.txt" ||
    fail "merge does not name rank 2 as the cause"
  ! grep -q "run hung" "$work/kill/merge.txt" || fail "merge calls the killed run a hang"
else
  echo "torchrun phase skipped (no torchrun given)"
fi

# A rank frozen on host B (SIGSTOP: its sockets stay open, nothing tells its peers) while rank 0
# on host A waits on it: rank 0's heartbeat thread sees rank 1's heartbeat stop and stops rank 0
# within seconds, naming rank 1, instead of waiting out timeout_seconds (60 s).
if command -v sqlite3 >/dev/null 2>&1; then
  mkdir -p "$work/stop/hostA" "$work/stop/hostB"
  sed 's/^iterations = .*/iterations = 400/' "$work/config.toml" >"$work/long.toml"
  port=29502
  stopworker() {  # like worker, with the long config
    ip netns exec "$1" $uts $(timens "$2") env -u STAGESCOPE_GLOO_HOST -u GLOO_SOCKET_IFNAME \
      RANK="$3" LOCAL_RANK="$3" WORLD_SIZE=3 MASTER_ADDR=10.200.0.1 MASTER_PORT=$port \
      HOSTDIR="$2" EXE="$exe" OUT="$work/$2/run.db" CFG="$work/long.toml" UTS="$uts" \
      sh -c '[ -n "$UTS" ] && hostname "stagescope-${HOSTDIR##*/}"; exec "$EXE" worker "$CFG" --out "$OUT"' \
      >"$work/stop$3.log" 2>&1
  }
  stopworker "$nsA" stop/hostA 0 &
  p0=$!
  stopworker "$nsB" stop/hostB 1 &
  stopworker "$nsB" stop/hostB 2 &
  # Rank 1's pid, from its shard's rank row, once the run has done two iterations (rank 2, the
  # last stage, prints the losses).
  pid1=""
  for _ in $(seq 1 240); do
    if grep -q "^iteration 2 " "$work/stop2.log" 2>/dev/null; then
      pid1=$(sqlite3 "$work/stop/hostB/run.db.rank1.shard" "SELECT pid FROM ranks WHERE rank = 1" 2>/dev/null)
      [ -n "$pid1" ] && break
    fi
    sleep 0.5
  done
  [ -n "$pid1" ] || fail "rank 1 of the long run did not reach iteration 2"
  kill -STOP "$pid1"
  stopped=$(date +%s)
  # Rank 0 says so at once when it gives up; it hosts the store, so its process then stays until
  # its peers have ended (rank 2 waits on the frozen rank until its timeout): the bound is on
  # the diagnosis, then host B's ranks are killed and rank 0 exits.
  for _ in $(seq 1 120); do
    grep -q "which stopped heartbeating" "$work/stop0.log" && break
    sleep 0.5
  done
  took=$(( $(date +%s) - stopped ))
  kill -KILL "$pid1" 2>/dev/null
  for pid in $(ip netns pids "$nsB" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
  wait $p0
  rc0=$?
  echo "rank 1 frozen (SIGSTOP, pid $pid1): rank 0 gave up on it after $took s (exit $rc0):"
  grep -v "^iteration" "$work/stop0.log" | head -n 2
  [ $rc0 -eq 3 ] || fail "rank 0 exit $rc0, expected 3 (it lost its peer)"
  first=$(grep -v -e "^iteration" -e '^\[[WIE][0-9]' "$work/stop0.log" | grep -m 1 .)
  case "$first" in
    "stagescope: rank 0: root cause: rank 1 (host "*"stopped heartbeating at "*) ;;
    *) fail "rank 0's first line does not name rank 1: $first" ;;
  esac
  grep -q "waits on rank 1 (.*), which stopped heartbeating: gave up before timeout_seconds = 60" \
    "$work/stop0.log" || fail "rank 0 does not say it gave up on rank 1 before the timeout"
  # The bound is the gross one (not a speed claim): well inside the 60 s timeout.
  [ "$took" -lt 50 ] || fail "rank 0 needed $took s to notice rank 1 stopped (timeout 60 s)"
fi

# Host B's ranks forced onto loopback (GLOO_SOCKET_IFNAME=lo) while rank 0 is on host A: every
# rank stops at rendezvous with the one line that says so, long before the 60 s timeout.
mkdir -p "$work/loop/hostA" "$work/loop/hostB"
port=29501
start=$(date +%s)
worker "$nsA" loop/hostA 0 &
p0=$!
worker "$nsB" loop/hostB 1 GLOO_SOCKET_IFNAME=lo &
p1=$!
worker "$nsB" loop/hostB 2 GLOO_SOCKET_IFNAME=lo &
p2=$!
for p in $p0 $p1 $p2; do wait "$p" && fail "a rank advertising loopback to a remote peer succeeded"; done
took=$(( $(date +%s) - start ))
for r in 0 1 2; do
  grep -q "advertises the loopback address" "$work/rank$r.log" ||
    fail "rank $r does not say that a rank advertises loopback"
done
echo "loopback advertised to a remote peer: every rank stopped after $took s with:"
grep "advertises" "$work/rank0.log"
[ "$took" -lt 50 ] || fail "the loopback diagnosis took $took s (timeout 60 s)"
echo "PASS"
