// Several seeds trained as one stacked model (src/tasks/stacked_task_model.cpp, train_or_load_seeds) against each
// model on its own: TaskModel::forward is the reference for the stacked forward, the plain mean cross-entropy through
// it for the gradients, and training a seed alone for training seeds together.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <random>
#include <set>

#include "rankscope/error.hpp"
#include "rankscope/tasks.hpp"
#include "test_support.hpp"
#include "tasks/stacked_task_model.hpp"

using namespace rankscope;
using namespace rankscope::test_support;

namespace {

// A configuration as model_config_for makes it, from a task's settings changed by `change`.
struct StackedCase {
    std::string name;
    TaskSettings settings;
    int classes, input_vocab;
};

std::vector<StackedCase> cases() {
    std::vector<StackedCase> all;
    TaskSettings sort = default_task_settings("sort");
    sort.layers = 2, sort.d_model = 16;
    all.push_back({"sort: tokens, positions, post-LN, skip", sort, 10, 10});
    TaskSettings sort_mlp = sort;
    sort_mlp.mlp = true;
    all.push_back({"sort with MLP", sort_mlp, 10, 10});
    TaskSettings hull = default_task_settings("hull");
    hull.layers = 2, hull.d_model = 12;
    all.push_back({"hull: two-layer coordinate embedding, 3 heads", hull, 2, 2});
    TaskSettings circle = default_task_settings("circle");
    all.push_back({"circle SAN: no skip, no LayerNorm", circle, 0, 2});
    TaskSettings circle_mlp = circle;
    circle_mlp.mlp = true;
    all.push_back({"circle SAN+MLP", circle_mlp, 0, 2});
    TaskSettings memorize = sort;  // tokens with padding: the key bias path
    memorize.task = "memorize", memorize.heads = 2, memorize.sequence_length = 9, memorize.vocab = 30;
    all.push_back({"memorize: padded keys", memorize, 2, 30});
    TaskSettings long_memorize = memorize;  // n = 60: one product per sequence (no block-diagonal grouping)
    long_memorize.sequence_length = 60;
    all.push_back({"memorize: long padded sequences", long_memorize, 2, 30});
    return all;
}

TaskModelConfig config_of(const StackedCase& c) {
    TaskSplits shape;
    shape.classes = c.classes, shape.input_vocab = c.input_vocab;
    return model_config_for(c.settings, shape);
}

// Model s's batch: B sequences of n tokens (ids or 2-D points), and for `padded` a key bias with a different number
// of real tokens per sequence, targets −1 on the padding.
TaskBatch random_batch(const TaskModelConfig& config, int classes, int B, int n, bool padded, std::uint64_t seed) {
    torch::manual_seed(seed);
    TaskBatch batch;
    if (config.input == "tokens") batch.inputs = torch::randint(config.vocab, {B, n}, torch::kLong);
    else batch.inputs = torch::randn({B, n, config.vocab});
    batch.targets = classes > 0 ? torch::randint(classes, {B, n}, torch::kLong) : torch::randn({B, n, 2});
    if (padded) {
        batch.key_bias = torch::zeros({B, 1, 1, n});
        for (int b = 0; b < B; ++b) {
            const int real = 2 + (b * 3 + static_cast<int>(seed)) % (n - 1);  // 2 .. n
            batch.key_bias[b].narrow(-1, real, n - real).fill_(-1e4);
            batch.targets[b].narrow(0, real, n - real).fill_(-1);
        }
    }
    return batch;
}

std::vector<TaskModel> seeded_models(const TaskModelConfig& config, const std::vector<std::uint64_t>& seeds) {
    std::vector<TaskModel> models;
    for (auto seed : seeds) {
        torch::manual_seed(seed);
        models.push_back(TaskModel(config));
    }
    return models;
}

}  // namespace

