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
 *
 * walk(tokens, ...) is the pre-scan's walk over those tokens, htmlbounds._py_walk compiled
 * (described with the code, below).
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
    Py_ssize_t start, name, name_stop, end;
    int closing;
} Tag;

/* Finds the first tag at or after ``pos``: 1 when found (``tag`` set), 0 when there is none,
 * -1 on an error (set). */
static int next_tag(PyObject *str, const Text *t, Py_ssize_t pos, Tag *tag) {
    for (;;) {
        Py_ssize_t lt = find_char(str, t, '<', pos);
        if (lt == -2) return -1;
        if (lt < 0) return 0;
        if (tag_starts(t, lt, &tag->name, &tag->closing)) {
            tag->start = lt;
            break;
        }
        pos = lt + 1;
    }
    tag->name_stop = name_end(t, tag->name);
    tag->end = attributes_end(str, t, tag->name_stop);
    return tag->end == -2 ? -1 : 1;
}

static PyObject *EMPTY, *SLASH;

/* A page repeats its short names and attributes (``div``, `` class=x>``): tags() holds each
 * once, from ``shared`` (at most SHARED_MAX of them, of SHARED_CHARS characters at most), not
 * once a tag (4 MB of <a href=x> held 83 MB of tags, 57 bytes of them for each " href=x>"). */
#define SHARED_MAX 4096
#define SHARED_CHARS 32

static PyObject *shared_substring(PyObject *shared, PyObject *str, Py_ssize_t start, Py_ssize_t end) {
    PyObject *s = PyUnicode_Substring(str, start, end);
    if (s == NULL || end - start < 2 || end - start > SHARED_CHARS) return s; /* one character: Python shares it */
    PyObject *held = PyDict_GetItemWithError(shared, s);
    if (held != NULL) {
        Py_DECREF(s);
        return Py_NewRef(held);
    }
    if (PyErr_Occurred() || (PyDict_GET_SIZE(shared) < SHARED_MAX && PyDict_SetItem(shared, s, s) < 0)) {
        Py_DECREF(s);
        return NULL;
    }
    return s;
}

/* A tag's 4-tuple of tags(): (closing, name, attributes, after); ``last``, the tuple of the tag
 * before it (or NULL), is given again when this one holds the same four objects: a run of one
 * tag (<a b> x 400,000, the limits' bombs) holds one tuple, not one a tag (72 bytes each). */
static PyObject *tag_tuple(PyObject *str, const Text *t, const Tag *tag, PyObject *shared, PyObject *last) {
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
    PyObject *name = shared_substring(shared, str, tag->name, tag->name_stop);
    PyObject *attributes = shared_substring(shared, str, tag->name_stop, end);
    PyObject *closing = tag->closing ? SLASH : EMPTY;
    if (name != NULL && attributes != NULL) {
        if (last != NULL && PyTuple_GET_ITEM(last, 0) == closing && PyTuple_GET_ITEM(last, 1) == name &&
            PyTuple_GET_ITEM(last, 2) == attributes && PyTuple_GET_ITEM(last, 3) == after) {
            item = Py_NewRef(last);
        } else {
            item = PyTuple_Pack(4, closing, name, attributes, after);
        }
    }
    Py_XDECREF(name);
    Py_XDECREF(attributes);
    Py_DECREF(after);
    return item;
}

/* Every tag of ``str`` as its tuple (``tuples``), the first ``most`` of them when ``most`` is
 * not negative, or else the attributes of those whose attributes are longer than
 * ``longer_than`` characters. */
