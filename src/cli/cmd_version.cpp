// cmd_version.cpp — `ppolab version`.
#include <cstdio>

#include "cli/command.h"

namespace ppolab::cli {

static Command version_cmd("version", "version                     print the ppolab version", {},
                           [](const Args& args) {
                               args.allow_only({});
                               std::printf("ppolab 0.1.0\n");
                               return 0;
                           });

}  // namespace ppolab::cli
