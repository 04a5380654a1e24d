#!/usr/bin/env python3
"""Summarize run_conformance.py's summary.json: one row per producer (function) with its verdict
counts over every input dtype x case x label, the recipe that claims to model it, the variants
kvq identify named for the mismatches, and the exact checks that failed. Markdown on stdout, for
docs/results/conformance.md.

    python3 proptests/ports/conformance/summarize.py summary.json
"""
import collections
import json
import re
import sys


def main():
    s = json.load(open(sys.argv[1]))
    print("Device: %s; packages: %s\n" % (s.get("device"), ", ".join("%s %s" % kv for kv in sorted(s["versions"].items()))))
    rows = collections.OrderedDict()
    for r in s["records"]:
        rows.setdefault(r["producer"], []).append(r)
    print("| producer | function | recipe | bit-exact | mismatch | not verified | identify (mismatches) | failed exact checks |")
    print("|---|---|---|---|---|---|---|---|")
    for name, rs in rows.items():
        exact = sum(1 for r in rs if r.get("verify", {}).get("rc") == 0)
        mismatch = [r for r in rs if r.get("verify", {}).get("rc") not in (None, 0)]
        other = len(rs) - exact - len(mismatch)
        recipes = sorted({str(r.get("recipe")) for r in rs})
        found = collections.Counter()
        for r in mismatch:
            lines = r.get("identify", {}).get("report", "").splitlines()
            exacts = [l.split("exact: this port follows ", 1)[1] for l in lines if "exact: this port follows" in l]
            found[exacts[0] if exacts else "none exact"] += 1
        checks = collections.Counter()
        for r in rs:
            for c in r.get("exact_checks", []):
                if c["differ"]:
                    checks[re.sub(r"\s+", " ", c["what"])[:60]] += 1
        errors = sum(1 for r in rs if r.get("error"))
        print("| %s | `%s` | %s | %d | %d | %d%s | %s | %s |" % (
            name, rs[0]["function"], ", ".join(recipes), exact, len(mismatch), other,
            " (%d errors)" % errors if errors else "",
            "; ".join("%s (%d)" % kv for kv in found.most_common(3)),
            "; ".join("%s (%d)" % kv for kv in checks.most_common(2))))


if __name__ == "__main__":
    main()