static PyObject *collect(PyObject *str, int tuples, Py_ssize_t longer_than, Py_ssize_t most) {
    Text t;
    if (read_text(str, &t) < 0) return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL || most == 0) return out;
    PyObject *shared = tuples ? PyDict_New() : NULL;
    if (tuples && shared == NULL) {
        Py_DECREF(out);
        return NULL;
    }
    Tag tag;
    int found = 0;
    PyObject *last = NULL; /* the last tuple appended (borrowed: the list holds it) */
    for (Py_ssize_t pos = 0; (found = next_tag(str, &t, pos, &tag)) == 1; pos = tag.end) {
        PyObject *item;
        if (tuples) {
            item = tag_tuple(str, &t, &tag, shared, last);
            last = item;
        } else if (tag.end - tag.name_stop > longer_than) {
            item = PyUnicode_Substring(str, tag.name_stop, tag.end);
        } else {
            continue;
        }
        if (item == NULL) break;
        int failed = PyList_Append(out, item);
        Py_DECREF(item);
        if (failed < 0) break;
        if (PyList_GET_SIZE(out) == most) { /* the tags the caller wants: no more are read */
            found = 0;
            break;
        }
    }
    Py_XDECREF(shared);
    if (found != 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

/* tags(text[, most]): the tags of ``text``, the first ``most`` when it is given. */
static PyObject *tags(PyObject *self, PyObject *args) {
    PyObject *str;
    Py_ssize_t most = -1;
    if (!PyArg_ParseTuple(args, "O|n:tags", &str, &most)) return NULL;
    return collect(str, 1, 0, most < 0 ? -1 : most);
}

/* Where the ``number``-th tag (1-based) starts, the text's length when there are fewer. */
static PyObject *tag_offset(PyObject *self, PyObject *args) {
    PyObject *str;
    Py_ssize_t number;
    if (!PyArg_ParseTuple(args, "On:tag_offset", &str, &number)) return NULL;
    Text t;
    if (read_text(str, &t) < 0) return NULL;
    Tag tag;
    int found;
    Py_ssize_t count = 0;
    for (Py_ssize_t pos = 0; (found = next_tag(str, &t, pos, &tag)) == 1; pos = tag.end) {
        if (++count == number) return PyLong_FromSsize_t(tag.start);
    }
    if (found < 0) return NULL;
    return PyLong_FromSsize_t(t.n);
}

static PyObject *long_attributes(PyObject *self, PyObject *args) {
    PyObject *str;
    Py_ssize_t longer_than;
    if (!PyArg_ParseTuple(args, "On:long_attributes", &str, &longer_than)) return NULL;
    return collect(str, 0, longer_than, -1);
}

/* ------------------------------------------------------------------------------------------
 * The walk of the pre-scan, compiled: htmlbounds._py_walk written as loops over arrays.
 *
 * walk(tokens, following, ids, flags, max_elements, max_depth, max_attributes, max_tags,
 *      attribute_count) returns (tag, reason, created, deepest): what htmlbounds._py_walk
 * computes for the tokens of tags(text), with ``following`` whether text (not a tag) starts
 * the document; ``tag`` is the number (1-based) of the tag at which a limit was passed and
 * ``reason`` its name, or None when the document is within the limits. ``ids`` maps each
 * name the walk knows (lowercase) to its number, WALK_NAMES first in their order; ``flags``
 * gives each number the sets of htmlbounds it is in (bit i: the set named WALK_SETS[i]) and,
 * from bit 16, its kind in htmlbounds._START_KINDS. htmlbounds builds both from its sets and
 * checks on import that this walk answers what its own does (else it uses its own).
 *
 * The state is htmlbounds._Tree's, with numbers for objects:
 *   - a name is a number (ids, then the names a document adds, lowered as Python lowers);
 *   - an element on the stack is (name, entry, foreign, handle): the handle is its identity,
 *     -(name + 1) for the shared element of a name (no entry, not foreign), else a new number;
 *   - an entry of the list of active formatting elements (a marker is an entry of no name) is
 *     a slot of an array; a slot is reused once its entry is out of the list and no element
 *     on the stack is its (each counts the elements that are), so the array holds the entries
 *     in use, not one a formatting tag; the list is a doubly linked list of
 *     slots, and the entries of one name and of one (name, attributes) key are chained too,
 *     in the list's order. Each entry keeps its level (the number of markers before it), so
 *     the by_name and by_key lists of the current level are the tail of each chain at the
 *     current level: last_entry and Noah's Ark read at most the last three of a chain.
 * Nothing has a fixed size: the arrays grow, and every allocation is checked.
 */

enum {
    N_P, N_A, N_TABLE, N_TR, N_TD, N_TH, N_CAPTION, N_TEMPLATE, N_HTML, N_SELECT, N_BUTTON,
    N_OPTION, N_OPTGROUP, N_LI, N_DD, N_DT, N_BR, N_FONT, N_NOBR, N_FORM, N_TBODY, N_THEAD,
    N_TFOOT, N_COLGROUP, N_ADDRESS, N_DIV, N_OL, N_UL, N_H1, N_H2, N_H3, N_H4, N_H5, N_H6,
    N_FIXED
};
static const char *const FIXED_NAMES[N_FIXED] = {
    "p", "a", "table", "tr", "td", "th", "caption", "template", "html", "select", "button",
    "option", "optgroup", "li", "dd", "dt", "br", "font", "nobr", "form", "tbody", "thead",
    "tfoot", "colgroup", "address", "div", "ol", "ul", "h1", "h2", "h3", "h4", "h5", "h6",
};

/* The sets of htmlbounds, by bit. */
enum {
    B_FORMATTING, B_VOID, B_SPECIAL, B_SCOPE, B_CLOSES_P, B_HEADINGS, B_BLOCK_END, B_MARKERS,
    B_CELLS, B_INTEGRATION, B_BREAKOUT, B_TABLE_PARTS, B_SECTIONS, B_IGNORED, B_FOREIGN,
    B_NO_RECONSTRUCT, B_COUNT
};
static const char *const SET_NAMES[B_COUNT] = {
    "_FORMATTING", "_VOID", "_SPECIAL", "_SCOPE", "_CLOSES_P", "_HEADINGS", "_BLOCK_END",
    "_MARKERS", "_CELLS", "_INTEGRATION", "_BREAKOUT", "_TABLE_PARTS", "_SECTIONS", "_IGNORED",
    "_FOREIGN", "_NO_RECONSTRUCT",
};
#define F(bit) (1u << (bit))
#define KIND_SHIFT 16
/* htmlbounds' _PLAIN, _BLOCK, ... _STEPS */
enum { K_PLAIN, K_BLOCK, K_HEADING, K_LIST_ITEM, K_EMPTY, K_RULE, K_FORMAT, K_CELL, K_ROW, K_STEPS };

enum { OK = 0, OVER_ELEMENTS = 1, OVER_DEPTH = 2, OVER_ATTRIBUTES = 3, OVER_TAGS = 4, ERROR = -1 };
static const char *const REASONS[] = {NULL, "elements", "depth", "attributes", "tags"};

typedef struct {
    Py_ssize_t name;
    Py_ssize_t entry; /* -1: none */
    long long handle;
    int foreign;
} Elem;

typedef struct {
    Py_ssize_t name; /* -1: a marker */
    Py_ssize_t key;
    Py_ssize_t level;
    long long open; /* the handle of its element on the stack, 0: none */
    Py_ssize_t prev, next;   /* the list of active formatting elements */
    Py_ssize_t nprev, nnext; /* the entries of its name */
    Py_ssize_t kprev, knext; /* the entries of its key */
    int in_active;
    int free;     /* on the free list */
    Py_ssize_t refs; /* the elements on the stack that are its */
    long long weight; /* its attributes' characters / htmlbounds.CLONE_CHARS: the elements a copy adds */
} Entry;

#define CLONE_CHARS 512 /* htmlbounds.CLONE_CHARS */

typedef struct {
    /* limits */
    long long max_elements, max_depth;
    /* names: counts of open elements and the last entry of each name */
    PyObject *ids;         /* the known names (borrowed) */
    PyObject *names;       /* the known names by number (borrowed tuple) */
    unsigned long *flags;  /* their flags, read from the tuple */
    Py_ssize_t known;      /* how many */
    PyObject *raw_ids;     /* a tag's name as written -> number (this call's names) */
    PyObject *lowered_ids; /* a lowered name -> number (this call's names) */
    PyObject *added;       /* the lowered names this call added, in number order */
    PyObject *key_ids;     /* (name number, attributes) -> key number */
    Py_ssize_t *open_count, *name_tail;
    Py_ssize_t n_names, cap_names;
    Py_ssize_t *key_tail;
    Py_ssize_t n_keys, cap_keys;
    /* the stack of open elements */
    Elem *stack;
    Py_ssize_t depth, cap_stack;
    long long next_handle;
    /* the list of active formatting elements */
    Entry *entries;
    Py_ssize_t n_entries, cap_entries;
    /* Entries neither in the list nor of an element on the stack, reused by new_entry: an
     * entry a tag (200,000 <a b>, each closing the one before, held 19 MB of them) becomes
     * the entries in use at once. A freed entry is left as it was until it is reused. */
    Py_ssize_t *free_entries;
    Py_ssize_t n_free, cap_free;
    Py_ssize_t active_head, active_tail;
    Py_ssize_t level;
    long long created, deepest;
} Walk;

static int grow(void **array, Py_ssize_t *cap, Py_ssize_t need, size_t size) {
    if (need <= *cap) return 0;
    Py_ssize_t cap2 = *cap ? *cap : 16;
    while (cap2 < need) {
        if (cap2 > PY_SSIZE_T_MAX / 2 / (Py_ssize_t)size) {
            PyErr_NoMemory();
            return -1;
        }
        cap2 *= 2;
    }
    void *p = PyMem_Realloc(*array, (size_t)cap2 * size);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *array = p;
    *cap = cap2;
    return 0;
}

static inline unsigned long name_flags(Walk *w, Py_ssize_t name) {
    return (name >= 0 && name < w->known) ? w->flags[name] : 0;
}

/* A name's number from a dict of names, checked to be one this call has. */
static Py_ssize_t number_of(Walk *w, PyObject *id) {
    Py_ssize_t n = PyLong_Check(id) ? PyLong_AsSsize_t(id) : -1;
    if (n == -1 && PyErr_Occurred()) return -1;
    if (n < 0 || n >= w->n_names) {
        PyErr_SetString(PyExc_ValueError, "walk: a name's number is not one of the names");
        return -1;
    }
    return n;
}

static inline int has(Walk *w, Py_ssize_t name, int bit) { return (name_flags(w, name) >> bit) & 1; }

/* A new name number (its count and chain set up). */
static Py_ssize_t new_name(Walk *w) {
    Py_ssize_t n = w->n_names;
    Py_ssize_t cap = w->cap_names;
    if (grow((void **)&w->open_count, &cap, n + 1, sizeof(Py_ssize_t)) < 0) return -1;
    cap = w->cap_names;
    if (grow((void **)&w->name_tail, &cap, n + 1, sizeof(Py_ssize_t)) < 0) return -1;
    w->cap_names = cap;
    w->open_count[n] = 0;
    w->name_tail[n] = -1;
    w->n_names = n + 1;
    return n;
}

/* The number of the name of a lowered string (a new one if this call has not seen it). */
static Py_ssize_t lowered_number(Walk *w, PyObject *lowered) {
    PyObject *id = PyDict_GetItemWithError(w->ids, lowered);
    if (id == NULL && !PyErr_Occurred()) id = PyDict_GetItemWithError(w->lowered_ids, lowered);
    if (id != NULL) return number_of(w, id);
    if (PyErr_Occurred()) return -1;
    Py_ssize_t n = new_name(w);
    if (n < 0) return -1;
    PyObject *num = PyLong_FromSsize_t(n);
    if (num == NULL) return -1;
    int failed = PyDict_SetItem(w->lowered_ids, lowered, num) < 0 || PyList_Append(w->added, lowered) < 0;
    Py_DECREF(num);
    return failed ? -1 : n;
}

/* The number of a tag's name as written: the name lowered as htmlbounds does (``if not
 * name.islower(): name = name.lower()``), by Python's own methods. */
static Py_ssize_t name_number(Walk *w, PyObject *raw) {
    PyObject *id = PyDict_GetItemWithError(w->ids, raw);
    if (id == NULL && !PyErr_Occurred()) id = PyDict_GetItemWithError(w->raw_ids, raw);
    if (id != NULL) return number_of(w, id);
    if (PyErr_Occurred()) return -1;
    PyObject *lower = PyObject_CallMethod(raw, "islower", NULL);
    if (lower == NULL) return -1;
    int is_lower = PyObject_IsTrue(lower);
    Py_DECREF(lower);
    if (is_lower < 0) return -1;
    PyObject *lowered = is_lower ? Py_NewRef(raw) : PyObject_CallMethod(raw, "lower", NULL);
    if (lowered == NULL) return -1;
    Py_ssize_t n = lowered_number(w, lowered);
    Py_DECREF(lowered);
    if (n < 0) return -1;
    PyObject *num = PyLong_FromSsize_t(n);
    if (num == NULL) return -1;
    int failed = PyDict_SetItem(w->raw_ids, raw, num);
    Py_DECREF(num);
    return failed < 0 ? -1 : n;
}

/* The lowered name of a number (borrowed), NULL on an error. */
static PyObject *name_string(Walk *w, Py_ssize_t name) {
    if (name < w->known) return PyTuple_GET_ITEM(w->names, name);
    return PyList_GET_ITEM(w->added, name - w->known);
}

static Py_ssize_t key_number(Walk *w, Py_ssize_t name, PyObject *attributes) {
    PyObject *num = PyLong_FromSsize_t(name);
    if (num == NULL) return -1;
    PyObject *key = PyTuple_Pack(2, num, attributes);
    Py_DECREF(num);
    if (key == NULL) return -1;
    PyObject *id = PyDict_GetItemWithError(w->key_ids, key);
    Py_ssize_t n;
    if (id != NULL) {
        n = PyLong_AsSsize_t(id);
    } else if (PyErr_Occurred()) {
        n = -1;
    } else {
        n = w->n_keys;
        if (grow((void **)&w->key_tail, &w->cap_keys, n + 1, sizeof(Py_ssize_t)) < 0) {
            n = -1;
        } else {
            PyObject *v = PyLong_FromSsize_t(n);
            if (v == NULL || PyDict_SetItem(w->key_ids, key, v) < 0) {
                n = -1;
            } else {
                w->key_tail[n] = -1;
                w->n_keys = n + 1;
            }
            Py_XDECREF(v);
        }
    }
    Py_DECREF(key);
    return n;
}

/* --- the stack of open elements --- */

/* One more element counted, and one more open: OK, or the limit it passes. */
static inline int admit(Walk *w) {
    w->created++;
    if (w->created > w->max_elements) return OVER_ELEMENTS;
    if (w->depth >= w->max_depth) return OVER_DEPTH;
    return OK;
}

static int push(Walk *w, Py_ssize_t name, Py_ssize_t entry, int foreign, long long *handle) {
    const int over = admit(w);
    if (over != OK) return over;
    if (grow((void **)&w->stack, &w->cap_stack, w->depth + 1, sizeof(Elem)) < 0) return ERROR;
    long long h = (entry < 0 && !foreign) ? -(long long)(name + 1) : w->next_handle++;
    w->stack[w->depth++] = (Elem){name, entry, h, foreign};
    if (entry >= 0) w->entries[entry].refs++;
    if (w->depth > w->deepest) w->deepest = w->depth;
    w->open_count[name]++;
    if (handle) *handle = h;
    return OK;
}

/* Puts entry ``e`` on the free list when nothing refers to it any more (the list has room for
 * every entry: new_entry grows it with them). */
static void release(Walk *w, Py_ssize_t e) {
    Entry *entry = &w->entries[e];
    if (entry->refs > 0 || entry->in_active || entry->free) return;
    entry->free = 1;
    w->free_entries[w->n_free++] = e;
}

/* An element of entry ``e`` leaves the stack. */
static void unref(Walk *w, Py_ssize_t e) {
    w->entries[e].refs--;
    release(w, e);
}

static void forget(Walk *w, const Elem *e) {
    w->open_count[e->name]--;
    if (e->entry < 0) return;
    if (w->entries[e->entry].open == e->handle) w->entries[e->entry].open = 0;
    unref(w, e->entry);
}

/* A Python index of the stack (negative from its end) as a slice start. */
static Py_ssize_t slice_start(Walk *w, Py_ssize_t index) {
    if (index < 0) {
        index += w->depth;
        if (index < 0) index = 0;
    }
    return index;
}

static void pop_from(Walk *w, Py_ssize_t index) {
    index = slice_start(w, index);
    for (Py_ssize_t i = index; i < w->depth; i++) forget(w, &w->stack[i]);
    if (index < w->depth) w->depth = index;
}

static void clear_to_marker(Walk *w);

static void pop_with_markers(Walk *w, Py_ssize_t index) {
    if (index >= w->depth) return;
    Py_ssize_t from = slice_start(w, index);
    int clears = 0;
    for (Py_ssize_t i = from; i < w->depth; i++) {
        if (has(w, w->stack[i].name, B_CELLS)) {
            clears = 1;
            break;
        }
    }
    pop_from(w, index);
    if (clears) clear_to_marker(w);
}

static void remove_element(Walk *w, long long handle) {
    for (Py_ssize_t i = w->depth - 1; i >= 0; i--) {
        if (w->stack[i].handle == handle) {
            forget(w, &w->stack[i]);
            memmove(&w->stack[i], &w->stack[i + 1], (size_t)(w->depth - i - 1) * sizeof(Elem));
            w->depth--;
            return;
        }
    }
}

/* The boundaries of find(). */
enum { SCOPE, BUTTON_SCOPE, LIST_SCOPE, SCOPE_BUT_SELECT, HTML_TEMPLATE, TABLE_HTML_TEMPLATE };

static int is_boundary(Walk *w, Py_ssize_t name, int boundary) {
    switch (boundary) {
    case SCOPE: return has(w, name, B_SCOPE);
    case BUTTON_SCOPE: return has(w, name, B_SCOPE) || name == N_BUTTON;
    case LIST_SCOPE: return has(w, name, B_SCOPE) || name == N_OL || name == N_UL;
    case SCOPE_BUT_SELECT: return has(w, name, B_SCOPE) && name != N_SELECT;
    case HTML_TEMPLATE: return name == N_HTML || name == N_TEMPLATE;
    default: return name == N_TABLE || name == N_HTML || name == N_TEMPLATE;
    }
}

/* Index of the topmost open element named in ``names`` before one in ``boundary``, or -1. */
static Py_ssize_t find(Walk *w, const Py_ssize_t *names, int n, int boundary) {
    int any = 0;
    for (int k = 0; k < n; k++) {
        if (w->open_count[names[k]]) {
            any = 1;
            break;
        }
    }
    if (!any) return -1;
    for (Py_ssize_t i = w->depth - 1; i >= 0; i--) {
        Py_ssize_t name = w->stack[i].name;
        for (int k = 0; k < n; k++) {
            if (names[k] == name) return i;
        }
        if (is_boundary(w, name, boundary)) return -1;
    }
    return -1;
}

static Py_ssize_t find1(Walk *w, Py_ssize_t name, int boundary) { return find(w, &name, 1, boundary); }

static int in_foreign(Walk *w) {
    if (w->depth == 0) return 0;
    const Elem *top = &w->stack[w->depth - 1];
    return top->foreign && !has(w, top->name, B_INTEGRATION);
}

static int count_one(Walk *w) {
    w->created++;
    return w->created > w->max_elements ? OVER_ELEMENTS : OK;
}

static int in_table(Walk *w) {
    for (Py_ssize_t i = w->depth - 1; i >= 0; i--) {
        Py_ssize_t name = w->stack[i].name;
        if (name == N_TABLE || name == N_TBODY || name == N_THEAD || name == N_TFOOT || name == N_TR) return 1;
        if (name == N_TD || name == N_TH || name == N_CAPTION || name == N_TEMPLATE || name == N_SELECT ||
            name == N_HTML)
            return 0;
    }
    return 0;
}

static void close_p(Walk *w) {
    if (w->open_count[N_P]) {
        Py_ssize_t at = find1(w, N_P, BUTTON_SCOPE);
        if (at >= 0) pop_from(w, at);
    }
}

/* --- the list of active formatting elements --- */

static inline int needs_rebuild(Walk *w) {
    if (w->active_tail < 0) return 0;
    const Entry *last = &w->entries[w->active_tail];
    return last->name >= 0 && last->open == 0;
}

static Py_ssize_t new_entry(Walk *w, Py_ssize_t name, Py_ssize_t key, PyObject *attributes) {
    Py_ssize_t e;
    if (w->n_free > 0) {
        e = w->free_entries[--w->n_free];
    } else {
        if (grow((void **)&w->entries, &w->cap_entries, w->n_entries + 1, sizeof(Entry)) < 0) return -1;
        Py_ssize_t cap = w->cap_free;
        if (grow((void **)&w->free_entries, &cap, w->cap_entries, sizeof(Py_ssize_t)) < 0) return -1;
        w->cap_free = cap;
        e = w->n_entries++;
    }
    long long weight = attributes != NULL ? (long long)(PyUnicode_GET_LENGTH(attributes) / CLONE_CHARS) : 0;
    w->entries[e] = (Entry){name, key, w->level, 0, -1, -1, -1, -1, -1, -1, 0, 0, 0, weight};
    return e;
}

static void append_active(Walk *w, Py_ssize_t e) {
    Entry *entry = &w->entries[e];
    entry->prev = w->active_tail;
    entry->next = -1;
    if (w->active_tail >= 0) w->entries[w->active_tail].next = e;
    else w->active_head = e;
    w->active_tail = e;
    entry->in_active = 1;
    if (entry->name >= 0) {
        entry->nprev = w->name_tail[entry->name];
        entry->nnext = -1;
        if (entry->nprev >= 0) w->entries[entry->nprev].nnext = e;
        w->name_tail[entry->name] = e;
        entry->kprev = w->key_tail[entry->key];
        entry->knext = -1;
        if (entry->kprev >= 0) w->entries[entry->kprev].knext = e;
        w->key_tail[entry->key] = e;
    }
}

static void unlink_active(Walk *w, Py_ssize_t e) {
    Entry *entry = &w->entries[e];
    if (entry->prev >= 0) w->entries[entry->prev].next = entry->next;
    else w->active_head = entry->next;
    if (entry->next >= 0) w->entries[entry->next].prev = entry->prev;
    else w->active_tail = entry->prev;
    entry->in_active = 0;
    if (entry->name >= 0) {
        if (entry->nprev >= 0) w->entries[entry->nprev].nnext = entry->nnext;
        if (entry->nnext >= 0) w->entries[entry->nnext].nprev = entry->nprev;
        else w->name_tail[entry->name] = entry->nprev;
        if (entry->kprev >= 0) w->entries[entry->kprev].knext = entry->knext;
        if (entry->knext >= 0) w->entries[entry->knext].kprev = entry->kprev;
        else w->key_tail[entry->key] = entry->kprev;
    }
    release(w, e);
}

static int reconstruct(Walk *w) {
    Py_ssize_t i = w->active_tail, first = -1;
    while (i >= 0 && w->entries[i].name >= 0 && w->entries[i].open == 0) {
        first = i;
        i = w->entries[i].prev;
    }
    if (first < 0) return OK;
    for (Py_ssize_t e = first; e >= 0; e = w->entries[e].next) {
        w->created += 1 + w->entries[e].weight; /* the clone of its attributes */
        if (w->created > w->max_elements || w->depth >= w->max_depth) {
            if (w->depth > w->deepest) w->deepest = w->depth;
            return w->created > w->max_elements ? OVER_ELEMENTS : OVER_DEPTH;
        }
        if (grow((void **)&w->stack, &w->cap_stack, w->depth + 1, sizeof(Elem)) < 0) return ERROR;
        Py_ssize_t name = w->entries[e].name;
        long long h = w->next_handle++;
        w->entries[e].open = h;
        w->entries[e].refs++;
        w->stack[w->depth++] = (Elem){name, e, h, 0};
        w->open_count[name]++;
    }
    if (w->depth > w->deepest) w->deepest = w->depth;
    return OK;
}

static int add_marker(Walk *w) {
    Py_ssize_t e = new_entry(w, -1, -1, NULL);
    if (e < 0) return ERROR;
    append_active(w, e);
    w->level++;
    return OK;
}

static void clear_to_marker(Walk *w) {
    while (w->active_tail >= 0) {
        Py_ssize_t e = w->active_tail;
        unlink_active(w, e);
        if (w->entries[e].name < 0) {
            w->level--;
            return;
        }
    }
    w->level = 0;
}

static Py_ssize_t last_entry(Walk *w, Py_ssize_t name) {
    Py_ssize_t e = w->name_tail[name];
    return (e >= 0 && w->entries[e].level == w->level) ? e : -1;
}

/* The first of the current level's entries of ``key`` when there are three or more, else -1. */
static Py_ssize_t third_of_key(Walk *w, Py_ssize_t key) {
    Py_ssize_t e = w->key_tail[key], first = -1;
    int n = 0;
    while (e >= 0 && w->entries[e].level == w->level) {
        first = e;
        n++;
        e = w->entries[e].kprev;
    }
    return n >= 3 ? first : -1;
}

static void drop_entry(Walk *w, Py_ssize_t e) { unlink_active(w, e); }

static void add_entry(Walk *w, Py_ssize_t e) {
    Py_ssize_t oldest = third_of_key(w, w->entries[e].key);
    if (oldest >= 0) drop_entry(w, oldest);
    append_active(w, e);
}

/* --- tags --- */

static int end_formatting(Walk *w, Py_ssize_t name) {
    Py_ssize_t e = last_entry(w, name);
    if (e < 0) return OK;
    long long element = w->entries[e].open;
    if (element == 0) {
        drop_entry(w, e);
        return OK;
    }
    Py_ssize_t at = -1;
    for (Py_ssize_t i = w->depth - 1; i >= 0; i--) {
        if (w->stack[i].handle == element) {
            at = i;
            break;
        }
    }
    if (at < 0) {
        PyErr_SetString(PyExc_RuntimeError, "htmltags.walk: an open entry's element is not on the stack");
        return ERROR;
    }
    Py_ssize_t specials = 0, position = -1;
    for (Py_ssize_t i = at + 1; i < w->depth; i++) {
        if (has(w, w->stack[i].name, B_SCOPE)) return OK;
    }
    for (Py_ssize_t i = at + 1; i < w->depth; i++) {
        if (has(w, w->stack[i].name, B_SPECIAL)) {
            specials++;
            if (specials <= 8) position = i;
        }
    }
    if (specials == 0) {
        pop_from(w, at);
        drop_entry(w, e);
        return OK;
    }
    long long rounds = specials < 8 ? specials : 8;
    long long heaviest = 0; /* the formatting elements in between, as the heaviest above it */
    for (Py_ssize_t i = at + 1; i < w->depth; i++) {
        Py_ssize_t above = w->stack[i].entry;
        if (above >= 0 && w->entries[above].weight > heaviest) heaviest = w->entries[above].weight;
    }
    w->created += rounds * (4 + w->entries[e].weight + 3 * heaviest);
    if (w->created > w->max_elements) return OVER_ELEMENTS;
    remove_element(w, element);
    long long clone = w->next_handle++;
    w->entries[e].open = clone;
    if (grow((void **)&w->stack, &w->cap_stack, w->depth + 1, sizeof(Elem)) < 0) return ERROR;
    memmove(&w->stack[position + 1], &w->stack[position], (size_t)(w->depth - position) * sizeof(Elem));
    w->stack[position] = (Elem){name, e, clone, 0};
    w->entries[e].refs++;
    w->depth++;
    w->open_count[name]++;
    if (specials < 8) {
        pop_from(w, position);
        drop_entry(w, e);
    }
    return OK;
}

#define TRY(x)                                                                                                         \
    do {                                                                                                               \
        int r_ = (x);                                                                                                  \
        if (r_ != OK) return r_;                                                                                       \
    } while (0)

/* htmlbounds._Tree._table_part: 1 when the part goes on, 0 when it is ignored. */
static int table_part(Walk *w, Py_ssize_t name, int *goes_on) {
    *goes_on = 0;
    if (find1(w, N_TABLE, HTML_TEMPLATE) < 0) return OK;
    Py_ssize_t context[4];
    int n_context = 0;
    if (name == N_TD || name == N_TH) {
        const Py_ssize_t cells[] = {N_TD, N_TH};
        Py_ssize_t cell = find(w, cells, 2, TABLE_HTML_TEMPLATE);
        if (cell >= 0) pop_with_markers(w, cell);
        context[n_context++] = N_TR;
    } else if (name == N_TR) {
        Py_ssize_t row = find1(w, N_TR, TABLE_HTML_TEMPLATE);
        if (row >= 0) pop_with_markers(w, row);
        context[n_context++] = N_TBODY;
        context[n_context++] = N_THEAD;
        context[n_context++] = N_TFOOT;
    } else {
        const Py_ssize_t parts[] = {N_TBODY, N_THEAD, N_TFOOT, N_CAPTION, N_COLGROUP};
        Py_ssize_t section = find(w, parts, 5, TABLE_HTML_TEMPLATE);
        if (section >= 0) pop_with_markers(w, section);
    }
    context[n_context++] = N_TABLE;
    Py_ssize_t at = find(w, context, n_context, HTML_TEMPLATE);
    pop_with_markers(w, at + 1);
    if (w->depth == 0) {
        PyErr_SetString(PyExc_RuntimeError, "htmltags.walk: a table part with no open element");
        return ERROR;
    }
    Py_ssize_t top = w->stack[w->depth - 1].name;
    if (name == N_TR && top == N_TABLE) {
        TRY(push(w, N_TBODY, -1, 0, NULL));
    } else if ((name == N_TD || name == N_TH) && top != N_TR) {
        if (!has(w, top, B_SECTIONS)) TRY(push(w, N_TBODY, -1, 0, NULL));
        TRY(push(w, N_TR, -1, 0, NULL));
    }
    *goes_on = 1;
    return OK;
}

/* Whether the lowered attributes of a <font> in SVG or MathML name a color, face or size. */
static int font_breaks_out(PyObject *attributes) {
    PyObject *lowered = PyObject_CallMethod(attributes, "lower", NULL);
    if (lowered == NULL) return -1;
    int found = 0;
    const char *words[] = {"color", "face", "size"};
    for (int k = 0; k < 3 && !found; k++) {
        PyObject *word = PyUnicode_FromString(words[k]);
        if (word == NULL) {
            found = -1;
            break;
        }
        found = PyUnicode_Contains(lowered, word);
        Py_DECREF(word);
    }
    Py_DECREF(lowered);
    return found;
}

static int start(Walk *w, Py_ssize_t name, PyObject *attributes, int self_closing) {
    if (in_foreign(w)) {
        int breakout = has(w, name, B_BREAKOUT);
        if (breakout && name == N_FONT) {
            breakout = font_breaks_out(attributes);
            if (breakout < 0) return ERROR;
        }
        if (!breakout) {
            if (self_closing) return count_one(w);
            return push(w, name, -1, 1, NULL);
        }
        while (in_foreign(w)) pop_from(w, w->depth - 1);
    }
    if (has(w, name, B_FOREIGN)) {
        TRY(reconstruct(w));
        if (self_closing) return count_one(w);
        return push(w, name, -1, 1, NULL);
    }
    if (has(w, name, B_IGNORED)) return OK;
    if (name == N_SELECT) {
        Py_ssize_t at = find1(w, N_SELECT, SCOPE_BUT_SELECT);
        if (at >= 0) {
            pop_from(w, at);
            return OK;
        }
    }
    if (name == N_BUTTON && w->open_count[N_BUTTON]) {
        Py_ssize_t at = find1(w, N_BUTTON, SCOPE);
        if (at >= 0) pop_from(w, at);
    }
    if (has(w, name, B_CLOSES_P)) {
        close_p(w);
        if (has(w, name, B_HEADINGS) && w->depth && has(w, w->stack[w->depth - 1].name, B_HEADINGS))
            pop_from(w, w->depth - 1);
    } else if (name == N_LI || name == N_DD || name == N_DT) {
        for (Py_ssize_t i = w->depth - 1; i >= 0; i--) {
            Py_ssize_t open = w->stack[i].name;
            if (name == N_LI ? open == N_LI : (open == N_DD || open == N_DT)) {
                pop_from(w, i);
                break;
            }
            if (has(w, open, B_SPECIAL) && open != N_ADDRESS && open != N_DIV && open != N_P) break;
        }
        close_p(w);
    } else if (has(w, name, B_TABLE_PARTS)) {
        int goes_on;
        TRY(table_part(w, name, &goes_on));
        if (!goes_on) return OK;
    } else if (name == N_TABLE && in_table(w)) {
        pop_with_markers(w, find1(w, N_TABLE, HTML_TEMPLATE));
    }
    if (name == N_A) {
        Py_ssize_t old = last_entry(w, N_A);
        if (old >= 0) {
            TRY(end_formatting(w, N_A));
            if (w->entries[old].open != 0) remove_element(w, w->entries[old].open);
            if (w->entries[old].in_active && w->entries[old].level == w->level) drop_entry(w, old);
        }
    }
    if (!has(w, name, B_NO_RECONSTRUCT)) TRY(reconstruct(w));
    if (has(w, name, B_FORMATTING)) {
        if (name == N_NOBR && find1(w, N_NOBR, SCOPE) >= 0) {
            TRY(end_formatting(w, N_NOBR));
            TRY(reconstruct(w));
        }
        Py_ssize_t key = key_number(w, name, attributes);
        if (key < 0) return ERROR;
        Py_ssize_t e = new_entry(w, name, key, attributes);
        if (e < 0) return ERROR;
        long long h;
        TRY(push(w, name, e, 0, &h));
        w->entries[e].open = h;
        add_entry(w, e);
        return OK;
    }
    if ((name == N_OPTION || name == N_OPTGROUP) && w->depth && w->stack[w->depth - 1].name == N_OPTION)
        pop_from(w, w->depth - 1);
    if (has(w, name, B_VOID)) return count_one(w);
    TRY(push(w, name, -1, 0, NULL));
    if (has(w, name, B_MARKERS)) return add_marker(w);
    return OK;
}

static int end(Walk *w, Py_ssize_t name, PyObject *empty) {
    if (in_foreign(w)) {
        for (Py_ssize_t i = w->depth - 1; i >= 0; i--) {
            const Elem *element = &w->stack[i];
            if (!element->foreign) break;
            if (element->name == name) {
                pop_from(w, i);
                return OK;
            }
        }
    }
    if (has(w, name, B_IGNORED)) return OK;
    if (name == N_BR) return start(w, N_BR, empty, 0);
    if (has(w, name, B_FORMATTING) && last_entry(w, name) >= 0) return end_formatting(w, name);
    if (name == N_P) {
        Py_ssize_t at = find1(w, N_P, BUTTON_SCOPE);
        if (at < 0) {
            TRY(push(w, N_P, -1, 0, NULL));
            at = w->depth - 1;
        }
        pop_from(w, at);
        return OK;
    }
    if (has(w, name, B_BLOCK_END)) {
        Py_ssize_t at;
        if (has(w, name, B_HEADINGS)) {
            const Py_ssize_t headings[] = {N_H1, N_H2, N_H3, N_H4, N_H5, N_H6};
            at = find(w, headings, 6, SCOPE);
        } else {
            at = find1(w, name, name == N_LI ? LIST_SCOPE : SCOPE);
        }
        if (at >= 0) {
            if (name == N_FORM) {
                remove_element(w, w->stack[at].handle);
            } else {
                pop_with_markers(w, at);
                if (has(w, name, B_MARKERS)) clear_to_marker(w);
            }
        }
        return OK;
    }
    if (name == N_SELECT) {
        Py_ssize_t at = find1(w, N_SELECT, SCOPE_BUT_SELECT);
        if (at >= 0) pop_from(w, at);
        return OK;
    }
    if (has(w, name, B_TABLE_PARTS) || name == N_TABLE) {
        Py_ssize_t at = find1(w, name, name == N_TABLE ? HTML_TEMPLATE : TABLE_HTML_TEMPLATE);
        if (at >= 0) pop_with_markers(w, at);
        return OK;
    }
    if (!w->open_count[name]) return OK;
    for (Py_ssize_t i = w->depth - 1; i >= 0; i--) {
        Py_ssize_t open = w->stack[i].name;
        if (open == name) {
            pop_from(w, i);
            if (name == N_TEMPLATE) clear_to_marker(w);
            return OK;
        }
        if (has(w, open, B_SPECIAL)) return OK;
    }
    return OK;
}

/* A token of tags(): a tuple of four str. */
static int token_at(PyObject *tokens, Py_ssize_t i, PyObject **closing, PyObject **name, PyObject **attributes,
                    PyObject **after) {
    PyObject *token = PyList_GET_ITEM(tokens, i);
    if (!PyTuple_Check(token) || PyTuple_GET_SIZE(token) != 4) {
        PyErr_SetString(PyExc_TypeError, "walk: each token must be a tuple of four str");
        return -1;
    }
    for (int k = 0; k < 4; k++) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(token, k))) {
            PyErr_SetString(PyExc_TypeError, "walk: each token must be a tuple of four str");
            return -1;
        }
    }
    *closing = PyTuple_GET_ITEM(token, 0);
    *name = PyTuple_GET_ITEM(token, 1);
    *attributes = PyTuple_GET_ITEM(token, 2);
    *after = PyTuple_GET_ITEM(token, 3);
    return 0;
}

