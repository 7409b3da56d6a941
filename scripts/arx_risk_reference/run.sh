#!/bin/sh
# ARX 3.9.2's own population-uniqueness models on class-size histograms: the reference of
# tests/arx_population_reference.json (docs/risk.md).
#
#   scripts/arx_risk_reference/run.sh ARX_CHECKOUT HIST.txt 0.01 0.1 317238626 ...
#
# ARX_CHECKOUT: a clone of github.com/arx-deidentifier/arx at commit aacd487f. HIST.txt: lines
# "size count". Each further argument is a sampling fraction (with a '.') or a population size.
# Needs a JDK (javac, java). ARX's model classes are compiled unchanged, except that
# RiskModelHistogram loses its constructor from a data handle (which would pull in all of ARX);
# ARXPopulationModel.java here stands in for ARX's (the population size only, rounded as ARX does).
set -eu
ARX=$1; shift
HIST=$1; shift
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
S=$ARX/src/main/org/deidentifier/arx
mkdir -p "$W/src/org/deidentifier/arx/risk" "$W/src/org/deidentifier/arx/common" \
         "$W/src/org/deidentifier/arx/exceptions" "$W/lib" "$W/out"
for f in ModelZayatz ModelPitman ModelSNB Gamma RiskModelPopulation RiskModelPopulationUniqueness RiskModelHistogram; do
    cp "$S/risk/$f.java" "$W/src/org/deidentifier/arx/risk/"
done
cp "$S/ARXSolverConfiguration.java" "$W/src/org/deidentifier/arx/"
cp "$S/common/WrappedBoolean.java" "$S/common/WrappedInteger.java" "$W/src/org/deidentifier/arx/common/"
cp "$S/exceptions/ComputationInterruptedException.java" "$W/src/org/deidentifier/arx/exceptions/"
cp "$HERE/ARXPopulationModel.java" "$W/src/org/deidentifier/arx/"
cp "$ARX/lib/ant/commons/commons-math3-3.6.1.jar" "$ARX/lib/ant/hppc/hppc-0.6.0.jar" \
   "$ARX/lib/ant/newtonraphson/newtonraphson-0.0.1.jar" "$W/lib/"
python3 - "$W/src/org/deidentifier/arx/risk/RiskModelHistogram.java" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
a = s.index("    RiskModelHistogram(final DataHandleInternal handle,")
end = "convertAndAnalyze(grouped, stop, progress);\n    }\n"
b = s.index(end, a) + len(end)
s = s[:a] + s[b:]
for imp in ("DataHandleInternal", "common.Groupify", "common.Groupify.Group", "common.TupleWrapper"):
    s = s.replace(f"import org.deidentifier.arx.{imp};\n", "")
open(p, "w").write(s)
PY
javac -nowarn -d "$W/out" -cp "$W/lib/*" -sourcepath "$W/src" "$HERE/RiskRef.java"
java -cp "$W/out:$W/lib/*" RiskRef "$HIST" "$@"
