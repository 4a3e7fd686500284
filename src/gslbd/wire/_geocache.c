/* Included by _cfast.c after lpm_find: the ECS scope of a geo answer, and the GeoIP prefix cache.

   ECS scope (RFC 7871 7.2.1, policy/scope.py is the oracle): a geo entry's answer for a client placed by
   a topology network depends on the networks that decide the longest prefix match there (the network
   itself and those nested in it; outside every network, the outermost ones), exported per location id
   by wire/ctable.py from TopologyLocator.scope_networks. The scope is the shortest prefix of the client
   inside which membership of each of them is the same: a network holding the client needs its length,
   one that does not one bit past their common prefix. More than NESTED_LIMIT networks: the whole address.

   GeoIP prefix cache: a client no topology network places (and every client of a pools entry whose rules
   test the address or the ASN) is located by Python once (policy/scope.py client_class), which hands C
   the class (candidate set) and the scope of its answer (`Table.geo_fill`); C keeps them per entry and
   client prefix and answers later queries of that prefix itself. Keys: the entry's uid (unique for the
   process: a replaced entry's slots are never hit again) and the client's /24 (IPv4) or /56 (IPv6) when
   the scope is no longer than that (every address of that prefix gets the same answer), else the whole
   address. Two-way set associative, GEOCACHE_SLOTS slots per locator (pairs): a fill takes its slot when
   free or holding the same key, else replaces what the pair's other slot held (bounded, no sweep). A new locator (any full build of the table) starts empty. The slots are read and written
   under the cache's mutex (as the denial cache); the pointer is published once, atomically. */

#define GEOCACHE_SLOTS (1u << 16)
#define GEO_SHORT4 24 /* the prefix a short-scope entry is keyed on, as policy: hash's */
#define GEO_SHORT6 56

typedef struct {
    uint64_t hi, lo;
    uint32_t len;
} snet_t;

typedef struct {
    int32_t start; /* into nets; -1: too many networks, the whole address is the scope */
    uint32_t count;
} srange_t;

typedef struct {
    uint64_t uid; /* 0: empty */
    uint64_t hi, lo;
    uint8_t v6, plen, scope, pad;
    int32_t cls;
} gslot_t;

typedef struct geox {
    uint32_t nloc;
    srange_t *ranges; /* per location id (id 0: unused, see outside) */
    srange_t outside[2];
    snet_t *nets;
    pthread_mutex_t mu;
    gslot_t *slots; /* NULL until the first fill */
} geox_t;

/* Process-wide counters (metrics: gslbd_geo_cache_total): C answered from the cache, C asked Python, and
   Python filled a slot. */
static uint64_t geo_hits, geo_misses, geo_fills;

static uint64_t geo_uids; /* the last entry uid handed out */

/* The last miss of this thread's plan_answer: what Python fills (Table.geo_missed, under the GIL). */
static __thread struct {
    int set;
    uint32_t lpm;
    uint64_t uid;
    u128 ip;
    int v6;
    int32_t path[2]; /* where the geo entry missed lies below the node's entry (-1: not that deep): a
                        shed entry's level, then a pooled geo entry's class (its pool's own geo entry) */
} geo_last;

static void geox_free(geox_t *g) {
    if (g == NULL) return;
    PyMem_RawFree(g->ranges);
    PyMem_RawFree(g->nets);
    PyMem_RawFree(g->slots);
    pthread_mutex_destroy(&g->mu);
    PyMem_RawFree(g);
}

static inline uint32_t u128_bitlen(u128 x) {
    uint64_t hi = (uint64_t)(x >> 64), lo = (uint64_t)x;
    if (hi) return 128u - (uint32_t)__builtin_clzll(hi);
    return lo ? 64u - (uint32_t)__builtin_clzll(lo) : 0u;
}

/* The scope of a client at location `loc` (0: no topology network holds it), before the cap at the
   query's source prefix: covering_bits in policy/locate.py. */
