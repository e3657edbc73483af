/*
 * Compiled kernels of the fingerprint core: the per-document, per-word and per-character loops
 * of fingerprinting.
 *
 * word_bytes: non-ASCII text (already NFKC and case folded) as UTF-8 with every character that
 *     is not a letter or digit replaced by a space.
 * fold_fullwidth: fullwidth ASCII forms and the ideographic space as NFKC makes them.
 * script_tokens: the runs of characters of one class (CJK, other letters and digits) of a text;
 *     CJK runs joined across the punctuation and spaces between them on request.
 * canonical_words: the words of a run of documents (already case folded, with everything but
 *     letters, digits and marks turned into spaces), stop words dropped, each kept word hashed
 *     with xxh3-64 and the words of each document joined by single spaces.
 * shingle_hashes: the hash of every n-gram of consecutive token hashes.
 * combine_groups: one hash of each group of values (band keys, mega-shingles).
 * minhash_minima: MinHash signatures, min over a document's shingles x of (a[i] * x + b[i])
 *     modulo 2**64, top 32 bits kept.
 * simhash_majority: unweighted SimHash, bit j set when most of a document's features have it.
 * simhash_weighted: the same with an integer weight per feature.
 * winnow: the distinct minima of every window of w consecutive shingles of each document.
 *
 * They give exactly what the reference kernels in reference.py give (the tests compare them);
 * those run when this module is not built. kernels.py wraps both behind one interface. Arrays are passed as buffers (bytes, numpy arrays) and results returned
 * as bytes, so no numpy headers are needed.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ---- xxh3-64, seed 0 and the default secret, for inputs of 1 to 16 bytes ---------------- */

#define XXH_PRIME64_2 0xC2B2AE3D27D4EB4FULL
#define XXH_PRIME64_3 0x165667B19E3779F9ULL
#define XXH_PRIME_MX1 0x165667919E3779F9ULL
#define XXH_PRIME_MX2 0x9FB21C651E98DF25ULL
/* the secret words each length class reads, folded together as the reference does */
#define XXH3_FLIP_1TO3 (0x396CFEB8ULL ^ 0xBE4BA423ULL)
#define XXH3_FLIP_4TO8 (0x1CAD21F72C81017CULL ^ 0xDB979083E96DD4DEULL)
#define XXH3_FLIP_9TO16_LO (0x1F67B3B7A4A44072ULL ^ 0x78E5C0CC4EE679CBULL)
#define XXH3_FLIP_9TO16_HI (0x2172FFCC7DD05A82ULL ^ 0x8E2443F7744608B8ULL)
#define XXH3_SHORT_MAX 16

static inline uint64_t read_le64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint32_t read_le32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t swap64(uint64_t x)
{
    x = ((x << 8) & 0xFF00FF00FF00FF00ULL) | ((x >> 8) & 0x00FF00FF00FF00FFULL);
    x = ((x << 16) & 0xFFFF0000FFFF0000ULL) | ((x >> 16) & 0x0000FFFF0000FFFFULL);
    return (x << 32) | (x >> 32);
}

/* The low and the high 64 bits of the 128-bit product a * b, xored */
static inline uint64_t mul128_fold64(uint64_t a, uint64_t b)
{
#if defined(__SIZEOF_INT128__)
    __extension__ typedef unsigned __int128 uint128;
    uint128 product = (uint128)a * b;
    return (uint64_t)product ^ (uint64_t)(product >> 64);
#else
    uint64_t a_lo = a & 0xFFFFFFFFULL, a_hi = a >> 32;
    uint64_t b_lo = b & 0xFFFFFFFFULL, b_hi = b >> 32;
    uint64_t lo_lo = a_lo * b_lo, lo_hi = a_lo * b_hi, hi_lo = a_hi * b_lo;
    uint64_t middle = (lo_lo >> 32) + (lo_hi & 0xFFFFFFFFULL) + (hi_lo & 0xFFFFFFFFULL);
    uint64_t high = a_hi * b_hi + (lo_hi >> 32) + (hi_lo >> 32) + (middle >> 32);
    return (a * b) ^ high;
#endif
}

/* xxh3-64 of 1 to 3, 4 to 8 and 9 to 16 bytes, from the input's first eight bytes `head`
   (little-endian, zero past its end) and, above 8 bytes, its last eight bytes `tail` */
static inline uint64_t xxh3_1to3(uint64_t head, size_t len)
{
    uint64_t first = head & 0xFF, middle = (head >> (8 * (len >> 1))) & 0xFF;
    uint64_t last = (head >> (8 * (len - 1))) & 0xFF;
    uint64_t h = (first << 16) | (middle << 24) | last | ((uint64_t)len << 8);
    h ^= XXH3_FLIP_1TO3;
    h ^= h >> 33;
    h *= XXH_PRIME64_2;
    h ^= h >> 29;
    h *= XXH_PRIME64_3;
    return h ^ (h >> 32);
}

static inline uint64_t xxh3_4to8(uint64_t head, size_t len)
{
    uint64_t first = head & 0xFFFFFFFFULL, last = (head >> (8 * (len - 4))) & 0xFFFFFFFFULL;
    uint64_t h = (last + (first << 32)) ^ XXH3_FLIP_4TO8;
    h ^= rotl64(h, 49) ^ rotl64(h, 24);
    h *= XXH_PRIME_MX2;
    h ^= (h >> 35) + (uint64_t)len;
    h *= XXH_PRIME_MX2;
    return h ^ (h >> 28);
}

static inline uint64_t xxh3_9to16(uint64_t head, uint64_t tail, size_t len)
{
    uint64_t lo = head ^ XXH3_FLIP_9TO16_LO, hi = tail ^ XXH3_FLIP_9TO16_HI;
    uint64_t h = (uint64_t)len + swap64(lo) + hi + mul128_fold64(lo, hi);
    h ^= h >> 37;
    h *= XXH_PRIME_MX1;
    return h ^ (h >> 32);
}

/* xxh3-64 of 1 to 16 bytes. Word lengths vary at random, so all three length classes are
   computed and one is picked, without a branch to mispredict. */
static inline uint64_t xxh3_short(uint64_t head, uint64_t tail, size_t len)
{
    size_t clamped = len < 8 ? len : 8; /* keeps the shifts of the unused classes in range */
    uint64_t wide = xxh3_9to16(head, tail, len);
    uint64_t mid = xxh3_4to8(head, clamped < 4 ? 4 : clamped);
    uint64_t tiny = xxh3_1to3(head, clamped);
    uint64_t h = len > 8 ? wide : mid;
    return len > 3 ? h : tiny;
}

/* A word of 1 to 16 bytes at p as its first eight bytes (zero past its end) and, above 8 bytes,
   its last eight (else 0); `readable` bytes may be read from p on. */
static inline void word_parts(const unsigned char *p, size_t len, size_t readable,
                              uint64_t *head, uint64_t *tail)
{
    if (readable < 8) {
        unsigned char word[16] = {0};
        memcpy(word, p, len);
        *head = read_le64(word);
        *tail = len > 8 ? read_le64(word + len - 8) : 0;
        return;
    }
    uint64_t low_bytes = len < 8 ? (1ULL << (8 * len)) - 1 : ~0ULL;
    *head = read_le64(p) & low_bytes;
    *tail = len > 8 ? read_le64(p + len - 8) : 0;
}

/* ---- buffers --------------------------------------------------------------------------- */

/* A contiguous buffer of `itemsize`-byte items; sets an error and returns -1 otherwise. */
static int get_items(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0) {
        return -1;
    }
    if (view->len % itemsize != 0) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes is not a whole number of %zd-byte items",
                     what, view->len, itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* Values (uint64) cut into groups by offsets (int64, one more than the groups): group d is
   values[offsets[d]:offsets[d + 1]] and never empty. Sets an error naming `item` and returns -1
   otherwise; on success the caller releases both buffers. */
static int get_groups(PyObject *values_obj, PyObject *offsets_obj, Py_buffer *values,
                      Py_buffer *offsets, const char *item)
{
    if (get_items(values_obj, values, 8, item) < 0) {
        return -1;
    }
    if (get_items(offsets_obj, offsets, 8, "offsets") < 0) {
        PyBuffer_Release(values);
        return -1;
    }
    const int64_t *offset = offsets->buf;
    Py_ssize_t total = values->len / 8, groups = offsets->len / 8 - 1;
    int valid = groups >= 0;
    for (Py_ssize_t d = 0; valid && d < groups; d++) {
        valid = offset[d] >= 0 && offset[d] < offset[d + 1] && offset[d + 1] <= total;
    }
    if (!valid) {
        PyErr_Format(PyExc_ValueError, "every document needs at least one %s", item);
        PyBuffer_Release(offsets);
        PyBuffer_Release(values);
        return -1;
    }
    return 0;
}

/* ---- canonical words ------------------------------------------------------------------- */

/* An exact set of stop words: buckets of four entries, a word in one of two buckets chosen by
   its xxh3-64. The table is five planes of `slots` values (4 per bucket): the entries' hashes,
   first eight bytes, last eight bytes (as word_parts gives them), lengths (0: empty) and offsets
   of their bytes in blob; the hashes, looked at for every word, take a few cache lines. */
typedef struct {
    const uint64_t *table;
    const unsigned char *blob;
    uint64_t mask;  /* buckets - 1 */
    size_t slots;   /* entries in all, 4 per bucket */
} StopSet;

