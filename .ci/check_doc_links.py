#!/usr/bin/env python3
"""Check relative markdown links in README.md and docs/*.md: the file exists and the anchor is a GitHub heading slug.
Usage: .ci/check_doc_links.py [REPO_ROOT]; prints each broken link, exit 1 if any."""
import re, os, sys, glob
root = sys.argv[1] if len(sys.argv) > 1 else '.'
def slugs(path):
    out = set(); seen = {}
    fence = False
    for line in open(path, encoding='utf-8'):
        if line.startswith('```'): fence = not fence; continue
        if fence: continue
        m = re.match(r'^(#{1,6})\s+(.*?)\s*#*\s*$', line)
        if not m: continue
        t = m.group(2).lower()
        t = re.sub(r'[^\w\- ]', '', t)   # keeps letters, digits, _, -, space
        t = t.replace(' ', '-')
        n = seen.get(t, 0); seen[t] = n + 1
        out.add(t if n == 0 else f'{t}-{n}')
    return out
files = [os.path.join(root, 'README.md')] + sorted(glob.glob(os.path.join(root, 'docs', '*.md')))
bad = 0; total = 0
for f in files:
    fence = False
    for i, line in enumerate(open(f, encoding='utf-8'), 1):
        if line.startswith('```'): fence = not fence; continue
        if fence: continue
        for m in re.finditer(r'\]\(([^)\s]+)\)', line):
            tgt = m.group(1)
            if re.match(r'^[a-z]+:', tgt): continue
            total += 1
            path, _, anchor = tgt.partition('#')
            p = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
            if not os.path.exists(p):
                print(f'{f}:{i}: missing file {tgt}'); bad += 1; continue
            if anchor and p.endswith('.md') and anchor not in slugs(p):
                print(f'{f}:{i}: missing anchor {tgt}'); bad += 1
print(f'{total} relative links, {bad} broken')
sys.exit(1 if bad else 0)
