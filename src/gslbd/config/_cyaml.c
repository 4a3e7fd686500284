/*
 * gslbd.config._cyaml: a configuration file read by libyaml straight into values (config/yaml_fast.py).
 *
 * PyYAML's C loader still makes a node and two mark objects per scalar and resolves every scalar's
 * tag in Python; at 100,000 services (3.7 million events) that is seconds. This reader walks libyaml's
 * events itself and makes:
 *
 *   - outside the top-level `services:` list: the marked tree of config/loader.py (Map, Entry, Seq,
 *     Scalar, every node with its line), made by calling those types;
 *   - for each item of a top-level `services:` block list: the plain value (dict, list, str, int, bool,
 *     None, or what the resolver callback makes) and the line and column it starts at, no marks.
 *
 * It reads a narrow subset of YAML and gives up (returns the `bail` object) on anything else, so that
 * the caller reads the text with PyYAML's marked loader, which also words every problem: anchors,
 * aliases, explicit tags, merge keys, keys that are not strings, duplicate keys, more than one
 * document, an item of `services:` that does not start on its line after `- ` (or is on the line of
 * another). A scalar's type is the safe loader's: quoted and block scalars are strings; a plain scalar
 * is a string when PyYAML's implicit resolvers cannot match it (config/yaml_fast.py checks at import
 * that they are the ones this file knows), a decimal int, a bool or null word is made here, and any
 * other plain scalar is given to the `resolve` callback (the safe resolver and constructor), which
 * returns `bail` when it fails. A text libyaml cannot parse raises ValueError.
 *
 * load(data, spec, fragment) -> (tree, services) | bail
 *   data      the text, UTF-8
 *   spec      object with map, entry, seq, scalar (types), resolve (callable), bail (any object)
 *   fragment  True: the text is a piece of a services list (its lines only, the rest blank): the root
 *             must be a block list and `tree` is None
 *   services  None (no top-level services block list) or (values, lines, columns, end_line)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include <yaml.h>

typedef struct {
    yaml_parser_t parser;
    PyObject *map_t, *entry_t, *seq_t, *scalar_t, *resolve, *bail;
    const unsigned char *data;
    size_t size;
    size_t cursor;      /* byte offset of the start of line `cursor_line` (0-based) */
    size_t cursor_line;
    int depth;          /* nodes open now: a text nested deeper than MAX_DEPTH is left to PyYAML */
    int bailed;         /* the text is outside the subset: give up */
    int failed;         /* a Python exception or a YAML error is set */
    /* the top-level services list */
    PyObject *values, *lines, *columns;
    long end_line;
} Walk;

/* The next event; 0 when libyaml failed (ValueError set). */
static int next(Walk *w, yaml_event_t *ev) {
    if (!yaml_parser_parse(&w->parser, ev)) {
        PyErr_Format(PyExc_ValueError, "invalid YAML at line %lu: %s",
                     (unsigned long)w->parser.problem_mark.line + 1,
                     w->parser.problem ? w->parser.problem : "unknown problem");
        w->failed = 1;
        return 0;
    }
    return 1;
}

static int give_up(Walk *w) {
    w->bailed = 1;
    return 0;
}

/* Whether the `n` bytes are exactly `word`. */
static int is(const char *s, size_t n, const char *word) {
    return strlen(word) == n && memcmp(s, word, n) == 0;
}

static int any_of(const char *s, size_t n, const char *const *words) {
    for (; *words; words++)
        if (is(s, n, *words))
            return 1;
    return 0;
}

static const char *const TRUE_WORDS[] = {"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON", NULL};
static const char *const FALSE_WORDS[] = {"no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF",
                                          NULL};
static const char *const NULL_WORDS[] = {"~", "null", "Null", "NULL", NULL};

