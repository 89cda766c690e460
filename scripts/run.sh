#!/usr/bin/env bash
# make run: start the inference SIMULATOR and the host on the embedded
# configs/local.toml, run the bundled math tasks, print the summary, and keep
# the host serving until Ctrl-C.
set -euo pipefail
bin=$1 sim_addr=$2 host_addr=$3
here=$(cd "$(dirname "$0")/.." && pwd)
tasks="$here/examples/math/tasks.jsonl"
mkdir -p "$here/run"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

"$bin/prorl-simllm" --listen "$sim_addr" --answers "$tasks" --correct-rate 0.7 --think-turns 1 \
  --token-latency 200us --log "$here/run/simllm.jsonl" &
pids+=($!)
"$bin/prorl-host" serve --listen "$host_addr" --backend "http://$sim_addr" 2>"$here/run/host.log" &
pids+=($!)

for _ in $(seq 100); do curl -sf "http://$host_addr/readyz" >/dev/null && break; sleep 0.1; done
curl -sf "http://$host_addr/readyz" >/dev/null || { echo "host did not become ready; see run/host.log"; tail -20 "$here/run/host.log"; exit 1; }

echo "== running $(grep -c . "$tasks") sample math tasks x 4 samples against the simulator"
"$bin/prorl-host" run --server "http://$host_addr" --tasks "$tasks" --n 4 --seed 1 --out "$here/run/results.jsonl"
echo
echo "results: run/results.jsonl   host log: run/host.log   simulator log: run/simllm.jsonl"
echo "the host keeps serving on http://$host_addr (try: curl http://$host_addr/v1/domains); Ctrl-C to stop"
wait "${pids[1]}"
