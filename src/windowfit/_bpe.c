/*
 * windowfit._bpe: exact byte-pair-encoding token counts, in C, for tokenizers whose
 * vocabulary is a rank file (OpenAI's cl100k_base and o200k_base, Mistral's Tekken).
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
 * A Vocabulary is immutable after construction and counts without the GIL, so any number
 * of threads may count with one at once.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Unicode categories as the patterns see them (one byte per code point, from Python). */
enum {
    CAT_OTHER = 0,   /* punctuation, symbols, controls, unassigned */
    CAT_UPPER = 1,   /* Lu, Lt */
    CAT_LOWER = 2,   /* Ll */
    CAT_LETTER = 3,  /* Lm, Lo */
    CAT_MARK = 4,    /* Mn, Mc, Me */
    CAT_NUMBER = 5,  /* Nd, Nl, No */
    CAT_SPACE = 6,   /* White_Space but \r and \n */
    CAT_NEWLINE = 7, /* \r, \n */
    CAT_COUNT = 8
};
#define BIT(c) (1u << (c))
#define M_LETTER (BIT(CAT_UPPER) | BIT(CAT_LOWER) | BIT(CAT_LETTER))
#define M_SPACE (BIT(CAT_SPACE) | BIT(CAT_NEWLINE))
#define M_OTHER (BIT(CAT_OTHER) | BIT(CAT_MARK))    /* [^\s\p{L}\p{N}] */
#define M_PREFIX (M_OTHER | BIT(CAT_SPACE))         /* [^\r\n\p{L}\p{N}] */
#define M_HEAD (BIT(CAT_UPPER) | BIT(CAT_LETTER) | BIT(CAT_MARK)) /* [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] */
#define M_TAIL (BIT(CAT_LOWER) | BIT(CAT_LETTER) | BIT(CAT_MARK)) /* [\p{Ll}\p{Lm}\p{Lo}\p{M}] */

/* The patterns: cl100k_base's, and o200k_base's (Tekken's is o200k's without the
 * contractions and with one digit a piece). */
enum { PATTERN_CL100K = 0, PATTERN_O200K = 1, PATTERN_TEKKEN = 2 };

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

typedef struct {
    PyObject_HEAD
    PyObject *blob_obj;
    PyObject *categories_obj;
    const unsigned char *blob;       /* every token's bytes, in rank order */
    uint32_t *offsets;               /* token r is blob[offsets[r]:offsets[r+1]] */
    uint32_t tokens;
    Slot *slots;
    uint32_t mask;
    uint32_t *pairs;                 /* the rank of every two-byte token, by its bytes */
    uint64_t *present;               /* one bit per hash value (FILTER_BITS of them): set
                                      * where a token's hash lands; most joins a merge
                                      * asks for are not tokens, and this small table
                                      * (in cache) says so without a trip to the slots */
    const unsigned char *categories; /* code point -> CAT_* */
    int pattern;
} Vocabulary;

/* ---------------------------------------------------------------------------------- */
/* The rank table                                                                      */
/* ---------------------------------------------------------------------------------- */

static inline uint32_t
hash_bytes(const unsigned char *p, Py_ssize_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
        p += 8;
        n -= 8;
    }
    if (n > 0) {
        uint64_t w = 0;
        memcpy(&w, p, (size_t)n);
        h = (h ^ w) * 0x94D049BB133111EBull;
    }
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return (uint32_t)h;
}

static inline uint64_t
head_of(const unsigned char *p, Py_ssize_t n)
{
    uint64_t w = 0;
    memcpy(&w, p, (size_t)(n < 8 ? n : 8));
    return w;
}