static int ends_with_slash_gt(PyObject *s) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (n < 2) return 0;
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    return PyUnicode_READ(kind, data, n - 2) == '/' && PyUnicode_READ(kind, data, n - 1) == '>';
}

/* htmlbounds._closes: whether the token is the end tag of the (lowered) name ``name``, with
 * too few attributes to pass a limit. 1, 0 or -1 on an error. */
static int closes(Walk *w, PyObject *tokens, Py_ssize_t i, Py_ssize_t name, long long long_attributes) {
    PyObject *closing, *raw, *attributes, *after;
    if (token_at(tokens, i, &closing, &raw, &attributes, &after) < 0) return -1;
    if (PyUnicode_GET_LENGTH(closing) != 1 || PyUnicode_READ_CHAR(closing, 0) != '/') return 0;
    if (PyUnicode_GET_LENGTH(attributes) > long_attributes) return 0;
    if (PyUnicode_IS_ASCII(raw)) {
        /* ASCII: ``raw == name or raw.lower() == name`` is "raw lowered is name", and a lowered
         * ASCII name is its own number's. */
        Py_ssize_t n = name_number(w, raw);
        if (n < 0) return -1;
        return n == name;
    }
    /* Else as Python does it, on the name's string. */
    PyObject *string = name_string(w, name);
    int same = PyUnicode_Compare(raw, string);
    if (same == -1 && PyErr_Occurred()) return -1;
    if (same == 0) return 1;
    PyObject *lowered = PyObject_CallMethod(raw, "lower", NULL);
    if (lowered == NULL) return -1;
    same = PyUnicode_Compare(lowered, string);
    Py_DECREF(lowered);
    if (same == -1 && PyErr_Occurred()) return -1;
    return same == 0;
}

