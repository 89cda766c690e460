#!/usr/bin/env bash
# Regenerates src/prorl_sdk/_proto from sdk/proto/prorl.proto and
# proto/goplugin.proto with grpcio-tools (pinned in scripts/pysdk/requirements.txt).
# Usage: gen.sh PYTHON [--check]   (--check: fail if the committed code differs)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=${1:?usage: gen.sh PYTHON [--check]}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Laid out as the package, so the generated imports are package imports.
mkdir -p "$tmp/in/prorl_sdk/_proto" "$tmp/out"
cp "$here/../proto/prorl.proto" "$here/proto/goplugin.proto" "$tmp/in/prorl_sdk/_proto/"
(cd "$tmp/in" && "$py" -m grpc_tools.protoc -I . --python_out="$tmp/out" --pyi_out="$tmp/out" --grpc_python_out="$tmp/out" \
  prorl_sdk/_proto/prorl.proto prorl_sdk/_proto/goplugin.proto)
out="$here/src/prorl_sdk/_proto"
if [ "${2:-}" = --check ]; then
  for f in "$tmp"/out/prorl_sdk/_proto/*; do
    cmp -s "$f" "$out/$(basename "$f")" || { echo "sdk/python: generated $(basename "$f") differs from the committed one; run make proto" >&2; exit 1; }
  done
  exit 0
fi
rm -f "$out"/*_pb2*.py "$out"/*_pb2*.pyi
cp "$tmp"/out/prorl_sdk/_proto/* "$out/"
