#!/usr/bin/env python3
"""Checks that no function in PipeStudio's C++ sources is longer than a threshold.

Counts the lines of every function body (from the line with its opening brace to the line with
the closing one) in core/, sessions/, engine/, ui/ and app/ (tests and benchmarks are left out),
the way clang-tidy's readability-function-size counts LineThreshold. Lambdas count within the
function that holds them. Prints every function over the threshold as file:line: name (N lines)
and exits 1; with --list N, prints the N longest. `--self-test` first checks a made-up long
function is found.
"""
import os
import re
import sys
import tempfile

LIBRARIES = ["core", "sessions", "engine", "ui", "app"]
# The longest a function may be, in lines (docs/architecture.md, "Rules the layout enforces"):
# what the tree meets today (listSchedule, 260 lines; the simulator's compile, 259), so that no
# function grows past it; lower it as the longest ones are split at their section comments
# (`--list 20`).
THRESHOLD = 260

STRING = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'')


def code_lines(text):
    """The text's lines with comments, string and character literals blanked out."""
    out = []
    in_block = False
    raw_end = None
    for line in text.split("\n"):
        if raw_end is not None:  # inside a raw string literal R"x(...)x"
            at = line.find(raw_end)
            if at < 0:
                out.append("")
                continue
            line = line[at + len(raw_end):]
            raw_end = None
        result = ""
        i = 0
        while i < len(line):
            if in_block:
                end = line.find("*/", i)
                if end < 0:
                    i = len(line)
                    break
                in_block = False
                i = end + 2
                continue
            if line.startswith("//", i):
                break
            if line.startswith("/*", i):
                in_block = True
                i += 2
                continue
            m = re.match(r'R"([^(\s]*)\(', line[i:])
            if m and (i == 0 or not (line[i - 1].isalnum() or line[i - 1] == "_")):
                end = ")" + m.group(1) + '"'
                at = line.find(end, i + m.end())
                if at < 0:
                    raw_end = end
                    i = len(line)
                    break
                result += '""'
                i = at + len(end)
                continue
            m = STRING.match(line, i)
            if m:
                result += '""'
                i = m.end()
                continue
            result += line[i]
            i += 1
        out.append(result)
    return out


def functions(path):
    """(first line, name, lines) of every function defined at namespace or class level."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = code_lines(f.read())
    found = []
    depth = 0
    scopes = []  # for each open brace: True when it opened a function body
    start = None
    header = ""  # the code since the last ';', '{' or '}' at this level: a function's head
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("#"):  # the preprocessor: #if defined(...), #define
            continue
        for ch in line:
            if ch == "{":
                in_function = any(scopes)
                is_function = False
                if not in_function:
                    head = header.strip()
                    # A function body: a parameter list before it, not a namespace, class,
                    # enum, initializer or control statement.
                    if ")" in head and not re.match(r"(namespace|class|struct|enum|union|extern)\b", head) \
                            and not re.search(r"=\s*$", head):
                        is_function = True
                        name = re.search(r"([~\w:]+)\s*\(", head)
                        start = (number, name.group(1) if name else head[:60])
                scopes.append(is_function)
                depth += 1
                header = ""
            elif ch == "}":
                if scopes:
                    was_function = scopes.pop()
                    if was_function and not any(scopes) and start:
                        found.append((start[0], start[1], number - start[0] + 1))
                        start = None
                depth -= 1
                header = ""
            elif ch == ";":
                if not any(scopes):
                    header = ""
            else:
                if not any(scopes):
                    header += ch
        if not any(scopes):
            header += " "
    return found


def sources(root):
    for lib in LIBRARIES:
        for dirpath, _, files in os.walk(os.path.join(root, lib)):
            for name in sorted(files):
                if name.endswith((".cpp", ".h", ".cu")):
                    yield os.path.join(dirpath, name)


def all_functions(root):
    out = []
    for path in sources(root):
        for line, name, length in functions(path):
            out.append((length, os.path.relpath(path, root), line, name))
    out.sort(key=lambda f: (-f[0], f[1], f[2]))
    return out


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "core", "src"))
        body = "\n".join('  x += "}{"; // }' for _ in range(THRESHOLD + 5))
        with open(os.path.join(tmp, "core", "src", "a.cpp"), "w") as f:
            f.write("namespace ps {\nstruct S { int f() const { return 1; } };\n"
                    "int longOne(int x) {\n" + body + "\n  auto l = [] { return 1; };\n  return x;\n}\n}\n")
        found = all_functions(tmp)
        if [(n, length) for length, _, _, n in found] != [("longOne", THRESHOLD + 9), ("f", 1)]:
            print("self-test: expected longOne (%d lines) and f (1 line), found %r" % (THRESHOLD + 9, found))
            return False
    return True


def main(argv):
    args = argv[1:]
    if "--self-test" in args:
        args.remove("--self-test")
        if not self_test():
            return 2
    listing = None
    if "--list" in args:
        i = args.index("--list")
        listing = int(args[i + 1])
        del args[i:i + 2]
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    found = all_functions(root)
    if listing is not None:
        for length, path, line, name in found[:listing]:
            print("%5d  %s:%d: %s" % (length, path, line, name))
        return 0
    over = [f for f in found if f[0] > THRESHOLD]
    for length, path, line, name in over:
        print("%s:%d: %s is %d lines, more than %d: split it at its sections" % (path, line, name, length, THRESHOLD))
    if over:
        return 1
    print("no function is longer than %d lines (the longest: %s, %d lines)" %
          (THRESHOLD, found[0][3] if found else "-", found[0][0] if found else 0))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
