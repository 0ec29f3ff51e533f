// error.h — the one error type of ppolab.
//
// Bad input is an Error with a message that names the file or field, what
// was expected and what was found; internal invariants use PPOLAB_ASSERT.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace ppolab {

struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// fail("tensor '", name, "' has shape ", got, "; expected ", want)
template <typename... Args>
[[noreturn]] inline void fail(Args&&... parts) {
    std::ostringstream out;
    (out << ... << std::forward<Args>(parts));
    throw Error(out.str());
}

}  // namespace ppolab

#define PPOLAB_ASSERT(cond)                                                                                 \
    do {                                                                                                    \
        if (!(cond)) ::ppolab::fail("internal invariant failed: ", #cond, " at ", __FILE__, ":", __LINE__); \
    } while (0)
