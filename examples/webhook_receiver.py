#!/usr/bin/env python3
"""A receiver of shiftboss's status-channel webhooks, checked with the Standard Webhooks reference
library (`pip install standardwebhooks`).

Each message it accepts is written as one JSON line to --log: its webhook-id, type, task id, key
and seq. A message whose signature does not verify is refused with 400 and logged as "bad".
For tests it can misbehave on purpose: --fail-every N answers 500 to every Nth request,
--hang-every N holds every Nth request for --hang-for seconds before answering (past the sender's
timeout), --gone answers 410 to everything.

    python3 examples/webhook_receiver.py --port 9000 --secret whsec_... --log received.jsonl

It prints "listening on PORT" once it accepts connections.
"""

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--secret", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--fail-every", type=int, default=0)
    ap.add_argument("--hang-every", type=int, default=0)
    ap.add_argument("--hang-for", type=float, default=5.0)
    ap.add_argument("--gone", action="store_true")
    args = ap.parse_args()

    hook = Webhook(args.secret)
    lock = threading.Lock()
    count = [0]
    log = open(args.log, "a", buffering=1)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            with lock:
                count[0] += 1
                n = count[0]
            if args.gone:
                return self.answer(410)
            if args.fail_every and n % args.fail_every == 0:
                return self.answer(500)
            try:
                msg = hook.verify(body, {k.lower(): v for k, v in self.headers.items()})
            except WebhookVerificationError as e:
                with lock:
                    log.write(json.dumps({"bad": str(e), "id": self.headers.get("webhook-id")}) + "\n")
                return self.answer(400)
            data = msg["data"]
            line = {"id": self.headers["webhook-id"], "type": msg["type"], "task_id": data["task_id"],
                    "key": data["key"], "seq": data["seq"], "state": data["state"]}
            with lock:
                log.write(json.dumps(line) + "\n")
            if args.hang_every and n % args.hang_every == 0:
                time.sleep(args.hang_for)
            self.answer(204)

        def answer(self, status):
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(f"listening on {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
