// Subcommands of the `vtc` driver. Each registers its options on the app and
// returns the function that runs it; the driver stays thin (DESIGN.md).
#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace vtc::cli {

using Runner = std::function<int()>;

Runner add_inspect(CLI::App& app);
Runner add_gen_model(CLI::App& app);
Runner add_compile(CLI::App& app);
Runner add_run(CLI::App& app);
Runner add_bench(CLI::App& app);
Runner add_opt(CLI::App& app);
Runner add_kernels(CLI::App& app);
Runner add_diff(CLI::App& app);
Runner add_serve(CLI::App& app);
Runner add_apply_template(CLI::App& app);

}  // namespace vtc::cli
