"""An OpenAI-compatible engine that answers instantly: every chat completion gets one fixed
Pace plan and 30 logprobs. `plansmith bench serve --backend llamacpp:http://127.0.0.1:PORT`
against it measures what plansmith adds around an engine with nothing else on the cores
(docs/results/backend-overhead.md). Usage: python3 bench/stub_engine.py PORT

Headers and body go out in one send with TCP_NODELAY: sent the plain way, each reply waits
40 ms for a delayed ACK."""
import json, sys, socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
REPLY = json.dumps({"choices": [{"index": 0, "finish_reason": "stop",
    "message": {"role": "assistant", "content": "[{\"name\": \"perform\", \"arguments\": {\"action\": \"click\", \"target\": {\"type\": \"ui_element\", \"label\": \"Save\"}}}]"},
    "logprobs": {"content": [{"token": "x", "logprob": -0.1}] * 30}}]}).encode()
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def setup(self):
        super().setup(); self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    def do_POST(self):
        self.rfile.read(int(self.headers["content-length"]))
        self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(REPLY) + REPLY)
    def log_message(self, *a): pass
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
