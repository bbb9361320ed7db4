#!/usr/bin/env bash
# Benchmark (not a test) of the weight push on loopback, two "nodes" on one machine:
#   1. a synthetic multi-shard model (random bytes) pushed cold, then again after one shard changed in 1%
#      of its 4 MiB blocks, then once more with nothing changed (the re-stage of an unchanged model);
#   2. the same with `rsync -a --whole-file` over ssh (sshd on 127.0.0.2) for the cold copy and rsync's
#      delta algorithm over ssh for the changed shard;
#   3. the same over rsync's daemon protocol (rsync --daemon on 127.0.0.3).
# Prints one table: seconds, MB/s and payload bytes moved per method. Same run, same page cache state
# (sources warm: loopback measures the CPU cost of each protocol plus the destination's writes).
# Durability: our push is done when every file is fsynced and renamed; rsync never fsyncs, so each rsync
# also gets a "+ sync" row (its time plus the `sync` that puts its bytes on disk). Every method starts
# after a `sync`, so none pays for another's dirty pages. The destination disk's own ceiling (dd copies
# of the shards: page cache + fsync, O_DIRECT + fsync, and up to 4 O_DIRECT writers at once) is printed
# above the table.
#
#   scripts/bench-stage.sh [BUILD_DIR]      STAGE_BENCH_GIB=4 (model size; STAGE_BENCH_MIB overrides),
#                                           STAGE_BENCH_SHARDS=4, STAGE_BENCH_DIR=/tmp (where source and one
#                                           destination at a time live: 2x the model; /dev/shm takes the disk
#                                           and its fsyncs out, leaving the protocols' CPU cost),
#                                           STAGE_BENCH_BUFFERED_ROW=1 (also push with direct_io off),
#                                           STAGE_BENCH_RUNS=2 (cold copies per method; the best counts)
# Needs: root (sshd), rsync, openssh-server; the build's sparkctl and tests/staging_push/staging_push_bench.
set -euo pipefail

now() { date +%s.%N; }
BUILD=${1:-build}
GIB=${STAGE_BENCH_GIB:-4}
MIB=${STAGE_BENCH_MIB:-$((GIB * 1024))}
SHARDS=${STAGE_BENCH_SHARDS:-4}
SPARKCTL=$(realpath "$BUILD/bin/sparkctl")
PUSH=$(realpath "$BUILD/tests/staging_push/staging_push_bench")
for b in "$SPARKCTL" "$PUSH" /usr/sbin/sshd "$(command -v rsync)"; do
  [[ -x $b ]] || { echo "bench-stage: missing $b (build sparkctl staging_push_bench; install rsync openssh-server)" >&2; exit 2; }
done

W=$(mktemp -d "${STAGE_BENCH_DIR:-/tmp}/spk-bench-stage.XXXXXX")
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
SRC=$W/src
mkdir -p "$SRC"

shard_mib=$((MIB / SHARDS))
echo "bench-stage: writing a ${MIB} MiB model ($SHARDS shards of $shard_mib MiB) in $SRC" >&2
for i in $(seq 1 "$SHARDS"); do
  head -c $((shard_mib << 20)) /dev/urandom >"$SRC/model-$(printf %05d "$i")-of-$(printf %05d "$SHARDS").safetensors"
done
echo '{"model_type":"llama"}' >"$SRC/config.json"
echo '{}' >"$SRC/tokenizer.json"
sync  # the source's writeback must not run during the first method

# The disk's ceiling: dd copies of shards (page cache -> $W, 4 MiB writes), `writers` of them at once;
# total bytes / wall time until every copy is fsynced.
dd_rate() {  # $1 = dd flags, $2 = writers; prints MB/s
  local t0 t1 i n=0
  t0=$(now)
  for i in $(seq 1 "$2"); do
    dd if="$SRC/model-$(printf %05d "$i")-of-$(printf %05d "$SHARDS").safetensors" of="$W/dd.$i" bs=4M $1 status=none 2>/dev/null ||
      touch "$W/dd.failed" &
    n=$((n + shard_mib))
  done
  wait
  t1=$(now)
  if [[ -e $W/dd.failed ]]; then echo "n/a"; else echo "$(echo "$n * 1048576 / ($t1 - $t0) / 1000000" | bc)"; fi
  rm -f "$W"/dd.*
  sync
}

