#include "training/resume_check.h"

#include "training/resume_state.h"
#include "util/fileio.h"
#include "util/sha256.h"

namespace ppolab {

json compare_state_files(const fs::path& a, const fs::path& b) {
    ResumeState first = load_resume_state(a);
    ResumeState second = load_resume_state(b);
    const std::string diff = states_first_difference(first, second);
    return json{{"status", diff.empty() ? "PASS" : "FAIL"},
                {"all_state_exact", diff.empty()},
                {"first_difference", diff},
                {"first_file", a.string()},
                {"second_file", b.string()},
                {"first_sha256", sha256_file(a)},
                {"second_sha256", sha256_file(b)},
                {"first_content_sha256", state_content_sha256(first)},
                {"second_content_sha256", state_content_sha256(second)}};
}

json resume_check(const RunLayout& run, const std::string& stage) {
    const json c = compare_state_files(run.state(stage, "continuous"), run.state(stage, "resume"));
    json result{{"stage", stage},
                {"status", c["status"]},
                {"all_state_exact", c["all_state_exact"]},
                {"first_difference", c["first_difference"]},
                {"continuous_sha256", c["first_sha256"]},
                {"resume_sha256", c["second_sha256"]},
                {"continuous_content_sha256", c["first_content_sha256"]},
                {"resume_content_sha256", c["second_content_sha256"]}};
    write_json_atomic(run.resume_check(stage), result, Overwrite::replace);
    return result;
}

}  // namespace ppolab