TEST(StackedTaskModel, ForwardOfEachModelEqualsItsTaskModelForward) {
    for (const StackedCase& c : cases()) {
        SCOPED_TRACE(c.name);
        const TaskModelConfig config = config_of(c);
        auto models = seeded_models(config, {5, 6, 7});
        const StackedTaskModel stack = StackedTaskModel::stack(models);
        ASSERT_EQ(stack.models(), 3);
        // Batches of 10: short sequences share products, several groups per model and head (sort: G = 5; n = 9 and
        // n = 10: G = 2), so the groups' order is checked too.
        const bool padded = c.settings.task == "memorize";
        const int n = c.settings.sequence_length;
        std::vector<TaskBatch> batches;
        std::vector<at::Tensor> inputs, bias;
        for (int s = 0; s < 3; ++s) {
            batches.push_back(random_batch(config, c.classes, 10, n, padded, 100 + s));
            inputs.push_back(batches.back().inputs);
            if (padded) bias.push_back(batches.back().key_bias);
        }
        torch::NoGradGuard no_grad;
        const at::Tensor stacked = stack.forward(torch::stack(inputs), padded ? torch::stack(bias) : at::Tensor());
        for (int s = 0; s < 3; ++s) {
            const at::Tensor alone = models[static_cast<std::size_t>(s)]->forward(batches[static_cast<std::size_t>(s)]);
            ASSERT_EQ(stacked[s].sizes(), alone.sizes());
            EXPECT_TRUE(torch::allclose(stacked[s], alone, 1e-5, 1e-5))
                << "model " << s << ": largest difference " << (stacked[s] - alone).abs().max().item<double>();
            // Not trivially equal: the models differ.
            if (s > 0) {
                EXPECT_FALSE(torch::allclose(stacked[s], stacked[0], 1e-3, 1e-3));
            }
        }
    }
}

TEST(StackedTaskModel, CopyIntoGivesModelSBackByName) {
    const TaskModelConfig config = config_of(cases().front());
    auto models = seeded_models(config, {1, 2});
    const StackedTaskModel stack = StackedTaskModel::stack(models);
    torch::manual_seed(99);
    TaskModel copy(config);
    stack.copy_into(1, copy);
    auto original = models[1]->named_parameters(), copied = copy->named_parameters();
    for (const auto& item : original) EXPECT_TRUE(torch::equal(item.value(), copied[item.key()])) << item.key();
    // Another configuration is refused.
    StackedCase other = cases().front();
    other.settings.d_model = 8;
    auto mixed = models;
    mixed.push_back(seeded_models(config_of(other), {3}).front());
    EXPECT_THROW(StackedTaskModel::stack(mixed), Error);
}

// The loss trained on (each model's mean cross-entropy over its real tokens, summed over models) gives every model
// exactly the gradient of its own mean cross-entropy through TaskModel::forward.
TEST(StackedTaskModel, EachModelGetsTheGradientOfItsOwnLoss) {
    StackedCase c = cases().back();  // padded: targets −1 excluded from each model's mean
    const TaskModelConfig config = config_of(c);
    auto models = seeded_models(config, {11, 12, 13});
    StackedTaskModel stack = StackedTaskModel::stack(models);
    std::vector<TaskBatch> batches;
    std::vector<at::Tensor> inputs, bias, targets;
    for (int s = 0; s < 3; ++s) {
        batches.push_back(random_batch(config, 2, 8, 9, true, 20 + s));  // G = 4: two groups per model and head
        inputs.push_back(batches.back().inputs), bias.push_back(batches.back().key_bias), targets.push_back(batches.back().targets);
    }
    const at::Tensor output = stack.forward(torch::stack(inputs), torch::stack(bias));
    const at::Tensor target = torch::stack(targets);
    const at::Tensor per_token = torch::nn::functional::cross_entropy(
        output.reshape({-1, 2}), target.reshape(-1), torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-1).reduction(torch::kNone));
    (per_token.view({3, -1}).sum(1) / target.ne(-1).view({3, -1}).sum(1)).sum().backward();
    for (int s = 0; s < 3; ++s) {
        TaskModel& model = models[static_cast<std::size_t>(s)];
        model->zero_grad();
        const at::Tensor logits = model->forward(batches[static_cast<std::size_t>(s)]);
        torch::nn::functional::cross_entropy(logits.reshape({-1, 2}), batches[static_cast<std::size_t>(s)].targets.reshape(-1),
                                             torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-1))
            .backward();
        auto own = model->named_parameters();
        for (std::size_t i = 0; i < stack.names.size(); ++i) {
            const at::Tensor stacked_gradient = stack.parameters[i].grad()[s];
            const at::Tensor gradient = own[stack.names[i]].grad();
            EXPECT_TRUE(torch::allclose(stacked_gradient, gradient, 1e-4, 1e-6))
                << "model " << s << " " << stack.names[i] << ": " << (stacked_gradient - gradient).abs().max().item<double>();
        }
    }
}

