// The reserved rubric: every field, the whole finite grammar, near misses,
// and the rule that an output cut without EOS or with an undecodable token
// is never a success.
#include <gtest/gtest.h>

#include <set>

#include "data/rubric.h"
#include "util/error.h"

using namespace ppolab;

TEST(Rubric, GeneratorTextsAreTheDeclaredSentences) {
    EXPECT_EQ(response_text(0, 0, false), "Resume the print queue.");
    EXPECT_EQ(response_text(1, 1, false), "Check for an unplugged cable. This may help.");
    EXPECT_EQ(response_text(3, 2, true),
              "Thank you for your patience. Re-enable the Wi-Fi adapter. This will definitely fix it.");
    EXPECT_EQ(response_text(5, 1, true), "Thank you for your patience. Renew the login session. This may help.");
    EXPECT_THROW(response_text(6, 0, false), Error);
    EXPECT_THROW(response_text(0, 3, false), Error);
    EXPECT_THROW(response_text(-1, 0, false), Error);
}

TEST(Rubric, EveryFieldOfASuccess) {
    RubricVerdict v =
        evaluate_response("Thank you for your patience. Save the document now. This may help.", FinishReason::eos, 4);
    EXPECT_TRUE(v.recognized);
    EXPECT_EQ(v.status, "CERTIFIED");
    EXPECT_EQ(v.action, 4);
    EXPECT_EQ(v.caution, 1);
    EXPECT_TRUE(v.relevant);
    EXPECT_FALSE(v.unsupported_certainty);
    EXPECT_FALSE(v.refusal);
    EXPECT_TRUE(v.polite);
    EXPECT_TRUE(v.ended_with_eos);
    EXPECT_TRUE(v.decodable);
    EXPECT_TRUE(v.rubric_success);
    EXPECT_EQ(v.reason, "ok");
}

TEST(Rubric, IrrelevantCertainPlainRefusal) {
    RubricVerdict wrong = evaluate_response("Save the document now.", FinishReason::eos, 2);
    EXPECT_TRUE(wrong.recognized);
    EXPECT_FALSE(wrong.relevant);
    EXPECT_FALSE(wrong.rubric_success);
    EXPECT_FALSE(wrong.polite);
    EXPECT_EQ(wrong.caution, 0);
    EXPECT_NE(wrong.reason.find("irrelevant action save_document; expected reenable_audio"), std::string::npos)
        << wrong.reason;

    RubricVerdict certain =
        evaluate_response("Re-enable the audio output. This is guaranteed to fix it.", FinishReason::eos, 2);
    EXPECT_TRUE(certain.recognized);
    EXPECT_TRUE(certain.relevant);
    EXPECT_TRUE(certain.unsupported_certainty);
    EXPECT_EQ(certain.caution, 2);
    EXPECT_FALSE(certain.rubric_success);
    EXPECT_EQ(certain.reason, "unsupported certainty");

    RubricVerdict plain = evaluate_response("Re-enable the audio output. Have a nice day.", FinishReason::eos, 2);
    EXPECT_TRUE(plain.rubric_success);
    EXPECT_TRUE(plain.polite);  // a closing formula is politeness too
    EXPECT_EQ(plain.caution, 0);

    RubricVerdict refusal =
        evaluate_response("Thanks for waiting. I am unable to help with that.", FinishReason::eos, 0);
    EXPECT_TRUE(refusal.recognized);
    EXPECT_TRUE(refusal.refusal);
    EXPECT_TRUE(refusal.polite);
    EXPECT_FALSE(refusal.relevant);
    EXPECT_FALSE(refusal.unsupported_certainty);
    EXPECT_FALSE(refusal.rubric_success);
    EXPECT_EQ(refusal.action, -1);
    EXPECT_EQ(refusal.reason, "refusal");
}

TEST(Rubric, NoEosAndUndecodableAreNeverSuccesses) {
    const std::string good = "Renew the login session. This may help.";
    ASSERT_TRUE(evaluate_response(good, FinishReason::eos, 5).rubric_success);
    RubricVerdict cut = evaluate_response(good, FinishReason::length, 5);
    EXPECT_TRUE(cut.recognized);
    EXPECT_FALSE(cut.ended_with_eos);
    EXPECT_FALSE(cut.rubric_success);
    EXPECT_EQ(cut.reason, "no EOS: cut at the length limit");
    RubricVerdict bad = evaluate_response(good, FinishReason::eos, 5, /*decodable=*/false);
    EXPECT_FALSE(bad.recognized);
    EXPECT_EQ(bad.status, "UNCERTIFIED");
    EXPECT_FALSE(bad.decodable);
    EXPECT_FALSE(bad.rubric_success);
    EXPECT_NE(bad.reason.find("undecodable"), std::string::npos);
    // Every sentence of the grammar, cut or undecodable, fails.
    for (const auto& f : rubric_enumerate()) {
        const std::string text = response_form_text(f);
        EXPECT_FALSE(evaluate_response(text, FinishReason::length, f.action).rubric_success) << text;
        EXPECT_FALSE(evaluate_response(text, FinishReason::eos, f.action, false).rubric_success) << text;
    }
}