/* Holds the names tuple once checked (its first numbers are FIXED_NAMES). */
static PyObject *checked_names;

static int check_tables(PyObject *ids, PyObject *names, PyObject *flags) {
    if (!PyDict_Check(ids) || !PyTuple_Check(names) || !PyTuple_Check(flags)) {
        PyErr_SetString(PyExc_TypeError, "walk: ids must be a dict, names and flags tuples");
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    if (PyTuple_GET_SIZE(flags) != n || PyDict_GET_SIZE(ids) != n || n < N_FIXED) {
        PyErr_SetString(PyExc_ValueError, "walk: ids, names and flags must have one item a name");
        return -1;
    }
    if (names == checked_names) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        PyObject *flag = PyTuple_GET_ITEM(flags, i);
        if (!PyUnicode_Check(name) || !PyLong_Check(flag) ||
            (i < N_FIXED && PyUnicode_CompareWithASCIIString(name, FIXED_NAMES[i]) != 0)) {
            PyErr_SetString(PyExc_ValueError, "walk: names must start with WALK_NAMES, flags be int");
            return -1;
        }
        PyObject *id = PyDict_GetItemWithError(ids, name);
        if (id == NULL || !PyLong_Check(id) || PyLong_AsSsize_t(id) != i) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "walk: ids must number names in order");
            return -1;
        }
    }
    Py_XSETREF(checked_names, Py_NewRef(names));
    return 0;
}

