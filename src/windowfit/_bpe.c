/*
 * windowfit._bpe: exact byte-pair-encoding token counts, in C, for tokenizers whose
 * vocabulary is a rank file (OpenAI's cl100k_base and o200k_base, Mistral's Tekken), and
 * for byte-level BPE tokenizer.json files (DeepSeek-V3, legacy Claude).
 *
 * Why it exists: the profiles estimate a count from character classes, and a class cannot
 * see what costs most in text that is not English: whether a word is in the vocabulary.
 * Italian, Basque or Indonesian letters are the same classes as English ones, and the
 * profiles count those languages 10-45% low. Counting with the vocabulary itself is exact,
 * but tiktoken spends most of its time in a general regular-expression engine that splits
 * the text into pieces. This module splits with a hand-written scanner for each of the
 * three pre-tokenizer patterns and merges each piece by rank as tiktoken does, so the
 * count is tiktoken's, many times faster. It holds no vocabulary of its own: the tokens
 * and the Unicode categories come from Python (see windowfit.vocabulary), and the tests
 * compare every count with tiktoken's on arbitrary text.
 *
 * The same holds for two Hugging Face byte-level BPE files (DeepSeek-V3's, the legacy
 * Claude one) in the merge mode: given merges, a Vocabulary merges each piece by the pair
 * of tokens with the lowest merge index, as Hugging Face's tokenizers does (which is not
 * always tiktoken's order: see pair_scan_merge), and the tests compare with tokenizers.
 *
 * windowfit's conservative estimate counts every text with five vocabularies; a Joint
 * (below) holds one slot table for all their tokens, so that the words the first
 * vocabulary looked up are in the processor's cache for the other four.
 *
 * A Vocabulary's tables are immutable after construction and a long text is counted
 * without the GIL, so any number of threads may count with one at once. A short text
 * (CACHE_ABOVE bytes or fewer) is counted with the GIL held: it takes microseconds, and
 * its pieces go through the Vocabulary's one mutable part, a cache of merged pieces shared
 * by every short text (a conversation is thousands of short texts, each too short for a
 * cache of its own to pay, whose words recur across them). The GIL is what guards that
 * cache; a build without a GIL counts short texts without it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Unicode categories as the patterns see them (one byte per code point, from Python).
 * The rank-file patterns need only codes 0-7; DeepSeek's tells punctuation and symbols
 * apart (\p{P}, \p{S}), so its table (and only its) also holds codes 8 and 9, taken out of
 * CAT_OTHER: every mask that holds CAT_OTHER holds them too, and the other patterns match
 * as they did. */
enum {
    CAT_OTHER = 0,   /* controls, unassigned (and punctuation, symbols in a 0-7 table) */
    CAT_UPPER = 1,   /* Lu, Lt */
    CAT_LOWER = 2,   /* Ll */
    CAT_LETTER = 3,  /* Lm, Lo */
    CAT_MARK = 4,    /* Mn, Mc, Me */
    CAT_NUMBER = 5,  /* Nd, Nl, No */
    CAT_SPACE = 6,   /* White_Space but \r and \n */
    CAT_NEWLINE = 7, /* \r, \n */
    CAT_COUNT = 8,
    CAT_PUNCT = 8,   /* Pc, Pd, Ps, Pe, Pi, Pf, Po (a DeepSeek table only) */
    CAT_SYMBOL = 9,  /* Sm, Sc, Sk, So (a DeepSeek table only) */
    CAT_COUNT_SPLIT = 10
};
#define BIT(c) (1u << (c))
#define M_LETTER (BIT(CAT_UPPER) | BIT(CAT_LOWER) | BIT(CAT_LETTER))
#define M_SPACE (BIT(CAT_SPACE) | BIT(CAT_NEWLINE))
#define M_PS (BIT(CAT_PUNCT) | BIT(CAT_SYMBOL))     /* [\p{P}\p{S}] */
#define M_OTHER (BIT(CAT_OTHER) | BIT(CAT_MARK) | M_PS) /* [^\s\p{L}\p{N}] */
#define M_PREFIX (M_OTHER | BIT(CAT_SPACE))         /* [^\r\n\p{L}\p{N}] */
#define M_HEAD (BIT(CAT_UPPER) | BIT(CAT_LETTER) | BIT(CAT_MARK)) /* [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] */
#define M_TAIL (BIT(CAT_LOWER) | BIT(CAT_LETTER) | BIT(CAT_MARK)) /* [\p{Ll}\p{Lm}\p{Lo}\p{M}] */

/* The patterns: cl100k_base's, and o200k_base's (Tekken's is o200k's without the
 * contractions and with one digit a piece); GPT-2's (Hugging Face's ByteLevel
 * pre-tokenizer: the legacy Claude tokenizer) and DeepSeek-V3's three isolating splits. */
enum {
    PATTERN_CL100K = 0,
    PATTERN_O200K = 1,
    PATTERN_TEKKEN = 2,
    PATTERN_GPT2 = 3,
    PATTERN_DEEPSEEK = 4,
    PATTERN_LAST = PATTERN_DEEPSEEK
};

#define NO_RANK UINT32_MAX
#define FILTER_BITS (1u << 22)
#define CODE_POINTS 0x110000
/* Pieces longer than this (a run of letters with no space: a hash, a long identifier)
 * are merged in parts of at most this many bytes, cut where a character starts, so that
 * the memory a merge takes stays bounded (about 36 bytes a byte). A count is then within
 * about a token per cut of tiktoken's (merging greedily, two parts can end in one token
 * more or one fewer than the whole); windowfit's real counters cut such texts too (see
 * tokenizers.split_text). */
#define LONGEST_MERGE 65536
/* Up to this many bytes a piece is merged by scanning for the lowest rank (fastest for
 * the short pieces most text is); a longer one with a heap. */
#define SCAN_MERGE 64
/* The pieces a count remembers (those that needed merging, up to CACHED_BYTES long):
 * names and words out of the vocabulary come back, and merging them is the slow part. */
#define CACHE_SLOTS 4096
#define CACHED_BYTES 20
#define CACHE_ABOVE 4096 /* texts shorter than this many bytes do without */

/* A slot holds a token's first 8 bytes, so that a token of up to 8 bytes (most words
 * with their space) is found with one memory access. */
typedef struct {
    uint64_t head;  /* the token's first 8 bytes, zero-padded */
    uint32_t rank1; /* rank + 1; 0 for an empty slot */
    uint32_t size;  /* the token's length */
} Slot;

/* The merge mode (Hugging Face's BPE): a slot of the pair table says that the tokens
 * left and right, side by side, are joined by merge number rank into token result. */
typedef struct {
    uint64_t key;    /* left << 32 | right */
    uint32_t rank1;  /* merge index + 1; 0 for an empty slot */
    uint32_t result; /* the token the pair becomes */
} Pair;

typedef struct {
    PyObject_HEAD
    PyObject *blob_obj;
    PyObject *categories_obj;
    const unsigned char *blob;       /* every token's bytes, in rank (merge mode: id) order */
    uint32_t *offsets;               /* token r is blob[offsets[r]:offsets[r+1]] */
    uint32_t tokens;
    Slot *slots;
    uint32_t mask;
    uint32_t *byte_pairs;            /* the rank of every two-byte token, by its bytes */
    unsigned char *two_bytes;        /* the tokens of every two-byte piece (1 or 2), by its
                                      * bytes: a piece of a space and a letter or digit,
                                      * or of two letters, is counted without a hash and a
                                      * trip to the slots (most pieces of single letters or
                                      * digits between spaces, a fifth of English's) */
    uint64_t *present;               /* one bit per hash value (FILTER_BITS of them): set
                                      * where a token's hash lands; most joins a merge
                                      * asks for are not tokens, and this small table
                                      * (in cache) says so without a trip to the slots */
    const unsigned char *categories; /* code point -> CAT_* */
    int pattern;
    /* merge mode only (pairs == NULL: rank mode) */
    Pair *pairs;
    uint32_t pair_mask;
    uint64_t *pair_present; /* the pairs' present (one bit per hash value): most pairs a
                             * long piece's merge asks for have no merge */
    uint32_t byte_id[256];  /* the token of each single byte */
    uint64_t *byte_merges;  /* the merge of every two bytes' tokens, by the bytes: merge
                             * index << 32 | the token made (NO_RANK << 32 where none), so
                             * that a merge starts without hashing a pair a byte */
    unsigned char *whole;   /* whole[r]: merging token r's bytes ends in token r */
    void *shared;           /* short texts' merged pieces (Cached[CACHE_SLOTS]), made on
                             * first use, touched only with the GIL held */
} Vocabulary;

/* ---------------------------------------------------------------------------------- */
/* The rank table                                                                      */
/* ---------------------------------------------------------------------------------- */

/* p[0:n] (n <= 8) as a word, zero-padded: what memcpy into a zeroed word gives. On a
 * little-endian processor by loads of fixed size. Why not that memcpy: of a variable size
 * it becomes single bytes stored to the stack and read back as one word, which the
 * processor cannot forward from its store buffer (a stall of a dozen cycles or more on
 * every word looked up: a quarter of the time of counting English). Overlapping loads of
 * the same bytes put them in the same places there, so or-ing them is exact; on a
 * big-endian one they would not, and the memcpy stays. */
static inline uint64_t
load_upto8(const unsigned char *p, Py_ssize_t n)
{
#if PY_LITTLE_ENDIAN
    if (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        return w;
    }
    if (n >= 4) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + n - 4, 4);
        return (uint64_t)lo | ((uint64_t)hi << (8 * (n - 4)));
    }
    if (n > 0) {
        return (uint64_t)p[0] | ((uint64_t)p[n >> 1] << (8 * (n >> 1))) |
               ((uint64_t)p[n - 1] << (8 * (n - 1)));
    }
    return 0;
#else
    uint64_t w = 0;
    memcpy(&w, p, (size_t)(n < 8 ? n : 8));
    return w;
#endif
}

static inline uint32_t
hash_finish(uint64_t h)
{
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return (uint32_t)h;
}

/* The hash of p[0:n], whose first 8 bytes (zero-padded) are head. */
static inline uint32_t
hash_with_head(const unsigned char *p, Py_ssize_t n, uint64_t head)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    if (n < 8) {
        return hash_finish(n > 0 ? (h ^ head) * 0x94D049BB133111EBull : h);
    }
    h = (h ^ head) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    p += 8;
    n -= 8;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
        p += 8;
        n -= 8;
    }
    if (n > 0) {
        h = (h ^ load_upto8(p, n)) * 0x94D049BB133111EBull;
    }
    return hash_finish(h);
}

static inline uint32_t
hash_bytes(const unsigned char *p, Py_ssize_t n)
{
    return hash_with_head(p, n, load_upto8(p, n));
}

static inline uint64_t
head_of(const unsigned char *p, Py_ssize_t n)
{
    return load_upto8(p, n);
}

