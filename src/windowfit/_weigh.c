/*
 * windowfit._weigh: the profile estimate of windowfit.profiles in one pass, in C.
 *
 * Why it exists: the pure-Python estimate is at least six C passes of the standard
 * library per character (UTF-8 encoding, translate, big-integer pairing, translate, sums,
 * run counts), about half of a cold fit and far from the throughput goals. This module
 * computes exactly the same integer sum in one pass over the str's code points, with the
 * tables windowfit.profiles builds (the character classes, a profile's pair weights, its
 * run terms and extras), and rounds it exactly as the Python code does. It holds no model
 * of its own: every number comes from Python, and the tests compare both paths on
 * arbitrary text for every profile. Optional: without a C compiler, windowfit uses the
 * Python path. Pure ASCII (most of agent traffic) goes through an AVX2 pass where the CPU
 * has it (chosen when the module is imported; see ascii_units), about three times fewer
 * cycles a character than the table look-ups, which every other CPU and text uses.
 *
 * A Weigher is immutable after construction and holds references to the bytes objects
 * its tables live in, so it is safe to call from any number of threads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define BMP 0x10000
#define ASCII_SETS 6
/* The AVX2 pass over pure ASCII, chosen at run time: x86 with GCC 5+ or Clang 6+ (older
 * ones cannot compile AVX2 code in one function only), not with the MSVC toolchain (no
 * GCC-style inline assembly for the processor check). Elsewhere the look-ups count. */
#if (defined(__x86_64__) || defined(__i386__)) && !defined(_MSC_VER) &&                      \
    ((defined(__clang__) && __clang_major__ >= 6) ||                                         \
     (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 5))
#define WEIGH_X86 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define WEIGH_X86 0
#endif

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *owned[4];              /* the bytes objects the tables below point into */
    const unsigned char *classes;    /* code point (BMP) -> class byte (class << 3 | group) */
    uint32_t weights[256];           /* pair code -> its weight plus its class's extra, in units */
    /* For texts of code points below 256 (most texts): the weight of a character by the
     * group of the one before and its code point, and its own group. The group alone
     * tells a lowercase letter or punctuation from every other class there, so the run
     * masks are made from groups. (latin1_ok is 0 where that does not hold.) */
    uint32_t latin1_weights[8][256];
    unsigned char latin1_groups[256];
    int latin1_ok;
    int latin1_ranges; /* the class table's lowercase and punctuation are the ranges above */
    /* Pure ASCII by six sets of characters (see ascii_set_of), as the AVX2 pass's shuffle
     * tables take them, made once here: the weight of a character by the set of the one
     * before (a) and its own (b) at ascii_weights[8 * a + b], and 0x80 at ascii_lower[a]
     * (ascii_punct[a]) where set a is the lowercase (punctuation) run class. ascii_ok is 0
     * where the tables do not give every character of a set the same weights, or a pair
     * weighs more than a byte holds. */
    unsigned char ascii_weights[48], ascii_lower[16], ascii_punct[16];
    int ascii_ok;
    const unsigned char *char_extras; /* BMP code point -> extra units (uint16 LE), or NULL */
    unsigned char astral_low;        /* class byte of U+10000-3FFFF (UTF-8 lead F0) */
    unsigned char astral_high;       /* class byte of U+40000 and up (leads F1-F4) */
    unsigned char lower_code, punct_code;
    int lower_shift, punct_shift;    /* a run is 2**shift characters */
    long long lower_units, punct_units;
    double framing;
} Weigher;

/* Runs. A maximal run of L equal class bytes holds L >> shift whole runs of 2**shift (what
 * bytes.count of the run repeated counts, left to right, without overlap). The class
 * bytes are looked at 64 at a time as a bit mask per run class; a word is handled with a
 * few bit operations, and runs inside it are walked one by one only where one is long
 * enough to count (rare: a long word, a separator line). A run open at the top of a word
 * goes on into the next. */
typedef struct {
    long long count;
    long long open; /* length of the run still open at the end of the last word */
} Runs;

static inline uint64_t
low_bits(int bits)
{
    return bits >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << bits) - 1);
}

static inline void
runs_word(Runs *r, uint64_t m, int bits, int shift)
{
    m &= low_bits(bits);
    if (m == 0) {
        r->count += r->open >> shift;
        r->open = 0;
        return;
    }
    if (m == low_bits(bits) && bits == 64) {
        r->open += 64;
        return;
    }
    if (bits == 64) {
        /* The common case, without a branch the processor cannot foresee: no run of
         * 2**shift inside the word, and the open run ends in it still short of one. */
        uint64_t whole = m;
        for (int k = 1; k < (1 << shift); k <<= 1)
            whole &= whole >> k;
        const uint64_t gaps = ~m;
        const int lead = gaps ? __builtin_ctzll(gaps) : 64;
        if (whole == 0 && ((r->open + lead) >> shift) == 0) {
            r->open = __builtin_clzll(gaps); /* (gaps is not 0: lead is short of a run) */
            return;
        }
    }
    int lead = __builtin_ctzll(~m); /* the ones at the bottom continue the open run */
    if (lead == bits) {             /* (only in a short last word) */
        r->open += lead;
        return;
    }
    r->count += (r->open + lead) >> shift;
    r->open = 0;
    uint64_t rest = m & ~low_bits(lead);
    if (rest && ((rest >> (bits - 1)) & 1)) { /* a run reaching the top stays open */
        uint64_t zeros = ~rest & low_bits(bits);
        int highest_zero = 63 - __builtin_clzll(zeros);
        r->open = bits - 1 - highest_zero;
        rest &= low_bits(highest_zero + 1);
    }
    uint64_t whole = rest; /* bit i set: a whole run starts at i */
    for (int k = 1; k < (1 << shift); k <<= 1)
        whole &= whole >> k;
    while (whole && rest) {
        int first = __builtin_ctzll(rest);
        int length = __builtin_ctzll(~(rest >> first));
        r->count += length >> shift;
        rest &= ~(low_bits(length) << first);
        whole &= ~low_bits(first + length);
    }
}

