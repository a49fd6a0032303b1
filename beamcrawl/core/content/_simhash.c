/* The simhash of a page's words, compiled: textfp's fast path without a Python step per
 * feature.
 *
 * simhash(words, width, word_weight) returns what textfp._occurrence_simhash returns for
 * these words and their width-word shingles (textfp._utf8_shingles): each word counts
 * word_weight times and each shingle occurrence once; every feature is hashed with
 * MurmurHash3 x64-128, seed 0, and its first 64-bit word (h1) read as an unsigned integer;
 * bit b of the result is set when the occurrences whose hash has bit b set are more than
 * half of all occurrences. The shingles are joined into one buffer of this module's own
 * (no bytes object per shingle), and the bits are counted eight at a time (BitCounts).
 *
 * split_words(data, stop) returns what textfp._split_words returns: the chunks of data.split()
 * (cut at ASCII whitespace) but those of ASCII bytes that are in the frozenset stop or are
 * digits only, and the positions among them of the chunks with other bytes (which textfp reads
 * back as text and tokenizes), with a bytes object made only for the chunks kept: no list of
 * all of them and no two passes of filters over it.
 *
 * MurmurHash3 is Austin Appleby's public-domain hash; written here from its published
 * definition (the x64 128-bit variant: 16-byte blocks as two little-endian 64-bit words,
 * the tail, the length, fmix64). textfp checks on import that this module gives the same
 * fingerprints as the mmh3 package does, and uses it only then.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t fmix64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

/* Little-endian 64-bit load of 8 bytes, on any host byte order. */
static inline uint64_t load_le64(const unsigned char *p) {
    return (uint64_t)p[0] | ((uint64_t)p[1] << 8) | ((uint64_t)p[2] << 16) | ((uint64_t)p[3] << 24) |
           ((uint64_t)p[4] << 32) | ((uint64_t)p[5] << 40) | ((uint64_t)p[6] << 48) | ((uint64_t)p[7] << 56);
}

static const uint64_t C1 = 0x87c37b91114253d5ULL;
static const uint64_t C2 = 0x4cf5ad432745937fULL;

/* The mixing of a block's (or the tail's) first and second 64-bit word before it enters h1
 * and h2 respectively. A zero word mixes to zero. */
static inline uint64_t mix_k1(uint64_t k) { return rotl64(k * C1, 31) * C2; }
static inline uint64_t mix_k2(uint64_t k) { return rotl64(k * C2, 33) * C1; }

/* The first 64-bit word of MurmurHash3 x64-128 of data[0:len], seed 0. */
static uint64_t murmur3_h1(const unsigned char *data, size_t len) {
    const size_t nblocks = len / 16;
    uint64_t h1 = 0, h2 = 0;
    for (size_t i = 0; i < nblocks; i++) {
        h1 ^= mix_k1(load_le64(data + 16 * i));
        h1 = (rotl64(h1, 27) + h2) * 5 + 0x52dce729;
        h2 ^= mix_k2(load_le64(data + 16 * i + 8));
        h2 = (rotl64(h2, 31) + h1) * 5 + 0x38495ab5;
    }
    const unsigned char *tail = data + 16 * nblocks;
    const size_t rest = len & 15;
    uint64_t k1 = 0, k2 = 0;
    for (size_t i = rest; i > 8; i--) k2 |= (uint64_t)tail[i - 1] << (8 * (i - 9));
    for (size_t i = rest < 8 ? rest : 8; i > 0; i--) k1 |= (uint64_t)tail[i - 1] << (8 * (i - 1));
    /* The tail's words are zero where it has no bytes, and a zero word changes nothing. */
    h2 ^= mix_k2(k2);
    h1 ^= mix_k1(k1);
    h1 ^= (uint64_t)len;
    h2 ^= (uint64_t)len;
    h1 += h2;
    h2 += h1;
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 += h2;
    return h1;
}

/* Bit counts, eight at a time: SPREAD[v] has byte k set to bit k of v, so adding the
 * SPREAD of each byte of a hash to its own 64-bit lane counts eight bit positions in one
 * addition. A lane's bytes hold at most 255, so the lanes are flushed into the 64 counts
 * before any byte could carry into the next. */
static uint64_t SPREAD[256];

static void init_spread(void) {
    for (int v = 0; v < 256; v++) {
        uint64_t s = 0;
        for (int k = 0; k < 8; k++) s |= (uint64_t)((v >> k) & 1) << (8 * k);
        SPREAD[v] = s;
    }
}

typedef struct {
    int64_t counts[64];
    uint64_t lanes[8];
    int64_t held; /* the weight added to the lanes since they were flushed, at most 255 */
} BitCounts;

static void flush(BitCounts *c) {
    for (int j = 0; j < 8; j++) {
        for (int k = 0; k < 8; k++) c->counts[8 * j + k] += (int64_t)((c->lanes[j] >> (8 * k)) & 0xff);
        c->lanes[j] = 0;
    }
    c->held = 0;
}

