// cmd_version.cpp — `ppolab version`: the version and the instruction-set
// paths this binary runs on this CPU (kernels/dispatch.h), in the arithmetic
// a config's engine.numerics chooses (--numerics; canonical, the presets'
// default, unless told).
#include <cstdio>

#include "cli/command.h"
#include "kernels/dispatch.h"
#include "kernels/numerics.h"
#include "parallel/world.h"

namespace ppolab::cli {

static Command version_cmd("version",
                           "version [--numerics canonical|fast]  the version and the kernel paths this CPU runs", {},
                           [](const Args& args) {
                               args.allow_only({"numerics"});
                               numerics_set_mode(numerics_parse(args.get("numerics", "canonical"), "--numerics"));
                               std::printf("ppolab 0.1.0\n%s%s\n", dispatch_text(dispatch_report()).c_str(),
                                           parallel::describe().c_str());
                               return 0;
                           });

}  // namespace ppolab::cli