static inline uint64_t
equal_mask(const unsigned char *block, unsigned value)
{
#ifdef __SSE2__
    const __m128i v = _mm_set1_epi8((char)value);
    uint64_t m = 0;
    for (int k = 0; k < 4; k++) {
        __m128i x = _mm_loadu_si128((const __m128i *)(block + 16 * k));
        m |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x, v)) << (16 * k);
    }
    return m;
#else
    uint64_t m = 0;
    for (int k = 0; k < 64; k++)
        m |= (uint64_t)(block[k] == value) << k;
    return m;
#endif
}

/* The pair weights (and extras) of one text in one pass, 64 characters at a time, their
 * class bytes kept for the run masks. */
#define WEIGH_LOOP_RUNS(UNIT_T, CLASS_OF, HAS_EXTRAS, LSHIFT, PSHIFT)                                        \
    do {                                                                                 \
        const UNIT_T *p = (const UNIT_T *)data;                                          \
        for (Py_ssize_t base = 0; base < n; base += 64) {                                \
            const Py_ssize_t stop = base + 64 < n ? base + 64 : n;                       \
            int k = 0;                                                                   \
            for (Py_ssize_t i = base; i < stop; i++, k++) {                              \
                const Py_UCS4 cp = p[i];                                                 \
                const unsigned c = CLASS_OF;                                             \
                units += w[(c & 0xF8u) | (prev & 7u)];                                   \
                if (HAS_EXTRAS && cp < BMP)                                              \
                    units += (unsigned)cx[2 * cp] | ((unsigned)cx[2 * cp + 1] << 8);     \
                block[k] = (unsigned char)c;                                             \
                prev = c;                                                                \
            }                                                                            \
            runs_word(&lower, equal_mask(block, lc), k, LSHIFT);                         \
            runs_word(&punct, equal_mask(block, pc), k, PSHIFT);                         \
        }                                                                                \
    } while (0)

/* The run masks of 64 characters below U+0100 straight from their code points: a
 * lowercase letter is a-z, punctuation is every other ASCII character but letters,
 * digits, space, tab, newline, vertical tab, form feed and carriage return (what
 * windowfit.profiles classes them as; latin1_ranges says the class table agrees). */
static inline int
in_lower_range(unsigned cp)
{
    return cp >= 'a' && cp <= 'z';
}

static inline int
in_punct_range(unsigned cp)
{
    return cp < 0x80 && !((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
                          (cp >= '0' && cp <= '9') || (cp >= 9 && cp <= 13) || cp == ' ');
}

#ifdef __SSE2__
static inline void
latin1_run_masks(const Py_UCS1 *p, uint64_t *lower_mask, uint64_t *punct_mask)
{
    uint64_t lm = 0, pm = 0;
    for (int j = 0; j < 4; j++) {
        const __m128i x = _mm_loadu_si128((const __m128i *)(p + 16 * j));
#define IN(lo, hi) _mm_and_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8((char)((lo) - 1))), \
                                 _mm_cmplt_epi8(x, _mm_set1_epi8((char)((hi) + 1))))
        const __m128i lower = IN('a', 'z');
        const __m128i other = _mm_or_si128(
            _mm_or_si128(lower, IN('A', 'Z')),
            _mm_or_si128(IN('0', '9'), _mm_or_si128(IN(9, 13), _mm_cmpeq_epi8(x, _mm_set1_epi8(' ')))));
#undef IN
        const __m128i ascii = _mm_cmpgt_epi8(x, _mm_set1_epi8(-1)); /* below 0x80 */
        const __m128i punct = _mm_andnot_si128(other, ascii);
        lm |= (uint64_t)(uint16_t)_mm_movemask_epi8(lower) << (16 * j);
        pm |= (uint64_t)(uint16_t)_mm_movemask_epi8(punct) << (16 * j);
    }
    *lower_mask = lm;
    *punct_mask = pm;
}
#endif