#define STOP_FIELDS 5
#define STOP_WAYS 4

/* Whether the word (hash, head, tail, len bytes at word) is a stop word. Without a branch on the
   outcome for words of up to 16 bytes: a third of the words of a text are stop words, at
   random. */
static inline int is_stopword(const StopSet *stops, uint64_t hash, uint64_t head, uint64_t tail,
                              const unsigned char *word, size_t len)
{
    const uint64_t *hashes = stops->table;
    size_t first = STOP_WAYS * (hash & stops->mask);
    size_t second = STOP_WAYS * ((hash >> 32) & stops->mask);
    size_t entry = 0; /* entry 0 when the hash is not there */
    int found = 0;
    for (size_t k = 0; k < STOP_WAYS; k++) {
        int here = hashes[first + k] == hash;
        entry = here ? first + k : entry;
        found |= here;
        here = hashes[second + k] == hash;
        entry = here ? second + k : entry;
        found |= here;
    }
    const uint64_t *field = stops->table + entry;
    int same_length = field[3 * stops->slots] == (uint64_t)len;
    if (len > XXH3_SHORT_MAX) {
        return found && same_length
               && memcmp(stops->blob + field[4 * stops->slots], word, len) == 0;
    }
    return found & same_length & (field[stops->slots] == head)
           & (field[2 * stops->slots] == tail);
}

/* xxh3-64 of a word longer than xxh3_short takes, from the Python callable `long_hash`. */
static int hash_long(PyObject *long_hash, const unsigned char *word, size_t len, uint64_t *out)
{
    PyObject *arg = PyBytes_FromStringAndSize((const char *)word, (Py_ssize_t)len);
    if (arg == NULL) {
        return -1;
    }
    PyObject *result = PyObject_CallOneArg(long_hash, arg);
    Py_DECREF(arg);
    if (result == NULL) {
        return -1;
    }
    *out = PyLong_AsUnsignedLongLong(result);
    Py_DECREF(result);
    return (*out == (uint64_t)-1 && PyErr_Occurred()) ? -1 : 0;
}

typedef struct {
    unsigned char *text;  /* kept words, a space between words, '\n' between documents */
    size_t text_len;
    uint64_t *hashes;     /* one per kept word */
    size_t word_count;
    int64_t *counts;      /* kept words per document */
} WordsOut;

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
#define LOWS 0x7F7F7F7F7F7F7F7FULL

/* The high bit of every byte of w (little-endian) that is a space, no other bit. */
static inline uint64_t space_bytes(uint64_t w)
{
    uint64_t x = w ^ (ONES * ' ');
    return ~(((x & LOWS) + LOWS) | x) & HIGHS;
}

/* The index of the first (lowest) byte whose high bit is set in high_bits (non-zero). */
static inline size_t first_byte(uint64_t high_bits)
{
#if defined(__GNUC__) || defined(__clang__)
    return (size_t)__builtin_ctzll(high_bits) >> 3;
#else
    size_t byte = 0;
    for (; !(high_bits & 0x80); high_bits >>= 8) {
        byte++;
    }
    return byte;
#endif
}

/* The offset of the first byte from `at` on that is (want_space) or is not a space, or `end`.
   Eight bytes at a time while they lie inside the buffer (`limit` bytes from `p`). */
static inline size_t scan(const unsigned char *p, size_t at, size_t end, size_t limit,
                          int want_space)
{
    while (at < end) {
        if (at + 8 > limit) {
            while (at < end && (p[at] == ' ') != want_space) {
                at++;
            }
            return at;
        }
        uint64_t spaces = space_bytes(read_le64(p + at));
        uint64_t hits = want_space ? spaces : ~spaces & HIGHS;
        if (hits) {
            at += first_byte(hits);
            return at < end ? at : end;
        }
        at += 8;
    }
    return end;
}

/* The words of one document, body[first:last] (`limit`: bytes readable from body). Every
   word is written out with a space after it and only kept (the output moves past it) when it
   is not a stop word. */
static int document_words(const unsigned char *body, size_t first, size_t last, size_t limit,
                          const StopSet *stops, PyObject *long_hash, WordsOut *out,
                          int64_t *count)
{
    unsigned char *text = out->text;
    size_t text_len = out->text_len, words = out->word_count, kept = 0;
    size_t at = scan(body, first, last, limit, 0);
    while (at < last) {
        size_t start = at;
        at = scan(body, start, last, limit, 1);
        size_t len = at - start;
        uint64_t hash, head = 0, tail = 0;
        if (len <= XXH3_SHORT_MAX) {
            word_parts(body + start, len, limit - start, &head, &tail);
            hash = xxh3_short(head, tail, len);
        }
        else if (hash_long(long_hash, body + start, len, &hash) < 0) {
            return -1;
        }
        at = scan(body, at, last, limit, 0);
        size_t keep = stops == NULL || !is_stopword(stops, hash, head, tail, body + start, len);
        if (len <= 16 && start + 16 <= limit) {
            /* the output has 16 bytes of slack: copy a fixed 16 */
            memcpy(text + text_len, body + start, 16);
        }
        else {
            memcpy(text + text_len, body + start, len);
        }
        text[text_len + len] = ' ';
        text_len += keep * (len + 1);
        out->hashes[words] = hash;
        words += keep;
        kept += keep;
    }
    out->text_len = text_len - (kept > 0); /* no space after the last word */
    out->word_count = words;
    *count = (int64_t)kept;
    return 0;
}

static int parse_stop_set(PyObject *stop_set, Py_buffer views[2], StopSet *stops)
{
    PyObject *table, *blob;
    if (!PyArg_ParseTuple(stop_set, "OO", &table, &blob)) {
        return -1;
    }
    if (get_items(table, &views[0], 8, "stop table") < 0) {
        return -1;
    }
    if (get_items(blob, &views[1], 1, "stop words") < 0) {
        PyBuffer_Release(&views[0]);
        return -1;
    }
    Py_ssize_t buckets = views[0].len / (8 * STOP_FIELDS * STOP_WAYS);
    if (buckets == 0 || (buckets & (buckets - 1)) != 0
        || views[0].len != buckets * 8 * STOP_FIELDS * STOP_WAYS) {
        PyErr_SetString(PyExc_ValueError, "stop table: not five planes of a power of two buckets");
        PyBuffer_Release(&views[0]);
        PyBuffer_Release(&views[1]);
        return -1;
    }
    stops->table = views[0].buf;
    stops->blob = views[1].buf;
    stops->mask = (uint64_t)buckets - 1;
    stops->slots = (size_t)buckets * STOP_WAYS;
    return 0;
}

PyDoc_STRVAR(word_bytes_doc,
"word_bytes(text) -> bytes\n\n"
"text as UTF-8 with every character that is not a letter or digit (not str.isalnum(), as the\n"
"pattern [\\W_] of the re module has it) replaced by a space.");

static PyObject *word_bytes(PyObject *self, PyObject *text)
{
    (void)self;
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "word_bytes: expected str, got %s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    unsigned char *out = PyMem_Malloc((size_t)(length > 0 ? length : 1) * 4);
    if (out == NULL) {
        return PyErr_NoMemory();
    }
    unsigned char *at = out;
    for (Py_ssize_t i = 0; i < length; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        if (ch < 0x80) {
            int letter = (ch | 0x20) >= 'a' && (ch | 0x20) <= 'z';
            *at++ = letter || (ch >= '0' && ch <= '9') ? (unsigned char)ch : ' ';
        }
        else if (!Py_UNICODE_ISALNUM(ch)) {
            *at++ = ' ';
        }
        else if (ch < 0x800) {
            *at++ = (unsigned char)(0xC0 | (ch >> 6));
            *at++ = (unsigned char)(0x80 | (ch & 0x3F));
        }
        else if (ch < 0x10000) {
            *at++ = (unsigned char)(0xE0 | (ch >> 12));
            *at++ = (unsigned char)(0x80 | ((ch >> 6) & 0x3F));
            *at++ = (unsigned char)(0x80 | (ch & 0x3F));
        }
        else {
            *at++ = (unsigned char)(0xF0 | (ch >> 18));
            *at++ = (unsigned char)(0x80 | ((ch >> 12) & 0x3F));
            *at++ = (unsigned char)(0x80 | ((ch >> 6) & 0x3F));
            *at++ = (unsigned char)(0x80 | (ch & 0x3F));
        }
    }
    PyObject *result = PyBytes_FromStringAndSize((const char *)out, at - out);
    PyMem_Free(out);
    return result;
}

PyDoc_STRVAR(fold_fullwidth_doc,
"fold_fullwidth(text) -> str\n\n"
"text with the fullwidth forms of ASCII (U+FF01-U+FF5E) and the ideographic space (U+3000)\n"
"replaced by what NFKC makes of them (the ASCII character, a space); text itself when it has\n"
"none.");

static PyObject *fold_fullwidth(PyObject *self, PyObject *text)
{
    (void)self;
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "fold_fullwidth: expected str, got %s",
                     Py_TYPE(text)->tp_name);
        return NULL;
    }
    Py_ssize_t length = PyUnicode_GET_LENGTH(text), first = 0;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    if (kind == PyUnicode_1BYTE_KIND) {
        return Py_NewRef(text); /* nothing above U+00FF */
    }
    for (; first < length; first++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, first);
        if ((ch >= 0xFF01 && ch <= 0xFF5E) || ch == 0x3000) {
            break;
        }
    }
    if (first == length) {
        return Py_NewRef(text);
    }
    /* through UCS-4: PyUnicode_FromKindAndData stores the result in the narrowest kind that
       holds it, as every str must be (folding can lower the largest character) */
    Py_UCS4 *chars = PyUnicode_AsUCS4Copy(text);
    if (chars == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = first; i < length; i++) {
        if (chars[i] >= 0xFF01 && chars[i] <= 0xFF5E) {
            chars[i] -= 0xFEE0;
        }
        else if (chars[i] == 0x3000) {
            chars[i] = ' ';
        }
    }
    PyObject *folded = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, chars, length);
    PyMem_Free(chars);
    return folded;
}