/* The rank of p[0:n] (whose head and hash are given), from the slots, or NO_RANK. */
static inline uint32_t
slot_rank(const Vocabulary *v, const unsigned char *p, Py_ssize_t n, uint64_t head,
          uint32_t hash)
{
    uint32_t i = hash & v->mask;
    for (;;) {
        const Slot *s = &v->slots[i];
        if (s->rank1 == 0) {
            return NO_RANK;
        }
        if (s->head == head && (Py_ssize_t)s->size == n) {
            uint32_t r = s->rank1 - 1;
            if (n <= 8 || memcmp(v->blob + v->offsets[r] + 8, p + 8, (size_t)(n - 8)) == 0) {
                return r;
            }
        }
        i = (i + 1) & v->mask;
    }
}

/* The rank of p[0:n], or NO_RANK. The one-bit-per-hash table is asked first: the joins a
 * merge asks for are mostly not tokens. (A whole piece mostly is one: piece_count goes to
 * the slots straight away.) */
static inline uint32_t
rank_of(const Vocabulary *v, const unsigned char *p, Py_ssize_t n)
{
    uint64_t head = head_of(p, n);
    uint32_t hash = hash_with_head(p, n, head);
    uint32_t bit = (hash >> 7) & (FILTER_BITS - 1);
    if (v->present != NULL && !(v->present[bit >> 6] >> (bit & 63) & 1u)) {
        return NO_RANK;
    }
    return slot_rank(v, p, n, head, hash);
}

/* Every merge by rank starts from the ranks of a piece's byte pairs: a table of all
 * 65,536. */
static inline uint32_t
byte_pair_rank(const Vocabulary *v, const unsigned char *p)
{
    return v->byte_pairs[(uint32_t)p[0] << 8 | p[1]];
}

static inline uint32_t
hash_pair(uint64_t key)
{
    key ^= key >> 33;
    key *= 0xFF51AFD7ED558CCDull;
    key ^= key >> 33;
    key *= 0xC4CEB9FE1A85EC53ull;
    key ^= key >> 33;
    return (uint32_t)key;
}

/* The merge index of the tokens of the bytes p[0] and p[1] side by side, and the token
 * it makes, or NO_RANK (merge mode). */
static inline uint32_t
byte_merge_rank(const Vocabulary *v, const unsigned char *p, uint32_t *result)
{
    uint64_t merge = v->byte_merges[(uint32_t)p[0] << 8 | p[1]];
    *result = (uint32_t)merge;
    return (uint32_t)(merge >> 32);
}

/* The merge index of the pair (left, right) and the token it makes, or NO_RANK. */
static inline uint32_t
pair_rank(const Vocabulary *v, uint32_t left, uint32_t right, uint32_t *result)
{
    uint64_t key = ((uint64_t)left << 32) | right;
    uint32_t hash = hash_pair(key), bit = (hash >> 7) & (FILTER_BITS - 1);
    if (!(v->pair_present[bit >> 6] >> (bit & 63) & 1u)) {
        return NO_RANK;
    }
    uint32_t i = hash & v->pair_mask;
    for (;;) {
        const Pair *s = &v->pairs[i];
        if (s->rank1 == 0) {
            return NO_RANK;
        }
        if (s->key == key) {
            *result = s->result;
            return s->rank1 - 1;
        }
        i = (i + 1) & v->pair_mask;
    }
}

/* ---------------------------------------------------------------------------------- */
/* Merging one piece                                                                   */
/* ---------------------------------------------------------------------------------- */

/* The number of tokens byte-pair merging makes of p[0:n] (n <= SCAN_MERGE): the adjacent
 * pair whose join has the lowest rank (the leftmost of equals) is joined, again and
 * again, until no join is in the vocabulary. */
static Py_ssize_t
scan_merge(const Vocabulary *v, const unsigned char *p, Py_ssize_t n)
{
    uint32_t start[SCAN_MERGE + 1], rank[SCAN_MERGE + 1];
    Py_ssize_t parts = n + 1, i;
    /* part i starts at start[i]; rank[i] is the rank of part i joined with part i+1 */
    for (i = 0; i < parts; i++) {
        start[i] = (uint32_t)i;
        rank[i] = i + 2 <= n ? byte_pair_rank(v, p + i) : NO_RANK;
    }
    for (;;) {
        uint32_t best = NO_RANK;
        Py_ssize_t at = -1;
        for (i = 0; i + 1 < parts; i++) {
            if (rank[i] < best) {
                best = rank[i];
                at = i;
            }
        }
        if (at < 0) {
            break;
        }
        /* join part at with part at+1: drop entry at+1, then re-rank the joins that
         * changed (the new part with its right neighbour, its left neighbour with it) */
        memmove(start + at + 1, start + at + 2, sizeof(uint32_t) * (size_t)(parts - at - 2));
        memmove(rank + at + 1, rank + at + 2, sizeof(uint32_t) * (size_t)(parts - at - 2));
        parts--;
        rank[at] = at + 2 < parts
                       ? rank_of(v, p + start[at], (Py_ssize_t)(start[at + 2] - start[at]))
                       : NO_RANK;
        if (at > 0) {
            rank[at - 1] = rank_of(v, p + start[at - 1],
                                   (Py_ssize_t)(start[at + 1] - start[at - 1]));
        }
    }
    return parts - 1;
}

/* The same merge for a long piece, in n log n: the parts are a linked list (a part is
 * named by the byte it starts at) and the joins wait in a heap ordered by rank, then
 * position, which is the order the scan takes them in. An entry whose join has changed
 * since is skipped: a part's join only grows, and two spans are two tokens of two
 * ranks, so a stale entry never looks current. */
typedef uint64_t Join; /* rank << 32 | at: one comparison orders by rank, then position */

static inline Join
join_of(uint32_t rank, uint32_t at)
{
    return (uint64_t)rank << 32 | at;
}

static inline void
heap_push(Join *heap, Py_ssize_t *size, Join item)
{
    Py_ssize_t i = (*size)++;
    while (i > 0) {
        Py_ssize_t parent = (i - 1) / 2;
        if (heap[parent] <= item) {
            break;
        }
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = item;
}

/* The smallest entry, out. The hole it leaves goes down to a leaf by the smaller child
 * (chosen without a branch), and the last entry comes up from there: it mostly belongs
 * near the bottom, and a pop then costs one unforeseeable branch, not one a level. (Its
 * heap has room for one entry past the end: the child compared past it is never taken.) */
static inline Join
heap_pop(Join *heap, Py_ssize_t *size)
{
    const Join top = heap[0];
    const Py_ssize_t n = --(*size);
    const Join last = heap[n];
    Py_ssize_t i = 0;
    for (;;) {
        Py_ssize_t child = 2 * i + 1;
        if (child >= n) {
            break;
        }
        child += (Py_ssize_t)((child + 1 < n) & (heap[child + 1] < heap[child]));
        heap[i] = heap[child];
        i = child;
    }
    while (i > 0) {
        Py_ssize_t parent = (i - 1) / 2;
        if (heap[parent] <= last) {
            break;
        }
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = last;
    return top;
}

static Py_ssize_t
heap_merge(const Vocabulary *v, const unsigned char *p, Py_ssize_t n)
{
    uint32_t *next = (uint32_t *)PyMem_RawMalloc(sizeof(uint32_t) * (size_t)n * 3);
    Join *heap = (Join *)PyMem_RawMalloc(sizeof(Join) * (size_t)n * 3);
    if (next == NULL || heap == NULL) {
        PyMem_RawFree(next);
        PyMem_RawFree(heap);
        return -1;
    }
    uint32_t *prev = next + n, *rank = next + 2 * n;
    Py_ssize_t size = 0, parts = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        next[i] = (uint32_t)(i + 1);
        prev[i] = i == 0 ? NO_RANK : (uint32_t)(i - 1);
        rank[i] = i + 2 <= n ? byte_pair_rank(v, p + i) : NO_RANK;
        if (rank[i] != NO_RANK) {
            heap_push(heap, &size, join_of(rank[i], (uint32_t)i));
        }
    }
    while (size > 0) {
        Join join = heap_pop(heap, &size);
        uint32_t at = (uint32_t)join;
        if (rank[at] != (uint32_t)(join >> 32)) {
            continue; /* stale, or a part already joined to its left (rank NO_RANK) */
        }
        uint32_t gone = next[at];
        next[at] = next[gone];
        if (next[at] < (uint32_t)n) {
            prev[next[at]] = at;
        }
        rank[gone] = NO_RANK;
        parts--;
        uint32_t after = next[at];
        rank[at] = after < (uint32_t)n ? rank_of(v, p + at, (Py_ssize_t)(next[after] - at)) : NO_RANK;
        if (rank[at] != NO_RANK) {
            heap_push(heap, &size, join_of(rank[at], at));
        }
        if (prev[at] != NO_RANK) {
            uint32_t before = prev[at];
            rank[before] = rank_of(v, p + before, (Py_ssize_t)(after - before));
            if (rank[before] != NO_RANK) {
                heap_push(heap, &size, join_of(rank[before], before));
            }
        }
    }
    PyMem_RawFree(next);
    PyMem_RawFree(heap);
    return parts;
}

/* Hugging Face's merge (the merge mode): the piece starts as one token a byte, and the
 * adjacent pair of tokens with the lowest merge index (the leftmost of equals) is joined
 * into the token that merge makes, again and again, until no pair has a merge. This is not
 * tiktoken's rule: a token that two splits can make is ranked by its pair, not by its
 * bytes, so the two can join in another order. For p[0:n], n <= SCAN_MERGE. */
static Py_ssize_t
pair_scan_merge(const Vocabulary *v, const unsigned char *p, Py_ssize_t n)
{
    uint32_t id[SCAN_MERGE], rank[SCAN_MERGE], made[SCAN_MERGE];
    Py_ssize_t parts = n, i;
    /* part i is token id[i]; rank[i] is the merge of parts i and i+1, making made[i] */
    for (i = 0; i < n; i++) {
        id[i] = v->byte_id[p[i]];
    }
    for (i = 0; i + 1 < n; i++) {
        rank[i] = byte_merge_rank(v, p + i, &made[i]);
    }
    rank[n - 1] = NO_RANK;
    for (;;) {
        uint32_t best = NO_RANK;
        Py_ssize_t at = -1;
        for (i = 0; i + 1 < parts; i++) {
            if (rank[i] < best) {
                best = rank[i];
                at = i;
            }
        }
        if (at < 0) {
            break;
        }
        id[at] = made[at];
        size_t moved = sizeof(uint32_t) * (size_t)(parts - at - 2);
        memmove(id + at + 1, id + at + 2, moved);
        memmove(rank + at + 1, rank + at + 2, moved);
        memmove(made + at + 1, made + at + 2, moved);
        parts--;
        rank[at] = at + 1 < parts ? pair_rank(v, id[at], id[at + 1], &made[at]) : NO_RANK;
        if (at > 0) {
            rank[at - 1] = pair_rank(v, id[at - 1], id[at], &made[at - 1]);
        }
    }
    return parts;
}

/* The same for a long piece, with the list and heap of heap_merge. An entry is current
 * when its part's pair still has its merge index: one index is one pair of tokens, and
 * two tokens side by side from a given byte are one span, so it is the same pair. */
static Py_ssize_t
pair_heap_merge(const Vocabulary *v, const unsigned char *p, Py_ssize_t n)
{
    uint32_t *next = (uint32_t *)PyMem_RawMalloc(sizeof(uint32_t) * (size_t)n * 5);
    Join *heap = (Join *)PyMem_RawMalloc(sizeof(Join) * (size_t)n * 3);
    if (next == NULL || heap == NULL) {
        PyMem_RawFree(next);
        PyMem_RawFree(heap);
        return -1;
    }
    uint32_t *prev = next + n, *rank = next + 2 * n, *id = next + 3 * n, *made = next + 4 * n;
    Py_ssize_t size = 0, parts = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        next[i] = (uint32_t)(i + 1);
        prev[i] = i == 0 ? NO_RANK : (uint32_t)(i - 1);
        id[i] = v->byte_id[p[i]];
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        rank[i] = i + 1 < n ? byte_merge_rank(v, p + i, &made[i]) : NO_RANK;
        if (rank[i] != NO_RANK) {
            heap_push(heap, &size, join_of(rank[i], (uint32_t)i));
        }
    }
    while (size > 0) {
        Join join = heap_pop(heap, &size);
        uint32_t at = (uint32_t)join;
        if (rank[at] != (uint32_t)(join >> 32)) {
            continue; /* stale, or a part already joined to its left (rank NO_RANK) */
        }
        uint32_t gone = next[at];
        id[at] = made[at];
        next[at] = next[gone];
        if (next[at] < (uint32_t)n) {
            prev[next[at]] = at;
        }
        rank[gone] = NO_RANK;
        parts--;
        uint32_t after = next[at];
        rank[at] = after < (uint32_t)n ? pair_rank(v, id[at], id[after], &made[at]) : NO_RANK;
        if (rank[at] != NO_RANK) {
            heap_push(heap, &size, join_of(rank[at], at));
        }
        if (prev[at] != NO_RANK) {
            uint32_t before = prev[at];
            rank[before] = pair_rank(v, id[before], id[at], &made[before]);
            if (rank[before] != NO_RANK) {
                heap_push(heap, &size, join_of(rank[before], before));
            }
        }
    }
    PyMem_RawFree(next);
    PyMem_RawFree(heap);
    return parts;
}