# --- sshd on 127.0.0.2 and rsync daemon on 127.0.0.3 ---
ssh-keygen -q -t ed25519 -N '' -f "$W/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$W/client_key"
cp "$W/client_key.pub" "$W/authorized_keys"
SSH_PORT=$((20000 + RANDOM % 20000))
cat >"$W/sshd_config" <<EOF
ListenAddress 127.0.0.2:$SSH_PORT
HostKey $W/host_key
AuthorizedKeysFile $W/authorized_keys
PasswordAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
PidFile $W/sshd.pid
EOF
mkdir -p /run/sshd
/usr/sbin/sshd -D -e -f "$W/sshd_config" 2>"$W/sshd.log" &
PIDS+=($!)
DAEMON_PORT=$((SSH_PORT + 1))
cat >"$W/rsyncd.conf" <<EOF
pid file = $W/rsyncd.pid
use chroot = no
[bench]
  path = $W/dst-daemon
  read only = no
  uid = root
  gid = root
EOF
rsync --daemon --no-detach --config="$W/rsyncd.conf" --address=127.0.0.3 --port="$DAEMON_PORT" &
PIDS+=($!)
sleep 1
SSH="ssh -i $W/client_key -p $SSH_PORT -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"

# rsync's "Total bytes sent" (wire bytes incl. its protocol) from --stats.
rsync_sent() { grep -E '^Total bytes sent' "$1" | tr -dc '0-9'; }

# --- our push: one stage-recv session per push, on 127.0.0.4 ---
PUSH_PORT=$((SSH_PORT + 2))
ours() {  # $1 = extra stage-recv input ("" or ',"direct_io":false'); prints "seconds bytes_sent"
  local token
  sync
  token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  echo "{\"root\":\"$W/dst-push\",\"token\":\"$token\",\"bind\":\"127.0.0.4\",\"port\":$PUSH_PORT$1}" |
    "$SPARKCTL" node stage-recv >"$W/recv.json" 2>"$W/recv.log" &
  local rpid=$!
  SPK_PUSH_TOKEN=$token "$PUSH" "$SRC" 127.0.0.4 "$PUSH_PORT" 4 >"$W/push.json"
  wait "$rpid"
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["seconds"], r["bytes_sent"])' "$W/push.json"
}
over_ssh() {  # $1 = extra rsync flags; prints "seconds seconds_until_synced bytes_sent"
  local t0 t1 t2
  sync
  t0=$(now)
  rsync -a $1 --stats -e "$SSH" "$SRC/" "root@127.0.0.2:$W/dst-ssh/" >"$W/rsync-ssh.stats"
  t1=$(now)
  sync
  t2=$(now)
  echo "$(echo "$t1 - $t0" | bc) $(echo "$t2 - $t0" | bc) $(rsync_sent "$W/rsync-ssh.stats")"
}
over_daemon() {
  local t0 t1 t2
  sync
  t0=$(now)
  rsync -a $1 --stats "$SRC/" "rsync://127.0.0.3:$DAEMON_PORT/bench/" >"$W/rsync-daemon.stats"
  t1=$(now)
  sync
  t2=$(now)
  echo "$(echo "$t1 - $t0" | bc) $(echo "$t2 - $t0" | bc) $(rsync_sent "$W/rsync-daemon.stats")"
}

