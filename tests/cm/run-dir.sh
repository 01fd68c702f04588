# run-dir.sh, sourced by the tests here that keep files (captures, traces): run_dir NAME PARENT
# makes this run's own directory under PARENT (mktemp -d) as $dir, so two runs at once never
# read or remove each other's files, and removes it at exit when the run passed; a failed run's
# directory is kept and named on stderr.
run_dir() {
  _run_name=$1
  mkdir -p "$2"
  dir=$(mktemp -d "$2/run.XXXXXX")
  trap '_s=$?; if [ $_s -eq 0 ]; then rm -rf "$dir"; else echo "$_run_name: this run'"'"'s files are in $dir" >&2; fi' EXIT
}
