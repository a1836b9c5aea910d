// E3, the circle (SPEC.md §4 E3, paper §4.2): train the four variants over several seeds, roll each out, measure, judge.
//
// Dimension legend: I items (training pairs), 2 tokens, 2 coordinates; S rollout steps.
#include "rankscope/e3_circle.hpp"

#include <fmt/ranges.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <unistd.h>

#include "rankscope/error.hpp"
#include "rankscope/summary.hpp"
#include "rankscope/tasks.hpp"

namespace rankscope {

const std::vector<std::string>& circle_variants() {
    static const std::vector<std::string> names = {"SAN", "SAN+skip", "SAN+MLP", "SAN+skip+MLP"};
    return names;
}

TaskSettings circle_variant_settings(TaskSettings settings, const std::string& variant) {
    const auto& names = circle_variants();
    if (std::find(names.begin(), names.end(), variant) == names.end())
        throw Error("unknown circle variant '" + variant + "' (expected SAN, SAN+skip, SAN+MLP or SAN+skip+MLP)");
    settings.skip = variant.find("skip") != std::string::npos;
    settings.mlp = variant.find("MLP") != std::string::npos;
    settings.layer_norm = false;  // no LayerNorm in the layer, for every variant (the official code kept one)
    return settings;
}

Point2 circle_arc_point(int points, int step, int token) {
    const long t = (static_cast<long>(step) + static_cast<long>(token) * (points / 2)) % points;
    const double angle = 2.0 * M_PI * static_cast<double>(t) / points;
    return {kCircleRadius * std::cos(angle), kCircleRadius * std::sin(angle)};
}

double circle_step_length(int points) { return 2.0 * kCircleRadius * std::sin(M_PI / points); }

RolloutMeasures measure_rollout(const std::vector<std::vector<Point2>>& trajectory, int points, double merge_tolerance) {
    RolloutMeasures m;
    auto bounded = [](const Point2& p) { return std::fabs(p.x) <= kRunawayCoordinate && std::fabs(p.y) <= kRunawayCoordinate; };
    for (const auto& state : trajectory) {
        if (state.size() != 2) throw Error("a circle state has 2 tokens, got " + std::to_string(state.size()));
        if (!bounded(state[0]) || !bounded(state[1])) break;  // NaN fails the comparison too
        ++m.bounded_steps;
    }
    auto relative_distance = [&](int step) {
        const Point2 &a = trajectory[static_cast<std::size_t>(step)][0], &b = trajectory[static_cast<std::size_t>(step)][1];
        const double mean_norm = 0.5 * (std::hypot(a.x, a.y) + std::hypot(b.x, b.y));
        return std::hypot(a.x - b.x, a.y - b.y) / std::max(1e-30, mean_norm);
    };
    if (m.bounded_steps == 0) {
        m.mean_distance_to_arcs = m.mean_radial_deviation = m.final_relative_distance = NAN;
        return m;
    }
    double distance = 0, radial = 0;
    for (int step = 0; step < m.bounded_steps; ++step) {
        for (int token = 0; token < 2; ++token) {
            const Point2& p = trajectory[static_cast<std::size_t>(step)][static_cast<std::size_t>(token)];
            const Point2 target = circle_arc_point(points, step, token);
            distance += std::hypot(p.x - target.x, p.y - target.y);
            radial += std::fabs(std::hypot(p.x, p.y) - kCircleRadius);
        }
        if (m.merge_step < 0 && relative_distance(step) < merge_tolerance) m.merge_step = step;
    }
    m.mean_distance_to_arcs = distance / (2.0 * m.bounded_steps);
    m.mean_radial_deviation = radial / (2.0 * m.bounded_steps);
    m.final_relative_distance = relative_distance(m.bounded_steps - 1);
    return m;
}

namespace {

// Held-out items, between the training items: points at angles 2π(t + ½)/N on both arcs, targets one step later.
TaskBatch heldout_circle_data(int points) {
    const int items = points / 2 - 1;
    at::Tensor inputs = torch::empty({items, 2, 2}, torch::kFloat), targets = torch::empty({items, 2, 2}, torch::kFloat);
    auto in = inputs.accessor<float, 3>();
    auto out = targets.accessor<float, 3>();
    for (int i = 0; i < items; ++i)
        for (int token = 0; token < 2; ++token) {
            const double t = i + token * (items + 1) + 0.5;
            const double a = 2.0 * M_PI * t / points, b = 2.0 * M_PI * (t + 1) / points;
            in[i][token][0] = static_cast<float>(kCircleRadius * std::cos(a));
            in[i][token][1] = static_cast<float>(kCircleRadius * std::sin(a));
            out[i][token][0] = static_cast<float>(kCircleRadius * std::cos(b));
            out[i][token][1] = static_cast<float>(kCircleRadius * std::sin(b));
        }
    return {inputs, targets, {}};
}

double one_step_rmse(TaskModel& model, const TaskBatch& batch) {
    torch::NoGradGuard no_grad;
    model->eval();
    const TaskBatch on_device = batch.to(model->device());
    return std::sqrt((model->forward(on_device) - on_device.targets).pow(2).mean().item<double>());
}

// A folder for checkpoints when the caller keeps none; removed when the experiment ends.
struct TemporaryFolder {
    std::filesystem::path path;
    explicit TemporaryFolder(bool needed) {
        if (!needed) return;
        path = std::filesystem::temp_directory_path() / fmt::format("rankscope-e3-{}-{}", ::getpid(),
                                                                    std::chrono::steady_clock::now().time_since_epoch().count());
        std::filesystem::create_directories(path);
    }
    ~TemporaryFolder() {
        std::error_code ignored;
        if (!path.empty()) std::filesystem::remove_all(path, ignored);
    }
};

}  // namespace

CircleResult run_circle_experiment(const CircleSettings& settings) {
    if (settings.variants.empty() || settings.seeds.empty()) throw Error("the circle needs at least one variant and one seed");
    if (settings.steps < 1) throw Error("the circle rollout needs at least 1 step");
    CircleResult result;
    result.points = settings.training.train_count;
    result.step_length = circle_step_length(result.points);
    TemporaryFolder temporary(settings.checkpoints.empty());
    const std::filesystem::path checkpoints = settings.checkpoints.empty() ? temporary.path : settings.checkpoints;
    const TaskBatch heldout = heldout_circle_data(result.points);
    for (const auto& variant : settings.variants) {
        // The seeds of a variant train together as one stacked model (each exactly as it would alone).
        std::vector<TaskSettings> seed_settings;
        std::vector<TaskSplits> seed_data;
        for (const std::uint64_t seed : settings.seeds) {
            seed_settings.push_back(circle_variant_settings(settings.training, variant));
            seed_settings.back().seed = seed;
            seed_data.push_back(make_task_data(seed_settings.back(), checkpoints));
        }
        std::vector<TrainedTask> seed_models = train_or_load_seeds(
            seed_settings, seed_data, checkpoints, settings.retrain || settings.checkpoints.empty(), settings.allow_nonfinite);
        for (std::size_t i = 0; i < settings.seeds.size(); ++i) {
            CircleRun run;
            run.variant = variant;
            run.seed = settings.seeds[i];
            run.settings = seed_settings[i];
            const TaskSplits& data = seed_data[i];
            TrainedTask& trained = seed_models[i];
            run.model = trained.model->config.to_json().dump();
            run.parameters = parameter_count(trained.model);
            run.checkpoint = settings.checkpoints.empty() ? std::string() : trained.checkpoint;
            run.reused = trained.reused;
            run.epochs = trained.history_known ? static_cast<int>(trained.history.size()) : -1;
            run.train_seconds = trained.history_known ? trained.train_seconds : NAN;
            run.history = trained.history;
            run.train_rmse = one_step_rmse(trained.model, data.train);
            run.heldout_rmse = one_step_rmse(trained.model, heldout);
            // The rollout feeds the model its own output (both tokens' predicted points) as the next input.
            const at::Tensor path = circle_rollout(trained.model, data.train.inputs.narrow(0, 0, 1), settings.steps)
                                        .to(torch::kDouble)
                                        .contiguous();  // [S, 2, 2]
            auto p = path.accessor<double, 3>();
            run.trajectory.assign(static_cast<std::size_t>(settings.steps), std::vector<Point2>(2));
            for (int step = 0; step < settings.steps; ++step)
                for (int token = 0; token < 2; ++token)
                    run.trajectory[static_cast<std::size_t>(step)][static_cast<std::size_t>(token)] = {p[step][token][0],
                                                                                                     p[step][token][1]};
            run.rollout = measure_rollout(run.trajectory, result.points, settings.merge_tolerance);
            result.runs.push_back(std::move(run));
        }
    }
    return result;
}

// ---- findings ----------------------------------------------------------------------------------------------------
namespace {
// Finite for the whole rollout and never merged.
bool kept_apart(const CircleRun& r) {
    return r.rollout.bounded_steps >= static_cast<int>(r.trajectory.size()) && r.rollout.merge_step < 0;
}
}  // namespace

bool follows_circle_arcs(const CircleRun& r, double limit) { return kept_apart(r) && r.rollout.mean_distance_to_arcs < limit; }

bool stays_on_circle(const CircleRun& r, double limit) { return kept_apart(r) && r.rollout.mean_radial_deviation < limit; }

namespace {

constexpr std::size_t kSeedsToJudge = 3;  // the default --seeds count of `task circle`

std::vector<const CircleRun*> runs_of(const CircleResult& result, const std::string& variant) {
    std::vector<const CircleRun*> runs;
    for (const auto& r : result.runs)
        if (r.variant == variant) runs.push_back(&r);
    return runs;
}

template <class F>
std::string list(const std::vector<const CircleRun*>& runs, F f) {
    std::vector<std::string> parts;
    for (const auto* r : runs) parts.push_back(f(*r));
    return fmt::format("{}", fmt::join(parts, ", "));
}

bool trained_ok(const CircleRun& r, double rmse_limit) { return std::isfinite(r.train_rmse) && r.train_rmse < rmse_limit; }

// "14", "none", "14 (then ran away after 282 steps)": a merged pair can still run off together.
std::string merge_text(const CircleRun& r) {
    if (r.rollout.merge_step < 0) return "none";
    if (!circle_run_diverged(r)) return std::to_string(r.rollout.merge_step);
    return fmt::format("{} (then ran away after {} steps)", r.rollout.merge_step, r.rollout.bounded_steps);
}
bool follows_arcs(const CircleRun& r, double limit) { return follows_circle_arcs(r, limit); }

// "merged at step 14", "ran away after 37 steps", "drifted (mean distance 0.21)", "on the arcs (0.004)"
std::string outcome(const CircleRun& r, double limit) {
    if (r.rollout.merge_step >= 0) return "merged at step " + merge_text(r);
    if (circle_run_diverged(r)) return fmt::format("ran away after {} steps", r.rollout.bounded_steps);
    if (r.rollout.mean_distance_to_arcs >= limit)
        return fmt::format("off the arcs (mean distance {})", quote_number(r.rollout.mean_distance_to_arcs));
    return fmt::format("on the arcs (mean distance {})", quote_number(r.rollout.mean_distance_to_arcs));
}

}  // namespace

bool circle_run_diverged(const CircleRun& run) {
    return run.rollout.bounded_steps < static_cast<int>(run.trajectory.size());
}

std::vector<std::string> circle_escape_notes(const CircleResult& result, const std::string& variant) {
    const auto runs = runs_of(result, variant);
    int ran_away = 0, ran_away_merged = 0, left = 0;
    double farthest = 0;  // of the finite rollouts that left the axes
    for (const auto* r : runs) {
        if (circle_run_diverged(*r)) {
            ++ran_away, ran_away_merged += r->rollout.merge_step >= 0;
            continue;
        }
        double reach = 0;
        for (const auto& step : r->trajectory)
            for (const Point2& p : step) reach = std::max({reach, std::abs(p.x), std::abs(p.y)});
        if (reach > kCirclePlotLimit) ++left, farthest = std::max(farthest, reach);
    }
    std::vector<std::string> notes;
    const bool one = runs.size() == 1;
    if (ran_away > 0) {
        const std::string merging = ran_away_merged == 0          ? ""
                                    : ran_away_merged == ran_away ? " after merging"
                                                                  : fmt::format(" ({} after merging)", ran_away_merged);
        // One seed: its title says whether it merged ("merged at step 14"), and "then" says the order.
        notes.push_back(one ? fmt::format("{}ran away after {} steps", ran_away_merged ? "then " : "",
                                          runs.front()->rollout.bounded_steps)
                            : fmt::format("{}/{} ran away{}", ran_away, runs.size(), merging));
    }
    if (left > 0)
        notes.push_back(one ? fmt::format("left the plot (up to {})", quote_number(farthest))
                            : fmt::format("{}/{} left the plot (up to {})", left, runs.size(), quote_number(farthest)));
    return notes;
}

CirclePanelText circle_panel_text(const CircleResult& result, const std::vector<std::string>& variants) {
    CirclePanelText text;
    for (const auto& variant : variants) {
        const auto runs = runs_of(result, variant);
        if (runs.empty()) throw Error("no E3 run of variant '" + variant + "' to draw");
        int merged = 0;
        for (const auto* r : runs) merged += r->rollout.merge_step >= 0;
        if (runs.size() > 1) {
            text.titles.push_back(fmt::format("{}: {}/{} merged", variant, merged, runs.size()));
        } else {
            const CircleRun& r = *runs.front();
            text.titles.push_back(r.rollout.merge_step < 0 ? fmt::format("{}: no merge", variant)
                                                           : fmt::format("{}: merged at step {}", variant, r.rollout.merge_step));
        }
        text.notes.push_back(circle_escape_notes(result, variant));
    }
    return text;
}

Findings circle_findings(const CircleResult& result, const CircleSettings& settings) {
    const TaskSettings& t = settings.training;
    const TaskSettings paper = default_task_settings("circle");
    Findings f;
    f.experiment = "E3";
    f.subject = fmt::format("1-layer, {}-head attention model (d = {}) on {} circle points, {} seeds, {}-step rollouts",
                                 t.heads, t.d_model, result.points, settings.seeds.size(), settings.steps);
    const double rmse_limit = settings.small_error * result.step_length;
    const bool full_scale = t.train_count >= paper.train_count && t.epochs >= paper.epochs && t.layers == paper.layers &&
                            t.heads == paper.heads && t.d_model == paper.d_model && settings.steps >= 300;
    std::vector<std::string> seed_names;
    for (auto s : settings.seeds) seed_names.push_back(std::to_string(s));
    const std::string setting_text = fmt::format(
        "{} points, seeds {{{}}}, at most {} epochs (batch {}, Adam lr {:g} {}, {}, stop at training MSE {:g}), "
        "input noise {:g}, {} steps; input LayerNorm {}",
        result.points, fmt::join(seed_names, ", "), t.epochs, t.batch_size, t.learning_rate, t.lr_schedule,
        t.shuffle ? "reshuffled every epoch" : "in order", t.target_mse, t.input_noise, settings.steps,
        t.embedding_layer_norm ? "on" : "off");

    // Precondition: the one-step map was learned.
    std::vector<std::string> worst;
    bool all_trained = true;
    double largest_gap = 0;  // the largest relative difference of held-out and training RMSE over the runs
    for (const auto& variant : settings.variants) {
        const auto runs = runs_of(result, variant);
        if (runs.empty()) continue;
        double w = 0, h = 0;
        for (const auto* r : runs) {
            w = std::max(w, std::isfinite(r->train_rmse) ? r->train_rmse : INFINITY);
            h = std::max(h, std::isfinite(r->heldout_rmse) ? r->heldout_rmse : INFINITY);
            all_trained = all_trained && trained_ok(*r, rmse_limit);
            largest_gap = std::max(largest_gap, std::fabs(r->heldout_rmse - r->train_rmse) /
                                                    std::max(r->train_rmse, std::numeric_limits<double>::min()));
        }
        worst.push_back(fmt::format("{} {} (held-out {})", variant, quote_number(w, 2), quote_number(h, 2)));
    }
    // The held-out angles sit halfway between the training angles: on two evenly spaced grids a smooth periodic error
    // averages to nearly the same mean square (the review found the two equal to 1e-7 in every run), so the held-out
    // RMSE shows the map between the points, not away from them. Said with the measured gap.
    const std::string heldout_words =
        std::isfinite(largest_gap)
            ? fmt::format("held-out: the angles halfway between training points, within {} of the training RMSE in every "
                          "run; two evenly spaced grids average a smooth periodic error alike, so this does not test the "
                          "map away from the arcs: the rollout does",
                          largest_gap < 1e-3 ? "0.1%" : fmt::format("{}%", quote_number(100 * largest_gap, 2)))
            : "held-out: the angles halfway between training points";
    f.check({"E3", "The model is trained to predict the next point on each arc (precondition of the rollout)",
             "trained with MSE; the figure presumes an accurate one-step map (no error is reported)",
             fmt::format("worst one-step RMSE over seeds: {} ({})", fmt::join(worst, "; "), heldout_words),
             fmt::format("RMSE < {} × step length = {} in every variant and seed (rankscope's precondition, not a claim of "
                         "the paper: unmet reads not comparable)",
                         quote_number(settings.small_error, 2), quote_number(rmse_limit, 2)),
             all_trained ? Verdict::Reproduced : Verdict::NotComparable, setting_text});

    // The rollout's stability varies from seed to seed (SPEC.md E3): a claim is judged over at least 3 seeds (the
    // default), every one of them; fewer are reported, not judged.
    std::set<std::uint64_t> seeds;
    for (const auto& r : result.runs) seeds.insert(r.seed);
    const bool several_seeds = seeds.size() >= kSeedsToJudge;
    if (!several_seeds)
        f.notes.push_back(fmt::format("{} seed{}: the claims are judged over at least {} seeds (a rollout's stability "
                                      "varies from seed to seed).",
                                      seeds.size(), seeds.size() == 1 ? "" : "s", kSeedsToJudge));
    const std::string seeds_criterion = fmt::format("; judged over ≥ {} seeds", kSeedsToJudge);

    // (a) pure attention collapses.
    const auto san = runs_of(result, "SAN");
    if (!san.empty()) {
        int merged = 0, on_arcs = 0;
        bool san_trained = true;
        for (const auto* r : san) {
            merged += r->rollout.merge_step >= 0;
            on_arcs += follows_arcs(*r, settings.arc_distance);
            san_trained = san_trained && trained_ok(*r, rmse_limit);
        }
        // A SAN that follows the arcs in every seed without ever merging contradicts the claim whatever its one-step
        // error: it has learned the map well enough to keep the two tokens apart for the whole rollout.
        const bool stays_apart = merged == 0 && on_arcs == static_cast<int>(san.size());
        const Verdict san_verdict = !several_seeds ? Verdict::NotComparable
                                    : stays_apart  ? Verdict::NotReproduced
                                                   : judge(san_trained, merged == static_cast<int>(san.size()));
        f.check({"E3", "Pure attention (SAN) collapses the two trajectories to one point/line",
                 "§4.2 figure: the SAN's two trajectories fall onto each other",
                 fmt::format("SAN merged in {}/{} seeds (steps {}), on the arcs in {}/{}; final relative token distance {}",
                             merged, san.size(), list(san, merge_text), on_arcs, san.size(),
                             list(san, [](const CircleRun& r) {
                                 return quote_number(r.rollout.final_relative_distance, 2);
                             })),
                 fmt::format("merged (‖t1 − t2‖ / mean ‖t‖ < {:g}) within {} steps in every seed, with every seed trained; "
                             "on the arcs without a merge in every seed contradicts it at any training error{}",
                             settings.merge_tolerance, settings.steps, seeds_criterion),
                 san_verdict, setting_text});
    }
    // (b) skip and/or MLP follow the arcs.
    for (const auto& variant : settings.variants) {
        if (variant == "SAN") continue;
        const auto runs = runs_of(result, variant);
        int on = 0;
        bool trained = true;
        for (const auto* r : runs) on += follows_arcs(*r, settings.arc_distance), trained = trained && trained_ok(*r, rmse_limit);
        f.check({"E3", fmt::format("With {} the trajectories follow the arcs", variant == "SAN+skip" ? "a skip connection"
                                                                            : variant == "SAN+MLP" ? "an MLP"
                                                                                                   : "a skip and an MLP"),
                 "§4.2 figure: the trajectories stay on their half-circle arcs",
                 fmt::format("{} on the arcs in {}/{} seeds: {}", variant, on, runs.size(),
                             list(runs, [&](const CircleRun& r) {
                                 return fmt::format("seed {} {}", r.seed, outcome(r, settings.arc_distance));
                             })),
                 fmt::format("in every seed, every trained: no merge, all {} steps finite, mean distance to the arc point of "
                             "the same step < {} ({} × radius){}",
                             settings.steps, quote_number(settings.arc_distance, 2),
                             quote_number(settings.arc_distance / kCircleRadius, 2), seeds_criterion),
                 judge(trained && several_seeds, on == static_cast<int>(runs.size())), setting_text});
    }

    // Key numbers and the reading, from the same numbers.
    std::vector<std::string> sentences;
    for (const auto& variant : settings.variants) {
        const auto runs = runs_of(result, variant);
        if (runs.empty()) continue;
        f.key(variant + ": one-step RMSE, training points (per seed)",
              list(runs, [](const CircleRun& r) { return quote_number(r.train_rmse, 2); }));
        f.key(variant + ": one-step RMSE, held-out points (per seed)",
              list(runs, [](const CircleRun& r) { return quote_number(r.heldout_rmse, 2); }));
        f.key(variant + ": mean distance to the arcs (per seed)",
              list(runs, [](const CircleRun& r) { return quote_number(r.rollout.mean_distance_to_arcs, 2); }));
        f.key(variant + ": merge step (per seed)", list(runs, merge_text));
        f.key(variant + ": epochs run (per seed)",
              list(runs, [](const CircleRun& r) { return r.epochs < 0 ? std::string("reused") : std::to_string(r.epochs); }));
        std::vector<double> steps, distances;
        int merged = 0, on = 0, ran_away = 0, ran_away_merged = 0;
        for (const auto* r : runs) {
            if (r->rollout.merge_step >= 0) ++merged, steps.push_back(r->rollout.merge_step);
            on += follows_arcs(*r, settings.arc_distance);
            ran_away += circle_run_diverged(*r);
            ran_away_merged += circle_run_diverged(*r) && r->rollout.merge_step >= 0;
            distances.push_back(r->rollout.mean_distance_to_arcs);
        }
        std::string s = fmt::format("{} merged its two tokens in {} of {} seeds", variant, merged, runs.size());
        if (merged == 1) s += fmt::format(" (step {:g})", steps.front());
        if (merged > 1) s += fmt::format(" (median step {:g})", median(steps));
        s += fmt::format(" and stayed on the arcs in {} of {} (median mean distance {})", on, runs.size(),
                         quote_number(median(distances), 2));
        if (ran_away > 0)
            s += fmt::format("; {} rollout{} ran away{}", ran_away, ran_away > 1 ? "s" : "",
                             ran_away_merged == 0        ? ""
                             : ran_away_merged == ran_away ? " after merging"
                                                           : fmt::format(" ({} after merging)", ran_away_merged));
        s += fmt::format("; one-step RMSE {} to {} (step length {})",
                         quote_number(std::min_element(runs.begin(), runs.end(), [](auto a, auto b) { return a->train_rmse < b->train_rmse; })[0]->train_rmse, 2),
                         quote_number(std::max_element(runs.begin(), runs.end(), [](auto a, auto b) { return a->train_rmse < b->train_rmse; })[0]->train_rmse, 2),
                         quote_number(result.step_length, 2));
        sentences.push_back(s);
    }
    f.reading = fmt::format("{}.", fmt::join(sentences, ". "));

    f.notes.push_back("Every variant has no LayerNorm inside the layer and SAN has no skip anywhere (the official code's "
                      "'pure attention' circle model kept an in-layer skip and LayerNorm). The input projection 2 → d is " +
                      std::string(t.embedding_layer_norm ? "followed by a LayerNorm (outside the layer) in every variant."
                                                         : "linear (no LayerNorm anywhere)."));
    if (t.input_noise > 0)
        f.notes.push_back(fmt::format(
            "Training inputs carry N(0, {:g}²) noise per coordinate and the targets the same noise rotated by one step "
            "(target = R x̃): the model learns the one-step rotation on and next to the arcs. Without it the training "
            "pairs are always exactly antipodal points on the circle, and nothing constrains the map one rollout error "
            "away from them.",
            t.input_noise));
    f.notes.push_back(fmt::format(
        "Distance to the arcs is measured to the arc point of the same step (point s and s + N/2 for the two tokens), so "
        "a trajectory that stays on the circle but runs ahead or behind also counts as off; the mean |‖p‖ − r| (distance "
        "to the circle) is in circle_summary.csv."));
    // The paper's official recipe (run_circle.py): 70 epochs over the items in order, a constant learning rate, plain
    // MSE. rankscope's default trains longer, reshuffled, with a cosine schedule and input noise, because that recipe
    // leaves one-step errors of up to tens of step lengths (README, measured); say which of these this run used.
    std::vector<std::string> recipe;
    if (t.shuffle) recipe.push_back("reshuffled every epoch");
    if (t.lr_schedule != "constant") recipe.push_back(t.lr_schedule + " learning rate");
    if (t.input_noise > 0) recipe.push_back(fmt::format("input noise {:g}", t.input_noise));
    if (t.target_mse > 0) recipe.push_back(fmt::format("stopped at training MSE {:g}", t.target_mse));
    if (!recipe.empty())
        f.notes.push_back(fmt::format("Training recipe: rankscope's, not the paper's (its code trains 70 epochs over the items "
                                      "in order at a constant learning rate with plain MSE, whose one-step errors the "
                                      "README gives as measured): at most {} epochs, {}. `circle-regimes` runs plain MSE "
                                      "beside it.",
                                      t.epochs, fmt::join(recipe, ", ")));
    if (!full_scale)
        f.notes.push_back(fmt::format("Reduced settings ({} points, at most {} epochs; the full run: {} points, {} epochs): "
                                      "claims whose models did not reach the one-step error are not comparable.",
                                      t.train_count, t.epochs, paper.train_count, paper.epochs));
    // What went wrong, per run, when a claim was not reproduced.
    for (const auto& c : f.checks)
        if (c.verdict == Verdict::NotReproduced) {
            std::vector<std::string> failures;
            for (const auto& r : result.runs) {
                const bool expected_merge = r.variant == "SAN";
                const bool bad = expected_merge ? r.rollout.merge_step < 0 : !follows_arcs(r, settings.arc_distance);
                if (bad)
                    failures.push_back(fmt::format("{} seed {}: {} with one-step RMSE {} (held-out {})", r.variant, r.seed,
                                                   outcome(r, settings.arc_distance), quote_number(r.train_rmse, 2),
                                                   quote_number(r.heldout_rmse, 2)));
            }
            f.notes.push_back(fmt::format("Runs against the paper's shape: {}.", fmt::join(failures, "; ")));
            break;
        }
    return f;
}

}  // namespace rankscope
