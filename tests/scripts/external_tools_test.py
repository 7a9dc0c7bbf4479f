"""Every external program and Python module the tests call is installed by scripts/setup.sh, or
the test that calls it skips without it (tests/skip.h: a test whose peer tool is missing is a
skip with its reason, never a failure). Catches the test that passes only on a machine where
someone installed a tool by hand.

What a test calls is read from the tree, not guessed: the Python modules imported by Python code
in the test sources (scripts written out by C++ tests included) and in the repository's scripts
the tests run (found by name, transitively: tests/scripts/gpu_bench_test.cpp runs
bench/gpu_bench.sh, which runs bench/torch_gpu.py); the programs named at a command's start in
those shell scripts and in the string literals of run_program/system/popen calls. A program is
mapped to its Debian package through `dpkg -S`, a module through the file it imports from; a
package counts as installed by setup.sh when it is in setup.sh's list, a dependency of one, or
part of every Debian system (Essential or Priority required). Otherwise the using test (or the
script itself) must skip with a reason that names the tool. Run by /usr/bin/python3, the
interpreter the tests' Python code runs under.

    external_tools_test.py SOURCE_ROOT
"""
import os
import re
import shutil
import subprocess
import sys

BUILTINS = set("""
. : [ [[ ]] { } ! alias break case cd command continue declare do done echo elif else esac eval
exec exit export false fi for function getopts if in let local mapfile printf pwd read readarray
return select set shift source test then time trap true type unset until wait while
""".split())
# Files under the tree that the tests run (scripts): named like these in a test or script.
SCRIPT_REF = re.compile(r"\b((?:bench|scripts|tools|tests|examples)/[\w./-]+\.(?:sh|py))\b")
PY_IMPORT = re.compile(r"^[ \t]*import[ \t]+([\w.]+(?:[ \t]*,[ \t]*[\w.]+)*)", re.M)
PY_FROM = re.compile(r"^[ \t]*from[ \t]+([\w.]+)[ \t]+import\b", re.M)
INLINE_PY = re.compile(r"-c\s+['\"]([^'\"]*)")  # python3 -c 'import h5py, numpy'
CALL = re.compile(r"\b(?:run_program|system|popen|run_command|run)\s*\(")
CPP_STRING = re.compile(r'R"([^(]*)\((.*?)\)\1"|"((?:[^"\\\n]|\\.)*)"', re.S)
SKIP = re.compile(r"\bskip\s*\(|exit 77|SKIPPED")
# The installer itself and this file name scripts without running them.
# scripts/gpu_check.sh runs on the GPU machine, whose image brings its own tools; here
# tests/scripts/gpu_check_test.cpp runs it only as far as its no-GPU exit.
NOT_RUN = {"scripts/setup.sh", "tests/scripts/external_tools_test.py", "scripts/gpu_check.sh"}
SKIP_WINDOW = 12  # lines around a skip in which the tool must be named


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def setup_packages(root):
    """What ./test.sh installs: setup.sh's packages=( ... ) list and its test_packages=( ... )."""
    text = read(os.path.join(root, "scripts", "setup.sh"))
    match = re.search(r"^packages=\((.*?)^\)", text, re.M | re.S)
    if not match:
        sys.exit("scripts/setup.sh has no packages=( ... ) list")
    wanted = set()
    for body in [match.group(1)] + re.findall(r"^test_packages=\((.*?)^\)", text, re.M | re.S):
        wanted |= set(re.sub(r"#.*", "", body).split())
    return wanted


def installed_packages():
    """name -> (essential or required, [dependency alternatives], provides) for dpkg's view."""
    out = subprocess.run(
        ["dpkg-query", "-W", "-f=${Package}\t${Essential}\t${Priority}\t${Depends}, "
         "${Pre-Depends}\t${Provides}\t${Status}\n"],
        capture_output=True, text=True, check=True).stdout
    packages, providers = {}, {}
    for line in out.splitlines():
        name, essential, priority, depends, provides, status = line.split("\t")
        if not status.endswith("installed") or "not-installed" in status:
            continue
        deps = []
        for clause in depends.split(","):
            names = [re.sub(r"[\s(:].*", "", a.strip()) for a in clause.split("|")]
            if any(names):
                deps.append([n for n in names if n])
        packages[name] = (essential == "yes" or priority == "required", deps)
        for p in provides.split(","):
            p = re.sub(r"[\s(].*", "", p.strip())
            if p:
                providers.setdefault(p, []).append(name)
    return packages, providers