/* A piece of SCAN_MERGE to BLOCK_MERGE bytes (a window's long word, run of punctuation
 * or digits) is merged with the joins' ranks kept in place, by the byte each part starts
 * at, and the lowest rank of every BLOCK of them beside: the next join is the leftmost
 * lowest of the blocks' lowest, then the leftmost of that rank in its block, which is the
 * heap's order (rank, then position). Why not the heap: a heap pop walks a level per
 * comparison, each a branch the processor cannot foresee, and on pieces of a few hundred
 * bytes the pops were most of a count (random letters: 94% of the time in the merge, most
 * of it sifting); a block's lowest is a short loop without branches to mispredict. */
#define BLOCK 16
#define BLOCK_MERGE 1024

static inline uint32_t
block_low(const uint32_t *rank, Py_ssize_t block)
{
    const uint32_t *r = rank + block * BLOCK;
    uint32_t m0 = r[0], m1 = r[1], m2 = r[2], m3 = r[3];
    for (int k = 4; k < BLOCK; k += 4) { /* four chains, not one a quarter as fast */
        m0 = r[k] < m0 ? r[k] : m0;
        m1 = r[k + 1] < m1 ? r[k + 1] : m1;
        m2 = r[k + 2] < m2 ? r[k + 2] : m2;
        m3 = r[k + 3] < m3 ? r[k + 3] : m3;
    }
    m0 = m1 < m0 ? m1 : m0;
    m2 = m3 < m2 ? m3 : m2;
    return m2 < m0 ? m2 : m0;
}

/* The join to make next: the position of the leftmost lowest rank, or -1 when no part
 * joins another. */
static inline Py_ssize_t
lowest_join(const uint32_t *rank, const uint32_t *low, Py_ssize_t blocks)
{
    /* the lowest by four running minimums without branches (a branch a block, taken at
     * random, was most of the time this took), then the first block that has it */
    uint32_t m0 = NO_RANK, m1 = NO_RANK, m2 = NO_RANK, m3 = NO_RANK;
    Py_ssize_t b = 0;
    for (; b + 4 <= blocks; b += 4) {
        m0 = low[b] < m0 ? low[b] : m0;
        m1 = low[b + 1] < m1 ? low[b + 1] : m1;
        m2 = low[b + 2] < m2 ? low[b + 2] : m2;
        m3 = low[b + 3] < m3 ? low[b + 3] : m3;
    }
    for (; b < blocks; b++) {
        m0 = low[b] < m0 ? low[b] : m0;
    }
    m0 = m1 < m0 ? m1 : m0;
    m2 = m3 < m2 ? m3 : m2;
    const uint32_t best = m2 < m0 ? m2 : m0;
    if (best == NO_RANK) {
        return -1;
    }
    Py_ssize_t in = 0;
    while (low[in] != best) {
        in++;
    }
    Py_ssize_t at = in * BLOCK;
    const Py_ssize_t end = at + BLOCK - 1; /* (the block holds its lowest: never past it) */
    while (at < end && rank[at] != best) {
        at++;
    }
    return at;
}

/* The merge of scan_merge (pair_mode 0) or pair_scan_merge (pair_mode 1) for p[0:n],
 * n <= BLOCK_MERGE, by blocks (see BLOCK_MERGE). */
static inline Py_ssize_t
block_merge(const Vocabulary *v, const unsigned char *p, Py_ssize_t n, int pair_mode)
{
    uint32_t next[BLOCK_MERGE], prev[BLOCK_MERGE], rank[BLOCK_MERGE], low[BLOCK_MERGE / BLOCK];
    uint32_t id[BLOCK_MERGE], made[BLOCK_MERGE]; /* pair mode: each part's token, and what
                                                  * it makes with the part after it */
    const Py_ssize_t blocks = (n + BLOCK - 1) / BLOCK;
    Py_ssize_t parts = n, i;
    for (i = 0; i < n; i++) {
        next[i] = (uint32_t)(i + 1);
        prev[i] = i == 0 ? NO_RANK : (uint32_t)(i - 1);
        if (pair_mode) {
            id[i] = v->byte_id[p[i]];
        }
    }
    for (i = 0; i + 1 < n; i++) {
        rank[i] = pair_mode ? byte_merge_rank(v, p + i, &made[i]) : byte_pair_rank(v, p + i);
    }
    for (i = n - 1; i < blocks * BLOCK; i++) {
        rank[i] = NO_RANK;
    }
    for (Py_ssize_t b = 0; b < blocks; b++) {
        low[b] = block_low(rank, b);
    }
    for (;;) {
        Py_ssize_t at = lowest_join(rank, low, blocks);
        if (at < 0) {
            break;
        }
        uint32_t gone = next[at];
        const Py_ssize_t in = at / BLOCK, gone_in = gone / BLOCK;
        const uint32_t gone_rank = rank[gone];
        if (pair_mode) {
            id[at] = made[at];
        }
        next[at] = next[gone];
        if (next[at] < (uint32_t)n) {
            prev[next[at]] = (uint32_t)at;
        }
        rank[gone] = NO_RANK;
        parts--;
        uint32_t after = next[at];
        if (after < (uint32_t)n) {
            rank[at] = pair_mode ? pair_rank(v, id[at], id[after], &made[at])
                                 : rank_of(v, p + at, (Py_ssize_t)(next[after] - (uint32_t)at));
        }
        else {
            rank[at] = NO_RANK;
        }
        uint32_t before = prev[at];
        if (before != NO_RANK) {
            const uint32_t was = rank[before];
            const uint32_t now = rank[before] =
                pair_mode ? pair_rank(v, id[before], id[at], &made[before])
                          : rank_of(v, p + before, (Py_ssize_t)(after - before));
            const Py_ssize_t before_in = before / BLOCK;
            if (before_in != in) { /* (else the block is looked at again below) */
                if (now < low[before_in]) {
                    low[before_in] = now;
                }
                else if (was == low[before_in]) {
                    low[before_in] = block_low(rank, before_in);
                }
            }
        }
        /* the block of the join made (whose lowest it was), and the next part's where its
         * join was that block's lowest */
        low[in] = block_low(rank, in);
        if (gone_in != in && gone_rank == low[gone_in]) {
            low[gone_in] = block_low(rank, gone_in);
        }
    }
    return parts;
}

static Py_ssize_t
merge_count(const Vocabulary *v, const unsigned char *p, Py_ssize_t n)
{
    if (v->pairs != NULL) {
        if (n <= SCAN_MERGE) {
            return pair_scan_merge(v, p, n);
        }
        return n <= BLOCK_MERGE ? block_merge(v, p, n, 1) : pair_heap_merge(v, p, n);
    }
    if (n <= SCAN_MERGE) {
        return scan_merge(v, p, n);
    }
    return n <= BLOCK_MERGE ? block_merge(v, p, n, 0) : heap_merge(v, p, n);
}

/* Whether p[0:n] (head and hash given) is one token without merging: in rank mode, when
 * it is a token; in merge mode, when it is a token that merging its bytes makes (known for
 * every token from the start), so that most words cost one look-up in either mode. */
static inline int
is_one_token(const Vocabulary *v, const unsigned char *p, Py_ssize_t n, uint64_t head,
             uint32_t hash)
{
    uint32_t r = slot_rank(v, p, n, head, hash);
    return r != NO_RANK && (v->whole == NULL || v->whole[r]);
}

typedef struct {
    uint32_t hash;
    uint32_t count;
    uint32_t size; /* 0: empty */
    unsigned char key[CACHED_BYTES];
} Cached;

/* The tokens of one piece p[0:n] of two bytes or more (count_text counts a byte as one),
 * whose head and hash (hash_with_head) are given. */
static Py_ssize_t
piece_merged(const Vocabulary *v, const unsigned char *p, Py_ssize_t n, uint32_t hash,
             Cached *cache);

static Py_ssize_t
piece_count(const Vocabulary *v, const unsigned char *p, Py_ssize_t n, uint64_t head,
            uint32_t hash, Cached *cache)
{
    if (is_one_token(v, p, n, head, hash)) {
        return 1;
    }
    return piece_merged(v, p, n, hash, cache);
}

/* The tokens of a piece that is not one token: merged (through the cache, for a short
 * one), or in parts of at most LONGEST_MERGE bytes. */