PyDoc_STRVAR(script_tokens_doc,
"script_tokens(text, classes, join=False) -> (tokens, kinds)\n\n"
"The runs of text's characters of one class, by classes[code point] (bytes of 0x110000\n"
"classes: 0 separates, 1 and 2 are token classes): a list of the runs as str and, for each,\n"
"its class (bytes). With join, a run of class 2 goes on across characters of class 0 (left\n"
"out of it) up to the next character of class 1 or the end of text.");

/* The end (past its last character of class 2) of the joined run of class 2 from `start`, and
   in *next where scanning goes on (a character of class 1, or the end); *gaps tells whether
   characters of class 0 lie inside the run. */
static Py_ssize_t joined_run_end(int kind, const void *data, Py_ssize_t length,
                                 const unsigned char *class_of, Py_ssize_t start,
                                 Py_ssize_t *next, int *gaps)
{
    Py_ssize_t i = start, end = start;
    *gaps = 0;
    for (; i < length; i++) {
        unsigned char current = class_of[PyUnicode_READ(kind, data, i)];
        if (current == 1) {
            break;
        }
        if (current == 2) {
            *gaps |= i != end;
            end = i + 1;
        }
    }
    *next = i;
    return end;
}

/* The characters of class 2 of text[start:end] as a str (`buffer`: room for end - start). */
static PyObject *class_two_chars(int kind, const void *data, const unsigned char *class_of,
                                 Py_ssize_t start, Py_ssize_t end, Py_UCS4 *buffer)
{
    Py_ssize_t count = 0;
    for (Py_ssize_t i = start; i < end; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        buffer[count] = ch;
        count += class_of[ch] == 2;
    }
    return PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, buffer, count);
}