def closure(roots, packages, providers):
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        for real in [name] + providers.get(name, []):
            if real in seen or real not in packages:
                continue
            seen.add(real)
            for alternatives in packages[real][1]:
                todo.extend(alternatives)
    return seen


def package_of(path):
    candidates = [path, os.path.realpath(path)]
    for c in list(candidates):  # merged /usr: dpkg may know /bin/grep as /bin/grep only
        if c.startswith("/usr/"):
            candidates.append(c[len("/usr"):])
    for candidate in candidates:
        result = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
        for line in result.stdout.splitlines():
            if not line.startswith("diversion"):
                return line.split(":")[0].split(",")[0].strip()
    return None


def module_path(name):
    import importlib.util
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.origin and spec.origin not in ("built-in", "frozen"):
        return spec.origin
    locations = list(spec.submodule_search_locations or [])
    return locations[0] if locations else None


def shell_commands(text):
    """Words at a command's start in shell text."""
    words = []
    for line in text.splitlines():
        line = re.sub(r"(^|\s)#.*", "", line)
        for part in re.split(r"\|\||&&|[|;(`]|\$\(|\bthen\b|\bdo\b|\belse\b", line):
            tokens = part.split()
            while tokens and (re.match(r"^\w+=", tokens[0]) or tokens[0] in ("!", "if", "while",
                                                                             "until", "env")):
                tokens.pop(0)
            if tokens and tokens[0] in ("timeout",):
                tokens = [t for t in tokens[1:] if not re.match(r"^(-\w+|\d+[smh]?)$", t)]
            if tokens and tokens[0] == "command" and tokens[1:2] == ["-v"]:
                tokens = tokens[2:]
            if tokens:
                words.append(tokens[0])
    return words


def call_literals(text):
    """The string literals inside run_program/system/popen/... calls of a C++ file."""
    literals = []
    for match in CALL.finditer(text):
        depth, i = 1, match.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        for s in CPP_STRING.finditer(text[match.end():i]):
            literals.append(s.group(2) if s.group(2) is not None else s.group(3))
    return literals


def is_program_word(word):
    return bool(re.match(r"^(/[\w.+-]+)*/?[a-zA-Z][\w.+-]*$", word)) and word not in BUILTINS


def uses(path, text):
    """(programs, modules) this file calls."""
    programs, modules = set(), set()
    python = path.endswith(".py")
    for match in PY_IMPORT.finditer(text):
        if python or not path.endswith(".sh") or "python" in text:
            modules.update(m.strip().split(".")[0] for m in match.group(1).split(","))
    for match in PY_FROM.finditer(text):
        modules.add(match.group(1).split(".")[0])
    for match in INLINE_PY.finditer(text):
        for imported in re.findall(r"import\s+([\w., ]+)", match.group(1)):
            modules.update(m.strip().split(".")[0] for m in imported.split(",") if m.strip())
    if path.endswith(".sh"):
        # The heredoc of Python (<<'PY' ... PY) is Python, not shell.
        shell = re.sub(r"<<'?(\w+)'?\n.*?\n\1\n", "\n", text, flags=re.S)
        programs.update(w for w in shell_commands(shell) if is_program_word(w))
    elif path.endswith((".cpp", ".h")):
        for literal in call_literals(text):
            programs.update(w for w in shell_commands(literal) if is_program_word(w))
    return programs, modules


def skips_for(tool, text):
    """Whether `text` skips (tests/skip.h, exit 77) with a reason near which `tool` is named."""
    lines = text.splitlines()
    needle = re.compile(re.escape(tool.split("/")[-1]), re.I)
    for i, line in enumerate(lines):
        if SKIP.search(line):
            window = lines[max(0, i - SKIP_WINDOW):i + SKIP_WINDOW + 1]
            if any(needle.search(w) for w in window):
                return True
    return False


