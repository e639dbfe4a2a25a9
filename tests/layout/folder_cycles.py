#!/usr/bin/env python3
"""Checks that no source folder includes from a sibling folder that includes back.

A folder is a directory of one library or executable (core/model, core/analysis, ui/remote,
ui/shell, app/cli, app/engine ...); a public header counts in the folder of its sources
(core/include/pipestudio/core/io/x.h is core/io). An include names a folder either through
"pipestudio/<lib>/<folder>/x.h" or as "<folder>/x.h" from the library's own include root.
Prints every pair of folders that include each other, with the lines, and exits 1; exits 0
when the graph is one-way. `--self-test` first checks that a made-up cycle is found.
"""
import os
import re
import sys
import tempfile

LIBRARIES = ["core", "sessions", "engine", "ui", "app"]
INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')


def folder_of_file(root, path):
    rel = os.path.relpath(os.path.dirname(path), root).split(os.sep)
    lib = rel[0]
    rest = rel[1:]
    if rest[:3] == ["include", "pipestudio", lib]:
        rest = rest[3:]
    elif rest[:1] == ["src"]:
        rest = rest[1:]
    return "/".join([lib] + rest)


def folder_of_include(root, lib, include, folders):
    parts = include.split("/")[:-1]
    if not parts:
        return None
    if parts[0] == "pipestudio" and len(parts) >= 2:
        return "/".join(parts[1:])
    # "<folder>/x.h" from one of the library's include roots (lib/, lib/src, app/cli ...).
    for prefix in ([lib], [lib, "src"], [lib, "cli"]):
        candidate = "/".join([lib] + parts) if prefix == [lib] else "/".join(prefix + parts)
        if os.path.isdir(os.path.join(root, candidate)):
            return folder_of_file(root, os.path.join(root, candidate, "x"))
    return None


def cycles(root):
    edges = {}
    for lib in LIBRARIES:
        for dirpath, _, files in os.walk(os.path.join(root, lib)):
            for name in sorted(files):
                if not name.endswith((".h", ".hpp", ".cpp", ".cc", ".cu")):
                    continue
                path = os.path.join(dirpath, name)
                here = folder_of_file(root, path)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        there = folder_of_include(root, lib, m.group(1), None)
                        if there is None or there == here:
                            continue
                        # Siblings: the same parent folder (core/io and core/model, ui/remote and ui/shell).
                        if there.rsplit("/", 1)[0] != here.rsplit("/", 1)[0]:
                            continue
                        where = "%s:%d: %s" % (os.path.relpath(path, root), number, line.strip())
                        edges.setdefault((here, there), []).append(where)
    found = []
    for (a, b), lines in sorted(edges.items()):
        if a < b and (b, a) in edges:
            found.append((a, b, lines, edges[(b, a)]))
    return found


def report(found):
    for a, b, ab, ba in found:
        print("folders %s and %s include each other:" % (a, b))
        for line in ab + ba:
            print("  " + line)


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        for folder, include in (("ui/remote", "shell/main_window.h"), ("ui/shell", "remote/run_dialog.h")):
            os.makedirs(os.path.join(tmp, folder))
            with open(os.path.join(tmp, folder, "a.cpp"), "w") as f:
                f.write('#include "%s"\n' % include)
        found = cycles(tmp)
        if [(a, b) for a, b, _, _ in found] != [("ui/remote", "ui/shell")]:
            print("self-test: the made-up cycle ui/remote <-> ui/shell was not found: %r" % found)
            return False
    return True


def main(argv):
    args = [a for a in argv[1:] if a != "--self-test"]
    if "--self-test" in argv and not self_test():
        return 2
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    found = cycles(os.path.abspath(root))
    report(found)
    if found:
        return 1
    print("no folder includes from a sibling that includes back")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
