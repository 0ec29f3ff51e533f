// prefix_tree.h — exact probabilities of a finite set of responses under a
// policy, in one teacher-forced pass over their prefix tree (the rubric's
// 192 sentences share ~950 distinct tokens, against ~3 200 one by one).
//
//   log p(y | x) = Σ_t log p(y_t | x, y_<t)   (float per-token log-probs,
//                                             summed in float64, t ascending)
//
// The packed row is [prompt | tree nodes]: a node attends to the prompt and
// its ancestors (Qwen2::forward_tree), so each per-token log-prob is bit for
// bit what scoring the sequence alone gives (scoring.h response_logprobs),
// and what the sampler recorded when it drew those tokens. A sequence's
// last token (EOS) produces nothing the log-probs need, so leaves are fed
// only where the hidden state at the last token is read (a reward head).
#pragma once
#include <cstdint>
#include <vector>

#include "model/heads.h"
#include "model/qwen2.h"

namespace ppolab {

struct PrefixTree {
    std::vector<int32_t> token;      // (nodes) in insertion order: a parent before its children
    std::vector<int32_t> parent;     // (nodes) −1 for a first token
    std::vector<uint8_t> internal;   // (nodes) 1 when some node has it as parent
    std::vector<int32_t> last_node;  // (sequences) the node of each sequence's last token
    int64_t nodes() const { return static_cast<int64_t>(token.size()); }
};

// The tree of `sequences` (each non-empty: Error naming the index
// otherwise). Equal sequences share their nodes.
PrefixTree prefix_tree(const std::vector<std::vector<int32_t>>& sequences);

struct TreeLogprobs {
    std::vector<float> node_logp;       // (nodes) log p(token | prompt, ancestors)
    std::vector<double> sequence_logp;  // (sequences) Σ over its path, float64, root first
};

// The log-probabilities of every node and sequence after `prompt` (non-empty).
TreeLogprobs prefix_tree_logprobs(Qwen2& model, const std::vector<int32_t>& prompt, const PrefixTree& tree);

// head(final hidden state at each sequence's last token) (sequences): the
// reward model's score of prompt + sequence (scoring.h reward_scores).
std::vector<float> prefix_tree_scores(Qwen2& model, const ScalarHead& head, const std::vector<int32_t>& prompt,
                                      const PrefixTree& tree);

}  // namespace ppolab
