#!/usr/bin/env bash
# Benchmark (not a test) of the weight push on loopback, two "nodes" on one machine:
#   1. a synthetic multi-shard model (random bytes) pushed cold, then again after one shard changed in 1%
#      of its 4 MiB blocks;
#   2. the same with `rsync -a --whole-file` over ssh (sshd on 127.0.0.2) for the cold copy and rsync's
#      delta algorithm over ssh for the changed shard;
#   3. the same over rsync's daemon protocol (rsync --daemon on 127.0.0.3).
# Prints one table: seconds, MB/s and payload bytes moved per method. Same run, same page cache state
# (sources warm: loopback measures the CPU cost of each protocol plus the destination's writes).
# Durability: our push is done when every file is fsynced and renamed; rsync never fsyncs, so each rsync
# also gets a "+ sync" row (its time plus the `sync` that puts its bytes on disk). Every method starts
# after a `sync`, so none pays for another's dirty pages. The destination disk's own ceiling (dd of
# min(model, 1 GiB): page cache + fsync, and O_DIRECT + fsync) is printed above the table.
#
#   scripts/bench-stage.sh [BUILD_DIR]      STAGE_BENCH_GIB=4 (model size; STAGE_BENCH_MIB overrides),
#                                           STAGE_BENCH_SHARDS=4, STAGE_BENCH_DIR=/tmp (where source and the
#                                           three destinations live: 4x the model; /dev/shm takes the disk
#                                           and its fsyncs out, leaving the protocols' CPU cost),
#                                           STAGE_BENCH_BUFFERED_ROW=1 (also push with direct_io off)
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
mkdir -p "$SRC" "$W/dst-push" "$W/dst-ssh" "$W/dst-daemon"

shard_mib=$((MIB / SHARDS))
echo "bench-stage: writing a ${MIB} MiB model ($SHARDS shards of $shard_mib MiB) in $SRC" >&2
for i in $(seq 1 "$SHARDS"); do
  head -c $((shard_mib << 20)) /dev/urandom >"$SRC/model-$(printf %05d "$i")-of-$(printf %05d "$SHARDS").safetensors"
done
echo '{"model_type":"llama"}' >"$SRC/config.json"
echo '{}' >"$SRC/tokenizer.json"
sync  # the source's writeback must not run during the first method

# The disk's ceiling for one writer: min(model, 1 GiB) through the page cache + fsync, and O_DIRECT + fsync.
dd_mib=$((MIB < 1024 ? MIB : 1024))
dd_rate() {  # $1 = dd flags; prints MB/s
  local t0 t1
  t0=$(now)
  cat "$SRC"/model-*.safetensors | dd of="$W/dd.out" bs=4M count=$((dd_mib / 4)) iflag=fullblock $1 status=none
  t1=$(now)
  rm -f "$W/dd.out"
  sync
  echo "$(echo "$dd_mib * 1048576 / ($t1 - $t0) / 1000000" | bc)"
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
dd_buffered=$(dd_rate conv=fsync)
dd_direct=$(dd_rate "oflag=direct conv=fsync")
cat "$SRC"/* >/dev/null  # warm the page cache for every method alike
echo "bench-stage: cold copies" >&2
read -r ours_cold_s ours_cold_b < <(ours "")
if [[ $BUFFERED_ROW == 1 ]]; then
  rm -rf "$W/dst-push" && mkdir "$W/dst-push"
  read -r pc_cold_s pc_cold_b < <(ours ',"direct_io":false')
fi
read -r ssh_cold_s ssh_cold_sync ssh_cold_b < <(over_ssh --whole-file)
read -r dmn_cold_s dmn_cold_sync dmn_cold_b < <(over_daemon --whole-file)

# Change 1% of the 4 MiB blocks of shard 1 (at least one): 4 KiB of new bytes in each chosen block.
blocks=$((shard_mib / 4))
changed=$(((blocks + 99) / 100))
S1="$SRC/model-00001-of-$(printf %05d "$SHARDS").safetensors"
for k in $(seq 1 "$changed"); do
  dd if=/dev/urandom of="$S1" bs=4096 count=1 seek=$(((k * blocks / (changed + 1)) * 1024 + 7)) conv=notrunc status=none
done
touch "$S1"
echo "bench-stage: delta ($changed of $blocks blocks of shard 1 changed)" >&2
read -r ours_delta_s ours_delta_b < <(ours "")
read -r ssh_delta_s ssh_delta_sync ssh_delta_b < <(over_ssh "")
read -r dmn_delta_s dmn_delta_sync dmn_delta_b < <(over_daemon "")

for d in dst-push dst-ssh dst-daemon; do
  diff -rq "$SRC" "$W/$d" >/dev/null || { echo "bench-stage: $d differs from the source" >&2; exit 1; }
done

row() {  # name cold_s cold_bytes delta_s delta_bytes
  printf "| %-37s | %8.2f | %9.0f | %8.2f | %12d | %6.2f%% |\n" "$1" "$2" "$(echo "$TOTAL / $2 / 1000000" | bc -l)" "$4" "$5" \
    "$(echo "100 * $5 / $TOTAL" | bc -l)"
}
ratio() { echo "scale=2; $2 / $1" | bc; }
echo
echo "model: $(numfmt --to=iec-i --suffix=B --round=nearest "$TOTAL") in $SHARDS shards under $W ($(df --output=fstype "$W" | tail -1)); delta: $changed of $blocks 4 MiB blocks of one shard; loopback, $(nproc) cores"
echo "disk ceiling, one dd writer of $dd_mib MiB: page cache + fsync $dd_buffered MB/s, O_DIRECT + fsync $dd_direct MB/s"
echo "| method                                |   cold s | cold MB/s |  delta s | delta bytes  | of tree |"
echo "| ------------------------------------- | -------- | --------- | -------- | ------------ | ------- |"
row "sparkctl push (4 streams, fsynced)" "$ours_cold_s" "$ours_cold_b" "$ours_delta_s" "$ours_delta_b"
if [[ $BUFFERED_ROW == 1 ]]; then
  printf "| %-37s | %8.2f | %9.0f | %8s | %12s | %7s |\n" "sparkctl push, direct_io off" "$pc_cold_s" \
    "$(echo "$TOTAL / $pc_cold_s / 1000000" | bc -l)" - - -
fi
row "rsync -a --whole-file over ssh" "$ssh_cold_s" "$ssh_cold_b" "$ssh_delta_s" "$ssh_delta_b"
row "rsync over ssh + sync (durable)" "$ssh_cold_sync" "$ssh_cold_b" "$ssh_delta_sync" "$ssh_delta_b"
row "rsync daemon protocol" "$dmn_cold_s" "$dmn_cold_b" "$dmn_delta_s" "$dmn_delta_b"
row "rsync daemon + sync (durable)" "$dmn_cold_sync" "$dmn_cold_b" "$dmn_delta_sync" "$dmn_delta_b"
echo "(delta rows of rsync use its delta algorithm, not --whole-file; rsync bytes = its 'Total bytes sent')"
echo "cold speedup of sparkctl push: $(ratio "$ours_cold_s" "$ssh_cold_s")x rsync over ssh, $(ratio "$ours_cold_s" "$ssh_cold_sync")x rsync over ssh + sync, $(ratio "$ours_cold_s" "$dmn_cold_s")x rsync daemon, $(ratio "$ours_cold_s" "$dmn_cold_sync")x rsync daemon + sync"
