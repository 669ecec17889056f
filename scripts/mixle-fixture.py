#!/usr/bin/env python3
"""Write mixle's sft_plan test fixture as plansmith traces, request for request.

mixle's `mixle/tests/task_sft_plan_test.py` trains its generative planner on 180 requests drawn
by a small generator (seed 0) and checks that no wrong plan passes the gate on fresh ones
(seed 7). Two tools: `lookup_order(order_id)` and `notify(user)`; refund requests call both,
status requests the first, thank-you notes nothing. The draws below follow the same numpy
`RandomState` sequence, so the requests are the ones mixle's test sees.

    python3 scripts/mixle-fixture.py OUT_DIR [--calibration N]   # needs numpy

Writes OUT_DIR/tools.json, train.jsonl (180, seed 0), fresh.jsonl (200, seed 7) and
calibration.jsonl (N fresh requests of seed 1, default 1000: a split large enough for the
guaranteed floor to certify a rate; mixle calibrates on a holdout of its 180).
"""

import argparse
import json
import os
import re

import numpy as np

USERS = ["bob", "ana", "kim", "raj"]


def requests(n, seed):
    rng = np.random.RandomState(seed)
    out = []
    for _ in range(n):
        # Same order of draws as the fixture: order id, user, branch, then the note number.
        oid, user = rng.randint(1000, 9999), USERS[rng.randint(0, 4)]
        r = rng.rand()
        if r < 0.5:
            out.append(f"please refund order {oid} for {user} as discussed")
        elif r < 0.85:
            out.append(f"can you check status of order {oid} right away")
        else:
            out.append(f"just wanted to say thanks, note {rng.randint(0, 99)}")
    return out


def reference(request):
    m = re.search(r"refund order (\d+) for (\w+)", request)
    if m:
        return [
            {"name": "lookup_order", "arguments": {"order_id": m.group(1)}},
            {"name": "notify", "arguments": {"user": m.group(2)}},
        ]
    m = re.search(r"check status of order (\d+)", request)
    if m:
        return [{"name": "lookup_order", "arguments": {"order_id": m.group(1)}}]
    return []


def tool(name, description, arg):
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {arg: {"type": "string"}},
                "required": [arg],
            },
        },
    }


def write_traces(path, reqs):
    with open(path, "w") as f:
        for r in reqs:
            f.write(json.dumps({"request": r, "calls": reference(r), "source": "synthetic"}) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--calibration", type=int, default=1000)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    tools = [
        tool("lookup_order", "Look up an order by its number.", "order_id"),
        tool("notify", "Notify a user.", "user"),
    ]
    with open(os.path.join(a.out, "tools.json"), "w") as f:
        json.dump(tools, f, indent=2)
        f.write("\n")
    write_traces(os.path.join(a.out, "train.jsonl"), requests(180, 0))
    write_traces(os.path.join(a.out, "fresh.jsonl"), requests(200, 7))
    write_traces(os.path.join(a.out, "calibration.jsonl"), requests(a.calibration, 1))


if __name__ == "__main__":
    main()