#define LATIN1_LOOP(LSHIFT, PSHIFT)                                                      \
    do {                                                                                \
        const Py_UCS1 *p = (const Py_UCS1 *)data;                                       \
        const unsigned char *groups = self->latin1_groups;                              \
        const uint32_t(*lw)[256] = self->latin1_weights;                                \
        unsigned group = 0;                                                             \
        long long odd = 0;                                                              \
        for (Py_ssize_t base = 0; base < n; base += 64) {                               \
            const Py_ssize_t stop = base + 64 < n ? base + 64 : n;                      \
            const int k = (int)(stop - base);                                           \
            Py_ssize_t i = base;                                                        \
            /* two characters a step, two sums: the second's group does not wait for   \
             * the first's weight */                                                   \
            for (; i + 1 < stop; i += 2) {                                              \
                const unsigned c0 = p[i], c1 = p[i + 1];                                \
                const unsigned g0 = groups[c0];                                         \
                units += lw[group][c0];                                                 \
                odd += lw[g0][c1];                                                      \
                group = groups[c1];                                                     \
            }                                                                           \
            if (i < stop) {                                                             \
                units += lw[group][p[i]];                                               \
                group = groups[p[i]];                                                   \
            }                                                                           \
            uint64_t lm = 0, pm = 0;                                                    \
            if (LATIN1_SIMD && k == 64 && self->latin1_ranges) {                        \
                LATIN1_MASKS(p + base, &lm, &pm);                                       \
            }                                                                           \
            else {                                                                      \
                const unsigned lg = lc & 7u, pg = pc & 7u;                              \
                for (int j = 0; j < k; j++) {                                           \
                    const unsigned g = groups[p[base + j]];                             \
                    lm |= (uint64_t)(g == lg) << j;                                     \
                    pm |= (uint64_t)(g == pg) << j;                                     \
                }                                                                       \
            }                                                                           \
            runs_word(&lower, lm, k, LSHIFT);                                           \
            runs_word(&punct, pm, k, PSHIFT);                                           \
        }                                                                               \
        units += odd;                                                                   \
    } while (0)

#ifdef __SSE2__
#define LATIN1_SIMD 1
#define LATIN1_MASKS latin1_run_masks
#else
#define LATIN1_SIMD 0
#define LATIN1_MASKS(p, lm, pm) ((void)0)
#endif

/* Pure ASCII, the common case of agent traffic, by six sets of characters: the run
 * classes' lowercase letters and punctuation, and upper case, digits, spaces and the
 * newline (what windowfit.profiles classes them as; ascii_ok says the tables agree). A
 * character's weight depends only on its set and the set of the one before, so instead
 * of a table look-up a character, AVX2 finds 32 characters' sets and their pairs' weights
 * by byte shuffles at once and sums them (see ascii_units): three times faster than the
 * look-ups on prose, six on digits and punctuation. */
static int
ascii_set_of(unsigned cp)
{
    if (cp >= 'a' && cp <= 'z')
        return 1;
    if (cp >= 'A' && cp <= 'Z')
        return 2;
    if (cp >= '0' && cp <= '9')
        return 3;
    if (cp == '\n')
        return 5;
    if (cp == ' ' || (cp >= 9 && cp <= 13))
        return 4;
    return 0; /* punctuation, symbols and control characters */
}

#if WEIGH_X86
static int have_avx2 = 0; /* set when the module is imported */

/* Whether the processor and the operating system allow AVX2: the CPUID bit, and the
 * system saving the vector registers (OSXSAVE, and XCR0's SSE and AVX state). Asked by
 * CPUID itself rather than __builtin_cpu_supports, which needs a runtime library that
 * not every Clang links. */
static int
cpu_has_avx2(void)
{
    unsigned a, b, c, d;
    if (__get_cpuid_max(0, NULL) < 7) {
        return 0;
    }
    __cpuid(1, a, b, c, d);
    if (!(c & (1u << 27))) { /* OSXSAVE */
        return 0;
    }
    unsigned xcr0_low, xcr0_high;
    __asm__ volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
    (void)xcr0_high;
    if ((xcr0_low & 6u) != 6u) {
        return 0;
    }
    __cpuid_count(7, 0, a, b, c, d);
    return (b & (1u << 5)) != 0; /* AVX2 */
}

/* 32 characters below 0x80 at a time, all in vector registers: a character's set (0-5) by
 * two nibble look-ups (the bit of each set's part that its high and its low nibble allow;
 * a set is one or two such parts) and two more from that bit to the set; the pair code
 * (the set before times 8, plus its own) and the pair's weight by three 16-entry look-ups
 * (every ASCII pair weight fits a byte: ascii_ok); the weights summed by vpsadbw. */
__attribute__((target("avx2"))) static long long
ascii_units(const Weigher *self, const unsigned char *p, Py_ssize_t n, Runs *lower, Runs *punct)
{
    /* The parts, a bit each: a-o, p-z, A-O, P-Z, 0-9, tab and \v\f\r, space, newline
     * (the bit a character's high nibble allows, and the bits its low nibble allows). */
    const __m256i high = _mm256_setr_epi8(
        (char)0xA0, 0, 0x40, 0x10, 0x04, 0x08, 0x01, 0x02, 0, 0, 0, 0, 0, 0, 0, 0,
        (char)0xA0, 0, 0x40, 0x10, 0x04, 0x08, 0x01, 0x02, 0, 0, 0, 0, 0, 0, 0, 0);
#define LOW_NIBBLE(l) (char)(((l) >= 1 ? 0x05 : 0) | ((l) <= 10 ? 0x0A : 0) | ((l) <= 9 ? 0x10 : 0) | \
                             ((l) == 9 || ((l) >= 11 && (l) <= 13) ? 0x20 : 0) | ((l) == 0 ? 0x40 : 0) | \
                             ((l) == 10 ? 0x80 : 0))
