#pragma once
// The task-setting flags shared by `rankscope task` and `rankscope width-depth`: flags left unset keep the task's
// paper defaults, which are only known once the task name has been parsed.
#include <CLI/CLI.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rankscope/tasks.hpp"

namespace rankscope::cli {

class TaskSettingFlags {
public:
    // Registers --layers --heads --d-model --epochs --batch-size --lr --weight-decay --train-count --eval-count --text
    // --target-mse --lr-schedule --shuffle --embedding-layer-norm --input-noise
    // and --skip/--no-skip, --mlp, --layer-norm/--no-layer-norm on `command`, whose help lists the defaults of `tasks`
    // (the tasks the command trains) and leaves out the flags none of them reads.
    TaskSettingFlags(CLI::App& command, std::vector<std::string> tasks);
    // default_task_settings(task) with the given flags applied; throws rankscope::Error on bad values.
    TaskSettings settings_for(const std::string& task, std::uint64_t seed) const;

private:
    CLI::App& command_;
    std::shared_ptr<std::map<std::string, std::string>> values_;
    std::shared_ptr<bool> skip_, mlp_, layer_norm_;
};

}  // namespace rankscope::cli
