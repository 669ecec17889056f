"""A small MCP stdio server for plansmith-mcp's fault tests (standard library only).

Usage: stub_server.py MODE
  ok        two pages of tools; `echo` answers its text; `grow` adds a tool and sends
            notifications/tools/list_changed; `fail` answers isError; ping the client once
  version   answers initialize with a protocol revision nobody speaks
  garbage   answers initialize with a line that is not JSON
  hang      answers initialize, then never answers tools/list
  exit      exits (status 3, after a line on stderr) when a tool is called
  grows     like ok, and one second after initialize adds a tool and sends list_changed
  many      100 tools of three typed parameters each, in pages of 50 (`plansmith bench mcp`)
"""
import json
import sys
import threading

MODE = sys.argv[1] if len(sys.argv) > 1 else "ok"
TOOLS = [
    {"name": "echo", "description": "Say the text back.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                     "required": ["text"]},
     "annotations": {"readOnlyHint": True}},
    {"name": "grow", "description": "Add a tool.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "fail", "description": "Fail.",
     "inputSchema": {"type": "object", "properties": {}}},
]


if MODE == "many":
    TOOLS = [
        {"name": f"tool_{i:03d}", "description": f"Tool number {i}: does thing {i}.",
         "inputSchema": {"type": "object", "properties": {
             "target": {"type": "string", "description": "What to act on."},
             "count": {"type": "integer", "minimum": 1, "maximum": 100},
             "mode": {"type": "string", "enum": ["fast", "slow", "careful"]}},
             "required": ["target"]}}
        for i in range(100)
    ]

WRITE = threading.Lock()


def send(msg):
    with WRITE:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def answer(req, result):
    send({"jsonrpc": "2.0", "id": req["id"], "result": result})


STATE = {"grown": False}
LOCK = threading.Lock()


def grow_later():
    def grow():
        with LOCK:
            STATE["grown"] = True
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    threading.Timer(1.0, grow).start()


def main():
    for line in sys.stdin:
        req = json.loads(line)
        method = req.get("method")
        if method is None or "id" not in req:
            continue  # notifications, and the client's answer to our ping
        if method == "initialize":
            if MODE == "garbage":
                sys.stdout.write("this is not json\n")
                sys.stdout.flush()
                continue
            version = "1999-01-01" if MODE == "version" else req["params"]["protocolVersion"]
            answer(req, {"protocolVersion": version,
                         "capabilities": {"tools": {"listChanged": True}},
                         "serverInfo": {"name": "stub", "version": "1"}})
            if MODE in ("ok", "grows"):
                send({"jsonrpc": "2.0", "id": "ping-1", "method": "ping"})
            if MODE == "grows":
                grow_later()
        elif method == "tools/list":
            if MODE == "hang":
                continue
            with LOCK:
                grown = STATE["grown"]
            tools = TOOLS + ([{"name": "grown", "inputSchema": {"type": "object"}}] if grown else [])
            cursor = req.get("params", {}).get("cursor")
            page = 50 if MODE == "many" else 2
            if cursor is None:
                answer(req, {"tools": tools[:page], "nextCursor": "page-2"})
            else:
                answer(req, {"tools": tools[page:]})
        elif method == "tools/call":
            if MODE == "exit":
                sys.stderr.write("stub: giving up\n")
                sys.stderr.flush()
                sys.exit(3)
            name = req["params"]["name"]
            args = req["params"].get("arguments", {})
            if name == "echo":
                answer(req, {"content": [{"type": "text", "text": args.get("text", "")}]})
            elif name == "grow":
                with LOCK:
                    STATE["grown"] = True
                answer(req, {"content": [{"type": "text", "text": "grown"}]})
                send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            else:
                answer(req, {"content": [{"type": "text", "text": "it failed"}], "isError": True})
        else:
            send({"jsonrpc": "2.0", "id": req["id"],
                  "error": {"code": -32601, "message": "no such method"}})


main()