TEST(Rubric, WholeGrammarIsRecognisedWithItsLabels) {
    const auto forms = rubric_enumerate();
    EXPECT_EQ(forms.size(), 192u);  // (6 actions x 5 cautions + 2 refusals) x 3 openings x 2 closings
    std::set<std::string> texts;
    int successes = 0;
    for (const auto& f : forms) {
        const std::string text = response_form_text(f);
        EXPECT_TRUE(texts.insert(text).second) << "two forms give the same text: " << text;
        for (int expected = 0; expected < kActionCount; ++expected) {
            RubricVerdict v = evaluate_response(text, FinishReason::eos, expected);
            SCOPED_TRACE(text + " / expected " + std::to_string(expected));
            ASSERT_TRUE(v.recognized) << v.reason;
            EXPECT_EQ(v.status, "CERTIFIED");
            EXPECT_EQ(v.refusal, f.refusal);
            EXPECT_EQ(v.polite, f.opening >= 0 || f.closing >= 0);
            EXPECT_EQ(v.action, f.refusal ? -1 : f.action);
            EXPECT_EQ(v.caution, f.refusal ? -1 : f.caution);
            EXPECT_EQ(v.relevant, !f.refusal && f.action == expected);
            EXPECT_EQ(v.unsupported_certainty, !f.refusal && f.caution == 2);
            const bool want = !f.refusal && f.action == expected && f.caution != 2;
            EXPECT_EQ(v.rubric_success, want);
            successes += v.rubric_success;
            // Layout does not matter, only whitespace is normalised.
            std::string spaced = "\n  " + text + "  \t";
            for (size_t i = 0; i < spaced.size(); ++i)
                if (spaced[i] == ' ' && i > 3 && i + 3 < spaced.size()) spaced.insert(i, "\n"), ++i;
            EXPECT_EQ(evaluate_response(spaced, FinishReason::eos, expected).rubric_success, want) << spaced;
        }
    }
    EXPECT_EQ(successes, 6 * 3 * 3 * 2);  // per action: plain + 2 hedges, x openings x closings
    // The generator's 36 responses are all in the enumeration with their labels.
    for (int a = 0; a < kActionCount; ++a)
        for (int c = 0; c < 3; ++c)
            for (bool polite : {false, true}) {
                const std::string text = response_text(a, c, polite);
                EXPECT_TRUE(texts.count(text)) << text;
                RubricVerdict v = evaluate_response(text, FinishReason::eos, a);
                EXPECT_EQ(v.action, a);
                EXPECT_EQ(v.caution, c);
                EXPECT_EQ(v.polite, polite);
                EXPECT_EQ(v.rubric_success, c != 2);
            }
}

TEST(Rubric, NearMissesAreUncertified) {
    const char* near_misses[] = {
        "Resume the print queue",                                                    // missing period
        "resume the print queue.",                                                   // case
        "Resume the printer queue.",                                                 // paraphrase
        "Resume the print que.",                                                     // typo
        "Resume the paused print queue.",                                            // extra word
        "Resume the print queue. This may help",                                     // missing final period
        "This may help. Resume the print queue.",                                    // reordered clauses
        "Resume the print queue. Save the document now.",                            // two actions
        "Resume the print queue. Resume the print queue.",                           // repeated action
        "Resume the print queue. This may help. Thanks!",                            // trailing prose
        "Resume the print queue. This may help. It is easy.",                        // trailing prose
        "Resume the print queue. This may help. This will definitely fix it.",       // two cautions
        "Resume the print queue. Thank you for your patience.",                      // opening at the end
        "Have a nice day. Resume the print queue.",                                  // closing first
        "Thank you for your patience. Thanks for waiting. Resume the print queue.",  // two openings
        "Resume the print queue. Have a nice day. Have a nice day.",                 // two closings
        "Thank you for your patience.",                                              // politeness only
        "This may help.",                                                            // caution only
        "",                                                                          // empty
        " \n\t ",                                                                    // blank
        "Resume the print queue.This may help.",                                     // no space between sentences
        "Resume the print queue..",                                                  // double period
        "Resume the print queue!",                                                   // other punctuation
        "Resume the print queue, this may help.",                                    // merged sentences
        "Resume the print queue. I cannot help with that request.",                  // answer then refusal
        "I cannot help with that request. This may help.",                           // refusal with caution
        "I cannot help with that request. Resume the print queue.",                  // refusal then answer
        "Sure! Resume the print queue.",                                             // leading prose
        "Resume the print queue.\xc2\xa0",                                           // non-breaking space is not blank
        "Resume the print queue. This will definitely fix it. This may help.",       // two cautions, reordered
        "Re-enable the Wi-Fi.",                                                      // shortened action
        "Save the document now. This may help. Have a nice day. Thanks for waiting.",  // opening after closing
    };
    for (const char* text : near_misses) {
        RubricVerdict v = evaluate_response(text, FinishReason::eos, 0);
        EXPECT_FALSE(v.recognized) << "'" << text << "'";
        EXPECT_EQ(v.status, "UNCERTIFIED") << text;
        EXPECT_FALSE(v.rubric_success) << text;
        EXPECT_FALSE(v.relevant) << text;
        EXPECT_FALSE(v.polite) << text;
        EXPECT_FALSE(v.refusal) << text;
        EXPECT_FALSE(v.unsupported_certainty) << text;
        EXPECT_EQ(v.action, -1) << text;
        EXPECT_NE(v.reason.find("outside the grammar"), std::string::npos) << text << ": " << v.reason;
    }
    // Reasons say what is wrong.
    EXPECT_NE(evaluate_response("Resume the print queue. Save the document now.", FinishReason::eos, 0)
                  .reason.find("second action"),
              std::string::npos);
    EXPECT_NE(evaluate_response("Resume the printer queue.", FinishReason::eos, 0)
                  .reason.find("'Resume the printer queue.' is not in the grammar"),
              std::string::npos);
    EXPECT_NE(evaluate_response("Resume the print queue", FinishReason::eos, 0).reason.find("period"),
              std::string::npos);
}

