#!/usr/bin/env bash
# Soak of the HTTP front and the supervisor (issue 28), full figures: `sparkctl up lane-demo` (CPU,
# max_num_seqs 4, supervisor on), then tests/serve/soak_load.cjs twice: STREAMS streaming clients alone,
# and the same with SLOW idle/trickling unauthenticated connections held open. Prints both runs' JSON,
# the p95 ratio, the supervisor's hang/restart events (want none) and the rank's RSS before and after.
# Exit 1 on any client error, any supervisor restart, or a p95 more than P95_SLACK (default 1.2) times
# the baseline. Env: STREAMS (64) ROUNDS (3) MAX_TOKENS (48) SLOW (1000) TRICKLE_MS (2000).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${SPARKCTL_BUILD_DIR:-build}
S="$PWD/$BUILD/bin/sparkctl"
STREAMS=${STREAMS:-64} ROUNDS=${ROUNDS:-3} MAX_TOKENS=${MAX_TOKENS:-48} SLOW=${SLOW:-1000}
TRICKLE_MS=${TRICKLE_MS:-2000} P95_SLACK=${P95_SLACK:-1.2}
export SPARKCTL_STATE_DIR=${SPARKCTL_STATE_DIR:-$(mktemp -d /tmp/sparkctl-soak.XXXXXX)}
ulimit -n "$(ulimit -Hn)" || true

trap '"$S" down >/dev/null 2>&1 || true' EXIT
"$S" up lane-demo >/dev/null
endpoint=$("$S" --json status | node -e 'const s=JSON.parse(require("fs").readFileSync(0));console.log(s.endpoint||s.deployment.endpoint)')
key=$(cat "$SPARKCTL_STATE_DIR/deploy/api_key")
model=demo
rss() { ps -o rss= -p "$(pgrep -f -n 'sparkctl runtime serve')" 2>/dev/null | tr -d ' ' || echo 0; }
rss0=$(rss)
echo "== $endpoint: baseline, $STREAMS streams x $ROUNDS"
base=$(node tests/serve/soak_load.cjs "$endpoint" "$key" "$model" "$STREAMS" "$ROUNDS" "$MAX_TOKENS" 0) || true
echo "$base"
echo "== with $SLOW slow unauthenticated connections (one byte / ${TRICKLE_MS} ms on half of them)"
attack=$(node tests/serve/soak_load.cjs "$endpoint" "$key" "$model" "$STREAMS" "$ROUNDS" "$MAX_TOKENS" "$SLOW" "$TRICKLE_MS") || true
echo "$attack"
sleep 1
rss1=$(rss)
events=$("$S" --json status | node -e 'const s=JSON.parse(require("fs").readFileSync(0));
  const ev=(s.events||s.deployment?.events||[]).filter(e=>/hang|restart|rank_died/.test(e.kind));
  console.log(JSON.stringify(ev))')
echo "== supervisor hang/restart events: $events"
echo "== rank RSS: ${rss0} KiB before, ${rss1} KiB after"
BASE="$base" ATTACK="$attack" EVENTS="$events" SLACK="$P95_SLACK" node -e '
  const b=JSON.parse(process.env.BASE), a=JSON.parse(process.env.ATTACK), ev=JSON.parse(process.env.EVENTS);
  const ratio=a.p95_s/b.p95_s;
  console.log(`p95 ${b.p95_s.toFixed(3)} s alone, ${a.p95_s.toFixed(3)} s beside ${a.slow} slow connections: x${ratio.toFixed(2)}`);
  const bad=[];
  if (b.errors||a.errors) bad.push(`client errors: ${b.errors} + ${a.errors}`);
  if (b.health_fails||a.health_fails) bad.push(`/health failures: ${b.health_fails} + ${a.health_fails}`);
  if (ev.length) bad.push(`${ev.length} supervisor hang/restart event(s)`);
  if (ratio > +process.env.SLACK) bad.push(`p95 ratio ${ratio.toFixed(2)} > ${process.env.SLACK}`);
  if (bad.length) { console.log("FAIL: "+bad.join("; ")); process.exit(1); }
  console.log("ok: zero errors, zero restarts, p95 within the slack");'
