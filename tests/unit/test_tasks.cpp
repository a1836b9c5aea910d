// Trained tasks (E3–E5): data generators against brute force, path-restricted layers, ensembles, training, checkpoints.
#include <gtest/gtest.h>

#include <cmath>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <set>

#include "rankscope/error.hpp"
#include "rankscope/tasks.hpp"
#include "test_support.hpp"

using namespace rankscope;
using namespace rankscope::test_support;

namespace {

// Brute force: p is a hull vertex iff it lies in no triangle (closed, possibly degenerate) of three other points.
bool in_triangle(double px, double py, double ax, double ay, double bx, double by, double cx, double cy) {
    auto side = [](double x1, double y1, double x2, double y2, double x3, double y3) {
        return (x2 - x1) * (y3 - y1) - (y2 - y1) * (x3 - x1);
    };
    const double d1 = side(ax, ay, bx, by, px, py), d2 = side(bx, by, cx, cy, px, py), d3 = side(cx, cy, ax, ay, px, py);
    const bool negative = d1 < 0 || d2 < 0 || d3 < 0, positive = d1 > 0 || d2 > 0 || d3 > 0;
    return !(negative && positive);
}

bool brute_force_vertex(const at::Tensor& points, int p) {
    const int n = static_cast<int>(points.size(0));
    auto x = [&](int i) { return points[i][0].item<double>(); };
    auto y = [&](int i) { return points[i][1].item<double>(); };
    for (int a = 0; a < n; ++a)
        for (int b = a + 1; b < n; ++b)
            for (int c = b + 1; c < n; ++c) {
                if (a == p || b == p || c == p) continue;
                if (in_triangle(x(p), y(p), x(a), y(a), x(b), y(b), x(c), y(c))) return false;
            }
    return true;
}

TaskSettings tiny_sort() {
    TaskSettings s = default_task_settings("sort");
    s.layers = 2, s.heads = 2, s.d_model = 16, s.epochs = 4, s.train_count = 120, s.eval_count = 30;
    return s;
}

// A sort evaluation split of `count` sequences (length 8, 10 symbols) and an untrained tiny model for it.
struct TinySortModel {
    TaskSplits data;
    TaskModel model{nullptr};
};
TinySortModel tiny_sort_model(int count, std::uint64_t torch_seed) {
    torch::manual_seed(torch_seed);
    std::mt19937_64 rng(2);
    TinySortModel tiny;
    tiny.data.eval = make_sort_data(count, 8, 10, rng);
    tiny.data.classes = 10, tiny.data.input_vocab = 10;
    tiny.model = TaskModel(model_config_for(tiny_sort(), tiny.data));
    return tiny;
}

}  // namespace

TEST(TaskData, HullLabelsMatchBruteForceOnThousandSets) {
    std::mt19937_64 rng(7);
    const TaskBatch data = make_hull_data(1000, 10, rng);
    ASSERT_EQ(data.inputs.sizes(), (std::vector<std::int64_t>{1000, 10, 2}));
    int vertices = 0;
    for (int i = 0; i < 1000; ++i)
        for (int p = 0; p < 10; ++p) {
            const bool expected = brute_force_vertex(data.inputs[i], p);
            ASSERT_EQ(data.targets[i][p].item<std::int64_t>() == 1, expected) << "set " << i << " point " << p;
            vertices += expected;
        }
    // Sanity of the distribution: the paper's majority class (non-vertex) is ~0.54.
    EXPECT_GT(vertices, 3000);
    EXPECT_LT(vertices, 6000);
}

TEST(TaskData, HullOfASquareWithCentreAndEdgeMidpoint) {
    // Corners are vertices; the centre and a point on an edge are not.
    const auto v = hull_vertices({0, 1, 1, 0, 0.5, 0.5}, {0, 0, 1, 1, 0.5, 0});
    EXPECT_EQ(v, (std::vector<bool>{true, true, true, true, false, false}));
}

TEST(TaskData, SortTargetsAreTheSortedInputs) {
    std::mt19937_64 rng(3);
    const TaskBatch data = make_sort_data(200, 8, 10, rng);
    for (int i = 0; i < 200; ++i) {
        std::vector<std::int64_t> in(8), out(8);
        for (int j = 0; j < 8; ++j) in[j] = data.inputs[i][j].item<std::int64_t>(), out[j] = data.targets[i][j].item<std::int64_t>();
        EXPECT_TRUE(std::is_sorted(out.begin(), out.end()));
        std::multiset<std::int64_t> a(in.begin(), in.end()), b(out.begin(), out.end());
        EXPECT_EQ(a, b);
        for (auto value : in) EXPECT_TRUE(value >= 0 && value < 10);
    }
}