static inline uint32_t
rank_of(const Vocabulary *v, const unsigned char *p, Py_ssize_t n)
{
    uint32_t hash = hash_bytes(p, n);
    uint32_t bit = (hash >> 7) & (FILTER_BITS - 1);
    if (v->present != NULL && !(v->present[bit >> 6] >> (bit & 63) & 1u)) {
        return NO_RANK;
    }
    uint64_t head = head_of(p, n);
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

/* Every merge starts from the ranks of a piece's byte pairs: a table of all 65,536. */
static inline uint32_t
pair_rank(const Vocabulary *v, const unsigned char *p)
{
    return v->pairs[(uint32_t)p[0] << 8 | p[1]];
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
        rank[i] = i + 2 <= n ? pair_rank(v, p + i) : NO_RANK;
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
typedef struct {
    uint32_t rank;
    uint32_t at;
} Join;

static inline int
join_less(Join a, Join b)
{
    return a.rank < b.rank || (a.rank == b.rank && a.at < b.at);
}

static void
heap_push(Join *heap, Py_ssize_t *size, Join item)
{
    Py_ssize_t i = (*size)++;
    while (i > 0) {
        Py_ssize_t parent = (i - 1) / 2;
        if (!join_less(item, heap[parent])) {
            break;
        }
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = item;
}

static Join
heap_pop(Join *heap, Py_ssize_t *size)
{
    Join top = heap[0], last = heap[--(*size)];
    Py_ssize_t i = 0;
    for (;;) {
        Py_ssize_t child = 2 * i + 1;
        if (child >= *size) {
            break;
        }
        if (child + 1 < *size && join_less(heap[child + 1], heap[child])) {
            child++;
        }
        if (!join_less(heap[child], last)) {
            break;
        }
        heap[i] = heap[child];
        i = child;
    }
    if (*size > 0) {
        heap[i] = last;
    }
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
        rank[i] = i + 2 <= n ? pair_rank(v, p + i) : NO_RANK;
        if (rank[i] != NO_RANK) {
            heap_push(heap, &size, (Join){rank[i], (uint32_t)i});
        }
    }
    while (size > 0) {
        Join join = heap_pop(heap, &size);
        uint32_t at = join.at;
        if (rank[at] != join.rank) {
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
            heap_push(heap, &size, (Join){rank[at], at});
        }
        if (prev[at] != NO_RANK) {
            uint32_t before = prev[at];
            rank[before] = rank_of(v, p + before, (Py_ssize_t)(after - before));
            if (rank[before] != NO_RANK) {
                heap_push(heap, &size, (Join){rank[before], before});
            }
        }
    }
    PyMem_RawFree(next);
    PyMem_RawFree(heap);
    return parts;
}

static Py_ssize_t
merge_count(const Vocabulary *v, const unsigned char *p, Py_ssize_t n)
{
    return n <= SCAN_MERGE ? scan_merge(v, p, n) : heap_merge(v, p, n);
}

typedef struct {
    uint32_t hash;
    uint32_t count;
    uint32_t size; /* 0: empty */
    unsigned char key[CACHED_BYTES];
} Cached;

static Py_ssize_t
piece_count(const Vocabulary *v, const unsigned char *p, Py_ssize_t n, Cached *cache)
{
    if (n <= 1) {
        return n;
    }
    if (rank_of(v, p, n) != NO_RANK) {
        return 1;
    }
    if (n <= LONGEST_MERGE) {
        if (cache == NULL || n > CACHED_BYTES) {
            return merge_count(v, p, n);
        }
        uint32_t hash = hash_bytes(p, n);
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
        Py_ssize_t part = rank_of(v, p, cut) != NO_RANK ? 1 : merge_count(v, p, cut);
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

static Py_ssize_t
next_cl100k(const Text *t, Py_ssize_t i)
{
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
        int digits = 1;
        end = next;
        while (digits < 3 && end < t->n && cat_at(t, end, &next) == CAT_NUMBER) {
            end = next;
            digits++;
        }
        return end;
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
        int digits = 1;
        end = next;
        while (digits < max_digits && end < t->n && cat_at(t, end, &next) == CAT_NUMBER) {
            end = next;
            digits++;
        }
        return end;
    }
    if ((end = other_piece(t, i, 1)) >= 0) {
        return end;
    }
    return space_piece(t, i, 0);
}

static inline Py_ssize_t
next_piece(const Vocabulary *v, const Text *t, Py_ssize_t i)
{
    switch (v->pattern) {
    case PATTERN_CL100K:
        return next_cl100k(t, i);
    case PATTERN_O200K:
        return next_o200k(t, i, 1, 3);
    default:
        return next_o200k(t, i, 0, 1);
    }
}

/* ---------------------------------------------------------------------------------- */
/* The Python type                                                                     */
/* ---------------------------------------------------------------------------------- */

static int
Vocabulary_init(Vocabulary *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"blob", "offsets", "categories", "pattern", NULL};
    PyObject *blob, *offsets_obj, *categories;
    int pattern;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "$SSSi", keywords, &blob, &offsets_obj,
                                     &categories, &pattern)) {
        return -1;
    }
    if (self->slots != NULL) {
        PyErr_SetString(PyExc_TypeError, "a Vocabulary is built once");
        return -1;
    }
    if (pattern < PATTERN_CL100K || pattern > PATTERN_TEKKEN) {
        PyErr_Format(PyExc_ValueError, "pattern must be 0, 1 or 2, not %d", pattern);
        return -1;
    }
    if (PyBytes_GET_SIZE(categories) != CODE_POINTS) {
        PyErr_Format(PyExc_ValueError, "categories must hold %d bytes, not %zd", CODE_POINTS,
                     PyBytes_GET_SIZE(categories));
        return -1;
    }
    const unsigned char *cats = (const unsigned char *)PyBytes_AS_STRING(categories);
    for (Py_ssize_t c = 0; c < CODE_POINTS; c++) {
        if (cats[c] >= CAT_COUNT) {
            PyErr_Format(PyExc_ValueError, "category %d of U+%04x is not one of 0-7",
                         (int)cats[c], (int)c);
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
        if (offsets[r] >= offsets[r + 1] || (Py_ssize_t)offsets[r + 1] > blob_size) {
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
    self->pairs = (uint32_t *)PyMem_Malloc(sizeof(uint32_t) * 65536);
    uint64_t *present = (uint64_t *)PyMem_Calloc(FILTER_BITS / 64, sizeof(uint64_t));
    if (self->pairs == NULL || present == NULL) {
        PyMem_Free(present);
        PyErr_NoMemory();
        return -1; /* dealloc frees what is held */
    }
    for (uint32_t r = 0; r < tokens; r++) {
        const unsigned char *key = self->blob + offsets[r];
        Py_ssize_t n = (Py_ssize_t)(offsets[r + 1] - offsets[r]);
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
        uint32_t bit = (hash_bytes(self->blob + offsets[r], (Py_ssize_t)(offsets[r + 1] - offsets[r])) >> 7) &
                       (FILTER_BITS - 1);
        present[bit >> 6] |= (uint64_t)1 << (bit & 63);
    }
    self->present = present; /* (set last: rank_of does without it while building) */
    for (uint32_t pair = 0; pair < 65536; pair++) {
        unsigned char two[2] = {(unsigned char)(pair >> 8), (unsigned char)pair};
        self->pairs[pair] = rank_of(self, two, 2);
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
    PyMem_Free(self->present);
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
    Py_ssize_t total = 0, i = 0;
    Py_BEGIN_ALLOW_THREADS
    Cached *cache = t.n > CACHE_ABOVE ? (Cached *)PyMem_RawCalloc(CACHE_SLOTS, sizeof(Cached)) : NULL;
    while (i < t.n) {
        Py_ssize_t end = next_piece(self, &t, i);
        Py_ssize_t tokens = piece_count(self, t.s + i, end - i, cache);
        if (tokens < 0) {
            total = -1;
            break;
        }
        total += tokens;
        i = end;
    }
    PyMem_RawFree(cache);
    Py_END_ALLOW_THREADS
    if (total < 0) {
        return PyErr_NoMemory();
    }
    return PyLong_FromSsize_t(total);
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
    Py_ssize_t i = 0;
    while (out != NULL && i < t.n) {
        Py_ssize_t end = next_piece(self, &t, i);
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

static struct PyModuleDef bpe_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "windowfit._bpe",
    .m_doc = "Exact byte-pair-encoding token counts (see windowfit.vocabulary).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__bpe(void)
{
    if (PyType_Ready(&VocabularyType) < 0) {
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
    return m;
}