static PyObject *script_tokens(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *text, *classes_obj, *tokens = NULL, *result = NULL;
    Py_buffer classes;
    unsigned char *kinds = NULL;
    Py_UCS4 *buffer = NULL;
    int join = 0;
    if (!PyArg_ParseTuple(args, "UO|p", &text, &classes_obj, &join)) {
        return NULL;
    }
    if (get_items(classes_obj, &classes, 1, "classes") < 0) {
        return NULL;
    }
    if (classes.len != 0x110000) {
        PyErr_SetString(PyExc_ValueError, "classes: one byte per code point (0x110000) needed");
        goto done;
    }
    const unsigned char *class_of = classes.buf;
    Py_ssize_t length = PyUnicode_GET_LENGTH(text), count = 0;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    tokens = PyList_New(0);
    kinds = PyMem_Malloc((size_t)length + 1); /* at most a run per character */
    if (tokens == NULL || kinds == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t i = 0;
    while (i < length) {
        unsigned char current = class_of[PyUnicode_READ(kind, data, i)];
        Py_ssize_t start = i++, end;
        int gaps = 0;
        if (join && current == 2) {
            end = joined_run_end(kind, data, length, class_of, start, &i, &gaps);
        }
        else {
            while (i < length && class_of[PyUnicode_READ(kind, data, i)] == current) {
                i++;
            }
            end = i;
        }
        if (current == 0) {
            continue;
        }
        if (gaps && buffer == NULL) {
            buffer = PyMem_Malloc((size_t)length * sizeof(Py_UCS4));
            if (buffer == NULL) {
                PyErr_NoMemory();
                goto done;
            }
        }
        PyObject *token = gaps ? class_two_chars(kind, data, class_of, start, end, buffer)
                               : PyUnicode_Substring(text, start, end);
        if (token == NULL || PyList_Append(tokens, token) < 0) {
            Py_XDECREF(token);
            goto done;
        }
        Py_DECREF(token);
        kinds[count++] = current;
    }
    result = Py_BuildValue("(Oy#)", tokens, (const char *)kinds, count);
done:
    Py_XDECREF(tokens);
    PyMem_Free(kinds);
    PyMem_Free(buffer);
    PyBuffer_Release(&classes);
    return result;
}

PyDoc_STRVAR(canonical_words_doc,
"canonical_words(body, sizes, stop_set, long_hash) -> (text, counts, hashes)\n\n"
"The words of documents laid out in body: document d is the next sizes[d] bytes (int64), one\n"
"separator byte after each; words are runs of bytes other than spaces. Stop words (stop_set:\n"
"(table of buckets as uint64, the stop words' bytes), see StopSet; or None) are dropped.\n"
"Returns the kept words joined by spaces with '\\n' between documents, the kept word count\n"
"of each document (int64 bytes) and the xxh3-64 of each kept word (uint64 bytes);\n"
"words longer than 16 bytes are hashed by long_hash(word_bytes).");

static PyObject *canonical_words(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *body_obj, *sizes_obj, *table, *long_hash, *result = NULL;
    Py_buffer body, sizes, stop_views[2];
    StopSet stops = {NULL, NULL, 0, 0};
    WordsOut out = {NULL, 0, NULL, 0, NULL};
    if (!PyArg_ParseTuple(args, "OOOO", &body_obj, &sizes_obj, &table, &long_hash)) {
        return NULL;
    }
    if (get_items(body_obj, &body, 1, "body") < 0) {
        return NULL;
    }
    if (get_items(sizes_obj, &sizes, 8, "sizes") < 0) {
        PyBuffer_Release(&body);
        return NULL;
    }
    int with_stops = table != Py_None;
    if (with_stops && parse_stop_set(table, stop_views, &stops) < 0) {
        goto done;
    }
    Py_ssize_t n_docs = sizes.len / 8;
    const int64_t *size = sizes.buf;
    const unsigned char *text = body.buf;
    out.text = PyMem_Malloc((size_t)body.len + (size_t)n_docs + 16);
    out.hashes = PyMem_Malloc(((size_t)body.len / 2 + 1) * sizeof(uint64_t));
    out.counts = PyMem_Malloc(((size_t)n_docs + 1) * sizeof(int64_t));
    if (out.text == NULL || out.hashes == NULL || out.counts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t at = 0;
    for (Py_ssize_t d = 0; d < n_docs; d++) {
        if (size[d] < 0 || size[d] > body.len - at) {
            PyErr_SetString(PyExc_ValueError, "document sizes exceed the body");
            goto done;
        }
        if (d) {
            out.text[out.text_len++] = '\n';
        }
        if (document_words(text, (size_t)at, (size_t)(at + size[d]), (size_t)body.len,
                           with_stops ? &stops : NULL, long_hash, &out, &out.counts[d]) < 0) {
            goto done;
        }
        at += size[d] + 1;
    }
    result = Py_BuildValue("(y#y#y#)", out.text, (Py_ssize_t)out.text_len, out.counts,
                           n_docs * (Py_ssize_t)sizeof(int64_t), out.hashes,
                           (Py_ssize_t)(out.word_count * sizeof(uint64_t)));
done:
    PyMem_Free(out.text);
    PyMem_Free(out.hashes);
    PyMem_Free(out.counts);
    if (with_stops && stops.table != NULL) {
        PyBuffer_Release(&stop_views[0]);
        PyBuffer_Release(&stop_views[1]);
    }
    PyBuffer_Release(&sizes);
    PyBuffer_Release(&body);
    return result;
}

/* ---- shingles -------------------------------------------------------------------------- */

#define SPLITMIX_GAMMA 0x9E3779B97F4A7C15ULL

/* the splitmix64 finalizer (hashing.mix64) */
static inline uint64_t mix64(uint64_t z)
{
    z += SPLITMIX_GAMMA;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

PyDoc_STRVAR(shingle_hashes_doc,
"shingle_hashes(tokens, lengths, n, combine) -> bytes\n\n"
"The hash of every n-gram of consecutive token hashes (uint64) within each segment, segment\n"
"after segment (lengths: int64 tokens per segment, each at least 1): mix64 of the sum of\n"
"token[p + j] * combine[j] for j < n. A segment shorter than n gives one hash, of all its\n"
"tokens. Returns uint64 bytes.");

static PyObject *shingle_hashes(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *tokens_obj, *lengths_obj, *combine_obj, *result = NULL;
    Py_ssize_t n;
    Py_buffer tokens, lengths, combine;
    uint64_t *out = NULL;
    if (!PyArg_ParseTuple(args, "OOnO", &tokens_obj, &lengths_obj, &n, &combine_obj)) {
        return NULL;
    }
    if (get_items(tokens_obj, &tokens, 8, "tokens") < 0) {
        return NULL;
    }
    if (get_items(lengths_obj, &lengths, 8, "lengths") < 0) {
        PyBuffer_Release(&tokens);
        return NULL;
    }
    if (get_items(combine_obj, &combine, 8, "combine") < 0) {
        PyBuffer_Release(&lengths);
        PyBuffer_Release(&tokens);
        return NULL;
    }
    const uint64_t *token = tokens.buf, *multiplier = combine.buf;
    const int64_t *length = lengths.buf;
    Py_ssize_t total = tokens.len / 8, segments = lengths.len / 8, sum = 0;
    if (n < 1 || n > combine.len / 8) {
        PyErr_SetString(PyExc_ValueError, "shingle size out of range of the multipliers");
        goto done;
    }
    for (Py_ssize_t s = 0; s < segments; s++) {
        if (length[s] < 1 || length[s] > total - sum) {
            PyErr_SetString(PyExc_ValueError, "segment lengths do not add up to the tokens");
            goto done;
        }
        sum += length[s];
    }
    if (sum != total) {
        PyErr_SetString(PyExc_ValueError, "segment lengths do not add up to the tokens");
        goto done;
    }
    out = PyMem_Malloc((size_t)(total > 0 ? total : 1) * sizeof(uint64_t));
    if (out == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t written = 0;
    const uint64_t *segment = token;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t s = 0; s < segments; segment += length[s], s++) {
        Py_ssize_t width = length[s] < n ? length[s] : n, count = length[s] - width + 1;
        for (Py_ssize_t p = 0; p < count; p++) {
            uint64_t acc = 0;
            for (Py_ssize_t j = 0; j < width; j++) {
                acc += segment[p + j] * multiplier[j];
            }
            out[written++] = mix64(acc);
        }
    }
    Py_END_ALLOW_THREADS
    result = PyBytes_FromStringAndSize((const char *)out, written * 8);
done:
    PyMem_Free(out);
    PyBuffer_Release(&combine);
    PyBuffer_Release(&lengths);
    PyBuffer_Release(&tokens);
    return result;
}

PyDoc_STRVAR(combine_groups_doc,
"combine_groups(values, groups, width, salts, combine) -> bytes\n\n"
"One hash of every group of width consecutive values (uint64; values holds rows of groups\n"
"groups): mix64 of salts[g] * 0x9E3779B97F4A7C15 plus the sum of value[j] * combine[j], for\n"
"group g of its row (hashing.combine_groups). Returns uint64 bytes, one per group.");

static PyObject *combine_groups(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *objs[3], *result = NULL;
    Py_ssize_t groups, width;
    Py_buffer views[3];
    const char *names[3] = {"values", "salts", "combine"};
    uint64_t *out = NULL;
    int held = 0;
    if (!PyArg_ParseTuple(args, "OnnOO", &objs[0], &groups, &width, &objs[1], &objs[2])) {
        return NULL;
    }
    for (; held < 3; held++) {
        if (get_items(objs[held], &views[held], 8, names[held]) < 0) {
            goto done;
        }
    }
    Py_ssize_t count = views[0].len / 8;
    if (groups < 1 || width < 1 || count % (groups * width) != 0 || views[1].len != groups * 8
        || views[2].len < width * 8) {
        PyErr_SetString(PyExc_ValueError, "combine_groups: array sizes do not agree");
        goto done;
    }
    const uint64_t *value = views[0].buf, *salt = views[1].buf, *multiplier = views[2].buf;
    Py_ssize_t total = count / width;
    out = PyMem_Malloc((size_t)(total > 0 ? total : 1) * sizeof(uint64_t));
    if (out == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < total; k++) {
        uint64_t acc = salt[k % groups] * SPLITMIX_GAMMA;
        for (Py_ssize_t j = 0; j < width; j++) {
            acc += value[k * width + j] * multiplier[j];
        }
        out[k] = mix64(acc);
    }
    result = PyBytes_FromStringAndSize((const char *)out, total * 8);
done:
    PyMem_Free(out);
    for (int k = 0; k < held; k++) {
        PyBuffer_Release(&views[k]);
    }
    return result;
}

/* ---- MinHash --------------------------------------------------------------------------- */

#if defined(__GNUC__) && __GNUC__ >= 12 && !defined(__clang__) && defined(__x86_64__) \
    && defined(__GLIBC__)
/* one build for the oldest x86-64, one for AVX2 and one for AVX-512 (64-bit multiplies in
   vector registers), chosen when the module loads */
#define VECTOR_CLONES __attribute__((target_clones("default", "avx2", "arch=x86-64-v4")))
#else
#define VECTOR_CLONES
#endif

/* minima[i] = min(minima[i], a[i] * x + b[i]) for every shingle x of xs, four at a time so
   that each pass over the minima takes four shingles */
VECTOR_CLONES
static void fold_minima(const uint64_t *xs, Py_ssize_t count, const uint64_t *a,
                        const uint64_t *b, uint64_t *minima, Py_ssize_t perms)
{
    Py_ssize_t s = 0;
    for (; s + 4 <= count; s += 4) {
        uint64_t x0 = xs[s], x1 = xs[s + 1], x2 = xs[s + 2], x3 = xs[s + 3];
        for (Py_ssize_t i = 0; i < perms; i++) {
            uint64_t m = minima[i], v;
            v = a[i] * x0 + b[i];
            m = v < m ? v : m;
            v = a[i] * x1 + b[i];
            m = v < m ? v : m;
            v = a[i] * x2 + b[i];
            m = v < m ? v : m;
            v = a[i] * x3 + b[i];
            m = v < m ? v : m;
            minima[i] = m;
        }
    }
    for (; s < count; s++) {
        uint64_t x = xs[s];
        for (Py_ssize_t i = 0; i < perms; i++) {
            uint64_t v = a[i] * x + b[i];
            minima[i] = v < minima[i] ? v : minima[i];
        }
    }
}

PyDoc_STRVAR(minhash_minima_doc,
"minhash_minima(shingles, offsets, a, b, out) -> None\n\n"
"out[d * len(a) + i] (uint32) = top 32 bits of the minimum of (a[i] * x + b[i]) mod 2**64 over\n"
"the shingles x (uint64) of document d, shingles[offsets[d]:offsets[d + 1]] (int64 offsets,\n"
"every document non-empty).");

static PyObject *minhash_minima(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *objs[5];
    Py_buffer views[5];
    const char *names[3] = {"a", "b", "out"};
    const Py_ssize_t itemsizes[3] = {8, 8, 4};
    PyObject *result = NULL;
    uint64_t *minima = NULL;
    int held = 0;
    if (!PyArg_ParseTuple(args, "OOOOO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4])) {
        return NULL;
    }
    if (get_groups(objs[0], objs[1], &views[0], &views[1], "shingle") < 0) {
        return NULL;
    }
    for (held = 2; held < 5; held++) {
        if (get_items(objs[held], &views[held], itemsizes[held - 2], names[held - 2]) < 0) {
            goto done;
        }
    }
    if (views[4].readonly) {
        PyErr_SetString(PyExc_ValueError, "out: buffer is read-only");
        goto done;
    }
    const uint64_t *shingles = views[0].buf, *a = views[2].buf, *b = views[3].buf;
    const int64_t *offsets = views[1].buf;
    uint32_t *out = views[4].buf;
    Py_ssize_t n_docs = views[1].len / 8 - 1, perms = views[2].len / 8;
    if (views[3].len != views[2].len || views[4].len != n_docs * perms * 4) {
        PyErr_SetString(PyExc_ValueError, "minhash_minima: array sizes do not agree");
        goto done;
    }
    minima = PyMem_Malloc((size_t)(perms ? perms : 1) * sizeof(uint64_t));
    if (minima == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t d = 0; d < n_docs; d++) {
        for (Py_ssize_t i = 0; i < perms; i++) {
            minima[i] = UINT64_MAX;
        }
        fold_minima(shingles + offsets[d], offsets[d + 1] - offsets[d], a, b, minima, perms);
        for (Py_ssize_t i = 0; i < perms; i++) {
            out[d * perms + i] = (uint32_t)(minima[i] >> 32);
        }
    }
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyMem_Free(minima);
    for (int k = 0; k < held; k++) {
        PyBuffer_Release(&views[k]);
    }
    return result;
}

/* ---- SimHash --------------------------------------------------------------------------- */

#define BYTE_LANES 0x0101010101010101ULL

/* counts[8 * b + j] += bit j of byte b of every feature: bit j of all eight bytes is added to
   the eight byte lanes of lanes[j] at once, emptied into the counts before a lane can overflow */
static void count_bits(const uint64_t *features, Py_ssize_t count, uint32_t counts[64])
{
    for (Py_ssize_t first = 0; first < count; first += 255) {
        Py_ssize_t last = first + 255 < count ? first + 255 : count;
        uint64_t lanes[8] = {0};
        for (Py_ssize_t f = first; f < last; f++) {
            uint64_t h = features[f];
            for (int j = 0; j < 8; j++) {
                lanes[j] += (h >> j) & BYTE_LANES;
            }
        }
        for (int j = 0; j < 8; j++) {
            for (int b = 0; b < 8; b++) {
                counts[8 * b + j] += (uint32_t)((lanes[j] >> (8 * b)) & 0xFF);
            }
        }
    }
}

PyDoc_STRVAR(simhash_majority_doc,
"simhash_majority(features, offsets) -> bytes\n\n"
"The unweighted SimHash of each document (uint64 bytes): bit j is set when more than half of\n"
"the document's features (uint64, features[offsets[d]:offsets[d + 1]], int64 offsets, every\n"
"document non-empty) have bit j set.");

static PyObject *simhash_majority(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *features_obj, *offsets_obj, *result = NULL;
    Py_buffer features, offsets;
    uint64_t *out = NULL;
    if (!PyArg_ParseTuple(args, "OO", &features_obj, &offsets_obj)) {
        return NULL;
    }
    if (get_groups(features_obj, offsets_obj, &features, &offsets, "feature") < 0) {
        return NULL;
    }
    const uint64_t *feature = features.buf;
    const int64_t *offset = offsets.buf;
    Py_ssize_t n_docs = offsets.len / 8 - 1;
    out = PyMem_Malloc((size_t)(n_docs > 0 ? n_docs : 1) * sizeof(uint64_t));
    if (out == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t d = 0; d < n_docs; d++) {
        uint32_t counts[64] = {0};
        uint64_t size = (uint64_t)(offset[d + 1] - offset[d]), hash = 0;
        count_bits(feature + offset[d], (Py_ssize_t)size, counts);
        for (int j = 0; j < 64; j++) {
            hash |= (uint64_t)(2 * (uint64_t)counts[j] > size) << j;
        }
        out[d] = hash;
    }
    Py_END_ALLOW_THREADS
    result = PyBytes_FromStringAndSize((const char *)out, n_docs * 8);
done:
    PyMem_Free(out);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&features);
    return result;
}

PyDoc_STRVAR(simhash_weighted_doc,
"simhash_weighted(features, offsets, weights) -> bytes\n\n"
"The weighted SimHash of each document (uint64 bytes): bit j is set when the weights (int64,\n"
"one per feature, each at most 2**40) of the document's features that have bit j set add up\n"
"to more than half of all its weights.");

static PyObject *simhash_weighted(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *features_obj, *offsets_obj, *weights_obj, *result = NULL;
    Py_buffer features, offsets, weights;
    uint64_t *out = NULL;
    if (!PyArg_ParseTuple(args, "OOO", &features_obj, &offsets_obj, &weights_obj)) {
        return NULL;
    }
    if (get_groups(features_obj, offsets_obj, &features, &offsets, "feature") < 0) {
        return NULL;
    }
    if (get_items(weights_obj, &weights, 8, "weights") < 0) {
        PyBuffer_Release(&offsets);
        PyBuffer_Release(&features);
        return NULL;
    }
    if (weights.len != features.len) {
        PyErr_SetString(PyExc_ValueError, "one weight per feature is needed");
        goto done;
    }
    const uint64_t *feature = features.buf;
    const int64_t *offset = offsets.buf, *weight = weights.buf;
    Py_ssize_t n_docs = offsets.len / 8 - 1;
    out = PyMem_Malloc((size_t)(n_docs > 0 ? n_docs : 1) * sizeof(uint64_t));
    if (out == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t d = 0; d < n_docs; d++) {
        int64_t votes[64] = {0}, total = 0;
        uint64_t hash = 0;
        for (int64_t i = offset[d]; i < offset[d + 1]; i++) {
            uint64_t f = feature[i];
            int64_t w = weight[i];
            total += w;
            for (int j = 0; j < 64; j++) {
                votes[j] += (int64_t)((f >> j) & 1) * w;
            }
        }
        for (int j = 0; j < 64; j++) {
            hash |= (uint64_t)(2 * votes[j] > total) << j;
        }
        out[d] = hash;
    }
    Py_END_ALLOW_THREADS
    result = PyBytes_FromStringAndSize((const char *)out, n_docs * 8);
done:
    PyMem_Free(out);
    PyBuffer_Release(&weights);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&features);
    return result;
}

/* ---- winnowing ------------------------------------------------------------------------- */

static void insertion_sort(uint64_t *values, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        uint64_t v = values[i];
        size_t j = i;
        for (; j > 0 && values[j - 1] > v; j--) {
            values[j] = values[j - 1];
        }
        values[j] = v;
    }
}

/* out[0:na + nb] = the sorted a[0:na] and b[0:nb], merged */
static void merge(const uint64_t *a, size_t na, const uint64_t *b, size_t nb, uint64_t *out)
{
    size_t i = 0, j = 0, k = 0;
    while (i < na && j < nb) {
        out[k++] = b[j] < a[i] ? b[j++] : a[i++];
    }
    memcpy(out + k, a + i, (na - i) * sizeof *a);
    memcpy(out + k + na - i, b + j, (nb - j) * sizeof *b);
}

/* Sort values[0:n] (scratch: room for n more): runs of 32 by insertion, then merged pairwise. */
static void sort_values(uint64_t *values, size_t n, uint64_t *scratch)
{
    const size_t run = 32;
    for (size_t i = 0; i < n; i += run) {
        insertion_sort(values + i, n - i < run ? n - i : run);
    }
    uint64_t *from = values, *to = scratch;
    for (size_t width = run; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n;
            size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            merge(from + lo, mid - lo, from + mid, hi - mid, to + lo);
        }
        uint64_t *swap = from;
        from = to;
        to = swap;
    }
    if (from != values) {
        memcpy(values, from, n * sizeof *values);
    }
}

