#!/usr/bin/env bash
# The attacks where users see them: the anonymize page's attack section (Adult, the thesis QIs, k = 10, half
# the rows the control) screenshot with headless Chromium, and the sweep's privacy-utility frontier.
#
#   scripts/screenshot_attacks.sh [OUT_DIR]        (default: out/screenshot_attacks)
#
# Writes OUT/anonymize_attacks.{csv,json,html}, the section's page and its PNG (anonymize_attacks_section.html,
# anonymize_attacks.png), and OUT/sweep_attacks.{csv,png}, _table.md, _frontier.png.
# Needs `gpuanon` (or `python -m gpuanon`) and Chromium ($CHROMIUM, or /usr/bin/chromium).
set -euo pipefail

OUT="${1:-out/screenshot_attacks}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
if command -v gpuanon >/dev/null 2>&1; then GPUANON=(gpuanon); else GPUANON=("${PYTHON:-python3}" -m gpuanon); fi
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
[[ -x "$CHROMIUM" ]] || { echo "screenshot_attacks.sh: no Chromium at $CHROMIUM; set CHROMIUM" >&2; exit 2; }

if [[ ! -s "$OUT/anonymize_attacks.html" ]]; then  # the runs are kept: delete OUT to run them again
    "${GPUANON[@]}" anonymize --dataset adult --k 10 --attacks 500 --control-fraction 0.5 \
        --out "$OUT/anonymize_attacks.csv" --report "$OUT/anonymize_attacks.json" --html "$OUT/anonymize_attacks.html"
fi
if [[ ! -s "$OUT/sweep_attacks_frontier.png" ]]; then
    "${GPUANON[@]}" sweep --dataset adult --k-values 3,5,10,20 --l-values 2 --t-values 0.3 --attacks 500 \
        --control-fraction 0.5 --out "$OUT/sweep_attacks.csv"
fi

# the page's title and its attack section alone (headless Chromium shows a page from its top), offline, in a
# throw-away profile
"${PYTHON:-python3}" - "$OUT/anonymize_attacks.html" "$OUT/anonymize_attacks_section.html" <<'PY'
import sys
page = open(sys.argv[1], encoding="utf-8").read()
top = page[:page.index("</h1>") + len("</h1>")]
section = page[page.index("<h2 id='attacks'>"):page.index("<h2>Timing</h2>")]
open(sys.argv[2], "w", encoding="utf-8").write(top + "\n" + section + "</body></html>\n")
PY
PROFILE="$(mktemp -d)"
trap 'rm -rf "$PROFILE"' EXIT
HOME="$PROFILE" "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --hide-scrollbars \
    --user-data-dir="$PROFILE" --screenshot="$OUT/anonymize_attacks.png" --window-size=1200,1500 \
    "file://$OUT/anonymize_attacks_section.html" 2> "$PROFILE/chromium.log" || { cat "$PROFILE/chromium.log" >&2; exit 1; }
[[ -s "$OUT/anonymize_attacks.png" ]] || { echo "screenshot_attacks.sh: Chromium wrote no screenshot" >&2; exit 1; }
echo "wrote $OUT/anonymize_attacks.png, $OUT/sweep_attacks_frontier.png, $OUT/sweep_attacks_table.md"