namespace {

void expect_same_training(const TrainedTask& together, const TrainedTask& alone, double tolerance) {
    ASSERT_EQ(together.history.size(), alone.history.size());
    for (std::size_t e = 0; e < alone.history.size(); ++e) {
        EXPECT_NEAR(together.history[e].loss, alone.history[e].loss, tolerance * std::abs(alone.history[e].loss)) << "epoch " << e + 1;
        EXPECT_NEAR(together.history[e].train_metric, alone.history[e].train_metric,
                    tolerance * std::abs(alone.history[e].train_metric) + 1e-12) << "epoch " << e + 1;
    }
    auto a = together.model->named_parameters(), b = alone.model->named_parameters();
    for (const auto& item : b)
        EXPECT_TRUE(torch::allclose(a[item.key()], item.value(), tolerance, tolerance))
            << item.key() << ": " << (a[item.key()] - item.value()).abs().max().item<double>();
}

}  // namespace

// Three seeds of sort with a reshuffled order, cosine schedule and weight decay: trained together, each ends where
// it ends trained alone (same losses per epoch, same parameters) and its checkpoint is the one train_or_load reuses.
TEST(StackedTraining, SeedsTrainedTogetherEqualSeedsTrainedAlone) {
    const auto dir = temp_dir("stacked_sort");
    TaskSettings base = default_task_settings("sort");
    base.layers = 2, base.d_model = 16, base.epochs = 6, base.train_count = 90, base.eval_count = 10;
    base.shuffle = true, base.lr_schedule = "cosine", base.weight_decay = 0.01;
    std::vector<TaskSettings> settings;
    std::vector<TaskSplits> data;
    for (std::uint64_t seed : {2, 3, 4}) {
        settings.push_back(base);
        settings.back().seed = seed;
        data.push_back(make_task_data(settings.back(), dir));
    }
    std::vector<TrainedTask> together = train_or_load_seeds(settings, data, dir / "together");
    ASSERT_EQ(together.size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) {
        SCOPED_TRACE("seed " + std::to_string(settings[i].seed));
        const TrainedTask alone = train_or_load(settings[i], data[i], dir / "alone");
        expect_same_training(together[i], alone, 2e-4);
        EXPECT_LT(alone.history.back().loss, 0.95 * alone.history.front().loss);  // it trained
        // The checkpoint written together is the one a single run would reuse.
        const TrainedTask reused = train_or_load(settings[i], data[i], dir / "together");
        EXPECT_TRUE(reused.reused);
        for (const auto& item : reused.model->named_parameters())
            EXPECT_TRUE(torch::equal(item.value(), together[i].model->named_parameters()[item.key()])) << item.key();
    }
    // The seeds differ from each other (no model is a copy of another).
    EXPECT_NE(together[0].history.back().loss, together[1].history.back().loss);
    // Reuse: seeds 2 and 3 come from their checkpoints, seed 5 alone is trained.
    settings.push_back(base);
    settings.back().seed = 5;
    data.push_back(make_task_data(settings.back(), dir));
    std::vector<TrainedTask> more = train_or_load_seeds(settings, data, dir / "together");
    EXPECT_TRUE(more[0].reused && more[1].reused && more[2].reused);
    EXPECT_FALSE(more[3].reused);
    expect_same_training(more[3], train_or_load(settings[3], data[3], dir / "alone"), 2e-4);
    // Other settings than the seed cannot be trained together.
    settings[1].epochs += 1;
    EXPECT_THROW(train_or_load_seeds(settings, data, dir / "mixed"), Error);
    // A seed given twice would be one model counted twice (in E3's rates, E4's means): refused by name.
    settings[1] = settings[0];
    data[1] = data[0];
    try {
        train_or_load_seeds(settings, data, dir / "twice");
        ADD_FAILURE() << "a repeated seed was trained";
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "seed 2 is given twice: each seed is one model");
    }
    std::filesystem::remove_all(dir);
}

