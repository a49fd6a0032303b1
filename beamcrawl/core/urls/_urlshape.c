/* The URL-shape check of every discovered link, compiled: urlshape.ShapeRules.check without a
 * Python step per string operation.
 *
 * check(max_length, max_depth, max_segment_repeats, schemes, rejected, url) returns what
 * ShapeRules.check returns for an ASCII url, as an index into urlshape.REASONS ("too_long",
 * "bad_scheme", "too_deep", "repeated_segment", "binary_extension"), or -1 for None (the
 * shape is fine), or -2 when it leaves the url to the Python rules: a url with a character
 * above 0x7f (whose lower-casing is Unicode's), or a path of more than MAX_SEGMENTS segments
 * (counting repeats pairwise would cost their square). schemes and rejected are the rules'
 * lower-case frozensets of schemes and extensions; a limit of 0 is off, as in the rules. The
 * url comes last so that a rules object binds the rest once (functools.partial).
 *
 * The steps are the rules' own, in their order, on the same indices:
 *   - longer than max_length characters: too_long;
 *   - "://" must follow a non-empty scheme that, lower-cased, is in schemes: else bad_scheme;
 *   - the path runs from the first "/" after "://" to the first "?" (or the end), cut at a
 *     "#" inside it; a "?" before that "/" means no path; the path without its leading "/"
 *     is judged, and an empty one is fine;
 *   - its depth is its count of "/" plus one, or the count alone when it ends with "/";
 *     more than max_depth: too_deep;
 *   - when depth >= max_segment_repeats, its segments (split at "/", the one a trailing
 *     slash makes left out) are counted, and one occurring max_segment_repeats times or
 *     more is repeated_segment;
 *   - a path ending with "/" is fine; else the extension of its last segment (after the last
 *     ".", at most 9 characters, cut at a ";"), lower-cased, in rejected: binary_extension.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define MAX_SEGMENTS 256
#define MAX_EXT 9 /* urlshape._MAX_EXT */

enum { FINE = -1, ASK_PYTHON = -2, TOO_LONG = 0, BAD_SCHEME = 1, TOO_DEEP = 2, REPEATED = 3, BINARY = 4 };

/* Where the first c in s[from:to] is, or -1. */
static inline Py_ssize_t find(const char *s, Py_ssize_t from, Py_ssize_t to, char c) {
    if (from >= to) return -1;
    const char *p = memchr(s + from, c, (size_t)(to - from));
    return p == NULL ? -1 : p - s;
}

