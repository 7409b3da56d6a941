#!/usr/bin/env bash
# Build the documentation site (warnings as errors) and screenshot its front page and the risk guide
# with headless Chromium (Debian: apt-get install -y chromium; override the binary with $CHROMIUM).
#
#   scripts/screenshot_docs.sh [OUT_DIR]        (default: out/docs_site)
#
# Writes OUT/html/ (the site), OUT/docs_site_index.png and OUT/docs_site_risk.png.
# Needs the docs extra: pip install -e ".[docs]".
set -euo pipefail
OUT="${1:-out/docs_site}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
cd "$(dirname "$0")/.."
"${PYTHON:-python3}" -m sphinx -W --keep-going -q -b html docs "$OUT/html"
CHROMIUM="${CHROMIUM:-}"
for c in /usr/bin/chromium /usr/bin/chromium-browser /usr/bin/google-chrome; do
    if [[ -z "$CHROMIUM" && -x "$c" ]]; then CHROMIUM="$c"; fi
done
if [[ -z "$CHROMIUM" ]]; then
    echo "screenshot_docs.sh: no Chromium found; install it (apt-get install -y chromium) or set CHROMIUM" >&2
    exit 2
fi
for page in index risk; do
    "$CHROMIUM" --headless=new --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,1400 \
        --screenshot="$OUT/docs_site_$page.png" "file://$OUT/html/$page.html" 2>/dev/null
done
ls -l "$OUT"/docs_site_*.png
