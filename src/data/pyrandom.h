// pyrandom.h — CPython's random.Random, bit for bit (the Mersenne Twister
// MT19937 as Modules/_randommodule.c and Lib/random.py use it).
//
// Only what OfficeHelpPrefs-v1 needs to reproduce the tutorial's family
// split, plus random() for testing: seeding an integer through
// init_by_array, getrandbits(k), _randbelow(n) by rejection on
// getrandbits(n.bit_length()), and shuffle (Fisher–Yates from the end).
// ppolab's own randomness is Philox (util/rng.h); this class exists only
// so that the corpus equals the one the tutorial's Python defines.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace ppolab {

class PyRandom {
public:
    // random.Random(seed) for a non-negative int or a negative one (CPython
    // seeds with |seed|, split into 32-bit words, least significant first).
    explicit PyRandom(int64_t seed);

    uint32_t genrand_uint32();
    // random.getrandbits(k), k in [0, 64] (k > 32 fills 32-bit words from
    // the least significant one, the last word shifted as CPython does).
    uint64_t getrandbits(int k);
    // random.random(): 53 bits from two draws.
    double random();
    // random._randbelow(n) for n >= 1 (n == 0 is an error in CPython too).
    uint64_t randbelow(uint64_t n);

    // random.shuffle(x): for i in reversed(range(1, len(x))): j = _randbelow(i+1).
    template <typename T>
    void shuffle(std::vector<T>& x) {
        for (size_t i = x.size(); i-- > 1;) {
            size_t j = static_cast<size_t>(randbelow(static_cast<uint64_t>(i) + 1));
            std::swap(x[i], x[j]);
        }
    }

private:
    void init_genrand(uint32_t s);
    void init_by_array(const std::vector<uint32_t>& key);

    std::array<uint32_t, 624> mt_{};  // the MT19937 state
    int index_ = 625;
};

}  // namespace ppolab
