#!/usr/bin/env python3
"""The installed headers are est's public API and nothing else (docs/design.md, "Public and
internal headers"):
  - every header installed under <includedir>/est is reached from est.h (the umbrella of the
    public API), and everything est.h reaches is installed (each `#include "..."` resolves);
  - no installed header includes gRPC (<grpcpp/...>, <grpc/...>) or the kernel contract and the
    backends (ops/registry.h, ops/kernel_ops.h, ops/cpu/, ops/onednn/, ops/cuda/): a program
    that includes est.h compiles neither.
Prints each violation with what to do; exits 1 when there is one.

  check_public_headers.py INCLUDEDIR    (the install's <includedir>, holding est/est.h)
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+([<"])([^>"]+)[>"]')
FORBIDDEN = [
    (re.compile(r"^(grpcpp|grpc\+\+|grpc)/"), "gRPC"),
    (re.compile(r"^ops/(registry|kernel_ops)\.h$|^ops/(cpu|onednn|cuda)/"),
     "the kernel contract or a backend"),
]


def main():
    root = os.path.join(sys.argv[1], "est")
    installed = set()
    for directory, _, files in os.walk(root):
        for name in files:
            if name.endswith(".h"):
                installed.add(os.path.relpath(os.path.join(directory, name), root))
    if "est.h" not in installed:
        print(f"FAILED: no est.h under {root}")
        return 1
    problems = []
    reached, todo = set(), ["est.h"]
    while todo:
        header = todo.pop()
        if header in reached:
            continue
        reached.add(header)
        with open(os.path.join(root, header), encoding="utf-8") as text:
            for number, line in enumerate(text, 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                quoted, target = match.group(1) == '"', match.group(2)
                for pattern, what in FORBIDDEN:
                    if pattern.search(target):
                        problems.append(
                            f"{header}:{number} includes {target} ({what}): keep it in .cpp files "
                            "or internal headers (forward declarations, a plain options struct)")
                if quoted:
                    if target in installed:
                        todo.append(target)
                    else:
                        problems.append(
                            f"{header}:{number} includes {target}, which is not installed: add it "
                            f"to the install_headers list in {target.split('/')[0]}/meson.build if "
                            "it is public, else drop the include")
    for header in sorted(installed - reached):
        problems.append(
            f"{header} is installed but est.h does not reach it: remove it from the install_headers "
            f"list in {header.split('/')[0]}/meson.build, or include it from its folder's umbrella "
            "header if it is public")
    for problem in problems:
        print(f"FAILED: {problem}")
    print(f"{len(installed)} headers installed, {len(reached)} reached from est.h, "
          f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
