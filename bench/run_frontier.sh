#!/usr/bin/env bash
# The DISTPAB privacy-utility frontier (SPEC section 8, point 9) on the four data sets, seed 0,
# default noise sweep, 10-fold CV: CSV, PNG and JSON per data set under bench/results/, and the
# wall time of each data set and of the whole run on stderr and in bench/results/frontier_times.txt.
#
#   bash bench/run_frontier.sh            # about 30 minutes on the 2-core CPU
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/results
mkdir -p "$out"
times="$out/frontier_times.txt"
: > "$times.tmp"
start=$(date +%s.%N)
for ds in breast_cancer wine adult hepmass; do
    t0=$(date +%s.%N)
    python -m gpuanon attack --frontier --dataset "$ds" --seed 0 \
        --out "$out/frontier_$ds.csv" --png "$out/frontier_$ds.png" --report "$out/frontier_$ds.json"
    t1=$(date +%s.%N)
    printf '%s %.1f s\n' "$ds" "$(echo "$t1 - $t0" | bc)" | tee -a "$times.tmp" >&2
done
end=$(date +%s.%N)
printf 'total %.1f s on %s (%s cores)\n' "$(echo "$end - $start" | bc)" \
    "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" "$(nproc)" | tee -a "$times.tmp" >&2
mv "$times.tmp" "$times"
