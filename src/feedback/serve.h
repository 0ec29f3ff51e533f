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
// 127.0.0.1 or localhost on its port (no DNS rebinding) and POSTs only with
// Content-Type application/json from the same origin (no cross-site form
// posts). The page is one self-contained HTML document (inline CSS and JS)
// that talks to a small JSON API:
//
//   GET  /            the page
//   GET  /api/state   {consented, participant, total, voted, out, pair: {id, prompt, a, b} | null}
//   POST /api/consent {participant, consent: true, human_attestation: true} → state
//   POST /api/vote    {pair_id, choice} (the pair the state offers) → state
#pragma once
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "feedback/candidates.h"
#include "feedback/votes.h"
#include "util/json.h"

namespace ppolab {

// The voting logic without sockets: what the page sees and what each
// action writes. Pairs are offered in the candidate file's order, skipping
// those already voted.
class VoteSession {
public:
    // `out` may exist: it must then be a human vote file for the same
    // candidates (checkpoint and candidate file sha256), and voting continues.
    VoteSession(CandidateFile candidates, std::string candidate_file_sha256, fs::path out);

    json state() const;
    // Records consent, attestation and the participant; creates the vote file.
    json consent(const json& request);
    // Records one vote for the offered pair; rewrites the vote file.
    json vote(const json& request);

    bool consented() const { return file_.consent; }
    int64_t voted() const { return static_cast<int64_t>(file_.votes.size()); }
    int64_t total() const { return static_cast<int64_t>(candidates_.pairs.size()); }
    const VoteFile& file() const { return file_; }

private:
    const CandidatePair* next_pair() const;
    void save(Overwrite mode);

    CandidateFile candidates_;
    std::string candidate_sha256_;
    fs::path out_;
    VoteFile file_;
    std::set<std::string> voted_;
};

struct HttpRequest {
    std::string method, target;               // "GET", "/api/state"
    std::string host, origin, content_type;   // header values ("" when absent)
    std::string body;
};
inline constexpr size_t kHttpMaxHeader = 16 * 1024, kHttpMaxBody = 64 * 1024;
// A complete request in `bytes`, nullopt while more bytes are needed; Error
// when malformed or over the limits above.
std::optional<HttpRequest> parse_http_request(std::string_view bytes);

struct HttpResponse {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
};
// Routes one request (`port`: the port the server listens on, for the Host
// and Origin checks). Bad requests are answered 4xx with {"error": …}.
HttpResponse handle_vote_request(VoteSession& session, const HttpRequest& request, int port);
// The whole page (no external resource).
const std::string& vote_page_html();

struct ServeOptions {
    fs::path candidates;
    fs::path out;
    int port = 8765;  // 0: any free port (the URL printed says which)
};
// Serves until SIGINT or SIGTERM; prints "serving http://127.0.0.1:PORT/".
void serve_votes(const ServeOptions& options);

}  // namespace ppolab
