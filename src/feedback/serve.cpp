#include "feedback/serve.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "util/error.h"
#include "util/sha256.h"

namespace ppolab {

// ---- the session -----------------------------------------------------------

VoteSession::VoteSession(CandidateFile candidates, std::string candidate_file_sha256, fs::path out)
    : candidates_(std::move(candidates)), candidate_sha256_(std::move(candidate_file_sha256)), out_(std::move(out)) {
    file_.feedback_kind = "human";
    file_.checkpoint_sha256 = candidates_.checkpoint_sha256;
    file_.candidate_file_sha256 = candidate_sha256_;
    file_.human_attestation = false;
    file_.created_by = "ppolab feedback serve";
    if (!fs::exists(out_)) return;
    // Continue an earlier session: the file must be ours, for these candidates.
    const std::string where = out_.string();
    VoteFile earlier = parse_votes(read_file(out_), where);
    if (earlier.feedback_kind != "human")
        fail(where, ": exists and is an AI vote file; `feedback serve` continues only a human vote file");
    if (earlier.checkpoint_sha256 != candidates_.checkpoint_sha256)
        fail(where, ": exists but its checkpoint_sha256 ", earlier.checkpoint_sha256,
             " differs from the candidate file's ", candidates_.checkpoint_sha256, "; choose another --out");
    if (earlier.candidate_file_sha256 != candidate_sha256_)
        fail(where, ": exists but was made for another candidate file (candidate_file_sha256 ",
             earlier.candidate_file_sha256.empty() ? std::string("missing") : earlier.candidate_file_sha256, ", this one is ",
             candidate_sha256_, "); choose another --out");
    for (const Vote& v : earlier.votes)
        if (!candidates_.find(v.pair_id)) fail(where, ": exists but votes on pair '", v.pair_id, "', unknown to the candidates");
    file_ = std::move(earlier);
    for (const Vote& v : file_.votes) voted_.insert(v.pair_id);
}

const CandidatePair* VoteSession::next_pair() const {
    for (const CandidatePair& p : candidates_.pairs)
        if (!voted_.count(p.id)) return &p;
    return nullptr;
}

json VoteSession::state() const {
    json s{{"consented", file_.consent},
           {"participant", file_.participant},
           {"total", total()},
           {"voted", voted()},
           {"out", out_.string()},
           {"pair", nullptr}};
    if (file_.consent)
        if (const CandidatePair* p = next_pair())
            s["pair"] = {{"id", p->id}, {"prompt", p->prompt}, {"a", p->a.text}, {"b", p->b.text}};
    return s;
}

void VoteSession::save(Overwrite mode) { write_json_atomic(out_, votes_to_json(file_), mode); }

json VoteSession::consent(const json& r) {
    if (file_.consent) fail("consent was already given (participant '", file_.participant, "')");
    if (!r.is_object()) fail("consent: expected a JSON object");
    if (r.value("consent", json()) != true) fail("consent: the consent box must be ticked (consent: true)");
    if (r.value("human_attestation", json()) != true)
        fail("consent: the attestation box must be ticked (human_attestation: true)");
    const json& name = r.value("participant", json());
    if (!name.is_string() || name.get<std::string>().find_first_not_of(" \t\r\n") == std::string::npos)
        fail("consent: a participant name is required");
    std::string participant = name.get<std::string>();
    participant.erase(0, participant.find_first_not_of(" \t\r\n"));
    participant.erase(participant.find_last_not_of(" \t\r\n") + 1);
    if (participant.size() > 200) fail("consent: the participant name is longer than 200 bytes");
    VoteFile next = file_;
    next.participant = participant;
    next.consent = true;
    next.human_attestation = true;
    next.consent_timestamp = utc_timestamp_now();
    (void)parse_votes(votes_to_json(next).dump(), "the vote file to write");  // only valid files are written
    file_ = std::move(next);
    save(Overwrite::refuse);
    return state();
}

json VoteSession::vote(const json& r) {
    if (!file_.consent) fail("vote: give consent first");
    if (!r.is_object()) fail("vote: expected a JSON object");
    const json& id = r.value("pair_id", json());
    const json& choice = r.value("choice", json());
    if (!id.is_string() || !choice.is_string()) fail("vote: pair_id and choice must be strings");
    const CandidatePair* offered = next_pair();
    if (!offered) fail("vote: every pair has been voted already");
    if (id.get<std::string>() != offered->id)
        fail("vote: pair '", id.get<std::string>(), "' is not the pair on offer ('", offered->id,
             "'); reload the page");
    Vote v{offered->id, parse_vote_choice(choice.get<std::string>(), "vote"), utc_timestamp_now()};
    file_.votes.push_back(v);
    try {
        save(Overwrite::replace);
    } catch (...) {
        file_.votes.pop_back();
        throw;
    }
    voted_.insert(v.pair_id);
    return state();
}

// ---- HTTP ---------------------------------------------------------------------

namespace {

std::string lower(std::string s) {
    for (char& c : s)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return s;
}

std::string trim(std::string_view s) {
    const size_t a = s.find_first_not_of(" \t");
    if (a == std::string_view::npos) return "";
    const size_t b = s.find_last_not_of(" \t");
    return std::string(s.substr(a, b - a + 1));
}

}  // namespace

std::optional<HttpRequest> parse_http_request(std::string_view bytes) {
    const size_t end = bytes.find("\r\n\r\n");
    if (end == std::string_view::npos) {
        if (bytes.size() > kHttpMaxHeader) fail("HTTP request header is over ", kHttpMaxHeader, " bytes");
        return std::nullopt;
    }
    if (end > kHttpMaxHeader) fail("HTTP request header is over ", kHttpMaxHeader, " bytes");
    const std::string_view head = bytes.substr(0, end);
    HttpRequest r;
    size_t line_end = head.find("\r\n");
    const std::string_view request_line = head.substr(0, line_end);
    const size_t s1 = request_line.find(' ');
    const size_t s2 = s1 == std::string_view::npos ? s1 : request_line.find(' ', s1 + 1);
    if (s1 == std::string_view::npos || s2 == std::string_view::npos || s1 == 0 || s2 == s1 + 1)
        fail("HTTP request line is malformed");
    r.method = std::string(request_line.substr(0, s1));
    r.target = std::string(request_line.substr(s1 + 1, s2 - s1 - 1));
    const std::string_view version = request_line.substr(s2 + 1);
    if (version != "HTTP/1.1" && version != "HTTP/1.0") fail("HTTP version must be 1.0 or 1.1");
    int64_t content_length = 0;
    bool has_length = false;
    while (line_end != std::string_view::npos) {
        const size_t start = line_end + 2;
        line_end = head.find("\r\n", start);
        const std::string_view line = head.substr(start, line_end == std::string_view::npos ? head.npos : line_end - start);
        const size_t colon = line.find(':');
        if (colon == std::string_view::npos || colon == 0) fail("HTTP header line is malformed");
        const std::string name = lower(std::string(line.substr(0, colon)));
        const std::string value = trim(line.substr(colon + 1));
        if (name == "host") r.host = value;
        else if (name == "origin") r.origin = value;
        else if (name == "content-type") r.content_type = lower(value);
        else if (name == "transfer-encoding") fail("HTTP Transfer-Encoding is not supported (send Content-Length)");
        else if (name == "content-length") {
            if (has_length || value.empty() || value.size() > 9 || value.find_first_not_of("0123456789") != std::string::npos)
                fail("HTTP Content-Length is malformed");
            has_length = true;
            content_length = std::stoll(value);
        }
    }
    if (content_length > static_cast<int64_t>(kHttpMaxBody)) fail("HTTP body is over ", kHttpMaxBody, " bytes");
    const size_t body_start = end + 4;
    if (bytes.size() < body_start + static_cast<size_t>(content_length)) return std::nullopt;
    r.body = std::string(bytes.substr(body_start, static_cast<size_t>(content_length)));
    return r;
}

HttpResponse handle_vote_request(VoteSession& session, const HttpRequest& r, int port) {
    auto error = [](int status, const std::string& message) {
        return HttpResponse{status, "application/json", json{{"error", message}}.dump()};
    };
    const std::string p = std::to_string(port);
    if (r.host != "127.0.0.1:" + p && r.host != "localhost:" + p)
        return error(421, "this server answers only http://127.0.0.1:" + p + "/ (Host was '" + r.host + "')");
    std::string path = r.target.substr(0, r.target.find('?'));
    if (r.method == "GET" && (path == "/" || path == "/index.html"))
        return HttpResponse{200, "text/html; charset=utf-8", vote_page_html()};
    if (r.method == "GET" && path == "/api/state") return HttpResponse{200, "application/json", session.state().dump()};
    if (r.method == "POST" && (path == "/api/consent" || path == "/api/vote")) {
        if (!r.origin.empty() && r.origin != "http://127.0.0.1:" + p && r.origin != "http://localhost:" + p)
            return error(403, "cross-origin request refused (Origin '" + r.origin + "')");
        if (r.content_type.rfind("application/json", 0) != 0)
            return error(415, "POST needs Content-Type: application/json");
        json body = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
        if (body.is_discarded()) return error(400, "the request body is not valid JSON");
        try {
            return HttpResponse{200, "application/json",
                                (path == "/api/consent" ? session.consent(body) : session.vote(body)).dump()};
        } catch (const Error& e) {
            return error(409, e.what());
        }
    }
    if (path == "/" || path == "/index.html" || path == "/api/state" || path == "/api/consent" || path == "/api/vote")
        return error(405, "method " + r.method + " not allowed on " + path);
    return error(404, "no such page: " + path);
}

namespace {

volatile sig_atomic_t g_stop = 0;
extern "C" void on_stop_signal(int) { g_stop = 1; }

const char* status_text(int status) {
    switch (status) {
        case 200: return "OK";
        case 400: return "Bad Request";
        case 403: return "Forbidden";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 409: return "Conflict";
        case 415: return "Unsupported Media Type";
        case 421: return "Misdirected Request";
        default: return "Error";
    }
}

void send_all(int fd, const HttpResponse& r) {
    std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + status_text(r.status) +
                      "\r\nContent-Type: " + r.content_type + "\r\nContent-Length: " + std::to_string(r.body.size()) +
                      "\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n" + r.body;
    const int flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    timeval tv{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    size_t sent = 0;
    while (sent < out.size()) {
        const ssize_t n = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;  // the client went away: nothing to save here
        sent += static_cast<size_t>(n);
    }
}

struct Connection {
    int fd;
    std::string buffer;
    std::chrono::steady_clock::time_point opened;
};

}  // namespace

void serve_votes(const ServeOptions& o) {
    if (o.port < 0 || o.port > 65535) fail("--port must be in [0, 65535], got ", o.port);
    const std::string bytes = read_file(o.candidates);
    CandidateFile candidates = parse_candidates(bytes, o.candidates.string());
    VoteSession session(std::move(candidates), sha256_hex(bytes), o.out);

    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (listener < 0) fail("feedback serve: socket() failed: ", std::strerror(errno));
    const int yes = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(o.port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // 127.0.0.1 only
    if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener, 16) != 0) {
        const std::string why = std::strerror(errno);
        ::close(listener);
        fail("feedback serve: cannot listen on 127.0.0.1:", o.port, " (", why, ")");
    }
    socklen_t len = sizeof addr;
    getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
    const int port = ntohs(addr.sin_port);

