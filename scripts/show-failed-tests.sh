#!/usr/bin/env bash
# Print, at the end of the suite's log, the recorded output of every test that failed in the
# last ctest run of build folder $1 (ctest's --output-on-failure prints it where the test ended,
# which a log cut to its tail loses).  Prints nothing when no test failed.
set -u
dir="${1:?usage: show-failed-tests.sh BUILD_DIR}/Testing/Temporary"
[ -s "$dir/LastTestsFailed.log" ] || exit 0
echo "=== output of the failed tests (from $dir/LastTest.log) ==="
while IFS=: read -r _ name; do
  # A test's record runs from its "N/M Testing: NAME" line to its "time elapsed" line.
  awk -v name="$name" '
    index($0, "Testing: " name) && substr($0, length($0) - length(name) + 1) == name { on = 1 }
    on { print }
    on && index($0, "\"" name "\" time elapsed") { on = 0 }
  ' "$dir/LastTest.log" | tail -n 80
done < "$dir/LastTestsFailed.log"
