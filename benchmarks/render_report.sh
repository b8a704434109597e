#!/usr/bin/env bash
# Render a run's HTML report in headless Chromium and save a screenshot, to check by eye
# that the self-contained report draws offline (no network: background networking off).
# Usage: benchmarks/render_report.sh DB_FILE [RUN_ID|latest] [OUT_DIR]
set -euo pipefail
db=${1:?usage: render_report.sh DB_FILE [RUN_ID] [OUT_DIR]}
run=${2:-latest}
out=${3:-.}
mkdir -p "$out"
html="$(cd "$out" && pwd)/report.html"
tokenbench_cmd=(python -c "import typer; from api.cli.commands.report import report; typer.run(report)")
"${tokenbench_cmd[@]}" "$run" --db "$db" --format html -o "$html"
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
  --user-data-dir="$profile" --window-size=1400,2600 \
  --screenshot="$out/report.png" "file://$html" 2>/dev/null
echo "wrote $html and $out/report.png"
