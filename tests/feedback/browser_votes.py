#!/usr/bin/env python3
"""End-to-end test of `ppolab feedback serve` in a real headless browser.

Debian's chromium is driven through the DevTools protocol over
--remote-debugging-pipe (standard library only). The test opens the page,
checks that it says how many pairs there are and that Start stays disabled
(saying what is missing) until consent, attestation and a name are given,
consents, checks the guide panel (a --guide file), the situation shown first
with the case reference folded, the progress bar and the time left, and the
live regions; votes with mouse clicks and with keys (letters and 1-4), takes
votes back with Back (click and the U key, also from the done view: the
pair comes back and the file keeps the withdrawn vote), reloads the page,
closes it mid-way and stops the server, checks the vote file on disk, starts
the server again on the same --out, reopens the page (which continues where
it stopped, without asking consent again), finishes, and checks the vote
file: vote format 1 with consent, human attestation, the participant, the
candidate file's sha256, one timestamped vote per pair, as chosen, and every
withdrawn vote with its time.
"""
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BIN = os.environ.get("PPOLAB_BINARY", "build/bin/ppolab")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
TIMEOUT = 20.0


def fail(message):
    print("browser_votes: FAIL: " + message, file=sys.stderr)
    sys.exit(1)


class DevTools:
    """The DevTools protocol over chromium's --remote-debugging-pipe (fd 3 in, fd 4 out, NUL-separated JSON)."""

    def __init__(self, profile):
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()

        def child_fds():
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
             "--remote-debugging-pipe", "--user-data-dir=" + profile, "--window-size=1200,900", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            close_fds=False, preexec_fn=child_fds)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buffer = b""
        self.next_id = 0
        self.events = []

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            if time.time() > deadline:
                fail("chromium did not answer in time")
            chunk = os.read(self.from_chrome, 65536)
            if not chunk:
                fail("chromium closed the DevTools pipe")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method, params=None, session=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.time() + TIMEOUT
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    fail(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def close(self):
        try:
            self.call("Browser.close")
        except SystemExit:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Page:
    def __init__(self, devtools, url):
        self.dt = devtools
        self.url = url
        self.target = devtools.call("Target.createTarget", {"url": url})["targetId"]
        self.session = devtools.call("Target.attachToTarget", {"targetId": self.target, "flatten": True})["sessionId"]
        self.call("Runtime.enable")

    def call(self, method, params=None):
        return self.dt.call(method, params, self.session)

    def js(self, expression):
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in r:
            fail(f"page script failed: {expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait(self, expression, what):
        deadline = time.time() + TIMEOUT
        while time.time() < deadline:
            if self.js(expression):
                return
            time.sleep(0.05)
        fail("timed out waiting for " + what + "; page text: " + str(self.js("document.body.innerText")))

    def visible(self, element_id):
        return f"(() => {{ const e = document.getElementById({json.dumps(element_id)}); " \
               f"return !!e && !e.closest('.hidden') && e.getBoundingClientRect().width > 0; }})()"

    def click(self, element_id):
        """A real mouse click at the element's centre."""
        self.wait(self.visible(element_id), element_id + " visible")
        box = self.js(f"(() => {{ const e = document.getElementById({json.dumps(element_id)}); e.scrollIntoView(); "
                      f"const r = e.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; }})()")
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent",
                      {"type": kind, "x": box[0], "y": box[1], "button": "left", "clickCount": 1})

    def key(self, char):
        """A real key press (keydown, char, keyup)."""
        code = ord(char.upper())
        name = ("Digit" if char.isdigit() else "Key") + char.upper()
        base = {"key": char, "code": name, "windowsVirtualKeyCode": code, "nativeVirtualKeyCode": code}
        self.call("Input.dispatchKeyEvent", dict(base, type="keyDown", text=char))
        self.call("Input.dispatchKeyEvent", dict(base, type="keyUp"))

    def type_text(self, text):
        self.call("Input.insertText", {"text": text})

    def state(self):
        return self.js("JSON.stringify(current)")

    def text(self, element_id):
        return self.js(f"document.getElementById({json.dumps(element_id)}).textContent")

    def reload(self):
        """Loads the page again (as a person's reload does); the old document is marked so that a wait
        cannot be answered by it."""
        self.js("document.body.dataset.before = 'reload'; true")
        self.call("Page.navigate", {"url": self.url})

    def close(self):
        self.dt.call("Target.closeTarget", {"targetId": self.target})


def start_server(candidates, out, guide):
    proc = subprocess.Popen([BIN, "feedback", "serve", "--candidates", candidates, "--out", out, "--port", "0",
                             "--guide", guide],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = proc.stdout.readline()
    m = re.search(r"serving (http://127\.0\.0\.1:\d+/)", line)
    if not m:
        proc.kill()
        fail("server did not start: " + line + proc.stdout.read())
    return proc, m.group(1)


def stop_server(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        rest = proc.communicate(timeout=10)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        fail("server did not stop on SIGTERM")
    if proc.returncode != 0:
        fail(f"server exited with {proc.returncode}: {rest}")
    return rest


def voted_count(page):
    return page.js("current && current.voted")


def vote(page, how, choice, expected_voted):
    """One vote by a click on the button, its letter key or its digit key; waits for the next state."""
    if how == "click":
        page.click({"a": "btn-a", "b": "btn-b", "tie": "btn-tie", "reject": "btn-reject"}[choice])
    elif how == "key":
        page.key({"a": "a", "b": "b", "tie": "t", "reject": "r"}[choice])
    else:
        page.key({"a": "1", "b": "2", "tie": "3", "reject": "4"}[choice])
    page.wait(f"current && current.voted === {expected_voted} && !busy", f"vote {expected_voted} saved")


def undo(page, how, button, expected_voted, pair_back):
    """Back, by a click or the U key: the last vote is taken back and its pair offered again."""
    if how == "click":
        page.click(button)
    else:
        page.key("u")
    page.wait(f"current && current.voted === {expected_voted} && current.pair && current.pair.id === "
              f"{json.dumps(pair_back)} && !busy", f"vote on {pair_back} taken back")
    if "Taken back: pair " + pair_back not in page.text("status"):
        fail("the status does not say what was taken back: " + page.text("status"))


def main():
    if not CHROMIUM:
        fail("chromium is not installed (scripts/install.sh installs it)")
    work = tempfile.mkdtemp(prefix="ppolab_browser_votes_")
    try:
        run(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("browser_votes: ok")


def run(work):
    # A candidate file of six pairs (the server needs no model); the prompts
    # have the corpus's shape, a case reference and the situation.
    pairs = []
    for i in range(6):
        pairs.append({"id": f"pair-{i:04d}", "split": ["train", "validation", "test"][i % 3],
                      "prompt_id": f"OH{i:03d}-RL0",
                      "prompt": f"Help request OH{i:03d}, note {i}. Source: email. The printer <b>stopped</b> ({i}).",
                      "a": {"text": f"Answer A{i}: restart the print queue.", "token_ids": [1, 2, i + 3], "finish_reason": "eos"},
                      "b": {"text": f"Answer B{i} <script>alert(1)</script>", "token_ids": [4, 5], "finish_reason": "length"}})
    candidates = os.path.join(work, "candidates.json")
    with open(candidates, "w") as f:
        json.dump({"format": 1, "checkpoint_sha256": "ab" * 32, "pairs": pairs}, f)
    candidate_sha = hashlib.sha256(open(candidates, "rb").read()).hexdigest()
    out = os.path.join(work, "votes.json")
    guide = os.path.join(work, "guide.txt")
    guide_text = "Prefer the answer a <i>colleague</i> could follow.\nA wrong answer is never better for being polite."
    with open(guide, "w") as f:
        f.write(guide_text)

    server, url = start_server(candidates, out, guide)
    dt = DevTools(os.path.join(work, "profile"))
    try:
        # 1. consent: Start stays disabled until both boxes and a name are given
        page = Page(dt, url)
        page.wait(page.visible("consent-view"), "the consent page")
        if page.js("document.getElementById('out-path').textContent") != out:
            fail("the consent page does not say where the votes are saved")
        if page.text("pair-count") != "6":
            fail("the consent page does not say how many pairs there are: " + page.text("pair-count"))
        if page.text("start-missing") != ("To start: give your name or pseudonym, tick the consent box, "
                                          "tick the box that you are a person."):
            fail("the disabled Start does not say what is missing: " + page.text("start-missing"))
        page.click("consent")
        page.click("participant")
        page.type_text("Ada Tester")
        if not page.js("document.getElementById('start').disabled"):
            fail("Start is enabled without the attestation")
        if page.text("start-missing") != "To start: tick the box that you are a person.":
            fail("Start's missing list did not follow the form: " + page.text("start-missing"))
        page.click("attest")
        page.wait("!document.getElementById('start').disabled", "Start enabled")
        if page.text("start-missing") != "":
            fail("Start is enabled but still says something is missing")
        if os.path.exists(out):
            fail("the vote file exists before consent")
        page.click("start")
        page.wait(page.visible("vote-view"), "the voting view")
        if not os.path.exists(out):
            fail("consent did not create the vote file")
        if "0 of 6 voted" not in page.js("document.getElementById('progress').textContent"):
            fail("progress count missing: " + page.js("document.getElementById('progress').textContent"))
        # texts are shown as text, never as markup
        if page.js("document.getElementById('text-b').textContent") != "Answer B0 <script>alert(1)</script>":
            fail("answer B is not shown verbatim")
        if page.js("document.querySelectorAll('#text-b script, #prompt b, #guide-text i').length") != 0:
            fail("candidate or guide text was interpreted as HTML")
        # the situation first, the case reference folded; the guide beside the pair
        if page.text("prompt") != "The printer <b>stopped</b> (0).":
            fail("the question does not show the situation first: " + page.text("prompt"))
        if page.text("reference-text") != "Help request OH000, note 0. Source: email." or \
                page.js("document.getElementById('reference').open") or not page.js(page.visible("reference")):
            fail("the case reference is not shown folded: " + page.text("reference-text"))
        if page.text("guide-text") != guide_text or not page.js(page.visible("guide")):
            fail("the guide panel does not show the --guide text: " + page.text("guide-text"))
        for element_id in ("status", "progress-area", "start-missing"):
            if page.js(f"document.getElementById('{element_id}').getAttribute('aria-live')") != "polite":
                fail(f"#{element_id} is not a live region")
        for key in ("A", "1", "B", "2", "T", "3", "R", "4"):
            if f"{key}" not in [k.strip() for k in page.js(
                    "Array.from(document.querySelectorAll('button[data-choice] kbd')).map(k => k.textContent)")]:
                fail(f"the key {key} is not shown on the buttons")
        if not page.js("document.getElementById('btn-undo').disabled"):
            fail("Back is enabled before any vote")

        # 2. three votes: a click, a key, a digit key; the bar and the time left follow
        vote(page, "click", "a", 1)
        vote(page, "key", "b", 2)
        vote(page, "digit", "tie", 3)
        if "3 of 6 voted" not in page.text("progress") or page.js("document.getElementById('progress-bar').value") != 3 \
                or page.js("document.getElementById('progress-bar').max") != 6:
            fail("progress count or bar did not advance: " + page.text("progress"))
        if not re.search(r"(about \d+ min|under a minute) left$", page.text("eta")):
            fail("no estimate of the time left after three votes: " + page.text("eta"))
        saved = json.load(open(out))
        if [v["choice"] for v in saved["votes"]] != ["a", "b", "tie"]:
            fail(f"vote file after three votes: {saved['votes']}")

        # 3. Back: by a click, then by the U key; each time the pair comes back
        #    and the file keeps the vote taken back, with its time
        undo(page, "click", "btn-undo", 2, "pair-0002")
        saved = json.load(open(out))
        if [v["choice"] for v in saved["votes"]] != ["a", "b"] or \
                [(w["pair_id"], w["choice"]) for w in saved["withdrawn"]] != [("pair-0002", "tie")]:
            fail(f"vote file after Back: {saved}")
        vote(page, "digit", "reject", 3)
        undo(page, "key", None, 2, "pair-0002")
        vote(page, "click", "tie", 3)
        saved = json.load(open(out))
        if [(w["pair_id"], w["choice"]) for w in saved["withdrawn"]] != [("pair-0002", "tie"), ("pair-0002", "reject")]:
            fail(f"withdrawn votes: {saved.get('withdrawn')}")
        if [v["choice"] for v in saved["votes"]] != ["a", "b", "tie"]:
            fail(f"vote file after two Backs: {saved['votes']}")

        # a reload continues where the page was
        page.reload()
        page.wait("document.body && document.body.dataset.before !== 'reload' && " + page.visible("vote-view") +
                  " && current && current.pair && current.pair.id === 'pair-0003'", "the voting view after a reload")
        if "3 of 6 voted" not in page.text("progress") or page.js("document.getElementById('btn-undo').disabled"):
            fail("the reloaded page lost its place: " + page.text("progress"))

        # 4. close the page mid-way and stop the server: nothing is lost
        page.close()
        stop_server(server)
        saved = json.load(open(out))
        if len(saved["votes"]) != 3:
            fail(f"after closing, the file holds {len(saved['votes'])} votes, expected 3")

        # 5. start again on the same --out, reopen: it continues without asking consent again
        server, url = start_server(candidates, out, guide)
        page = Page(dt, url)
        page.wait(page.visible("vote-view"), "the voting view after reopening")
        if page.js("current.pair.id") != "pair-0003" or "3 of 6 voted" not in page.js(
                "document.getElementById('progress').textContent"):
            fail("reopened page does not continue at pair-0003: " + str(page.state()))
        if "Ada Tester" not in page.js("document.getElementById('progress').textContent"):
            fail("reopened page lost the participant")
        vote(page, "key", "tie", 4)
        vote(page, "click", "reject", 5)
        vote(page, "key", "b", 6)
        page.wait(page.visible("done-view"), "the done view")
        # Back from the done view, then the last vote again
        undo(page, "click", "btn-undo-done", 5, "pair-0005")
        vote(page, "key", "a", 6)
        page.wait(page.visible("done-view"), "the done view")
        # a key after the end votes nothing
        page.key("b")
        time.sleep(0.3)
        page.close()
        log = stop_server(server)
        if "saved vote 6 of 6" not in log or "took back a vote: 5 of 6 voted" not in log:
            fail("server log does not report the saved and withdrawn votes: " + log)
    finally:
        dt.close()
        if server.poll() is None:
            server.kill()

    # 5. the vote file
    v = json.load(open(out))
    expect = {"format": 1, "feedback_kind": "human", "checkpoint_sha256": "ab" * 32, "participant": "Ada Tester",
              "consent": True, "human_attestation": True, "candidate_file_sha256": candidate_sha}
    for k, want in expect.items():
        if v.get(k) != want:
            fail(f"vote file field {k}: {v.get(k)!r}, expected {want!r}")
    if [x["pair_id"] for x in v["votes"]] != [p["id"] for p in pairs]:
        fail(f"vote file pair ids: {[x['pair_id'] for x in v['votes']]}")
    if [x["choice"] for x in v["votes"]] != ["a", "b", "tie", "tie", "reject", "a"]:
        fail(f"vote file choices: {[x['choice'] for x in v['votes']]}")
    stamp = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
    stamps = [x["timestamp"] for x in v["votes"]]
    if not all(stamp.match(s) for s in stamps + [v["consent_timestamp"]]) or stamps != sorted(stamps):
        fail(f"timestamps: {stamps}")
    withdrawn = v.get("withdrawn", [])
    if [(w["pair_id"], w["choice"]) for w in withdrawn] != [("pair-0002", "tie"), ("pair-0002", "reject"),
                                                            ("pair-0005", "b")]:
        fail(f"withdrawn votes: {withdrawn}")
    for w in withdrawn:
        if set(w) != {"pair_id", "choice", "timestamp", "withdrawn_at"} or not stamp.match(w["withdrawn_at"]) \
                or w["withdrawn_at"] < w["timestamp"]:
            fail(f"withdrawn vote without its times: {w}")
    leftovers = [n for n in os.listdir(work) if ".tmp" in n]
    if leftovers:
        fail(f"temporary files left beside the vote file: {leftovers}")


if __name__ == "__main__":
    main()