/* Sort values[0:n] and drop repeats (scratch: room for n values); returns how many are left. */
static size_t sort_distinct(uint64_t *values, size_t n, uint64_t *scratch)
{
    sort_values(values, n, scratch);
    size_t kept = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        if (values[i] != values[kept - 1]) {
            values[kept++] = values[i];
        }
    }
    return kept;
}

/* mins[i] = min(mins[i], mins[i + span]) for i < n - span */
VECTOR_CLONES
static void fold_min(uint64_t *mins, size_t n, size_t span)
{
    for (size_t i = 0; i + span < n; i++) {
        uint64_t other = mins[i + span];
        mins[i] = other < mins[i] ? other : mins[i];
    }
}

/* The minima of the windows of w consecutive values of values[0:n] (n >= w), a minimum equal
   to the previous window's left out, into out; returns how many were written. `mins` is scratch
   space for n values. Minima of windows of 1, 2, 4, ... values, each from two of the previous
   ones, up to the widest power of two p <= w; a window of w is two overlapping windows of p. */
static size_t window_minima(const uint64_t *values, size_t n, size_t w, uint64_t *mins,
                            uint64_t *out)
{
    memcpy(mins, values, n * sizeof *mins);
    size_t span = 1, valid = n;
    for (; span * 2 <= w; span *= 2) {
        fold_min(mins, valid, span);
        valid -= span;
    }
    if (span < w) {
        fold_min(mins, valid, w - span);
        valid -= w - span;
    }
    size_t written = 0;
    for (size_t i = 0; i < valid; i++) {
        if (written == 0 || out[written - 1] != mins[i]) {
            out[written++] = mins[i];
        }
    }
    return written;
}

PyDoc_STRVAR(winnow_doc,
"winnow(sequence, offsets, w) -> (keys, key_offsets)\n\n"
"The distinct minima of every window of w consecutive values of each document's sequence\n"
"(uint64, sequence[offsets[d]:offsets[d + 1]], int64 offsets, every document non-empty; a\n"
"document shorter than w keeps its minimum), sorted per document and concatenated (uint64\n"
"bytes), with the offsets of each document's keys (int64 bytes, one more than documents).");

static PyObject *winnow(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *sequence_obj, *offsets_obj, *result = NULL;
    Py_ssize_t w;
    Py_buffer sequence, offsets;
    uint64_t *keys = NULL;
    int64_t *key_offsets = NULL;
    uint64_t *scratch = NULL;
    if (!PyArg_ParseTuple(args, "OOn", &sequence_obj, &offsets_obj, &w)) {
        return NULL;
    }
    if (w < 1) {
        PyErr_SetString(PyExc_ValueError, "the window must hold at least one value");
        return NULL;
    }
    if (get_groups(sequence_obj, offsets_obj, &sequence, &offsets, "value") < 0) {
        return NULL;
    }
    const uint64_t *values = sequence.buf;
    const int64_t *offset = offsets.buf;
    Py_ssize_t total = sequence.len / 8, n_docs = offsets.len / 8 - 1;
    keys = PyMem_Malloc((size_t)(total > 0 ? total : 1) * sizeof(uint64_t));
    key_offsets = PyMem_Malloc((size_t)(n_docs + 1) * sizeof(int64_t));
    scratch = PyMem_Malloc((size_t)(total > 0 ? total : 1) * sizeof(uint64_t));
    if (keys == NULL || key_offsets == NULL || scratch == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    size_t written = 0;
    key_offsets[0] = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t d = 0; d < n_docs; d++) {
        const uint64_t *doc = values + offset[d];
        size_t n = (size_t)(offset[d + 1] - offset[d]), found;
        if (n < (size_t)w) {
            uint64_t minimum = doc[0];
            for (size_t i = 1; i < n; i++) {
                minimum = doc[i] < minimum ? doc[i] : minimum;
            }
            keys[written] = minimum;
            found = 1;
        }
        else {
            found = window_minima(doc, n, (size_t)w, scratch, keys + written);
            found = sort_distinct(keys + written, found, scratch);
        }
        written += found;
        key_offsets[d + 1] = (int64_t)written;
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(y#y#)", keys, (Py_ssize_t)(written * sizeof(uint64_t)), key_offsets,
                           (Py_ssize_t)((size_t)(n_docs + 1) * sizeof(int64_t)));
done:
    PyMem_Free(keys);
    PyMem_Free(key_offsets);
    PyMem_Free(scratch);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&sequence);
    return result;
}

/* ---- intersections --------------------------------------------------------------------- */

/* How many values of `s` (sorted) are in `l` (sorted, the longer): a merge, or a galloping
   search of each value when `l` is much longer. */