static Py_ssize_t
piece_merged(const Vocabulary *v, const unsigned char *p, Py_ssize_t n, uint32_t hash,
             Cached *cache)
{
    if (n <= LONGEST_MERGE) {
        if (cache == NULL || n > CACHED_BYTES) {
            return merge_count(v, p, n);
        }
        Cached *c = &cache[hash & (CACHE_SLOTS - 1)];
        if (c->size == (uint32_t)n && c->hash == hash && memcmp(c->key, p, (size_t)n) == 0) {
            return c->count;
        }
        Py_ssize_t count = merge_count(v, p, n);
        if (count > 0) {
            c->hash = hash;
            c->count = (uint32_t)count;
            c->size = (uint32_t)n;
            memcpy(c->key, p, (size_t)n);
        }
        return count;
    }
    Py_ssize_t total = 0;
    while (n > 0) {
        Py_ssize_t cut = n <= LONGEST_MERGE ? n : LONGEST_MERGE;
        while (cut < n && cut > 1 && (p[cut] & 0xC0) == 0x80) {
            cut--; /* not inside a character (where there is one to keep whole) */
        }
        uint64_t head_cut = head_of(p, cut);
        Py_ssize_t part = is_one_token(v, p, cut, head_cut, hash_with_head(p, cut, head_cut))
                              ? 1
                              : merge_count(v, p, cut);
        if (part < 0) {
            return -1;
        }
        total += part;
        p += cut;
        n -= cut;
    }
    return total;
}

/* ---------------------------------------------------------------------------------- */
/* Splitting into pieces                                                               */
/* ---------------------------------------------------------------------------------- */

typedef struct {
    const unsigned char *s;
    Py_ssize_t n;
    const unsigned char *categories;
} Text;

/* The code point at byte i and where the next starts. What is not UTF-8 (a stray or
 * missing continuation byte, a sequence cut off by the end: bytes given to count()
 * directly) is one byte of U+FFFD, so that nothing is read past the end. */
static inline uint32_t
code_at(const Text *t, Py_ssize_t i, Py_ssize_t *next)
{
    const unsigned char *s = t->s + i;
    unsigned char b = s[0];
    Py_ssize_t left = t->n - i;
    if (b < 0x80) {
        *next = i + 1;
        return b;
    }
    if (b >= 0xC2 && b < 0xE0 && left >= 2 && (s[1] & 0xC0) == 0x80) {
        *next = i + 2;
        return ((uint32_t)(b & 0x1F) << 6) | (s[1] & 0x3F);
    }
    if (b >= 0xE0 && b < 0xF0 && left >= 3 && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80) {
        *next = i + 3;
        return ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    }
    if (b >= 0xF0 && b < 0xF5 && left >= 4 && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80 &&
        (s[3] & 0xC0) == 0x80) {
        *next = i + 4;
        return ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
               ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    }
    *next = i + 1;
    return 0xFFFD;
}

static inline unsigned
cat_at(const Text *t, Py_ssize_t i, Py_ssize_t *next)
{
    uint32_t c = code_at(t, i, next);
    return c < CODE_POINTS ? t->categories[c] : CAT_OTHER;
}

/* Where a run of characters whose categories are in mask ends, from byte i. */
static inline Py_ssize_t
run_of(const Text *t, Py_ssize_t i, unsigned mask)
{
    while (i < t->n) {
        Py_ssize_t next;
        if (!(BIT(cat_at(t, i, &next)) & mask)) {
            break;
        }
        i = next;
    }
    return i;
}

static inline int
folds_to(uint32_t c, char lower)
{
    /* (?i) matching of an ASCII letter: its two cases, and for s the long s (U+017F),
     * which case-folds to it */
    return c == (uint32_t)lower || c == (uint32_t)(lower - 32) ||
           (lower == 's' && c == 0x017F);
}

/* cl100k's contraction at i ('s 't 'd 'm 'll 've 're, any case): its end, or -1. */
static Py_ssize_t
contraction(const Text *t, Py_ssize_t i, int o200k)
{
    Py_ssize_t a, b;
    if (i >= t->n || t->s[i] != '\'' || i + 1 >= t->n) {
        return -1;
    }
    uint32_t c1 = code_at(t, i + 1, &a);
    if (o200k) {
        /* 's|'t|'re|'ve|'m|'ll|'d, in that order */
        if (folds_to(c1, 's') || folds_to(c1, 't')) {
            return a;
        }
        if (a < t->n) {
            uint32_t c2 = code_at(t, a, &b);
            if ((folds_to(c1, 'r') && folds_to(c2, 'e')) || (folds_to(c1, 'v') && folds_to(c2, 'e'))) {
                return b;
            }
        }
        if (folds_to(c1, 'm')) {
            return a;
        }
        if (a < t->n) {
            uint32_t c2 = code_at(t, a, &b);
            if (folds_to(c1, 'l') && folds_to(c2, 'l')) {
                return b;
            }
        }
        if (folds_to(c1, 'd')) {
            return a;
        }
        return -1;
    }
    /* '(?i:[sdmt]|ll|ve|re) */
    if (folds_to(c1, 's') || folds_to(c1, 'd') || folds_to(c1, 'm') || folds_to(c1, 't')) {
        return a;
    }
    if (a < t->n) {
        uint32_t c2 = code_at(t, a, &b);
        if ((folds_to(c1, 'l') && folds_to(c2, 'l')) || (folds_to(c1, 'v') && folds_to(c2, 'e')) ||
            (folds_to(c1, 'r') && folds_to(c2, 'e'))) {
            return b;
        }
    }
    return -1;
}

/* The whitespace alternatives, at i where a whitespace character starts. */
static Py_ssize_t
space_piece(const Text *t, Py_ssize_t i, int end_alternative)
{
    Py_ssize_t j = i, last = i, newline_end = -1, next;
    while (j < t->n) {
        unsigned c = cat_at(t, j, &next);
        if (!(BIT(c) & M_SPACE)) {
            break;
        }
        if (c == CAT_NEWLINE) {
            newline_end = next;
        }
        last = j;
        j = next;
    }
    if (end_alternative && j == t->n) {
        return j; /* \s++$ */
    }
    if (newline_end >= 0) {
        return newline_end; /* \s*[\r\n] (cl100k), \s*[\r\n]+ (o200k) */
    }
    if (j == t->n) {
        return j; /* \s+(?!\S) at the end */
    }
    if (last > i) {
        return last; /* \s+(?!\S): all but the last, which goes with what follows */
    }
    return j; /* \s (cl100k), \s+ (o200k): here one character */
}

/* punctuation: ' ?[^\s\p{L}\p{N}]+' then newlines (and slashes, o200k), or -1 */
static Py_ssize_t
other_piece(const Text *t, Py_ssize_t i, int slashes)
{
    Py_ssize_t k = i, next;
    if (t->s[i] == ' ') {
        k = i + 1;
    }
    if (k >= t->n || !(BIT(cat_at(t, k, &next)) & M_OTHER)) {
        return -1;
    }
    k = run_of(t, next, M_OTHER);
    while (k < t->n && (t->s[k] == '\r' || t->s[k] == '\n' || (slashes && t->s[k] == '/'))) {
        k++;
    }
    return k;
}

/* The common piece of English and of code, all ASCII: letters, after an optional prefix
 * (any of [^\r\n\p{L}\p{N}] with prefix_any, else only a space), ended by an ASCII
 * character that is no letter; with case_split (o200k, Tekken) the letters are upper case
 * then lower case ([\p{Lu}]*[\p{Ll}]+ or [\p{Lu}]+[\p{Ll}]*). Its end, or -1 where the
 * pattern's own scanner must decide: a character past 0x7F may go on with the word (or be
 * a prefix), and an apostrophe may start a contraction (before the word for
 * contraction_first, cl100k's and GPT-2's; after it for contraction_after, o200k's). The
 * same ends as those scanners, at a third of the work: no category look-ups, one loop. */
static inline Py_ssize_t
ascii_word(const Text *t, Py_ssize_t i, int prefix_any, int case_split, int contraction_first,
           int contraction_after)
{
    const unsigned char *s = t->s;
    const Py_ssize_t n = t->n;
    Py_ssize_t j = i;
    unsigned char b = s[i];
#define ASCII_UPPER(x) ((unsigned char)((x) - 'A') < 26u)
#define ASCII_LOWER(x) ((unsigned char)((x) - 'a') < 26u)
#define ASCII_ALPHA(x) ((unsigned char)(((x) | 0x20) - 'a') < 26u)
    if (!ASCII_ALPHA(b)) {
        if (b >= 0x80 || (unsigned char)(b - '0') < 10u || b == '\r' || b == '\n' ||
            (b == '\'' && contraction_first) || (!prefix_any && b != ' ')) {
            return -1;
        }
        j = i + 1;
        if (j >= n || !ASCII_ALPHA(s[j])) {
            return -1;
        }
    }
    if (case_split) {
        while (j < n && ASCII_UPPER(s[j])) {
            j++;
        }
        while (j < n && ASCII_LOWER(s[j])) {
            j++;
        }
    }
    else {
        while (j < n && ASCII_ALPHA(s[j])) {
            j++;
        }
    }
#undef ASCII_UPPER
#undef ASCII_LOWER
#undef ASCII_ALPHA
    if (j < n && (s[j] >= 0x80 || (contraction_after && s[j] == '\''))) {
        return -1;
    }
    return j;
}

/* The end of \p{N}{1,most} whose first digit ends at j: ASCII digits by their bytes, a
 * digit of another script by its category. */
static inline Py_ssize_t
digits_piece(const Text *t, Py_ssize_t j, int most)
{
    Py_ssize_t next;
    for (int digits = 1; digits < most && j < t->n; digits++) {
        if (t->s[j] < 0x80) {
            if ((unsigned char)(t->s[j] - '0') >= 10u) {
                break;
            }
            j++;
        }
        else if (cat_at(t, j, &next) == CAT_NUMBER) {
            j = next;
        }
        else {
            break;
        }
    }
    return j;
}

static Py_ssize_t
next_cl100k(const Text *t, Py_ssize_t i)
{
    Py_ssize_t fast = ascii_word(t, i, 1, 0, 1, 0);
    if (fast >= 0) {
        return fast;
    }
    if ((unsigned char)(t->s[i] - '0') < 10u) {
        return digits_piece(t, i + 1, 3); /* (no other alternative starts at a digit) */
    }
    Py_ssize_t next, end;
    unsigned c = cat_at(t, i, &next);
    if ((end = contraction(t, i, 0)) >= 0) {
        return end;
    }
    if (BIT(c) & M_LETTER) {
        return run_of(t, next, M_LETTER);
    }
    if (BIT(c) & M_PREFIX && next < t->n) {
        Py_ssize_t after;
        if (BIT(cat_at(t, next, &after)) & M_LETTER) {
            return run_of(t, after, M_LETTER);
        }
    }
    if (c == CAT_NUMBER) {
        return digits_piece(t, next, 3);
    }
    if ((end = other_piece(t, i, 0)) >= 0) {
        return end;
    }
    return space_piece(t, i, 1);
}

/* [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+ from j: its end, or -1 */
static Py_ssize_t
word_lower(const Text *t, Py_ssize_t j)
{
    Py_ssize_t p = j, tail_end = -1, next;
    unsigned c;
    while (p < t->n && (BIT(c = cat_at(t, p, &next)) & M_HEAD)) {
        if (BIT(c) & M_TAIL) {
            tail_end = next;
        }
        p = next;
    }
    Py_ssize_t q = run_of(t, p, M_TAIL);
    if (q > p) {
        return q;
    }
    /* nothing lowercase after the head: the regex gives the head back one character at
     * a time until the tail can start, at the head's last Lm, Lo or mark */
    return tail_end;
}

