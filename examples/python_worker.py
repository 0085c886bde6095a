#!/usr/bin/env python3
"""A shiftboss remote worker in Python, standard library only (urllib, json, threading).

It long-polls `POST /v1/agents/poll` for the steps of one agent type, runs each in a thread of
its own, heartbeats while a step runs long, and completes or fails it under the claim's lease
token, or hands it back to run again later. See docs/worker-protocol.md for the protocol.

    SHIFTBOSS_TOKEN=sbt_... python3 examples/python_worker.py \
        --server http://127.0.0.1:8080 --agent ship --worker py-1 --capacity 4

The handler below is an example: replace `handle` with the work of your agent type. It reads the
step's input:
  - {"sleep_s": N}: works for N seconds, heartbeating meanwhile (on the first attempt only when
    "only_first_attempt" is true, so that a retry after a crash finishes at once);
  - {"fail": "transient" | "permanent"}: fails the attempt that way;
  - {"later_s": N}: not ready yet on the first attempt: hands the step back, to be claimed again
    after N seconds with no failure counted (`postpone`);
  - anything else: completes with {"shipped": <task key>, "worker": <worker id>, "attempt": n}.

SIGTERM or SIGINT: stop polling, finish the steps held, answer for them, exit 0.
"""

import argparse
import json
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request


class LeaseLost(Exception):
    """The step's lease is no longer ours: it lapsed and went to another worker, or the step ended."""


class Api:
    def __init__(self, server, token, timeout_s=35):
        self.server = server.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s

    def post(self, path, body):
        """POSTs JSON; returns (status, parsed body). Network errors raise OSError."""
        data = json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method="POST")
        req.add_header("Content-Type", "application/json")
        req.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as res:
                return res.status, json.loads(res.read() or b"null")
        except urllib.error.HTTPError as e:
            text = e.read()
            try:
                return e.code, json.loads(text)
            except ValueError:
                return e.code, {"detail": text.decode(errors="replace")}