#define LOW_ROW LOW_NIBBLE(0), LOW_NIBBLE(1), LOW_NIBBLE(2), LOW_NIBBLE(3), LOW_NIBBLE(4), LOW_NIBBLE(5), \
                LOW_NIBBLE(6), LOW_NIBBLE(7), LOW_NIBBLE(8), LOW_NIBBLE(9), LOW_NIBBLE(10), LOW_NIBBLE(11), \
                LOW_NIBBLE(12), LOW_NIBBLE(13), LOW_NIBBLE(14), LOW_NIBBLE(15)
    const __m256i low = _mm256_setr_epi8(LOW_ROW, LOW_ROW);
#undef LOW_ROW
#undef LOW_NIBBLE
    /* the part's bit to its set: bits 0-3 (a-z twice, A-Z twice), bits 4-7 (0-9, space twice, \n) */
    const __m256i set_low = _mm256_setr_epi8(0, 1, 1, 0, 2, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0,
                                             0, 1, 1, 0, 2, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0);
    const __m256i set_high = _mm256_setr_epi8(0, 3, 4, 0, 4, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0,
                                              0, 3, 4, 0, 4, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0);
    const __m256i lower_set = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)self->ascii_lower));
    const __m256i punct_set = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)self->ascii_punct));
    __m256i weights[3];
    for (int t = 0; t < 3; t++)
        weights[t] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(self->ascii_weights + 16 * t)));
    const __m256i nibble = _mm256_set1_epi8(0x0F), above = _mm256_set1_epi8(0x70);
    const __m256i sixteen = _mm256_set1_epi8(16), thirty_two = _mm256_set1_epi8(32);
    const __m256i iota = _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,
                                          18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
    const int lshift = self->lower_shift, pshift = self->punct_shift;
    __m256i sums = _mm256_setzero_si256(), before = _mm256_setzero_si256(); /* set 0 before the start */
    unsigned char tail[64];
    for (Py_ssize_t base = 0; base < n; base += 64) {
        const unsigned char *q = p + base;
        const int k = n - base < 64 ? (int)(n - base) : 64;
        if (k < 64) { /* the last characters, padded (the padding's weights masked off) */
            memset(tail, 0, sizeof tail);
            memcpy(tail, q, (size_t)k);
            q = tail;
        }
        uint64_t lm = 0, pm = 0;
        for (int h = 0; h < 2; h++) {
            const __m256i x = _mm256_loadu_si256((const __m256i *)(q + 32 * h));
            const __m256i parts = _mm256_and_si256(
                _mm256_shuffle_epi8(high, _mm256_and_si256(_mm256_srli_epi16(x, 4), nibble)),
                _mm256_shuffle_epi8(low, x));
            const __m256i set = _mm256_or_si256(
                _mm256_shuffle_epi8(set_low, _mm256_and_si256(parts, nibble)),
                _mm256_shuffle_epi8(set_high, _mm256_and_si256(_mm256_srli_epi16(parts, 4), nibble)));
            const __m256i prev =
                _mm256_alignr_epi8(set, _mm256_permute2x128_si256(before, set, 0x21), 15);
            before = set;
            const __m256i code = _mm256_add_epi8(_mm256_slli_epi16(prev, 3), set);
            __m256i w = _mm256_or_si256(
                _mm256_or_si256(_mm256_shuffle_epi8(weights[0], _mm256_adds_epu8(code, above)),
                                _mm256_shuffle_epi8(weights[1], _mm256_adds_epu8(_mm256_sub_epi8(code, sixteen), above))),
                _mm256_shuffle_epi8(weights[2], _mm256_adds_epu8(_mm256_sub_epi8(code, thirty_two), above)));
            if (k < 64)
                w = _mm256_and_si256(w, _mm256_cmpgt_epi8(_mm256_set1_epi8((char)(k - 32 * h)), iota));
            sums = _mm256_add_epi64(sums, _mm256_sad_epu8(w, _mm256_setzero_si256()));
            lm |= (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_shuffle_epi8(lower_set, set)) << (32 * h);
            pm |= (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_shuffle_epi8(punct_set, set)) << (32 * h);
        }
        runs_word(lower, lm, k, lshift);
        runs_word(punct, pm, k, pshift);
    }
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, sums);
    /* the first character comes after the start (group 0), not after set 0 */
    return (long long)(lanes[0] + lanes[1] + lanes[2] + lanes[3]) + self->latin1_weights[0][p[0]] -
           self->ascii_weights[ascii_set_of(p[0])];
}
#endif

/* The loop with the runs of windowfit.profiles (16 lowercase letters, 4 punctuation
 * characters) as constants, which the compiler unrolls, or any others. */
#define WEIGH_LOOP(UNIT_T, CLASS_OF, HAS_EXTRAS)                                          \
    do {                                                                                 \
        if (lshift == 4 && pshift == 2)                                                  \
            WEIGH_LOOP_RUNS(UNIT_T, CLASS_OF, HAS_EXTRAS, 4, 2);                         \
        else                                                                             \
            WEIGH_LOOP_RUNS(UNIT_T, CLASS_OF, HAS_EXTRAS, lshift, pshift);               \
    } while (0)

/* The units of the n code points at data (of the str kind kind; ascii: all below 0x80),
 * as of a str of their own: what weigh_units gives text[start:start + n]. */
