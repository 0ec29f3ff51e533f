// fuzz_resume_state.cpp — libFuzzer target for resume states (SPEC §6): the
// streaming gzip layer and the safetensors + metadata parser behind
// load_resume_state. Bad input must end in ppolab::Error, never in a crash,
// a hang or another exception. A state that parses must survive a round
// trip: serialise → parse gives an equal state.
#include <cstddef>
#include <cstdint>
#include <string>

#include "training/resume_state.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string bytes(reinterpret_cast<const char*>(data), size);
    try {
        // Compressed input goes through the same streaming inflation as a
        // state file: against the size its header promises, bounded by
        // what the input could hold (1032:1), so a bomb costs no memory.
        if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b)
            bytes = ppolab::inflate_resume_state(bytes, "fuzz.state.gz");
        ppolab::ResumeState state = ppolab::parse_resume_state(std::move(bytes), "fuzz.state.gz");
        ppolab::ResumeState again = ppolab::parse_resume_state(ppolab::serialize_resume_state(state), "round trip");
        if (!ppolab::states_equal(state, again)) __builtin_trap();
    } catch (const ppolab::Error&) {}
    return 0;
}
