#!/usr/bin/env bash
# make run: start the inference SIMULATOR and the host on the embedded
# configs/local.toml, run the bundled tasks of every domain (examples/*/),
# print the summaries, and keep the host serving until Ctrl-C.
set -euo pipefail
bin=$1 sim_addr=$2 host_addr=$3
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$here/run"
# The simulator's scripted policy knows every bundled task's answer.
cat "$here"/examples/*/tasks.jsonl > "$here/run/answers.jsonl"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

"$bin/prorl-simllm" --listen "$sim_addr" --answers "$here/run/answers.jsonl" --correct-rate 0.7 --think-turns 1 \
  --token-latency 200us --log "$here/run/simllm.jsonl" &
pids+=($!)
"$bin/prorl-host" serve --listen "$host_addr" --backend "http://$sim_addr" 2>"$here/run/host.log" &
pids+=($!)

for _ in $(seq 100); do curl -sf "http://$host_addr/readyz" >/dev/null && break; sleep 0.1; done
curl -sf "http://$host_addr/readyz" >/dev/null || { echo "host did not become ready; see run/host.log"; tail -20 "$here/run/host.log"; exit 1; }

for tasks in "$here"/examples/*/tasks.jsonl; do
  domain=$(basename "$(dirname "$tasks")")
  if [ "$domain" = swe ] && ! "$bin/prorl-host" swe images --tasks "$tasks" --missing-only >/dev/null 2>&1; then
    echo "== skipping the swe tasks: their images are not built (make swe-fixtures)"; echo; continue
  fi
  echo "== running $(grep -c . "$tasks") sample $domain tasks x 4 samples against the simulator"
  "$bin/prorl-host" run --server "http://$host_addr" --tasks "$tasks" --domain "$domain" --n 4 --seed 1 --out "$here/run/results-$domain.jsonl"
  echo
done
echo "results: run/results-*.jsonl   host log: run/host.log   simulator log: run/simllm.jsonl"
echo "the host keeps serving on http://$host_addr (try: curl http://$host_addr/v1/domains); Ctrl-C to stop"
wait "${pids[1]}"