TEST(TaskBaselines, PositionMajorityEqualsCountingByHand) {
    // Random labels with padding (−1) and a training batch longer than the evaluation batch: per position, count the
    // training labels in plain loops, take the most common (the smaller on a tie; the overall majority where no
    // training item reaches), and score it on the evaluation batch's real tokens.
    std::mt19937_64 rng(11);
    const int classes = 4;
    auto labels = [&](int items, int positions, int reach) {
        at::Tensor t = torch::full({items, positions}, -1, torch::kInt64);
        for (int i = 0; i < items; ++i)
            for (int p = 0; p < positions; ++p)
                if (p < reach && rng() % 5 != 0) t[i][p] = static_cast<std::int64_t>(rng() % (p % 2 ? 2 : classes));
        return t;
    };
    TaskBatch train, eval;
    train.targets = labels(60, 7, 5);  // positions 5 and 6: no training label at all
    eval.targets = labels(40, 7, 7);
    std::vector<std::int64_t> overall(classes, 0);
    std::vector<std::vector<std::int64_t>> counts(7, std::vector<std::int64_t>(classes, 0));
    for (int i = 0; i < 60; ++i)
        for (int p = 0; p < 7; ++p)
            if (const auto c = train.targets[i][p].item<std::int64_t>(); c >= 0) ++counts[p][c], ++overall[c];
    auto most = [](const std::vector<std::int64_t>& v) {
        return static_cast<std::int64_t>(std::max_element(v.begin(), v.end()) - v.begin());  // the first largest
    };
    double right = 0, real = 0;
    for (int i = 0; i < 40; ++i)
        for (int p = 0; p < 7; ++p) {
            const auto c = eval.targets[i][p].item<std::int64_t>();
            if (c < 0) continue;
            const bool seen = std::accumulate(counts[p].begin(), counts[p].end(), std::int64_t{0}) > 0;
            right += c == (seen ? most(counts[p]) : most(overall)), ++real;
        }
    EXPECT_DOUBLE_EQ(position_majority_accuracy(train, eval, classes), right / real);
    // One position, one class per position: the position alone predicts every label; the majority class does not.
    train.targets = torch::tensor({0, 1, 2, 3}, torch::kInt64).repeat({10, 1});
    eval.targets = torch::tensor({0, 1, 2, 3}, torch::kInt64).repeat({3, 1});
    EXPECT_DOUBLE_EQ(position_majority_accuracy(train, eval, classes), 1.0);
    EXPECT_DOUBLE_EQ(majority_accuracy(train, eval, classes), 0.25);
}

TEST(TaskData, CircleItemsWalkTwoArcsOneStepAtATime) {
    const TaskBatch data = make_circle_data(1000);
    ASSERT_EQ(data.inputs.size(0), 499);
    const at::Tensor radius = data.inputs.norm(2, -1);
    EXPECT_TRUE(torch::allclose(radius, torch::full_like(radius, 0.3), 1e-5, 1e-6));
    // The target of item i is the input of item i + 1, on both arcs; the second token starts half a circle later.
    EXPECT_TRUE(torch::allclose(data.targets.narrow(0, 0, 498), data.inputs.narrow(0, 1, 498), 1e-6, 1e-7));
    EXPECT_NEAR(data.inputs[0][1][0].item<double>(), -0.3, 1e-6);
}

TEST(TaskData, MemorizationLabelsOnlyRealTokens) {
    std::mt19937_64 rng(1);
    const TaskBatch data = make_memorization_data({{5, 6, 7}, {8, 9, 10, 11, 12}}, 4, rng);
    EXPECT_EQ(data.targets[0][3].item<std::int64_t>(), -1);
    EXPECT_NE(data.targets[1][3].item<std::int64_t>(), -1);  // truncated to 4 real tokens
    EXPECT_EQ(data.key_bias[0][0][0][3].item<float>(), -1e4f);
    EXPECT_EQ(data.key_bias[1][0][0][3].item<float>(), 0.0f);
}