static uint32_t geo_scope(const lpm_t *l, uint32_t loc, u128 ip, int v6) {
    const uint32_t bits = v6 ? 128 : 32;
    const geox_t *g = l->gx;
    if (g == NULL) return bits;
    const srange_t *r = loc ? (loc < g->nloc ? &g->ranges[loc] : NULL) : &g->outside[v6 ? 1 : 0];
    if (r == NULL || r->start < 0) return bits;
    uint32_t best = 0;
    for (uint32_t k = 0; k < r->count; k++) {
        const snet_t *s = &g->nets[(uint32_t)r->start + k];
        u128 net = (u128)s->hi << 64 | s->lo;
        uint32_t drop = bits - s->len;
        u128 diff = drop >= 128 ? 0 : (ip ^ net) >> drop;
        uint32_t need = diff == 0 ? s->len : s->len - u128_bitlen(diff) + 1;
        if (need > best) best = need;
    }
    return best;
}

static inline uint32_t geo_slot_of(uint64_t uid, uint64_t hi, uint64_t lo, uint32_t plen) {
    return (uint32_t)mix64(uid ^ mix64(hi ^ mix64(lo + plen))) & (GEOCACHE_SLOTS - 1);
}

static inline u128 geo_masked(u128 ip, uint32_t bits, uint32_t plen) {
    uint32_t drop = bits - plen;
    return drop >= 128 ? 0 : (ip >> drop) << drop;
}

/* The cached class of (uid, client): >= 0 with *scope set, -1 on a miss (recorded for Python, with the
   entry's `path` below the node's entry). A hit is counted when `count` is set (shed_scope looks the
   levels up before the chosen level's lookup counts it). */
static int32_t geo_cached(const lpm_t *l, uint32_t which, uint64_t uid, u128 ip, int v6, const int32_t path[2],
                          int count, uint32_t *scope) {
    geox_t *g = l->gx;
    gslot_t *slots = g != NULL ? __atomic_load_n(&g->slots, __ATOMIC_ACQUIRE) : NULL;
    if (slots != NULL) {
        const uint32_t bits = v6 ? 128 : 32;
        const uint32_t lens[2] = {v6 ? GEO_SHORT6 : GEO_SHORT4, bits};
        int32_t found = -1;
        pthread_mutex_lock(&g->mu);
        for (int k = 0; k < 2 && found < 0; k++) {
            u128 key = geo_masked(ip, bits, lens[k]);
            uint64_t hi = (uint64_t)(key >> 64), lo = (uint64_t)key;
            uint32_t at = geo_slot_of(uid, hi, lo, lens[k]);
            for (uint32_t way = 0; way < 2 && found < 0; way++) { /* two ways: the slot and its pair */
                const gslot_t *s = &slots[at ^ way];
                if (s->uid == uid && s->hi == hi && s->lo == lo && s->plen == lens[k] && s->v6 == (uint8_t)v6) {
                    found = s->cls;
                    *scope = s->scope;
                }
            }
        }
        pthread_mutex_unlock(&g->mu);
        if (found >= 0) {
            if (count) ATOMIC_ADD(&geo_hits, 1);
            return found;
        }
    }
    ATOMIC_ADD(&geo_misses, 1);
    geo_last.set = 1;
    geo_last.lpm = which;
    geo_last.uid = uid;
    geo_last.ip = ip;
    geo_last.v6 = v6;
    geo_last.path[0] = path[0];
    geo_last.path[1] = path[1];
    return -1;
}

/* Keeps Python's class and scope for (uid, client); under the GIL. 0, or -1 with no memory. */
static int geo_fill(lpm_t *l, uint64_t uid, u128 ip, int v6, int32_t cls, uint32_t scope) {
    geox_t *g = l->gx;
    if (g == NULL || uid == 0 || cls < 0) return 0;
    gslot_t *slots = __atomic_load_n(&g->slots, __ATOMIC_ACQUIRE);
    if (slots == NULL) {
        slots = PyMem_RawCalloc(GEOCACHE_SLOTS, sizeof(gslot_t));
        if (slots == NULL) return -1;
        __atomic_store_n(&g->slots, slots, __ATOMIC_RELEASE);
    }
    const uint32_t bits = v6 ? 128 : 32;
    if (scope > bits) scope = bits;
    uint32_t plen = scope <= (v6 ? GEO_SHORT6 : GEO_SHORT4) ? (v6 ? GEO_SHORT6 : GEO_SHORT4) : bits;
    u128 key = geo_masked(ip, bits, plen);
    uint64_t hi = (uint64_t)(key >> 64), lo = (uint64_t)key;
    pthread_mutex_lock(&g->mu);
    uint32_t at = geo_slot_of(uid, hi, lo, plen);
    gslot_t *s = &slots[at]; /* this way when free or the same key, else the pair (whatever it held) */
    if (s->uid != 0 && !(s->uid == uid && s->hi == hi && s->lo == lo && s->plen == plen && s->v6 == (uint8_t)v6))
        s = &slots[at ^ 1];
    s->uid = uid;
    s->hi = hi;
    s->lo = lo;
    s->plen = (uint8_t)plen;
    s->v6 = (uint8_t)v6;
    s->scope = (uint8_t)scope;
    s->cls = cls;
    pthread_mutex_unlock(&g->mu);
    ATOMIC_ADD(&geo_fills, 1);
    return 0;
}