/* [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]* from j: its end, or -1 */
static Py_ssize_t
word_upper(const Text *t, Py_ssize_t j)
{
    Py_ssize_t p = run_of(t, j, M_HEAD);
    if (p == j) {
        return -1;
    }
    return run_of(t, p, M_TAIL);
}

static Py_ssize_t
with_prefix(const Text *t, Py_ssize_t i, unsigned c, Py_ssize_t next,
            Py_ssize_t (*word)(const Text *, Py_ssize_t))
{
    Py_ssize_t end;
    if ((BIT(c) & M_PREFIX) && next < t->n && (end = word(t, next)) >= 0) {
        return end;
    }
    return word(t, i);
}

static Py_ssize_t
next_o200k(const Text *t, Py_ssize_t i, int contractions, int max_digits)
{
    Py_ssize_t fast = ascii_word(t, i, 1, 1, 0, contractions);
    if (fast >= 0) {
        return fast;
    }
    if ((unsigned char)(t->s[i] - '0') < 10u) {
        return digits_piece(t, i + 1, max_digits); /* (as in next_cl100k) */
    }
    Py_ssize_t next, end;
    unsigned c = cat_at(t, i, &next);
    if ((end = with_prefix(t, i, c, next, word_lower)) >= 0 ||
        (end = with_prefix(t, i, c, next, word_upper)) >= 0) {
        if (contractions) {
            Py_ssize_t more = contraction(t, end, 1);
            if (more >= 0) {
                return more;
            }
        }
        return end;
    }
    if (c == CAT_NUMBER) {
        return digits_piece(t, next, max_digits);
    }
    if ((end = other_piece(t, i, 1)) >= 0) {
        return end;
    }
    return space_piece(t, i, 0);
}

/* \s+(?!\S)|\s+ at i where a whitespace character starts (GPT-2: no newline rule). */
static Py_ssize_t
blank_piece(const Text *t, Py_ssize_t i)
{
    Py_ssize_t j = i, last = i, next;
    while (j < t->n && (BIT(cat_at(t, j, &next)) & M_SPACE)) {
        last = j;
        j = next;
    }
    if (j == t->n || last == i) {
        return j; /* up to the end, or one character before \S */
    }
    return last; /* all but the last, which goes with what follows */
}

/* GPT-2's pattern, case-sensitive:
 * 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static Py_ssize_t
next_gpt2(const Text *t, Py_ssize_t i)
{
    Py_ssize_t fast = ascii_word(t, i, 0, 0, 1, 0);
    if (fast >= 0) {
        return fast;
    }
    Py_ssize_t next, after;
    unsigned c = cat_at(t, i, &next);
    if (t->s[i] == '\'' && next < t->n) {
        unsigned char c1 = t->s[next];
        if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
            return next + 1;
        }
        if (next + 1 < t->n) {
            unsigned char c2 = t->s[next + 1];
            if (((c1 == 'r' || c1 == 'v') && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
                return next + 2;
            }
        }
    }
    if (t->s[i] == ' ' && next < t->n) {
        unsigned d = cat_at(t, next, &after);
        if (BIT(d) & M_LETTER) {
            return run_of(t, after, M_LETTER);
        }
        if (d == CAT_NUMBER) {
            return run_of(t, after, BIT(CAT_NUMBER));
        }
        if (BIT(d) & M_OTHER) {
            return run_of(t, after, M_OTHER);
        }
    }
    if (BIT(c) & M_LETTER) {
        return run_of(t, next, M_LETTER);
    }
    if (c == CAT_NUMBER) {
        return run_of(t, next, BIT(CAT_NUMBER));
    }
    if (BIT(c) & M_OTHER) {
        return run_of(t, next, M_OTHER);
    }
    return blank_piece(t, i);
}

/* DeepSeek-V3's pre-tokenizer is three splits, each keeping its matches and the gaps
 * between them as pieces, the next one splitting within each piece:
 *   1. \p{N}{1,3}
 *   2. [\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+
 *   3. [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|
 *       ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * The first two give a span (a run of digits cut in threes, a run of the CJK ranges, or
 * what lies between them, since neither range holds a number); the third runs within it,
 * seeing its end as the text's end. */
#define M_LM (M_LETTER | BIT(CAT_MARK))
/* [^\r\n\p{L}\p{P}\p{S}] */
#define M_DS_PREFIX (BIT(CAT_OTHER) | BIT(CAT_MARK) | BIT(CAT_NUMBER) | BIT(CAT_SPACE))

static inline int
in_cjk(uint32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x3040 && c <= 0x30FF);
}

static inline int
ascii_punct(unsigned char c)
{
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E);
}

