// cmd_report.cpp — `ppolab report` (SPEC §9): one self-contained HTML file.
#include <cstdio>

#include "cli/command.h"
#include "cli/stage_options.h"
#include "evaluation/report.h"
#include "training/run_layout.h"
#include "util/error.h"

namespace ppolab::cli {

namespace {

int run_report(const Args& args) {
    // The stage options are accepted (ppolab run passes them to every step);
    // the report reads only the run folder, and writes into it (holding its
    // lock) unless --out FILE lies elsewhere.
    args.allow_only(with_stage_options({"out"}));
    const RunLayout run = stage_options(args, RunAccess::read).run;
    const fs::path out = args.has("out") ? fs::path(args.get("out")) : run.report_html();
    const StageOptions o = stage_options(args, path_inside(out, run.study()) ? RunAccess::write : RunAccess::read);
    if (fs::exists(out)) fail("refusing to overwrite ", out.string(), " (report writes it once)");
    write_report(o.run, out);
    std::printf("report: %s\n", out.string().c_str());
    return 0;
}

}  // namespace

static Command report_cmd("report",
                          "report --run RUN [--out FILE]  one self-contained HTML report (default RUN/report.html)", {},
                          run_report);

}  // namespace ppolab::cli
