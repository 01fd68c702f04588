#!/bin/sh
# calibration.sh BUILD_DIR [calibration options]: the roce-100g profile beside published
# ConnectX-5/6 Dx 100 GbE figures (docs/calibration.md). Runs bench/calibration under
#   hcasim run --clock lockstep --idle-us 0
# so every figure is the model's simulated time (software takes none; no wall clock is read),
# and prints its table: test, message size, QPs, simulated figure, published figure, unit, the
# source's tag in docs/calibration.md, deviation in percent. Figures, not pass/fail (a failing
# run fails the script).
set -eu
build=$1; shift
printf 'calibration: profile roce-100g, clock lockstep, %s\n' "$(date -u +%Y-%m-%d)"
"$build/bin/hcasim" run --clock lockstep --idle-us 0 --profile roce-100g -- "$build/bin/calibration" "$@"