static void free_walk(Walk *w) {
    Py_XDECREF(w->raw_ids);
    Py_XDECREF(w->lowered_ids);
    Py_XDECREF(w->added);
    Py_XDECREF(w->key_ids);
    PyMem_Free(w->open_count);
    PyMem_Free(w->name_tail);
    PyMem_Free(w->key_tail);
    PyMem_Free(w->stack);
    PyMem_Free(w->entries);
    PyMem_Free(w->free_entries);
    PyMem_Free(w->flags);
}

/* The loop of htmlbounds._py_walk; ``tags`` is set to the number of the tag it stopped at. */
static int walk_tokens(Walk *w, PyObject *tokens, int following, long long max_attributes, long long max_tags,
                       PyObject *attribute_count, PyObject *empty, Py_ssize_t *tags_out) {
    const long long long_attributes = max_attributes > LLONG_MAX / 2 ? LLONG_MAX : 2 * max_attributes;
    const Py_ssize_t total = PyList_GET_SIZE(tokens);
    const int too_many = total > max_tags;
    const Py_ssize_t count = too_many ? (Py_ssize_t)max_tags : total;
    Py_ssize_t tags = 0;
    int rc = OK;
#define STOP(x)                                                                                                        \
    {                                                                                                                  \
        rc = (x);                                                                                                      \
        if (rc != OK) goto done;                                                                                       \
    }
    for (Py_ssize_t idx = 0; idx < count; idx++) {
        tags = idx + 1;
        PyObject *closing, *raw, *attributes, *after;
        if (token_at(tokens, idx, &closing, &raw, &attributes, &after) < 0) STOP(ERROR);
        const int text_before = following;
        following = PyUnicode_GET_LENGTH(after) > 0;
        if (PyUnicode_GET_LENGTH(attributes) > long_attributes) {
            PyObject *n = PyObject_CallOneArg(attribute_count, attributes);
            if (n == NULL) STOP(ERROR);
            long long c = PyLong_AsLongLong(n);
            Py_DECREF(n);
            if (c == -1 && PyErr_Occurred()) STOP(ERROR);
            if (c > max_attributes) STOP(OVER_ATTRIBUTES);
        }
        const Py_ssize_t name = name_number(w, raw);
        if (name < 0) STOP(ERROR);
        if (text_before && needs_rebuild(w)) STOP(reconstruct(w));
        const int has_top = w->depth > 0;
        const Elem top = has_top ? w->stack[w->depth - 1] : (Elem){-1, -1, 0, 0};
        if (PyUnicode_GET_LENGTH(closing) > 0) {
            if (has_top && top.name == name) {
                if (top.entry < 0) {
                    if (!has(w, name, B_MARKERS)) {
                        w->open_count[name]--;
                        w->depth--;
                        continue;
                    }
                    if (!top.foreign) {
                        w->open_count[name]--;
                        w->depth--;
                        clear_to_marker(w);
                        continue;
                    }
                } else if (w->active_tail == top.entry && last_entry(w, name) == top.entry) {
                    /* a formatting element closed where it is the current node */
                    unlink_active(w, top.entry);
                    w->entries[top.entry].open = 0;
                    w->open_count[name]--;
                    w->depth--;
                    unref(w, top.entry);
                    continue;
                }
            }
            STOP(end(w, name, empty));
            continue;
        }
        if (has_top && top.foreign) {
            STOP(start(w, name, attributes, ends_with_slash_gt(attributes)));
            continue;
        }
        const int kind = (int)((name_flags(w, name) >> KIND_SHIFT) & 0xF);
        if (kind == K_PLAIN || kind == K_BLOCK) {
            if (kind == K_BLOCK) {
                if (w->open_count[N_P]) close_p(w);
            } else if (needs_rebuild(w)) {
                STOP(reconstruct(w));
            }
        } else if (kind == K_FORMAT) {
            if (name == N_A && last_entry(w, N_A) >= 0) {
                STOP(start(w, name, attributes, ends_with_slash_gt(attributes)));
                continue;
            }
            if (needs_rebuild(w)) STOP(reconstruct(w));
            const Py_ssize_t key = key_number(w, name, attributes);
            if (key < 0) STOP(ERROR);
            STOP(admit(w));
            if (tags < count) {
                int pair = closes(w, tokens, tags, name, long_attributes);
                if (pair < 0) STOP(ERROR);
                if (pair) {
                    if (w->depth >= w->deepest) w->deepest = w->depth + 1;
                    Py_ssize_t oldest = third_of_key(w, key);
                    if (oldest >= 0) drop_entry(w, oldest);
                    idx++;
                    following = PyUnicode_GET_LENGTH(PyTuple_GET_ITEM(PyList_GET_ITEM(tokens, idx), 3)) > 0;
                    continue;
                }
            }
            const Py_ssize_t e = new_entry(w, name, key, attributes);
            if (e < 0) STOP(ERROR);
            if (grow((void **)&w->stack, &w->cap_stack, w->depth + 1, sizeof(Elem)) < 0) STOP(ERROR);
            const long long h = w->next_handle++;
            w->entries[e].open = h;
            w->entries[e].refs++;
            w->stack[w->depth++] = (Elem){name, e, h, 0};
            w->open_count[name]++;
            if (w->depth > w->deepest) w->deepest = w->depth;
            add_entry(w, e);
            continue;
        } else if (kind == K_CELL && has_top && top.name == N_TR) {
            STOP(push(w, name, -1, 0, NULL));
            STOP(add_marker(w));
            continue;
        } else if (kind == K_ROW && has_top && has(w, top.name, B_SECTIONS)) {
            /* a row in a table section: no part to close or imply */
        } else if (kind == K_EMPTY) {
            if (needs_rebuild(w)) STOP(reconstruct(w));
            STOP(count_one(w));
            continue;
        } else if (kind == K_LIST_ITEM) {
            for (Py_ssize_t i = w->depth - 1; i >= 0; i--) {
                const Py_ssize_t open = w->stack[i].name;
                if (name == N_LI ? open == N_LI : (open == N_DD || open == N_DT)) {
                    pop_from(w, i);
                    break;
                }
                if (has(w, open, B_SPECIAL) && open != N_ADDRESS && open != N_DIV && open != N_P) break;
            }
            if (w->open_count[N_P]) close_p(w);
        } else if (kind == K_HEADING) {
            if (w->open_count[N_P]) close_p(w);
            if (w->depth && has(w, w->stack[w->depth - 1].name, B_HEADINGS)) pop_from(w, w->depth - 1);
        } else if (kind == K_RULE) {
            if (w->open_count[N_P]) close_p(w);
            STOP(count_one(w));
            continue;
        } else {
            STOP(start(w, name, attributes, ends_with_slash_gt(attributes)));
            continue;
        }
        /* Open the element (one with no entry). */
        STOP(admit(w));
        if (tags < count) {
            int pair = closes(w, tokens, tags, name, long_attributes);
            if (pair < 0) STOP(ERROR);
            if (pair && !(following && needs_rebuild(w))) {
                if (w->depth >= w->deepest) w->deepest = w->depth + 1;
                idx++;
                following = PyUnicode_GET_LENGTH(PyTuple_GET_ITEM(PyList_GET_ITEM(tokens, idx), 3)) > 0;
                continue;
            }
        }
        if (grow((void **)&w->stack, &w->cap_stack, w->depth + 1, sizeof(Elem)) < 0) STOP(ERROR);
        w->stack[w->depth++] = (Elem){name, -1, -(long long)(name + 1), 0};
        w->open_count[name]++;
        if (w->depth > w->deepest) w->deepest = w->depth;
    }
    if (too_many) {
        tags = (Py_ssize_t)max_tags + 1;
        STOP(OVER_TAGS);
    }
    if (following) STOP(reconstruct(w));
#undef STOP
done:
    *tags_out = tags;
    return rc;
}