static inline int
ascii_alpha(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* The end of split 1 and 2's span that starts at i; *number says whether it is split 1's
 * (one to three digits). ASCII is scanned by its bytes, without category look-ups. */
static Py_ssize_t
deepseek_span(const Text *t, Py_ssize_t i, int *number)
{
    Py_ssize_t next, j;
    const unsigned char *s = t->s;
    uint32_t c = code_at(t, i, &next);
    *number = c < CODE_POINTS && t->categories[c] == CAT_NUMBER;
    if (*number) {
        return digits_piece(t, next, 3);
    }
    int cjk = in_cjk(c);
    j = next;
    if (!cjk) { /* up to the next digit, or the next character past ASCII */
        while (j < t->n && s[j] < 0x80 && (unsigned char)(s[j] - '0') >= 10u) {
            j++;
        }
    }
    while (j < t->n) {
        c = code_at(t, j, &next);
        if (cjk ? !in_cjk(c) : (in_cjk(c) || (c < CODE_POINTS && t->categories[c] == CAT_NUMBER))) {
            break;
        }
        j = next;
    }
    return j;
}

/* Split 3's match at i (t->n is the span's end), or -1. */
static Py_ssize_t
deepseek_match(const Text *t, Py_ssize_t i)
{
    Py_ssize_t next, after, j;
    unsigned c = cat_at(t, i, &next), d;
    unsigned char b = t->s[i];
    if (ascii_punct(b) && next < t->n && ascii_alpha(t->s[next])) {
        for (j = next; j < t->n && ascii_alpha(t->s[j]); j++) {
        }
        return j;
    }
    if ((BIT(c) & M_DS_PREFIX) && next < t->n && (BIT(cat_at(t, next, &after)) & M_LM)) {
        return run_of(t, after, M_LM);
    }
    if (BIT(c) & M_LM) {
        return run_of(t, next, M_LM);
    }
    if (b == ' ' && next < t->n && (BIT(d = cat_at(t, next, &after)) & M_PS)) {
        next = after;
        c = d;
    }
    if (BIT(c) & M_PS) {
        j = run_of(t, next, M_PS);
        while (j < t->n && (t->s[j] == '\r' || t->s[j] == '\n')) {
            j++;
        }
        return j;
    }
    if (BIT(c) & M_SPACE) {
        return space_piece(t, i, 0);
    }
    return -1;
}

/* Split 3's match at i in the most common cases of ASCII, by the bytes alone (no
 * category look-ups), or -1 where deepseek_match must decide: a word after one
 * character of the prefix or none, and punctuation (with a letter run after it, or a run
 * of it and newlines), each ended by ASCII. The span s[0:n] holds no digits. */
static inline Py_ssize_t
deepseek_ascii(const unsigned char *s, Py_ssize_t i, Py_ssize_t n)
{
    unsigned char b = s[i];
    Py_ssize_t j = i + 1;
    if (!ascii_alpha(b)) {
        if (j >= n || s[j] >= 0x80) {
            return -1;
        }
        if (ascii_punct(b)) {
            if (!ascii_alpha(s[j])) { /* ?[\p{P}\p{S}]+[\r\n]* */
                while (j < n && ascii_punct(s[j])) {
                    j++;
                }
                if (j < n && s[j] >= 0x80) {
                    return -1; /* (the run may go on past ASCII) */
                }
                while (j < n && (s[j] == '\r' || s[j] == '\n')) {
                    j++;
                }
                return j;
            }
            /* [punctuation][A-Za-z]+: ASCII letters only, whatever follows */
            while (j < n && ascii_alpha(s[j])) {
                j++;
            }
            return j;
        }
        if ((b != ' ' && b != '\t') || !ascii_alpha(s[j])) {
            return -1;
        }
        j++; /* a space or tab before the word */
    }
    while (j < n && ascii_alpha(s[j])) {
        j++;
    }
    return j < n && s[j] >= 0x80 ? -1 : j;
}

/* DeepSeek's piece at i: split 3's match there, or the gap up to its next match. *span is
 * the end of the current span of splits 1 and 2 (0 before the first). */
static Py_ssize_t
next_deepseek(const Text *t, Py_ssize_t i, Py_ssize_t *span)
{
    if (i >= *span) {
        int number;
        *span = deepseek_span(t, i, &number);
        if (number) {
            return *span; /* no alternative of split 3 matches in digits: one gap */
        }
    }
    if (t->s[i] < 0x80) {
        Py_ssize_t fast = deepseek_ascii(t->s, i, *span);
        if (fast >= 0) {
            return fast;
        }
    }
    Text part = {t->s, *span, t->categories};
    Py_ssize_t end = deepseek_match(&part, i), next;
    if (end >= 0) {
        return end;
    }
    code_at(&part, i, &next);
    while (next < part.n && deepseek_match(&part, next) < 0) {
        code_at(&part, next, &next);
    }
    return next;
}

static inline Py_ssize_t
next_piece(const Vocabulary *v, const Text *t, Py_ssize_t i, Py_ssize_t *state)
{
    switch (v->pattern) {
    case PATTERN_CL100K:
        return next_cl100k(t, i);
    case PATTERN_O200K:
        return next_o200k(t, i, 1, 3);
    case PATTERN_TEKKEN:
        return next_o200k(t, i, 0, 1);
    case PATTERN_GPT2:
        return next_gpt2(t, i);
    default:
        return next_deepseek(t, i, state);
    }
}

/* ---------------------------------------------------------------------------------- */
/* Counting a text                                                                     */
/* ---------------------------------------------------------------------------------- */

/* Pieces are found AHEAD at a time before any is counted, and their slots asked of
 * memory together. Why: a count that runs between other work (an agent's, or the other
 * vocabularies of the conservative check, which take turns in the processor's cache)
 * finds the slot table (megabytes) cold, where each look-up waited for memory before the
 * next piece was found; cold, the windows of 300,000 characters took 3-5 times as long as
 * warm. Found ahead, the waits overlap: the cold conservative check of English, code and
 * digits a fifth to a quarter faster (RESULTS.md, session 15); the counts are the same. */
#define AHEAD 16
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(address) __builtin_prefetch(address)
#else
#define PREFETCH(address) ((void)0)
#endif

/* A Joint is one slot table for the tokens of several vocabularies (windowfit's
 * conservative estimate counts every text with five): a slot holds a token's bytes (the
 * first 8, and where the rest lie) and, a bit a vocabulary, whether a piece of those bytes
 * is one token there. Why: the five vocabularies' own tables (megabytes each) took turns
 * in the processor's cache, and a word the first had looked up was a trip to memory
 * again for each of the others; here the same words are the same slots, which the first
 * vocabulary's count leaves in the cache for the other four. A piece that is not one
 * token in a vocabulary is merged with that vocabulary's own tables, as count() does. */
#define JOINT_MOST 8

typedef struct {
    uint64_t head;  /* the token's first 8 bytes, zero-padded */
    uint32_t rank;  /* its rank (or id) in the vocabulary that holds its bytes */
    uint16_t size;  /* its length; 0 for an empty slot */
    uint8_t owner;  /* that vocabulary */
    uint8_t ones;   /* bit k: a piece of these bytes is one token in vocabulary k */
} JointSlot;

typedef struct Joint {
    PyObject_HEAD
    PyObject *vocabularies; /* the tuple of Vocabulary objects, held */
    int count;
    const Vocabulary *v[JOINT_MOST];
    JointSlot *slots;
    uint32_t mask;
    uint32_t used; /* slots filled (kept at most 60% of them while building) */
} Joint;

/* The ones bits of p[0:n] (n >= 3), whose head and hash (hash_with_head) are given. */
static inline unsigned
joint_ones(const Joint *j, const unsigned char *p, Py_ssize_t n, uint64_t head, uint32_t hash)
{
    uint32_t i = hash & j->mask;
    for (;;) {
        const JointSlot *s = &j->slots[i];
        if (s->size == 0) {
            return 0;
        }
        if (s->head == head && (Py_ssize_t)s->size == n) {
            const Vocabulary *o = j->v[s->owner];
            if (n <= 8 || memcmp(o->blob + o->offsets[s->rank] + 8, p + 8, (size_t)(n - 8)) == 0) {
                return s->ones;
            }
        }
        i = (i + 1) & j->mask;
    }
}

/* The tokens of all of t by v, or -1 when memory runs out. Where a Joint j is given (v its
 * vocabulary k, whose bit is bit), a piece's one token is looked for in the Joint's slots,
 * else in v's: the same count either way. */
/* (inlined into both callers, so that each loop is compiled for its own case: left to
 * itself the compiler called one loop from both, 3-5% slower on long pieces) */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((always_inline))
#endif
static inline Py_ssize_t
count_with(const Vocabulary *v, const Joint *j, unsigned bit, const Text *t, Cached *cache)
{
    Py_ssize_t total = 0, i = 0, state = 0;
    Py_ssize_t start[AHEAD], stop[AHEAD];
    uint64_t head[AHEAD];
    uint32_t hash[AHEAD];
    while (i < t->n) {
        int found = 0;
        while (found < AHEAD && i < t->n) {
            Py_ssize_t end = next_piece(v, t, i, &state);
            if (end - i <= 1) {
                total += end - i; /* one byte is one token */
            }
            else if (end - i == 2) {
                total += v->two_bytes[(uint32_t)t->s[i] << 8 | t->s[i + 1]];
            }
            else {
                uint64_t h = head_of(t->s + i, end - i);
                uint32_t x = hash_with_head(t->s + i, end - i, h);
                if (j != NULL) {
                    PREFETCH(&j->slots[x & j->mask]);
                }
                else {
                    PREFETCH(&v->slots[x & v->mask]);
                }
                start[found] = i;
                stop[found] = end;
                head[found] = h;
                hash[found] = x;
                found++;
            }
            i = end;
        }
        for (int f = 0; f < found; f++) {
            const unsigned char *p = t->s + start[f];
            Py_ssize_t n = stop[f] - start[f], tokens;
            if (j == NULL || n > 65535) {
                tokens = piece_count(v, p, n, head[f], hash[f], cache);
            }
            else {
                tokens = joint_ones(j, p, n, head[f], hash[f]) & bit
                             ? 1
                             : piece_merged(v, p, n, hash[f], cache);
            }
            if (tokens < 0) {
                return -1;
            }
            total += tokens;
        }
    }
    return total;
}

static Py_ssize_t
count_text(const Vocabulary *v, const Text *t, Cached *cache)
{
    return count_with(v, NULL, 0, t, cache);
}

/* count_text for vocabulary k of a Joint (see count_with). */
static Py_ssize_t
joint_count(const Joint *j, int k, const Text *t, Cached *cache)
{
    return count_with(j->v[k], j, 1u << k, t, cache);
}

/* ---------------------------------------------------------------------------------- */
/* The Python type                                                                     */
/* ---------------------------------------------------------------------------------- */

/* Merge mode: the pair table from merges (native-order uint32 triples left, right,
 * result, in merge order; a later merge of the same pair replaces an earlier one, as
 * Hugging Face's map does), each byte's token, and which tokens merge into themselves. */
static int
build_pairs(Vocabulary *self, PyObject *merges_obj)
{
    Py_ssize_t size = PyBytes_GET_SIZE(merges_obj);
    if (size % 12 != 0 || size / 12 >= (Py_ssize_t)(UINT32_MAX / 4)) {
        PyErr_SetString(PyExc_ValueError, "merges must be 4-byte integer triples");
        return -1;
    }
    uint32_t count = (uint32_t)(size / 12);
    const unsigned char *raw = (const unsigned char *)PyBytes_AS_STRING(merges_obj);
    uint32_t capacity = 1024;
    while (capacity < count + count / 4u + 2u) {
        capacity *= 2;
    }
    self->pairs = (Pair *)PyMem_Calloc(capacity, sizeof(Pair));
    self->whole = (unsigned char *)PyMem_Calloc(self->tokens, 1);
    self->pair_present = (uint64_t *)PyMem_Calloc(FILTER_BITS / 64, sizeof(uint64_t));
    if (self->pairs == NULL || self->whole == NULL || self->pair_present == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->pair_mask = capacity - 1;
    for (uint32_t m = 0; m < count; m++) {
        uint32_t triple[3];
        memcpy(triple, raw + (size_t)m * 12, 12);
        for (int k = 0; k < 3; k++) {
            if (triple[k] >= self->tokens) {
                PyErr_Format(PyExc_ValueError, "merge %u: token %u is not in the vocabulary", m,
                             triple[k]);
                return -1;
            }
        }
        const uint32_t *o = self->offsets;
        uint32_t left = o[triple[0] + 1] - o[triple[0]], right = o[triple[1] + 1] - o[triple[1]];
        if (left == 0 || right == 0 || o[triple[2] + 1] - o[triple[2]] != left + right ||
            memcmp(self->blob + o[triple[2]], self->blob + o[triple[0]], left) != 0 ||
            memcmp(self->blob + o[triple[2]] + left, self->blob + o[triple[1]], right) != 0) {
            PyErr_Format(PyExc_ValueError, "merge %u: token %u is not tokens %u and %u joined", m,
                         triple[2], triple[0], triple[1]);
            return -1;
        }
        uint64_t key = ((uint64_t)triple[0] << 32) | triple[1];
        uint32_t hash = hash_pair(key), bit = (hash >> 7) & (FILTER_BITS - 1);
        self->pair_present[bit >> 6] |= (uint64_t)1 << (bit & 63);
        uint32_t i = hash & self->pair_mask;
        while (self->pairs[i].rank1 != 0 && self->pairs[i].key != key) {
            i = (i + 1) & self->pair_mask;
        }
        self->pairs[i].key = key;
        self->pairs[i].rank1 = m + 1;
        self->pairs[i].result = triple[2];
    }
    for (int byte = 0; byte < 256; byte++) {
        unsigned char one = (unsigned char)byte;
        uint32_t r = rank_of(self, &one, 1);
        if (r == NO_RANK) {
            PyErr_Format(PyExc_ValueError, "byte %d is not a token", byte);
            return -1;
        }
        self->byte_id[byte] = r;
    }
    self->byte_merges = (uint64_t *)PyMem_Malloc(sizeof(uint64_t) * 65536);
    if (self->byte_merges == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (uint32_t pair = 0; pair < 65536; pair++) {
        uint32_t made = 0;
        uint32_t rank = pair_rank(self, self->byte_id[pair >> 8], self->byte_id[pair & 0xFF], &made);
        self->byte_merges[pair] = (uint64_t)rank << 32 | (rank == NO_RANK ? 0 : made);
    }
    for (uint32_t r = 0; r < self->tokens; r++) {
        Py_ssize_t n = (Py_ssize_t)(self->offsets[r + 1] - self->offsets[r]);
        if (n == 1) {
            self->whole[r] = 1;
        } else if (n > 1) {
            Py_ssize_t parts = merge_count(self, self->blob + self->offsets[r], n);
            if (parts < 0) {
                PyErr_NoMemory();
                return -1;
            }
            self->whole[r] = parts == 1;
        }
    }
    return 0;
}

static int
Vocabulary_init(Vocabulary *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"blob", "offsets", "categories", "pattern", "merges", NULL};
    PyObject *blob = NULL, *offsets_obj = NULL, *categories = NULL, *merges = Py_None;
    int pattern = -1;
    /* "|$": every argument keyword-only; all but merges are checked for below */
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$SSSiO", keywords, &blob, &offsets_obj,
                                     &categories, &pattern, &merges)) {
        return -1;
    }
    if (blob == NULL || offsets_obj == NULL || categories == NULL ||
        (kwargs == NULL || PyDict_GetItemString(kwargs, "pattern") == NULL)) {
        PyErr_SetString(PyExc_TypeError, "Vocabulary() needs blob, offsets, categories and pattern");
        return -1;
    }
    if (self->slots != NULL || self->offsets != NULL) {
        PyErr_SetString(PyExc_TypeError, "a Vocabulary is built once");
        return -1;
    }
    if (merges != Py_None && !PyBytes_Check(merges)) {
        PyErr_Format(PyExc_TypeError, "merges must be bytes or None, not %.100s",
                     Py_TYPE(merges)->tp_name);
        return -1;
    }
    int merge_mode = merges != Py_None;
    if (pattern < PATTERN_CL100K || pattern > PATTERN_LAST) {
        PyErr_Format(PyExc_ValueError, "pattern must be 0 to %d, not %d", PATTERN_LAST, pattern);
        return -1;
    }
    if (PyBytes_GET_SIZE(categories) != CODE_POINTS) {
        PyErr_Format(PyExc_ValueError, "categories must hold %d bytes, not %zd", CODE_POINTS,
                     PyBytes_GET_SIZE(categories));
        return -1;
    }
    /* only DeepSeek's pattern tells punctuation and symbols from the rest */
    int categories_limit = pattern == PATTERN_DEEPSEEK ? CAT_COUNT_SPLIT : CAT_COUNT;
    const unsigned char *cats = (const unsigned char *)PyBytes_AS_STRING(categories);
    for (Py_ssize_t c = 0; c < CODE_POINTS; c++) {
        if (cats[c] >= categories_limit) {
            PyErr_Format(PyExc_ValueError, "category %d of U+%04x is not one of 0-%d",
                         (int)cats[c], (int)c, categories_limit - 1);
            return -1;
        }
    }
    Py_ssize_t offsets_size = PyBytes_GET_SIZE(offsets_obj);
    Py_ssize_t blob_size = PyBytes_GET_SIZE(blob);
    if (offsets_size % 4 != 0 || offsets_size < 8 || offsets_size / 4 - 1 > (Py_ssize_t)UINT32_MAX / 4) {
        PyErr_SetString(PyExc_ValueError, "offsets must be at least two 4-byte integers");
        return -1;
    }
    uint32_t tokens = (uint32_t)(offsets_size / 4 - 1);
    uint32_t *offsets = (uint32_t *)PyMem_Malloc(sizeof(uint32_t) * ((size_t)tokens + 1));
    if (offsets == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(offsets, PyBytes_AS_STRING(offsets_obj), (size_t)offsets_size);
    for (uint32_t r = 0; r < tokens; r++) {
        /* in merge mode a token may be empty: an id that is no byte string (a special
         * token's), which no merge makes */
        if (offsets[r] > offsets[r + 1] || (offsets[r] == offsets[r + 1] && !merge_mode) ||
            (Py_ssize_t)offsets[r + 1] > blob_size) {
            PyErr_Format(PyExc_ValueError, "token %u: offsets %u..%u are not a token of the blob",
                         r, offsets[r], offsets[r + 1]);
            PyMem_Free(offsets);
            return -1;
        }
    }
    uint32_t capacity = 1024; /* at most 4/5 full: linear probing stays short */
    while (capacity < tokens + tokens / 4u + 2u) {
        capacity *= 2;
    }
    Slot *slots = (Slot *)PyMem_Calloc(capacity, sizeof(Slot));
    if (slots == NULL) {
        PyMem_Free(offsets);
        PyErr_NoMemory();
        return -1;
    }
    self->blob = (const unsigned char *)PyBytes_AS_STRING(blob);
    self->offsets = offsets;
    self->tokens = tokens;
    self->slots = slots;
    self->mask = capacity - 1;
    self->byte_pairs = (uint32_t *)PyMem_Malloc(sizeof(uint32_t) * 65536);
    uint64_t *present = (uint64_t *)PyMem_Calloc(FILTER_BITS / 64, sizeof(uint64_t));
    if (self->byte_pairs == NULL || present == NULL) {
        PyMem_Free(present);
        PyErr_NoMemory();
        return -1; /* dealloc frees what is held */
    }
    for (uint32_t r = 0; r < tokens; r++) {
        const unsigned char *key = self->blob + offsets[r];
        Py_ssize_t n = (Py_ssize_t)(offsets[r + 1] - offsets[r]);
        if (n == 0) {
            continue;
        }
        if (rank_of(self, key, n) != NO_RANK) {
            PyErr_Format(PyExc_ValueError, "token %u is also an earlier token", r);
            PyMem_Free(present); /* (not held yet: dealloc frees the rest) */
            return -1;
        }
        uint32_t i = hash_bytes(key, n) & self->mask;
        while (slots[i].rank1 != 0) {
            i = (i + 1) & self->mask;
        }
        slots[i].head = head_of(key, n);
        slots[i].rank1 = r + 1;
        slots[i].size = (uint32_t)n;
    }
    for (uint32_t r = 0; r < tokens; r++) {
        Py_ssize_t n = (Py_ssize_t)(offsets[r + 1] - offsets[r]);
        uint32_t bit = (hash_bytes(self->blob + offsets[r], n) >> 7) & (FILTER_BITS - 1);
        present[bit >> 6] |= (uint64_t)1 << (bit & 63);
    }
    self->present = present; /* (set last: rank_of does without it while building) */
    for (uint32_t pair = 0; pair < 65536; pair++) {
        unsigned char two[2] = {(unsigned char)(pair >> 8), (unsigned char)pair};
        self->byte_pairs[pair] = rank_of(self, two, 2);
    }
    if (merge_mode && build_pairs(self, merges) < 0) {
        return -1; /* dealloc frees what is held */
    }
    self->two_bytes = (unsigned char *)PyMem_Malloc(65536);
    if (self->two_bytes == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (uint32_t pair = 0; pair < 65536; pair++) {
        unsigned char two[2] = {(unsigned char)(pair >> 8), (unsigned char)pair};
        uint64_t head = head_of(two, 2);
        Py_ssize_t made =
            is_one_token(self, two, 2, head, hash_with_head(two, 2, head)) ? 1 : merge_count(self, two, 2);
        self->two_bytes[pair] = (unsigned char)made; /* (merging two bytes allocates nothing) */
    }
    Py_INCREF(blob);
    Py_INCREF(categories);
    self->blob_obj = blob;
    self->categories_obj = categories;
    self->categories = cats;
    self->pattern = pattern;
    return 0;
}

static void
Vocabulary_dealloc(Vocabulary *self)
{
    PyMem_Free(self->offsets);
    PyMem_Free(self->slots);
    PyMem_Free(self->pairs);
    PyMem_Free(self->pair_present);
    PyMem_Free(self->byte_pairs);
    PyMem_Free(self->two_bytes);
    PyMem_Free(self->byte_merges);
    PyMem_Free(self->present);
    PyMem_Free(self->whole);
    PyMem_Free(self->shared);
    Py_XDECREF(self->blob_obj);
    Py_XDECREF(self->categories_obj);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
ready(const Vocabulary *self)
{
    if (self->categories == NULL) {
        PyErr_SetString(PyExc_ValueError, "this Vocabulary was not built");
        return 0;
    }
    return 1;
}

/* The items of a sequence, as a tuple of its own: a float's or an int's conversion can
 * run Python code (__float__, __index__) that changes a list being read, and a tuple
 * holds its items. NULL with TypeError (message) where it is no sequence. */
static PyObject *
items_of(PyObject *sequence, const char *message)
{
    PyObject *fast = PySequence_Fast(sequence, message);
    if (fast == NULL) {
        return NULL;
    }
    PyObject *items = PySequence_Tuple(fast);
    Py_DECREF(fast);
    return items;
}

/* A long text's windows (windowfit.vocabulary._strata's list of (UTF-8, weight, the
 * profile's estimate)), read and converted once: what weigh() counts. */
typedef struct {
    PyObject *items; /* the tuple of windows, held (their bytes are read from it) */
    Py_ssize_t count;
    double *weight, *estimate;
} Windows;

static void
windows_free(Windows *w)
{
    Py_CLEAR(w->items);
    PyMem_Free(w->weight);
    w->weight = w->estimate = NULL;
}

static int
windows_read(PyObject *strata, Windows *w)
{
    w->items = items_of(strata, "weigh() takes a sequence of windows");
    w->weight = w->estimate = NULL;
    if (w->items == NULL) {
        return -1;
    }
    w->count = PyTuple_GET_SIZE(w->items);
    w->weight = (double *)PyMem_Malloc(sizeof(double) * (size_t)(w->count > 0 ? 2 * w->count : 1));
    if (w->weight == NULL) {
        PyErr_NoMemory();
        windows_free(w);
        return -1;
    }
    w->estimate = w->weight + w->count;
    for (Py_ssize_t k = 0; k < w->count; k++) {
        PyObject *item = PyTuple_GET_ITEM(w->items, k);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3 ||
            !PyBytes_Check(PyTuple_GET_ITEM(item, 0))) {
            PyErr_Format(PyExc_TypeError, "weigh(): window %zd is not (bytes, weight, estimate)", k);
            windows_free(w);
            return -1;
        }
        w->weight[k] = PyFloat_AsDouble(PyTuple_GET_ITEM(item, 1));
        w->estimate[k] = PyFloat_AsDouble(PyTuple_GET_ITEM(item, 2));
        if (!PyErr_Occurred() && w->estimate[k] == 0.0) {
            PyErr_Format(PyExc_ZeroDivisionError, "weigh(): window %zd has an estimate of 0", k);
        }
        if (PyErr_Occurred()) {
            windows_free(w);
            return -1;
        }
    }
    return 0;
}

/* What vocabulary v (or vocabulary k of the Joint j, where j is given) counts of the
 * windows: (the sum of each window's count times its weight, the lowest and the highest
 * of count over estimate). The windows are counted as count() counts short texts: with
 * the GIL held, through the shared cache. */
static PyObject *
windows_weighed(const Windows *w, const Vocabulary *v, const Joint *j, int k, Cached *cache)
{
    double total = 0.0, low = INFINITY, high = -INFINITY;
    for (Py_ssize_t i = 0; i < w->count; i++) {
        PyObject *data = PyTuple_GET_ITEM(PyTuple_GET_ITEM(w->items, i), 0);
        Text t = {(const unsigned char *)PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data),
                  v->categories};
        Cached *c = t.n <= CACHE_ABOVE ? cache : NULL;
        Py_ssize_t tokens = t.n == 0 ? 0 : j != NULL ? joint_count(j, k, &t, c) : count_text(v, &t, c);
        if (tokens < 0) {
            return PyErr_NoMemory();
        }
        total += (double)tokens * w->weight[i];
        double ratio = (double)tokens / w->estimate[i];
        low = ratio < low ? ratio : low;
        high = ratio > high ? ratio : high;
    }
    return Py_BuildValue("(ddd)", total, low, high);
}

/* The shared cache of short texts' merged pieces (see the top of this file), made on
 * first use; NULL without a GIL. */
static Cached *
shared_cache(Vocabulary *v)
{
#ifndef Py_GIL_DISABLED
    if (v->shared == NULL) {
        v->shared = PyMem_Calloc(CACHE_SLOTS, sizeof(Cached)); /* NULL: no cache */
    }
    return (Cached *)v->shared;
#else
    (void)v;
    return NULL;
#endif
}

/* The tokens of the UTF-8 bytes in t, by vocabulary v, or by vocabulary k of the Joint j
 * where j is given; -1 when memory runs out. A short text is counted with the GIL held,
 * through the shared cache (see the top of this file); a long one without the GIL, with a
 * cache of its own. */
static Py_ssize_t
counted(Vocabulary *v, const Joint *j, int k, const Text *t)
{
    Py_ssize_t total;
#ifndef Py_GIL_DISABLED
    if (t->n <= CACHE_ABOVE) {
        Cached *cache = shared_cache(v);
        return j != NULL ? joint_count(j, k, t, cache) : count_text(v, t, cache);
    }
#endif
    Py_BEGIN_ALLOW_THREADS
    Cached *cache = t->n > CACHE_ABOVE ? (Cached *)PyMem_RawCalloc(CACHE_SLOTS, sizeof(Cached)) : NULL;
    total = j != NULL ? joint_count(j, k, t, cache) : count_text(v, t, cache);
    PyMem_RawFree(cache);
    Py_END_ALLOW_THREADS
    return total;
}

static PyObject *
Vocabulary_count(Vocabulary *self, PyObject *data)
{
    if (!PyBytes_Check(data)) {
        PyErr_Format(PyExc_TypeError, "count() takes UTF-8 bytes, not %.100s",
                     Py_TYPE(data)->tp_name);
        return NULL;
    }
    if (!ready(self)) {
        return NULL;
    }
    Text t = {(const unsigned char *)PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data),
              self->categories};
    Py_ssize_t total = counted(self, NULL, 0, &t);
    return total < 0 ? PyErr_NoMemory() : PyLong_FromSsize_t(total);
}

