// serve.h — `ppolab feedback serve`: a local web page where a person gives
// consent and a participant name, then compares answers A and B of one
// candidate pair at a time (A better, B better, tie, reject both; keys a b t
// r), with a progress count. Every vote rewrites the vote file atomically at
// once, so closing the browser (or stopping the server) loses nothing;
// started again on the same --out, the server continues where it stopped.
//
// The server is a small single-threaded HTTP/1.1 loop on POSIX sockets
// (poll over the listening socket and the open connections, one request per
// connection), bound to 127.0.0.1 only. It answers requests whose Host is
// 127.0.0.1 or localhost on its port (no DNS rebinding; a second Host,
// Origin, Content-Type, Content-Length or Sec-Fetch-Site header is a 400) and
// POSTs only with Content-Type exactly application/json (optionally
// "; charset=utf-8", else 415) from the same origin: a foreign Origin, or a
// Sec-Fetch-Site other than same-origin or none, is a 403 (no cross-site
// form posts).
//
// No client can shut the page off: every socket is non-blocking; a
// connection must deliver its request header within kServeHeaderDeadline of
// being accepted (one that sent nothing is then closed, a partial one gets a
// 408), its whole request within kServeRequestDeadline, and, once its first
// byte came, at least kServeMinBytesPerSecond on average after
// kServeRateGrace (a slow-loris gets a 408); answers are written from a
// bounded per-connection buffer as the client reads them, within
// kServeSendDeadline. When all kServeMaxConnections slots are taken a new
// connection is still accepted: the one that matters least is closed for it
// (finished ones, then those that sent nothing, then partial requests, then
// unread answers; the oldest first). The page is one self-contained HTML
// document (inline CSS and JS) that talks to a small JSON API:
//
//   GET  /            the page
//   GET  /api/state   {consented, participant, total, voted, withdrawn, out, guide,
//                      last: {pair_id, choice} | null,
//                      pair: {id, prompt, reference, situation, a, b} | null}
//   POST /api/consent {participant, consent: true, human_attestation: true} → state
//   POST /api/vote    {pair_id, choice} (the pair the state offers) → state
//   POST /api/undo    {pair_id} (the last vote's pair) → state: that vote is
//                     moved to the file's `withdrawn` list (nothing is lost)
//                     and its pair is offered again
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "feedback/candidates.h"
#include "feedback/votes.h"
#include "util/json.h"

namespace ppolab {

// The panel beside each pair unless `feedback serve --guide FILE` gives
// another text: what to weigh, in the words of a help desk, not the rubric's.
inline constexpr const char* kDefaultVoteGuide =
    "A better answer:\n"
    "- gives a next step that fits the situation described;\n"
    "- is correct, and does not promise that the step will surely fix the problem;\n"
    "- is clear and to the point.\n"
    "Politeness is welcome, but it never makes a wrong or irrelevant answer better.\n"
    "Choose tie when both are equally good (or equally flawed in the same way), and reject both when "
    "neither is acceptable.";

// The voting logic without sockets: what the page sees and what each
// action writes. Pairs are offered in the candidate file's order, skipping
// those already voted.
class VoteSession {
public:
    // `out` may exist: it must then be a human vote file for the same
    // candidates (checkpoint and candidate file sha256), and voting continues.
    // `guide` is the "what makes an answer better" panel beside the pair.
    VoteSession(CandidateFile candidates, std::string candidate_file_sha256, fs::path out,
                std::string guide = kDefaultVoteGuide);

    json state() const;
    // Records consent, attestation and the participant; creates the vote file.
    json consent(const json& request);
    // Records one vote for the offered pair; rewrites the vote file.
    json vote(const json& request);
    // Takes back the last vote (request.pair_id must name its pair): it moves
    // to the file's `withdrawn` list with the time, and its pair is offered
    // again; rewrites the vote file.
    json undo(const json& request);

    bool consented() const { return file_.consent; }
    int64_t voted() const { return static_cast<int64_t>(file_.votes.size()); }
    int64_t total() const { return static_cast<int64_t>(candidates_.pairs.size()); }
    int64_t withdrawn() const { return static_cast<int64_t>(file_.withdrawn.size()); }
    const VoteFile& file() const { return file_; }

private:
    const CandidatePair* next_pair() const;
    void save(Overwrite mode);

    CandidateFile candidates_;
    std::string candidate_sha256_;
    fs::path out_;
    VoteFile file_;
    std::set<std::string> voted_;
    std::string guide_;
};

struct HttpRequest {
    std::string method, target;                // "GET", "/api/state"
    std::string host, origin;                  // header values ("" when absent)
    std::string content_type, sec_fetch_site;  // lowercased ("" when absent)
    std::string body;
};
inline constexpr size_t kHttpMaxHeader = 16 * 1024, kHttpMaxBody = 64 * 1024;
inline constexpr size_t kHttpMaxResponse = 1024 * 1024;  // a longer answer becomes a 500
// A complete request in `bytes`, nullopt while more bytes are needed; Error
// when malformed (a method that is not a token, a target that is not a
// visible-ASCII path, a header name with spaces, a control character in a
// header line, a second Host/Origin/Content-Type/Content-Length/
// Sec-Fetch-Site) or over the limits above.
std::optional<HttpRequest> parse_http_request(std::string_view bytes);
// `lowered` (a lowercased Content-Type value) is application/json, with at
// most the parameter charset=utf-8.
bool is_json_content_type(std::string_view lowered);

// The connection rules of serve_votes (see the top of this file).
inline constexpr size_t kServeMaxConnections = 64;
inline constexpr std::chrono::milliseconds kServeHeaderDeadline{5000};    // from accept to the header's end
inline constexpr std::chrono::milliseconds kServeRequestDeadline{10000};  // from accept to the body's end
inline constexpr std::chrono::milliseconds kServeRateGrace{1000};         // after the first byte
inline constexpr int64_t kServeMinBytesPerSecond = 1024;                  // average, after the grace
inline constexpr std::chrono::milliseconds kServeSendDeadline{10000};     // to write the answer
inline constexpr std::chrono::milliseconds kServeDrainTime{1000};         // then, to read what follows until EOF
inline constexpr size_t kServeSocketSendBuffer = 128 * 1024;              // SO_SNDBUF of each connection

struct HttpResponse {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
};
// Routes one request (`port`: the port the server listens on, for the Host
// and Origin checks). Bad requests are answered 4xx with {"error": …}.
HttpResponse handle_vote_request(VoteSession& session, const HttpRequest& request, int port);
// The whole page (no external resource): the bytes of src/feedback/vote_page.html,
// compiled in at build time (embed_vote_page.cmake).
const std::string& vote_page_html();

struct ServeOptions {
    fs::path candidates;
    fs::path out;
    std::optional<fs::path> guide;  // UTF-8 text for the panel beside the pair (default kDefaultVoteGuide)
    int port = 8765;                // 0: any free port (the URL printed says which)
};
// The guide panel's text from `--guide FILE`: at most kMaxVoteGuideBytes of
// printable UTF-8 lines (Error naming the file and the line otherwise).
inline constexpr size_t kMaxVoteGuideBytes = 16384;
std::string read_vote_guide(const fs::path& path);
// Serves until SIGINT or SIGTERM (the handlers in place before come back
// afterwards); prints "serving http://127.0.0.1:PORT/". Every descriptor is
// owned, so an exception leaves none open.
void serve_votes(const ServeOptions& options);

}  // namespace ppolab
