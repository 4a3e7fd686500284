/*
 * gslbd.config._cshape: the common shape of a service, read in C (config/fast.py).
 *
 * A services file of 100,000 services is read service by service; in Python the fast path costs about
 * 20 us a service (bytecode for the checks, five objects). This module reads the commonest shape only,
 * the one a fleet's generated file is made of, and gives up (None) on anything else, so that the Python
 * fast path (config/fast.py `_service`) and then the located validator decide every other service:
 *
 *   keys    name, policy, failover_order, weights, check, ttl, max_answers, all_down, locality_names,
 *           endpoints, min_healthy (read by config/min_healthy.py through the spec's `min_healthy`);
 *           no fallback, zone, https, srv, failover_delay or failback_delay, and ttl only as a number:
 *           a Service made here has their defaults;
 *   name    an absolute ASCII name (any case) that is a service name of a served zone;
 *   check   `none` or the name of a valid profile;
 *   endpoints  each {address} or {address, site}: an IPv4 address in its normal form or an IPv6 address
 *           that the C library writes as ipaddress does (config/fast.py ipv6_text's rules).
 *
 * For those it makes exactly what config/fast.py's `_service` makes: the same Service (==) and the same
 * sites named, in the same order, with the same effects on the context (the sites used, the check
 * profiles used) applied only once the service is made. tests/unit/config/test_fast_path.py holds the
 * two to that, for valid and broken services alike.
 *
 * The model objects are frozen slotted dataclasses. They are made as Python's own constructor would
 * leave them: the object allocated by its type and every slot stored at the offset of the type's slot
 * descriptor (found by name at construction, all of them, or the Reader refuses to be made).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <arpa/inet.h>
#include <string.h>
#include <structmember.h>

enum { E_SERVICE, E_ADDRESS, E_KIND, E_SITE, E_LOCALITY, E_WEIGHT, E_PRIORITY, E_CHECK, E_PROBE, E_ADMIN,
       E_TAGS, E_CHECKS, E_LOAD, E_COUNT };
static const char *const ENDPOINT_FIELDS[E_COUNT] = {"service",  "address", "kind",  "site",
                                                     "locality", "weight",  "priority", "check",
                                                     "probe_address", "admin", "tags", "checks", "load"};
enum { S_NAME, S_ZONE, S_LABEL, S_POLICY, S_ORDER, S_WEIGHTS, S_TTL, S_MAX, S_ALL_DOWN, S_FALLBACK,
       S_LOCALITY_NAMES, S_ENDPOINTS, S_HTTPS, S_SRV, S_MIN_HEALTHY, S_BIAS, S_SELECT, S_POOLS, S_RULES,
       S_FAILOVER_DELAY, S_FAILBACK_DELAY, S_TTL_RANGE, S_WEIGHT_FROM, S_SHED_LOAD, S_COUNT };
static const char *const SERVICE_FIELDS[S_COUNT] = {
    "name",    "zone",        "label",    "policy",         "failover_order", "weights", "ttl",
    "max_answers", "all_down", "fallback", "locality_names", "endpoints",      "https",   "srv",
    "min_healthy", "bias", "select", "pools", "rules", "failover_delay", "failback_delay", "ttl_range",
    "weight_from", "shed_load"};

#define MAX_NAME 254
#define MAX_LABEL 63
#define MAX_ENDPOINTS 64 /* more endpoints than this: the Python fast path reads the service */

typedef struct {
    PyObject_HEAD
    PyTypeObject *service_type, *endpoint_type;
    Py_ssize_t service_at[S_COUNT], endpoint_at[E_COUNT];
    PyObject *keys;                          /* frozenset: the service keys this module reads */
    PyObject *policies, *all_downs;          /* dict: text -> enum member */
    PyObject *failover, *weighted, *geo;     /* PolicyName members */
    PyObject *fallback;                      /* AllDown.FALLBACK */
    PyObject *ipv4, *ipv6, *obey;            /* EndpointKind.IPV4/IPV6, AdminState.OBEY */
    PyObject *rotate;                        /* Select.ROTATE */
    PyObject *weight_config;                 /* WeightFrom.CONFIG */
    PyObject *reserved;                      /* tuple of str: prefixes of the exchange's names */
    Py_ssize_t max_exchange_label;
    long long ttl_max;
    PyObject *served;                        /* dict: origin -> ZoneInfo */
    PyObject *profiles;                      /* dict: name -> (Check, path) */
    PyObject *site_of;                       /* dict: site -> (site, Locality), shared with Python */
    PyObject *here;                          /* (this site, its Locality) */
    PyObject *peer_sites;                    /* set */
    int can_locate;
    PyObject *new_site;                      /* callable: site -> (site, Locality), raises `slow` */
    PyObject *min_healthy;                   /* callable: (value, endpoints) -> MinHealthy, None: not here */
    PyObject *slow;                          /* exception classes that mean "not this path" */
    PyObject *sites_used;                    /* dict, the context's sites used (first-seen order) */
    PyObject *checks_used;                   /* set, the context's check profiles used */
    /* interned keys and constants */
    PyObject *k_name, *k_policy, *k_order, *k_weights, *k_check, *k_ttl, *k_max, *k_all_down,
        *k_min_healthy, *k_locality_names, *k_endpoints, *k_address, *k_site, *k_zone, *k_origin, *k_owners, *k_region,
        *round_robin, *serve_all, *none_text, *one, *zero, *eight, *empty;
} Reader;