static long long
span_units(const Weigher *self, int kind, const void *data, Py_ssize_t n, int ascii, int simd)
{
    const unsigned char *cls = self->classes, *cx = self->char_extras;
    const uint32_t *w = self->weights;
    const unsigned lc = self->lower_code, pc = self->punct_code;
    const int lshift = self->lower_shift, pshift = self->punct_shift;
    const unsigned char a_low = self->astral_low, a_high = self->astral_high;
    long long units = 0;
    Runs lower = {0, 0}, punct = {0, 0};
    unsigned prev = 0; /* the start of the text: group 0 */
    unsigned char block[64];
    const int extras = cx != NULL;

#if WEIGH_X86
    const int by_avx2 = simd && have_avx2 && self->ascii_ok && n > 0 && ascii;
#else
    const int by_avx2 = 0;
    (void)simd;
#endif
    if (by_avx2) {
#if WEIGH_X86
        units = ascii_units(self, (const unsigned char *)data, n, &lower, &punct);
#endif
    }
    else if (kind == PyUnicode_1BYTE_KIND && self->latin1_ok) { /* (char extras included) */
        if (lshift == 4 && pshift == 2)
            LATIN1_LOOP(4, 2);
        else
            LATIN1_LOOP(lshift, pshift);
    }
    else if (kind == PyUnicode_1BYTE_KIND) {
        if (extras)
            WEIGH_LOOP(Py_UCS1, cls[cp], 1);
        else
            WEIGH_LOOP(Py_UCS1, cls[cp], 0);
    }
    else if (kind == PyUnicode_2BYTE_KIND) {
        if (extras)
            WEIGH_LOOP(Py_UCS2, cls[cp], 1);
        else
            WEIGH_LOOP(Py_UCS2, cls[cp], 0);
    }
    else {
        if (extras)
            WEIGH_LOOP(Py_UCS4, (cp < BMP ? cls[cp] : (cp < 0x40000 ? a_low : a_high)), 1);
        else
            WEIGH_LOOP(Py_UCS4, (cp < BMP ? cls[cp] : (cp < 0x40000 ? a_low : a_high)), 0);
    }
    lower.count += lower.open >> lshift;
    punct.count += punct.open >> pshift;
    return units + lower.count * self->lower_units + punct.count * self->punct_units;
}

static int
ready_text(PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "a text to estimate must be a str, not %.100s",
                     Py_TYPE(text)->tp_name);
        return -1;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0)
        return -1;
#endif
    return 0;
}

static int
weigh_units(Weigher *self, PyObject *text, long long *out, int simd)
{
    if (ready_text(text) < 0)
        return -1;
    *out = span_units(self, PyUnicode_KIND(text), PyUnicode_DATA(text),
                      PyUnicode_GET_LENGTH(text), PyUnicode_IS_ASCII(text), simd);
    return 0;
}

/* ceil(units / 128 + framing), at least 1 for a text of n > 0 characters, 0 for the
 * empty text. units / 128 is exact in a double (a power of two, units far below 2**53),
 * so this is the Python expression's value exactly. */
static double
rounded(const Weigher *self, long long units, Py_ssize_t n)
{
    if (n == 0)
        return 0.0;
    double value = ceil((double)units / 128.0 + self->framing);
    return value < 1.0 ? 1.0 : value;
}

static PyObject *
estimate_of(const Weigher *self, long long units, Py_ssize_t n)
{
    return PyLong_FromDouble(rounded(self, units, n));
}

/* The estimate of a text (see estimate_of). */
static PyObject *
weigher_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Weigher *self = (Weigher *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 1 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_SetString(PyExc_TypeError, "a Weigher takes one argument: the text");
        return NULL;
    }
    long long units;
    if (weigh_units(self, args[0], &units, 1) < 0)
        return NULL;
    return estimate_of(self, units, PyUnicode_GET_LENGTH(args[0]));
}

/* The estimates of the stretches of a text between cuts, each as of the slice on its own
 * (text[cuts[k]:cuts[k + 1]]), in one call. Why: a long text's check
 * (windowfit.vocabulary._strata) needs the profile's estimate of every stretch between its
 * windows; slicing a 300,000-character text into them copied it, and with the calls took
 * as long again as the pass itself (and the copies pushed the vocabularies' tables out of
 * the processor's cache before they were counted). */
static PyObject *
weigher_estimates(PyObject *op, PyObject *args)
{
    Weigher *self = (Weigher *)op;
    PyObject *text, *cuts_obj;
    if (!PyArg_ParseTuple(args, "OO:estimates", &text, &cuts_obj) || ready_text(text) < 0)
        return NULL;
    /* (a tuple of its own: an __index__ may change a list being read) */
    PyObject *fast = PySequence_Fast(cuts_obj, "estimates() takes a sequence of cuts");
    PyObject *cuts = fast == NULL ? NULL : PySequence_Tuple(fast);
    Py_XDECREF(fast);
    if (cuts == NULL)
        return NULL;
    const Py_ssize_t count = PyTuple_GET_SIZE(cuts), size = PyUnicode_GET_LENGTH(text);
    PyObject **items = &PyTuple_GET_ITEM(cuts, 0);
    PyObject *out = PyList_New(count > 0 ? count - 1 : 0);
    const int kind = PyUnicode_KIND(text), ascii = PyUnicode_IS_ASCII(text);
    const char *data = (const char *)PyUnicode_DATA(text);
    Py_ssize_t begin = 0;
    for (Py_ssize_t k = 0; out != NULL && k < count; k++) {
        Py_ssize_t end = PyNumber_AsSsize_t(items[k], PyExc_OverflowError);
        if (end == -1 && PyErr_Occurred()) {
            Py_CLEAR(out);
        }
        else if (end < (k > 0 ? begin : 0) || end > size) {
            PyErr_Format(PyExc_ValueError,
                         "estimates(): cut %zd is %zd; the cuts must not fall, and must lie "
                         "from 0 to the text's length (%zd)", k, end, size);
            Py_CLEAR(out);
        }
        else if (k > 0) {
            long long units = span_units(self, kind, data + (size_t)begin * (size_t)kind,
                                         end - begin, ascii, 1);
            PyObject *estimate = estimate_of(self, units, end - begin);
            if (estimate == NULL) {
                Py_CLEAR(out);
            }
            else {
                PyList_SET_ITEM(out, k - 1, estimate);
            }
        }
        begin = end;
    }
    Py_DECREF(cuts);
    return out;
}