TOTAL=$(du -sb "$SRC" | cut -f1)
BUFFERED_ROW=${STAGE_BENCH_BUFFERED_ROW:-1}
echo "bench-stage: disk ceiling (dd)" >&2
dd_writers=$((SHARDS < 4 ? SHARDS : 4))
dd_buffered=$(dd_rate conv=fsync 1)
dd_direct=$(dd_rate "oflag=direct conv=fsync" 1)
dd_direct_n=$(dd_rate "oflag=direct conv=fsync" "$dd_writers")
cat "$SRC"/* >/dev/null  # warm the page cache for every method alike
# The delta: 1% of the 4 MiB blocks of shard 1 (at least one) get 4 KiB of new bytes each. The same new
# bytes for every method; the originals are put back after each method's delta.
blocks=$((shard_mib / 4))
changed=$(((blocks + 99) / 100))
S1="$SRC/model-00001-of-$(printf %05d "$SHARDS").safetensors"
for k in $(seq 1 "$changed"); do
  off=$(((k * blocks / (changed + 1)) * 1024 + 7))
  dd if="$S1" of="$W/orig.$k" bs=4096 skip="$off" count=1 status=none
  head -c 4096 /dev/urandom >"$W/new.$k"
done
patch_s1() {  # $1 = orig | new
  local k
  for k in $(seq 1 "$changed"); do
    dd if="$W/$1.$k" of="$S1" bs=4096 count=1 seek=$(((k * blocks / (changed + 1)) * 1024 + 7)) conv=notrunc status=none
  done
  touch "$S1"
}

# One method: best of RUNS cold copies, each into an emptied destination (on a VM the first writer of
# fresh memory or disk blocks pays for the host's faults, whichever method that is), then the delta,
# the check that the destination equals the source, the same command again with nothing changed (the
# unchanged re-run: rsync's quick check skips every file), and the destination removed (the bench needs
# 2x the model, not 4x). Prints "cold-line|delta-line|unchanged-line" (lines: "seconds [seconds_synced]
# bytes"). The unchanged re-run starts with the destination's page cache dropped: a re-stage finds the
# worker's weights on disk, not in memory.
RUNS=${STAGE_BENCH_RUNS:-2}
method() {  # $1 = destination, $2 = cold command, $3 = delta command (empty: no delta)
  local dst=$1 best="" line r delta="- - -" same="- - -"
  for r in $(seq 1 "$RUNS"); do
    rm -rf "$dst" && mkdir -p "$dst"
    line=$(eval "$2")
    if [[ -z $best ]] || (($(echo "${line%% *} < ${best%% *}" | bc))); then best=$line; fi
  done
  if [[ -n $3 ]]; then
    patch_s1 new
    delta=$(eval "$3")
    diff -rq "$SRC" "$dst" >/dev/null || { echo "bench-stage: $dst differs from the source" >&2; touch "$W/differs"; }
    drop_dst_cache "$dst"
    same=$(eval "$3")
    patch_s1 orig
  fi
  rm -rf "$dst"
  sync
  echo "$best|$delta|$same"
}
# Evicts the destination's files from the page cache (fadvise DONTNEED through dd; the source stays warm).
drop_dst_cache() {
  local f
  sync
  find "$1" -type f | while read -r f; do dd if=/dev/null of="$f" oflag=nocache conv=notrunc,fdatasync count=0 status=none; done
}

echo "bench-stage: each method: best of $RUNS cold copies, then $changed of $blocks blocks of shard 1 changed" >&2
BUFFERED_ROW=${STAGE_BENCH_BUFFERED_ROW:-1}
if [[ $BUFFERED_ROW == 1 ]]; then
  IFS='|' read -r pc_cold pc_delta < <(method "$W/dst-push" "ours ',\"direct_io\":false'" "")
  read -r pc_cold_s pc_cold_b <<<"$pc_cold"
fi
IFS='|' read -r c d u < <(method "$W/dst-push" 'ours ""' 'ours ""')
read -r ours_cold_s ours_cold_b <<<"$c"
read -r ours_delta_s ours_delta_b <<<"$d"
read -r ours_same_s ours_same_b <<<"$u"
IFS='|' read -r c d u < <(method "$W/dst-ssh" 'over_ssh --whole-file' 'over_ssh ""')
read -r ssh_cold_s ssh_cold_sync ssh_cold_b <<<"$c"
read -r ssh_delta_s ssh_delta_sync ssh_delta_b <<<"$d"
read -r ssh_same_s ssh_same_sync ssh_same_b <<<"$u"
IFS='|' read -r c d u < <(method "$W/dst-daemon" 'over_daemon --whole-file' 'over_daemon ""')
read -r dmn_cold_s dmn_cold_sync dmn_cold_b <<<"$c"
read -r dmn_delta_s dmn_delta_sync dmn_delta_b <<<"$d"
read -r dmn_same_s dmn_same_sync dmn_same_b <<<"$u"
[[ ! -e $W/differs ]] || exit 1

row() {  # name cold_s cold_bytes delta_s delta_bytes unchanged_s unchanged_bytes
  printf "| %-37s | %8.2f | %9.0f | %8.2f | %12d | %6.2f%% | %11.2f | %9d |\n" "$1" "$2" \
    "$(echo "$TOTAL / $2 / 1000000" | bc -l)" "$4" "$5" "$(echo "100 * $5 / $TOTAL" | bc -l)" "$6" "$7"
}
ratio() { echo "scale=2; $2 / $1" | bc; }
echo
echo "model: $(numfmt --to=iec-i --suffix=B --round=nearest "$TOTAL") in $SHARDS shards under $W ($(df --output=fstype "$W" | tail -1)); cold: best of $RUNS; delta: $changed of $blocks 4 MiB blocks of one shard; loopback, $(nproc) cores"
echo "disk ceiling, dd of $shard_mib MiB shards: 1 writer page cache + fsync $dd_buffered MB/s, 1 writer O_DIRECT + fsync $dd_direct MB/s, $dd_writers writers O_DIRECT + fsync $dd_direct_n MB/s"
echo "| method                                |   cold s | cold MB/s |  delta s | delta bytes  | of tree | unchanged s | unch. B   |"
echo "| ------------------------------------- | -------- | --------- | -------- | ------------ | ------- | ----------- | --------- |"
row "sparkctl push (4 streams, fsynced)" "$ours_cold_s" "$ours_cold_b" "$ours_delta_s" "$ours_delta_b" "$ours_same_s" "$ours_same_b"
if [[ $BUFFERED_ROW == 1 ]]; then
  printf "| %-37s | %8.2f | %9.0f | %8s | %12s | %7s | %11s | %9s |\n" "sparkctl push, direct_io off" "$pc_cold_s" \
    "$(echo "$TOTAL / $pc_cold_s / 1000000" | bc -l)" - - - - -
fi
row "rsync -a --whole-file over ssh" "$ssh_cold_s" "$ssh_cold_b" "$ssh_delta_s" "$ssh_delta_b" "$ssh_same_s" "$ssh_same_b"
row "rsync over ssh + sync (durable)" "$ssh_cold_sync" "$ssh_cold_b" "$ssh_delta_sync" "$ssh_delta_b" "$ssh_same_sync" "$ssh_same_b"
row "rsync daemon protocol" "$dmn_cold_s" "$dmn_cold_b" "$dmn_delta_s" "$dmn_delta_b" "$dmn_same_s" "$dmn_same_b"
row "rsync daemon + sync (durable)" "$dmn_cold_sync" "$dmn_cold_b" "$dmn_delta_sync" "$dmn_delta_b" "$dmn_same_sync" "$dmn_same_b"
echo "(delta and unchanged rows of rsync use its delta algorithm and quick check, not --whole-file; rsync bytes = its 'Total bytes sent';"
echo " unchanged: the same command again with nothing changed, destination page cache dropped first)"
echo "cold speedup of sparkctl push: $(ratio "$ours_cold_s" "$ssh_cold_s")x rsync over ssh, $(ratio "$ours_cold_s" "$ssh_cold_sync")x rsync over ssh + sync, $(ratio "$ours_cold_s" "$dmn_cold_s")x rsync daemon, $(ratio "$ours_cold_s" "$dmn_cold_sync")x rsync daemon + sync"