static int64_t count_present(const int32_t *s, size_t ns, const int32_t *l, size_t nl)
{
    int64_t count = 0;
    size_t j = 0;
    int gallop = nl > 16 * ns;
    for (size_t i = 0; i < ns && j < nl; i++) {
        int32_t v = s[i];
        if (gallop) {
            size_t step = 1, hi = j;
            while (hi < nl && l[hi] < v) {
                j = hi + 1;
                hi += step;
                step <<= 1;
            }
            hi = hi < nl ? hi : nl;
            while (j < hi) {
                size_t mid = j + (hi - j) / 2;
                if (l[mid] < v) {
                    j = mid + 1;
                }
                else {
                    hi = mid;
                }
            }
        }
        else {
            while (j < nl && l[j] < v) {
                j++;
            }
        }
        count += j < nl && l[j] == v;
    }
    return count;
}

PyDoc_STRVAR(intersection_sizes_doc,
"intersection_sizes(values, offsets, left, right) -> bytes\n\n"
"For each pair (left[p], right[p]) of groups of values (int32, group g is\n"
"values[offsets[g]:offsets[g + 1]], sorted, int64 offsets), how many values of the shorter\n"
"group (the left one on a tie) are in the other (int64 bytes, one per pair).");

static PyObject *intersection_sizes(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *values_obj, *offsets_obj, *left_obj, *right_obj, *result = NULL;
    Py_buffer values, offsets, left, right;
    if (!PyArg_ParseTuple(args, "OOOO", &values_obj, &offsets_obj, &left_obj, &right_obj)) {
        return NULL;
    }
    if (get_items(values_obj, &values, 4, "values") < 0) {
        return NULL;
    }
    if (get_items(offsets_obj, &offsets, 8, "offsets") < 0) {
        PyBuffer_Release(&values);
        return NULL;
    }
    if (get_items(left_obj, &left, 8, "left") < 0) {
        PyBuffer_Release(&offsets);
        PyBuffer_Release(&values);
        return NULL;
    }
    if (get_items(right_obj, &right, 8, "right") < 0) {
        PyBuffer_Release(&left);
        PyBuffer_Release(&offsets);
        PyBuffer_Release(&values);
        return NULL;
    }
    const int32_t *value = values.buf;
    const int64_t *offset = offsets.buf, *a = left.buf, *b = right.buf;
    Py_ssize_t total = values.len / 4, groups = offsets.len / 8 - 1, pairs = left.len / 8;
    int valid = groups >= 0 && right.len == left.len && offset[0] >= 0;
    for (Py_ssize_t g = 0; valid && g < groups; g++) {
        valid = offset[g] <= offset[g + 1] && offset[g + 1] <= total;
    }
    for (Py_ssize_t p = 0; valid && p < pairs; p++) {
        valid = a[p] >= 0 && a[p] < groups && b[p] >= 0 && b[p] < groups;
    }
    if (!valid) {
        PyErr_SetString(PyExc_ValueError, "offsets, left and right must describe groups of values");
        goto done;
    }
    result = PyBytes_FromStringAndSize(NULL, pairs * 8);
    if (result == NULL) {
        goto done;
    }
    int64_t *count = (int64_t *)PyBytes_AS_STRING(result);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t p = 0; p < pairs; p++) {
        const int32_t *x = value + offset[a[p]], *y = value + offset[b[p]];
        size_t nx = (size_t)(offset[a[p] + 1] - offset[a[p]]);
        size_t ny = (size_t)(offset[b[p] + 1] - offset[b[p]]);
        count[p] = nx <= ny ? count_present(x, nx, y, ny) : count_present(y, ny, x, nx);
    }
    Py_END_ALLOW_THREADS
done:
    PyBuffer_Release(&right);
    PyBuffer_Release(&left);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&values);
    return result;
}

/* ---- key multimap ---------------------------------------------------------------------- */

/* An open-addressing table of (key, id) entries with linear probing: uint64 keys, int64 ids,
   an id of 0 marks an empty slot, the size is a power of two and the caller keeps it at most
   3/4 full. There are no deletions, so the entries of a key lie between its home slot and the
   next empty slot, in the order they were inserted. */

/* How many keys ahead of the one being probed the home slots are fetched into the cache: a
   table of a large load is hundreds of megabytes, and a probe without it waits on memory. */
#define PROBE_AHEAD 16

static inline void fetch_slot(const uint64_t *table_keys, const int64_t *table_ids, size_t slot)
{
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(&table_keys[slot], 1, 1);
    __builtin_prefetch(&table_ids[slot], 1, 1);
#else
    (void)table_keys;
    (void)table_ids;
    (void)slot;
#endif
}

static int get_table(PyObject *keys_obj, PyObject *ids_obj, Py_buffer *keys, Py_buffer *ids)
{
    if (get_items(keys_obj, keys, 8, "table keys") < 0) {
        return -1;
    }
    if (get_items(ids_obj, ids, 8, "table ids") < 0) {
        PyBuffer_Release(keys);
        return -1;
    }
    Py_ssize_t size = keys->len / 8;
    if (ids->len != keys->len || size == 0 || (size & (size - 1)) != 0) {
        PyErr_SetString(PyExc_ValueError, "table: keys and ids must have one power-of-two size");
    } else if (keys->readonly || ids->readonly) {
        PyErr_SetString(PyExc_ValueError, "table: buffers are read-only");
    } else {
        return 0;
    }
    PyBuffer_Release(ids);
    PyBuffer_Release(keys);
    return -1;
}

PyDoc_STRVAR(multimap_insert_doc,
"multimap_insert(table_keys, table_ids, keys, ids, cap) -> int\n\n"
"Insert each entry (keys[i], ids[i]) (uint64, int64 > 0) into the table unless it holds cap\n"
"entries of that key already (cap 0: no limit). Returns the number inserted; the caller\n"
"keeps the table at most 3/4 full (an insert into a full table fails).");

static PyObject *multimap_insert(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *tk_obj, *ti_obj, *k_obj, *i_obj, *result = NULL;
    long long cap;
    Py_buffer tk, ti, k, i;
    if (!PyArg_ParseTuple(args, "OOOOL", &tk_obj, &ti_obj, &k_obj, &i_obj, &cap)) {
        return NULL;
    }
    if (get_table(tk_obj, ti_obj, &tk, &ti) < 0) {
        return NULL;
    }
    if (get_items(k_obj, &k, 8, "keys") < 0) {
        goto release_table;
    }
    if (get_items(i_obj, &i, 8, "ids") < 0) {
        goto release_keys;
    }
    uint64_t *table_keys = tk.buf;
    int64_t *table_ids = ti.buf;
    const uint64_t *keys = k.buf;
    const int64_t *ids = i.buf;
    Py_ssize_t n = k.len / 8;
    size_t mask = (size_t)(tk.len / 8) - 1;
    int valid = i.len == k.len;
    for (Py_ssize_t e = 0; valid && e < n; e++) {
        valid = ids[e] > 0;
    }
    if (!valid) {
        PyErr_SetString(PyExc_ValueError, "multimap_insert: one positive id per key");
        goto release_ids;
    }
    long long inserted = 0;
    int full = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t e = 0; e < n && e < PROBE_AHEAD; e++) {
        fetch_slot(table_keys, table_ids, (size_t)mix64(keys[e]) & mask);
    }
    for (Py_ssize_t e = 0; e < n && !full; e++) {
        if (e + PROBE_AHEAD < n) {
            fetch_slot(table_keys, table_ids, (size_t)mix64(keys[e + PROBE_AHEAD]) & mask);
        }
        size_t slot = (size_t)mix64(keys[e]) & mask, probes = 0;
        long long seen = 0;
        while (table_ids[slot] != 0 && probes <= mask) {
            seen += table_keys[slot] == keys[e];
            slot = (slot + 1) & mask;
            probes++;
        }
        if (probes > mask) {
            full = 1;
        } else if (cap == 0 || seen < cap) {
            table_keys[slot] = keys[e];
            table_ids[slot] = ids[e];
            inserted++;
        }
    }
    Py_END_ALLOW_THREADS
    if (full) {
        PyErr_SetString(PyExc_ValueError, "multimap_insert: the table is full");
    } else {
        result = PyLong_FromLongLong(inserted);
    }
release_ids:
    PyBuffer_Release(&i);
release_keys:
    PyBuffer_Release(&k);
release_table:
    PyBuffer_Release(&ti);
    PyBuffer_Release(&tk);
    return result;
}

PyDoc_STRVAR(multimap_rehash_doc,
"multimap_rehash(table_keys, table_ids, grown_keys, grown_ids) -> None\n\n"
"Empty the larger grown table, then insert every entry of the table into it, each key's\n"
"entries in the order they were inserted: the old table is walked from an empty slot round\n"
"to it (a key's entries never lie across an empty slot).");

