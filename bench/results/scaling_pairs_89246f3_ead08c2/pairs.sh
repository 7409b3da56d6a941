#!/bin/bash
# paired, interleaved: base (89246f3) and head (ead08c2) bench_scaling 2M, 1 and 2 workers, one process
PY=/work/main/.venv/bin/python
cd /work/wt/bench
for i in 1 2 3; do
  if [ $((i % 2)) -eq 1 ]; then order="base89 head0"; else order="head0 base89"; fi
  for v in $order; do
    echo "pair $i $v start $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> log.txt
    (cd /work/wt/$v && PYTHONPATH=/work/wt/$v $PY bench/bench_scaling.py --rows 2000000 --workers 1 2 --single --out /work/wt/bench/${v}_$i.json > /work/wt/bench/${v}_$i.stdout 2> /work/wt/bench/${v}_$i.stderr)
    echo "pair $i $v end $(date +%T) rc $?" >> log.txt
  done
done
echo ALLDONE >> log.txt