class Worker:
    def __init__(self, api, agent, worker_id, capacity, wait_ms, max_steps, release_on_start=False):
        self.api = api
        self.release_on_start = release_on_start
        self.agent = agent
        self.worker_id = worker_id
        self.capacity = capacity
        self.wait_ms = wait_ms
        self.max_steps = max_steps
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.held = 0
        self.done = 0
        self.free = threading.Condition(self.lock)

    def log(self, msg):
        print(f"python_worker {self.worker_id}: {msg}", file=sys.stderr, flush=True)

    def release(self):
        """Takes back what this worker's id held before a restart: those steps run again at once
        instead of after their complete-by. Only for an id that no other running worker shares."""
        path = "/v1/agents/workers/" + urllib.parse.quote(self.worker_id, safe="") + "/release"
        backoff = 0.2
        while not self.stopping.is_set():
            try:
                status, answer = self.api.post(path, {})
            except OSError as e:
                status, answer = None, {"detail": str(e)}
            if status == 200:
                self.log(f"released what it held before: {answer['returned']} returned, {answer['gave_up']} in error")
                return True
            if status is not None and 400 <= status < 500 and status not in (408, 429):
                self.log(f"release refused ({status}): {answer.get('detail')}")
                return False
            self.log(f"release failed ({status or answer['detail']}); trying again in {backoff:.1f} s")
            self.stopping.wait(backoff)
            backoff = min(backoff * 2, 6.0)
        return True

    def run(self):
        if self.release_on_start and not self.release():
            sys.exit(2)
        self.log(f"polling for {self.agent} with capacity {self.capacity}")
        backoff = 0.2
        while not self.stopping.is_set():
            with self.free:
                while self.held >= self.capacity and not self.stopping.is_set():
                    self.free.wait(0.5)
                room = self.capacity - self.held
            if self.stopping.is_set():
                break
            body = {"agents": [self.agent], "worker": self.worker_id, "capacity": room, "wait_ms": self.wait_ms}
            sent = time.monotonic()
            try:
                status, answer = self.api.post("/v1/agents/poll", body)
            except OSError as e:
                self.log(f"poll failed ({e}); trying again in {backoff:.1f}s")
                self.stopping.wait(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            if status != 200:
                self.log(f"poll answered {status}: {answer}; trying again in {backoff:.1f}s")
                self.stopping.wait(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            backoff = 0.2
            for step in answer["steps"]:
                with self.lock:
                    self.held += 1
                # The deadline by this process's clock, measured from before the poll was sent,
                # so that it is never later than the server's complete-by.
                deadline = sent + step["seconds_left"]
                threading.Thread(target=self.run_step, args=(step, deadline), daemon=True).start()
        # Finish what is held.
        with self.free:
            while self.held > 0:
                self.free.wait(0.5)
        self.log(f"stopped after {self.done} steps")

    def run_step(self, step, deadline):
        lost = threading.Event()
        finished = threading.Event()
        beat = threading.Thread(target=self.heartbeat, args=(step, deadline, finished, lost), daemon=True)
        beat.start()
        try:
            outcome = self.handle(step, lost)
        except Exception as e:  # the handler's own failure: a transient failure of the attempt
            outcome = ("fail", {"reason": f"{type(e).__name__}: {e}", "permanent": False})
        finished.set()
        beat.join()
        try:
            if lost.is_set():
                # The step may be running elsewhere: answer nothing.
                self.log(f"step {step['step_id']}: lease lost; dropped")
            else:
                self.answer(step, outcome)
        finally:
            with self.free:
                self.held -= 1
                self.done += 1
                if self.max_steps and self.done >= self.max_steps:
                    self.stopping.set()
                self.free.notify_all()

    def heartbeat(self, step, deadline, finished, lost):
        """Heartbeats at a third of the time left, until the handler finishes or the lease is lost."""
        path = f"/v1/agents/steps/{step['step_id']}/heartbeat"
        while True:
            left = deadline - time.monotonic()
            if finished.wait(max(0.05, left / 3)):
                return
            sent = time.monotonic()
            try:
                status, answer = self.api.post(path, {"lease_token": step["lease_token"]})
            except OSError as e:
                self.log(f"step {step['step_id']}: heartbeat failed ({e})")
                if time.monotonic() >= deadline:
                    lost.set()
                    return
                continue
            if status == 200 and answer.get("held"):
                deadline = sent + answer["seconds_left"]
            elif status == 200:
                lost.set()
                return

    def answer(self, step, outcome):
        kind, body = outcome
        body = dict(body, lease_token=step["lease_token"], worker=self.worker_id)
        path = f"/v1/agents/steps/{step['step_id']}/{kind}"
        for attempt in range(5):
            try:
                status, answer = self.api.post(path, body)
            except OSError as e:
                # The answer may have been lost after the server applied it: sending the same
                # reply again is safe (an identical repeat is acknowledged and changes nothing).
                self.log(f"step {step['step_id']}: {kind} failed ({e}); sending again")
                time.sleep(0.2 * (attempt + 1))
                continue
            if status == 409:
                self.log(f"step {step['step_id']}: {kind} refused, lease lost: {answer.get('detail')}")
            elif status != 200:
                self.log(f"step {step['step_id']}: {kind} answered {status}: {answer}")
            return

    def handle(self, step, lost):
        """The work of the agent type. Returns ("complete", {"output": ...}), ("fail", {...}) or
        ("postpone", {"after_ms": ...})."""
        data = step["input"] if isinstance(step["input"], dict) else {}
        if "later_s" in data and step["attempt"] == 1:
            return ("postpone", {"after_ms": int(float(data["later_s"]) * 1000)})
        sleep_s = float(data.get("sleep_s", 0))
        if data.get("only_first_attempt") and step["attempt"] > 1:
            sleep_s = 0
        end = time.monotonic() + sleep_s
        while time.monotonic() < end and not lost.is_set() and not self.stopping.is_set():
            time.sleep(min(0.05, max(0.0, end - time.monotonic())))
        if data.get("fail") in ("transient", "permanent"):
            return ("fail", {"reason": "asked to fail", "permanent": data["fail"] == "permanent"})
        output = {"shipped": step.get("task_key"), "worker": self.worker_id, "attempt": step["attempt"]}
        return ("complete", {"output": output})


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", default=os.environ.get("SHIFTBOSS_SERVER", "http://127.0.0.1:8080"))
    p.add_argument("--token", default=os.environ.get("SHIFTBOSS_TOKEN"), help="default: $SHIFTBOSS_TOKEN")
    p.add_argument("--agent", required=True, help="the agent type to serve")
    p.add_argument("--worker", default=f"py-{os.uname().nodename}-{os.getpid()}", help="this worker's id")
    p.add_argument("--capacity", type=int, default=4, help="steps run at once")
    p.add_argument("--wait-ms", type=int, default=20000, help="how long one poll waits for work")
    p.add_argument("--max-steps", type=int, default=0, help="exit after this many steps (0: never)")
    p.add_argument("--release-on-start", action="store_true",
                   help="first take back what --worker held before a restart (an id no other running worker shares)")
    args = p.parse_args()
    if not args.token:
        p.error("no token: pass --token or set SHIFTBOSS_TOKEN (a token with the agent scope)")
    worker = Worker(Api(args.server, args.token), args.agent, args.worker, args.capacity, args.wait_ms, args.max_steps,
                    args.release_on_start)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: worker.stopping.set())
    worker.run()


if __name__ == "__main__":
    main()
