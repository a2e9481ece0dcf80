#!/usr/bin/env bash
# The README walkthrough, automated: build the binaries, start a hub, add two peer tokens,
# create a namespace, start two peers replicating it, write through peer-a's admin API,
# read it from peer-b and from the hub (through nmcr), print some hub metrics. Exits 0 only
# if both peers converged. Like the walkthrough it writes only under nomicore-data/ (ignored
# by git), in a directory of its own with the token files readable by the user only; every
# child process is stopped and that directory removed on exit, whatever happens.
#
# Then, so that the editor pages it prints can be opened: on a terminal it keeps running
# until Enter; with KEEP=1 it keeps running until Ctrl-C or SIGTERM (status 0), terminal or
# not; with KEEP=0, or when stdin is not a terminal (CI), it stops at once.
set -euo pipefail
cd "$(dirname "$0")/.."

case "${KEEP:-}" in
  1) keep=signal ;;
  0) keep=no ;;
  "") if [ -t 0 ]; then keep=enter; else keep=no; fi ;;
  *) echo "demo: KEEP=$KEEP: want KEEP=1 (keep running until Ctrl-C) or KEEP=0 (stop at once)" >&2; exit 2 ;;
esac

for tool in go curl; do
  command -v "$tool" >/dev/null || { echo "demo: $tool is required" >&2; exit 1; }
done

umask 077 # the token files are secrets
mkdir -p nomicore-data
work=$(mktemp -d "$PWD/nomicore-data/demo.XXXXXX")
pids=()
cleanup() {
  local status=$?
  for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  if [ "$status" -ne 0 ] && [ -d "$work" ]; then
    for log in "$work"/*.log; do echo "--- last lines of $(basename "$log")" >&2; tail -n 15 "$log" >&2; done
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Every server listens on 127.0.0.1:0 and the kernel picks its port: a port chosen ahead
# by the script could be taken (by another program, or as an outgoing connection's local
# port) before the server binds it. The address each server got is read back from its
# start-up log line ("hub serving" / "peer running"), field by field.
bound_addr() {
  local log=$1 msg=$2 key=$3 addr
  for _ in $(seq 200); do
    addr=$(grep -F "\"msg\":\"$msg\"" "$log" 2>/dev/null | sed -n "s/.*\"$key\":\"\([^\"]*\)\".*/\1/p" | head -n 1)
    if [ -n "$addr" ]; then echo "$addr"; return 0; fi
    sleep 0.1
  done
  echo "demo: no $key in $log after ~20 s" >&2
  return 1
}
# Poll a URL until its body matches a pattern (or give up after ~20 s).
wait_for() {
  local url=$1 pattern=$2
  for _ in $(seq 200); do
    if curl -fsS "$url" 2>/dev/null | grep -q -- "$pattern"; then return 0; fi
    sleep 0.1
  done
  echo "demo: timed out waiting for $pattern at $url" >&2
  return 1
}
if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold='' plain=''; fi
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }

step "building hub, peer and nmcr"
go build -o "$work/bin/" ./cmd/hub ./cmd/peer ./cmd/nmcr
hub="$work/bin/hub"; peer="$work/bin/peer"; nmcr="$work/bin/nmcr"

any=127.0.0.1:0
step "starting the hub"
"$hub" serve --listen "$any" --admin-listen "$any" --client-listen "$any" --data "$work/hub" 2>"$work/hub.log" &
pids+=($!)
HUB=$(bound_addr "$work/hub.log" "hub serving" listen)
HUB_ADMIN=$(bound_addr "$work/hub.log" "hub serving" adminListen)
HUB_CLIENTS=$(bound_addr "$work/hub.log" "hub serving" clientListen)
echo "replication $HUB, admin $HUB_ADMIN, editors $HUB_CLIENTS"
wait_for "http://$HUB_ADMIN/healthz" ok

step "adding a token for each peer (the hub keeps only its SHA-256)"
"$hub" token add --data "$work/hub" --peer peer-a >"$work/peer-a.token"
"$hub" token add --data "$work/hub" --peer peer-b >"$work/peer-b.token"
"$hub" token list --data "$work/hub"
ls -l "$work"/peer-*.token