TEST(TaskPaths, RandomPathUsesExactlyKHeads) {
    std::mt19937_64 rng(5);
    for (int k = 0; k <= 6; ++k)
        for (int draw = 0; draw < 20; ++draw) {
            const auto path = random_path(6, 3, k, rng);
            EXPECT_EQ(std::count_if(path.begin(), path.end(), [](int c) { return c < 3; }), k);
            for (int c : path) EXPECT_TRUE(c >= 0 && c <= 3);
        }
}

TEST(TaskPaths, HeadRestrictedLayerEqualsFullLayerWithOneHead) {
    torch::manual_seed(3);
    SanConfig c;
    c.layers = 1, c.heads = 1, c.d_model = 8, c.tokens = 5, c.biases = true;
    c.block.attention_skip = true;
    c.block.layer_norm = LayerNormKind::Post;
    San network(c);
    const at::Tensor x = torch::randn({4, 5, 8});
    torch::NoGradGuard no_grad;
    const at::Tensor full = network->block(0)->forward(x, nullptr, 0);
    const at::Tensor head = network->block(0)->forward_head(x, 0, /*sub_path=*/true);
    EXPECT_TRUE(torch::allclose(full, head, 1e-5, 1e-6));
    // Without sub-paths the skip is gone: LN(head(x)) differs from LN(x + head(x)).
    EXPECT_FALSE(torch::allclose(full, network->block(0)->forward_head(x, 0, false), 1e-3, 1e-3));
}

TEST(TaskPaths, HeadRestrictionUsesOnlyThatHeadsSlices) {
    // With H heads, the sum over heads of (head output − b_O) is the full attention output − b_O.
    torch::manual_seed(4);
    SanConfig c;
    c.layers = 1, c.heads = 3, c.d_model = 12, c.tokens = 6, c.biases = true;
    San network(c);
    const at::Tensor x = torch::randn({2, 6, 12});
    torch::NoGradGuard no_grad;
    auto attention = network->block(0)->attn;
    at::Tensor sum = torch::zeros({2, 6, 12});
    for (int h = 0; h < 3; ++h) sum += attention->forward_head(x, h) - attention->b_O;
    EXPECT_TRUE(torch::allclose(sum + attention->b_O, attention->forward(x, nullptr, 0), 1e-5, 1e-6));
}

TEST(TaskPaths, AllSkipEnsembleIsLayerNormOfScaledEmbedding) {
    auto [data, model] = tiny_sort_model(10, 6);
    const int n = 5;
    const std::vector<std::vector<int>> paths(n, std::vector<int>(2, 2));  // skip (= heads) in both layers
    torch::NoGradGuard no_grad;
    const at::Tensor logits = path_ensemble_logits(model, data.eval, paths, false);
    const at::Tensor embedded = model->embed(data.eval.inputs);
    const at::Tensor expected = model->unembed(plain_layer_norm(embedded * n));
    EXPECT_TRUE(torch::allclose(logits, expected, 1e-5, 1e-6));
}

// init = "uniform" (PyTorch's nn.Linear default): every weight and bias within ±1/√fan_in, filling that range, with the
// fan_in written out here per parameter (not by the rule the code uses): W_Q [H, d, k] has fan_in d, not H·d; the MLP's
// W_out and b_out have its width m = 48, not d = 32. LayerNorm stays at (1, 0); "normal" draws go past these bounds.
TEST(TaskModel, UniformInitDrawsEachWeightWithinItsFanIn) {
    TaskModelConfig c;
    c.input = "coordinates", c.vocab = 2, c.outputs = 2, c.embedding_layer_norm = true;
    c.encoder.layers = 2, c.encoder.heads = 2, c.encoder.d_model = 32, c.encoder.tokens = 2, c.encoder.biases = true;
    c.encoder.block.mlp = true, c.encoder.block.mlp_width = 48;
    c.init = "uniform";
    torch::manual_seed(5);
    TaskModel model(c);
    auto expected_fan_in = [](const std::string& name) -> double {
        auto ends = [&](const std::string& tail) { return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0; };
        if (ends("embed.W_in") || ends("embed.b_in")) return 2;
        if (ends("mlp.W_out") || ends("mlp.b_out")) return 48;
        return 32;  // attention W_Q/K/V/O and biases (H·v = 32 too), MLP W_in/b_in, unembed W_U/b_U
    };
    int checked = 0;
    for (const auto& item : model->named_parameters()) {
        const std::string& name = item.key();
        const at::Tensor& p = item.value();
        if (name.find("ln") != std::string::npos) {
            EXPECT_TRUE(torch::equal(p, name.back() == 'w' ? torch::ones_like(p) : torch::zeros_like(p))) << name;
            continue;
        }
        const double bound = 1 / std::sqrt(expected_fan_in(name));
        const double largest = p.abs().max().item<double>();
        EXPECT_LE(largest, bound) << name;
        if (p.numel() >= 32) {
            EXPECT_GT(largest, 0.85 * bound) << name;
        }
        if (p.numel() >= 500) {
            EXPECT_NEAR(p.pow(2).mean().item<double>() / (bound * bound / 3), 1.0, 0.15) << name;
        }
        ++checked;
    }
    EXPECT_EQ(checked, 2 + 2 * (8 + 4) + 2);  // embed W_in, b_in; per block attention 8 and MLP 4; unembed 2
    // Same seed, the default draw: the query weights reach past the uniform bound.
    c.init = "normal";
    torch::manual_seed(5);
    TaskModel normal(c);
    EXPECT_GT(normal->encoder->block(0)->attn->W_Q.abs().max().item<double>(), 1 / std::sqrt(32.0));
    c.init = "glorot";
    EXPECT_THROW(TaskModel{c}, Error);
}