static PyObject *walk(PyObject *self, PyObject *args) {
    PyObject *tokens, *ids, *names, *flags, *attribute_count;
    int following;
    long long max_elements, max_depth, max_attributes, max_tags;
    if (!PyArg_ParseTuple(args, "O!pO!O!O!LLLLO:walk", &PyList_Type, &tokens, &following, &PyDict_Type, &ids,
                          &PyTuple_Type, &names, &PyTuple_Type, &flags, &max_elements, &max_depth,
                          &max_attributes, &max_tags, &attribute_count))
        return NULL;
    if (max_elements < 0 || max_depth < 0 || max_attributes < 0 || max_tags < 0) {
        PyErr_SetString(PyExc_ValueError, "walk: the limits must not be negative");
        return NULL;
    }
    if (!PyCallable_Check(attribute_count)) {
        PyErr_SetString(PyExc_TypeError, "walk: attribute_count must be callable");
        return NULL;
    }
    if (check_tables(ids, names, flags) < 0) return NULL;
    /* The tokens are read as the walk goes: hold the list, and a copy of it so that nothing
     * the walk calls (attribute_count) can change it under the loop. */
    PyObject *held = PyList_GetSlice(tokens, 0, PyList_GET_SIZE(tokens));
    if (held == NULL) return NULL;
    Walk w;
    memset(&w, 0, sizeof w);
    w.max_elements = max_elements;
    w.max_depth = max_depth;
    w.ids = ids;
    w.names = names;
    w.known = PyTuple_GET_SIZE(names);
    w.flags = PyMem_Calloc((size_t)w.known, sizeof(unsigned long));
    if (w.flags == NULL) {
        Py_DECREF(held);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < w.known; i++) {
        PyObject *flag = PyTuple_GET_ITEM(flags, i);
        if (!PyLong_Check(flag)) {
            PyErr_SetString(PyExc_ValueError, "walk: flags must be int");
            free_walk(&w);
            Py_DECREF(held);
            return NULL;
        }
        w.flags[i] = PyLong_AsUnsignedLongMask(flag);
        if (w.flags[i] == (unsigned long)-1 && PyErr_Occurred()) {
            free_walk(&w);
            Py_DECREF(held);
            return NULL;
        }
    }
    w.next_handle = 1;
    w.active_head = w.active_tail = -1;
    w.raw_ids = PyDict_New();
    w.lowered_ids = PyDict_New();
    w.added = PyList_New(0);
    w.key_ids = PyDict_New();
    PyObject *result = NULL;
    if (w.raw_ids && w.lowered_ids && w.added && w.key_ids) {
        int ok = 1;
        for (Py_ssize_t i = 0; i < w.known && ok; i++) ok = new_name(&w) >= 0;
        Py_ssize_t tags = 0;
        int rc = ok ? walk_tokens(&w, held, following, max_attributes, max_tags, attribute_count, EMPTY, &tags)
                    : ERROR;
        if (rc >= 0) {
            result = Py_BuildValue("(nzLL)", rc == OK ? (Py_ssize_t)0 : tags, REASONS[rc], w.created, w.deepest);
        }
    }
    free_walk(&w);
    Py_DECREF(held);
    return result;
}

