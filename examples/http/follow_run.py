#!/usr/bin/env python3
"""Enqueue an arcflow run over HTTP, follow its events live (Server-Sent Events), print the outcome.

Standard library only. Usage:
    ARCFLOW_URL=http://127.0.0.1:8080 ARCFLOW_KEY=<secret> python3 follow_run.py <agent> <input>
ARCFLOW_KEY may be left unset when `arcflow serve` runs without API keys (loopback only).
A dropped stream is resumed with Last-Event-ID, so no event is lost or printed twice.
"""
import json
import os
import sys
import time
import urllib.error
import urllib.request

BASE = os.environ.get("ARCFLOW_URL", "http://127.0.0.1:8080").rstrip("/")
KEY = os.environ.get("ARCFLOW_KEY")
TERMINAL = {"RunCompleted", "RunFailed", "RunCancelled"}


def request(method, path, body=None, headers=None):
    data = None if body is None else json.dumps(body).encode()
    all_headers = {"content-type": "application/json", **(headers or {})}
    if KEY:
        all_headers["authorization"] = f"Bearer {KEY}"
    return urllib.request.urlopen(urllib.request.Request(BASE + path, data=data, method=method, headers=all_headers), timeout=60)


def call(method, path, body=None):
    try:
        with request(method, path, body) as response:
            return json.load(response)
    except urllib.error.HTTPError as error:
        problem = json.load(error)
        sys.exit(f"arcflow: {problem['status']} {problem['code']}: {problem['detail']}")


def follow(run_id):
    """Yields the run's events as they happen, reconnecting after the last event seen."""
    last = 0
    while True:
        headers = {"accept": "text/event-stream", "last-event-id": str(last)}
        try:
            with request("GET", f"/v1/runs/{run_id}/events", headers=headers) as stream:
                data = []
                for raw in stream:
                    line = raw.decode().rstrip("\n")
                    if line.startswith(":"):
                        continue  # a heartbeat
                    if line.startswith("data: "):
                        data.append(line[len("data: "):])
                    elif line == "" and data:
                        event = json.loads("\n".join(data))
                        data = []
                        last = event["seq"]
                        yield event
                        if event["kind"] in TERMINAL:
                            return
        except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
            print(f"(stream dropped: {error}; resuming after event {last})", file=sys.stderr)
            time.sleep(1)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: follow_run.py <agent> <input>")
    run_id = call("POST", "/v1/runs", {"agent": sys.argv[1], "input": sys.argv[2]})["run_id"]
    print(f"run {run_id}")
    for event in follow(run_id):
        where = event["step_id"] + (f"#{event['iteration']}" if "iteration" in event else "")
        print(f"{event['seq']:>4}  {event['kind']:<26} {where}")
    run = call("GET", f"/v1/runs/{run_id}")
    print(f"{run['status']}: {run.get('output') or run.get('error', {}).get('message', '')}")
    sys.exit(0 if run["status"] == "completed" else 1)


if __name__ == "__main__":
    main()