def audit(root):
    """({(kind, name): {(test, how, package)}}, [failure messages]) for the tree at root."""
    stdlib = set(sys.stdlib_module_names)
    packages, providers = installed_packages()
    wanted = setup_packages(root)
    provided = closure(wanted, packages, providers)
    base = {name for name, (required, _) in packages.items() if required}
    base = closure(base, packages, providers)

    tests = []
    for directory, _, files in os.walk(os.path.join(root, "tests")):
        for name in sorted(files):
            if name.endswith((".cpp", ".h", ".sh", ".py")):
                tests.append(os.path.relpath(os.path.join(directory, name), root))
    texts = {}

    def text_of(rel):
        if rel not in texts:
            texts[rel] = read(os.path.join(root, rel))
        return texts[rel]

    failures, seen = [], {}
    # Python modules protoc generates at test time from a .proto of the tree (example_pb2).
    protos = {f for f in subprocess.run(["git", "-C", root, "ls-files", "*.proto"],
                                        capture_output=True, text=True).stdout.split()}
    # And packages of them laid out by their import paths (proto/tensorflow_serving/apis/*.proto
    # gives the Python package tensorflow_serving).
    proto_packages = set()
    for f in protos:
        parts = f.split("/")
        if "proto" in parts[:-2]:
            proto_packages.add(parts[parts.index("proto") + 1])
    protos = {os.path.basename(f) for f in protos}
    for test in sorted(tests):
        reached, todo = [], [test]
        while todo:  # the test and the scripts it runs, transitively
            rel = todo.pop()
            if rel in reached or rel in NOT_RUN or not os.path.isfile(os.path.join(root, rel)):
                continue
            reached.append(rel)
            # Scripts named in code, not in comments (a comment may point at a script to read).
            code = re.sub(r"^\s*(//|#).*$", "", text_of(rel), flags=re.M)
            todo.extend(SCRIPT_REF.findall(code))
        for rel in reached:
            programs, modules = uses(rel, text_of(rel))
            items = [("program", p) for p in programs] + [
                ("module", m) for m in modules if m not in stdlib and m != "__future__"]
            for kind, name in items:
                if kind == "program":
                    # A word that names no program here is prose or a file of the test (a
                    # tool missing here fails or skips that test where it is visible anyway).
                    where = shutil.which(name)
                    if not where or where.startswith(root):
                        continue
                else:
                    if os.path.isfile(os.path.join(os.path.dirname(os.path.join(root, rel)),
                                                   name + ".py")):
                        continue  # a module of the tree, beside the script
                    if name.endswith("_pb2") and name[:-4] + ".proto" in protos:
                        continue  # generated by protoc from a .proto of the tree at test time
                    if name in proto_packages:
                        continue  # the same, a package of them
                    where = module_path(name)
                package = package_of(where) if where and os.path.exists(where) else None
                if package and (package in provided or package in base):
                    how = "setup.sh" if package in provided else "base system"
                elif skips_for(name, text_of(test)) or skips_for(name, text_of(rel)):
                    how = "skips without it"
                else:
                    how = None
                    failures.append(
                        f"{test}: calls the {kind} {name} (in {rel}), "
                        f"{('from Debian package ' + package) if package else 'installed here by no Debian package, or not at all'}; "
                        "add its Debian package to scripts/setup.sh, or make the test skip "
                        "without it (est::testing::skip or exit 77, with a reason naming it)")
                seen.setdefault((kind, name), set()).add((test, how or "MISSING", package))
    return seen, failures


def self_check():
    """The audit catches a test that calls what nothing installs, and accepts it once it skips."""
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "scripts"))
        os.makedirs(os.path.join(root, "tests", "fake"))
        with open(os.path.join(root, "scripts", "setup.sh"), "w") as f:
            f.write("packages=(\n  python3-numpy\n)\n")
        test = os.path.join(root, "tests", "fake", "fake_test.cpp")
        call = 'run_program("/usr/bin/python3 -c \'import est_no_such_module\'");\n'
        with open(test, "w") as f:
            f.write(call)
        _, failures = audit(root)
        if not any("est_no_such_module" in failure for failure in failures):
            sys.exit("self-check: the audit missed a module that nothing installs")
        with open(test, "w") as f:
            f.write('if (missing) return skip("est_no_such_module is not installed");\n' + call)
        _, failures = audit(root)
        if failures:
            sys.exit("self-check: the audit refused a test that skips: " + "; ".join(failures))


def main():
    self_check()
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    seen, failures = audit(root)
    for (kind, name), where in sorted(seen.items()):
        hows = sorted({f"{how} ({package or '-'})" for _, how, package in where})
        print(f"{kind:8} {name:24} {', '.join(hows)}: {len(where)} test file(s)")
    if failures:
        print("\n".join(["", "Tools the tests call that nothing installs:"] + failures))
        return 1
    print(f"{len(seen)} external programs and modules, each installed by setup.sh, part of "
          "the base system, or skipped without")
    return 0


if __name__ == "__main__":
    sys.exit(main())
