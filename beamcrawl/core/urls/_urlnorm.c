/* urlnorm.normalize compiled for the links most pages hold: plain ASCII references that need
 * no percent-encoding work, resolved against a plain http(s) base.
 *
 * normalize(url, base, authority, dropped) returns what urlnorm.normalize(url, base) returns,
 * or None to leave the url to the Python steps (which then answer, or raise InvalidURL).
 * authority is urlnorm's own cached authority normaliser (called with the authority and the
 * scheme; what it raises is raised), dropped the lower-case names that urlnorm's
 * _MAYBE_DROPPED looks for at the start of each query parameter.
 *
 * The steps are urlnorm's, in its order, on the same indices:
 *   - C0 controls and spaces stripped at both ends (a url still longer than 8 x 2048 is left
 *     to Python, which refuses it); a tab, CR, LF or backslash left inside: Python;
 *   - resolution (urlnorm._resolve): a reference beginning "http://" or "https://" (in any
 *     case) is absolute; else, against a base that is ASCII "http://" or "https://" (any case)
 *     with a non-empty authority and nothing at or below 0x20, no "\" and no "#" (else Python):
 *     "//x" is the base's scheme then ":" and x up to its "#"; "/x" is scheme "://" authority x;
 *     a reference with no ":" and not starting with "?" or "#" follows the base's directory
 *     (its path up to the last "/", or "/") up to its "#"; any other reference: Python;
 *   - the resolved url (urlnorm._normalize_resolved): the scheme lower-cased, every "/" after
 *     the ":" skipped (nothing left, or "?" or "#" next: Python), cut at "#"; the authority up
 *     to the first "/" or "?" given to authority(); the path up to the first "?", the query
 *     after it;
 *   - a path with a character outside the unreserved, sub-delims, ":", "@" and "/", or with
 *     ";jsessionid=" in any case: Python; "/." in it: dot segments removed (RFC 3986 5.2.4,
 *     empty segments kept); an empty path is "/";
 *   - a non-empty query with a character outside those, "'" out and "?" in, or a parameter
 *     whose name begins with one of dropped in any case: Python;
 *   - a result longer than 2048 characters: Python (which refuses it).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define LONGEST_INPUT (8 * 2048) /* urlnorm._MAX_INPUT_LENGTH */
#define LONGEST_URL 2048         /* urlnorm.MAX_URL_LENGTH */

static unsigned char path_ok[256], query_ok[256];

