#!/usr/bin/env python3
"""distribute/'s folders include only downward (distribute/meson.build, docs/design.md "Folders"):
net/ (the links between tasks) < cluster/ (the job's tasks, ClusterRuntime) < collectives/
(cross-device ops) < distribute/ itself (the strategies) < ps/ (the parameter servers). A file
may include "distribute/..." headers of its own folder and of the folders before it, never of
one after it; the umbrella distribute.h alone reaches everything. A folder that is not in the
order is an error too, so that a new one gets its place. Prints each violation with what to do;
exits 1 when there is one.

  layering_test.py SOURCE_ROOT
"""
import os
import re
import sys

ORDER = ["net", "cluster", "collectives", "", "ps"]  # "": distribute/ itself
UMBRELLA = "distribute/distribute.h"
INCLUDE = re.compile(r'^\s*#\s*include\s+"(distribute/[^"]+)"')


def folder(path):
    """'distribute/net/ring.h' -> 'net'; 'distribute/strategy.h' -> ''."""
    parts = path.split("/")
    return parts[1] if len(parts) > 2 else ""


def name(part):
    return "distribute/" + (part + "/" if part else "")


def main():
    root = sys.argv[1]
    problems, files = [], 0
    for directory, _, names in os.walk(os.path.join(root, "distribute")):
        for file_name in sorted(names):
            if not file_name.endswith((".h", ".cpp", ".cu")):
                continue
            path = os.path.relpath(os.path.join(directory, file_name), root)
            files += 1
            own = folder(path)
            if own not in ORDER:
                problems.append(f"{path}: folder {name(own)} has no place in ORDER of "
                                f"{os.path.basename(__file__)} (and distribute/meson.build's list)")
                continue
            if path == UMBRELLA:
                continue
            with open(os.path.join(root, path), encoding="utf-8") as text:
                for number, line in enumerate(text, 1):
                    match = INCLUDE.match(line)
                    if not match:
                        continue
                    target = folder(match.group(1))
                    if target in ORDER and ORDER.index(target) > ORDER.index(own):
                        problems.append(
                            f"{path}:{number} includes {match.group(1)}: {name(own)} sits below "
                            f"{name(target)}; move the shared part down, or the file up")
    for problem in problems:
        print(f"FAILED: {problem}")
    print(f"{files} files in distribute/, {len(problems)} upward includes")
    return 1 if problems or files == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