/* A plain scalar's value, as the safe loader makes it; NULL with w->bailed or w->failed. */
static PyObject *plain_scalar(Walk *w, const char *s, size_t n) {
    if (n == 0 || any_of(s, n, NULL_WORDS))
        Py_RETURN_NONE;
    char first = s[0];
    if (strchr("yYnNtTfFoO", first)) { /* only the bool (and for n, N the null) resolver starts here */
        if (any_of(s, n, TRUE_WORDS))
            Py_RETURN_TRUE;
        if (any_of(s, n, FALSE_WORDS))
            Py_RETURN_FALSE;
        return PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, NULL);
    }
    if (first == '<' && is(s, n, "<<")) { /* a merge key */
        give_up(w);
        return NULL;
    }
    if (!strchr("-+0123456789.=!&*", first)) /* no implicit resolver starts with it: a string */
        return PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, NULL);
    /* A decimal int without underscores: [-+]?(0|[1-9][0-9]*). */
    size_t i = (first == '-' || first == '+') ? 1 : 0;
    if (i < n && (s[i] != '0' || i + 1 == n)) {
        size_t j = i;
        while (j < n && s[j] >= '0' && s[j] <= '9')
            j++;
        if (j == n && j > i && j - i < 19) {
            char buf[24];
            memcpy(buf, s, n);
            buf[n] = 0;
            return PyLong_FromString(buf, NULL, 10);
        }
    }
    /* Strings every typed pattern refuses: two dots (int has none; float and timestamp one at most) or
     * "::" (every ':' of the sexagesimal and timestamp forms is followed by a digit). */
    int dots = 0;
    for (size_t k = 0; k < n; k++) {
        if (s[k] == '.')
            dots++;
        else if (s[k] == ':' && k + 1 < n && s[k + 1] == ':')
            dots = 2;
    }
    if (dots >= 2)
        return PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, NULL);
    PyObject *text = PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, NULL);
    if (text == NULL) {
        w->failed = 1;
        return NULL;
    }
    PyObject *value = PyObject_CallOneArg(w->resolve, text);
    Py_DECREF(text);
    if (value == NULL) {
        w->failed = 1;
        return NULL;
    }
    if (value == w->bail) {
        Py_DECREF(value);
        give_up(w);
        return NULL;
    }
    return value;
}

/* A scalar event's value (it is not deleted here). */
static PyObject *scalar(Walk *w, yaml_event_t *ev) {
    if (ev->data.scalar.anchor || ev->data.scalar.tag) { /* an anchor; an explicit tag, even `!` */
        give_up(w);
        return NULL;
    }
    const char *s = (const char *)ev->data.scalar.value;
    size_t n = ev->data.scalar.length;
    PyObject *out;
    if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
        out = plain_scalar(w, s, n);
    else
        out = PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, NULL);
    if (out == NULL && !w->bailed)
        w->failed = 1;
    return out;
}

static PyObject *node(Walk *w, yaml_event_t *ev, int plain, int top);
#define MAX_DEPTH 200

/* Whether the bytes before column `column` of line `line` (0-based) are spaces and dashes only: the
 * item starts on its line after `- ` (or `- - `). Lines are met in ascending order. */
static int item_start(Walk *w, size_t line, size_t column) {
    while (w->cursor_line < line) {
        const unsigned char *nl = memchr(w->data + w->cursor, '\n', w->size - w->cursor);
        if (nl == NULL)
            return 0;
        w->cursor = (size_t)(nl - w->data) + 1;
        w->cursor_line++;
    }
    if (w->cursor + column > w->size)
        return 0;
    int dash = 0;
    for (size_t k = 0; k < column; k++) {
        unsigned char c = w->data[w->cursor + k];
        if (c == '-')
            dash = 1;
        else if (c != ' ')
            return 0;
    }
    return dash;
}

/* The items of the top-level services block list (the SEQUENCE-START event was read). */
static int services(Walk *w, long *last_line) {
    long previous = -1;
    for (;;) {
        yaml_event_t ev;
        if (!next(w, &ev))
            return 0;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            /* the line after the list: the next key's, or past the text's last line */
            w->end_line = (long)ev.start_mark.line + (ev.start_mark.column > 0);
            yaml_event_delete(&ev);
            *last_line = previous;
            return 1;
        }
        long line = (long)ev.start_mark.line;
        size_t column = ev.start_mark.column;
        if (line <= previous || !item_start(w, (size_t)line, column)) {
            yaml_event_delete(&ev);
            return give_up(w);
        }
        PyObject *value = node(w, &ev, 1, 0);
        if (value == NULL)
            return 0;
        PyObject *l = PyLong_FromLong(line + 1), *c = PyLong_FromSize_t(column);
        int bad = l == NULL || c == NULL || PyList_Append(w->values, value) || PyList_Append(w->lines, l) ||
                  PyList_Append(w->columns, c);
        Py_DECREF(value);
        Py_XDECREF(l);
        Py_XDECREF(c);
        if (bad) {
            w->failed = 1;
            return 0;
        }
        previous = line;
    }
}