static PyMethodDef methods[] = {
    {"tags", tags, METH_VARARGS,
     "The tags of an HTML document, the first most of them when given: (closing, name, attributes, after) each."},
    {"long_attributes", long_attributes, METH_VARARGS, "The attributes of the tags longer than a length."},
    {"tag_offset", tag_offset, METH_VARARGS, "Where the number-th tag (1-based) starts, or the text's length."},
    {"walk", walk, METH_VARARGS, "The pre-scan's walk over the tokens of tags(): (tag, reason, created, deepest)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_htmltags", NULL, -1, methods};

PyMODINIT_FUNC PyInit__htmltags(void) {
    EMPTY = PyUnicode_FromString("");
    SLASH = PyUnicode_FromString("/");
    if (EMPTY == NULL || SLASH == NULL) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    PyObject *fixed = PyTuple_New(N_FIXED), *sets = PyTuple_New(B_COUNT);
    int failed = fixed == NULL || sets == NULL;
    for (int i = 0; !failed && i < N_FIXED; i++) {
        PyObject *s = PyUnicode_FromString(FIXED_NAMES[i]);
        failed = s == NULL;
        if (s) PyTuple_SET_ITEM(fixed, i, s);
    }
    for (int i = 0; !failed && i < B_COUNT; i++) {
        PyObject *s = PyUnicode_FromString(SET_NAMES[i]);
        failed = s == NULL;
        if (s) PyTuple_SET_ITEM(sets, i, s);
    }
    if (!failed) failed = PyModule_AddObjectRef(m, "WALK_NAMES", fixed) < 0 || PyModule_AddObjectRef(m, "WALK_SETS", sets) < 0;
    Py_XDECREF(fixed);
    Py_XDECREF(sets);
    if (failed) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
