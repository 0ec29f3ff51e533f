#include "feedback/serve.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "data/corpus.h"
#include "feedback/fields.h"
#include "util/error.h"
#include "util/sha256.h"

namespace ppolab {

// ---- the session -----------------------------------------------------------

VoteSession::VoteSession(CandidateFile candidates, std::string candidate_file_sha256, fs::path out, std::string guide)
    : candidates_(std::move(candidates)),
      candidate_sha256_(std::move(candidate_file_sha256)),
      out_(std::move(out)),
      guide_(std::move(guide)) {
    file_.feedback_kind = "human";
    file_.checkpoint_sha256 = candidates_.checkpoint_sha256;
    file_.candidate_file_sha256 = candidate_sha256_;
    file_.human_attestation = false;
    file_.created_by = "ppolab feedback serve";
    if (!fs::exists(out_)) return;
    // Continue an earlier session: the file must be ours, for these candidates.
    const std::string where = out_.string();
    VoteFile earlier = parse_votes(read_input_file(out_, InputKind::votes), where);
    if (earlier.feedback_kind != "human")
        fail(where, ": exists and is an AI vote file; `feedback serve` continues only a human vote file");
    if (earlier.checkpoint_sha256 != candidates_.checkpoint_sha256)
        fail(where, ": exists but its checkpoint_sha256 ", earlier.checkpoint_sha256,
             " differs from the candidate file's ", candidates_.checkpoint_sha256, "; choose another --out");
    if (earlier.candidate_file_sha256 != candidate_sha256_)
        fail(where, ": exists but was made for another candidate file (candidate_file_sha256 ",
             earlier.candidate_file_sha256.empty() ? std::string("missing") : earlier.candidate_file_sha256,
             ", this one is ", candidate_sha256_, "); choose another --out");
    for (const Vote& v : earlier.votes)
        if (!candidates_.find(v.pair_id))
            fail(where, ": exists but votes on pair '", v.pair_id, "', unknown to the candidates");
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
           {"withdrawn", file_.withdrawn.size()},
           {"out", out_.string()},
           {"guide", guide_},
           {"last", nullptr},
           {"pair", nullptr}};
    if (!file_.votes.empty())
        s["last"] = {{"pair_id", file_.votes.back().pair_id}, {"choice", vote_choice_name(file_.votes.back().choice)}};
    if (file_.consent)
        if (const CandidatePair* p = next_pair()) {
            const PromptParts parts = corpus_prompt_parts(p->prompt);
            s["pair"] = {
                {"id", p->id},    {"prompt", p->prompt}, {"reference", parts.reference}, {"situation", parts.situation},
                {"a", p->a.text}, {"b", p->b.text}};
        }
    return s;
}

void VoteSession::save(Overwrite mode) { write_json_atomic(out_, votes_to_json(file_), mode); }

