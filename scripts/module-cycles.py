#!/usr/bin/env python3
"""Fails when two files of one crate depend on each other, directly or around a circle.

A file's dependencies are the modules of its own crate that its code names (`crate::x`,
`super::x`); comments and `#[cfg(test)] mod tests` are left out, since a test may reach
anywhere. Run from the repository root: `python3 scripts/module-cycles.py`.
"""
import glob
import os
import re
import sys


def modules(src):
    """Module path (a::b) -> file, for every file of the crate rooted at `src`."""
    found = {}
    for path in glob.glob(os.path.join(src, "**", "*.rs"), recursive=True):
        parts = os.path.relpath(path, src)[:-3].split(os.sep)
        if parts[-1] in ("lib", "main"):
            continue
        if parts[-1] == "mod":
            parts = parts[:-1]
        found["::".join(parts)] = path
    return found


def dependencies(module, path, known):
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"#\[cfg\(test\)\]\s*mod tests \{.*", "", text, flags=re.S)
    named = set()
    for ref in re.findall(r"crate::((?:\w+::)*\w+)", text):
        parts = ref.split("::")
        for k in range(len(parts), 0, -1):
            target = "::".join(parts[:k])
            if target in known:
                named.add(target)
                break
    parent = module.split("::")[:-1]
    for ref in re.findall(r"super::(\w+)", text):
        target = "::".join(parent + [ref])
        if target in known:
            named.add(target)
    # A module may use its own parent's items (re-exports), and itself.
    return {t for t in named if t != module and not module.startswith(t + "::")}


def cycle(graph):
    """One cycle of `graph` as a list of modules, or None."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt, path + [nxt])
                if found:
                    return found
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start, [start])
            if found:
                return found
    return None


def main():
    failed = False
    for src in sorted(glob.glob("*/src")) + ["src"]:
        known = modules(src)
        graph = {m: dependencies(m, p, known) for m, p in known.items()}
        found = cycle(graph)
        if found:
            failed = True
            print(f"{src}: files depend on each other: {' -> '.join(found)}")
    if not failed:
        print("no circles between files")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