/* ------------------------------------------------------------------------------------------------ */
/* Building: the third part of a locator spec (wire/ctable.py _Locators.add):
   (outside v4, outside v6, per location id) with each None (too many networks) or ((network, length), ...) */

static PyObject *item(PyObject *seq, Py_ssize_t i, Py_ssize_t size, const char *what);
static int as_u128(PyObject *obj, u128 *out);

static Py_ssize_t geox_count(PyObject *nets) {
    if (nets == Py_None) return 0;
    if (!PyTuple_Check(nets)) {
        PyErr_SetString(PyExc_TypeError, "scope networks must be a tuple or None");
        return -1;
    }
    return PyTuple_GET_SIZE(nets);
}

static int geox_range(PyObject *nets, geox_t *g, uint32_t *used, srange_t *r) {
    if (nets == Py_None) {
        r->start = -1;
        r->count = 0;
        return 0;
    }
    r->start = (int32_t)*used;
    r->count = (uint32_t)PyTuple_GET_SIZE(nets);
    for (uint32_t k = 0; k < r->count; k++) {
        PyObject *pair = PyTuple_GET_ITEM(nets, k);
        PyObject *addr = item(pair, 0, 2, "scope network");
        u128 value;
        if (addr == NULL || as_u128(addr, &value) < 0) return -1;
        long len = PyLong_AsLong(PyTuple_GET_ITEM(pair, 1));
        if (PyErr_Occurred()) return -1;
        if (len < 0 || len > 128) {
            PyErr_SetString(PyExc_ValueError, "a prefix length must be 0..128");
            return -1;
        }
        snet_t *s = &g->nets[(*used)++];
        s->hi = (uint64_t)(value >> 64);
        s->lo = (uint64_t)value;
        s->len = (uint32_t)len;
    }
    return 0;
}

static int geox_build(PyObject *spec, lpm_t *l) {
    PyObject *per = item(spec, 2, 3, "locator scopes");
    if (per == NULL) return -1;
    if (!PyTuple_Check(per)) {
        PyErr_SetString(PyExc_TypeError, "per-location scopes must be a tuple");
        return -1;
    }
    Py_ssize_t nloc = PyTuple_GET_SIZE(per), total = 0;
    for (int f = 0; f < 2; f++) {
        Py_ssize_t n = geox_count(PyTuple_GET_ITEM(spec, f));
        if (n < 0) return -1;
        total += n;
    }
    for (Py_ssize_t i = 0; i < nloc; i++) {
        Py_ssize_t n = geox_count(PyTuple_GET_ITEM(per, i));
        if (n < 0) return -1;
        total += n;
    }
    geox_t *g = PyMem_RawCalloc(1, sizeof(geox_t));
    if (g == NULL) return -1;
    pthread_mutex_init(&g->mu, NULL);
    l->gx = g;
    g->nloc = (uint32_t)nloc;
    g->ranges = PyMem_RawCalloc(nloc ? (size_t)nloc : 1, sizeof(srange_t));
    g->nets = PyMem_RawCalloc(total ? (size_t)total : 1, sizeof(snet_t));
    if (g->ranges == NULL || g->nets == NULL) return -1;
    uint32_t used = 0;
    for (int f = 0; f < 2; f++)
        if (geox_range(PyTuple_GET_ITEM(spec, f), g, &used, &g->outside[f]) < 0) return -1;
    for (Py_ssize_t i = 0; i < nloc; i++)
        if (geox_range(PyTuple_GET_ITEM(per, i), g, &used, &g->ranges[i]) < 0) return -1;
    return 0;
}
