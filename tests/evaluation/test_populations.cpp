// Rows versus unique contexts on a hand example, the repeated-generation
// check, and the generation file's row format.
#include <gtest/gtest.h>

#include "evaluation/populations.h"
#include "util/error.h"

using namespace ppolab;

namespace {

EvalRow make_row(const std::string& id, const std::string& population, const std::string& prompt,
                 const std::string& text, FinishReason finish, int expected, double score, float actor,
                 float reference) {
    EvalRow r;
    r.id = id;
    r.family = id.substr(0, id.find('-'));
    r.population = population;
    r.prompt = prompt;
    r.text = text;
    r.finish_reason = finish_reason_name(finish);
    r.response = {5, 6, 7};
    if (finish == FinishReason::eos) r.response.push_back(2);
    r.actor_logp.assign(r.response.size(), actor);
    r.reference_logp.assign(r.response.size(), reference);
    r.learned_score = score;
    r.expected_action = expected;
    r.verdict = evaluate_response(text, finish, expected, true);
    return r;
}

// 3 test rows (2 successes, 1 unsupported certainty), probe context A
// (4 identical successes), probe context B (4 identical unrecognised rows cut
// without EOS).
std::vector<EvalRow> hand_rows() {
    std::vector<EvalRow> rows;
    rows.push_back(
        make_row("OH004-P0", "test", "t0", response_text(0, 1, false), FinishReason::eos, 0, 1.0, -1.0f, -1.5f));
    rows.push_back(
        make_row("OH004-P1", "test", "t1", response_text(0, 0, true), FinishReason::eos, 0, 2.0, -1.0f, -1.0f));
    rows.push_back(
        make_row("OH007-P0", "test", "t2", response_text(1, 2, false), FinishReason::eos, 1, 3.0, -2.0f, -1.0f));
    for (int k = 0; k < 4; ++k)
        rows.push_back(make_row("PROBE00-C" + std::to_string(k / 2) + "-P" + std::to_string(k % 2), "probe", "pA",
                                response_text(0, 1, true), FinishReason::eos, 0, 4.0, -0.5f, -0.5f));
    for (int k = 0; k < 4; ++k)
        rows.push_back(make_row("PROBE01-C" + std::to_string(k / 2) + "-P" + std::to_string(k % 2), "probe", "pB",
                                "Please reboot the whole building", FinishReason::length, 1, -4.0, -3.0f, -1.0f));
    return rows;
}

}  // namespace

TEST(EvalPopulations, RowsVersusUniqueContextsOnAHandExample) {
    const std::vector<EvalRow> rows = hand_rows();
    const ordered_json m = policy_metrics(rows, false);
    ASSERT_EQ(m.size(), 5u);
    EXPECT_EQ(m["test"]["rows"], 3);
    EXPECT_EQ(m["probe_rows"]["rows"], 8);
    EXPECT_EQ(m["probe_unique_contexts"]["rows"], 2);
    EXPECT_EQ(m["all_rows"]["rows"], 11);
    EXPECT_EQ(m["all_unique_contexts"]["rows"], 5);
    EXPECT_EQ(m["all_rows"]["distinct_prompts"], 5);

    // success over all outputs: rows 2 + 4 of 11; unique contexts 2 + 1 of 5
    EXPECT_EQ(m["all_rows"]["rubric_success"], 6);
    EXPECT_DOUBLE_EQ(m["all_rows"]["rubric_success_rate_all_outputs"].get<double>(), 6.0 / 11.0);
    EXPECT_DOUBLE_EQ(m["all_unique_contexts"]["rubric_success_rate_all_outputs"].get<double>(), 3.0 / 5.0);
    // recognised: all but probe B; certainty over the recognised only
    EXPECT_EQ(m["all_rows"]["recognized"], 7);
    EXPECT_DOUBLE_EQ(m["all_rows"]["recognized_rate"].get<double>(), 7.0 / 11.0);
    EXPECT_DOUBLE_EQ(m["all_rows"]["unsupported_certainty_rate_recognized_denominator"].get<double>(), 1.0 / 7.0);
    EXPECT_DOUBLE_EQ(m["all_unique_contexts"]["unsupported_certainty_rate_recognized_denominator"].get<double>(),
                     1.0 / 4.0);
    EXPECT_EQ(m["all_unique_contexts"]["denominators"]["unsupported_certainty_rate_recognized_denominator"], 4);
    EXPECT_DOUBLE_EQ(m["all_rows"]["relevant_rate_recognized_denominator"].get<double>(), 1.0);
    EXPECT_EQ(m["all_rows"]["without_eos"], 4);
    EXPECT_EQ(m["all_unique_contexts"]["without_eos"], 1);
    EXPECT_EQ(m["probe_unique_contexts"]["without_eos"], 1);
    EXPECT_EQ(m["all_rows"]["undecodable"], 0);
    EXPECT_EQ(m["all_rows"]["refusals"], 0);
    // the probe-B-only population has no recognised output: rates over it are null
    EXPECT_TRUE(population_metrics({&rows[7]})["unsupported_certainty_rate_recognized_denominator"].is_null());
    // lengths: EOS rows 4 tokens, cut rows 3
    EXPECT_DOUBLE_EQ(m["all_rows"]["mean_response_tokens_eos_included"].get<double>(), (7 * 4 + 4 * 3) / 11.0);
    EXPECT_DOUBLE_EQ(m["all_unique_contexts"]["mean_response_tokens_eos_included"].get<double>(), (4 * 4 + 3) / 5.0);
    // learned score and log-ratio means
    EXPECT_DOUBLE_EQ(m["test"]["mean_learned_reward"].get<double>(), 2.0);
    EXPECT_DOUBLE_EQ(m["all_rows"]["mean_learned_reward"].get<double>(), (1 + 2 + 3 + 16 - 16) / 11.0);
    EXPECT_DOUBLE_EQ(m["all_unique_contexts"]["mean_learned_reward"].get<double>(), (1 + 2 + 3 + 4 - 4) / 5.0);
    EXPECT_DOUBLE_EQ(m["test"]["mean_sampled_actor_reference_logratio"].get<double>(), (0.5 + 0 - 1) / 3.0);
    EXPECT_DOUBLE_EQ(m["probe_unique_contexts"]["mean_sampled_actor_reference_logratio"].get<double>(), (0 - 2) / 2.0);
}

