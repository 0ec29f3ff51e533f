#!/usr/bin/env python3
"""`ppolab feedback serve` against hostile clients, on a free loopback port.

Everything stays on 127.0.0.1 and every wait is bounded (the whole test is
also stopped by an alarm). In order:

1. Request guards: two Host headers (evil first, good last, and the other
   way round), two Content-Length headers, a Host that is not ASCII, a
   Content-Type of application/jsonx (or another charset), Sec-Fetch-Site
   cross-site or same-site without an Origin; participant names with a
   newline, a NUL, DEL, a C1 control or invalid UTF-8 at /api/consent. Each
   is refused with its status and a message naming the header or field, and
   no vote file is written.
2. A flood that used to shut the page off: more sockets than the server's
   connection table (kServeMaxConnections) — some idle, most having sent
   `GET / HTTP/1.1\\r\\n` and waiting, a few trickling a header one byte at a
   time. A real person's page load, consent and vote still go through within
   a few seconds; the partial headers get a 408 from the byte-rate floor
   within seconds, and every flood socket is closed by the header deadline.
3. An attacker process that keeps the table full and reconnects every
   socket the server closes: a state read and a vote still go through.
4. Clients that request a large answer and never read it: the server goes
   on answering others at once, and closes them by the send deadline.
5. SIGTERM stops the server cleanly; the vote file holds the three votes.
"""
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

BIN = os.environ.get("PPOLAB_BINARY", "build/bin/ppolab")
# The server's rules (src/feedback/serve.h).
SLOTS = 64               # kServeMaxConnections
HEADER_DEADLINE = 5.0    # kServeHeaderDeadline
RATE_GRACE = 1.0         # kServeRateGrace
SEND_DEADLINE = 10.0     # kServeSendDeadline
SLACK = 4.0              # scheduling slack on a loaded 2-core machine
REQUEST_TIMEOUT = 3.0    # a real request must be answered within this
HOST = "127.0.0.1"

server = None


def fail(message):
    print("serve_hostile: FAIL: " + message, file=sys.stderr)
    raise SystemExit(1)


def on_alarm(signum, frame):
    fail("the test ran past its time limit")