/* The result of a step: OK, or NOT_HERE (the service is not this module's: None, nothing changed), or
 * FAILED (a Python exception is set that is not a "not this path" one: it propagates). */
enum { OK = 0, NOT_HERE = 1, FAILED = -1 };

/* A pending exception: NOT_HERE when it is one of `slow` (cleared), else FAILED. */
static int not_here_or_failed(Reader *r) {
    if (PyErr_ExceptionMatches(r->slow)) {
        PyErr_Clear();
        return NOT_HERE;
    }
    return FAILED;
}

static int slot_offsets(PyTypeObject *type, const char *const *names, int count, Py_ssize_t *out) {
    PyObject *slots = PyObject_GetAttrString((PyObject *)type, "__slots__");
    if (slots == NULL)
        return -1;
    Py_ssize_t n = PySequence_Size(slots);
    Py_DECREF(slots);
    if (n != count) {
        PyErr_Format(PyExc_TypeError, "%s has %zd slots, this module knows %d", type->tp_name, n, count);
        return -1;
    }
    for (int i = 0; i < count; i++) {
        PyObject *descr = PyDict_GetItemString(type->tp_dict, names[i]); /* borrowed */
        if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
            PyErr_Format(PyExc_TypeError, "%s.%s is not a slot", type->tp_name, names[i]);
            return -1;
        }
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if (member->type != T_OBJECT_EX) {
            PyErr_Format(PyExc_TypeError, "%s.%s is not an object slot", type->tp_name, names[i]);
            return -1;
        }
        out[i] = member->offset;
    }
    return 0;
}

/* A new object of `type` with `values[i]` (new references, stolen) at `at[i]`. */
static PyObject *made(PyTypeObject *type, const Py_ssize_t *at, PyObject **values, int count) {
    PyObject *obj = type->tp_alloc(type, 0);
    if (obj == NULL) {
        for (int i = 0; i < count; i++)
            Py_XDECREF(values[i]);
        return NULL;
    }
    for (int i = 0; i < count; i++)
        *(PyObject **)((char *)obj + at[i]) = values[i];
    return obj;
}

static int attr(PyObject *spec, const char *name, PyObject **out) {
    *out = PyObject_GetAttrString(spec, name);
    return *out == NULL ? -1 : 0;
}

/* Every object field, for the collector and for dealloc: a Reader is held by the fast path's index,
 * which its `new_site` callable holds in turn (a cycle the collector must see). */
#define READER_FIELDS(X)                                                                                 \
    X(service_type) X(endpoint_type) X(keys) X(policies) X(all_downs) X(failover) X(weighted) X(geo)      \
    X(fallback) X(ipv4) X(ipv6) X(obey) X(rotate) X(weight_config) X(reserved) X(served) X(profiles) X(site_of) X(here)              \
    X(peer_sites) X(new_site) X(min_healthy) X(slow) X(sites_used) X(checks_used) X(k_name) X(k_policy)   \
    X(k_order) X(k_weights) X(k_check) X(k_ttl) X(k_max) X(k_all_down) X(k_min_healthy) X(k_locality_names) \
    X(k_endpoints)                                                                                       \
    X(k_address) X(k_site) X(k_zone) X(k_origin) X(k_owners) X(k_region) X(round_robin) X(serve_all)      \
    X(none_text) X(one) X(zero) X(eight) X(empty)

static int reader_traverse(Reader *r, visitproc visit, void *arg) {
#define VISIT(field) Py_VISIT(r->field);
    READER_FIELDS(VISIT)
#undef VISIT
    return 0;
}

static int reader_clear(Reader *r) {
#define CLEAR(field) Py_CLEAR(r->field);
    READER_FIELDS(CLEAR)
#undef CLEAR
    return 0;
}