/* Adds hash h's bits ``weight`` times. */
static inline void add_bits(BitCounts *c, uint64_t h, int64_t weight) {
    if (weight > 255) {
        for (int b = 0; b < 64; b++) c->counts[b] += (int64_t)((h >> b) & 1) * weight;
        return;
    }
    if (c->held + weight > 255) flush(c);
    for (int j = 0; j < 8; j++) c->lanes[j] += SPREAD[(h >> (8 * j)) & 0xff] * (uint64_t)weight;
    c->held += weight;
}

/* Word weights above this are refused (textfp keeps them in Python): with at most 2**31
 * words a page, every count and the total then fit in 63 bits. */
#define MAX_WEIGHT 0x7fffffffLL

static PyObject *simhash(PyObject *self, PyObject *args) {
    PyObject *words;
    Py_ssize_t width;
    long long weight;
    if (!PyArg_ParseTuple(args, "O!nL:simhash", &PyList_Type, &words, &width, &weight)) return NULL;
    if (weight < 1 || weight > MAX_WEIGHT) {
        PyErr_SetString(PyExc_ValueError, "word_weight must be from 1 to 2**31 - 1");
        return NULL;
    }
    const Py_ssize_t n = PyList_GET_SIZE(words);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyBytes_Check(PyList_GET_ITEM(words, i))) {
            PyErr_SetString(PyExc_TypeError, "words must be bytes");
            return NULL;
        }
    }
    BitCounts c;
    memset(&c, 0, sizeof c);
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *w = PyList_GET_ITEM(words, i);
        add_bits(&c, murmur3_h1((const unsigned char *)PyBytes_AS_STRING(w), (size_t)PyBytes_GET_SIZE(w)),
                 (int64_t)weight);
        total += (int64_t)weight;
    }
    /* Shingles, as _utf8_shingles makes them: none for width < 2 or no words; all the
     * words as one when there are fewer than width; else one per position. */
    if (width >= 2 && n > 0) {
        const Py_ssize_t span = n < width ? n : width;
        const Py_ssize_t positions = n < width ? 1 : n - width + 1;
        size_t cap = 0;
        unsigned char *buf = NULL;
        for (Py_ssize_t p = 0; p < positions; p++) {
            size_t need = (size_t)(span - 1);
            for (Py_ssize_t j = p; j < p + span; j++) need += (size_t)PyBytes_GET_SIZE(PyList_GET_ITEM(words, j));
            if (need > cap) {
                unsigned char *grown = PyMem_Realloc(buf, need ? need : 1);
                if (grown == NULL) {
                    PyMem_Free(buf);
                    return PyErr_NoMemory();
                }
                buf = grown;
                cap = need;
            }
            size_t at = 0;
            for (Py_ssize_t j = p; j < p + span; j++) {
                PyObject *w = PyList_GET_ITEM(words, j);
                if (j > p) buf[at++] = ' ';
                memcpy(buf + at, PyBytes_AS_STRING(w), (size_t)PyBytes_GET_SIZE(w));
                at += (size_t)PyBytes_GET_SIZE(w);
            }
            add_bits(&c, murmur3_h1(buf, at), 1);
            total += 1;
        }
        PyMem_Free(buf);
    }
    flush(&c);
    uint64_t fingerprint = 0;
    if (total > 0) {
        for (int b = 0; b < 64; b++) {
            if (c.counts[b] > total - c.counts[b]) fingerprint |= (uint64_t)1 << b;
        }
    }
    return PyLong_FromUnsignedLongLong(fingerprint);
}