def connect(port, rcvbuf=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(REQUEST_TIMEOUT)
    s.connect((HOST, port))
    return s


def raw_request(method, path, port, headers=None, body=b"", host=True, length=True):
    lines = [f"{method} {path} HTTP/1.1".encode()]
    if host:
        lines.append(f"Host: 127.0.0.1:{port}".encode())
    for name, value in headers or []:
        lines.append(name.encode() + b": " + (value if isinstance(value, bytes) else value.encode()))
    if length and (body or method == "POST"):
        lines.append(b"Content-Length: " + str(len(body)).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def exchange(port, raw, timeout=REQUEST_TIMEOUT):
    """Sends `raw` on a new connection and reads the whole answer (the server
    closes after it): (status, body as JSON or bytes, seconds taken)."""
    start = time.monotonic()
    deadline = start + timeout
    s = connect(port)
    data = b""
    try:
        s.sendall(raw)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                fail(f"no complete answer within {timeout} s to {raw[:70]!r} (got {data[:100]!r})")
            s.settimeout(left)
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:
                fail(f"connection reset while waiting for the answer to {raw[:70]!r}")
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    head, sep, body = data.partition(b"\r\n\r\n")
    m = re.match(rb"HTTP/1\.1 (\d{3}) ", head)
    if not sep or not m:
        fail(f"not an HTTP answer to {raw[:70]!r}: {data[:200]!r}")
    length = re.search(rb"\r\nContent-Length: (\d+)", head)
    if not length or int(length.group(1)) != len(body):
        fail(f"answer to {raw[:70]!r} is cut: {len(body)} body bytes, header says {length and length.group(1)}")
    if b"application/json" in head:
        body = json.loads(body)
    return int(m.group(1)), body, time.monotonic() - start


def expect(port, raw, status, text=None):
    got, body, _ = exchange(port, raw)
    if got != status:
        fail(f"{raw[:80]!r}: status {got}, expected {status}; body {body!r:.300}")
    if text is not None and text not in body["error"]:
        fail(f"{raw[:80]!r}: error {body['error']!r} does not say {text!r}")
    return body


def consent_body(name):
    return (b'{"participant": "' + name + b'", "consent": true, "human_attestation": true}')


def post(port, path, body, content_type="application/json", extra=()):
    return raw_request("POST", path, port, [("Content-Type", content_type)] + list(extra), body)


def wait_closed(sockets, until):
    """For each socket: (seconds from `opened` to EOF or reset, or None if
    still open at `until`; the bytes received). sockets: list of (socket, opened)."""
    result = [[None, b""] for _ in sockets]
    live = {s.fileno(): i for i, (s, _) in enumerate(sockets)}
    while live and time.monotonic() < until:
        readable, _, _ = select.select([sockets[i][0] for i in live.values()], [], [],
                                       max(0.0, min(0.1, until - time.monotonic())))
        for s in readable:
            i = live[s.fileno()]
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                chunk = b""
            if chunk:
                result[i][1] += chunk
            else:
                result[i][0] = time.monotonic() - sockets[i][1]
                del live[s.fileno()]
    for s, _ in sockets:
        s.close()
    return result


def attacker(port, seconds):
    """Keeps SLOTS idle connections open and reconnects each one the server
    closes (one sweep every 50 ms), for `seconds`; prints how many reconnects."""
    socks = [connect(port) for _ in range(SLOTS)]
    print("ready", flush=True)
    reconnects = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end and reconnects < 5000:
        readable, _, _ = select.select(socks, [], [], 0.05)
        for s in readable:
            try:
                closed = s.recv(4096) == b""
            except (ConnectionResetError, socket.timeout):
                closed = True
            if closed:
                s.close()
                socks[socks.index(s)] = connect(port)
                reconnects += 1
                print("reconnected", flush=True)
        time.sleep(0.05)
    for s in socks:
        s.close()
    print(reconnects, flush=True)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--attacker":
        attacker(int(sys.argv[2]), float(sys.argv[3]))
        return
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(150)
    work = tempfile.mkdtemp(prefix="ppolab_serve_hostile_")
    try:
        run(work)
    finally:
        if server is not None and server.poll() is None:
            server.kill()
            server.wait()
        shutil.rmtree(work, ignore_errors=True)
    print("serve_hostile: ok")


def run(work):
    global server
    big = "word " * 160000  # an 800 kB answer: more than the kernel buffers of one connection
    pairs = []
    for i in range(4):
        pairs.append({"id": f"pair-{i}", "split": ["train", "validation", "test", "train"][i],
                      "prompt_id": f"OH{i:03d}-RL0", "prompt": f"Help request {i}:\nthe printer stopped.",
                      "a": {"text": big if i == 2 else f"Answer A{i}", "token_ids": [1, 2], "finish_reason": "eos"},
                      "b": {"text": f"Answer B{i}", "token_ids": [3], "finish_reason": "length"}})
    candidates = os.path.join(work, "candidates.json")
    with open(candidates, "w") as f:
        json.dump({"format": 1, "checkpoint_sha256": "ab" * 32, "pairs": pairs}, f)
    out = os.path.join(work, "votes.json")
    server = subprocess.Popen([BIN, "feedback", "serve", "--candidates", candidates, "--out", out, "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = server.stdout.readline()
    m = re.search(r"serving http://127\.0\.0\.1:(\d+)/", line)
    if not m:
        fail("server did not start: " + line + server.stdout.read())
    port = int(m.group(1))
    origin = ("Origin", f"http://127.0.0.1:{port}")

    # 1. request guards ---------------------------------------------------------
    good = f"127.0.0.1:{port}"
    expect(port, raw_request("GET", "/", port, [("Host", "evil.example"), ("Host", good)], host=False), 400,
           "'Host' appears more than once")
    expect(port, raw_request("GET", "/", port, [("Host", good), ("hOsT", "evil.example")], host=False), 400,
           "'Host' appears more than once")
    expect(port, raw_request("GET", "/", port, [("Host", b"\xff\xfe")], host=False), 400, "'Host' must be printable")
    expect(port, raw_request("POST", "/api/consent", port,
                             [("Content-Type", "application/json"), ("Content-Length", "2"), ("Content-Length", "2")],
                             b"{}", length=False), 400, "'Content-Length' appears more than once")
    ok_name = consent_body(b"Ada Tester")
    expect(port, post(port, "/api/consent", ok_name, "application/jsonx"), 415, "application/json")
    expect(port, post(port, "/api/consent", ok_name, "application/json; charset=latin1"), 415, "application/json")
    expect(port, post(port, "/api/consent", ok_name, "text/plain"), 415, "application/json")
    expect(port, post(port, "/api/consent", ok_name, extra=[("Sec-Fetch-Site", "cross-site")]), 403,
           "cross-site request refused")
    expect(port, post(port, "/api/consent", ok_name, extra=[("Sec-Fetch-Site", "same-site")]), 403,
           "cross-site request refused")
    expect(port, post(port, "/api/consent", ok_name, extra=[("Origin", "http://evil.example")]), 403,
           "cross-origin request refused")
    for name, what in [(b"a\\nb\\u0000c", "U+000A at byte 1"), (b"ab\\u0000c", "U+0000 at byte 2"),
                       (b"a\\u007fb", "U+007F"), (b"a\\u0085b", "U+0085"), (b"a\\u202eb", "U+202E")]:
        body = expect(port, post(port, "/api/consent", consent_body(name)), 409,
                      "field 'participant' must be printable UTF-8 text")
        if what not in body["error"]:
            fail(f"consent with {name!r}: {body['error']!r} does not say {what!r}")
    expect(port, post(port, "/api/consent", consent_body(b"a\xffb")), 400, "UTF-8")
    expect(port, post(port, "/api/consent", consent_body(b"x" * 201)), 409, "bytes long")
    if os.path.exists(out):
        fail("a refused request wrote the vote file")

    # 2. the flood -------------------------------------------------------------
    t0 = time.monotonic()
    idle = [(connect(port), time.monotonic()) for _ in range(16)]
    partial = []
    for _ in range(48):
        s = connect(port)
        s.sendall(b"GET / HTTP/1.1\r\n")
        partial.append((s, time.monotonic()))
    loris = []
    for _ in range(8):
        s = connect(port)
        s.sendall(f"GET / HTTP/1.1\r\nHost: {good}\r\nX-Slow: ".encode())
        loris.append((s, time.monotonic()))
    stop_trickle = threading.Event()

    def trickle():  # one byte every half second on each, until closed or stopped
        live = [s for s, _ in loris]
        for _ in range(40):
            if stop_trickle.wait(0.5):
                return
            for s in list(live):
                try:
                    s.send(b"x")
                except OSError:
                    live.remove(s)

    trickler = threading.Thread(target=trickle)
    trickler.start()
    try:
        status, page, seconds = exchange(port, raw_request("GET", "/", port))
        if status != 200 or b'id="btn-reject"' not in page:
            fail(f"during the flood GET / gave {status}")
        body = expect(port, post(port, "/api/consent", ok_name, "application/json; charset=utf-8",
                                 [origin, ("Sec-Fetch-Site", "same-origin")]), 200)
        if not body["consented"] or body["participant"] != "Ada Tester" or body["pair"]["id"] != "pair-0":
            fail(f"consent during the flood: {body}")
        body = expect(port, post(port, "/api/vote", b'{"pair_id": "pair-0", "choice": "a"}', extra=[origin]), 200)
        if body["voted"] != 1:
            fail(f"vote during the flood: {body}")
        took = time.monotonic() - t0
        if took > 2 * REQUEST_TIMEOUT:
            fail(f"page, consent and vote took {took:.1f} s during the flood")
        print(f"serve_hostile: page, consent and vote through a flood of {len(idle) + len(partial) + len(loris)} "
              f"sockets in {took:.2f} s")
        everything = wait_closed(idle + partial + loris, t0 + HEADER_DEADLINE + SLACK)
        closed = {"idle": everything[:len(idle)], "partial": everything[len(idle):len(idle) + len(partial)],
                  "slow": everything[len(idle) + len(partial):]}
    finally:
        stop_trickle.set()
        trickler.join()
    for name, result in closed.items():
        still = sum(1 for when, _ in result if when is None)
        if still:
            fail(f"{still} {name} flood sockets still open {HEADER_DEADLINE + SLACK} s after they connected")
    answered = [when for when, data in closed["partial"] if data.startswith(b"HTTP/1.1 408 ")]
    if not answered or max(answered) > RATE_GRACE + SLACK:
        fail(f"partial headers were not answered 408 by the byte-rate floor within {RATE_GRACE + SLACK} s: "
             f"{sorted(round(w, 2) for w, _ in closed['partial'])}")
    if not any(b"slower than" in d for _, d in closed["partial"]):
        fail("the 408 does not say that the request came too slowly")
    idle_times = [when for when, _ in closed["idle"]]
    if max(idle_times) < HEADER_DEADLINE - 0.5:
        fail(f"no idle socket lived until the header deadline ({sorted(round(w, 2) for w in idle_times)}): "
             "they were closed by something else")
    print("serve_hostile: flood closed: partial headers answered 408 after "
          f"{min(answered):.2f}-{max(answered):.2f} s, idle sockets closed by {max(idle_times):.2f} s")

    # 3. an attacker that keeps the table full and reconnects ------------------
    attack = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--attacker", str(port), "4"],
                              stdout=subprocess.PIPE, text=True)
    try:
        if attack.stdout.readline().strip() != "ready":
            fail("the attacker did not start")
        time.sleep(0.5)  # the server has accepted them all
        status, state, _ = exchange(port, raw_request("GET", "/api/state", port))
        if status != 200 or state["pair"]["id"] != "pair-1":
            fail(f"state under a full table: {status} {state}")
        # The table must be full again before the vote: wait for the attacker to
        # have replaced the socket the state request pushed out (else the vote
        # may find the free slot and push nothing out: a race, not a failure).
        if not select.select([attack.stdout], [], [], 10)[0] or attack.stdout.readline().strip() != "reconnected":
            fail("the state request under a full table pushed no attacker socket out")
        time.sleep(0.3)  # the server accepts the replacement
        body = expect(port, post(port, "/api/vote", b'{"pair_id": "pair-1", "choice": "b"}', extra=[origin]), 200)
        if body["voted"] != 2:
            fail(f"vote under a full table: {body}")
        rest = [w for w in attack.communicate(timeout=20)[0].split() if w != "reconnected"]  # the final count
    finally:
        if attack.poll() is None:
            attack.kill()
            attack.wait()
    if not rest or int(rest[-1]) < 2:
        fail(f"the attacker's sockets were not pushed out for the real requests (reconnects: {rest})")
    print(f"serve_hostile: state and vote through a full table ({rest[-1]} attacker reconnects)")

    # 4. clients that never read a large answer --------------------------------
    stuck = []
    for _ in range(4):
        s = connect(port, rcvbuf=4096)
        s.sendall(raw_request("GET", "/api/state", port))
        stuck.append((s, time.monotonic()))
    time.sleep(0.3)
    status, page, seconds = exchange(port, raw_request("GET", "/", port), timeout=1.5)
    if status != 200:
        fail(f"GET / beside clients that do not read: {status}")
    body = expect(port, post(port, "/api/vote", b'{"pair_id": "pair-2", "choice": "tie"}', extra=[origin]), 200)
    if body["voted"] != 3:
        fail(f"vote beside clients that do not read: {body}")
    print(f"serve_hostile: answered at once ({seconds:.2f} s) beside 4 clients that do not read")
    time.sleep(max(0.0, stuck[-1][1] + SEND_DEADLINE + SLACK - time.monotonic()))
    full = len(big)
    for when, data in wait_closed(stuck, time.monotonic() + REQUEST_TIMEOUT):
        if when is None:
            fail("a client that did not read was not closed by the send deadline")
        if len(data) >= full:
            fail(f"a client that did not read got the whole answer ({len(data)} bytes): the server never gave up")

    # 5. stop ------------------------------------------------------------------
    server.send_signal(signal.SIGTERM)
    try:
        log = server.communicate(timeout=10)[0]
    except subprocess.TimeoutExpired:
        fail("server did not stop on SIGTERM")
    if server.returncode != 0 or "stopped; 3 of 4 pairs voted" not in log:
        fail(f"server exited with {server.returncode}: {log}")
    v = json.load(open(out))
    if v["participant"] != "Ada Tester" or [x["choice"] for x in v["votes"]] != ["a", "b", "tie"]:
        fail(f"vote file: participant {v['participant']!r}, votes {v['votes']}")


if __name__ == "__main__":
    main()
