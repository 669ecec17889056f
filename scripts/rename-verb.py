#!/usr/bin/env python3
"""The rename diagnostic of the held-out-verb experiment (README, "Why `wait` gets nothing"):
keep the traces whose request says VERB as a word, and rename that word, the tool called
VERB in the trace's catalog and every call to it to NEW. Same requests, same arguments, same
catalog otherwise, so the planner's score on the copy shows what the name itself costs.

    scripts/rename-verb.py IN.jsonl OUT.jsonl VERB NEW
"""
import json
import os
import re
import sys

source, target, verb, new = sys.argv[1:]
word = re.compile(rf"\b{re.escape(verb)}\b", re.IGNORECASE)


def respell(match):
    found = match.group(0)
    if found.isupper():
        return new.upper()
    if found[0].isupper():
        return new.capitalize()
    return new


kept = 0
with open(source) as f, open(target + ".tmp", "w") as out:
    for line in f:
        trace = json.loads(line)
        if not word.search(trace["request"]):
            continue
        trace["request"] = word.sub(respell, trace["request"])
        for tool in trace.get("tools") or []:
            function = tool.get("function", tool)
            if function["name"] == verb:
                function["name"] = new
        for call in trace["calls"]:
            if call["name"] == verb:
                call["name"] = new
        out.write(json.dumps(trace) + "\n")
        kept += 1
os.replace(target + ".tmp", target)
print(f"{target}: {kept} traces that say `{verb}`, renamed `{new}`", file=sys.stderr)
