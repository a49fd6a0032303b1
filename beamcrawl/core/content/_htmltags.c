/* The tags of an HTML document as htmlbounds reads them, compiled: the tokenizer of the parse
 * limits' pre-scan without the regular expression engine.
 *
 * tags(text) returns what htmlbounds._TAG_AND_NEXT.findall(text) returns: for each tag, in
 * document order, the 4-tuple (closing, name, attributes, after):
 *
 *   - a tag starts at a "<" followed by an ASCII letter, or by "/" and an ASCII letter
 *     (closing is then "/", else ""); any other "<" is text;
 *   - its name is that letter and every character after it up to a tab, line feed, form
 *     feed, carriage return, space, "/" or ">";
 *   - its attributes are everything after the name up to and including the ">" that ends the
 *     tag, or to the end of the text: runs of those spaces and "/", and attributes, each a
 *     character other than space, "/" and ">" then characters other than space, "/", ">"
 *     and "=", optionally followed by spaces, "=", spaces and a value. A value is a double-
 *     or single-quoted string when its closing quote is there (it may hold ">"), else the
 *     characters up to a space or ">" (an unclosed quote is such a value's first character);
 *   - after is "" when another tag or the end of the text follows the tag, else the first
 *     character of the text that follows it.
 *
 * long_attributes(text, longer_than) returns the attributes of every tag (the third item
 * above) that are more than longer_than characters long, in document order: what
 * [a for a in htmlbounds._TAG_ATTRIBUTES.findall(text) if len(a) > longer_than] returns,
 * with no string made for the others.
 *
 * The rules are the regular expressions', written as loops; htmlbounds checks on import that
 * both give the same tokens, and its tests compare them on generated tag soup.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* The spaces of the HTML tokenizer (no vertical tab). */