static PyObject *
weigher_units(PyObject *op, PyObject *args, PyObject *kwds)
{
    static char *keywords[] = {"text", "simd", NULL};
    PyObject *text;
    int simd = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$p:units", keywords, &text, &simd))
        return NULL;
    long long units;
    if (weigh_units((Weigher *)op, text, &units, simd) < 0)
        return NULL;
    return PyLong_FromLongLong(units);
}

static PyObject *
weigher_simd(PyObject *op, void *closure)
{
    (void)closure;
#if WEIGH_X86
    return PyBool_FromLong(have_avx2 && ((Weigher *)op)->ascii_ok);
#else
    (void)op;
    Py_RETURN_FALSE;
#endif
}

/* windowfit.vocabulary._strata for a text of pure ASCII, in one call: the windows a long
 * text is checked on, each as (its bytes, its weight, the estimate of it). The same
 * arithmetic in the same order (see that function for what it means): the windows and
 * stretches are estimated as slices would be, without slicing, and nothing but the
 * windows' bytes is made. Why: on 300,000 characters of ASCII the interpreter's share of
 * _strata (18 windows and stretches, a line an element) took as long as the pass over the
 * text itself, a fifth of the conservative check. */
/* The characters of the window that starts at start: width, or what is left of the text. */
static inline Py_ssize_t
window_length(Py_ssize_t size, Py_ssize_t start, Py_ssize_t width)
{
    Py_ssize_t length = size - start < width ? size - start : width;
    return length > 0 ? length : 0;
}

static PyObject *
weigher_strata(PyObject *op, PyObject *args)
{
    Weigher *self = (Weigher *)op;
    PyObject *text;
    Py_ssize_t windows, width;
    double alike;
    if (!PyArg_ParseTuple(args, "Onnd:strata", &text, &windows, &width, &alike) ||
        ready_text(text) < 0)
        return NULL;
    if (!PyUnicode_IS_ASCII(text)) {
        PyErr_SetString(PyExc_ValueError, "strata() takes a text of ASCII only");
        return NULL;
    }
    if (windows < 2 || width < 1) {
        PyErr_SetString(PyExc_ValueError, "strata() takes at least 2 windows of at least 1 character");
        return NULL;
    }
    const Py_ssize_t size = PyUnicode_GET_LENGTH(text);
    const char *data = (const char *)PyUnicode_DATA(text);
    Py_ssize_t step = (size - width) / (windows - 1);
    if (step < 1)
        step = 1; /* (where size < width the quotient is not floored, but is clamped alike) */
    Py_ssize_t *shown = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)windows * 3);
    long long *estimated = PyMem_Malloc(sizeof(long long) * (size_t)windows * 2);
    double *own = PyMem_Malloc(sizeof(double) * (size_t)windows);
    if (shown == NULL || estimated == NULL || own == NULL) {
        PyMem_Free(shown);
        PyMem_Free(estimated);
        PyMem_Free(own);
        return PyErr_NoMemory();
    }
    Py_ssize_t *cuts = shown + windows; /* windows + 1 of them */
    long long *stretch = estimated + windows;
    Py_ssize_t centre_before = 0;
    cuts[0] = 0;
    for (Py_ssize_t k = 0; k < windows; k++) {
        const Py_ssize_t start = k * step, length = window_length(size, start, width);
        shown[k] = length > 0 ? length : 1;
        long long units = span_units(self, PyUnicode_1BYTE_KIND, data + (start < size ? start : size), length, 1, 1);
        estimated[k] = length == 0 ? 1 : (long long)rounded(self, units, length);
        const Py_ssize_t centre = start + length / 2;
        if (k > 0) {
            Py_ssize_t middle = (centre_before + centre) / 2;
            if (middle > size)
                middle = size;
            cuts[k] = middle > cuts[k - 1] ? middle : cuts[k - 1];
        }
        centre_before = centre;
    }
    cuts[windows] = size;
    double pooled = 0.0;
    long long left = 0;
    for (Py_ssize_t k = 0; k < windows; k++) {
        const Py_ssize_t chars = cuts[k + 1] - cuts[k];
        long long units = span_units(self, PyUnicode_1BYTE_KIND, data + cuts[k], chars, 1, 1);
        stretch[k] = (long long)rounded(self, units, chars);
        pooled += (double)chars / (double)shown[k] * (double)estimated[k];
        const double per_window = (double)estimated[k] / (double)shown[k];
        const double per_stretch = chars ? (double)stretch[k] / (double)chars : 0.0;
        const int like = per_window <= per_stretch
                             ? per_window > 0 && per_stretch <= alike * per_window
                             : per_stretch > 0 && per_window <= alike * per_stretch;
        own[k] = like ? (double)stretch[k] / (double)estimated[k] : 0.0;
        if (!like)
            left += stretch[k];
    }
    const double share = pooled > 0 ? (double)left / pooled : 0.0;
    PyObject *out = PyList_New(windows);
    for (Py_ssize_t k = 0; out != NULL && k < windows; k++) {
        const Py_ssize_t start = k * step, chars = cuts[k + 1] - cuts[k];
        const double weight = own[k] + share * ((double)chars / (double)shown[k]);
        PyObject *item = Py_BuildValue("(y#dL)", data + (start < size ? start : size),
                                       window_length(size, start, width), weight, estimated[k]);
        if (item == NULL) {
            Py_CLEAR(out);
        }
        else {
            PyList_SET_ITEM(out, k, item);
        }
    }
    PyMem_Free(own);
    PyMem_Free(shown);
    PyMem_Free(estimated);
    return out;
}