TEST(TaskTraining, ShortRunLowersTheLossAndCheckpointRoundTrips) {
    const auto dir = temp_dir("train");
    TaskSettings s = tiny_sort();
    s.epochs = 25;  // 100 Adam steps
    const TaskSplits data = make_task_data(s, dir);
    TrainedTask trained = train_or_load(s, data, dir);
    ASSERT_EQ(static_cast<int>(trained.history.size()), s.epochs);
    EXPECT_LT(trained.history.back().loss, 0.9 * trained.history.front().loss);
    EXPECT_TRUE(std::filesystem::exists(trained.checkpoint));
    // Same settings: reused, same predictions.
    TrainedTask again = train_or_load(s, data, dir);
    EXPECT_TRUE(again.reused);
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(torch::equal(trained.model->forward(data.eval), again.model->forward(data.eval)));
    // A checkpoint never loads under other settings.
    TaskSettings other = s;
    other.epochs += 1;
    TaskModel model(model_config_for(other, data));
    EXPECT_THROW(load_task_checkpoint(trained.checkpoint, model, other), Error);
    std::filesystem::remove_all(dir);
}

// Adam over one flat tensor (the default) against Adam over the separate parameters (RANKSCOPE_FLAT_ADAM=0): the same
// numbers bit for bit after 40 steps with weight decay, a cosine schedule and the whole history of losses.
TEST(TaskTraining, FlatAdamEqualsAdamOverTheSeparateTensors) {
    const auto dir = temp_dir("flat-adam");
    TaskSettings s = tiny_sort();
    s.epochs = 10;
    s.weight_decay = 0.01;
    s.lr_schedule = "cosine";
    const TaskSplits data = make_task_data(s, dir);
    ::setenv("RANKSCOPE_FLAT_ADAM", "0", 1);
    TrainedTask separate = train_or_load(s, data, dir, true);
    ::unsetenv("RANKSCOPE_FLAT_ADAM");
    TrainedTask flat = train_or_load(s, data, dir, true);
    ASSERT_EQ(separate.history.size(), flat.history.size());
    for (std::size_t e = 0; e < flat.history.size(); ++e) EXPECT_EQ(separate.history[e].loss, flat.history[e].loss) << e;
    const auto a = separate.model->named_parameters(), b = flat.model->named_parameters();
    ASSERT_EQ(a.size(), b.size());
    for (const auto& item : a) EXPECT_TRUE(torch::equal(item.value(), b[item.key()])) << item.key();
    // Training happened (the comparison is not between two untouched models).
    EXPECT_LT(flat.history.back().loss, 0.95 * flat.history.front().loss);
    std::filesystem::remove_all(dir);
}