TEST(EvalPopulations, ValidationMetricsAndMissingVerdict) {
    std::vector<EvalRow> rows = hand_rows();
    EXPECT_THROW(policy_metrics(rows, true), Error);  // test/probe rows are not validation rows
    for (EvalRow& r : rows) r.population = "validation";
    const ordered_json m = policy_metrics(rows, true);
    EXPECT_EQ(m["validation"]["rows"], 11);
    EXPECT_EQ(m["validation_unique_contexts"]["rows"], 5);
    rows[4].verdict.reset();
    try {
        policy_metrics(rows, true);
        FAIL() << "a row without verdict was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(rows[4].id), std::string::npos) << e.what();
    }
}

TEST(EvalPopulations, DifferingRepeatedProbeGenerationIsCaught) {
    std::vector<EvalRow> rows = hand_rows();
    EXPECT_NO_THROW(check_repeated_generations(rows));
    rows[9].response[1] = 99;  // third row of probe context B
    try {
        check_repeated_generations(rows);
        FAIL() << "differing greedy generations of one context were accepted";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(rows[7].id), std::string::npos) << msg;
        EXPECT_NE(msg.find(rows[9].id), std::string::npos) << msg;
        EXPECT_NE(msg.find("token 1"), std::string::npos) << msg;
    }
    rows = hand_rows();
    rows[5].finish_reason = "length";  // same tokens, different ending
    EXPECT_THROW(check_repeated_generations(rows), Error);
    rows = hand_rows();
    rows[6].response.pop_back();  // a prefix is not identical
    EXPECT_THROW(check_repeated_generations(rows), Error);
}

TEST(EvalPopulations, RowJsonRoundTrip) {
    const std::vector<EvalRow> rows = hand_rows();
    for (const EvalRow& r : rows) {
        const json j = json::parse(eval_row_to_json(r).dump());
        const EvalRow back = eval_row_from_json(j, "generations.json");
        EXPECT_EQ(back.id, r.id);
        EXPECT_EQ(back.response, r.response);
        EXPECT_EQ(back.text, r.text);
        EXPECT_EQ(back.actor_logp, r.actor_logp);
        EXPECT_EQ(back.learned_score, r.learned_score);
        ASSERT_TRUE(back.verdict.has_value());
        EXPECT_EQ(back.verdict->rubric_success, r.verdict->rubric_success);
        EXPECT_EQ(eval_row_to_json(back).dump(), eval_row_to_json(r).dump());
    }
    json bad = json::parse(eval_row_to_json(rows[0]).dump());
    bad["actor_logp"] = std::vector<float>{1.0f};
    EXPECT_THROW(eval_row_from_json(bad, "generations.json"), Error);
    bad = json::parse(eval_row_to_json(rows[0]).dump());
    bad["population"] = "train";
    EXPECT_THROW(eval_row_from_json(bad, "generations.json"), Error);
}
