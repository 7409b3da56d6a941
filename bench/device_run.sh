#!/usr/bin/env bash
# One device call that proves gpuanon's device path on a lent GPU machine (no network there).
#
#   here:    bash bench/device_run.sh --plan           what each call carries, `carry: N MiB`
#            bash bench/device_run.sh --fetch [core|cudf|all]   the locked wheels (bench/device_wheels.txt)
#            bash bench/device_run.sh --split          cuDF's wheels -> .whl-cudf/cudf.part1..6 + cudf.sha256
#   device:  bash bench/device_run.sh                  core run (carry [".whl"])
#            bash bench/device_run.sh --stage          one cuDF part to /tmp (carry [".whl-cudf/cudf.partK", ".whl-cudf/cudf.sha256"])
#            bash bench/device_run.sh cudf             core + the staged cuDF (carry [".whl"]); core if a part is missing
#
# The run installs the carried wheels into a target folder (pip --no-index --no-deps --target), keeps
# the machine's own CuPy, NumPy, pandas and pyarrow, prints the versions and an int64 cupy.add.at probe,
# then runs bench/gpu_check.py in what is left of an 8-minute budget (DEVICE_BUDGET_S) that counts the
# install. Results go to $OUT (the device tool's folder) or bench/results/gpu_check_<card>/. Arguments
# after the mode go to gpu_check.py (e.g. `-- --backend cpu --small` to try the whole chain on a CPU).
# See docs/device.md.
set -u
T0=$(date +%s)
cd "$(dirname "$0")/.."
REPO=$PWD
PY=${PYTHON:-python3}
HELP="$PY bench/device_wheels.py"

case "${1:-}" in
  --plan) shift; exec $HELP plan "$@" ;;
  --fetch) shift; exec $HELP fetch "$@" ;;
  --split) shift; exec $HELP split "$@" ;;
  --stage) shift; exec $HELP stage ;;
  -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
esac
MODE=core
if [ "${1:-}" = cudf ] || [ "${1:-}" = core ]; then MODE=$1; shift; fi
[ "${1:-}" = -- ] && shift

BUDGET=${DEVICE_BUDGET_S:-480}
CARD=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr 'A-Z' 'a-z' | grep -oE '\b[a-z]?[0-9]{2,4}\b' | head -1)
OUT=${OUT:-bench/results/gpu_check_${CARD:-cpu}}
mkdir -p "$OUT"
LOG=$OUT/device_run.log
SITE=${DEVICE_SITE:-/tmp/gpuanon_site}
say() { echo "[device_run $(date +%H:%M:%S) +$(( $(date +%s) - T0 ))s] $*" | tee -a "$LOG" >&2; }
: > "$LOG"
say "mode $MODE, budget ${BUDGET}s, out $OUT, python $($PY -V 2>&1), card ${CARD:-none}"

WHEELS=()
for w in .whl/*.whl; do [ -f "$w" ] && WHEELS+=("$w"); done
if [ "${#WHEELS[@]}" -eq 0 ]; then
  say "no wheels in .whl/ (carry [\".whl\"] after bash bench/device_run.sh --fetch): Dask parts will be skipped"
fi
rm -rf "$SITE"
if [ "${#WHEELS[@]}" -gt 0 ]; then
  if $HELP install "$SITE" "${WHEELS[@]}" >>"$LOG" 2>&1; then
    say "core: ${#WHEELS[@]} wheels installed into $SITE"
  else
    say "core: install failed (see $LOG); going on with the machine's packages alone"
  fi
fi
if [ "$MODE" = cudf ]; then
  STAGE=${GPUANON_CUDF_STAGE:-/tmp/gpuanon_cudf}
  if MSG=$($HELP assemble 2>&1); then
    say "$MSG"
    CUDF=("$STAGE"/wheels/*.whl)
    if $HELP install "$SITE" "${CUDF[@]}" >>"$LOG" 2>&1; then
      say "cudf: ${#CUDF[@]} wheels installed into $SITE"
    else
      say "cudf: install failed (see $LOG): falling back to core mode"
      MODE=core
    fi
  else
    say "$MSG"
    say "cudf: parts missing or damaged: falling back to core mode"
    MODE=core
  fi
fi
export PYTHONPATH="$REPO:$SITE${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
say "mode $MODE; versions and the int64 add.at probe:"
$PY bench/device_wheels.py versions 2>&1 | tee -a "$LOG" >&2
LEFT=$(( BUDGET - ( $(date +%s) - T0 ) ))
say "gpu_check with ${LEFT}s left"
$PY bench/gpu_check.py --out "$OUT" --budget "$LEFT" "$@" 2>&1 | tee -a "$LOG"
RC=${PIPESTATUS[0]}
say "gpu_check exited $RC; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
exit "$RC"