/* Whether the lower-cased s[from:to] is in the frozenset of str. */
static int lower_in(const char *s, Py_ssize_t from, Py_ssize_t to, PyObject *set) {
    char buf[64] = {0};
    Py_ssize_t n = to - from;
    char *lower = n <= (Py_ssize_t)sizeof buf ? buf : PyMem_Malloc((size_t)n);
    if (lower == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        char c = s[from + i];
        lower[i] = (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
    }
    PyObject *key = PyUnicode_FromStringAndSize(lower, n);
    if (lower != buf) PyMem_Free(lower);
    if (key == NULL) return -1;
    int found = PySet_Contains(set, key);
    Py_DECREF(key);
    return found;
}

/* Whether some segment of path[0:n] (split at "/") occurs `repeats` times or more; -1 when
 * there are more than MAX_SEGMENTS of them. */
static int repeats_a_segment(const char *path, Py_ssize_t n, Py_ssize_t repeats) {
    Py_ssize_t start[MAX_SEGMENTS], len[MAX_SEGMENTS];
    Py_ssize_t k = 0, at = 0;
    for (;;) {
        if (k == MAX_SEGMENTS) return -1;
        Py_ssize_t slash = find(path, at, n, '/');
        Py_ssize_t end = slash < 0 ? n : slash;
        start[k] = at;
        len[k] = end - at;
        k++;
        if (slash < 0) break;
        at = slash + 1;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        Py_ssize_t count = 1;
        for (Py_ssize_t j = i + 1; j < k; j++) {
            if (len[j] == len[i] && memcmp(path + start[j], path + start[i], (size_t)len[i]) == 0 &&
                ++count >= repeats)
                return 1;
        }
    }
    return 0;
}

static int shape(PyObject *url, Py_ssize_t max_length, Py_ssize_t max_depth, Py_ssize_t repeats, PyObject *schemes,
                 PyObject *rejected) {
    if (!PyUnicode_IS_ASCII(url)) return ASK_PYTHON;
    const char *s = (const char *)PyUnicode_DATA(url);
    Py_ssize_t n = PyUnicode_GET_LENGTH(url);
    if (max_length && n > max_length) return TOO_LONG;
    Py_ssize_t sep = -1;
    for (Py_ssize_t i = 0; i + 2 < n; i++) {
        if (s[i] == ':' && s[i + 1] == '/' && s[i + 2] == '/') {
            sep = i;
            break;
        }
    }
    if (sep <= 0) return BAD_SCHEME;
    int known = lower_in(s, 0, sep, schemes);
    if (known < 0) return -3;
    if (!known) return BAD_SCHEME;
    Py_ssize_t slash = find(s, sep + 3, n, '/');
    if (slash < 0) return FINE;
    Py_ssize_t query = find(s, sep + 3, n, '?');
    if (query >= 0 && query < slash) return FINE;
    Py_ssize_t end = query >= 0 ? query : n;
    Py_ssize_t hash = find(s, slash, end, '#');
    if (hash >= 0) end = hash;
    const char *path = s + slash + 1;
    Py_ssize_t length = end - slash - 1;
    if (length <= 0) return FINE;
    int trailing = path[length - 1] == '/';
    Py_ssize_t slashes = 0;
    for (Py_ssize_t i = 0; i < length; i++) slashes += path[i] == '/';
    Py_ssize_t depth = trailing ? slashes : slashes + 1;
    if (max_depth && depth > max_depth) return TOO_DEEP;
    if (repeats && depth >= repeats) {
        int repeated = repeats_a_segment(path, trailing ? length - 1 : length, repeats);
        if (repeated < 0) return ASK_PYTHON;
        if (repeated) return REPEATED;
    }
    if (trailing) return FINE;
    Py_ssize_t last = length;
    while (last > 0 && path[last - 1] != '/') last--;
    Py_ssize_t dot = -1;
    for (Py_ssize_t i = length - 1; i >= last; i--) {
        if (path[i] == '.') {
            dot = i;
            break;
        }
    }
    if (dot < 0 || length - dot - 1 > MAX_EXT) return FINE;
    Py_ssize_t ext_end = find(path, dot + 1, length, ';');
    if (ext_end < 0) ext_end = length;
    int found = lower_in(path, dot + 1, ext_end, rejected);
    if (found < 0) return -3;
    return found ? BINARY : FINE;
}

static PyObject *check(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "check() takes 6 arguments");
        return NULL;
    }
    PyObject *schemes = args[3], *rejected = args[4], *url = args[5];
    if (!PyUnicode_Check(url) || !PyFrozenSet_Check(schemes) || !PyFrozenSet_Check(rejected)) {
        PyErr_SetString(PyExc_TypeError, "check(int, int, int, frozenset, frozenset, url: str)");
        return NULL;
    }
    Py_ssize_t limits[3];
    for (int i = 0; i < 3; i++) {
        limits[i] = PyLong_AsSsize_t(args[i]);
        if (limits[i] == -1 && PyErr_Occurred()) return NULL;
        if (limits[i] < 0) {
            PyErr_SetString(PyExc_ValueError, "limits must be >= 0");
            return NULL;
        }
    }
    int code = shape(url, limits[0], limits[1], limits[2], schemes, rejected);
    if (code == -3) return NULL;
    return PyLong_FromLong(code);
}

static PyMethodDef methods[] = {
    {"check", (PyCFunction)(void (*)(void))check, METH_FASTCALL,
     "check(max_length: int, max_depth: int, max_segment_repeats: int, schemes: frozenset[str],\n"
     "      rejected: frozenset[str], url: str, /) -> int\n\n"
     "ShapeRules.check of an ASCII url as an index into REASONS; -1 for fine, -2 for the Python rules."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_urlshape", "The URL-shape check, compiled (see urlshape).", -1, methods,
};

PyMODINIT_FUNC PyInit__urlshape(void) { return PyModule_Create(&module); }