static inline int is_space(Py_UCS4 c) { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'; }

static inline int is_letter(Py_UCS4 c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

typedef struct {
    int kind;
    const void *data;
    Py_ssize_t n;
} Text;

static inline Py_UCS4 at(const Text *t, Py_ssize_t i) { return PyUnicode_READ(t->kind, t->data, i); }

/* Where the first ``c`` at or after ``from`` is, or -1. */
static Py_ssize_t find_char(PyObject *str, const Text *t, Py_UCS4 c, Py_ssize_t from) {
    if (from >= t->n) return -1;
    return PyUnicode_FindChar(str, c, from, t->n, 1);
}

/* Whether a tag starts at ``i`` ("<" then a letter, or "</" then a letter); sets its name's
 * first index and whether it is an end tag. */
static inline int tag_starts(const Text *t, Py_ssize_t i, Py_ssize_t *name, int *closing) {
    if (i + 1 >= t->n) return 0;
    Py_UCS4 c = at(t, i + 1);
    if (is_letter(c)) {
        *closing = 0;
        *name = i + 1;
        return 1;
    }
    if (c == '/' && i + 2 < t->n && is_letter(at(t, i + 2))) {
        *closing = 1;
        *name = i + 2;
        return 1;
    }
    return 0;
}

/* The end of the name that starts at ``i`` (one letter, then anything but a space, "/", ">"). */
static inline Py_ssize_t name_end(const Text *t, Py_ssize_t i) {
    i++;
    while (i < t->n) {
        Py_UCS4 c = at(t, i);
        if (is_space(c) || c == '/' || c == '>') break;
        i++;
    }
    return i;
}

/* The end of the attributes that start at ``i``, after a tag's name: past its ">" if it has one. */
static Py_ssize_t attributes_end(PyObject *str, const Text *t, Py_ssize_t i) {
    const Py_ssize_t n = t->n;
    while (i < n) {
        Py_UCS4 c = at(t, i);
        if (is_space(c) || c == '/') {
            i++;
            continue;
        }
        if (c == '>') break;
        /* An attribute's name: its first character may be "=", the others not. */
        i++;
        while (i < n) {
            c = at(t, i);
            if (is_space(c) || c == '/' || c == '>' || c == '=') break;
            i++;
        }
        /* Its value, if spaces, "=" and spaces follow. */
        Py_ssize_t k = i;
        while (k < n && is_space(at(t, k))) k++;
        if (k >= n || at(t, k) != '=') continue;
        k++;
        while (k < n && is_space(at(t, k))) k++;
        if (k < n) {
            c = at(t, k);
            if (c == '"' || c == '\'') {
                Py_ssize_t close = find_char(str, t, c, k + 1);
                if (close == -2) return -2;
                if (close >= 0) {
                    i = close + 1;
                    continue;
                }
                /* No closing quote: the quote starts an unquoted value. */
            }
        }
        while (k < n) {
            c = at(t, k);
            if (is_space(c) || c == '>') break;
            k++;
        }
        i = k;
    }
    if (i < n && at(t, i) == '>') i++;
    return i;
}

static int read_text(PyObject *str, Text *t) {
    if (!PyUnicode_Check(str)) {
        PyErr_SetString(PyExc_TypeError, "text must be a str");
        return -1;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(str) < 0) return -1;
#endif
    t->kind = PyUnicode_KIND(str);
    t->data = PyUnicode_DATA(str);
    t->n = PyUnicode_GET_LENGTH(str);
    return 0;
}

/* One tag: where its name starts and stops, where it ends, whether it is an end tag. */
typedef struct {
    Py_ssize_t name, name_stop, end;
    int closing;
} Tag;

/* Finds the first tag at or after ``pos``: 1 when found (``tag`` set), 0 when there is none,
 * -1 on an error (set). */
static int next_tag(PyObject *str, const Text *t, Py_ssize_t pos, Tag *tag) {
    for (;;) {
        Py_ssize_t lt = find_char(str, t, '<', pos);
        if (lt == -2) return -1;
        if (lt < 0) return 0;
        if (tag_starts(t, lt, &tag->name, &tag->closing)) break;
        pos = lt + 1;
    }
    tag->name_stop = name_end(t, tag->name);
    tag->end = attributes_end(str, t, tag->name_stop);
    return tag->end == -2 ? -1 : 1;
}

static PyObject *EMPTY, *SLASH;

/* A tag's 4-tuple of tags(): (closing, name, attributes, after). */
static PyObject *tag_tuple(PyObject *str, const Text *t, const Tag *tag) {
    const Py_ssize_t end = tag->end;
    Tag next;
    PyObject *after;
    if (end >= t->n || (at(t, end) == '<' && tag_starts(t, end, &next.name, &next.closing))) {
        after = Py_NewRef(EMPTY);
    } else {
        after = PyUnicode_Substring(str, end, end + 1);
    }
    if (after == NULL) return NULL;
    PyObject *item = NULL;
    PyObject *name = PyUnicode_Substring(str, tag->name, tag->name_stop);
    PyObject *attributes = PyUnicode_Substring(str, tag->name_stop, end);
    if (name != NULL && attributes != NULL) {
        item = PyTuple_Pack(4, tag->closing ? SLASH : EMPTY, name, attributes, after);
    }
    Py_XDECREF(name);
    Py_XDECREF(attributes);
    Py_DECREF(after);
    return item;
}

/* Every tag of ``str`` as its tuple (``tuples``), or else the attributes of those whose
 * attributes are longer than ``longer_than`` characters. */
static PyObject *collect(PyObject *str, int tuples, Py_ssize_t longer_than) {
    Text t;
    if (read_text(str, &t) < 0) return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    Tag tag;
    int found;
    for (Py_ssize_t pos = 0; (found = next_tag(str, &t, pos, &tag)) == 1; pos = tag.end) {
        PyObject *item;
        if (tuples) {
            item = tag_tuple(str, &t, &tag);
        } else if (tag.end - tag.name_stop > longer_than) {
            item = PyUnicode_Substring(str, tag.name_stop, tag.end);
        } else {
            continue;
        }
        if (item == NULL) break;
        int failed = PyList_Append(out, item);
        Py_DECREF(item);
        if (failed < 0) break;
    }
    if (found != 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

static PyObject *tags(PyObject *self, PyObject *str) { return collect(str, 1, 0); }

static PyObject *long_attributes(PyObject *self, PyObject *args) {
    PyObject *str;
    Py_ssize_t longer_than;
    if (!PyArg_ParseTuple(args, "On:long_attributes", &str, &longer_than)) return NULL;
    return collect(str, 0, longer_than);
}

static PyMethodDef methods[] = {
    {"tags", tags, METH_O, "The tags of an HTML document: (closing, name, attributes, after) each."},
    {"long_attributes", long_attributes, METH_VARARGS, "The attributes of the tags longer than a length."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_htmltags", NULL, -1, methods};

PyMODINIT_FUNC PyInit__htmltags(void) {
    EMPTY = PyUnicode_FromString("");
    SLASH = PyUnicode_FromString("/");
    if (EMPTY == NULL || SLASH == NULL) return NULL;
    return PyModule_Create(&module);
}