json VoteSession::consent(const json& r) {
    if (file_.consent) fail("consent was already given (participant ", feedback_detail::shown(file_.participant), ")");
    if (!r.is_object()) fail("consent: expected a JSON object");
    if (r.value("consent", json()) != true) fail("consent: the consent box must be ticked (consent: true)");
    if (r.value("human_attestation", json()) != true)
        fail("consent: the attestation box must be ticked (human_attestation: true)");
    const json name = r.value("participant", json());
    if (name.is_null()) fail("consent: a participant name is required");
    if (!name.is_string()) fail("consent: field 'participant' must be a string, got ", name.type_name());
    // Spaces around the name are dropped; anything else unprintable is refused, never cleaned.
    std::string participant = name.get<std::string>();
    participant.erase(0, participant.find_first_not_of(' '));
    participant.erase(participant.find_last_not_of(' ') + 1);
    if (participant.empty()) fail("consent: a participant name is required");
    feedback_detail::check_printable_text(participant, "participant", "consent", feedback_detail::kMaxNameBytes);
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

json VoteSession::undo(const json& r) {
    if (!file_.consent) fail("undo: give consent first");
    if (!r.is_object()) fail("undo: expected a JSON object");
    const json& id = r.value("pair_id", json());
    if (!id.is_string()) fail("undo: pair_id must be a string");
    if (file_.votes.empty()) fail("undo: there is no vote to take back");
    if (id.get<std::string>() != file_.votes.back().pair_id)
        fail("undo: pair '", id.get<std::string>(), "' is not the last vote ('", file_.votes.back().pair_id,
             "'); reload the page");
    const VoteFile before = file_;
    file_.withdrawn.push_back({file_.votes.back(), utc_timestamp_now()});
    file_.votes.pop_back();
    try {
        save(Overwrite::replace);
    } catch (...) {
        file_ = before;
        throw;
    }
    voted_.erase(id.get<std::string>());
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

// RFC 9110 token characters (method and header names).
bool is_token(std::string_view s) {
    if (s.empty()) return false;
    for (char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos))
            return false;
    return true;
}

// Visible ASCII and (unless `spaces` is false) spaces and tabs.
bool is_visible_ascii(std::string_view s, bool spaces) {
    for (char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (!((u >= 0x21 && u <= 0x7E) || (spaces && (u == ' ' || u == '\t')))) return false;
    }
    return true;
}

// Control characters (other than a tab) have no place in a header line.
bool has_control(std::string_view s) {
    for (char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if ((u < 0x20 && u != '\t') || u == 0x7F) return true;
    }
    return false;
}

// The headers a check depends on: each may appear once (two Hosts would let
// one reader see another Host than the next).
const char* single_header_name(std::string_view lowered) {
    if (lowered == "host") return "Host";
    if (lowered == "origin") return "Origin";
    if (lowered == "content-type") return "Content-Type";
    if (lowered == "content-length") return "Content-Length";
    if (lowered == "sec-fetch-site") return "Sec-Fetch-Site";
    return nullptr;
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
    if (!is_token(r.method)) fail("HTTP request line is malformed (the method is not a token)");
    if (!is_visible_ascii(r.target, false) || r.target[0] != '/')
        fail("HTTP request target must be a path of visible ASCII starting with '/'");
    const std::string_view version = request_line.substr(s2 + 1);
    if (version != "HTTP/1.1" && version != "HTTP/1.0") fail("HTTP version must be 1.0 or 1.1");
    int64_t content_length = 0;
    std::vector<std::string> seen;  // the single headers met so far
    while (line_end != std::string_view::npos) {
        const size_t start = line_end + 2;
        line_end = head.find("\r\n", start);
        const std::string_view line =
            head.substr(start, line_end == std::string_view::npos ? head.npos : line_end - start);
        const size_t colon = line.find(':');
        if (colon == std::string_view::npos || !is_token(line.substr(0, colon)))
            fail("HTTP header line is malformed (expected 'Name: value' with a token name and no space before ':')");
        if (has_control(line)) fail("HTTP header line holds a control character");
        const std::string name = lower(std::string(line.substr(0, colon)));
        const std::string value = trim(line.substr(colon + 1));
        if (const char* single = single_header_name(name)) {
            if (std::find(seen.begin(), seen.end(), name) != seen.end())
                fail("HTTP header '", single, "' appears more than once");
            seen.push_back(name);
            if (!is_visible_ascii(value, true)) fail("HTTP header '", single, "' must be printable ASCII");
        }
        if (name == "host") r.host = value;
        else if (name == "origin") r.origin = value;
        else if (name == "content-type") r.content_type = lower(value);
        else if (name == "sec-fetch-site") r.sec_fetch_site = lower(value);
        else if (name == "transfer-encoding") fail("HTTP Transfer-Encoding is not supported (send Content-Length)");
        else if (name == "content-length") {
            if (value.empty() || value.size() > 9 || value.find_first_not_of("0123456789") != std::string::npos)
                fail("HTTP Content-Length is malformed");
            content_length = std::stoll(value);
        }
    }
    if (content_length > static_cast<int64_t>(kHttpMaxBody)) fail("HTTP body is over ", kHttpMaxBody, " bytes");
    const size_t body_start = end + 4;
    if (bytes.size() < body_start + static_cast<size_t>(content_length)) return std::nullopt;
    r.body = std::string(bytes.substr(body_start, static_cast<size_t>(content_length)));
    return r;
}

bool is_json_content_type(std::string_view lowered) {
    const size_t semi = lowered.find(';');
    if (trim(lowered.substr(0, semi)) != "application/json") return false;
    if (semi == std::string_view::npos) return true;
    const std::string parameter = trim(lowered.substr(semi + 1));
    return parameter == "charset=utf-8" || parameter == "charset=\"utf-8\"";
}

namespace {

// JSON for a response body: never throws on bytes that are not UTF-8 (they
// are replaced), so no request can make the answer itself fail.
std::string response_json(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

HttpResponse handle_vote_request(VoteSession& session, const HttpRequest& r, int port) {
    auto error = [](int status, const std::string& message) {
        return HttpResponse{status, "application/json", response_json(json{{"error", message}})};
    };
    const std::string p = std::to_string(port);
    if (r.host != "127.0.0.1:" + p && r.host != "localhost:" + p)
        return error(421, "this server answers only http://127.0.0.1:" + p + "/ (Host was '" + r.host + "')");
    std::string path = r.target.substr(0, r.target.find('?'));
    if (r.method == "GET" && (path == "/" || path == "/index.html"))
        return HttpResponse{200, "text/html; charset=utf-8", vote_page_html()};
    if (r.method == "GET" && path == "/api/state")
        return HttpResponse{200, "application/json", response_json(session.state())};
    if (r.method == "POST" && (path == "/api/consent" || path == "/api/vote" || path == "/api/undo")) {
        if (!r.origin.empty() && r.origin != "http://127.0.0.1:" + p && r.origin != "http://localhost:" + p)
            return error(403, "cross-origin request refused (Origin '" + r.origin + "')");
        // A browser that sends no Origin still says where the request comes from.
        if (!r.sec_fetch_site.empty() && r.sec_fetch_site != "same-origin" && r.sec_fetch_site != "none")
            return error(403, "cross-site request refused (Sec-Fetch-Site '" + r.sec_fetch_site + "')");
        if (!is_json_content_type(r.content_type))
            return error(415, "POST needs Content-Type: application/json (optionally with ; charset=utf-8), got '" +
                                  r.content_type + "'");
        json body;
        try {
            body = parse_json(r.body, "the request body");
        } catch (const Error& e) {
            return error(400, e.what());
        }
        try {
            return HttpResponse{200, "application/json",
                                response_json(path == "/api/consent" ? session.consent(body)
                                              : path == "/api/vote"  ? session.vote(body)
                                                                     : session.undo(body))};
        } catch (const Error& e) {
            return error(409, e.what());
        }
    }
    if (path == "/" || path == "/index.html" || path == "/api/state" || path == "/api/consent" || path == "/api/vote" ||
        path == "/api/undo")
        return error(405, "method " + r.method + " not allowed on " + path);
    return error(404, "no such page: " + path);
}

// ---- the server loop ------------------------------------------------------------

namespace {

// Owns one descriptor: closed when the owner goes, whatever way it goes.
class UniqueFd {
public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) : fd_(fd) {}
    UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
    UniqueFd& operator=(UniqueFd&& other) noexcept {
        if (this != &other) {
            reset();
            fd_ = std::exchange(other.fd_, -1);
        }
        return *this;
    }
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;
    ~UniqueFd() { reset(); }
    int get() const { return fd_; }
    explicit operator bool() const { return fd_ >= 0; }
    void reset() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }

private:
    int fd_ = -1;
};

volatile sig_atomic_t g_stop = 0;
extern "C" void on_stop_signal(int) { g_stop = 1; }

// SIGINT and SIGTERM stop the loop while this lives; the handlers that were
// there before come back when it goes (an exception included).
class StopSignals {
public:
    StopSignals() {
        struct sigaction stop {};
        stop.sa_handler = on_stop_signal;
        sigemptyset(&stop.sa_mask);
        g_stop = 0;
        if (sigaction(SIGINT, &stop, &old_int_) != 0)
            fail("feedback serve: cannot handle SIGINT: ", std::strerror(errno));
        if (sigaction(SIGTERM, &stop, &old_term_) != 0) {
            const std::string why = std::strerror(errno);
            sigaction(SIGINT, &old_int_, nullptr);
            fail("feedback serve: cannot handle SIGTERM: ", why);
        }
    }
    ~StopSignals() {
        sigaction(SIGINT, &old_int_, nullptr);
        sigaction(SIGTERM, &old_term_, nullptr);
    }
    StopSignals(const StopSignals&) = delete;
    StopSignals& operator=(const StopSignals&) = delete;

private:
    struct sigaction old_int_ {
    }, old_term_{};
};

const char* status_text(int status) {
    switch (status) {
        case 200: return "OK";
        case 400: return "Bad Request";
        case 403: return "Forbidden";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 408: return "Request Timeout";
        case 409: return "Conflict";
        case 415: return "Unsupported Media Type";
        case 421: return "Misdirected Request";
        case 500: return "Internal Server Error";
        default: return "Error";
    }
}

std::string response_bytes(HttpResponse r) {
    if (r.body.size() > kHttpMaxResponse)
        r = HttpResponse{500, "application/json",
                         response_json(json{{"error", "the response would be " + std::to_string(r.body.size()) +
                                                          " bytes, over the server's limit of " +
                                                          std::to_string(kHttpMaxResponse)}})};
    return "HTTP/1.1 " + std::to_string(r.status) + " " + status_text(r.status) +
           "\r\nContent-Type: " + r.content_type + "\r\nContent-Length: " + std::to_string(r.body.size()) +
           "\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n" + r.body;
}

HttpResponse error_response(int status, const std::string& message) {
    return HttpResponse{status, "application/json", response_json(json{{"error", message}})};
}

using Clock = std::chrono::steady_clock;

// One request per connection: reading it, writing the answer (non-blocking,
// from `out`), then draining what the client still sends until it closes
// (closing with unread bytes would reset the connection and could lose the
// answer).
enum class Phase { reading, writing, draining };

struct Connection {
    UniqueFd fd;
    Phase phase = Phase::reading;
    Clock::time_point accepted, since;  // since: when the phase began (reading: the first byte)
    size_t received = 0;
    std::string in;   // the request so far (bounded by the parser's limits)
    std::string out;  // the answer (bounded by kHttpMaxResponse)
    size_t sent = 0;
};

// Eviction order when the table is full: finished (draining) first, then
// connections that sent nothing, then partial requests, then answers being
// written; oldest first within each.
int eviction_rank(const Connection& c) {
    if (c.phase == Phase::draining) return 0;
    if (c.phase == Phase::reading) return c.received == 0 ? 1 : 2;
    return 3;
}

class Server {
public:
    Server(VoteSession& session, int port) : session_(session), port_(port) {}

    std::vector<Connection> open;

    // Writes what the socket takes now; false when the connection is to be closed.
    bool flush(Connection& c, Clock::time_point now) {
        while (c.sent < c.out.size()) {
            const ssize_t n = ::send(c.fd.get(), c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
            if (n <= 0) return false;  // the client went away: nothing to save here
            c.sent += static_cast<size_t>(n);
        }
        ::shutdown(c.fd.get(), SHUT_WR);
        c.out.clear();
        c.out.shrink_to_fit();
        c.phase = Phase::draining;
        c.since = now;
        return true;
    }

    bool answer(Connection& c, const HttpResponse& response, Clock::time_point now) {
        c.in.clear();
        c.in.shrink_to_fit();
        c.out = response_bytes(response);
        c.sent = 0;
        c.phase = Phase::writing;
        c.since = now;
        return flush(c, now);
    }

    // Reads what has arrived (a bounded number of reads per turn); answers a
    // complete request. False when the connection is to be closed.
    bool read(Connection& c, Clock::time_point now) {
        for (int turn = 0; turn < 8; ++turn) {
            char buf[16384];
            const ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, 0);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
            if (n <= 0) return false;                  // closed (or failed) before a whole request: nothing to answer
            if (c.phase == Phase::draining) continue;  // discarded
            if (c.received == 0) c.since = now;
            c.received += static_cast<size_t>(n);
            c.in.append(buf, static_cast<size_t>(n));
            HttpResponse response;
            try {
                std::optional<HttpRequest> request = parse_http_request(c.in);
                if (!request) continue;
                response = handle_vote_request(session_, *request, port_);
            } catch (const Error& e) {
                response = error_response(400, e.what());
            } catch (const std::exception& e) {  // never let one request stop the server
                response = error_response(500, std::string("internal error: ") + e.what());
            }
            return answer(c, response, now);
        }
        return true;
    }

    // Deadlines; false when the connection is to be closed.
    bool check_time(Connection& c, Clock::time_point now) {
        if (c.phase == Phase::writing) return now - c.since <= kServeSendDeadline;
        if (c.phase == Phase::draining) return now - c.since <= kServeDrainTime;
        if (c.received == 0) return now - c.accepted <= kServeHeaderDeadline;  // idle: closed, nothing to say
        const bool has_header = c.in.find("\r\n\r\n") != std::string::npos;
        if (!has_header && now - c.accepted > kServeHeaderDeadline)
            return answer(c,
                          error_response(408, "the request header did not arrive within " +
                                                  std::to_string(kServeHeaderDeadline.count()) + " ms"),
                          now);
        if (now - c.accepted > kServeRequestDeadline)
            return answer(c,
                          error_response(408, "the request did not arrive within " +
                                                  std::to_string(kServeRequestDeadline.count()) + " ms"),
                          now);
        const auto sending = std::chrono::duration_cast<std::chrono::milliseconds>(now - c.since);
        if (sending > kServeRateGrace) {
            const double floor = static_cast<double>(kServeMinBytesPerSecond) *
                                 static_cast<double>((sending - kServeRateGrace).count()) / 1000.0;
            if (static_cast<double>(c.received) < floor)
                return answer(c,
                              error_response(408, "the request arrives slower than " +
                                                      std::to_string(kServeMinBytesPerSecond) + " bytes per second"),
                              now);
        }
        return true;
    }

    // Makes room for one more connection: closes the one that matters least.
    void evict_one() {
        PPOLAB_ASSERT(!open.empty());
        auto victim = std::min_element(open.begin(), open.end(), [](const Connection& a, const Connection& b) {
            const int ra = eviction_rank(a), rb = eviction_rank(b);
            return ra != rb ? ra < rb : a.since < b.since;
        });
        open.erase(victim);
    }

private:
    VoteSession& session_;
    int port_;
};

}  // namespace

std::string read_vote_guide(const fs::path& path) {
    const std::string where = "--guide " + path.string();
    if (std::error_code ec; fs::file_size(path, ec) > kMaxVoteGuideBytes && !ec)
        fail(where, ": the guide is ", fs::file_size(path), " bytes, over its limit of ", kMaxVoteGuideBytes);
    std::string text = read_file(path);
    if (text.size() > kMaxVoteGuideBytes)
        fail(where, ": the guide is ", text.size(), " bytes, over its limit of ", kMaxVoteGuideBytes);
    // Lines of printable UTF-8; a line may end in CR LF.
    size_t start = 0;
    for (int line = 1; start <= text.size(); ++line) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        std::string_view l(text.data() + start, end - start);
        if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
        if (const std::string problem = feedback_detail::printable_text_problem(l); !problem.empty())
            fail(where, ": line ", line, " must be printable UTF-8 text (no control characters); it ", problem);
        start = end + 1;
    }
    if (text.find_first_not_of(" \r\n") == std::string::npos) fail(where, ": the guide is empty");
    return text;
}

