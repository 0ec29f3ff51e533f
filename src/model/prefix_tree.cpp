#include "model/prefix_tree.h"

#include <map>
#include <utility>

#include "kernels/lm_head.h"
#include "util/error.h"

namespace ppolab {

PrefixTree prefix_tree(const std::vector<std::vector<int32_t>>& sequences) {
    PrefixTree tree;
    std::map<std::pair<int32_t, int32_t>, int32_t> child;  // (parent, token) → node
    for (size_t i = 0; i < sequences.size(); ++i) {
        if (sequences[i].empty()) fail("prefix tree: sequence ", i, " is empty");
        int32_t at = -1;
        for (int32_t token : sequences[i]) {
            auto [it, added] = child.try_emplace({at, token}, static_cast<int32_t>(tree.token.size()));
            if (added) {
                tree.token.push_back(token);
                tree.parent.push_back(at);
                tree.internal.push_back(0);
                if (at >= 0) tree.internal[static_cast<size_t>(at)] = 1;
            }
            at = it->second;
        }
        tree.last_node.push_back(at);
    }
    return tree;
}

namespace {

// The packed row [prompt | fed nodes]; row_of[n] = the row of node n (−1
// when not fed); `source[n]` = the row whose hidden state produces node n.
struct TreeRow {
    std::vector<int32_t> tokens, parent;
    std::vector<int64_t> row_of, source;
};

TreeRow tree_row(const std::vector<int32_t>& prompt, const PrefixTree& tree, bool feed_leaves) {
    if (prompt.empty()) fail("prefix tree: empty prompt");
    TreeRow r;
    const int64_t P = static_cast<int64_t>(prompt.size());
    for (int64_t t = 0; t < P; ++t) {
        r.tokens.push_back(prompt[static_cast<size_t>(t)]);
        r.parent.push_back(static_cast<int32_t>(t - 1));
    }
    r.row_of.assign(static_cast<size_t>(tree.nodes()), -1);
    r.source.resize(static_cast<size_t>(tree.nodes()));
    for (int64_t n = 0; n < tree.nodes(); ++n) {
        const int32_t p = tree.parent[static_cast<size_t>(n)];
        const int64_t above = p < 0 ? P - 1 : r.row_of[static_cast<size_t>(p)];
        r.source[static_cast<size_t>(n)] = above;
        if (tree.internal[static_cast<size_t>(n)] || feed_leaves) {
            r.row_of[static_cast<size_t>(n)] = static_cast<int64_t>(r.tokens.size());
            r.tokens.push_back(tree.token[static_cast<size_t>(n)]);
            r.parent.push_back(static_cast<int32_t>(above));
        }
    }
    return r;
}

}  // namespace

TreeLogprobs prefix_tree_logprobs(Qwen2& model, const std::vector<int32_t>& prompt, const PrefixTree& tree) {
    const TreeRow r = tree_row(prompt, tree, /*feed_leaves=*/false);
    const int64_t H = model.config().hidden_size, N = tree.nodes();
    const float* hidden = model.forward_tree(r.tokens.data(), r.parent.data(), static_cast<int64_t>(r.tokens.size()));
    std::vector<float> h(static_cast<size_t>(N * H));
    for (int64_t n = 0; n < N; ++n) std::copy_n(hidden + r.source[static_cast<size_t>(n)] * H, H, h.begin() + n * H);
    TreeLogprobs out;
    out.node_logp.resize(static_cast<size_t>(N));
    lm_logprobs_forward(out.node_logp.data(), h.data(), tree.token.data(), model.weights().output_matrix().view(), N);
    for (int32_t last : tree.last_node) {
        std::vector<int32_t> path;
        for (int32_t n = last; n >= 0; n = tree.parent[static_cast<size_t>(n)]) path.push_back(n);
        double sum = 0;
        for (auto it = path.rbegin(); it != path.rend(); ++it) sum += out.node_logp[static_cast<size_t>(*it)];
        out.sequence_logp.push_back(sum);
    }
    return out;
}

std::vector<float> prefix_tree_scores(Qwen2& model, const ScalarHead& head, const std::vector<int32_t>& prompt,
                                      const PrefixTree& tree) {
    const int64_t H = model.config().hidden_size;
    if (head.hidden != H) fail("prefix tree scores: head width ", head.hidden, ", model hidden size ", H);
    const TreeRow r = tree_row(prompt, tree, /*feed_leaves=*/true);
    const float* hidden = model.forward_tree(r.tokens.data(), r.parent.data(), static_cast<int64_t>(r.tokens.size()));
    const int64_t S = static_cast<int64_t>(tree.last_node.size());
    std::vector<float> h(static_cast<size_t>(S * H)), scores(static_cast<size_t>(S));
    for (int64_t i = 0; i < S; ++i)
        std::copy_n(hidden + r.row_of[static_cast<size_t>(tree.last_node[static_cast<size_t>(i)])] * H, H,
                    h.begin() + i * H);
    head.forward(scores.data(), h.data(), S);
    return scores;
}

}  // namespace ppolab