static void reader_dealloc(Reader *r) {
    PyObject_GC_UnTrack(r);
    reader_clear(r);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static int reader_init(Reader *r, PyObject *args, PyObject *kwargs) {
    PyObject *spec;
    static char *kwlist[] = {"spec", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O", kwlist, &spec))
        return -1;
    PyObject *service_type, *endpoint_type, *max_label, *ttl_max, *can_locate;
    if (attr(spec, "service_type", &service_type) || attr(spec, "endpoint_type", &endpoint_type))
        return -1;
    if (!PyType_Check(service_type) || !PyType_Check(endpoint_type)) {
        PyErr_SetString(PyExc_TypeError, "service_type and endpoint_type must be classes");
        return -1;
    }
    r->service_type = (PyTypeObject *)service_type;
    r->endpoint_type = (PyTypeObject *)endpoint_type;
    if (slot_offsets(r->service_type, SERVICE_FIELDS, S_COUNT, r->service_at) ||
        slot_offsets(r->endpoint_type, ENDPOINT_FIELDS, E_COUNT, r->endpoint_at))
        return -1;
    if (attr(spec, "keys", &r->keys) || attr(spec, "policies", &r->policies) ||
        attr(spec, "all_downs", &r->all_downs) || attr(spec, "failover", &r->failover) ||
        attr(spec, "weighted", &r->weighted) || attr(spec, "geo", &r->geo) ||
        attr(spec, "fallback", &r->fallback) || attr(spec, "ipv4", &r->ipv4) || attr(spec, "ipv6", &r->ipv6) ||
        attr(spec, "obey", &r->obey) || attr(spec, "rotate", &r->rotate) ||
        attr(spec, "weight_config", &r->weight_config) || attr(spec, "reserved", &r->reserved) ||
        attr(spec, "served", &r->served) || attr(spec, "profiles", &r->profiles) ||
        attr(spec, "site_of", &r->site_of) || attr(spec, "here", &r->here) ||
        attr(spec, "peer_sites", &r->peer_sites) || attr(spec, "new_site", &r->new_site) ||
        attr(spec, "min_healthy", &r->min_healthy) ||
        attr(spec, "slow", &r->slow) || attr(spec, "sites_used", &r->sites_used) ||
        attr(spec, "checks_used", &r->checks_used))
        return -1;
    if (!PyFrozenSet_CheckExact(r->keys) || !PyDict_CheckExact(r->policies) ||
        !PyDict_CheckExact(r->all_downs) || !PyTuple_CheckExact(r->reserved) ||
        !PyDict_CheckExact(r->served) || !PyDict_CheckExact(r->profiles) || !PyDict_CheckExact(r->site_of) ||
        !PyTuple_CheckExact(r->here) || PyTuple_GET_SIZE(r->here) != 2 || !PySet_CheckExact(r->peer_sites) ||
        !PyDict_CheckExact(r->sites_used) || !PySet_CheckExact(r->checks_used)) {
        PyErr_SetString(PyExc_TypeError, "a Reader spec field has the wrong type");
        return -1;
    }
    if (attr(spec, "max_exchange_label", &max_label))
        return -1;
    r->max_exchange_label = PyLong_AsSsize_t(max_label);
    Py_DECREF(max_label);
    if (attr(spec, "ttl_max", &ttl_max))
        return -1;
    r->ttl_max = PyLong_AsLongLong(ttl_max);
    Py_DECREF(ttl_max);
    if (attr(spec, "can_locate", &can_locate))
        return -1;
    r->can_locate = PyObject_IsTrue(can_locate);
    Py_DECREF(can_locate);
    if (PyErr_Occurred())
        return -1;
#define KEY(field, text)                                                                                 \
    if ((r->field = PyUnicode_InternFromString(text)) == NULL)                                           \
        return -1;
    KEY(k_name, "name") KEY(k_policy, "policy") KEY(k_order, "failover_order") KEY(k_weights, "weights")
    KEY(k_check, "check") KEY(k_ttl, "ttl") KEY(k_max, "max_answers") KEY(k_all_down, "all_down")
    KEY(k_min_healthy, "min_healthy")
    KEY(k_locality_names, "locality_names") KEY(k_endpoints, "endpoints") KEY(k_address, "address")
    KEY(k_site, "site") KEY(k_zone, "zone") KEY(k_origin, "origin") KEY(k_owners, "owners")
    KEY(k_region, "region") KEY(round_robin, "round_robin") KEY(serve_all, "serve_all")
    KEY(none_text, "none")
#undef KEY
    if ((r->one = PyLong_FromLong(1)) == NULL || (r->zero = PyLong_FromLong(0)) == NULL ||
        (r->eight = PyLong_FromLong(8)) == NULL || (r->empty = PyTuple_New(0)) == NULL)
        return -1;
    return 0;
}

/* An exact int in lo..hi (NOT_HERE otherwise). */
static int int_in(PyObject *value, long long lo, long long hi) {
    if (!PyLong_CheckExact(value))
        return NOT_HERE;
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return NOT_HERE;
    }
    return lo <= v && v <= hi ? OK : NOT_HERE;
}

/* The name, lower case (a new reference), when it is an absolute name as check_absolute accepts it:
 * `(?:\*\.)?(?:[a-z0-9_-]{1,63}\.)+` and at most MAX_NAME long; else NULL without an exception. */
static PyObject *service_name(PyObject *value) {
    if (!PyUnicode_CheckExact(value) || !PyUnicode_IS_ASCII(value))
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(value);
    const char *text = (const char *)PyUnicode_1BYTE_DATA(value);
    if (n == 0 || n > MAX_NAME)
        return NULL;
    Py_ssize_t i = 0, label = 0;
    int upper = 0;
    if (n >= 2 && text[0] == '*' && text[1] == '.')
        i = 2;
    if (i >= n)
        return NULL;
    for (; i < n; i++) {
        char c = text[i];
        if (c == '.') {
            if (label == 0)
                return NULL;
            label = 0;
            continue;
        }
        if (c >= 'A' && c <= 'Z')
            upper = 1;
        else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return NULL;
        if (++label > MAX_LABEL)
            return NULL;
    }
    if (label != 0) /* the last label must end with a dot */
        return NULL;
    if (!upper)
        return Py_NewRef(value);
    PyObject *out = PyUnicode_New(n, 127);
    if (out == NULL)
        return NULL;
    char *dst = (char *)PyUnicode_1BYTE_DATA(out);
    for (i = 0; i < n; i++)
        dst[i] = (text[i] >= 'A' && text[i] <= 'Z') ? (char)(text[i] + 32) : text[i];
    return out;
}

/* The most specific served zone holding `name` (borrowed), as service_context.zone_of; NULL when none
 * (an exception only when one is set). */
static PyObject *zone_of(Reader *r, PyObject *name) {
    PyObject *info = PyDict_GetItemWithError(r->served, name);
    if (info != NULL || PyErr_Occurred())
        return info;
    Py_ssize_t n = PyUnicode_GET_LENGTH(name);
    const char *text = (const char *)PyUnicode_1BYTE_DATA(name);
    for (Py_ssize_t at = 0; at < n; at++) {
        if (text[at] != '.' || at + 1 >= n)
            continue;
        PyObject *suffix = PyUnicode_Substring(name, at + 1, n);
        if (suffix == NULL)
            return NULL;
        info = PyDict_GetItemWithError(r->served, suffix);
        Py_DECREF(suffix);
        if (info != NULL || PyErr_Occurred())
            return info;
    }
    PyObject *root = PyUnicode_FromString(".");
    if (root == NULL)
        return NULL;
    info = PyDict_GetItemWithError(r->served, root);
    Py_DECREF(root);
    return info;
}

/* (site, locality) for a site value (borrowed from site_of, which new_site fills), as fast.py's
 * _site_of; NULL with *status NOT_HERE or FAILED. */
static PyObject *site_of(Reader *r, PyObject *value, int *status) {
    if (!PyUnicode_CheckExact(value)) {
        *status = NOT_HERE;
        return NULL;
    }
    PyObject *found = PyDict_GetItemWithError(r->site_of, value);
    if (found != NULL)
        return found;
    if (PyErr_Occurred()) {
        *status = FAILED;
        return NULL;
    }
    PyObject *made_now = PyObject_CallOneArg(r->new_site, value);
    if (made_now == NULL) {
        *status = not_here_or_failed(r);
        return NULL;
    }
    Py_DECREF(made_now); /* new_site stores it in site_of */
    found = PyDict_GetItemWithError(r->site_of, value);
    if (found == NULL || !PyTuple_CheckExact(found) || PyTuple_GET_SIZE(found) != 2) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "new_site did not record the site");
        *status = FAILED;
        return NULL;
    }
    return found;
}

