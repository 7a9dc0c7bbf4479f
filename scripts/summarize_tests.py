"""Sums doctest's per-suite counts from meson's test log into one closing line:
'N passed, N failed, N skipped'. A suite that exits 77 (skipped: no GPU, say) counts its
test cases as skipped; one that crashed before printing counts as one failure."""
import json
import re
import sys

passed = failed = skipped = 0
pattern = re.compile(r"test cases:\s*(\d+)\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed(?:\s*\|\s*(\d+) skipped)?")
with open(sys.argv[1]) as log:
    for line in log:
        entry = json.loads(line)
        found = pattern.findall(entry.get("stdout", "") or "")
        result = entry.get("result", "")
        if result == "SKIP":
            skipped += max(1, sum(int(f[0]) for f in found))
        elif found:
            for total, ok, bad, skip in found:
                passed += int(ok)
                failed += int(bad)
                skipped += int(skip or 0)
            if result not in ("OK", "EXPECTEDFAIL") and not any(int(f[2]) for f in found):
                failed += 1
        elif result == "OK":
            passed += 1
        else:
            failed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
