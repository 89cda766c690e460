#!/usr/bin/env bash
# Installs what the dashboard's browser tests drive: Debian's Chromium and
# playwright-core from npm (both pinned; playwright-core downloads no
# browser). Idempotent; prints the node_modules directory.
#
# Chromium is pinned by its major version: Debian's security archive keeps
# only the latest build of a major (156.0.8078.79 was replaced by .108 and
# could no longer be installed), so an exact pin breaks a fresh machine at
# the next security update. Within the major, the archive's build.
set -euo pipefail
CHROMIUM_MAJOR=${CHROMIUM_MAJOR:-156}
PW=${PLAYWRIGHT_CORE_VERSION:-1.65.1}
DIR=${PRORL_UI_NPM:-$HOME/.cache/prorl/npm-ui}
apt=$(dirname "$0")/../apt.sh
case "$(bash "$apt" version chromium)" in
"$CHROMIUM_MAJOR".*) ;;
*)
  bash "$apt" update
  version=$(apt-cache madison chromium | awk -v m="$CHROMIUM_MAJOR." 'index($3, m) == 1 { print $3; exit }')
  if [ -z "$version" ]; then
    echo "no chromium $CHROMIUM_MAJOR.x in the apt sources (apt-cache madison chromium); set CHROMIUM_MAJOR" >&2
    exit 1
  fi
  bash "$apt" install "chromium=$version"
  ;;
esac
mkdir -p "$DIR"
[ -f "$DIR/package.json" ] || echo '{"name":"prorl-ui-test","private":true}' > "$DIR/package.json"
if [ "$(cat "$DIR/.prorl-installed" 2>/dev/null)" != "$PW" ]; then
  (cd "$DIR" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund "playwright-core@$PW" >&2)
  echo "$PW" > "$DIR/.prorl-installed"
fi
echo "$DIR/node_modules"