/* The text of an address of the common shape (a new reference) and its kind (borrowed), as fast.py's
 * common endpoint: IPv4 in its normal form (the text itself) or IPv6 by ipv6_text's rules. NULL
 * without an exception: not the common shape. */
static PyObject *address_of(Reader *r, PyObject *value, PyObject **kind) {
    if (!PyUnicode_CheckExact(value) || !PyUnicode_IS_ASCII(value))
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(value);
    const char *text = (const char *)PyUnicode_1BYTE_DATA(value);
    if ((Py_ssize_t)strlen(text) != n) /* a NUL inside */
        return NULL;
    if (memchr(text, ':', (size_t)n) == NULL) {
        struct in_addr v4;
        if (inet_pton(AF_INET, text, &v4) != 1)
            return NULL;
        *kind = r->ipv4;
        return Py_NewRef(value);
    }
    if (memchr(text, '.', (size_t)n) != NULL || memchr(text, '%', (size_t)n) != NULL)
        return NULL;
    struct in6_addr v6;
    if (inet_pton(AF_INET6, text, &v6) != 1)
        return NULL;
    if (strstr(text, "::") != NULL) { /* ipaddress wants `::` to stand for at least one group */
        Py_ssize_t colons = 0;
        for (Py_ssize_t i = 0; i < n; i++)
            colons += text[i] == ':';
        Py_ssize_t groups = colons - (n >= 2 && text[0] == ':' && text[1] == ':') -
                            (n >= 2 && text[n - 1] == ':' && text[n - 2] == ':');
        if (groups > 7)
            return NULL;
    }
    char out[INET6_ADDRSTRLEN];
    if (inet_ntop(AF_INET6, &v6, out, sizeof out) == NULL || strchr(out, '.') != NULL)
        return NULL;
    *kind = r->ipv6;
    return PyUnicode_FromString(out);
}