static PyObject *feature_hash(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    uint64_t h = murmur3_h1((const unsigned char *)view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLongLong(h);
}

/* The stop words of split_words, as a hash table of their bytes (FNV-1a, open addressing),
 * built from the set the caller passes and kept while the caller passes that same set. */
typedef struct {
    const unsigned char *ptr;
    Py_ssize_t len;
} Span;

static PyObject *stop_source = NULL; /* the set the table was built from (a strong reference) */
static Span *stop_slots = NULL;
static size_t stop_mask = 0;
static unsigned char *stop_bytes = NULL;

static inline uint64_t fnv1a(const unsigned char *p, Py_ssize_t len) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (Py_ssize_t i = 0; i < len; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

static int stop_contains(const unsigned char *p, Py_ssize_t len) {
    for (size_t i = (size_t)fnv1a(p, len) & stop_mask;; i = (i + 1) & stop_mask) {
        const Span *slot = &stop_slots[i];
        if (slot->ptr == NULL) return 0;
        if (slot->len == len && memcmp(slot->ptr, p, (size_t)len) == 0) return 1;
    }
}

/* Builds the table from ``stop`` (a frozenset of bytes: a set could change under the table)
 * unless it was built from it. */
static int use_stop_words(PyObject *stop) {
    if (stop == stop_source) return 0;
    if (!PyFrozenSet_Check(stop)) {
        PyErr_SetString(PyExc_TypeError, "stop words must be a frozenset of bytes");
        return -1;
    }
    PyObject *items = PySequence_List(stop);
    if (items == NULL) return -1;
    /* The list's own length: a frozenset subclass may iterate other than its size says. */
    Py_ssize_t count = PyList_GET_SIZE(items), total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *w = PyList_GET_ITEM(items, i);
        if (!PyBytes_Check(w)) {
            Py_DECREF(items);
            PyErr_SetString(PyExc_TypeError, "stop words must be bytes");
            return -1;
        }
        total += PyBytes_GET_SIZE(w);
    }
    size_t size = 8;
    while (size < 4 * (size_t)count) size <<= 1;
    Span *slots = PyMem_Calloc(size, sizeof(Span));
    unsigned char *bytes = PyMem_Malloc(total ? (size_t)total : 1);
    if (slots == NULL || bytes == NULL) {
        PyMem_Free(slots);
        PyMem_Free(bytes);
        Py_DECREF(items);
        PyErr_NoMemory();
        return -1;
    }
    PyMem_Free(stop_slots);
    PyMem_Free(stop_bytes);
    stop_slots = slots;
    stop_bytes = bytes;
    stop_mask = size - 1;
    size_t at = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *w = PyList_GET_ITEM(items, i);
        Py_ssize_t len = PyBytes_GET_SIZE(w);
        memcpy(bytes + at, PyBytes_AS_STRING(w), (size_t)len);
        size_t j = (size_t)fnv1a(bytes + at, len) & stop_mask;
        while (slots[j].ptr != NULL) j = (j + 1) & stop_mask; /* a set has no duplicates */
        slots[j].ptr = bytes + at;
        slots[j].len = len;
        at += (size_t)len;
    }
    Py_DECREF(items);
    Py_INCREF(stop);
    Py_XSETREF(stop_source, stop);
    return 0;
}

static inline int ascii_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* split_words(data, stop): the chunks of data.split() but those of ASCII bytes that are in stop
 * or digits only, in order, and the positions in that list of the chunks with a byte above
 * 0x7f (kept whatever they are: the caller tokenizes them as text). A bytes object is made
 * only for the chunks kept. */
static PyObject *split_words(PyObject *self, PyObject *args) {
    Py_buffer view;
    PyObject *stop;
    if (!PyArg_ParseTuple(args, "y*O:split_words", &view, &stop)) return NULL;
    PyObject *words = NULL, *mixed = NULL, *out = NULL;
    if (use_stop_words(stop) < 0) goto done;
    words = PyList_New(0);
    mixed = PyList_New(0);
    if (words == NULL || mixed == NULL) goto done;
    const unsigned char *p = view.buf;
    const Py_ssize_t n = view.len;
    Py_ssize_t i = 0;
    while (i < n) {
        while (i < n && ascii_space(p[i])) i++;
        if (i >= n) break;
        const Py_ssize_t start = i;
        int digits = 1, ascii = 1;
        while (i < n && !ascii_space(p[i])) {
            if (p[i] < '0' || p[i] > '9') digits = 0;
            if (p[i] > 0x7f) ascii = 0;
            i++;
        }
        const Py_ssize_t len = i - start;
        if (ascii && (digits || stop_contains(p + start, len))) continue;
        if (!ascii) {
            PyObject *at = PyLong_FromSsize_t(PyList_GET_SIZE(words));
            int failed = at == NULL || PyList_Append(mixed, at) < 0;
            Py_XDECREF(at);
            if (failed) goto done;
        }
        PyObject *word = PyBytes_FromStringAndSize((const char *)p + start, len);
        if (word == NULL || PyList_Append(words, word) < 0) {
            Py_XDECREF(word);
            goto done;
        }
        Py_DECREF(word);
    }
    out = PyTuple_Pack(2, words, mixed);
done:
    Py_XDECREF(words);
    Py_XDECREF(mixed);
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"simhash", simhash, METH_VARARGS,
     "simhash(words: list[bytes], width: int, word_weight: int) -> int\n\n"
     "The 64-bit simhash of the words (each word_weight times) and their width-word shingles."},
    {"split_words", split_words, METH_VARARGS,
     "split_words(data: bytes, stop: frozenset[bytes]) -> tuple[list[bytes], list[int]]\n\n"
     "The chunks of data.split() but the ASCII ones in stop or of digits only, and where the\n"
     "chunks with a byte above 0x7f are among them."},
    {"feature_hash", feature_hash, METH_O,
     "feature_hash(data: bytes) -> int\n\nMurmurHash3 x64-128 of data, seed 0: its first 64-bit word, unsigned."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_simhash", "The simhash of a page's words, compiled (see textfp).", -1, methods,
};

PyMODINIT_FUNC PyInit__simhash(void) {
    init_spread();
    return PyModule_Create(&module);
}
