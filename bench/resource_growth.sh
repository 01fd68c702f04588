#!/bin/sh
# resource_growth.sh BUILD_DIR [OPS] [CYCLES]: bench/resource_growth in the in-process world,
# then on a fabric (the program with two HCAs, and the fabric's device process), one after the
# other; exit 1 if either saw growth of more than 5 % between its checkpoints.
set -u
build=$1; ops=${2:-1000000}; cycles=${3:-1000}
status=0
"$build/bin/hcasim" run --clock lockstep -- "$build/bin/resource_growth" --ops "$ops" --cycles "$cycles" || status=1
"$build/bin/hcasim" run --fabric --hcas-per-host 2 -- "$build/bin/resource_growth" --ops "$ops" --cycles "$cycles" ||
  status=1
exit $status