static PyGetSetDef weigher_getset[] = {
    {"simd", weigher_simd, NULL,
     "Whether pure ASCII is summed by the AVX2 pass (this CPU has it and the tables allow it).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static int
need_bytes(PyObject *obj, Py_ssize_t size, const char *name)
{
    if (!PyBytes_Check(obj) || PyBytes_GET_SIZE(obj) != size) {
        PyErr_Format(PyExc_ValueError, "Weigher: %s must be bytes of length %zd", name, size);
        return -1;
    }
    return 0;
}

static PyObject *
weigher_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *keywords[] = {"classes", "weights", "class_extras", "char_extras",
                               "astral_low", "astral_high", "lower_code", "lower_run",
                               "lower_units", "punct_code", "punct_run", "punct_units",
                               "framing", NULL};
    PyObject *classes, *weights, *class_extras, *char_extras;
    int astral_low, astral_high, lower_code, punct_code;
    Py_ssize_t lower_run, punct_run;
    long long lower_units, punct_units;
    double framing;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOiiinLinLd:Weigher", keywords, &classes,
                                     &weights, &class_extras, &char_extras, &astral_low,
                                     &astral_high, &lower_code, &lower_run, &lower_units,
                                     &punct_code, &punct_run, &punct_units, &framing))
        return NULL;
    if (need_bytes(classes, BMP, "classes") < 0 || need_bytes(weights, 256, "weights") < 0 ||
        need_bytes(class_extras, 4 * 256, "class_extras") < 0)
        return NULL;
    if (char_extras != Py_None && need_bytes(char_extras, 2 * BMP, "char_extras") < 0)
        return NULL;
    if (lower_run < 1 || punct_run < 1 || lower_run > 64 || punct_run > 64 ||
        (lower_run & (lower_run - 1)) != 0 || (punct_run & (punct_run - 1)) != 0 || framing < 0 || !isfinite(framing) ||
        astral_low < 0 || astral_low > 255 || astral_high < 0 || astral_high > 255 ||
        lower_code < 0 || lower_code > 255 || punct_code < 0 || punct_code > 255) {
        PyErr_SetString(PyExc_ValueError, "Weigher: a run (a power of two up to 64), a class byte or framing is out of range");
        return NULL;
    }
    Weigher *self = (Weigher *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = weigher_vectorcall;
    PyObject *owned[4] = {classes, weights, class_extras, char_extras};
    for (int k = 0; k < 4; k++) {
        Py_INCREF(owned[k]);
        self->owned[k] = owned[k];
    }
    self->classes = (const unsigned char *)PyBytes_AS_STRING(classes);
    /* A class's extra goes into the weight of every pair it ends, so that the loop makes
     * one lookup per character. The pair code keeps the class's 5 bits; its own group
     * (which the class byte has in its low bits) is the same for every character of the
     * class, so it is read off the class table once. */
    const unsigned char *cb = self->classes;
    int group_of[32];
    for (int k = 0; k < 32; k++)
        group_of[k] = -1;
    for (Py_ssize_t cp = 0; cp < BMP; cp++)
        group_of[cb[cp] >> 3] = cb[cp] & 7;
    group_of[astral_low >> 3] = astral_low & 7;
    group_of[astral_high >> 3] = astral_high & 7;
    const unsigned char *wb = (const unsigned char *)PyBytes_AS_STRING(weights);
    const unsigned char *ce = (const unsigned char *)PyBytes_AS_STRING(class_extras);
    for (int code = 0; code < 256; code++) {
        uint32_t extra = 0;
        int group = group_of[code >> 3];
        if (group >= 0) {
            int k = (code & 0xF8) | group;
            extra = (uint32_t)ce[4 * k] | ((uint32_t)ce[4 * k + 1] << 8) |
                    ((uint32_t)ce[4 * k + 2] << 16) | ((uint32_t)ce[4 * k + 3] << 24);
        }
        self->weights[code] = wb[code] + extra;
    }
    self->latin1_ok = 1;
    self->latin1_ranges = 1;
    for (int cp = 0; cp < 256; cp++) {
        if (in_lower_range((unsigned)cp) != (cb[cp] == (unsigned)lower_code) ||
            in_punct_range((unsigned)cp) != (cb[cp] == (unsigned)punct_code))
            self->latin1_ranges = 0;
        const unsigned c = cb[cp];
        self->latin1_groups[cp] = c & 7;
        for (int g = 0; g < 8; g++)
            self->latin1_weights[g][cp] = self->weights[(c & 0xF8u) | (unsigned)g];
        if ((c == (unsigned)lower_code) != ((c & 7) == ((unsigned)lower_code & 7)) ||
            (c == (unsigned)punct_code) != ((c & 7) == ((unsigned)punct_code & 7)))
            self->latin1_ok = 0;
    }
    self->char_extras =
        char_extras == Py_None ? NULL : (const unsigned char *)PyBytes_AS_STRING(char_extras);
    if (self->char_extras != NULL) { /* below U+0100 the extra goes into the weight */
        const unsigned char *cx = self->char_extras;
        for (int cp = 0; cp < 256; cp++)
            for (int g = 0; g < 8; g++)
                self->latin1_weights[g][cp] += (unsigned)cx[2 * cp] | ((unsigned)cx[2 * cp + 1] << 8);
    }
    /* the six ASCII sets (ascii_units): every character of a set must have its set's
     * class byte and weights */
    int first_of[ASCII_SETS] = {0, 'a', 'A', '0', ' ', '\n'};
    self->ascii_ok = 1;
    for (int cp = 0; cp < 128; cp++) {
        const int first = first_of[ascii_set_of((unsigned)cp)];
        if (cb[cp] != cb[first])
            self->ascii_ok = 0;
        for (int g = 0; g < 8; g++)
            if (self->latin1_weights[g][cp] != self->latin1_weights[g][first])
                self->ascii_ok = 0;
    }
    for (int a = 0; a < ASCII_SETS; a++) {
        const unsigned c = cb[first_of[a]];
        self->ascii_lower[a] = c == (unsigned)lower_code ? 0x80 : 0;
        self->ascii_punct[a] = c == (unsigned)punct_code ? 0x80 : 0;
        for (int b = 0; b < ASCII_SETS; b++) {
            const uint32_t weight = self->latin1_weights[c & 7][first_of[b]];
            if (weight > 255) /* the pass sums weights of one byte */
                self->ascii_ok = 0;
            self->ascii_weights[8 * a + b] = (unsigned char)weight;
        }
    }
    self->astral_low = (unsigned char)astral_low;
    self->astral_high = (unsigned char)astral_high;
    self->lower_code = (unsigned char)lower_code;
    self->punct_code = (unsigned char)punct_code;
    self->lower_shift = __builtin_ctzll((unsigned long long)lower_run);
    self->punct_shift = __builtin_ctzll((unsigned long long)punct_run);
    self->lower_units = lower_units;
    self->punct_units = punct_units;
    self->framing = framing;
    return (PyObject *)self;
}

