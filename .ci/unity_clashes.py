#!/usr/bin/env python3
"""Names that two sources of one unity batch (embedscope_unity, CMakeLists.txt) both define.

Usage: .ci/unity_clashes.py BUILD_DIR [TARGET_SUBSTRING ...]
  e.g. .ci/unity_clashes.py build embedscope_engine embedscope_sessions

Reads each generated batch (BUILD_DIR/**/unity/TARGET/batch_N.cpp), runs Universal Ctags on the
sources it includes and prints, per batch, every name defined at namespace scope with internal
linkage (in an anonymous namespace, or `static`) and every macro that more than one of its
sources defines: (batch, (enclosing namespace, name), [sources]). Signatures are ignored on
purpose: a same-named function with another signature is no compile error in one translation
unit, but a call may then pick the other source's overload. Identical `using` aliases are
harmless (a redeclaration); anything else is a clash to resolve with EMBEDSCOPE_UNITY_EXCLUDE
(or a rename). Exit status 0 always; needs `ctags` (Debian universal-ctags).
"""
import collections
import glob
import os
import re
import subprocess
import sys


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = sys.argv[1]
    wanted = sys.argv[2:]
    for batch in sorted(glob.glob(os.path.join(build, '**', 'unity', '*', 'batch_*.cpp'), recursive=True)):
        if wanted and not any(t in batch for t in wanted):
            continue
        here = os.path.dirname(batch)
        sources = [os.path.normpath(os.path.join(here, s)) for s in re.findall(r'#include "(.*)"', open(batch).read())]
        seen = collections.defaultdict(set)
        for src in sources:
            tags = subprocess.run(['ctags', '--language-force=C++', '--fields=+KZs', '--extras=-q', '-f', '-', src],
                                  capture_output=True, text=True, check=True).stdout
            for line in tags.splitlines():
                parts = line.split('\t')
                name = parts[0]
                kind = parts[3] if len(parts) > 3 else ''
                fields = dict(p.split(':', 1) for p in parts[3:] if ':' in p)
                if name.startswith('__anon'):
                    continue
                if kind == 'macro':
                    seen[('#define', name)].add(src)
                    continue
                scope = fields.get('scope', '')
                if scope.startswith(('class:', 'struct:', 'function:', 'enum:', 'union:')):
                    continue  # members and locals
                if kind in ('namespace', 'prototype', 'externvar', 'parameter', 'local', 'member'):
                    continue
                ns = scope.split(':', 1)[1] if ':' in scope else ''
                if '__anon' not in ns and 'file' not in fields:
                    continue  # external linkage: a duplicate would already fail to link
                seen[(re.sub(r'::__anon\w+', '', ns), name)].add(src)
        for key, where in sorted(seen.items()):
            if len(where) > 1:
                print(os.path.relpath(batch, build), key, sorted(where))


if __name__ == '__main__':
    main()