step "creating a namespace"
created=$(curl -fsS -X POST "http://$HUB_ADMIN/v1/namespaces" -H 'Content-Type: application/json' -d '{"owner":"default"}')
echo "$created"
ns=$(printf '%s' "$created" | sed -n 's/.*"namespaceId":"\(ns-[0-9a-f]*\)".*/\1/p')
[ -n "$ns" ] || { echo "demo: no namespace id in $created" >&2; exit 1; }

step "starting peer-a and peer-b replicating $ns"
"$peer" run --instance-id peer-a --hub-url "ws://$HUB/v1/replication" --token-file "$work/peer-a.token" \
  --admin-listen "$any" --client-listen "$any" --data "$work/peer-a" --target "$ns" 2>"$work/peer-a.log" &
pids+=($!)
"$peer" run --instance-id peer-b --hub-url "ws://$HUB/v1/replication" --token-file "$work/peer-b.token" \
  --admin-listen "$any" --client-listen "$any" --data "$work/peer-b" --target "$ns" 2>"$work/peer-b.log" &
pids+=($!)
A_ADMIN=$(bound_addr "$work/peer-a.log" "peer running" adminListen)
A_CLIENTS=$(bound_addr "$work/peer-a.log" "peer running" clientListen)
B_ADMIN=$(bound_addr "$work/peer-b.log" "peer running" adminListen)
B_CLIENTS=$(bound_addr "$work/peer-b.log" "peer running" clientListen)
wait_for "http://$A_ADMIN/v1/targets" '"state":"live"'
wait_for "http://$B_ADMIN/v1/targets" '"state":"live"'
curl -fsS "http://$A_ADMIN/v1/targets"

step "writing through peer-a's admin API"
"$peer" write --admin-url "http://$A_ADMIN" --namespace "$ns" --map notes greeting="hello from peer-a" answer=42

step "reading from peer-b"
wait_for "http://$B_ADMIN/v1/namespaces/$ns/doc" 'hello from peer-a'
doc_a=$(curl -fsS "http://$A_ADMIN/v1/namespaces/$ns/doc")
doc_b=$(curl -fsS "http://$B_ADMIN/v1/namespaces/$ns/doc")
echo "peer-a: $doc_a"
echo "peer-b: $doc_b"

step "the editor page on each peer (a client token each; open them in a browser while the demo runs)"
[ "$keep" = no ] && echo "(this demo stops at once: make demo KEEP=1 keeps it running so that they can be opened)"
tok_a=$("$peer" token add --data "$work/peer-a" --client demo 2>/dev/null)
tok_b=$("$peer" token add --data "$work/peer-b" --client demo 2>/dev/null)
echo "peer-a: http://$A_CLIENTS/edit/$ns?token=$tok_a"
echo "peer-b: http://$B_CLIENTS/edit/$ns?token=$tok_b"
wait_for "http://$A_CLIENTS/edit/$ns" 'Nomicore editor'

step "reading the hub's copy as a Yjs update, through nmcr"
curl -fsS "http://$HUB_ADMIN/v1/namespaces/$ns/update" | "$nmcr" doc json

step "a few hub metrics"
curl -fsS "http://$HUB_ADMIN/metrics" | grep -E '^nomicore_(connections_ready|live_sessions|events_total\{side="hub",type="update-applied"\})' || true

if [ "$doc_a" != "$doc_b" ]; then
  echo "demo: the peers did not converge" >&2
  exit 1
fi
step "converged: both peers hold the same document"

trap 'exit 0' INT TERM # from here on, stopping the demo is the end the user asked for
case "$keep" in
  enter)
    step "the demo keeps running: open the editor pages above, or the hub's dashboard at http://$HUB_ADMIN/"
    read -r -p "Press Enter to stop it. " _ || true
    ;;
  signal)
    step "the demo keeps running (KEEP=1): open the editor pages above, or the hub's dashboard at http://$HUB_ADMIN/"
    echo "Ctrl-C stops it."
    while :; do sleep 1 & wait $! || true; done
    ;;
esac