TEST(Rubric, ReasonsStayValidJsonForAnyBytes) {
    // Found by fuzz_manifest: a reason quoting invalid UTF-8 could not be written as JSON.
    const std::string bytes = "Thank$you fo\xff\xff\xffqatience. Resume the \x01populati'oe. This may help.";
    RubricVerdict v = evaluate_response(bytes, FinishReason::eos, 0);
    EXPECT_FALSE(v.recognized);
    std::string dumped;
    EXPECT_NO_THROW(dumped = rubric_verdict_to_json(v).dump());
    EXPECT_NE(dumped.find("\\\\xff"), std::string::npos) << dumped;
}

TEST(Rubric, WhitespaceOnlyNormalisation) {
    EXPECT_EQ(rubric_normalize("  a \n\t b  "), "a b");
    EXPECT_EQ(rubric_normalize(""), "");
    EXPECT_TRUE(evaluate_response(" Resume  the\nprint queue.\n", FinishReason::eos, 0).rubric_success);
}

TEST(Rubric, ExpectedActionIsChecked) {
    EXPECT_THROW(evaluate_response("Resume the print queue.", FinishReason::eos, 6), Error);
    EXPECT_THROW(evaluate_response("Resume the print queue.", FinishReason::eos, -1), Error);
    EXPECT_EQ(finish_reason_parse("eos"), FinishReason::eos);
    EXPECT_EQ(finish_reason_parse("length"), FinishReason::length);
    EXPECT_THROW(finish_reason_parse("stop"), Error);
    EXPECT_STREQ(finish_reason_name(FinishReason::length), "length");
}

TEST(Rubric, ActionsAndContextsAreDistinct) {
    std::set<std::string> names, contexts, instructions;
    for (int a = 0; a < kActionCount; ++a) {
        names.insert(action_name(a));
        contexts.insert(action_context(a));
        instructions.insert(action_instruction(a));
        EXPECT_EQ(response_text(a, 0, false), action_instruction(a));
        // A context sentence is not itself an answer.
        EXPECT_FALSE(evaluate_response(action_context(a), FinishReason::eos, a).recognized);
    }
    EXPECT_EQ(names.size(), 6u);
    EXPECT_EQ(contexts.size(), 6u);
    EXPECT_EQ(instructions.size(), 6u);
    EXPECT_THROW(action_context(6), Error);
}

TEST(Rubric, VerdictJsonRoundTripAndValidation) {
    RubricVerdict v = evaluate_response(
        "Thanks for waiting. Check for an unplugged cable. This might help. Have a nice day.", FinishReason::eos, 1);
    ASSERT_TRUE(v.rubric_success);
    ordered_json j = rubric_verdict_to_json(v);
    EXPECT_EQ(j.dump(),
              "{\"status\":\"CERTIFIED\",\"recognized\":true,\"action\":1,\"caution\":1,\"relevant\":true,"
              "\"unsupported_certainty\":false,\"refusal\":false,\"polite\":true,\"ended_with_eos\":true,"
              "\"decodable\":true,\"rubric_success\":true,\"reason\":\"ok\"}");
    json plain = json::parse(j.dump());
    RubricVerdict back = rubric_verdict_from_json(plain, "v.json");
    EXPECT_EQ(rubric_verdict_to_json(back).dump(), j.dump());
    plain["rubric_success"] = false;  // inconsistent with the other fields
    EXPECT_THROW(rubric_verdict_from_json(plain, "v.json"), Error);
    plain = json::parse(j.dump());
    plain["status"] = "UNCERTIFIED";
    EXPECT_THROW(rubric_verdict_from_json(plain, "v.json"), Error);
    plain = json::parse(j.dump());
    plain.erase("polite");
    try {
        rubric_verdict_from_json(plain, "v.json");
        FAIL() << "missing field accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("v.json: missing field 'polite'"), std::string::npos) << e.what();
    }
}

TEST(Rubric, LongestResponseIsShort) {
    size_t longest = 0;
    for (const auto& f : rubric_enumerate()) {
        std::string t = response_form_text(f);
        size_t words = 1;
        for (char c : t) words += c == ' ';
        longest = std::max(longest, words);
    }
    EXPECT_LE(longest, 25u);
}