    struct sigaction stop{}, old_int{}, old_term{};
    stop.sa_handler = on_stop_signal;
    sigemptyset(&stop.sa_mask);
    sigaction(SIGINT, &stop, &old_int);
    sigaction(SIGTERM, &stop, &old_term);
    g_stop = 0;

    std::printf("serving http://127.0.0.1:%d/  (%lld of %lld pairs voted; votes saved to %s; Ctrl-C stops)\n", port,
                static_cast<long long>(session.voted()), static_cast<long long>(session.total()), o.out.c_str());
    std::fflush(stdout);

    std::vector<Connection> open;
    int64_t reported = session.voted();
    while (!g_stop) {
        std::vector<pollfd> fds{{listener, POLLIN, 0}};
        for (const Connection& c : open) fds.push_back({c.fd, POLLIN, 0});
        const int ready = ::poll(fds.data(), fds.size(), 500);
        if (ready < 0 && errno != EINTR) break;
        const auto now = std::chrono::steady_clock::now();
        std::vector<Connection> keep;
        for (size_t i = 0; i < open.size(); ++i) {
            Connection& c = open[i];
            bool done = false;
            if (ready > 0 && (fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) {
                char buf[8192];
                const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
                if (n <= 0) {
                    done = !(n < 0 && (errno == EAGAIN || errno == EINTR));
                } else {
                    c.buffer.append(buf, static_cast<size_t>(n));
                    try {
                        if (std::optional<HttpRequest> req = parse_http_request(c.buffer)) {
                            send_all(c.fd, handle_vote_request(session, *req, port));
                            done = true;
                        }
                    } catch (const Error& e) {
                        send_all(c.fd, HttpResponse{400, "application/json", json{{"error", e.what()}}.dump()});
                        done = true;
                    }
                }
            }
            if (!done && now - c.opened > std::chrono::seconds(30)) done = true;  // an idle (pre)connection
            if (done) ::close(c.fd);
            else keep.push_back(std::move(c));
        }
        open = std::move(keep);
        if (ready > 0 && (fds[0].revents & POLLIN)) {
            for (;;) {
                const int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0) break;
                if (open.size() >= 64) {
                    ::close(fd);
                    continue;
                }
                open.push_back({fd, {}, now});
            }
        }
        if (session.voted() != reported) {
            reported = session.voted();
            std::printf("saved vote %lld of %lld\n", static_cast<long long>(reported),
                        static_cast<long long>(session.total()));
            std::fflush(stdout);
        }
    }
    for (const Connection& c : open) ::close(c.fd);
    ::close(listener);
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    std::printf("stopped; %lld of %lld pairs voted in %s\n", static_cast<long long>(session.voted()),
                static_cast<long long>(session.total()), o.out.c_str());
}

// ---- the page ------------------------------------------------------------------

const std::string& vote_page_html() {
    static const std::string page = R"HTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>ppolab — which answer is better?</title>
<style>
body{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}
.hidden{display:none}
.box{border:1px solid #ccc;border-radius:6px;padding:0.8em 1em;margin:0.6em 0;background:#fafafa;white-space:pre-wrap}
.answers{display:flex;gap:1em}.answers>div{flex:1}
button{font-size:15px;padding:0.5em 1em;margin:0.3em 0.3em 0.3em 0}
kbd{border:1px solid #aaa;border-radius:3px;padding:0 4px;background:#fff;font-size:12px}
#status{color:#555;min-height:1.4em}.error{color:#a00}
</style>
</head>
<body>
<h1>Which answer is better?</h1>
<p id="loading">Loading…</p>
<section id="consent-view" class="hidden">
<p>You will see a question sent to an office help-desk assistant and two answers, A and B, written by a
small language model. Choose the better answer, <em>tie</em> if they are equally good, or <em>reject</em> if
neither is acceptable.</p>
<p>Your choices, the name you give below and the time of each choice are saved on this computer in
<code id="out-path"></code> and used to train a reward model (a "judge") for a research study. Nothing is
sent anywhere else. You can stop at any time; every choice is saved as soon as you make it.</p>
<form id="consent-form">
<p><label>Your name or pseudonym: <input id="participant" autocomplete="off" maxlength="200"></label></p>
<p><label><input type="checkbox" id="consent"> I consent to my choices being stored and used as described.</label></p>
<p><label><input type="checkbox" id="attest"> I am a person, and the choices I make here are my own judgements.</label></p>
<p><button type="submit" id="start" disabled>Start</button></p>
</form>
</section>
<section id="vote-view" class="hidden">
<p id="progress"></p>
<h3>Question</h3>
<div class="box" id="prompt"></div>
<div class="answers">
<div><h3>Answer A</h3><div class="box" id="text-a"></div></div>
<div><h3>Answer B</h3><div class="box" id="text-b"></div></div>
</div>
<p>
<button id="btn-a" data-choice="a">A is better <kbd>A</kbd></button>
<button id="btn-b" data-choice="b">B is better <kbd>B</kbd></button>
<button id="btn-tie" data-choice="tie">Tie <kbd>T</kbd></button>
<button id="btn-reject" data-choice="reject">Reject both <kbd>R</kbd></button>
</p>
<p id="status"></p>
</section>
<section id="done-view" class="hidden">
<p id="done-text"></p>
</section>
<script>
"use strict";
let current = null, busy = false;
const $ = (id) => document.getElementById(id);
function show(view) {
  for (const v of ["loading", "consent-view", "vote-view", "done-view"]) $(v).classList.toggle("hidden", v !== view);
}
function render(s) {
  current = s;
  $("out-path").textContent = s.out;
  if (!s.consented) { show("consent-view"); return; }
  if (!s.pair) {
    $("done-text").textContent = "All " + s.total + " pairs are voted. Thank you, " + s.participant +
      ". Your votes are saved in " + s.out + "; you may close this page.";
    show("done-view");
    return;
  }
  $("progress").textContent = "Participant: " + s.participant + " · " + s.voted + " of " + s.total + " voted · pair " + s.pair.id;
  $("prompt").textContent = s.pair.prompt;
  $("text-a").textContent = s.pair.a;
  $("text-b").textContent = s.pair.b;
  show("vote-view");
}
async function call(method, path, body) {
  const init = {method: method, headers: {}};
  if (body !== undefined) { init.headers["Content-Type"] = "application/json"; init.body = JSON.stringify(body); }
  const r = await fetch(path, init);
  const data = await r.json();
  if (!r.ok) throw new Error(data.error || ("HTTP " + r.status));
  return data;
}
function setStatus(text, isError) { $("status").textContent = text; $("status").classList.toggle("error", !!isError); }
async function refresh() {
  try { render(await call("GET", "/api/state")); }
  catch (e) { $("loading").textContent = "Cannot reach the server: " + e.message; show("loading"); }
}
async function vote(choice) {
  if (busy || !current || !current.pair) return;
  busy = true;
  const id = current.pair.id;
  try {
    const s = await call("POST", "/api/vote", {pair_id: id, choice: choice});
    render(s);
    setStatus("Saved: pair " + id + " → " + choice + ".", false);
  } catch (e) {
    setStatus("Not saved: " + e.message, true);
    await refresh();
  } finally { busy = false; }
}
function updateStart() {
  $("start").disabled = !($("consent").checked && $("attest").checked && $("participant").value.trim() !== "");
}
for (const id of ["consent", "attest", "participant"]) $(id).addEventListener("input", updateStart);
for (const id of ["consent", "attest"]) $(id).addEventListener("change", updateStart);
$("consent-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  try {
    render(await call("POST", "/api/consent", {participant: $("participant").value, consent: $("consent").checked,
                                               human_attestation: $("attest").checked}));
  } catch (e) { alert(e.message); await refresh(); }
});
for (const b of document.querySelectorAll("button[data-choice]")) b.addEventListener("click", () => vote(b.dataset.choice));
document.addEventListener("keydown", (ev) => {
  if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.repeat) return;
  if ($("vote-view").classList.contains("hidden")) return;
  const key = ev.key.toLowerCase();
  const choice = {a: "a", b: "b", t: "tie", r: "reject", "1": "a", "2": "b", "3": "tie", "4": "reject"}[key];
  if (choice) { ev.preventDefault(); vote(choice); }
});
refresh();
</script>
</body>
</html>
)HTML";
    return page;
}

}  // namespace ppolab
