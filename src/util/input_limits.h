// input_limits.h — how large each kind of outside input may be.
//
// Every file ppolab reads from outside (a path on the command line, a file a
// person or another program could have placed in a run folder) is read
// through read_input_file (util/fileio.h) or, for resume states, inflated
// against these limits, so no input can make ppolab hold more memory than
// its kind allows. A file over its limit is refused before it is read;
// anything that is not a regular file (a folder, a FIFO, /dev/zero) is
// refused before it is opened for reading.
//
//   kind                 default   raise with                    read by
//   configuration file     4 MiB   PPOLAB_MAX_CONFIG_MIB         --config files, config.json, generation_config.json,
//                                                                 adapter_config.json
//   vote file             64 MiB   PPOLAB_MAX_VOTES_MIB          --votes (reward, feedback)
//   candidate file        64 MiB   PPOLAB_MAX_CANDIDATES_MIB     --candidates (reward, feedback label-ai)
//   JSON file             64 MiB   PPOLAB_MAX_JSON_MIB           read_json_file: corpus manifests, run records,
//                                                                 reports' inputs
//   tokenizer file        32 MiB   PPOLAB_MAX_TOKENIZER_MIB      tokenizer.json (Tokenizer::from_file, vocabulary
//                                                                 size),
//                                                                 the tokenizer files copied into a checkpoint
//   resume state (gzip)    2 GiB   PPOLAB_MAX_STATE_MIB          *.state.gz: the compressed file
//   resume state           2 GiB   PPOLAB_MAX_STATE_INFLATED_MIB *.state.gz: the safetensors bytes inside
//
// The values of the variables are whole MiB (1 to 1048576); anything else is
// an error naming the variable. The defaults sit far above what any preset
// writes or reads (the Qwen2.5 tokenizer.json is 6.7 MiB, the largest resume
// state of the tiny preset 37 MB) and far below what would exhaust memory.
// Resume states are also refused when the size their own safetensors header
// promises is more than the file could hold (deflate inflates at most 1032
// to 1) or when the stream holds more than it promises.
#pragma once
#include <cstdint>
#include <string>

namespace ppolab {

enum class InputKind { config, votes, candidates, json, tokenizer, state, state_inflated };

struct InputLimitInfo {
    const char* one;   // "vote file": how errors name a file of the kind
    const char* many;  // "vote files"
    const char* env;   // "PPOLAB_MAX_VOTES_MIB"
    uint64_t default_mib;
};

const InputLimitInfo& input_limit_info(InputKind kind);
// The limit in bytes: the environment variable if set, else the default.
// Error naming the variable if it is set to anything but a whole number of
// MiB in [1, 1048576].
uint64_t input_limit_bytes(InputKind kind);
// "the 64 MiB limit for vote files (raise it with PPOLAB_MAX_VOTES_MIB=<MiB>)"
std::string input_limit_text(InputKind kind);

}  // namespace ppolab