/* A long text's count from its windows (see windows_weighed), in one call. Why: on
 * 300,000 characters of ASCII the interpreter's loops over the windows' counts (a call a
 * window, then two passes over the counts) took as long as counting them. */
static PyObject *
Vocabulary_weigh(Vocabulary *self, PyObject *strata)
{
    Windows w;
    if (!ready(self) || windows_read(strata, &w) < 0) {
        return NULL;
    }
    PyObject *out = windows_weighed(&w, self, NULL, 0, shared_cache(self));
    windows_free(&w);
    return out;
}

static PyObject *
Vocabulary_pieces(Vocabulary *self, PyObject *data)
{
    if (!PyBytes_Check(data)) {
        PyErr_Format(PyExc_TypeError, "pieces() takes UTF-8 bytes, not %.100s",
                     Py_TYPE(data)->tp_name);
        return NULL;
    }
    if (!ready(self)) {
        return NULL;
    }
    Text t = {(const unsigned char *)PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data),
              self->categories};
    PyObject *out = PyList_New(0);
    Py_ssize_t i = 0, state = 0;
    while (out != NULL && i < t.n) {
        Py_ssize_t end = next_piece(self, &t, i, &state);
        PyObject *piece = PyBytes_FromStringAndSize((const char *)t.s + i, end - i);
        if (piece == NULL || PyList_Append(out, piece) < 0) {
            Py_XDECREF(piece);
            Py_CLEAR(out);
            break;
        }
        Py_DECREF(piece);
        i = end;
    }
    return out;
}