static inline char lower(char c) { return (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c; }

/* Whether s (n characters) begins with the lower-case prefix p, in any case. */
static inline int starts_lower(const char *s, Py_ssize_t n, const char *p) {
    Py_ssize_t i = 0;
    for (; p[i]; i++) {
        if (i >= n || lower(s[i]) != p[i]) return 0;
    }
    return 1;
}

static inline Py_ssize_t find(const char *s, Py_ssize_t from, Py_ssize_t to, char c) {
    if (from >= to) return -1;
    const char *p = memchr(s + from, c, (size_t)(to - from));
    return p == NULL ? -1 : p - s;
}

/* 4 for "http://", 5 for "https://" at s, in any case; 0 otherwise. */
static Py_ssize_t http_scheme(const char *s, Py_ssize_t n) {
    if (starts_lower(s, n, "http://")) return 4;
    if (starts_lower(s, n, "https://")) return 5;
    return 0;
}

/* A growable byte buffer. */
typedef struct {
    char *data;
    Py_ssize_t len, cap;
    char small[512];
} buf_t;

static void buf_init(buf_t *b) {
    b->data = b->small;
    b->len = 0;
    b->cap = (Py_ssize_t)sizeof b->small;
}

static int buf_add(buf_t *b, const char *s, Py_ssize_t n) {
    if (b->len + n > b->cap) {
        Py_ssize_t cap = (b->len + n) * 2;
        char *grown = PyMem_Malloc((size_t)cap);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(grown, b->data, (size_t)b->len);
        if (b->data != b->small) PyMem_Free(b->data);
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, (size_t)n);
    b->len += n;
    return 0;
}

static void buf_free(buf_t *b) {
    if (b->data != b->small) PyMem_Free(b->data);
}

/* Whether s[from:to] holds ";jsessionid=" in any case. */
static int has_jsessionid(const char *s, Py_ssize_t from, Py_ssize_t to) {
    for (Py_ssize_t i = from; i < to; i++) {
        if (s[i] == ';' && starts_lower(s + i, to - i, ";jsessionid=")) return 1;
    }
    return 0;
}

/* Whether a parameter of the query s[from:to] begins with a name of dropped (a tuple of
 * lower-case ASCII str); -1 on a bad tuple. */
static int drops_a_param(const char *s, Py_ssize_t from, Py_ssize_t to, PyObject *dropped) {
    Py_ssize_t count = PyTuple_GET_SIZE(dropped);
    Py_ssize_t at = from;
    while (at <= to) {
        for (Py_ssize_t j = 0; j < count; j++) {
            PyObject *name = PyTuple_GET_ITEM(dropped, j);
            if (!PyUnicode_Check(name) || !PyUnicode_IS_ASCII(name)) {
                PyErr_SetString(PyExc_TypeError, "dropped must be a tuple of ASCII str");
                return -1;
            }
            if (starts_lower(s + at, to - at, (const char *)PyUnicode_1BYTE_DATA(name))) return 1;
        }
        Py_ssize_t amp = find(s, at, to, '&');
        if (amp < 0) break;
        at = amp + 1;
    }
    return 0;
}

/* RFC 3986 5.2.4 on the path s[from:to] (it starts with "/"), as urlnorm._remove_dot_segments:
 * each kept segment is "/" + segment, ".." drops the last, a path ending in "." or ".." ends
 * in "/", and nothing kept is "/". */
static int remove_dot_segments(const char *s, Py_ssize_t from, Py_ssize_t to, buf_t *out) {
    Py_ssize_t base = out->len;
    Py_ssize_t slots = 1;
    for (Py_ssize_t i = from; i < to; i++) slots += s[i] == '/';
    Py_ssize_t *kept = PyMem_Malloc((size_t)slots * sizeof(Py_ssize_t)); /* out offsets of each kept "/" */
    if (kept == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t depth = 0;
    int last_dot = 0;
    Py_ssize_t at = from + 1; /* past the leading "/" */
    for (;;) {
        Py_ssize_t end = find(s, at, to, '/');
        if (end < 0) end = to;
        Py_ssize_t n = end - at;
        last_dot = (n == 1 && s[at] == '.') || (n == 2 && s[at] == '.' && s[at + 1] == '.');
        if (n == 1 && s[at] == '.') {
            /* skipped */
        } else if (n == 2 && s[at] == '.' && s[at + 1] == '.') {
            if (depth > 0) out->len = kept[--depth];
        } else {
            kept[depth++] = out->len;
            if (buf_add(out, "/", 1) < 0 || buf_add(out, s + at, n) < 0) {
                PyMem_Free(kept);
                return -1;
            }
        }
        if (end >= to) break;
        at = end + 1;
    }
    PyMem_Free(kept);
    if (last_dot || out->len == base) return buf_add(out, "/", 1);
    return 0;
}

static PyObject *normalize(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "normalize(url, base, authority, dropped) takes 4 arguments");
        return NULL;
    }
    PyObject *url = args[0], *base = args[1], *authority = args[2], *dropped = args[3];
    if (!PyUnicode_Check(url) || !(base == Py_None || PyUnicode_Check(base)) || !PyCallable_Check(authority) ||
        !PyTuple_Check(dropped)) {
        PyErr_SetString(PyExc_TypeError, "normalize(str, str | None, callable, tuple)");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(url)) Py_RETURN_NONE;
    const char *u = (const char *)PyUnicode_1BYTE_DATA(url);
    Py_ssize_t lo = 0, hi = PyUnicode_GET_LENGTH(url);
    while (lo < hi && (unsigned char)u[lo] <= 0x20) lo++;
    while (hi > lo && (unsigned char)u[hi - 1] <= 0x20) hi--;
    if (hi - lo > LONGEST_INPUT) Py_RETURN_NONE;
    for (Py_ssize_t i = lo; i < hi; i++) {
        char c = u[i];
        if (c == '\t' || c == '\n' || c == '\r' || c == '\\') Py_RETURN_NONE;
    }
    const char *ref = u + lo;
    Py_ssize_t rn = hi - lo;

    /* Resolution, into r. */
    buf_t r;
    buf_init(&r);
    PyObject *result = NULL;
    if (http_scheme(ref, rn)) {
        if (buf_add(&r, ref, rn) < 0) goto done;
    } else {
        if (base == Py_None || !PyUnicode_IS_ASCII(base)) goto ask_python;
        const char *b = (const char *)PyUnicode_1BYTE_DATA(base);
        Py_ssize_t bn = PyUnicode_GET_LENGTH(base);
        for (Py_ssize_t i = 0; i < bn; i++) {
            if ((unsigned char)b[i] <= 0x20 || b[i] == '\\' || b[i] == '#') goto ask_python;
        }
        Py_ssize_t scheme_n = http_scheme(b, bn);
        if (!scheme_n) goto ask_python;
        const char *scheme = scheme_n == 4 ? "http" : "https";
        Py_ssize_t a_lo = scheme_n + 3, a_hi = a_lo;
        while (a_hi < bn && b[a_hi] != '/' && b[a_hi] != '?') a_hi++;
        if (a_hi == a_lo) goto ask_python;
        Py_ssize_t p_hi = a_hi;
        while (p_hi < bn && b[p_hi] != '?') p_hi++;
        Py_ssize_t hash = find(ref, 0, rn, '#');
        Py_ssize_t upto = hash < 0 ? rn : hash;
        if (rn >= 2 && ref[0] == '/' && ref[1] == '/') {
            if (buf_add(&r, scheme, scheme_n) < 0 || buf_add(&r, ":", 1) < 0 || buf_add(&r, ref, upto) < 0) goto done;
        } else if (rn >= 1 && ref[0] == '/') {
            if (buf_add(&r, scheme, scheme_n) < 0 || buf_add(&r, "://", 3) < 0 || buf_add(&r, b + a_lo, a_hi - a_lo) < 0 ||
                buf_add(&r, ref, rn) < 0)
                goto done;
        } else if (rn >= 1 && ref[0] != '?' && ref[0] != '#' && find(ref, 0, rn, ':') < 0) {
            if (buf_add(&r, scheme, scheme_n) < 0 || buf_add(&r, "://", 3) < 0 || buf_add(&r, b + a_lo, a_hi - a_lo) < 0)
                goto done;
            if (p_hi > a_hi) {
                Py_ssize_t last = p_hi - 1;
                while (b[last] != '/') last--; /* the path starts with "/" */
                if (buf_add(&r, b + a_hi, last + 1 - a_hi) < 0) goto done;
            } else if (buf_add(&r, "/", 1) < 0) {
                goto done;
            }
            if (buf_add(&r, ref, upto) < 0) goto done;
        } else {
            goto ask_python;
        }
    }

    /* The resolved url r: scheme, authority, path, query. */
    {
        const char *s = r.data;
        Py_ssize_t n = r.len;
        Py_ssize_t scheme_n = http_scheme(s, n);
        if (!scheme_n) goto ask_python; /* cannot happen: both ways above begin so */
        Py_ssize_t at = scheme_n + 1;
        while (at < n && s[at] == '/') at++;
        if (at >= n || s[at] == '?' || s[at] == '#') goto ask_python;
        Py_ssize_t end = find(s, at, n, '#');
        if (end < 0) end = n;
        Py_ssize_t a_end = find(s, at, end, '/');
        if (a_end < 0) a_end = end;
        Py_ssize_t q = find(s, at, a_end, '?');
        if (q >= 0) a_end = q;
        PyObject *auth = PyUnicode_FromStringAndSize(s + at, a_end - at);
        if (auth == NULL) goto done;
        PyObject *scheme = PyUnicode_FromStringAndSize(scheme_n == 4 ? "http" : "https", scheme_n);
        if (scheme == NULL) {
            Py_DECREF(auth);
            goto done;
        }
        PyObject *host = PyObject_CallFunctionObjArgs(authority, auth, scheme, NULL);
        Py_DECREF(auth);
        Py_DECREF(scheme);
        if (host == NULL) goto done; /* InvalidURL, as the Python steps raise it */
        if (!PyUnicode_Check(host) || !PyUnicode_IS_ASCII(host)) {
            Py_DECREF(host);
            goto ask_python;
        }
        Py_ssize_t p_end = find(s, a_end, end, '?');
        Py_ssize_t q_lo = -1;
        if (p_end < 0) {
            p_end = end;
        } else {
            q_lo = p_end + 1;
        }
        int dots = 0;
        for (Py_ssize_t i = a_end; i < p_end; i++) {
            unsigned char c = (unsigned char)s[i];
            if (!path_ok[c]) {
                Py_DECREF(host);
                goto ask_python;
            }
            if (c == '.' && i > a_end && s[i - 1] == '/') dots = 1;
        }
        if (find(s, a_end, p_end, ';') >= 0 && has_jsessionid(s, a_end, p_end)) {
            Py_DECREF(host);
            goto ask_python;
        }
        if (q_lo >= 0 && q_lo < end) {
            for (Py_ssize_t i = q_lo; i < end; i++) {
                if (!query_ok[(unsigned char)s[i]]) {
                    Py_DECREF(host);
                    goto ask_python;
                }
            }
            int drops = drops_a_param(s, q_lo, end, dropped);
            if (drops != 0) {
                Py_DECREF(host);
                if (drops < 0) goto done;
                goto ask_python;
            }
        }
        buf_t out;
        buf_init(&out);
        Py_ssize_t host_n = PyUnicode_GET_LENGTH(host);
        int failed = buf_add(&out, scheme_n == 4 ? "http://" : "https://", scheme_n + 3) < 0 ||
                     buf_add(&out, (const char *)PyUnicode_1BYTE_DATA(host), host_n) < 0;
        Py_DECREF(host);
        if (!failed) {
            if (p_end == a_end) {
                failed = buf_add(&out, "/", 1) < 0;
            } else if (dots) {
                failed = remove_dot_segments(s, a_end, p_end, &out) < 0;
            } else {
                failed = buf_add(&out, s + a_end, p_end - a_end) < 0;
            }
        }
        if (!failed && q_lo >= 0) failed = buf_add(&out, "?", 1) < 0 || buf_add(&out, s + q_lo, end - q_lo) < 0;
        if (!failed) {
            if (out.len > LONGEST_URL) {
                buf_free(&out);
                goto ask_python;
            }
            result = PyUnicode_FromStringAndSize(out.data, out.len);
        }
        buf_free(&out);
        goto done;
    }

ask_python:
    Py_INCREF(Py_None);
    result = Py_None;
done:
    buf_free(&r);
    return result;
}

static PyMethodDef methods[] = {
    {"normalize", (PyCFunction)(void (*)(void))normalize, METH_FASTCALL,
     "normalize(url, base, authority, dropped) -> str | None: urlnorm.normalize(url, base) for a plain "
     "ASCII link, or None to leave it to the Python steps."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_urlnorm", "URL normalisation of plain links, compiled (see urlnorm).", -1, methods,
};

PyMODINIT_FUNC PyInit__urlnorm(void) {
    const char *unreserved = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~";
    for (const char *c = unreserved; *c; c++) path_ok[(unsigned char)*c] = query_ok[(unsigned char)*c] = 1;
    for (const char *c = "!$&'()*+,;=:@/"; *c; c++) path_ok[(unsigned char)*c] = 1;
    for (const char *c = "!$&()*+,;=:@/?"; *c; c++) query_ok[(unsigned char)*c] = 1;
    return PyModule_Create(&module);
}