static void
weigher_dealloc(PyObject *op)
{
    Weigher *self = (Weigher *)op;
    for (int k = 0; k < 4; k++)
        Py_XDECREF(self->owned[k]);
    Py_TYPE(op)->tp_free(op);
}

static PyMethodDef weigher_methods[] = {
    {"units", (PyCFunction)(void (*)(void))weigher_units, METH_VARARGS | METH_KEYWORDS,
     "units(text, *, simd=True) -> int: the sum before rounding, in 1/128 tokens (for tests;\n"
     "simd=False sums pure ASCII by the table look-ups instead of the AVX2 pass)."},
    {"strata", (PyCFunction)weigher_strata, METH_VARARGS,
     "strata(text, windows, width, alike) -> list: windowfit.vocabulary._strata of a text of\n"
     "ASCII, in one call: (window bytes, weight, estimate) for each of the windows."},
    {"estimates", (PyCFunction)weigher_estimates, METH_VARARGS,
     "estimates(text, cuts) -> list: the estimate of text[cuts[k]:cuts[k + 1]] for each k,\n"
     "as the weigher gives each slice, without slicing (cuts do not fall, 0 to len(text))."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject WeigherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "windowfit._weigh.Weigher",
    .tp_basicsize = sizeof(Weigher),
    .tp_dealloc = weigher_dealloc,
    .tp_vectorcall_offset = offsetof(Weigher, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Weigher(classes, weights, class_extras, char_extras, astral_low, astral_high,\n"
              "lower_code, lower_run, lower_units, punct_code, punct_run, punct_units, framing)\n"
              "A profile's estimate as a callable: weigher(text) -> tokens.",
    .tp_methods = weigher_methods,
    .tp_getset = weigher_getset,
    .tp_new = weigher_new,
};

static struct PyModuleDef weigh_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "windowfit._weigh",
    .m_doc = "The profile estimate of windowfit.profiles in one pass (optional speedup).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__weigh(void)
{
#if WEIGH_X86
    have_avx2 = cpu_has_avx2();
#endif
    if (PyType_Ready(&WeigherType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&weigh_module);
    if (module == NULL)
        return NULL;
    if (PyModule_AddIntConstant(module, "AVX2_BUILT", WEIGH_X86) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    Py_INCREF(&WeigherType);
    if (PyModule_AddObject(module, "Weigher", (PyObject *)&WeigherType) < 0) {
        Py_DECREF(&WeigherType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