/* A mapping (its MAPPING-START event was read): a dict when `plain`, else a Map. */
static PyObject *mapping(Walk *w, int line, int plain, int top) {
    PyObject *seen = PyDict_New(); /* key -> value (plain) or key -> None (marked) */
    PyObject *entries = plain ? NULL : PyList_New(0);
    if (seen == NULL || (!plain && entries == NULL))
        goto failed;
    for (;;) {
        yaml_event_t ev;
        if (!next(w, &ev))
            goto out;
        if (ev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        if (ev.type != YAML_SCALAR_EVENT) { /* a key that is not a scalar */
            yaml_event_delete(&ev);
            give_up(w);
            goto out;
        }
        int key_line = (int)ev.start_mark.line + 1;
        PyObject *key = scalar(w, &ev);
        yaml_event_delete(&ev);
        if (key == NULL)
            goto out;
        if (!PyUnicode_CheckExact(key)) {
            Py_DECREF(key);
            give_up(w);
            goto out;
        }
        PyUnicode_InternInPlace(&key);
        int dup = PyDict_Contains(seen, key);
        if (dup != 0) {
            Py_DECREF(key);
            if (dup > 0)
                give_up(w);
            else
                w->failed = 1;
            goto out;
        }
        if (!next(w, &ev)) {
            Py_DECREF(key);
            goto out;
        }
        PyObject *value;
        if (top && ev.type == YAML_SEQUENCE_START_EVENT && ev.data.sequence_start.style == YAML_BLOCK_SEQUENCE_STYLE &&
            !ev.data.sequence_start.anchor && !ev.data.sequence_start.tag &&
            PyUnicode_CompareWithASCIIString(key, "services") == 0) {
            int seq_line = (int)ev.start_mark.line + 1;
            yaml_event_delete(&ev);
            long last = -1;
            if (!services(w, &last)) {
                Py_DECREF(key);
                goto out;
            }
            value = PyObject_CallFunction(w->seq_t, "i()", seq_line); /* its items are `services` */
        } else {
            value = node(w, &ev, plain, 0);
        }
        if (value == NULL) {
            Py_DECREF(key);
            if (!w->bailed)
                w->failed = 1;
            goto out;
        }
        int bad;
        if (plain) {
            bad = PyDict_SetItem(seen, key, value);
        } else {
            PyObject *entry = PyObject_CallFunction(w->entry_t, "OiO", key, key_line, value);
            bad = entry == NULL || PyList_Append(entries, entry) || PyDict_SetItem(seen, key, Py_None);
            Py_XDECREF(entry);
        }
        Py_DECREF(key);
        Py_DECREF(value);
        if (bad)
            goto failed;
    }
    if (plain) {
        Py_XDECREF(entries);
        return seen;
    }
    PyObject *tuple = PyList_AsTuple(entries);
    PyObject *out = tuple ? PyObject_CallFunction(w->map_t, "iN", line, tuple) : NULL;
    if (out == NULL)
        w->failed = 1;
    Py_DECREF(seen);
    Py_DECREF(entries);
    return out;
failed:
    w->failed = 1;
out:
    Py_XDECREF(seen);
    Py_XDECREF(entries);
    return NULL;
}

static PyObject *sequence(Walk *w, int line, int plain) {
    PyObject *items = PyList_New(0);
    if (items == NULL) {
        w->failed = 1;
        return NULL;
    }
    for (;;) {
        yaml_event_t ev;
        if (!next(w, &ev))
            goto out;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        PyObject *item = node(w, &ev, plain, 0);
        if (item == NULL)
            goto out;
        int bad = PyList_Append(items, item);
        Py_DECREF(item);
        if (bad) {
            w->failed = 1;
            goto out;
        }
    }
    if (plain)
        return items;
    PyObject *tuple = PyList_AsTuple(items);
    Py_DECREF(items);
    PyObject *out = tuple ? PyObject_CallFunction(w->seq_t, "iN", line, tuple) : NULL;
    if (out == NULL)
        w->failed = 1;
    return out;
out:
    Py_DECREF(items);
    return NULL;
}

static PyObject *node_of(Walk *w, yaml_event_t *ev, int plain, int top);

/* The node that starts with event `ev` (deleted here); NULL with w->bailed or w->failed. */
static PyObject *node(Walk *w, yaml_event_t *ev, int plain, int top) {
    if (w->depth >= MAX_DEPTH) {
        yaml_event_delete(ev);
        give_up(w);
        return NULL;
    }
    w->depth++;
    PyObject *out = node_of(w, ev, plain, top);
    w->depth--;
    return out;
}

static PyObject *node_of(Walk *w, yaml_event_t *ev, int plain, int top) {
    int line = (int)ev->start_mark.line + 1;
    PyObject *out = NULL;
    switch (ev->type) {
    case YAML_SCALAR_EVENT: {
        PyObject *value = scalar(w, ev);
        if (value == NULL || plain) {
            out = value;
            break;
        }
        out = PyObject_CallFunction(w->scalar_t, "iN", line, value);
        if (out == NULL)
            w->failed = 1;
        break;
    }
    case YAML_MAPPING_START_EVENT:
        if (ev->data.mapping_start.anchor || ev->data.mapping_start.tag) {
            give_up(w);
            break;
        }
        yaml_event_delete(ev);
        return mapping(w, line, plain, top);
    case YAML_SEQUENCE_START_EVENT:
        if (ev->data.sequence_start.anchor || ev->data.sequence_start.tag) {
            give_up(w);
            break;
        }
        yaml_event_delete(ev);
        return sequence(w, line, plain);
    default: /* an alias */
        give_up(w);
        break;
    }
    yaml_event_delete(ev);
    return out;
}

static PyObject *attr(PyObject *spec, const char *name) { return PyObject_GetAttrString(spec, name); }

/* The document: its root node, or Py_None for an empty stream. */
static PyObject *document(Walk *w, int fragment) {
    yaml_event_t ev;
    if (!next(w, &ev))
        return NULL;
    yaml_event_delete(&ev); /* STREAM-START */
    if (!next(w, &ev))
        return NULL;
    if (ev.type == YAML_STREAM_END_EVENT) {
        yaml_event_delete(&ev);
        if (fragment) {
            give_up(w);
            return NULL;
        }
        Py_RETURN_NONE;
    }
    yaml_event_delete(&ev); /* DOCUMENT-START */
    if (!next(w, &ev))
        return NULL;
    PyObject *root;
    if (fragment) {
        if (ev.type != YAML_SEQUENCE_START_EVENT || ev.data.sequence_start.style != YAML_BLOCK_SEQUENCE_STYLE ||
            ev.data.sequence_start.anchor || ev.data.sequence_start.tag) {
            yaml_event_delete(&ev);
            give_up(w);
            return NULL;
        }
        yaml_event_delete(&ev);
        long last = -1;
        if (!services(w, &last))
            return NULL;
        root = Py_NewRef(Py_None);
    } else {
        root = node(w, &ev, 0, 1);
        if (root == NULL)
            return NULL;
    }
    /* DOCUMENT-END, then STREAM-END: a second document is outside the subset */
    if (!next(w, &ev))
        goto drop;
    yaml_event_delete(&ev);
    if (!next(w, &ev))
        goto drop;
    int end = ev.type == YAML_STREAM_END_EVENT;
    yaml_event_delete(&ev);
    if (!end) {
        give_up(w);
        goto drop;
    }
    return root;
drop:
    Py_DECREF(root);
    return NULL;
}

static PyObject *load(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data;
    PyObject *spec;
    int fragment;
    if (!PyArg_ParseTuple(args, "y*Op", &data, &spec, &fragment))
        return NULL;
    Walk w;
    memset(&w, 0, sizeof w);
    w.data = data.buf;
    w.size = (size_t)data.len;
    w.end_line = -1;
    PyObject *result = NULL;
    w.map_t = attr(spec, "map");
    w.entry_t = attr(spec, "entry");
    w.seq_t = attr(spec, "seq");
    w.scalar_t = attr(spec, "scalar");
    w.resolve = attr(spec, "resolve");
    w.bail = attr(spec, "bail");
    w.values = PyList_New(0);
    w.lines = PyList_New(0);
    w.columns = PyList_New(0);
    if (!w.map_t || !w.entry_t || !w.seq_t || !w.scalar_t || !w.resolve || !w.bail || !w.values || !w.lines ||
        !w.columns)
        goto done;
    if (!yaml_parser_initialize(&w.parser)) {
        PyErr_NoMemory();
        goto done;
    }
    yaml_parser_set_input_string(&w.parser, w.data, w.size);
    yaml_parser_set_encoding(&w.parser, YAML_UTF8_ENCODING);
    PyObject *root = document(&w, fragment);
    yaml_parser_delete(&w.parser);
    if (root == NULL) {
        if (w.bailed && !PyErr_Occurred())
            result = Py_NewRef(w.bail);
        goto done;
    }
    if (w.end_line < 0) {
        result = Py_BuildValue("(NO)", root, Py_None);
    } else {
        result = Py_BuildValue("(N(OOOl))", root, w.values, w.lines, w.columns, w.end_line + 1);
    }
done:
    Py_XDECREF(w.map_t);
    Py_XDECREF(w.entry_t);
    Py_XDECREF(w.seq_t);
    Py_XDECREF(w.scalar_t);
    Py_XDECREF(w.resolve);
    Py_XDECREF(w.bail);
    Py_XDECREF(w.values);
    Py_XDECREF(w.lines);
    Py_XDECREF(w.columns);
    PyBuffer_Release(&data);
    return result;
}

static PyMethodDef METHODS[] = {
    {"load", load, METH_VARARGS, "load(data, spec, fragment) -> (tree, services) | spec.bail"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_cyaml", NULL, -1, METHODS, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cyaml(void) { return PyModule_Create(&MODULE); }