static PyObject *multimap_rehash(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *tk_obj, *ti_obj, *gk_obj, *gi_obj, *result = NULL;
    Py_buffer tk, ti, gk, gi;
    if (!PyArg_ParseTuple(args, "OOOO", &tk_obj, &ti_obj, &gk_obj, &gi_obj)) {
        return NULL;
    }
    if (get_table(tk_obj, ti_obj, &tk, &ti) < 0) {
        return NULL;
    }
    if (get_table(gk_obj, gi_obj, &gk, &gi) < 0) {
        goto release_old;
    }
    const uint64_t *old_keys = tk.buf;
    const int64_t *old_ids = ti.buf;
    uint64_t *keys = gk.buf;
    int64_t *ids = gi.buf;
    size_t old_size = (size_t)(tk.len / 8), size = (size_t)(gk.len / 8), start = 0;
    while (start < old_size && old_ids[start] != 0) {
        start++;
    }
    size_t used = 0;
    for (size_t slot = 0; slot < old_size; slot++) {
        used += old_ids[slot] != 0;
    }
    if (start == old_size || 4 * used > 3 * size) {
        PyErr_SetString(PyExc_ValueError, "multimap_rehash: a full table, or too small a new one");
        goto release_new;
    }
    size_t mask = size - 1, old_mask = old_size - 1;
    Py_BEGIN_ALLOW_THREADS
    /* written in address order, not faulted in where the inserts first land */
    memset(keys, 0, size * 8);
    memset(ids, 0, size * 8);
    for (size_t step = 1; step <= old_size; step++) {
        size_t ahead = (start + step + PROBE_AHEAD) & old_mask;
        if (old_ids[ahead] != 0) {
            fetch_slot(keys, ids, (size_t)mix64(old_keys[ahead]) & mask);
        }
        size_t from = (start + step) & old_mask;
        if (old_ids[from] == 0) {
            continue;
        }
        size_t slot = (size_t)mix64(old_keys[from]) & mask;
        while (ids[slot] != 0) {
            slot = (slot + 1) & mask;
        }
        keys[slot] = old_keys[from];
        ids[slot] = old_ids[from];
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
release_new:
    PyBuffer_Release(&gi);
    PyBuffer_Release(&gk);
release_old:
    PyBuffer_Release(&ti);
    PyBuffer_Release(&tk);
    return result;
}

PyDoc_STRVAR(multimap_find_doc,
"multimap_find(table_keys, table_ids, keys) -> (bytes, bytes)\n\n"
"Every entry of each of the distinct keys (uint64), as int64 ids and uint64 keys, key by key\n"
"in the order of keys, a key's entries in the order they were inserted.");

static PyObject *multimap_find(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *tk_obj, *ti_obj, *k_obj, *result = NULL;
    Py_buffer tk, ti, k;
    if (!PyArg_ParseTuple(args, "OOO", &tk_obj, &ti_obj, &k_obj)) {
        return NULL;
    }
    if (get_table(tk_obj, ti_obj, &tk, &ti) < 0) {
        return NULL;
    }
    if (get_items(k_obj, &k, 8, "keys") < 0) {
        PyBuffer_Release(&ti);
        PyBuffer_Release(&tk);
        return NULL;
    }
    const uint64_t *table_keys = tk.buf, *keys = k.buf;
    const int64_t *table_ids = ti.buf;
    Py_ssize_t n = k.len / 8;
    size_t mask = (size_t)(tk.len / 8) - 1, found = 0, room = (size_t)n + 16;
    int64_t *out_ids = PyMem_RawMalloc(room * 8);
    uint64_t *out_keys = PyMem_RawMalloc(room * 8);
    /* the raw allocator needs no GIL: the probes run while other threads do */
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t e = 0; e < n && e < PROBE_AHEAD; e++) {
        fetch_slot(table_keys, table_ids, (size_t)mix64(keys[e]) & mask);
    }
    for (Py_ssize_t e = 0; e < n && out_ids != NULL && out_keys != NULL; e++) {
        if (e + PROBE_AHEAD < n) {
            fetch_slot(table_keys, table_ids, (size_t)mix64(keys[e + PROBE_AHEAD]) & mask);
        }
        size_t slot = (size_t)mix64(keys[e]) & mask, probes = 0;
        while (table_ids[slot] != 0 && probes <= mask) {
            if (table_keys[slot] == keys[e]) {
                if (found == room) {
                    room *= 2;
                    int64_t *more_ids = PyMem_RawRealloc(out_ids, room * 8);
                    uint64_t *more_keys = more_ids ? PyMem_RawRealloc(out_keys, room * 8) : NULL;
                    if (more_ids == NULL || more_keys == NULL) {
                        out_ids = more_ids ? more_ids : out_ids;
                        PyMem_RawFree(out_ids);
                        PyMem_RawFree(out_keys);
                        out_ids = NULL;
                        out_keys = NULL;
                        break;
                    }
                    out_ids = more_ids;
                    out_keys = more_keys;
                }
                out_ids[found] = table_ids[slot];
                out_keys[found] = keys[e];
                found++;
            }
            slot = (slot + 1) & mask;
            probes++;
        }
    }
    Py_END_ALLOW_THREADS
    if (out_ids == NULL || out_keys == NULL) {
        PyMem_RawFree(out_ids);
        PyMem_RawFree(out_keys);
        PyErr_NoMemory();
    } else {
        result = Py_BuildValue("(y#y#)", (const char *)out_ids, (Py_ssize_t)(found * 8),
                               (const char *)out_keys, (Py_ssize_t)(found * 8));
        PyMem_RawFree(out_ids);
        PyMem_RawFree(out_keys);
    }
    PyBuffer_Release(&k);
    PyBuffer_Release(&ti);
    PyBuffer_Release(&tk);
    return result;
}

/* ---- stored shingles ------------------------------------------------------------------- */

PyDoc_STRVAR(high_halves_doc,
"high_halves(values, offsets) -> bytes\n\n"
"The high 32 bits of every value (uint64; group g is values[offsets[g]:offsets[g + 1]],\n"
"sorted ascending, int64 offsets) as int32, each group sorted ascending: its values whose top\n"
"bit is set first, then the others, in order (int32 bytes, one per value of the groups).");

static PyObject *high_halves(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *values_obj, *offsets_obj, *result = NULL;
    Py_buffer values, offsets;
    if (!PyArg_ParseTuple(args, "OO", &values_obj, &offsets_obj)) {
        return NULL;
    }
    if (get_items(values_obj, &values, 8, "values") < 0) {
        return NULL;
    }
    if (get_items(offsets_obj, &offsets, 8, "offsets") < 0) {
        PyBuffer_Release(&values);
        return NULL;
    }
    const uint64_t *value = values.buf;
    const int64_t *offset = offsets.buf;
    Py_ssize_t groups = offsets.len / 8 - 1;
    int valid = groups >= 0 && offset[0] >= 0;
    for (Py_ssize_t g = 0; valid && g < groups; g++) {
        valid = offset[g] <= offset[g + 1] && offset[g + 1] <= values.len / 8;
    }
    if (!valid) {
        PyErr_SetString(PyExc_ValueError, "offsets must describe groups of values");
    }
    else {
        result = PyBytes_FromStringAndSize(NULL, (offset[groups] - offset[0]) * 4);
    }
    if (result != NULL) {
        uint32_t *out = (uint32_t *)PyBytes_AS_STRING(result);
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t g = 0; g < groups; g++) {
            const uint64_t *lo = value + offset[g], *hi = value + offset[g + 1];
            /* the first value with the top bit set (the group is sorted) */
            const uint64_t *split = lo;
            size_t n = (size_t)(hi - lo);
            while (n > 0) {
                size_t half = n / 2;
                if (split[half] >> 63) {
                    n = half;
                }
                else {
                    split += half + 1;
                    n -= half + 1;
                }
            }
            for (const uint64_t *v = split; v < hi; v++) {
                *out++ = (uint32_t)(*v >> 32);
            }
            for (const uint64_t *v = lo; v < split; v++) {
                *out++ = (uint32_t)(*v >> 32);
            }
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&values);
    return result;
}

/* ---- masked keys ----------------------------------------------------------------------- */

PyDoc_STRVAR(masked_keys_doc,
"masked_keys(values, masks, salts, out) -> None\n\n"
"out[i * len(masks) + j] (uint64) = mix64((values[i] & masks[j]) ^ salts[j]) for every value\n"
"(uint64) and every mask and salt (uint64, as many salts as masks).");

static PyObject *masked_keys(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *objs[4], *result = NULL;
    Py_buffer views[4];
    const char *names[4] = {"values", "masks", "salts", "out"};
    int held = 0;
    if (!PyArg_ParseTuple(args, "OOOO", &objs[0], &objs[1], &objs[2], &objs[3])) {
        return NULL;
    }
    for (; held < 4; held++) {
        if (get_items(objs[held], &views[held], 8, names[held]) < 0) {
            goto done;
        }
    }
    Py_ssize_t count = views[0].len / 8, width = views[1].len / 8;
    if (views[1].len != views[2].len) {
        PyErr_SetString(PyExc_ValueError, "masked_keys: as many salts as masks");
    }
    else if (views[3].readonly || views[3].len != count * width * 8) {
        PyErr_SetString(PyExc_ValueError, "masked_keys: out must be writable, a key per value and mask");
    }
    else {
        const uint64_t *value = views[0].buf, *mask = views[1].buf, *salt = views[2].buf;
        uint64_t *out = views[3].buf;
        for (Py_ssize_t i = 0; i < count; i++) {
            for (Py_ssize_t j = 0; j < width; j++) {
                *out++ = mix64((value[i] & mask[j]) ^ salt[j]);
            }
        }
        result = Py_NewRef(Py_None);
    }
done:
    for (int k = 0; k < held; k++) {
        PyBuffer_Release(&views[k]);
    }
    return result;
}

PyDoc_STRVAR(salted_mix_doc,
"salted_mix(values, salts, out) -> None\n\n"
"out[i] (uint64) = mix64(values[i] ^ salts[i]) for every value (uint64, as many salts).");

