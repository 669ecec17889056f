#!/usr/bin/env python3
"""Copy a trace file, dropping every trace whose request (case-folded) is also in any of the
other files: fresh training data from another seed must not contain an evaluation request.

    scripts/drop-seen.py IN.jsonl OUT.jsonl SEEN.jsonl [SEEN.jsonl ...]
"""
import json
import os
import sys

source, target, *seen_files = sys.argv[1:]
seen = set()
for path in seen_files:
    with open(path) as f:
        seen.update(json.loads(line)["request"].lower() for line in f if line.strip())
kept = dropped = 0
with open(source) as f, open(target + ".tmp", "w") as out:
    for line in f:
        if not line.strip():
            continue
        if json.loads(line)["request"].lower() in seen:
            dropped += 1
        else:
            out.write(line)
            kept += 1
os.replace(target + ".tmp", target)
print(f"{source}: kept {kept}, dropped {dropped} seen in {', '.join(seen_files)}", file=sys.stderr)