static int starts_reserved(Reader *r, PyObject *name, Py_ssize_t first_len) {
    const char *text = (const char *)PyUnicode_1BYTE_DATA(name);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(r->reserved); i++) {
        PyObject *prefix = PyTuple_GET_ITEM(r->reserved, i);
        Py_ssize_t len;
        const char *p = PyUnicode_AsUTF8AndSize(prefix, &len);
        if (p == NULL)
            return -1;
        if (len <= first_len && memcmp(text, p, (size_t)len) == 0)
            return 1;
    }
    return 0;
}

/* Holds what a read made until it returns. */
typedef struct {
    PyObject *name, *order, *weights, *check_used, *endpoints_list, *addresses, *have;
    PyObject *named; /* dict: the sites failover_order or weights name, in order (NULL: none) */
} Held;

static void held_clear(Held *h) {
    Py_XDECREF(h->name);
    Py_XDECREF(h->order);
    Py_XDECREF(h->weights);
    Py_XDECREF(h->check_used);
    Py_XDECREF(h->endpoints_list);
    Py_XDECREF(h->addresses);
    Py_XDECREF(h->have);
    Py_XDECREF(h->named);
}

/* Records a site named by failover_order or weights in h->named (made on first use); 0 or -1. */
static int name_site(Held *h, PyObject *site) {
    if (h->named == NULL && (h->named = PyDict_New()) == NULL)
        return -1;
    return PyDict_SetDefault(h->named, site, Py_None) == NULL ? -1 : 0;
}

#define GIVE_UP(status_value)                                                                            \
    do {                                                                                                 \
        status = (status_value);                                                                         \
        goto done;                                                                                       \
    } while (0)

/* dict.get(key) (borrowed) for an exact dict; NULL without an exception when absent. */
#define GET(dict, key) PyDict_GetItemWithError((dict), (key))