void serve_votes(const ServeOptions& o) {
    if (o.port < 0 || o.port > 65535) fail("--port must be in [0, 65535], got ", o.port);
    const std::string bytes = read_input_file(o.candidates, InputKind::candidates);
    CandidateFile candidates = parse_candidates(bytes, o.candidates.string());
    const std::string guide = o.guide ? read_vote_guide(*o.guide) : std::string(kDefaultVoteGuide);
    // Every pair's page must fit the server's answer, checked before anything
    // is written: a pair too long to show is refused now, not answered with
    // an error page after the participant has consented.
    for (const CandidatePair& p : candidates.pairs) {
        const PromptParts parts = corpus_prompt_parts(p.prompt);
        const size_t page = response_json(json{{"guide", guide},
                                               {"out", o.out.string()},
                                               {"pair",
                                                {{"id", p.id},
                                                 {"prompt", p.prompt},
                                                 {"reference", parts.reference},
                                                 {"situation", parts.situation},
                                                 {"a", p.a.text},
                                                 {"b", p.b.text}}}})
                                .size() +
                            1024;  // the state's other fields
        if (page > kHttpMaxResponse)
            fail(o.candidates.string(), ": pair '", p.id, "' would make a voting page of about ", page,
                 " bytes, over the server's limit of ", kHttpMaxResponse,
                 " (its prompt and responses are too long to show); remove it from the file");
    }
    VoteSession session(std::move(candidates), sha256_hex(bytes), o.out, guide);

    UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!listener) fail("feedback serve: socket() failed: ", std::strerror(errno));
    const int yes = 1;
    setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(o.port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // 127.0.0.1 only
    if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listener.get(), 128) != 0)
        fail("feedback serve: cannot listen on 127.0.0.1:", o.port, " (", std::strerror(errno), ")");
    socklen_t len = sizeof addr;
    if (getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
        fail("feedback serve: getsockname() failed: ", std::strerror(errno));
    const int port = ntohs(addr.sin_port);
    const StopSignals signals;

    std::printf("serving http://127.0.0.1:%d/  (%lld of %lld pairs voted; votes saved to %s; Ctrl-C stops)\n", port,
                static_cast<long long>(session.voted()), static_cast<long long>(session.total()), o.out.c_str());
    std::fflush(stdout);

    Server server(session, port);
    std::vector<Connection>& open = server.open;
    int64_t reported = session.voted();
    int64_t reported_withdrawn = session.withdrawn();
    std::vector<pollfd> fds;
    std::vector<char> keep;
    while (!g_stop) {
        fds.assign(1, pollfd{listener.get(), POLLIN, 0});
        for (const Connection& c : open)
            fds.push_back({c.fd.get(), static_cast<short>(c.phase == Phase::writing ? POLLOUT : POLLIN), 0});
        const int ready = ::poll(fds.data(), fds.size(), 100);
        if (ready < 0 && errno != EINTR) fail("feedback serve: poll() failed: ", std::strerror(errno));
        const auto now = Clock::now();
        keep.assign(open.size(), 1);
        for (size_t i = 0; i < open.size(); ++i) {
            Connection& c = open[i];
            const short ev = ready > 0 ? fds[i + 1].revents : 0;
            bool ok = true;
            if (c.phase == Phase::writing) {
                if (ev & (POLLERR | POLLHUP | POLLNVAL)) ok = false;
                else if (ev & POLLOUT) ok = server.flush(c, now);
            } else if (ev & (POLLIN | POLLHUP | POLLERR)) {
                ok = server.read(c, now);
            }
            keep[i] = ok && server.check_time(c, now);
        }
        size_t w = 0;
        for (size_t i = 0; i < open.size(); ++i)
            if (keep[i]) {
                if (w != i) open[w] = std::move(open[i]);
                ++w;
            }
        open.resize(w);  // the closed ones' descriptors close here
        // New connections: a full table never refuses one; the connection that
        // matters least makes room. A bounded number per turn, so that the
        // connections already open are read between them.
        if (ready > 0 && (fds[0].revents & POLLIN)) {
            for (int accepted = 0; accepted < 16; ++accepted) {
                UniqueFd fd(::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
                if (!fd) {
                    if (errno == EINTR || errno == ECONNABORTED) continue;
                    if ((errno == EMFILE || errno == ENFILE) && !open.empty()) {
                        server.evict_one();  // frees a descriptor for the next try
                        continue;
                    }
                    break;  // EAGAIN: none waiting
                }
                if (open.size() >= kServeMaxConnections) server.evict_one();
                // A fixed kernel send buffer (no autotuning to megabytes): what a
                // client does not read waits in the connection's own bounded `out`.
                const int sndbuf = static_cast<int>(kServeSocketSendBuffer);
                setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
                Connection c;
                c.fd = std::move(fd);
                c.accepted = c.since = now;
                // The request is often there already: read it before another
                // connection can push this one out.
                if (server.read(c, now)) open.push_back(std::move(c));
            }
        }
        if (session.voted() != reported || session.withdrawn() != reported_withdrawn) {
            const bool undone = session.withdrawn() != reported_withdrawn;
            reported = session.voted();
            reported_withdrawn = session.withdrawn();
            std::printf(undone ? "took back a vote: %lld of %lld voted\n" : "saved vote %lld of %lld\n",
                        static_cast<long long>(reported), static_cast<long long>(session.total()));
            std::fflush(stdout);
        }
    }
    open.clear();
    std::printf("stopped; %lld of %lld pairs voted in %s\n", static_cast<long long>(session.voted()),
                static_cast<long long>(session.total()), o.out.c_str());
}

}  // namespace ppolab