static PyObject *
Vocabulary_rank(Vocabulary *self, PyObject *token)
{
    if (!PyBytes_Check(token)) {
        PyErr_Format(PyExc_TypeError, "rank() takes bytes, not %.100s", Py_TYPE(token)->tp_name);
        return NULL;
    }
    if (!ready(self)) {
        return NULL;
    }
    uint32_t r = rank_of(self, (const unsigned char *)PyBytes_AS_STRING(token),
                         PyBytes_GET_SIZE(token));
    return PyLong_FromLong(r == NO_RANK ? -1L : (long)r);
}

static PyObject *
Vocabulary_get_tokens(Vocabulary *self, void *closure)
{
    (void)closure;
    return PyLong_FromUnsignedLong(self->tokens);
}

static PyMethodDef vocabulary_methods[] = {
    {"count", (PyCFunction)Vocabulary_count, METH_O,
     "count(data) -> the number of tokens in the UTF-8 bytes data."},
    {"weigh", (PyCFunction)Vocabulary_weigh, METH_O,
     "weigh(strata) -> (sum of count x weight, lowest and highest count / estimate) of a\n"
     "long text's windows, each (UTF-8 bytes, weight, estimate)."},
    {"pieces", (PyCFunction)Vocabulary_pieces, METH_O,
     "pieces(data) -> the pre-tokenizer's pieces of the UTF-8 bytes data."},
    {"rank", (PyCFunction)Vocabulary_rank, METH_O,
     "rank(token) -> the rank of the bytes token, or -1 if it is not a token."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef vocabulary_getset[] = {
    {"tokens", (getter)Vocabulary_get_tokens, NULL, "the number of tokens", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject VocabularyType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "windowfit._bpe.Vocabulary",
    .tp_doc = "A byte-pair-encoding vocabulary and pre-tokenizer, counting exactly.",
    .tp_basicsize = sizeof(Vocabulary),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Vocabulary_init,
    .tp_dealloc = (destructor)Vocabulary_dealloc,
    .tp_methods = vocabulary_methods,
    .tp_getset = vocabulary_getset,
};

/* ---------------------------------------------------------------------------------- */
/* Several vocabularies counting one text                                              */
/* ---------------------------------------------------------------------------------- */

/* (The Joint's type and its count are with count_text, above.) */

/* Token r of vocabulary k into the slots: a new slot, or its bit in the one that holds
 * the same bytes. */
static void
joint_put(Joint *self, int k, uint32_t r)
{
    const Vocabulary *v = self->v[k];
    const unsigned char *key = v->blob + v->offsets[r];
    Py_ssize_t n = (Py_ssize_t)(v->offsets[r + 1] - v->offsets[r]);
    uint64_t head = head_of(key, n);
    uint32_t i = hash_with_head(key, n, head) & self->mask;
    for (;;) {
        JointSlot *s = &self->slots[i];
        if (s->size == 0) {
            s->head = head;
            s->rank = r;
            s->size = (uint16_t)n;
            s->owner = (uint8_t)k;
            s->ones = (uint8_t)(1u << k);
            self->used++;
            return;
        }
        const Vocabulary *o = self->v[s->owner];
        if (s->head == head && (Py_ssize_t)s->size == n &&
            (n <= 8 || memcmp(o->blob + o->offsets[s->rank] + 8, key + 8, (size_t)(n - 8)) == 0)) {
            s->ones |= (uint8_t)(1u << k);
            return;
        }
        i = (i + 1) & self->mask;
    }
}

/* The slots, grown to capacity (a power of two), the filled ones moved over. */
static int
joint_grow(Joint *self, uint32_t capacity)
{
    JointSlot *old = self->slots;
    uint32_t old_capacity = old == NULL ? 0 : self->mask + 1;
    JointSlot *slots = (JointSlot *)PyMem_Calloc(capacity, sizeof(JointSlot));
    if (slots == NULL || capacity == 0) {
        PyErr_NoMemory();
        PyMem_Free(slots);
        return -1;
    }
    self->slots = slots;
    self->mask = capacity - 1;
    for (uint32_t i = 0; i < old_capacity; i++) {
        const JointSlot *s = &old[i];
        if (s->size == 0) {
            continue;
        }
        const Vocabulary *o = self->v[s->owner];
        uint32_t at = hash_with_head(o->blob + o->offsets[s->rank], s->size, s->head) & self->mask;
        while (slots[at].size != 0) {
            at = (at + 1) & self->mask;
        }
        slots[at] = *s;
    }
    PyMem_Free(old);
    return 0;
}

static int
Joint_init(Joint *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"vocabularies", NULL};
    PyObject *given;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!:Joint", keywords, &PyTuple_Type, &given)) {
        return -1;
    }
    if (self->slots != NULL) {
        PyErr_SetString(PyExc_TypeError, "a Joint is built once");
        return -1;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(given);
    if (count < 1 || count > JOINT_MOST) {
        PyErr_Format(PyExc_ValueError, "a Joint takes 1 to %d vocabularies, not %zd", JOINT_MOST, count);
        return -1;
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *item = PyTuple_GET_ITEM(given, k);
        if (!PyObject_TypeCheck(item, &VocabularyType) || !ready((Vocabulary *)item)) {
            if (!PyErr_Occurred()) {
                PyErr_Format(PyExc_TypeError, "vocabulary %zd is not a Vocabulary", k);
            }
            return -1;
        }
        self->v[k] = (const Vocabulary *)item;
    }
    if (joint_grow(self, 1u << 16) < 0) {
        return -1;
    }
    for (int k = 0; k < (int)count; k++) {
        const Vocabulary *v = self->v[k];
        for (uint32_t r = 0; r < v->tokens; r++) {
            Py_ssize_t n = (Py_ssize_t)(v->offsets[r + 1] - v->offsets[r]);
            if (n < 3 || n > 65535 || (v->whole != NULL && !v->whole[r])) {
                continue; /* (shorter pieces are counted without slots; a token its bytes
                           * do not merge into is no piece's one token) */
            }
            if ((uint64_t)(self->used + 1) * 5 > (uint64_t)(self->mask + 1) * 3 &&
                joint_grow(self, (self->mask + 1) * 2) < 0) {
                return -1;
            }
            joint_put(self, k, r);
        }
    }
    self->count = (int)count;
    Py_INCREF(given);
    self->vocabularies = given;
    return 0;
}

static void
Joint_dealloc(Joint *self)
{
    PyMem_Free(self->slots);
    Py_XDECREF(self->vocabularies);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
joint_ready(const Joint *self)
{
    if (self->slots == NULL) {
        PyErr_SetString(PyExc_ValueError, "this Joint was not built");
        return 0;
    }
    return 1;
}

static PyObject *
Joint_counts(Joint *self, PyObject *data)
{
    if (!PyBytes_Check(data)) {
        PyErr_Format(PyExc_TypeError, "counts() takes UTF-8 bytes, not %.100s", Py_TYPE(data)->tp_name);
        return NULL;
    }
    if (!joint_ready(self)) {
        return NULL;
    }
    Py_ssize_t totals[JOINT_MOST];
    for (int k = 0; k < self->count; k++) {
        Text t = {(const unsigned char *)PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data),
                  self->v[k]->categories};
        totals[k] = counted((Vocabulary *)self->v[k], self, k, &t);
        if (totals[k] < 0) {
            return PyErr_NoMemory();
        }
    }
    PyObject *out = PyList_New(self->count);
    for (int k = 0; out != NULL && k < self->count; k++) {
        PyObject *value = PyLong_FromSsize_t(totals[k]);
        if (value == NULL) {
            Py_CLEAR(out);
        }
        else {
            PyList_SET_ITEM(out, k, value);
        }
    }
    return out;
}

/* Vocabulary.weigh for each of the vocabularies, one after another over the same windows. */
static PyObject *
Joint_weigh(Joint *self, PyObject *strata)
{
    Windows w;
    if (!joint_ready(self) || windows_read(strata, &w) < 0) {
        return NULL;
    }
    PyObject *out = PyList_New(self->count);
    for (int k = 0; out != NULL && k < self->count; k++) {
        Vocabulary *v = (Vocabulary *)self->v[k];
        PyObject *value = windows_weighed(&w, v, self, k, shared_cache(v));
        if (value == NULL) {
            Py_CLEAR(out);
        }
        else {
            PyList_SET_ITEM(out, k, value);
        }
    }
    windows_free(&w);
    return out;
}

static PyMethodDef joint_methods[] = {
    {"counts", (PyCFunction)Joint_counts, METH_O,
     "counts(data) -> each vocabulary's count of the UTF-8 bytes data, in order."},
    {"weigh", (PyCFunction)Joint_weigh, METH_O,
     "weigh(strata) -> each vocabulary's Vocabulary.weigh(strata), in order."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject JointType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "windowfit._bpe.Joint",
    .tp_doc = "Vocabularies counting the same texts through one slot table.",
    .tp_basicsize = sizeof(Joint),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Joint_init,
    .tp_dealloc = (destructor)Joint_dealloc,
    .tp_methods = joint_methods,
};

static struct PyModuleDef bpe_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "windowfit._bpe",
    .m_doc = "Exact byte-pair-encoding token counts (see windowfit.vocabulary).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__bpe(void)
{
    if (PyType_Ready(&VocabularyType) < 0 || PyType_Ready(&JointType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&bpe_module);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&VocabularyType);
    if (PyModule_AddObject(m, "Vocabulary", (PyObject *)&VocabularyType) < 0) {
        Py_DECREF(&VocabularyType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&JointType);
    if (PyModule_AddObject(m, "Joint", (PyObject *)&JointType) < 0) {
        Py_DECREF(&JointType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