static PyObject *salted_mix(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *objs[3], *result = NULL;
    Py_buffer views[3];
    const char *names[3] = {"values", "salts", "out"};
    int held = 0;
    if (!PyArg_ParseTuple(args, "OOO", &objs[0], &objs[1], &objs[2])) {
        return NULL;
    }
    for (; held < 3; held++) {
        if (get_items(objs[held], &views[held], 8, names[held]) < 0) {
            goto done;
        }
    }
    if (views[1].len != views[0].len || views[2].readonly || views[2].len != views[0].len) {
        PyErr_SetString(PyExc_ValueError, "salted_mix: a salt and a writable place per value");
        goto done;
    }
    const uint64_t *value = views[0].buf, *salt = views[1].buf;
    uint64_t *out = views[2].buf;
    for (Py_ssize_t i = 0; i < views[0].len / 8; i++) {
        out[i] = mix64(value[i] ^ salt[i]);
    }
    result = Py_NewRef(Py_None);
done:
    for (int k = 0; k < held; k++) {
        PyBuffer_Release(&views[k]);
    }
    return result;
}

/* ---- one document ---------------------------------------------------------------------- */

PyDoc_STRVAR(one_document_doc,
"one_document(tokens, n, combine, a, b, w, rows, band_salts, masks, mask_salts) -> tuple\n\n"
"The fingerprint of one document of token hashes (uint64, at least one), as the batch kernels\n"
"make it, in one call: (shingles, signature, band_keys, simhash, block_keys, sample_keys).\n"
"shingles: its distinct shingle hashes (shingle_hashes of n tokens with combine), sorted;\n"
"signature: minhash_minima of them with a and b (uint32 bytes); band_keys: combine_groups of\n"
"the signature's first len(band_salts) * rows values in bands of rows, salted by band_salts\n"
"(none when rows is 0); simhash: simhash_majority of the tokens (an int); block_keys:\n"
"masked_keys of the SimHash; sample_keys: winnow of the shingles in order with window w (none\n"
"when w is 0). Byte strings of uint64 but the signature.");

/* The kernels' steps for one document, into `out` (sized by the caller, see one_document). */
typedef struct {
    uint64_t *shingles, *samples, *bands, *blocks, simhash;
    uint32_t *signature;
    size_t shingle_count, sample_count;
} OneDocument;

static int fingerprint_one(const uint64_t *token, size_t count, size_t n,
                           const uint64_t *multiplier, const uint64_t *a, const uint64_t *b,
                           size_t perms, size_t w, size_t rows, const uint64_t *band_salt,
                           size_t bands, const uint64_t *mask, const uint64_t *mask_salt,
                           size_t masks, OneDocument *out)
{
    size_t width = count < n ? count : n, shingles = count - width + 1;
    uint64_t *ordered = PyMem_Malloc((2 * shingles + perms) * sizeof(uint64_t));
    if (ordered == NULL) {
        return -1;
    }
    uint64_t *scratch = ordered + shingles, *minima = scratch + shingles;
    for (size_t p = 0; p < shingles; p++) {
        uint64_t acc = 0;
        for (size_t j = 0; j < width; j++) {
            acc += token[p + j] * multiplier[j];
        }
        ordered[p] = mix64(acc);
    }
    if (w) {
        if (shingles < w) {
            uint64_t minimum = ordered[0];
            for (size_t i = 1; i < shingles; i++) {
                minimum = ordered[i] < minimum ? ordered[i] : minimum;
            }
            out->samples[0] = minimum;
            out->sample_count = 1;
        }
        else {
            size_t found = window_minima(ordered, shingles, w, scratch, out->samples);
            out->sample_count = sort_distinct(out->samples, found, scratch);
        }
    }
    memcpy(out->shingles, ordered, shingles * sizeof(uint64_t));
    out->shingle_count = sort_distinct(out->shingles, shingles, scratch);
    for (size_t i = 0; i < perms; i++) {
        minima[i] = UINT64_MAX;
    }
    fold_minima(out->shingles, (Py_ssize_t)out->shingle_count, a, b, minima, (Py_ssize_t)perms);
    for (size_t i = 0; i < perms; i++) {
        out->signature[i] = (uint32_t)(minima[i] >> 32);
    }
    for (size_t g = 0; g < bands; g++) {
        uint64_t acc = band_salt[g] * SPLITMIX_GAMMA;
        for (size_t j = 0; j < rows; j++) {
            acc += (uint64_t)out->signature[g * rows + j] * multiplier[j];
        }
        out->bands[g] = mix64(acc);
    }
    uint32_t counts[64] = {0};
    count_bits(token, (Py_ssize_t)count, counts);
    out->simhash = 0;
    for (int j = 0; j < 64; j++) {
        out->simhash |= (uint64_t)(2 * (uint64_t)counts[j] > count) << j;
    }
    for (size_t j = 0; j < masks; j++) {
        out->blocks[j] = mix64((out->simhash & mask[j]) ^ mask_salt[j]);
    }
    PyMem_Free(ordered);
    return 0;
}

static PyObject *one_document(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *objs[7], *result = NULL;
    Py_ssize_t n, w, rows;
    Py_buffer views[7];
    const char *names[7] = {"tokens", "combine", "a", "b", "band_salts", "masks", "mask_salts"};
    int held = 0;
    uint64_t *room = NULL;
    if (!PyArg_ParseTuple(args, "OnOOOnnOOO", &objs[0], &n, &objs[1], &objs[2], &objs[3], &w,
                          &rows, &objs[4], &objs[5], &objs[6])) {
        return NULL;
    }
    for (; held < 7; held++) {
        if (get_items(objs[held], &views[held], 8, names[held]) < 0) {
            goto done;
        }
    }
    size_t count = (size_t)views[0].len / 8, perms = (size_t)views[2].len / 8;
    size_t bands = rows ? (size_t)views[4].len / 8 : 0, masks = (size_t)views[5].len / 8;
    if (count == 0 || n < 1 || n > views[1].len / 8 || w < 0 || rows < 0
        || rows > views[1].len / 8 || views[3].len != views[2].len
        || bands * (size_t)rows > perms || views[6].len != views[5].len) {
        PyErr_SetString(PyExc_ValueError, "one_document: arguments do not agree");
        goto done;
    }
    /* shingles and sample keys: at most one per token each; the signature as uint64 room */
    room = PyMem_Malloc((2 * count + perms + bands + masks) * sizeof(uint64_t));
    if (room == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    OneDocument out = {.shingles = room, .samples = room + count,
                       .signature = (uint32_t *)(room + 2 * count),
                       .bands = room + 2 * count + perms,
                       .blocks = room + 2 * count + perms + bands};
    if (fingerprint_one(views[0].buf, count, (size_t)n, views[1].buf, views[2].buf, views[3].buf,
                        perms, (size_t)w, (size_t)rows, views[4].buf, bands, views[5].buf,
                        views[6].buf, masks, &out) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    result = Py_BuildValue(
        "(y#y#y#Ky#y#)", (const char *)out.shingles, (Py_ssize_t)(out.shingle_count * 8),
        (const char *)out.signature, (Py_ssize_t)(perms * 4), (const char *)out.bands,
        (Py_ssize_t)(bands * 8), (unsigned long long)out.simhash, (const char *)out.blocks,
        (Py_ssize_t)(masks * 8), (const char *)out.samples, (Py_ssize_t)(out.sample_count * 8));
done:
    PyMem_Free(room);
    for (int k = 0; k < held; k++) {
        PyBuffer_Release(&views[k]);
    }
    return result;
}

/* ---- module ---------------------------------------------------------------------------- */

static PyMethodDef kernel_methods[] = {
    {"word_bytes", word_bytes, METH_O, word_bytes_doc},
    {"script_tokens", script_tokens, METH_VARARGS, script_tokens_doc},
    {"fold_fullwidth", fold_fullwidth, METH_O, fold_fullwidth_doc},
    {"canonical_words", canonical_words, METH_VARARGS, canonical_words_doc},
    {"minhash_minima", minhash_minima, METH_VARARGS, minhash_minima_doc},
    {"shingle_hashes", shingle_hashes, METH_VARARGS, shingle_hashes_doc},
    {"combine_groups", combine_groups, METH_VARARGS, combine_groups_doc},
    {"simhash_majority", simhash_majority, METH_VARARGS, simhash_majority_doc},
    {"simhash_weighted", simhash_weighted, METH_VARARGS, simhash_weighted_doc},
    {"winnow", winnow, METH_VARARGS, winnow_doc},
    {"intersection_sizes", intersection_sizes, METH_VARARGS, intersection_sizes_doc},
    {"high_halves", high_halves, METH_VARARGS, high_halves_doc},
    {"masked_keys", masked_keys, METH_VARARGS, masked_keys_doc},
    {"one_document", one_document, METH_VARARGS, one_document_doc},
    {"salted_mix", salted_mix, METH_VARARGS, salted_mix_doc},
    {"multimap_insert", multimap_insert, METH_VARARGS, multimap_insert_doc},
    {"multimap_rehash", multimap_rehash, METH_VARARGS, multimap_rehash_doc},
    {"multimap_find", multimap_find, METH_VARARGS, multimap_find_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kernels_module = {
    PyModuleDef_HEAD_INIT, "_kernels",
    "Compiled kernels of dedup_store.core (words, shingles, MinHash, SimHash, winnowing, key\n"
    "index).", -1,
    kernel_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&kernels_module); }