static PyObject *reader_call(Reader *r, PyObject *args, PyObject *kwargs) {
    PyObject *obj, *keys_obj = Py_None;
    static char *kwlist[] = {"obj", "keys", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O", kwlist, &obj, &keys_obj))
        return NULL;
    if (!PyDict_CheckExact(obj))
        Py_RETURN_NONE;
    Held h = {0};
    PyObject *result = NULL, *value, *info, *zone = NULL, *origin = NULL, *owners = NULL;
    int status = OK;
    Py_ssize_t pos = 0;
    PyObject *key;
    while (PyDict_Next(obj, &pos, &key, &value)) { /* every key one this module reads */
        int in = PySet_Contains(r->keys, key);
        if (in < 0)
            GIVE_UP(not_here_or_failed(r));
        if (!in)
            GIVE_UP(NOT_HERE);
    }
    if ((value = GET(obj, r->k_name)) == NULL)
        GIVE_UP(PyErr_Occurred() ? FAILED : NOT_HERE);
    if ((h.name = service_name(value)) == NULL)
        GIVE_UP(PyErr_Occurred() ? FAILED : NOT_HERE);
    PyObject *name = h.name;
    if ((info = zone_of(r, name)) == NULL)
        GIVE_UP(PyErr_Occurred() ? FAILED : NOT_HERE);
    if ((zone = PyObject_GetAttr(info, r->k_zone)) == NULL || (origin = PyObject_GetAttr(zone, r->k_origin)) == NULL ||
        (owners = PyObject_GetAttr(info, r->k_owners)) == NULL)
        GIVE_UP(FAILED);
    int same = PyUnicode_Compare(name, origin);
    if (same == -1 && PyErr_Occurred())
        GIVE_UP(FAILED);
    if (same == 0)
        GIVE_UP(NOT_HERE); /* the apex */
    int owned = PySequence_Contains(owners, name);
    if (owned < 0)
        GIVE_UP(FAILED);
    if (owned)
        GIVE_UP(NOT_HERE); /* a static record's name */
    const char *text = (const char *)PyUnicode_1BYTE_DATA(name);
    Py_ssize_t first = (Py_ssize_t)(strchr(text, '.') - text);
    if (first > r->max_exchange_label)
        GIVE_UP(NOT_HERE);
    int reserved = starts_reserved(r, name, first);
    if (reserved)
        GIVE_UP(reserved < 0 ? FAILED : NOT_HERE);

    value = GET(obj, r->k_policy);
    PyObject *policy = GET(r->policies, value != NULL ? value : r->round_robin);
    if (policy == NULL) /* not a policy (an unhashable value: TypeError, not this path) */
        GIVE_UP(PyErr_Occurred() ? not_here_or_failed(r) : NOT_HERE);
    value = GET(obj, r->k_all_down);
    PyObject *all_down = GET(r->all_downs, value != NULL ? value : r->serve_all);
    if (all_down == NULL)
        GIVE_UP(PyErr_Occurred() ? not_here_or_failed(r) : NOT_HERE);
    if (all_down == r->fallback)
        GIVE_UP(NOT_HERE); /* the Python fast path reads fallbacks */
    PyObject *locality_names = GET(obj, r->k_locality_names);
    if (locality_names == NULL)
        locality_names = Py_False;
    if (locality_names != Py_True && locality_names != Py_False)
        GIVE_UP(NOT_HERE);
    if (locality_names == Py_True && text[0] == '*')
        GIVE_UP(NOT_HERE); /* an error: a wildcard service has no locality names */

    if ((value = GET(obj, r->k_order)) != NULL) {
        if (policy != r->failover || !PyList_CheckExact(value) || PyList_GET_SIZE(value) == 0)
            GIVE_UP(NOT_HERE);
        Py_ssize_t n = PyList_GET_SIZE(value);
        if ((h.order = PyTuple_New(n)) == NULL)
            GIVE_UP(FAILED);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *found = site_of(r, PyList_GET_ITEM(value, i), &status);
            if (found == NULL)
                goto done;
            PyObject *site = PyTuple_GET_ITEM(found, 0);
            if (name_site(&h, site) < 0)
                GIVE_UP(FAILED);
            if (PyDict_GET_SIZE(h.named) != i + 1)
                GIVE_UP(NOT_HERE); /* an error: a site listed twice */
            PyTuple_SET_ITEM(h.order, i, Py_NewRef(site));
        }
    }
    if ((value = GET(obj, r->k_weights)) != NULL) {
        if (policy != r->weighted || !PyDict_CheckExact(value) || PyDict_GET_SIZE(value) == 0)
            GIVE_UP(NOT_HERE);
        if ((h.weights = PyTuple_New(PyDict_GET_SIZE(value))) == NULL)
            GIVE_UP(FAILED);
        Py_ssize_t i = 0, wpos = 0;
        PyObject *wsite, *weight;
        int some = 0;
        while (PyDict_Next(value, &wpos, &wsite, &weight)) {
            PyObject *found = site_of(r, wsite, &status);
            if (found == NULL)
                goto done;
            if (int_in(weight, 0, 1000) != OK)
                GIVE_UP(NOT_HERE);
            some |= PyObject_IsTrue(weight);
            PyObject *pair = PyTuple_Pack(2, PyTuple_GET_ITEM(found, 0), weight);
            if (pair == NULL || name_site(&h, PyTuple_GET_ITEM(found, 0)) < 0) {
                Py_XDECREF(pair);
                GIVE_UP(FAILED);
            }
            PyTuple_SET_ITEM(h.weights, i++, pair);
        }
        if (!some)
            GIVE_UP(NOT_HERE); /* a warning: every weight is 0 */
    }
    PyObject *check = Py_None; /* borrowed */
    if ((value = GET(obj, r->k_check)) != NULL) {
        if (!PyUnicode_CheckExact(value))
            GIVE_UP(NOT_HERE);
        int none = PyUnicode_Compare(value, r->none_text);
        if (none != 0) {
            PyObject *found = GET(r->profiles, value);
            if (found == NULL)
                GIVE_UP(PyErr_Occurred() ? FAILED : NOT_HERE);
            check = PyTuple_GET_ITEM(found, 0);
            h.check_used = Py_NewRef(value);
        }
    }
    value = GET(obj, r->k_endpoints);
    if (value == NULL && PyErr_Occurred())
        GIVE_UP(FAILED);
    Py_ssize_t count = value == NULL ? 0 : (PyList_CheckExact(value) ? PyList_GET_SIZE(value) : -1);
    if (count < 0 || count > MAX_ENDPOINTS)
        GIVE_UP(NOT_HERE);
    Py_ssize_t key_count = PyDict_GET_SIZE(obj);
    PyObject *endpoints = PyTuple_New(count);
    if (endpoints == NULL || (h.addresses = PySet_New(NULL)) == NULL || (h.have = PyDict_New()) == NULL)
        GIVE_UP(FAILED);
    h.endpoints_list = endpoints;
    int some_region = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PyList_GET_ITEM(value, i);
        if (!PyDict_CheckExact(item))
            GIVE_UP(NOT_HERE);
        Py_ssize_t size = PyDict_GET_SIZE(item);
        key_count += size;
        PyObject *given = GET(item, r->k_address);
        if (given == NULL || size > 2)
            GIVE_UP(PyErr_Occurred() ? FAILED : NOT_HERE);
        PyObject *found = r->here;
        if (size == 2) {
            PyObject *site = GET(item, r->k_site);
            if (site == NULL)
                GIVE_UP(PyErr_Occurred() ? FAILED : NOT_HERE);
            if ((found = site_of(r, site, &status)) == NULL)
                goto done;
        }
        PyObject *kind = NULL;
        PyObject *address = address_of(r, given, &kind);
        if (address == NULL)
            GIVE_UP(PyErr_Occurred() ? FAILED : NOT_HERE);
        Py_ssize_t before = PySet_GET_SIZE(h.addresses);
        if (PySet_Add(h.addresses, address) < 0) {
            Py_DECREF(address);
            GIVE_UP(FAILED);
        }
        if (PySet_GET_SIZE(h.addresses) == before) { /* an error: a duplicate address */
            Py_DECREF(address);
            GIVE_UP(NOT_HERE);
        }
        PyObject *site = PyTuple_GET_ITEM(found, 0), *locality = PyTuple_GET_ITEM(found, 1);
        if (PyDict_SetDefault(h.have, site, Py_None) == NULL) {
            Py_DECREF(address);
            GIVE_UP(FAILED);
        }
        if (locality_names == Py_True && !some_region) {
            PyObject *region = PyObject_GetAttr(locality, r->k_region);
            if (region == NULL) {
                Py_DECREF(address);
                GIVE_UP(FAILED);
            }
            some_region = PyObject_IsTrue(region);
            Py_DECREF(region);
        }
        PyObject *values[E_COUNT] = {
            [E_SERVICE] = Py_NewRef(name),  [E_ADDRESS] = address,          [E_KIND] = Py_NewRef(kind),
            [E_SITE] = Py_NewRef(site),     [E_LOCALITY] = Py_NewRef(locality), [E_WEIGHT] = Py_NewRef(r->one),
            [E_PRIORITY] = Py_NewRef(r->zero), [E_CHECK] = Py_NewRef(check), [E_PROBE] = Py_NewRef(Py_None),
            [E_ADMIN] = Py_NewRef(r->obey), [E_TAGS] = PyTuple_New(0),
            [E_CHECKS] = Py_NewRef(Py_None), [E_LOAD] = Py_NewRef(Py_None)};
        PyObject *endpoint = made(r->endpoint_type, r->endpoint_at, values, E_COUNT);
        if (endpoint == NULL)
            GIVE_UP(FAILED);
        PyTuple_SET_ITEM(endpoints, i, endpoint);
    }
    if (count == 0 && PySet_GET_SIZE(r->peer_sites) == 0)
        GIVE_UP(NOT_HERE); /* a warning: no endpoints */
    /* a warning: no endpoint has a site of failover_order or weights */
    for (pos = 0; h.named != NULL && PyDict_Next(h.named, &pos, &key, &value);) {
        int have = PyDict_Contains(h.have, key);
        int peer = have ? 1 : PySet_Contains(r->peer_sites, key);
        if (have < 0 || peer < 0)
            GIVE_UP(FAILED);
        if (!peer)
            GIVE_UP(NOT_HERE);
    }
    if (locality_names == Py_True && !some_region)
        GIVE_UP(NOT_HERE); /* a warning: no locality names are made */
    if (policy == r->geo && !r->can_locate)
        GIVE_UP(NOT_HERE); /* a warning: nothing locates clients */
    if (keys_obj != Py_None) {
        if (!PyLong_Check(keys_obj))
            GIVE_UP(NOT_HERE);
        Py_ssize_t keys = PyLong_AsSsize_t(keys_obj);
        if (keys == -1 && PyErr_Occurred())
            GIVE_UP(FAILED);
        if (keys != key_count + (h.weights != NULL ? PyTuple_GET_SIZE(h.weights) : 0))
            GIVE_UP(NOT_HERE); /* the text has more keys than the object: a key given twice */
    }
    PyObject *ttl = GET(obj, r->k_ttl);
    if (ttl != NULL && int_in(ttl, 0, r->ttl_max) != OK)
        GIVE_UP(NOT_HERE);
    PyObject *max_answers = GET(obj, r->k_max);
    if (max_answers != NULL && int_in(max_answers, 1, PY_SSIZE_T_MAX) != OK)
        GIVE_UP(NOT_HERE);
    if (PyErr_Occurred())
        GIVE_UP(FAILED);
    PyObject *min_healthy = NULL; /* a new reference, or NULL: not given */
    if ((value = GET(obj, r->k_min_healthy)) != NULL) {
        if ((min_healthy = PyObject_CallFunctionObjArgs(r->min_healthy, value, endpoints, NULL)) == NULL)
            GIVE_UP(not_here_or_failed(r));
        if (min_healthy == Py_None) { /* an error or a warning of the located validator */
            Py_DECREF(min_healthy);
            GIVE_UP(NOT_HERE);
        }
    } else if (PyErr_Occurred())
        GIVE_UP(FAILED);
    PyObject *zone_ttl = NULL;
    if (ttl == NULL) {
        if ((zone_ttl = PyObject_GetAttr(zone, r->k_ttl)) == NULL) {
            Py_XDECREF(min_healthy);
            GIVE_UP(FAILED);
        }
        ttl = zone_ttl;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(name), origin_len = PyUnicode_GET_LENGTH(origin);
    int root = origin_len == 1 && PyUnicode_READ_CHAR(origin, 0) == '.';
    PyObject *label = PyUnicode_Substring(name, 0, root ? n - 1 : n - origin_len - 1);
    if (label == NULL) {
        Py_XDECREF(zone_ttl);
        Py_XDECREF(min_healthy);
        GIVE_UP(FAILED);
    }
    PyObject *no_delay = PyFloat_FromDouble(0.0); /* failover_delay, failback_delay: not read here */
    if (no_delay == NULL) {
        Py_DECREF(label);
        Py_XDECREF(zone_ttl);
        Py_XDECREF(min_healthy);
        GIVE_UP(FAILED);
    }
    PyObject *values[S_COUNT] = {
        [S_NAME] = Py_NewRef(name),
        [S_ZONE] = Py_NewRef(origin),
        [S_LABEL] = label,
        [S_POLICY] = Py_NewRef(policy),
        [S_ORDER] = Py_NewRef(h.order != NULL ? h.order : r->empty),
        [S_WEIGHTS] = Py_NewRef(h.weights != NULL ? h.weights : Py_None),
        [S_TTL] = zone_ttl != NULL ? zone_ttl : Py_NewRef(ttl),
        [S_MAX] = Py_NewRef(max_answers != NULL ? max_answers : r->eight),
        [S_ALL_DOWN] = Py_NewRef(all_down),
        [S_FALLBACK] = Py_NewRef(r->empty),
        [S_LOCALITY_NAMES] = Py_NewRef(locality_names),
        [S_ENDPOINTS] = Py_NewRef(endpoints),
        [S_HTTPS] = Py_NewRef(Py_None),
        [S_SRV] = Py_NewRef(Py_None),
        [S_MIN_HEALTHY] = min_healthy != NULL ? min_healthy : Py_NewRef(Py_None),
        [S_BIAS] = Py_NewRef(r->empty),
        [S_SELECT] = Py_NewRef(r->rotate),
        [S_POOLS] = Py_NewRef(r->empty),
        [S_RULES] = Py_NewRef(r->empty),
        /* services with delays or a ttl mapping are read by the located validator (fast.py) */
        [S_FAILOVER_DELAY] = no_delay,
        [S_FAILBACK_DELAY] = Py_NewRef(no_delay),
        [S_TTL_RANGE] = Py_NewRef(Py_None),
        /* load feedback (load, weight_from, shed_load): read by the located validator (fast.py) */
        [S_WEIGHT_FROM] = Py_NewRef(r->weight_config),
        [S_SHED_LOAD] = Py_NewRef(Py_None)};
    PyObject *service = made(r->service_type, r->service_at, values, S_COUNT);
    if (service == NULL)
        GIVE_UP(FAILED);
    /* Every site named, in the located validator's order: failover_order, weights, then endpoints. */
    PyObject *sites = h.have;
    if (h.named != NULL) {
        if (PyDict_Update(h.named, h.have) < 0) {
            Py_DECREF(service);
            GIVE_UP(FAILED);
        }
        sites = h.named;
    }
    PyObject *named_sites = PySequence_Tuple(sites);
    if (named_sites == NULL) {
        Py_DECREF(service);
        GIVE_UP(FAILED);
    }
    /* The service is made: now its effects on the context. */
    pos = 0;
    while (PyDict_Next(sites, &pos, &key, &value))
        if (PyDict_SetDefault(r->sites_used, key, Py_None) == NULL)
            break;
    if (!PyErr_Occurred() && h.check_used != NULL)
        PySet_Add(r->checks_used, h.check_used);
    if (PyErr_Occurred()) {
        Py_DECREF(service);
        Py_DECREF(named_sites);
        GIVE_UP(FAILED);
    }
    result = PyTuple_Pack(2, service, named_sites);
    Py_DECREF(service);
    Py_DECREF(named_sites);
    if (result == NULL)
        status = FAILED;
done:
    Py_XDECREF(zone);
    Py_XDECREF(origin);
    Py_XDECREF(owners);
    held_clear(&h);
    if (status == FAILED)
        return NULL;
    if (status == NOT_HERE)
        Py_RETURN_NONE;
    return result;
}

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gslbd.config._cshape.Reader",
    .tp_doc = PyDoc_STR("Reader(spec)(obj, keys=None) -> (Service, sites named) | None: the common shape "
                        "of a service (config/fast.py)."),
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_traverse = (traverseproc)reader_traverse,
    .tp_clear = (inquiry)reader_clear,
    .tp_init = (initproc)reader_init,
    .tp_dealloc = (destructor)reader_dealloc,
    .tp_call = (ternaryfunc)reader_call,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "gslbd.config._cshape",
    "The common shape of a service, read in C (config/fast.py).", -1, NULL, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cshape(void) {
    if (PyType_Ready(&ReaderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Reader", (PyObject *)&ReaderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
