#!/usr/bin/env bash
# Build the HTML report and the sweep for Adult, then screenshot the report with headless Chromium.
#
#   scripts/screenshot_report.sh [OUT_DIR]        (default: out/screenshot)
#
# Writes OUT/report.html, OUT/sweep.csv, OUT/sweep.png, OUT/sweep_table.md and OUT/report.png.
# Needs the `gpuanon` command (or `python -m gpuanon`) and Chromium (Debian: apt-get install -y chromium;
# override the binary with $CHROMIUM). Set GPUANON_BACKEND=cpu to skip the GPU.
set -euo pipefail

OUT="${1:-out/screenshot}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

if command -v gpuanon >/dev/null 2>&1; then
    GPUANON=(gpuanon)
else
    GPUANON=("${PYTHON:-python3}" -m gpuanon)
fi

CHROMIUM="${CHROMIUM:-}"
if [[ -z "$CHROMIUM" ]]; then
    for c in /usr/bin/chromium /usr/bin/chromium-browser /usr/bin/google-chrome; do
        if [[ -x "$c" ]]; then CHROMIUM="$c"; break; fi
    done
fi
if [[ -z "$CHROMIUM" ]]; then
    echo "screenshot_report.sh: no Chromium found; install it (apt-get install -y chromium) or set CHROMIUM" >&2
    exit 2
fi

# (a) the report and the sweep
"${GPUANON[@]}" anonymize --dataset adult --k 10 --html "$OUT/report.html"
"${GPUANON[@]}" sweep --dataset adult --out "$OUT/sweep.csv"

# (b) a full-page-ish screenshot of the report, offline, in a throw-away profile
PROFILE="$(mktemp -d)"
trap 'rm -rf "$PROFILE"' EXIT
HOME="$PROFILE" "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$PROFILE" --screenshot="$OUT/report.png" --window-size=1200,2400 \
    "file://$OUT/report.html" 2> "$PROFILE/chromium.log" || {
        cat "$PROFILE/chromium.log" >&2
        exit 1
    }

if [[ ! -s "$OUT/report.png" ]]; then
    echo "screenshot_report.sh: Chromium wrote no screenshot" >&2
    cat "$PROFILE/chromium.log" >&2
    exit 1
fi
echo "wrote $OUT/report.html, $OUT/report.png, $OUT/sweep.csv, $OUT/sweep.png, $OUT/sweep_table.md"