// The circle: input noise from each model's own generator and a stopping target that seeds reach at different
// epochs; each seed stops where it stops alone, with the parameters of that epoch.
TEST(StackedTraining, CircleSeedsStopAtTheirOwnEpochWithTheirOwnNoise) {
    const auto dir = temp_dir("stacked_circle");
    TaskSettings base = default_task_settings("circle");
    base.epochs = 12, base.train_count = 100;
    std::vector<TaskSettings> settings;
    std::vector<TaskSplits> data;
    for (std::uint64_t seed : {2, 3, 4}) {
        settings.push_back(base);
        settings.back().seed = seed;
        // First a target never reached, so the epochs' metric is the stopping rule's (the whole training set's MSE):
        // it chooses a target the seeds reach at different epochs.
        settings.back().target_mse = 1e-30;
        data.push_back(make_task_data(settings.back(), dir));
    }
    const TrainedTask probe = train_or_load(settings[0], data[0], dir / "probe");
    ASSERT_EQ(probe.history.size(), static_cast<std::size_t>(base.epochs));
    const double target = probe.history[3].train_metric * 1.0001;  // seed 2 stops at epoch 4 at the latest
    for (auto& s : settings) s.target_mse = target;
    std::vector<TrainedTask> together = train_or_load_seeds(settings, data, dir / "together");
    std::set<std::size_t> epochs;
    for (std::size_t i = 0; i < 3; ++i) {
        SCOPED_TRACE("seed " + std::to_string(settings[i].seed));
        const TrainedTask alone = train_or_load(settings[i], data[i], dir / "alone");
        expect_same_training(together[i], alone, 2e-4);
        epochs.insert(alone.history.size());
    }
    EXPECT_LE(together[0].history.size(), 4u);
    EXPECT_GT(epochs.size(), 1u) << "every seed stopped at the same epoch: the test does not exercise the copy at the stopping epoch";
    std::filesystem::remove_all(dir);
}

// Against a plain single-model loop written here (TaskModel::forward, mean cross-entropy, libtorch's Adam over the
// model's parameters, batches in order without trimming): padded sequences whose batches the trainer trims (every
// sequence is shorter than n), a partial last batch (70 items in batches of 30), weight decay; two seeds together.
TEST(StackedTraining, EqualsAPlainTrainingLoopOnPaddedBatches) {
    const auto dir = temp_dir("stacked_plain");
    TaskSettings base = default_task_settings("sort");
    base.task = "memorize", base.text = "";  // token input with padding, trained on the data given below
    base.layers = 2, base.d_model = 16, base.epochs = 3, base.train_count = 70, base.eval_count = 10;
    base.sequence_length = 12, base.vocab = 20, base.weight_decay = 0.01;
    std::vector<TaskSettings> settings;
    std::vector<TaskSplits> data;
    for (std::uint64_t seed : {7, 8}) {
        settings.push_back(base);
        settings.back().seed = seed;
        TaskSplits split;
        split.classes = 2, split.input_vocab = 20;
        std::mt19937_64 rng(seed);
        std::vector<std::vector<int>> ids;
        for (int i = 0; i < base.train_count; ++i) {
            std::vector<int> sequence(3 + rng() % 7);  // 3 .. 9 real tokens of 12
            for (auto& id : sequence) id = 1 + static_cast<int>(rng() % 19);
            ids.push_back(sequence);
        }
        split.train = make_memorization_data(ids, base.sequence_length, rng);
        split.eval = split.train.slice(0, 10);
        data.push_back(split);
    }
    std::vector<TrainedTask> together = train_or_load_seeds(settings, data, dir);
    for (std::size_t i = 0; i < 2; ++i) {
        SCOPED_TRACE("seed " + std::to_string(settings[i].seed));
        torch::manual_seed(settings[i].seed);
        TaskModel model(model_config_for(settings[i], data[i]));
        torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(base.learning_rate).weight_decay(base.weight_decay));
        for (int epoch = 1; epoch <= base.epochs; ++epoch) {
            double loss_sum = 0;
            for (std::int64_t begin = 0; begin < base.train_count; begin += base.batch_size) {
                const TaskBatch part = data[i].train.slice(begin, std::min<std::int64_t>(base.train_count, begin + base.batch_size));
                const at::Tensor loss = torch::nn::functional::cross_entropy(
                    model->forward(part).reshape({-1, 2}), part.targets.reshape(-1),
                    torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-1));
                adam.zero_grad();
                loss.backward();
                adam.step();
                loss_sum += loss.item<double>() * static_cast<double>(part.size());
            }
            EXPECT_NEAR(together[i].history[static_cast<std::size_t>(epoch - 1)].loss, loss_sum / base.train_count, 1e-4)
                << "epoch " << epoch;
        }
        auto trained = together[i].model->named_parameters();
        for (const auto& item : model->named_parameters())
            EXPECT_TRUE(torch::allclose(trained[item.key()], item.value(), 1e-4, 1e-4))
                << item.key() << ": " << (trained[item.key()] - item.value()).abs().max().item<double>();
    }
    std::filesystem::remove_all(dir);
}
