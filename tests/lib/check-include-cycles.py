#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Fails when libgpufan's components include each other in a cycle.

A component is a public header lib/gpufan/NAME.h with the files that
implement it: NAME.cpp, and NAME-*.cpp / NAME-*.h (back ends, private
headers) in any folder of lib/, unless a longer public header name claims
them. A file that no public header claims is a component of its own. Component A depends on B
when a file of A includes a file of B ("gpufan/..." or a private header);
the dependencies must form a DAG, so that every part of the library can be
read, tested and reused without the parts that use it.

Usage: check-include-cycles.py LIB_DIR
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def stem(path):
    name = os.path.basename(path)
    for ext in ('.cpp', '.h'):
        if name.endswith(ext):
            return name[: -len(ext)]
    return name


def component_of(path, public):
    """The public header name that claims `path` (longest prefix match)."""
    name = stem(path)
    best = None
    for header in public:
        if name == header or name.startswith(header + '-'):
            if best is None or len(header) > len(best):
                best = header
    return best or name


def build_graph(lib_dir):
    public_dir = os.path.join(lib_dir, 'gpufan')
    public = {stem(f) for f in os.listdir(public_dir) if f.endswith('.h')}
    files = [os.path.join(public_dir, f) for f in os.listdir(public_dir)
             if f.endswith('.h')]
    # The sources sit in folders by concern (session/, scheduling/,
    # devices/); a component is found by file name wherever it sits.
    for folder, _, names in os.walk(lib_dir):
        if os.path.abspath(folder) == os.path.abspath(public_dir):
            continue
        files += [os.path.join(folder, f) for f in names
                  if f.endswith(('.cpp', '.h'))]
    # Private headers are included by their bare name.
    private = {os.path.basename(f): f for f in files
               if os.path.dirname(f) != public_dir and f.endswith('.h')}
    graph = {}
    for path in sorted(files):
        src = component_of(path, public)
        deps = graph.setdefault(src, {})
        with open(path, encoding='utf-8') as f:
            text = f.read()
        for target in INCLUDE.findall(text):
            if target.startswith('gpufan/'):
                dst = component_of(target, public)
            elif target in private:
                dst = component_of(private[target], public)
            else:
                continue  # generated (gpufan-config.h) or outside lib/
            if dst != src:
                deps.setdefault(dst, os.path.relpath(path, lib_dir))
    return graph


def find_cycle(graph):
    """One cycle as a list of components, or None."""
    state = {}  # 1: on the path, 2: done
    path = []

    def visit(node):
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, {})):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    graph = build_graph(sys.argv[1])
    cycle = find_cycle(graph)
    if not cycle:
        print('no include cycle among %d components' % len(graph))
        return 0
    print('include cycle in lib/: ' + ' -> '.join(cycle), file=sys.stderr)
    for a, b in zip(cycle, cycle[1:]):
        print('  %s -> %s (first in %s)' % (a, b, graph[a][b]),
              file=sys.stderr)
    return 1


if __name__ == '__main__':
    sys.exit(main())