TEST(TaskTraining, DivergingLossStopsWithTheStepNamedAndNoCheckpoint) {
    const auto dir = temp_dir("diverge");
    TaskSettings s = tiny_sort();
    s.learning_rate = 1e30;  // outside the CLI's range on purpose: Adam's first steps overflow float32
    s.layer_norm = false;
    const TaskSplits data = make_task_data(s, dir);
    try {
        train_or_load(s, data, dir);
        FAIL() << "training on a NaN loss did not stop";
    } catch (const Error& error) {
        EXPECT_NE(std::string(error.what()).find("training loss is"), std::string::npos) << error.what();
        EXPECT_NE(std::string(error.what()).find("step"), std::string::npos) << error.what();
    }
    for (const auto& entry : std::filesystem::directory_iterator(dir))
        EXPECT_NE(entry.path().extension(), ".safetensors") << "a diverged model was saved: " << entry.path();
    // Asked for: it trains through (the history then holds the non-finite losses).
    TrainedTask trained = train_or_load(s, data, dir, true, /*allow_nonfinite=*/true);
    EXPECT_FALSE(std::isfinite(trained.history.back().loss));
    std::filesystem::remove_all(dir);
}

TEST(TaskTraining, CheckpointKeyChangesWithEverySetting) {
    const TaskSettings base = tiny_sort();
    std::vector<std::function<void(TaskSettings&)>> changes = {
        [](TaskSettings& s) { s.seed += 1; },          [](TaskSettings& s) { s.layers += 1; },
        [](TaskSettings& s) { s.heads += 1; },         [](TaskSettings& s) { s.d_model += 2; },
        [](TaskSettings& s) { s.skip = !s.skip; },     [](TaskSettings& s) { s.mlp = !s.mlp; },
        [](TaskSettings& s) { s.layer_norm = !s.layer_norm; }, [](TaskSettings& s) { s.epochs += 1; },
        [](TaskSettings& s) { s.batch_size += 1; },    [](TaskSettings& s) { s.learning_rate *= 2; },
        [](TaskSettings& s) { s.weight_decay = 1e-3; }, [](TaskSettings& s) { s.train_count += 1; },
        [](TaskSettings& s) { s.eval_count += 1; },    [](TaskSettings& s) { s.sequence_length += 1; },
        [](TaskSettings& s) { s.vocab += 1; },         [](TaskSettings& s) { s.task = "hull"; },
    };
    std::set<std::string> keys = {base.checkpoint_key()};
    for (const auto& change : changes) {
        TaskSettings s = base;
        change(s);
        EXPECT_TRUE(keys.insert(s.checkpoint_key()).second) << s.to_json().dump();
    }
    // Every field of the settings is in the key (a new field must be added to the list above too).
    EXPECT_EQ(base.to_json().size(), changes.size() + 1);  // + "format"
}

TEST(TaskTraining, RecipeIsInTheKeyOnlyWhereItMatters) {
    // Sort, hull, memorize: the recipe fields appear (and change the key) only when changed, so existing keys hold.
    const TaskSettings sort = tiny_sort();
    EXPECT_FALSE(sort.to_json().contains("shuffle"));
    std::vector<std::function<void(TaskSettings&)>> changes = {
        [](TaskSettings& s) { s.shuffle = !s.shuffle; },
        [](TaskSettings& s) { s.lr_schedule = s.lr_schedule == "cosine" ? "constant" : "cosine"; },
        [](TaskSettings& s) { s.target_mse = 0.5; },
        [](TaskSettings& s) { s.init = "uniform"; },
    };
    for (const TaskSettings& base : {sort, default_task_settings("circle")}) {
        std::set<std::string> keys = {base.checkpoint_key()};
        for (const auto& change : changes) {
            TaskSettings s = base;
            change(s);
            EXPECT_TRUE(keys.insert(s.checkpoint_key()).second) << s.to_json().dump();
        }
    }
    // The circle: always in its key, with the input LayerNorm switch.
    TaskSettings circle = default_task_settings("circle");
    for (const char* field : {"shuffle", "lr_schedule", "target_mse", "embedding_layer_norm", "input_noise"})
        EXPECT_TRUE(circle.to_json().contains(field)) << field;
    const std::string key = circle.checkpoint_key();
    circle.embedding_layer_norm = !circle.embedding_layer_norm;
    EXPECT_NE(circle.checkpoint_key(), key);
}

TEST(TaskTraining, ResidualByLayerCoversEmbeddingAndEveryBlock) {
    auto [data, model] = tiny_sort_model(6, 8);
    const auto rows = residual_by_layer(model, data.eval);
    ASSERT_EQ(rows.size(), 3u);
    for (const auto& r : rows) {
        EXPECT_EQ(r.n, 6);
        EXPECT_GT(r.mean, 0.0);
        EXPECT_LT(r.mean, 2.0);
    }
}
