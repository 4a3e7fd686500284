/*
 * gslbd.wire._cfast: the query path in C. A table of precompiled answers (built by wire/ctable.py from
 * the Python AnswerTable), an answer function held byte for byte to the slow path (the oracle), and a UDP
 * loop (recvmmsg -> answer -> sendmmsg) that runs without the GIL and calls Python only for what the table
 * cannot answer.
 *
 * Memory: everything a query reads is plain C memory (no Python object), so the UDP threads never need
 * the GIL to answer. A table (ctab) holds a sharded index of nodes (one per name) and a base (zones,
 * settings, locators); shards, nodes, entries, header blocks and bases are reference counted
 * (atomically) so that an updated table shares every unchanged shard and node with its predecessor
 * (per-name replace that copies only the shards it touches, not a full rebuild), and the fixed entries
 * (NODATA, the SOA...) are held once per build, not per name. The current table of a responder sits
 * in a Slot: one pointer, replaced under the Slot's mutex; a UDP loop takes a reference per batch.
 *
 * Counters: a node's entries count their answers (atomic, several threads); when a node is freed, its
 * counts move to the table lineage's totals (shared by every table built with `inherit`), so the
 * per-policy answer counts survive swaps exactly. A UdpLoop's own counters are written by its thread
 * only and read with relaxed atomic loads.
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE
#include <Python.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define UNUSED __attribute__((unused))

#define BATCH 64
#define BUFSIZE 4096 /* receive buffer per datagram; a longer datagram is counted and gets FORMERR */
#define OUTSIZE 4096 /* send buffer per datagram; a longer C answer gets a buffer of its own */
#define MAX_POLICIES 32
#define NAME_MAX_END (12 + 255)

enum { K_NONE = 0, K_FIXED, K_ROTATE, K_WEIGHTED, K_SHUFFLE, K_GEO, K_HASH, K_WHASH, K_PYTHON, K_SHED };
/* FB_NEG: the exchange hook is set; a negative answer (NXDOMAIN, REFUSED, NODATA) to a query that names an
   exchange zone ("_gslbd-exchange-" after the header) is the hook's, every other one stays in C. */
enum { FB_ALL = 8, FB_NEG = 16, FB_MISS = 64 };
enum { S_SIGNER = 1 << 16 }; /* in the flags: the table has a signer (RFC 9824 CO changes signed answers) */
enum { R_FALLBACK = -1 };

typedef unsigned __int128 u128;

#define ATOMIC_ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#define ATOMIC_LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)

/* ------------------------------------------------------------------------------------------------ */
/* Data */

/* The header bytes of a variant (bytes 2..12 of the message, indexed by rd | has_opt << 1, and the same
   with TC set): one block per distinct content within a build or update, shared by every variant with
   those bytes (most answers of a table have one of a few shapes). */
typedef struct {
    uint64_t refs;
    uint8_t heads[4][10];
    uint8_t tc[4][10];
} hblock_t;

typedef struct {
    const hblock_t *hb;
    uint32_t off;    /* where its bytes start in the entry's block: the answer, authority and additional */
    uint32_t len;    /* records, then the EDNS options the variant adds after ECS (an Extended DNS Error) */
    uint32_t optlen;
} variant_t;

typedef struct {
    uint64_t *keys; /* pairs (hi, lo) */
    uint32_t *locs;
    uint32_t mask;
    uint32_t shift;
} level_t;

struct geox;

typedef struct {
    uint32_t nlev[2]; /* v4, v6 */
    level_t *lev[2];
    struct geox *gx; /* ECS scopes per location and the GeoIP prefix cache (_geocache.c) */
} lpm_t;

/* An entry: one allocation holding the header, the variants, the parameters' arrays and the variants'
   bytes. A fixed entry (kind none: one variant, no counter read) is shared by every node of a build or
   update that holds the same Python entry (NODATA, the SOA, REFUSED of zone transfers...); an entry with a
   plan belongs to one node (its counter is that name's rotation `seq`). */
typedef struct {
    uint32_t refs;
    uint8_t kind;
    uint8_t locdep;
    uint8_t neg; /* some variant is NXDOMAIN or REFUSED (FB_NEG: left to Python when the query names an exchange zone) */
    uint8_t nx;  /* some variant is NXDOMAIN (all_down: nxdomain; a CO query's signed answer is Python's) */
    uint64_t counter; /* answers (the policy's query counter, `seq`) */
    uint16_t policy;
    uint32_t nvar;
    uint32_t size; /* bytes of the block */
    union {        /* the arrays are in the block, after the variants: entry_params() */
        struct {   /* weighted: the cumulative weights (doubles) */
            double total;
            uint32_t nbounds;
        };
        uint32_t count; /* shuffle */
        uint32_t nids;  /* hash: the endpoint ids (uint64); whash: then their weights (doubles) */
        uint32_t nlev;  /* shed: the level entries, then their bounds (_shed.c) */
        struct {        /* geo: starts and counts (nclass each), class_of (nloc) */
            const lpm_t *lpm;
            uint32_t nclass, nloc;
            uint64_t uid; /* the key of its clients in the GeoIP prefix cache (_geocache.c) */
            uint32_t pooled_n; /* pools whose plans draw: then one entry per class (_pools.c), else 0 */
        };
    };
    variant_t var[];
} entry_t;

static inline uint64_t fnv_more(uint64_t h, const void *data, size_t n) {
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

static inline void *entry_params(const entry_t *e) {
    return (uint8_t *)(uintptr_t)e + align8(sizeof(entry_t) + (size_t)e->nvar * sizeof(variant_t));
}
static inline const uint8_t *variant_bytes(const entry_t *e, uint32_t i) {
    return (const uint8_t *)e + e->var[i].off;
}

typedef struct {
    uint16_t qtype;
    int16_t entry; /* -1: REFUSED */
} tmap_t;

typedef struct {
    uint64_t refs;
    uint64_t policy[MAX_POLICIES];
} totals_t;

/* A name: one allocation holding the header, its distinct entries (references), its type map and its
   key. Nodes are shared by the tables of one lineage (same totals): whoever frees a node adds the counts
   of its counted entries to the totals it is given. */
/* A type map (qtype -> entry index), shared by content within a build or update: most names of a table
   have one of a few shapes. */
typedef struct {
    uint32_t refs;
    uint32_t n;
    tmap_t map[];
} tblock_t;

typedef struct {
    uint64_t hash;
    uint32_t refs;
    uint32_t size; /* bytes of the block */
    const tblock_t *types;
    uint16_t nent;
    int16_t dflt;
    uint8_t keylen;
    entry_t *ent[]; /* then the key */
} node_t;

static inline const uint8_t *node_key(const node_t *n) { return (const uint8_t *)(n->ent + n->nent); }

typedef struct {
    uint32_t len;  /* without the root byte */
    uint8_t *raw;  /* the labels as written */
    uint8_t *low;  /* the same in lower case, followed by the root byte */
} zname_t;

/* The denial budget of a signed zone as C sees it (wire/dnssec.py DenialBudget): the wall time (seconds,
   as a double's bits) before which no fresh compact denial may be signed. Written by Python, read here. */
typedef struct {
    uint64_t refs;
    uint64_t until; /* bits of a double */
} gate_t;

/* The compact denials signed before (wire/dnssec.py Signer.denial_wire), by lower-case query name: the
   NSEC and RRSIG records that follow the SOA. Filled and cleared by Python; read under the mutex. */
typedef struct {
    uint64_t hash;
    uint32_t keylen, reclen;
    uint8_t data[]; /* key, then records */
} dent_t;

typedef struct {
    uint64_t refs;
    pthread_mutex_t mu;
    uint32_t mask, count;
    uint32_t live; /* `count`, stored atomically after each change: read without the mutex */
    dent_t **slots;
    uint64_t *filter; /* FILTER_BITS bits, one set per name held (by its hash): most misses skip the mutex */
} dcache_t;

#define FILTER_BITS (1u << 20)
static inline uint32_t filter_bit(uint64_t h) { return (uint32_t)(h >> 40) & (FILTER_BITS - 1); }

typedef struct {
    uint32_t n;    /* parts, joined by a pointer to the origin */
    uint32_t *off; /* n + 1 offsets into blob */
    uint8_t *blob;
} link_t;

#define DENIAL_PIECES 48
#define DENIAL_SIGS 5 /* pieces: 2 per SOA record, 2 per link part: 8 + 6 * signatures */

/* A signed zone's denial of nonexistent names (wire/compile.py SignedZone, wire/denial.py Denier). */
typedef struct {
    uint8_t compact[4][10], compact_tc[4][10]; /* RFC 9824 compact denial (a cached one) */
    uint8_t co_compact[4][10], co_compact_tc[4][10]; /* the same with rcode NXDOMAIN (CO, RFC 9824 4) */
    uint8_t nx1[4][10], nx2[4][10], nx_tc[4][10]; /* NXDOMAIN from the chain: one link, two, truncated */
    uint32_t ntails;
    link_t tails; /* the SOA record and its RRSIGs, each after a pointer to the origin */
    uint32_t nlinks;
    uint8_t **flat; /* the chain's keys in canonical order, as wire/denial.py NsecChain.flat */
    uint32_t *flat_len;
    link_t *links;
    gate_t *gate;
    dcache_t *cache;
} szone_t;

typedef struct {
    uint64_t hash;
    uint32_t keylen;
    uint8_t *key;
    uint8_t heads[4][10];
    uint8_t tc[4][10];
    uint8_t rr_head[8]; /* SOA type, class, TTL */
    zname_t mname, rname;
    uint8_t numbers[20];
    int python; /* the NXDOMAIN answer is not known here: ask Python */
    int signed_; /* a signed zone: a DO query's NXDOMAIN comes from `sz`, or Python when it is NULL */
    szone_t *sz;
} zone_t;

typedef struct {
    uint64_t refs;
    uint32_t max_udp;
    int ecs;
    uint32_t flags;
    uint8_t opt_plain[2][11];
    uint8_t opt_prefix[2][9];
    entry_t *refused;  /* names outside every zone (one variant) */
    entry_t *transfer; /* AXFR and IXFR */
    uint32_t nzones, zmask;
    zone_t *zones;
    int32_t *zindex;
    uint32_t nlpm;
    lpm_t *lpms;
    uint32_t nsidlen; /* the NSID option (code 3, length, identity) a query with NSID gets; 0: none */
    uint8_t *nsid;
} base_t;

/* One shard of a table's name index: open addressing over node pointers (NULL: empty), at most half
   full. Shards are immutable once a table holds them and shared (reference counted) by the tables of a
   lineage: an update copies only the shards whose names it changes. */
typedef struct {
    uint64_t refs;
    uint32_t count, mask, nwild;
    node_t *slot[];
} shard_t;

#define SHARD_NODES 128 /* about this many names per shard (a table of n names has ~n/128 shards) */
#define SHARD_BITS_MAX 16

typedef struct ctab {
    uint64_t refs;
    base_t *base;
    totals_t *totals;
    uint32_t nnodes;
    uint32_t bits;     /* 1 << bits shards, chosen by the top bits of a name's hash */
    shard_t **shards;
    uint32_t nwild; /* nodes of wildcard names (\x01* + parent): their parents' NXDOMAIN is Python's */
    struct ctab *sig; /* the signed nodes (DO queries of signed zones), same base and totals; or NULL */
    uint32_t flags;   /* what this table leaves to Python (FB_*, S_SIGNER): the base's, or set by update */
    struct guard *guard; /* cookies and RRL (_guard.c), applied to every answer; or NULL */
} ctab_t;

struct guard;
static void guard_decref(struct guard *g);

/* ------------------------------------------------------------------------------------------------ */
/* Hashing and small helpers */

static inline uint64_t mix64(uint64_t x) {
    uint64_t z = x + 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static inline uint64_t fnv(const uint8_t *p, uint32_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (uint32_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

static inline uint8_t lower(uint8_t c) { return (c >= 'A' && c <= 'Z') ? (uint8_t)(c + 32) : c; }

static uint32_t table_size(uint32_t n) {
    uint32_t size = 8;
    while (size < 2 * n + 2) size <<= 1;
    return size;
}

static inline uint64_t next_rand(uint64_t *state) {
    *state += 0x9E3779B97F4A7C15ULL;
    return mix64(*state - 0x9E3779B97F4A7C15ULL);
}

static inline double draw_of(uint64_t *state) { return (double)(next_rand(state) >> 11) * 0x1.0p-53; }

/* ------------------------------------------------------------------------------------------------ */
/* Freeing */

static void hblock_decref(const hblock_t *h) {
    hblock_t *m = (hblock_t *)(uintptr_t)h;
    if (m != NULL && __atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL) == 0) PyMem_RawFree(m);
}

static inline int counted(const entry_t *e) { return e->kind != K_NONE && e->kind != K_PYTHON; }

/* Releases one reference to an entry; the last one adds its count to `totals` (NULL: an entry that never
   served) and frees it. */
static void shed_release(entry_t *e, totals_t *totals); /* _shed.c */
static void pool_release(entry_t *e, totals_t *totals); /* _pools.c */
static void entry_decref(entry_t *e, totals_t *totals) {
    if (e == NULL || __atomic_sub_fetch(&e->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    if (e->kind == K_SHED) shed_release(e, totals);
    if (e->kind == K_GEO && e->pooled_n) pool_release(e, totals);
    if (counted(e) && totals != NULL) ATOMIC_ADD(&totals->policy[e->policy], ATOMIC_LOAD(&e->counter));
    for (uint32_t i = 0; i < e->nvar; i++) hblock_decref(e->var[i].hb);
    PyMem_RawFree(e);
}

static void totals_decref(totals_t *t) {
    if (t != NULL && __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) == 0) PyMem_RawFree(t);
}

static void tblock_decref(const tblock_t *t) {
    tblock_t *m = (tblock_t *)(uintptr_t)t;
    if (m != NULL && __atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL) == 0) PyMem_RawFree(m);
}

static void node_decref(node_t *n, totals_t *totals) {
    if (n == NULL || __atomic_sub_fetch(&n->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    tblock_decref(n->types);
    for (uint32_t i = 0; i < n->nent; i++) entry_decref(n->ent[i], totals);
    PyMem_RawFree(n);
}

static void shard_decref(shard_t *s, totals_t *totals) {
    if (s == NULL || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    for (uint32_t i = 0; i <= s->mask; i++) node_decref(s->slot[i], totals);
    PyMem_RawFree(s);
}

static void geox_free(struct geox *g);

static void lpm_clear(lpm_t *l) {
    geox_free(l->gx);
    l->gx = NULL;
    for (int f = 0; f < 2; f++) {
        for (uint32_t i = 0; i < l->nlev[f]; i++) {
            PyMem_RawFree(l->lev[f][i].keys);
            PyMem_RawFree(l->lev[f][i].locs);
        }
        PyMem_RawFree(l->lev[f]);
    }
}

static void gate_decref(gate_t *g) {
    if (g != NULL && __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) == 0) PyMem_RawFree(g);
}

static void dcache_empty(dcache_t *c) {
    for (uint32_t i = 0; i <= c->mask; i++) {
        PyMem_RawFree(c->slots[i]);
        c->slots[i] = NULL;
    }
    c->count = 0;
    for (uint32_t i = 0; i < FILTER_BITS / 64; i++) __atomic_store_n(&c->filter[i], 0, __ATOMIC_RELAXED);
}

static void dcache_decref(dcache_t *c) {
    if (c == NULL || __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    dcache_empty(c);
    pthread_mutex_destroy(&c->mu);
    PyMem_RawFree(c->filter);
    PyMem_RawFree(c->slots);
    PyMem_RawFree(c);
}

static void link_clear(link_t *l) {
    PyMem_RawFree(l->off);
    PyMem_RawFree(l->blob);
}

static void szone_free(szone_t *z) {
    if (z == NULL) return;
    link_clear(&z->tails);
    for (uint32_t i = 0; i < z->nlinks; i++) {
        if (z->flat != NULL) PyMem_RawFree(z->flat[i]);
        if (z->links != NULL) link_clear(&z->links[i]);
    }
    PyMem_RawFree(z->flat);
    PyMem_RawFree(z->flat_len);
    PyMem_RawFree(z->links);
    gate_decref(z->gate);
    dcache_decref(z->cache);
    PyMem_RawFree(z);
}

static void base_decref(base_t *b) {
    if (b == NULL || __atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    for (uint32_t i = 0; i < b->nzones; i++) {
        PyMem_RawFree(b->zones[i].key);
        PyMem_RawFree(b->zones[i].mname.raw);
        PyMem_RawFree(b->zones[i].mname.low);
        PyMem_RawFree(b->zones[i].rname.raw);
        PyMem_RawFree(b->zones[i].rname.low);
        szone_free(b->zones[i].sz);
    }
    entry_decref(b->refused, NULL);
    entry_decref(b->transfer, NULL);
    PyMem_RawFree(b->zones);
    PyMem_RawFree(b->zindex);
    for (uint32_t i = 0; i < b->nlpm; i++) lpm_clear(&b->lpms[i]);
    PyMem_RawFree(b->lpms);
    PyMem_RawFree(b->nsid);
    PyMem_RawFree(b);
}

static void ctab_decref(ctab_t *t) {
    if (t == NULL || __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    /* Shards first: their nodes add their counts to the totals and may point into the base's locators. */
    for (uint32_t i = 0; i < (1u << t->bits); i++) shard_decref(t->shards[i], t->totals);
    PyMem_RawFree(t->shards);
    base_decref(t->base);
    totals_decref(t->totals);
    ctab_decref(t->sig);
    guard_decref(t->guard);
    PyMem_RawFree(t);
}

static inline void ctab_incref(ctab_t *t) { __atomic_add_fetch(&t->refs, 1, __ATOMIC_RELAXED); }

/* ------------------------------------------------------------------------------------------------ */
/* Lookups */

static inline uint32_t shard_of(uint64_t h, uint32_t bits) { return bits ? (uint32_t)(h >> (64 - bits)) : 0; }

static node_t *find_node(const ctab_t *t, const uint8_t *key, uint32_t len, uint64_t h) {
    const shard_t *s = t->shards[shard_of(h, t->bits)];
    for (uint32_t i = (uint32_t)h & s->mask;; i = (i + 1) & s->mask) {
        node_t *n = s->slot[i];
        if (n == NULL) return NULL;
        if (n->hash == h && n->keylen == len && memcmp(node_key(n), key, len) == 0) return n;
    }
}

static zone_t *find_zone(const base_t *b, const uint8_t *key, uint32_t len) {
    uint64_t h = fnv(key, len);
    uint32_t i = (uint32_t)h & b->zmask;
    for (;;) {
        int32_t at = b->zindex[i];
        if (at < 0) return NULL;
        zone_t *z = &b->zones[at];
        if (z->hash == h && z->keylen == len && memcmp(z->key, key, len) == 0) return z;
        i = (i + 1) & b->zmask;
    }
}

static inline uint32_t level_slot(uint64_t hi, uint64_t lo, uint32_t mask) {
    return (uint32_t)mix64(hi ^ mix64(lo)) & mask;
}

/* The location id of an address: the longest topology prefix that holds it, 0 when none. */
static uint32_t lpm_find(const lpm_t *l, u128 ip, int v6) {
    for (uint32_t k = 0; k < l->nlev[v6]; k++) {
        const level_t *lv = &l->lev[v6][k];
        u128 key = lv->shift >= 128 ? 0 : ip >> lv->shift;
        uint64_t hi = (uint64_t)(key >> 64), lo = (uint64_t)key;
        uint32_t i = level_slot(hi, lo, lv->mask);
        for (;;) {
            uint32_t loc = lv->locs[i];
            if (loc == 0) break;
            if (lv->keys[2 * i] == hi && lv->keys[2 * i + 1] == lo) return loc;
            i = (i + 1) & lv->mask;
        }
    }
    return 0;
}

#include "_geocache.c"

/* Whether the zone's denial budget is spent now (no fresh compact denial may be signed before `until`). */
static int gate_closed(const gate_t *g) {
    uint64_t bits = __atomic_load_n(&g->until, __ATOMIC_ACQUIRE);
    double until;
    memcpy(&until, &bits, sizeof until);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 < until;
}

/* The cached compact denial of `key` copied into `out` (at most `cap` bytes): its length, 0 when there
   is none (or it is longer than `cap`). */
static uint32_t dcache_get(dcache_t *c, const uint8_t *key, uint32_t len, uint64_t h, uint8_t *out,
                           uint32_t cap) {
    uint32_t found = 0, bit = filter_bit(h);
    if (!((ATOMIC_LOAD(&c->filter[bit >> 6]) >> (bit & 63)) & 1)) return 0;
    pthread_mutex_lock(&c->mu);
    if (c->count) {
        uint32_t i = (uint32_t)h & c->mask;
        for (;;) {
            const dent_t *e = c->slots[i];
            if (e == NULL) break;
            if (e->hash == h && e->keylen == len && memcmp(e->data, key, len) == 0) {
                if (e->reclen <= cap) {
                    memcpy(out, e->data + len, e->reclen);
                    found = e->reclen;
                }
                break;
            }
            i = (i + 1) & c->mask;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return found;
}

/* bytes comparison as Python's: memcmp over the common length, then the shorter first */
static inline int bytes_cmp(const uint8_t *a, uint32_t al, const uint8_t *b, uint32_t bl) {
    int c = memcmp(a, b, al < bl ? al : bl);
    if (c) return c;
    return al < bl ? -1 : al > bl;
}

static inline int starts_with(const uint8_t *a, uint32_t al, const uint8_t *p, uint32_t pl) {
    return al >= pl && memcmp(a, p, pl) == 0;
}

/* bisect_right(flat, key) - 1 */
static int64_t chain_floor(const szone_t *z, const uint8_t *key, uint32_t len) {
    uint32_t lo = 0, hi = z->nlinks;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (bytes_cmp(key, len, z->flat[mid], z->flat_len[mid]) < 0) hi = mid;
        else lo = mid + 1;
    }
    return (int64_t)lo - 1;
}

/* wire/denial.py NsecChain.cover: the links that deny the nonexistent `qname` (lower-case wire form of
   `qlen` bytes, the zone's origin its last `olen`), the one covering it (*i) and the one covering the
   wildcard at its closest encloser (*j). 0 when found; -1 when the name exists (in the chain, or as an
   empty non-terminal), that wildcard does, or a label holds a zero byte (Python decides). */
static int chain_cover(const szone_t *z, const uint8_t *qname, uint32_t qlen, uint32_t olen, uint32_t *i,
                       uint32_t *j) {
    uint32_t end = qlen - olen, starts[130], n = 0, pos = 0;
    uint8_t flat[NAME_MAX_END + 4];
    if (end == 0 || z->nlinks == 0) return -1;
    while (pos < end) {
        if (n >= 128) return -1;
        starts[n++] = pos;
        pos += qname[pos] + 1u;
    }
    if (pos != end || memchr(qname, 0, end) != NULL) return -1; /* length bytes are never 0 */
    uint32_t flen = 0;
    for (uint32_t k = n; k-- > 0;) {
        uint32_t size = qname[starts[k]];
        memcpy(flat + flen, qname + starts[k] + 1, size);
        flen += size;
        flat[flen++] = 0;
    }
    int64_t at = chain_floor(z, flat, flen);
    if (at < 0) return -1;
    const uint8_t *before = z->flat[at];
    uint32_t blen = z->flat_len[at];
    if (blen == flen && memcmp(before, flat, flen) == 0) return -1;
    const uint8_t *after = (uint32_t)at + 1 < z->nlinks ? z->flat[at + 1] : (const uint8_t *)"";
    uint32_t alen = (uint32_t)at + 1 < z->nlinks ? z->flat_len[at + 1] : 0;
    if (starts_with(after, alen, flat, flen)) return -1; /* an empty non-terminal: it exists */
    int64_t cut = (int64_t)flen - qname[0] - 1;
    while (cut > 0) {
        if (starts_with(before, blen, flat, (uint32_t)cut) || starts_with(after, alen, flat, (uint32_t)cut))
            break;
        int64_t k = cut - 2; /* flat.rfind(b"\0", 0, cut - 1) + 1 */
        while (k >= 0 && flat[k] != 0) k--;
        cut = k + 1;
    }
    flat[cut] = '*';
    flat[cut + 1] = 0;
    int64_t w = chain_floor(z, flat, (uint32_t)cut + 2);
    if (w < 0) return -1;
    if (z->flat_len[w] == (uint32_t)cut + 2 && memcmp(z->flat[w], flat, (uint32_t)cut + 2) == 0) return -1;
    *i = (uint32_t)at;
    *j = (uint32_t)w;
    return 0;
}

/* ------------------------------------------------------------------------------------------------ */
/* The answer: a plan of pieces to concatenate (no copy until the caller writes it). */

#define DENIAL_RECORDS 1024 /* the longest cached compact denial C answers */

typedef struct {
    const uint8_t *p[16 + DENIAL_PIECES];
    uint32_t l[16 + DENIAL_PIECES];
    int n;
    uint32_t total;
    uint8_t optlen[2];
    uint8_t scope;
    uint8_t ptr[2]; /* a compression pointer to a signed zone's origin in the question */
    uint8_t opt[11]; /* our OPT record with CO echoed */
    uint8_t head[10]; /* the header tail with the query's CD bit copied (RFC 4035 3.1.6) */
    uint8_t soa[2 + 10 + 256 + 256 + 20]; /* an NXDOMAIN's SOA record, compressed for this query */
    uint8_t den[DENIAL_RECORDS]; /* a cached compact denial, copied */
} plan_t;

static inline void piece(plan_t *o, const uint8_t *p, uint32_t l) {
    o->p[o->n] = p;
    o->l[o->n] = l;
    o->n++;
    o->total += l;
}

typedef struct {
    int64_t seq;      /* >= 0: use instead of the entry's counter (tests) */
    double draw;      /* >= 0: use instead of the PRNG (tests) */
    uint64_t *rng;    /* the caller's PRNG state */
} choice_t;

typedef struct {
    int32_t cls;    /* the client's class in a geo entry */
    int32_t sub;    /* a pooled entry whose class's pool plan is geo: the class in that entry, else -1 */
    uint32_t scope; /* the ECS scope of the placement (policy/scope.py), the pool plan's own included */
} placed_t;

static entry_t *shed_level(entry_t *e, const choice_t *ch, choice_t *sub, int32_t *index); /* _shed.c */
static int64_t shed_scope(const base_t *b, const entry_t *e, u128 ip, int v6);             /* _shed.c */
static inline entry_t **pool_inners(const entry_t *e);                                    /* _pools.c */
static int geo_locate(const base_t *b, const entry_t *e, uint32_t loc, u128 ip, int v6, int32_t level, int count,
                      placed_t *out); /* _pools.c */

typedef struct {
    const uint8_t *p; /* lower-case wire form of a name, ending with the root byte */
    uint32_t len;
    uint32_t off; /* where it is written in the message */
} known_t;

/* The SOA record of an NXDOMAIN answer, as the slow path writes it: owner a pointer to the
   zone's suffix at `off` in the question (lower-case `key`, `keylen` bytes with the root), the record
   starting at `rest`; MNAME and RNAME compressed against the longest suffix already written (the
   question's suffixes first, then MNAME's own), as dnspython does. Returns its length. */
static uint32_t nx_soa(const zone_t *z, const uint8_t *key, uint32_t keylen, uint32_t off, uint32_t rest,
                       uint8_t *out) {
    known_t known[3 * 130];
    uint32_t nk = 0, at = 0, pos = rest + 12;
    while (key[at] && nk < 130) {
        known[nk].p = key + at;
        known[nk].len = keylen - at;
        known[nk].off = 12 + at;
        nk++;
        at += key[at] + 1u;
    }
    out[0] = (uint8_t)(0xC0 | (off >> 8));
    out[1] = (uint8_t)(off & 0xFF);
    memcpy(out + 2, z->rr_head, 8);
    uint8_t *w = out + 12;
    const zname_t *names[2] = {&z->mname, &z->rname};
    for (int k = 0; k < 2; k++) {
        const zname_t *nm = names[k];
        uint32_t i = 0;
        int pointed = 0;
        while (i < nm->len) {
            const uint8_t *cand = nm->low + i;
            uint32_t clen = nm->len - i + 1;
            for (uint32_t j = 0; j < nk; j++) {
                if (known[j].len == clen && memcmp(known[j].p, cand, clen) == 0) {
                    w[0] = (uint8_t)(0xC0 | (known[j].off >> 8));
                    w[1] = (uint8_t)(known[j].off & 0xFF);
                    w += 2;
                    pos += 2;
                    pointed = 1;
                    break;
                }
            }
            if (pointed) break;
            if (pos <= 0x3FFF && nk < 3 * 130) {
                known[nk].p = cand;
                known[nk].len = clen;
                known[nk].off = pos;
                nk++;
            }
            uint32_t lab = (uint32_t)nm->raw[i] + 1;
            memcpy(w, nm->raw + i, lab);
            w += lab;
            pos += lab;
            i += lab;
        }
        if (!pointed) {
            *w++ = 0;
            pos++;
        }
    }
    memcpy(w, z->numbers, 20);
    w += 20;
    uint32_t rdlen = (uint32_t)(w - out) - 12;
    out[10] = (uint8_t)(rdlen >> 8);
    out[11] = (uint8_t)rdlen;
    return (uint32_t)(w - out);
}

/* Whether the exchange hook (exchange/xfrserve.py ExchangeZones.handle) looks at a query: it contains
   "_gslbd-exchange-" after the header, in any case. */
static int rj_exchange_marked(const uint8_t *d, uint32_t n) {
    static const char mark[] = "_gslbd-exchange-";
    const uint32_t m = sizeof mark - 1;
    for (uint32_t i = 12; i + m <= n; i++) {
        uint32_t k = 0;
        while (k < m && lower(d[i + k]) == (uint8_t)mark[k]) k++;
        if (k == m) return 1;
    }
    return 0;
}

static inline uint32_t rcode_of(const uint8_t (*heads)[10]) { return heads[0][1] & 0xFu; }

/* Answers what the slow path would answer for the same choice; every shape it does not hold (what the
   slow path alone answers) returns R_FALLBACK here, so that the caller asks Python; so do the features the base's
   flags leave to Python (see wire/ctable.py). Returns 0 with `o` filled. */
static int plan_answer(const ctab_t *t, const uint8_t *data, uint32_t n, u128 src_ip, int src_v6, int tcp,
                       choice_t *ch, plan_t *o) {
    const base_t *b = t->base;
    const uint32_t flags = t->flags;
    uint8_t key[NAME_MAX_END + 4] = {0};
    uint32_t suffixes[130];
    uint32_t nsuf = 0;
    uint32_t qend, keylen, i;
    int has_opt;
    node_t *node;
    if (flags & FB_ALL) return R_FALLBACK;
    if (n < 17 || (data[2] & 0xFA)) return R_FALLBACK;
    if (data[4] != 0 || data[5] != 1 || data[6] || data[7] || data[8] || data[9]) return R_FALLBACK;
    if (data[10] != 0 || data[11] > 1) return R_FALLBACK;
    has_opt = data[11];

    /* The name up to the first zero byte, lower-cased and hashed in one pass. */
    {
        const uint8_t *z = memchr(data + 12, 0, n - 12);
        if (z == NULL) return R_FALLBACK;
        qend = (uint32_t)(z - data) + 1;
    }
    keylen = qend - 12;
    uint64_t h = 0;
    if (keylen > NAME_MAX_END) {
        node = NULL; /* longer than any name: not in the table */
    } else {
        h = 1469598103934665603ULL;
        for (i = 0; i < keylen; i++) {
            key[i] = lower(data[12 + i]);
            h = (h ^ key[i]) * 1099511628211ULL;
        }
        node = find_node(t, key, keylen, h);
    }
    if (node == NULL) {
        uint32_t pos = 12, length = data[12];
        while (length) {
            if (length > 63) return R_FALLBACK;
            pos += length + 1;
            suffixes[nsuf++] = pos;
            if (pos >= n) return R_FALLBACK;
            if (nsuf >= 129) return R_FALLBACK; /* a name of 255 bytes has at most 127 labels */
            length = data[pos];
        }
        if (pos >= NAME_MAX_END) return R_FALLBACK;
        if (pos + 1 != qend) {
            qend = pos + 1;
            keylen = qend - 12;
            h = 1469598103934665603ULL;
            for (i = 0; i < keylen; i++) {
                key[i] = lower(data[12 + i]);
                h = (h ^ key[i]) * 1099511628211ULL;
            }
            node = find_node(t, key, keylen, h);
        } else if (keylen > NAME_MAX_END) {
            return R_FALLBACK;
        }
        if (node == NULL && (flags & FB_MISS)) return R_FALLBACK; /* a name compiled lazily, in Python */
    }
    if (qend + 3 >= n) return R_FALLBACK;
    if (data[qend + 2] || data[qend + 3] != 1) return R_FALLBACK; /* class IN (CHAOS: Python) */
    uint32_t qtype = (uint32_t)data[qend] << 8 | data[qend + 1];
    if (qtype == 128) return R_FALLBACK; /* RFC 9824 NXNAME: FORMERR, from the slow path */
    uint32_t rest = qend + 4;

    /* EDNS */
    uint32_t ecs_at = 0, ecs_end = 0, ecs_src = 0, payload = 0, dobit = 0;
    int co = 0, co_echo = 0; /* RFC 9824 Compact Answers OK; a compact denial's NXDOMAIN echoes it */
    uint32_t nsid = 0;       /* bytes of the NSID option to write */
    u128 ip = src_ip;
    int v6 = src_v6;
    if (has_opt) {
        if (rest + 10 >= n) return R_FALLBACK;
        if (data[rest] || data[rest + 1] || data[rest + 2] != 41 || data[rest + 6]) return R_FALLBACK;
        payload = (uint32_t)data[rest + 3] << 8 | data[rest + 4];
        dobit = data[rest + 7] >> 7;
        co = dobit && (data[rest + 7] & 0x40) && (flags & S_SIGNER); /* changes signed answers only */
        if (dobit && (flags & S_SIGNER) && (qtype == 46 || qtype == 47)) return R_FALLBACK; /* RRSIG/NSEC */
        uint32_t end = rest + 11 + ((uint32_t)data[rest + 9] << 8 | data[rest + 10]);
        if (end != n) return R_FALLBACK;
        uint32_t at = rest + 11;
        while (at < end) {
            if (at + 3 >= n) return R_FALLBACK;
            uint32_t code = (uint32_t)data[at] << 8 | data[at + 1];
            uint32_t after = at + 4 + ((uint32_t)data[at + 2] << 8 | data[at + 3]);
            if (after > end) return R_FALLBACK;
            if (code == 8) {
                if (ecs_end) return R_FALLBACK;
                if (at + 7 >= n) return R_FALLBACK;
                uint32_t family = data[at + 5], source = data[at + 6];
                if (data[at + 4] || (family != 1 && family != 2)) return R_FALLBACK;
                uint32_t bits = family == 1 ? 32 : 128;
                if (source > bits || data[at + 7] > bits || after - at - 8 != (source + 7) >> 3)
                    return R_FALLBACK;
                if ((source & 7) && (data[after - 1] & (0xFF >> (source & 7)))) return R_FALLBACK;
                ecs_at = at;
                ecs_end = after;
                ecs_src = source;
                if (source && b->ecs) {
                    uint8_t addr[16] = {0};
                    uint32_t bytes = bits / 8;
                    memcpy(addr, data + at + 8, after - at - 8);
                    u128 value = 0;
                    for (i = 0; i < bytes; i++) value = value << 8 | addr[i];
                    ip = value;
                    v6 = family == 2;
                }
            } else if (code == 10) {
                uint32_t size = after - at - 4;
                if (size != 8 && !(size >= 16 && size <= 40)) return R_FALLBACK;
            } else if (code == 3) {
                nsid = b->nsidlen; /* the identity, when one is configured (table.nsid) */
            } else if (code == 15 || code == 18 || code == 22 || code == 23 || code == 24 || code == 25) {
                return R_FALLBACK;
            }
            at = after;
        }
    } else if (rest != n) {
        return R_FALLBACK;
    }

    /* The answer */
    const uint8_t(*heads)[10];
    const uint8_t(*tcheads)[10];
    const uint8_t *sec = NULL;
    uint32_t seclen = 0;
    const uint8_t *vopt = NULL;
    uint32_t voptlen = 0;
    int locdep = 0;
    uint32_t pscope = 128; /* the ECS scope the plan used (policy/scope.py), before the cap at the source */
    uint32_t cscope = 0; /* a pooled geo entry: the scope of the client's class (_pools.c) */
    const uint8_t *dp[DENIAL_PIECES]; /* a signed denial's records, in pieces */
    uint32_t dl[DENIAL_PIECES];
    int dn = 0;
    if (node != NULL && dobit && t->sig != NULL && t->sig->nnodes) { /* DNSSEC: the signed variants */
        node_t *signed_node = find_node(t->sig, key, keylen, h);
        if (signed_node != NULL) {
            if (co) { /* all_down=nxdomain as a compact denial: NXDOMAIN from the slow path */
                int32_t idx = node->dflt;
                for (i = 0; i < node->types->n; i++) {
                    if (node->types->map[i].qtype == qtype) {
                        idx = node->types->map[i].entry;
                        break;
                    }
                }
                if (idx >= 0 && node->ent[idx]->nx) return R_FALLBACK;
            }
            node = signed_node;
        }
    }
    if (node != NULL) {
        int32_t idx = node->dflt;
        for (i = 0; i < node->types->n; i++) {
            if (node->types->map[i].qtype == qtype) {
                idx = node->types->map[i].entry;
                break;
            }
        }
        if (idx < 0) {
            if ((flags & FB_NEG) && rj_exchange_marked(data, n)) return R_FALLBACK;
            heads = b->transfer->var[0].hb->heads;
            tcheads = b->transfer->var[0].hb->tc;
            vopt = variant_bytes(b->transfer, 0) + b->transfer->var[0].len;
            voptlen = b->transfer->var[0].optlen;
        } else {
            entry_t *e = node->ent[idx];
            uint32_t pick = 0;
            choice_t level;
            int32_t level_at = -1; /* shed_load: the index of the level that answers */
            int64_t shed_at = -1; /* shed_load: the scope of every level (policy/scope.py), not the chosen one's */
            if (e->kind == K_SHED && ((shed_at = shed_scope(b, e, ip, v6)) < 0 ||
                                      (e = shed_level(e, ch, &level, &level_at)) == NULL))
                return R_FALLBACK;
            if (e != node->ent[idx]) ch = &level; /* shed_load: the level answers with the shed entry's seq */
            if (e->kind == K_PYTHON) return R_FALLBACK;
            if (e->neg && (flags & FB_NEG) && rj_exchange_marked(data, n)) return R_FALLBACK;
            if (e->kind != K_NONE) {
                uint64_t seq;
                if (e->kind == K_GEO) { /* locate before counting: a client C cannot place goes to Python */
                    /* only Python places a client of class -1: the GeoIP prefix cache, else Python (_geocache.c) */
                    uint32_t loc = lpm_find(e->lpm, ip, v6);
                    placed_t at;
                    if (loc >= e->nloc || geo_locate(b, e, loc, ip, v6, level_at, 1, &at) < 0) return R_FALLBACK;
                    seq = ch->seq >= 0 ? (uint64_t)ch->seq : ATOMIC_ADD(&e->counter, 1);
                    if (e->pooled_n) { /* the class's pool plan picks with this seq (_pools.c) */
                        e = pool_inners(e)[at.cls];
                        cscope = at.scope; /* the class's and its pool plan's (a hash's /24, a geo's own) */
                        pscope = 0;
                    }
                    const uint32_t *starts = entry_params(e), *counts = starts + e->nclass;
                    if (e->kind == K_GEO) { /* a geo entry, or a pool's geo plan: seq % the class's rotations */
                        int32_t c = at.sub >= 0 ? at.sub : at.cls;
                        pick = starts[c] + (uint32_t)(seq % counts[c]);
                        if (at.sub < 0) pscope = at.scope;
                        goto picked;
                    }
                } else if (ch->seq >= 0) seq = (uint64_t)ch->seq;
                else seq = ATOMIC_ADD(&e->counter, 1);
                switch (e->kind) {
                case K_FIXED:
                    pick = 0;
                    break;
                case K_ROTATE:
                    pick = (uint32_t)(seq % e->nvar);
                    break;
                case K_WEIGHTED: {
                    double x = (ch->draw >= 0 ? ch->draw : draw_of(ch->rng)) * e->total;
                    uint32_t lo = 0, hi = e->nbounds;
                    while (lo < hi) { /* bisect_right */
                        uint32_t mid = (lo + hi) / 2;
                        if (x < ((const double *)entry_params(e))[mid]) hi = mid;
                        else lo = mid + 1;
                    }
                    pick = lo;
                    break;
                }
                case K_SHUFFLE: {
                    double x = (ch->draw >= 0 ? ch->draw : draw_of(ch->rng)) * (double)e->count;
                    pick = (uint32_t)x;
                    break;
                }
                case K_HASH: {
                    pscope = v6 ? GEO_SHORT6 : GEO_SHORT4; /* the /24 or /56 it hashes */
                    uint64_t k = v6 ? (((uint64_t)(ip >> 72)) << 1 | 1) : ((uint64_t)(ip >> 8)) << 1;
                    uint64_t seed = mix64(k), best_score = 0;
                    uint32_t best = 0;
                    for (i = 0; i < e->nids; i++) {
                        uint64_t score = mix64(seed ^ ((const uint64_t *)entry_params(e))[i]);
                        if (i == 0 || score > best_score) {
                            best = i;
                            best_score = score;
                        }
                    }
                    pick = best;
                    break;
                }
                case K_WHASH: { /* weighted rendezvous: the highest -w/ln(u), as policy/rendezvous.py */
                    pscope = v6 ? GEO_SHORT6 : GEO_SHORT4;
                    uint64_t k = v6 ? (((uint64_t)(ip >> 72)) << 1 | 1) : ((uint64_t)(ip >> 8)) << 1;
                    uint64_t seed = mix64(k);
                    const uint64_t *ids = entry_params(e);
                    const double *weights = (const double *)(ids + e->nids);
                    double best_score = 0;
                    uint32_t best = 0;
                    for (i = 0; i < e->nids; i++) {
                        uint64_t h = mix64(seed ^ ids[i]);
                        double score = -weights[i] / log(((double)(h >> 11) + 0.5) * 0x1p-53);
                        if (i == 0 || score > best_score) {
                            best = i;
                            best_score = score;
                        }
                    }
                    pick = best;
                    break;
                }
                default:
                    return R_FALLBACK;
                }
            }
        picked:
            if (pscope < cscope) pscope = cscope; /* a pool's: the class's scope or its plan's, larger */
            if (pick >= e->nvar) return R_FALLBACK;
            heads = e->var[pick].hb->heads;
            tcheads = e->var[pick].hb->tc;
            sec = variant_bytes(e, pick);
            seclen = e->var[pick].len;
            vopt = sec + seclen;
            voptlen = e->var[pick].optlen;
            locdep = e->locdep;
            if (shed_at >= 0) { /* a shed entry's answer is as location-dependent as the entry, at its scope */
                locdep = node->ent[idx]->locdep;
                pscope = (uint32_t)shed_at;
            }
        }
    } else {
        /* REFUSED or NXDOMAIN: the exchange hook owns it when it names an exchange zone */
        if ((flags & FB_NEG) && rj_exchange_marked(data, n)) return R_FALLBACK;
        if (qtype == 251 || qtype == 252) {
            heads = b->transfer->var[0].hb->heads;
            tcheads = b->transfer->var[0].hb->tc;
            vopt = variant_bytes(b->transfer, 0) + b->transfer->var[0].len;
            voptlen = b->transfer->var[0].optlen;
        } else {
            heads = b->refused->var[0].hb->heads;
            tcheads = b->refused->var[0].hb->tc;
            vopt = variant_bytes(b->refused, 0) + b->refused->var[0].len;
            voptlen = b->refused->var[0].optlen;
            for (i = 0; i < nsuf; i++) {
                uint32_t off = suffixes[i];
                uint32_t zlen = keylen - (off - 12);
                if (t->nwild) { /* a wildcard below this suffix may synthesize the answer (RFC 4592) */
                    uint8_t wild[NAME_MAX_END + 4];
                    wild[0] = 1;
                    wild[1] = '*';
                    memcpy(wild + 2, key + (off - 12), zlen);
                    if (find_node(t, wild, zlen + 2, fnv(wild, zlen + 2)) != NULL) return R_FALLBACK;
                }
                zone_t *z = find_zone(b, key + (off - 12), zlen);
                if (z != NULL) {
                    if (z->python) return R_FALLBACK;
                    if (dobit && z->signed_) { /* RFC 9824 compact denial, or NXDOMAIN from the NSEC chain */
                        const szone_t *sz = z->sz;
                        uint32_t found = 0, li = 0, lj = 0;
                        if (sz == NULL) return R_FALLBACK;
                        if (sz->cache != NULL && ATOMIC_LOAD(&sz->cache->live)) /* `h`: fnv of the key */
                            found = dcache_get(sz->cache, key, keylen, h, o->den, DENIAL_RECORDS);
                        if (found) {
                            heads = co ? sz->co_compact : sz->compact;
                            tcheads = co ? sz->co_compact_tc : sz->compact_tc;
                            co_echo = co;
                        } else {
                            /* Python signs a fresh compact denial while the budget lasts: C answers from
                               the chain only when it is spent (and the chain denies the name). */
                            if (sz->gate == NULL || !gate_closed(sz->gate)) return R_FALLBACK;
                            if (chain_cover(sz, key, keylen, z->keylen, &li, &lj) < 0) return R_FALLBACK;
                            heads = li != lj ? sz->nx2 : sz->nx1;
                            tcheads = sz->nx_tc;
                        }
                        vopt = NULL;
                        voptlen = 0;
                        o->ptr[0] = (uint8_t)(0xC0 | (off >> 8));
                        o->ptr[1] = (uint8_t)(off & 0xFF);
                        const link_t *ls[3] = {&sz->tails, NULL, NULL};
                        if (!found) {
                            ls[1] = &sz->links[li];
                            if (lj != li) ls[2] = &sz->links[lj];
                        }
                        /* the SOA records each after a pointer; a link's parts joined by pointers */
                        for (uint32_t k = 0; k < sz->tails.n; k++) {
                            dp[dn] = o->ptr;
                            dl[dn++] = 2;
                            dp[dn] = sz->tails.blob + sz->tails.off[k];
                            dl[dn++] = sz->tails.off[k + 1] - sz->tails.off[k];
                        }
                        for (int m = 1; m < 3; m++) {
                            const link_t *l = ls[m];
                            if (l == NULL) continue;
                            for (uint32_t k = 0; k < l->n; k++) {
                                if (k) {
                                    dp[dn] = o->ptr;
                                    dl[dn++] = 2;
                                }
                                dp[dn] = l->blob + l->off[k];
                                dl[dn++] = l->off[k + 1] - l->off[k];
                            }
                        }
                        if (found) {
                            dp[dn] = o->den;
                            dl[dn++] = found;
                        }
                        for (int k = 0; k < dn; k++) seclen += dl[k];
                        break;
                    }
                    heads = z->heads;
                    tcheads = z->tc;
                    vopt = NULL;
                    voptlen = 0;
                    sec = o->soa;
                    seclen = nx_soa(z, key, keylen, off, rest, o->soa);
                    break;
                }
            }
        }
    }

    /* The response: ID, header tail, the query's question, records, OPT with options in the slow path's
       order: the ECS echo, then the variant's own (EDE). */
    int index;
    uint32_t limit, optlen = 0, options = 0;
    int ecs_echo = 0;
    if (has_opt) {
        index = (data[2] & 1) | 2;
        ecs_echo = ecs_end && b->ecs;
        options = (ecs_echo ? ecs_end - ecs_at : 0) + nsid + voptlen;
        if (options > 0xFFFF) return R_FALLBACK;
        optlen = options ? 9 + 2 + options : 11;
        o->scope = locdep ? (uint8_t)(pscope < ecs_src ? pscope : ecs_src) : 0;
        limit = payload < 512 ? 512 : payload;
        if (limit > b->max_udp) limit = b->max_udp > 512 ? b->max_udp : 512;
    } else {
        index = data[2] & 1;
        limit = 512;
    }
    o->n = 0;
    o->total = 0;
    piece(o, data, 2);
    const int truncated = !tcp && rest + seclen + optlen > limit;
    const uint8_t *head = truncated ? tcheads[index] : heads[index];
    if (data[3] & 0x10) { /* CD copied, as the slow path does */
        memcpy(o->head, head, 10);
        o->head[1] |= 0x10;
        head = o->head;
    }
    piece(o, head, 10);
    piece(o, data + 12, rest - 12);
    if (!truncated) {
        if (dn) {
            for (int k = 0; k < dn; k++) piece(o, dp[k], dl[k]);
        } else if (seclen) {
            piece(o, sec, seclen);
        }
    }
    if (has_opt) {
        if (co_echo) { /* our OPT record with CO set beside DO */
            memcpy(o->opt, options ? b->opt_prefix[dobit] : b->opt_plain[dobit], options ? 9 : 11);
            o->opt[7] |= 0x40;
        }
        if (options) {
            piece(o, co_echo ? o->opt : b->opt_prefix[dobit], 9);
            o->optlen[0] = (uint8_t)(options >> 8);
            o->optlen[1] = (uint8_t)options;
            piece(o, o->optlen, 2);
            if (ecs_echo) {
                piece(o, data + ecs_at, 7);
                piece(o, &o->scope, 1);
                if (ecs_end > ecs_at + 8) piece(o, data + ecs_at + 8, ecs_end - ecs_at - 8);
            }
            if (nsid) piece(o, b->nsid, nsid);
            if (voptlen) piece(o, vopt, voptlen);
        } else {
            piece(o, co_echo ? o->opt : b->opt_plain[dobit], 11);
        }
    }
    return 0;
}

static void write_plan(const plan_t *o, uint8_t *dst) {
    for (int k = 0; k < o->n; k++) {
        memcpy(dst, o->p[k], o->l[k]);
        dst += o->l[k];
    }
}

/* ------------------------------------------------------------------------------------------------ */
/* Malformed datagrams: what the slow path (wire/slowpath.py) answers to a datagram that cannot be a
   valid query, decided without dnspython, so that a flood of them costs what a valid query costs. C
   decides only where every dnspython (2.3 as on Debian, and later) reaches the same answer: a message
   whose structure dnspython cannot read (slowpath._unparsed: NOTIMP, BADVERS or FORMERR, the question
   echoed when it reads, an OPT when the walk read one before it broke), QDCOUNT other than 1 (FORMERR or
   NOTIMP), and type NXNAME (FORMERR). Everything else, and anything it cannot be sure of (a compression pointer that
   may be followed, a TSIG record, NOTIFY, UPDATE, the question of an opcode older dnspython does not
   know), is left to Python. docs/wire.md, *Malformed datagrams*. */

enum { RJ_PYTHON = -1, RJ_DROP = -2 };   /* reject_answer's results besides a reply length */
enum { RJ_FAIL, RJ_OK, RJ_UNSURE };      /* a walk: dnspython fails, reads it, or only it can tell */
enum { RJ_FORMERR = 1, RJ_NOTIMP = 4, RJ_BADVERS = 16, RJ_OPT = 41, RJ_NXNAME = 128, RJ_TSIG = 250 };
#define RJ_MAX_REPLY (12 + 255 + 4 + 11)

static inline uint32_t rj_u16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }

/* The name at *pos as dnspython reads it: RJ_OK with *pos just after it; RJ_FAIL where dnspython fails
   (a label type other than 0 and 3, a pointer that does not point before the name, past the end, longer
   than 255 bytes); RJ_UNSURE at a pointer it would follow (what it finds there is left to Python). */
static int rj_name(const uint8_t *d, uint32_t n, uint32_t *pos) {
    uint32_t p = *pos, total = 1;
    for (;;) {
        if (p >= n) return RJ_FAIL;
        uint32_t c = d[p];
        if (c == 0) {
            *pos = p + 1;
            return RJ_OK;
        }
        if (c < 64) {
            total += c + 1;
            if (total > 255 || p + 1 + c > n) return RJ_FAIL;
            p += c + 1;
        } else if (c >= 192) {
            if (p + 1 >= n) return RJ_FAIL;
            return ((c & 0x3F) << 8 | d[p + 1]) >= *pos ? RJ_FAIL : RJ_UNSURE;
        } else {
            return RJ_FAIL;
        }
    }
}

typedef struct {
    uint32_t opts;      /* OPT records in the additional section */
    uint32_t elsewhere; /* OPT records in the answer or authority section */
    uint32_t ttl;       /* the first OPT's TTL: extended rcode, version, DO */
} rj_seen_t;

/* The whole message as dnspython's reader walks it (names, fixed fields, RDLENGTH within the message, no
   byte after the last record); RJ_UNSURE at a TSIG record (its verification comes first: NOTAUTH). `seen`
   holds the OPT records read before the walk ended or broke, as wire/precheck.py's scan notes them. */
static int rj_walk(const uint8_t *d, uint32_t n, rj_seen_t *seen) {
    uint32_t pos = 12, qd = rj_u16(d + 4), an = rj_u16(d + 6), ns = rj_u16(d + 8), ar = rj_u16(d + 10);
    for (uint32_t q = 0; q < qd; q++) {
        int r = rj_name(d, n, &pos);
        if (r != RJ_OK) return r;
        if (pos + 4 > n) return RJ_FAIL;
        pos += 4;
    }
    for (uint32_t i = 0; i < an + ns + ar; i++) {
        int r = rj_name(d, n, &pos);
        if (r != RJ_OK) return r;
        if (pos + 10 > n) return RJ_FAIL;
        uint32_t rtype = rj_u16(d + pos);
        if (rtype == RJ_TSIG) return RJ_UNSURE;
        if (rtype == RJ_OPT) {
            if (i < an + ns) {
                seen->elsewhere++;
            } else if (seen->opts++ == 0) {
                seen->ttl = (uint32_t)d[pos + 4] << 24 | (uint32_t)d[pos + 5] << 16 | rj_u16(d + pos + 6);
            }
        }
        uint32_t end = pos + 10 + rj_u16(d + pos + 8);
        if (end > n) return RJ_FAIL;
        pos = end;
    }
    return pos == n ? RJ_OK : RJ_FAIL;
}

/* slowpath._error: the header (the query's ID, QR, opcode and RD), the question when qlen, and our OPT
   (payload max_udp, the query's DO bit, the extended rcode) when opt. Returns the length written. */
static int32_t rj_reply(const uint8_t *d, uint32_t qlen, uint32_t rcode, int opt, uint32_t ttl,
                        uint32_t max_udp, uint8_t *out) {
    memset(out, 0, 12);
    out[0] = d[0];
    out[1] = d[1];
    out[2] = (uint8_t)(0x80 | (d[2] & 0x79));
    out[3] = (uint8_t)((d[3] & 0x10) | (rcode & 0xF)); /* CD copied (RFC 4035 3.1.6) */
    out[5] = qlen ? 1 : 0;
    out[11] = opt ? 1 : 0;
    memcpy(out + 12, d + 12, qlen);
    uint8_t *o = out + 12 + qlen;
    if (opt) {
        o[0] = 0;
        o[1] = 0;
        o[2] = RJ_OPT;
        o[3] = (uint8_t)(max_udp >> 8);
        o[4] = (uint8_t)max_udp;
        o[5] = (uint8_t)(rcode >> 4); /* TTL: extended rcode, version 0, flags (DO only) */
        o[6] = 0;
        o[7] = (uint8_t)((ttl >> 8) & 0x80);
        o[8] = 0;
        o[9] = 0; /* no options */
        o[10] = 0;
        o += 11;
    }
    return (int32_t)(o - out);
}

/* The answer to a datagram that cannot be a valid query, written to out (RJ_MAX_REPLY bytes): its length,
   RJ_DROP (no query: shorter than a header or QR set), or RJ_PYTHON. `flags`: the table's FB_* (with the
   exchange hook set, FB_NEG, a readable NXNAME question naming an exchange zone is the hook's). */
static int32_t reject_answer(const uint8_t *d, uint32_t n, uint32_t max_udp, uint32_t flags, uint8_t *out) {
    if (n < 12 || (d[2] & 0x80)) return RJ_DROP;
    uint32_t opcode = (d[2] >> 3) & 0xF, qd = rj_u16(d + 4);
    if (opcode == 4 || opcode == 5) return RJ_PYTHON; /* NOTIFY (the exchange's hook), UPDATE */
    int known = opcode <= 2; /* dnspython 2.3 cannot read the question of another opcode */
    rj_seen_t seen = {0, 0, 0};
    int walk = rj_walk(d, n, &seen);
    if (walk == RJ_UNSURE) return RJ_PYTHON;
    if (walk == RJ_OK) { /* it may parse: only what its answer does not depend on */
        if (seen.opts > 1 || seen.elsewhere) return RJ_PYTHON;
        int badvers = seen.opts && (seen.ttl >> 16 & 0xFF);
        if (qd != 1) { /* FORMERR or NOTIMP, no question (BADVERS only when it does not parse) */
            if (opcode == 0 && badvers) return RJ_PYTHON;
            return rj_reply(d, 0, opcode ? RJ_NOTIMP : RJ_FORMERR, (int)seen.opts, seen.ttl, max_udp, out);
        }
        if (opcode != 0 || ((flags & FB_NEG) && rj_exchange_marked(d, n))) return RJ_PYTHON;
        uint32_t qend = 12;
        rj_name(d, n, &qend); /* read by the walk: no pointer */
        if (rj_u16(d + qend) != RJ_NXNAME) return RJ_PYTHON;
        return rj_reply(d, qend + 4 - 12, badvers ? RJ_BADVERS : RJ_FORMERR, (int)seen.opts, seen.ttl,
                        max_udp, out);
    }
    /* dnspython cannot read it: slowpath._unparsed, whose OPT is the first one the walk read before it
       broke (precheck.scan): a record after a name that breaks (a pointer forward, ...) is not read, so an
       OPT there is not the query's (RFC 6891 7: no OPT in the reply to a query without one). */
    uint32_t qlen = 0;
    if (qd == 1) { /* readable_question */
        uint32_t qend = 12;
        int r = rj_name(d, n, &qend);
        if (r == RJ_UNSURE) return RJ_PYTHON;
        if (r == RJ_OK && qend + 4 <= n) {
            if (!known) return RJ_PYTHON;
            qlen = qend + 4 - 12;
        }
    }
    int opt = seen.opts > 0;
    uint32_t rcode = opcode ? RJ_NOTIMP : (opt && (seen.ttl >> 16 & 0xFF)) ? RJ_BADVERS : RJ_FORMERR;
    return rj_reply(d, qlen, rcode, opt, seen.ttl, max_udp, out);
}

/* ------------------------------------------------------------------------------------------------ */
/* Building from Python specs (see wire/ctable.py for their shape). */

typedef struct {
    PyObject_HEAD
    gate_t *g;
} GateObject;

typedef struct {
    PyObject_HEAD
    dcache_t *c;
} CacheObject;

static PyTypeObject GateType, CacheType;

static int fixed_bytes(PyObject *obj, void *dst, Py_ssize_t size, const char *what) {
    if (!PyBytes_Check(obj) || PyBytes_GET_SIZE(obj) != size) {
        PyErr_Format(PyExc_ValueError, "%s must be %zd bytes", what, size);
        return -1;
    }
    memcpy(dst, PyBytes_AS_STRING(obj), (size_t)size);
    return 0;
}

static uint8_t *copy_bytes(PyObject *obj, uint32_t *len, const char *what) {
    if (!PyBytes_Check(obj) || PyBytes_GET_SIZE(obj) > 0x7FFFFFFF) {
        PyErr_Format(PyExc_TypeError, "%s must be bytes", what);
        return NULL;
    }
    Py_ssize_t n = PyBytes_GET_SIZE(obj);
    uint8_t *out = PyMem_RawMalloc(n ? (size_t)n : 1);
    if (out == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(out, PyBytes_AS_STRING(obj), (size_t)n);
    *len = (uint32_t)n;
    return out;
}

static PyObject *item(PyObject *seq, Py_ssize_t i, Py_ssize_t size, const char *what) {
    if (!PyTuple_Check(seq) || PyTuple_GET_SIZE(seq) != size) {
        PyErr_Format(PyExc_TypeError, "%s must be a tuple of %zd", what, size);
        return NULL;
    }
    return PyTuple_GET_ITEM(seq, i);
}

static int as_u128(PyObject *obj, u128 *out) {
    unsigned char bytes[16];
    if (!PyLong_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "an address must be an int");
        return -1;
    }
    if (_PyLong_AsByteArray((PyLongObject *)obj, bytes, 16, 0, 0) < 0) return -1;
    u128 v = 0;
    for (int i = 0; i < 16; i++) v = v << 8 | bytes[i];
    *out = v;
    return 0;
}

/* A map used while one build or update runs (under the GIL): 64-bit key -> pointer, open addressing. */
typedef struct {
    uint32_t mask, count;
    uint64_t *keys;
    void **vals;
} imap_t;

static void imap_clear(imap_t *m) {
    PyMem_RawFree(m->keys);
    PyMem_RawFree(m->vals);
    memset(m, 0, sizeof(*m));
}

/* The value stored under `key` for which `same(value, arg)` holds (any value when `same` is NULL). */
static void *imap_get(const imap_t *m, uint64_t key, int (*same)(const void *, const void *), const void *arg) {
    if (m->vals == NULL) return NULL;
    for (uint32_t i = (uint32_t)mix64(key) & m->mask; m->vals[i] != NULL; i = (i + 1) & m->mask) {
        if (m->keys[i] == key && (same == NULL || same(m->vals[i], arg))) return m->vals[i];
    }
    return NULL;
}

static int imap_put(imap_t *m, uint64_t key, void *val) {
    if (m->vals == NULL || (m->count + 1) * 2 > m->mask + 1) {
        uint32_t size = m->vals == NULL ? 64 : (m->mask + 1) * 2;
        uint64_t *keys = PyMem_RawCalloc(size, sizeof(uint64_t));
        void **vals = PyMem_RawCalloc(size, sizeof(void *));
        if (keys == NULL || vals == NULL) {
            PyMem_RawFree(keys);
            PyMem_RawFree(vals);
            PyErr_NoMemory();
            return -1;
        }
        for (uint32_t j = 0; m->vals != NULL && j <= m->mask; j++) {
            if (m->vals[j] == NULL) continue;
            uint32_t i = (uint32_t)mix64(m->keys[j]) & (size - 1);
            while (vals[i] != NULL) i = (i + 1) & (size - 1);
            keys[i] = m->keys[j];
            vals[i] = m->vals[j];
        }
        PyMem_RawFree(m->keys);
        PyMem_RawFree(m->vals);
        m->keys = keys;
        m->vals = vals;
        m->mask = size - 1;
    }
    uint32_t i = (uint32_t)mix64(key) & m->mask;
    while (m->vals[i] != NULL) i = (i + 1) & m->mask;
    m->keys[i] = key;
    m->vals[i] = val;
    m->count++;
    return 0;
}

/* What one build or update shares between the entries it makes: the fixed entries and the header blocks,
   by content. The maps hold no references: the nodes do. */
typedef struct {
    const base_t *b;
    imap_t entries;
    imap_t heads;
    imap_t types;
} bctx_t;

static void bctx_clear(bctx_t *c) {
    imap_clear(&c->entries);
    imap_clear(&c->heads);
    imap_clear(&c->types);
}

static int same_types(const void *block, const void *other) {
    const tblock_t *a = block, *b = other;
    return a->n == b->n && memcmp(a->map, b->map, (size_t)a->n * sizeof(tmap_t)) == 0;
}

/* The shared type map equal to `t` (a new block of one reference, taken over), a new reference. */
static const tblock_t *tblock_of(bctx_t *c, tblock_t *t) {
    uint64_t h = fnv((const uint8_t *)t->map, t->n * (uint32_t)sizeof(tmap_t));
    tblock_t *found = imap_get(&c->types, h, same_types, t);
    if (found != NULL) {
        PyMem_RawFree(t);
        __atomic_add_fetch(&found->refs, 1, __ATOMIC_RELAXED);
        return found;
    }
    if (imap_put(&c->types, h, t) < 0) {
        PyMem_RawFree(t);
        return NULL;
    }
    return t;
}

static int same_heads(const void *block, const void *bytes) {
    return memcmp(((const hblock_t *)block)->heads, bytes, 80) == 0;
}

/* The header block of these 80 bytes (heads, then TC heads), a new reference. */
static const hblock_t *hblock_of(bctx_t *c, const uint8_t *bytes) {
    uint64_t h = fnv(bytes, 80);
    hblock_t *found = imap_get(&c->heads, h, same_heads, bytes);
    if (found != NULL) {
        __atomic_add_fetch(&found->refs, 1, __ATOMIC_RELAXED);
        return found;
    }
    found = PyMem_RawMalloc(sizeof(hblock_t));
    if (found == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    found->refs = 1;
    memcpy(found->heads, bytes, 80);
    if (imap_put(&c->heads, h, found) < 0) {
        PyMem_RawFree(found);
        return NULL;
    }
    return found;
}

/* Checks a variant spec (heads40, tc40, sections, options) and adds its bytes to *size. */
static int check_variant(PyObject *v, size_t *size) {
    PyObject *h = item(v, 0, 4, "variant");
    if (h == NULL) return -1;
    PyObject *tc = PyTuple_GET_ITEM(v, 1), *sec = PyTuple_GET_ITEM(v, 2), *opt = PyTuple_GET_ITEM(v, 3);
    if (!PyBytes_Check(h) || PyBytes_GET_SIZE(h) != 40 || !PyBytes_Check(tc) || PyBytes_GET_SIZE(tc) != 40) {
        PyErr_SetString(PyExc_ValueError, "heads and tc_heads must be 40 bytes");
        return -1;
    }
    if (!PyBytes_Check(sec) || !PyBytes_Check(opt) || PyBytes_GET_SIZE(sec) > 0x7FFFFFFF) {
        PyErr_SetString(PyExc_TypeError, "sections and options must be bytes");
        return -1;
    }
    if (PyBytes_GET_SIZE(opt) > 0xFFFF) {
        PyErr_SetString(PyExc_ValueError, "options longer than an OPT record holds");
        return -1;
    }
    *size += (size_t)PyBytes_GET_SIZE(sec) + (size_t)PyBytes_GET_SIZE(opt);
    return 0;
}

/* Fills a checked variant, its bytes copied to *blob (advanced) in the block at `base`. */
static int fill_variant(bctx_t *c, PyObject *v, variant_t *out, uint8_t *base, uint8_t **blob) {
    uint8_t bytes[80];
    memcpy(bytes, PyBytes_AS_STRING(PyTuple_GET_ITEM(v, 0)), 40);
    memcpy(bytes + 40, PyBytes_AS_STRING(PyTuple_GET_ITEM(v, 1)), 40);
    out->hb = hblock_of(c, bytes);
    if (out->hb == NULL) return -1;
    PyObject *sec = PyTuple_GET_ITEM(v, 2), *opt = PyTuple_GET_ITEM(v, 3);
    out->len = (uint32_t)PyBytes_GET_SIZE(sec);
    out->optlen = (uint32_t)PyBytes_GET_SIZE(opt);
    out->off = (uint32_t)(*blob - base);
    memcpy(*blob, PyBytes_AS_STRING(sec), out->len);
    *blob += out->len;
    memcpy(*blob, PyBytes_AS_STRING(opt), out->optlen);
    *blob += out->optlen;
    return 0;
}

/* A new entry (one reference) of `kind` with these variants and `extra` bytes for its parameters' arrays
   (8-byte aligned, right after the variants: *params points there). */
static entry_t *new_entry(bctx_t *c, PyObject *variants, size_t extra, void **params) {
    if (!PyTuple_Check(variants)) {
        PyErr_SetString(PyExc_TypeError, "variants must be a tuple");
        return NULL;
    }
    Py_ssize_t nv = PyTuple_GET_SIZE(variants);
    if (nv > 0xFFFFFF) {
        PyErr_SetString(PyExc_ValueError, "too many variants");
        return NULL;
    }
    size_t bytes = 0;
    for (Py_ssize_t i = 0; i < nv; i++) {
        if (check_variant(PyTuple_GET_ITEM(variants, i), &bytes) < 0) return NULL;
    }
    size_t head = align8(sizeof(entry_t) + (size_t)nv * sizeof(variant_t));
    size_t size = head + align8(extra) + bytes;
    entry_t *e = size <= 0xFFFFFFFF ? PyMem_RawCalloc(1, size) : NULL;
    if (e == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    e->refs = 1;
    e->size = (uint32_t)size;
    e->nvar = (uint32_t)nv; /* for entry_params; the variants are counted again as they are filled */
    *params = entry_params(e);
    e->nvar = 0;
    uint8_t *blob = (uint8_t *)e + head + align8(extra);
    for (Py_ssize_t i = 0; i < nv; i++) {
        if (fill_variant(c, PyTuple_GET_ITEM(variants, i), &e->var[i], (uint8_t *)e, &blob) < 0) {
            entry_decref(e, NULL);
            return NULL;
        }
        e->nvar = (uint32_t)(i + 1);
        uint32_t rc = rcode_of(e->var[i].hb->heads);
        if (rc == 3 || rc == 5) e->neg = 1;
        if (rc == 3) e->nx = 1;
    }
    return e;
}

/* The entry of a lone variant (REFUSED of the base): kind none. */
static entry_t *variant_entry(bctx_t *c, PyObject *variant) {
    void *params;
    PyObject *one = PyTuple_Pack(1, variant);
    if (one == NULL) return NULL;
    entry_t *e = new_entry(c, one, 0, &params);
    Py_DECREF(one);
    return e;
}

static Py_ssize_t tuple_len(PyObject *t, const char *what) {
    if (!PyTuple_Check(t)) {
        PyErr_Format(PyExc_TypeError, "%s must be a tuple", what);
        return -1;
    }
    return PyTuple_GET_SIZE(t);
}

static int fill_u32(PyObject *seq, uint32_t *out, const char *what) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(seq); i++) {
        unsigned long v = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(seq, i));
        if (PyErr_Occurred() || v > 0xFFFFFFFFUL) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "%s: value too large", what);
            return -1;
        }
        out[i] = (uint32_t)v;
    }
    return 0;
}

/* The content hash of checked variants (a fixed entry's key in the build's map). */
static uint64_t variants_hash(PyObject *variants) {
    uint64_t h = 1469598103934665603ULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(variants); i++) {
        PyObject *v = PyTuple_GET_ITEM(variants, i);
        for (int part = 0; part < 4; part++) {
            PyObject *b = PyTuple_GET_ITEM(v, part);
            uint32_t n = (uint32_t)PyBytes_GET_SIZE(b);
            h = fnv_more(fnv_more(h, &n, sizeof(n)), PyBytes_AS_STRING(b), (size_t)n);
        }
    }
    return h;
}

/* Whether a fixed entry holds exactly these (checked) variants. */
static int same_variants(const void *entry, const void *variants) {
    const entry_t *e = entry;
    PyObject *vs = (PyObject *)(uintptr_t)variants;
    if (e->nvar != (uint32_t)PyTuple_GET_SIZE(vs)) return 0;
    for (uint32_t i = 0; i < e->nvar; i++) {
        PyObject *v = PyTuple_GET_ITEM(vs, i), *sec = PyTuple_GET_ITEM(v, 2), *opt = PyTuple_GET_ITEM(v, 3);
        const variant_t *var = &e->var[i];
        if (var->len != (uint32_t)PyBytes_GET_SIZE(sec) || var->optlen != (uint32_t)PyBytes_GET_SIZE(opt) ||
            memcmp(var->hb->heads, PyBytes_AS_STRING(PyTuple_GET_ITEM(v, 0)), 40) != 0 ||
            memcmp(var->hb->tc, PyBytes_AS_STRING(PyTuple_GET_ITEM(v, 1)), 40) != 0 ||
            memcmp(variant_bytes(e, i), PyBytes_AS_STRING(sec), var->len) != 0 ||
            memcmp(variant_bytes(e, i) + var->len, PyBytes_AS_STRING(opt), var->optlen) != 0)
            return 0;
    }
    return 1;
}

static entry_t *build_shed(PyObject *spec, bctx_t *c, long policy, int locdep); /* _shed.c */
static int build_pool_inners(entry_t *e, PyObject *inner, bctx_t *c);            /* _pools.c */

/* entry spec: (kind, policy, locdep, variants, param); a new reference, or the fixed entry with the same
   variants that this build or update made before (shared). */
static entry_t *build_entry(PyObject *spec, bctx_t *c) {
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 5) {
        PyErr_SetString(PyExc_TypeError, "entry spec must be a 5-tuple");
        return NULL;
    }
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(spec, 0));
    long policy = PyLong_AsLong(PyTuple_GET_ITEM(spec, 1));
    int locdep = PyObject_IsTrue(PyTuple_GET_ITEM(spec, 2));
    if (PyErr_Occurred() || locdep < 0) return NULL;
    if (kind < K_NONE || kind > K_SHED || policy < 0 || policy >= MAX_POLICIES) {
        PyErr_SetString(PyExc_ValueError, "bad entry kind or policy id");
        return NULL;
    }
    if (kind == K_SHED) return build_shed(spec, c, policy, locdep);
    PyObject *variants = PyTuple_GET_ITEM(spec, 3), *param = PyTuple_GET_ITEM(spec, 4);
    uint64_t content = 0;
    int shareable = kind == K_NONE && policy == 0 && !locdep; /* no counter read, no client dependence */
    if (shareable) {
        size_t bytes = 0;
        if (tuple_len(variants, "variants") < 0) return NULL;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(variants); i++) {
            if (check_variant(PyTuple_GET_ITEM(variants, i), &bytes) < 0) return NULL;
        }
        content = variants_hash(variants);
        entry_t *shared = imap_get(&c->entries, content, same_variants, variants);
        if (shared != NULL) {
            __atomic_add_fetch(&shared->refs, 1, __ATOMIC_RELAXED);
            return shared;
        }
    }
    PyObject *bounds = NULL, *starts = NULL, *counts = NULL, *classes = NULL, *inner = NULL;
    Py_ssize_t n1 = 0, n2 = 0, n3 = 0;
    long which = -1;
    size_t extra = 0;
    switch (kind) { /* check the parameters and size their arrays */
    case K_WEIGHTED:
        bounds = item(param, 0, 2, "weighted param");
        if (bounds == NULL || (n1 = tuple_len(bounds, "bounds")) < 0) return NULL;
        extra = (size_t)n1 * sizeof(double);
        break;
    case K_HASH:
        if ((n1 = tuple_len(param, "hash param")) < 0) return NULL;
        extra = (size_t)n1 * sizeof(uint64_t);
        break;
    case K_WHASH:
        bounds = item(param, 0, 2, "whash param"); /* (ids, weights) */
        if (bounds == NULL || (n1 = tuple_len(bounds, "ids")) < 0 ||
            (n2 = tuple_len(PyTuple_GET_ITEM(param, 1), "weights")) < 0)
            return NULL;
        if (n1 != n2) {
            PyErr_SetString(PyExc_ValueError, "ids and weights differ in length");
            return NULL;
        }
        extra = (size_t)n1 * (sizeof(uint64_t) + sizeof(double));
        break;
    case K_GEO: { /* (locator, starts, counts, class_of) or, pools that draw, with (..., inner) */
        int pooled = PyTuple_Check(param) && PyTuple_GET_SIZE(param) == 5;
        PyObject *loc = item(param, 0, pooled ? 5 : 4, "geo param");
        if (loc == NULL) return NULL;
        if (pooled) inner = PyTuple_GET_ITEM(param, 4);
        which = PyLong_AsLong(loc);
        if (PyErr_Occurred()) return NULL;
        if (which < 0 || (uint32_t)which >= c->b->nlpm) break; /* a locator this table does not know */
        starts = PyTuple_GET_ITEM(param, 1);
        counts = PyTuple_GET_ITEM(param, 2);
        classes = PyTuple_GET_ITEM(param, 3);
        if ((n1 = tuple_len(starts, "starts")) < 0 || (n2 = tuple_len(counts, "counts")) < 0 ||
            (n3 = tuple_len(classes, "class_of")) < 0)
            return NULL;
        if (n1 != n2) {
            PyErr_SetString(PyExc_ValueError, "starts and counts differ in length");
            return NULL;
        }
        extra = (size_t)(n1 + n2 + n3) * sizeof(uint32_t);
        if (inner != NULL) extra = align8(extra) + (size_t)n1 * sizeof(entry_t *); /* pool_inners */
        break;
    }
    default:
        break;
    }
    void *params;
    entry_t *e = new_entry(c, variants, extra, &params);
    if (e == NULL) return NULL;
    e->kind = (uint8_t)kind;
    e->policy = (uint16_t)policy;
    e->locdep = (uint8_t)locdep;
    if (e->nvar == 0 && e->kind != K_PYTHON) {
        PyErr_SetString(PyExc_ValueError, "an entry needs a variant");
        goto fail;
    }
    switch (e->kind) {
    case K_WEIGHTED:
        for (Py_ssize_t i = 0; i < n1; i++) {
            ((double *)params)[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(bounds, i));
            if (PyErr_Occurred()) goto fail;
        }
        e->nbounds = (uint32_t)n1;
        e->total = PyFloat_AsDouble(PyTuple_GET_ITEM(param, 1));
        if (PyErr_Occurred()) goto fail;
        break;
    case K_SHUFFLE:
        e->count = (uint32_t)PyLong_AsUnsignedLong(param);
        if (PyErr_Occurred()) goto fail;
        break;
    case K_HASH:
        for (Py_ssize_t i = 0; i < n1; i++) {
            ((uint64_t *)params)[i] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(param, i));
            if (PyErr_Occurred()) goto fail;
        }
        e->nids = (uint32_t)n1;
        if (n1 == 0) e->kind = K_PYTHON;
        break;
    case K_WHASH: {
        uint64_t *ids = params;
        double *weights = (double *)(ids + n1);
        PyObject *ws = PyTuple_GET_ITEM(param, 1);
        for (Py_ssize_t i = 0; i < n1; i++) {
            ids[i] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(bounds, i));
            weights[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(ws, i));
            if (PyErr_Occurred()) goto fail;
            if (!(weights[i] > 0)) {
                PyErr_SetString(PyExc_ValueError, "a hash weight must be positive");
                goto fail;
            }
        }
        e->nids = (uint32_t)n1;
        if (n1 == 0) e->kind = K_PYTHON;
        break;
    }
    case K_GEO:
        if (starts == NULL) {
            e->kind = K_PYTHON;
            break;
        }
        e->lpm = &c->b->lpms[which];
        e->uid = __atomic_add_fetch(&geo_uids, 1, __ATOMIC_RELAXED);
        e->nclass = (uint32_t)n1;
        e->nloc = (uint32_t)n3;
        uint32_t *at_starts = params, *at_counts = at_starts + n1;
        int32_t *class_of = (int32_t *)(at_counts + n2);
        if (fill_u32(starts, at_starts, "starts") < 0 || fill_u32(counts, at_counts, "counts") < 0) goto fail;
        for (uint32_t i = 0; i < e->nclass; i++) {
            if (at_counts[i] == 0) {
                PyErr_SetString(PyExc_ValueError, "a geo class without variants");
                goto fail;
            }
        }
        for (Py_ssize_t i = 0; i < n3; i++) {
            long v = PyLong_AsLong(PyTuple_GET_ITEM(classes, i));
            if (PyErr_Occurred()) goto fail;
            class_of[i] = (int32_t)v;
        }
        if (inner != NULL && build_pool_inners(e, inner, c) < 0) goto fail;
        break;
    default:
        break;
    }
    if (e->kind == K_ROTATE && e->nvar == 0) e->kind = K_PYTHON;
    if (shareable && imap_put(&c->entries, content, e) < 0) goto fail;
    return e;
fail:
    if (e->kind == K_GEO && e->pooled_n) pool_release(e, NULL);
    e->kind = K_NONE; /* never served: nothing to count */
    entry_decref(e, NULL);
    return NULL;
}

/* node spec: (key, entries, types, default) with types a tuple of (qtype, entry index or -1) */
static node_t *build_node(PyObject *spec, bctx_t *c) {
    PyObject *key = item(spec, 0, 4, "node spec");
    if (key == NULL) return NULL;
    PyObject *entries = PyTuple_GET_ITEM(spec, 1), *types = PyTuple_GET_ITEM(spec, 2);
    if (!PyBytes_Check(key)) {
        PyErr_SetString(PyExc_TypeError, "node key must be bytes");
        return NULL;
    }
    Py_ssize_t keylen = PyBytes_GET_SIZE(key);
    if (keylen == 0 || keylen > 255) {
        PyErr_SetString(PyExc_ValueError, "a node key is a wire name of 1..255 bytes");
        return NULL;
    }
    if (!PyTuple_Check(entries) || !PyTuple_Check(types)) {
        PyErr_SetString(PyExc_TypeError, "entries and types must be tuples");
        return NULL;
    }
    Py_ssize_t ne = PyTuple_GET_SIZE(entries), nt = PyTuple_GET_SIZE(types);
    if (ne > 30000 || nt > 30000) {
        PyErr_SetString(PyExc_ValueError, "too many entries");
        return NULL;
    }
    size_t at_key = sizeof(node_t) + (size_t)ne * sizeof(entry_t *);
    node_t *n = PyMem_RawCalloc(1, at_key + (size_t)keylen);
    tblock_t *types_block = PyMem_RawCalloc(1, sizeof(tblock_t) + (size_t)nt * sizeof(tmap_t));
    if (n == NULL || types_block == NULL) {
        PyMem_RawFree(n);
        PyMem_RawFree(types_block);
        PyErr_NoMemory();
        return NULL;
    }
    n->refs = 1;
    n->size = (uint32_t)(at_key + (size_t)keylen);
    n->nent = (uint16_t)ne; /* where the key lies; unset entries are NULL */
    types_block->refs = 1;
    types_block->n = (uint32_t)nt;
    tmap_t *map = types_block->map;
    uint8_t *k = (uint8_t *)n + at_key;
    memcpy(k, PyBytes_AS_STRING(key), (size_t)keylen);
    n->keylen = (uint8_t)keylen;
    n->hash = fnv(k, n->keylen);
    for (Py_ssize_t i = 0; i < ne; i++) {
        n->ent[i] = build_entry(PyTuple_GET_ITEM(entries, i), c);
        if (n->ent[i] == NULL) goto fail;
    }
    for (Py_ssize_t i = 0; i < nt; i++) {
        PyObject *pair = PyTuple_GET_ITEM(types, i);
        PyObject *q = item(pair, 0, 2, "type map item");
        if (q == NULL) goto fail;
        long qtype = PyLong_AsLong(q), at = PyLong_AsLong(PyTuple_GET_ITEM(pair, 1));
        if (PyErr_Occurred()) goto fail;
        if (qtype < 0 || qtype > 65535 || at < -1 || at >= ne) {
            PyErr_SetString(PyExc_ValueError, "bad type map item");
            goto fail;
        }
        map[i].qtype = (uint16_t)qtype;
        map[i].entry = (int16_t)at;
    }
    long dflt = PyLong_AsLong(PyTuple_GET_ITEM(spec, 3));
    if (PyErr_Occurred()) goto fail;
    if (dflt < -1 || dflt >= ne) {
        PyErr_SetString(PyExc_ValueError, "bad default entry");
        goto fail;
    }
    n->dflt = (int16_t)dflt;
    n->types = tblock_of(c, types_block);
    types_block = NULL;
    if (n->types == NULL) goto fail;
    return n;
fail:
    PyMem_RawFree(types_block);
    node_decref(n, NULL); /* a node that never served: nothing to add */
    return NULL;
}

static int build_lpm(PyObject *spec, lpm_t *l) {
    /* spec: (v4 levels, v6 levels, scopes); level: (shift, ((key, loc), ...)); loc ids start at 1;
       scopes: see geox_build (_geocache.c) */
    memset(l, 0, sizeof(*l));
    for (int f = 0; f < 2; f++) {
        PyObject *levels = item(spec, f, 3, "locator spec");
        if (levels == NULL) return -1;
        if (!PyTuple_Check(levels)) {
            PyErr_SetString(PyExc_TypeError, "levels must be a tuple");
            return -1;
        }
        Py_ssize_t nl = PyTuple_GET_SIZE(levels);
        l->lev[f] = PyMem_RawCalloc(nl ? (size_t)nl : 1, sizeof(level_t));
        if (l->lev[f] == NULL) return -1;
        for (Py_ssize_t k = 0; k < nl; k++) {
            level_t *lv = &l->lev[f][k];
            l->nlev[f] = (uint32_t)(k + 1);
            PyObject *lvspec = PyTuple_GET_ITEM(levels, k);
            PyObject *shift = item(lvspec, 0, 2, "level");
            if (shift == NULL) return -1;
            lv->shift = (uint32_t)PyLong_AsUnsignedLong(shift);
            if (PyErr_Occurred()) return -1;
            PyObject *keys = PyTuple_GET_ITEM(lvspec, 1);
            if (!PyTuple_Check(keys)) {
                PyErr_SetString(PyExc_TypeError, "level keys must be a tuple");
                return -1;
            }
            Py_ssize_t nk = PyTuple_GET_SIZE(keys);
            uint32_t size = table_size((uint32_t)nk);
            lv->mask = size - 1;
            lv->keys = PyMem_RawCalloc(2 * (size_t)size, sizeof(uint64_t));
            lv->locs = PyMem_RawCalloc(size, sizeof(uint32_t));
            if (lv->keys == NULL || lv->locs == NULL) return -1;
            for (Py_ssize_t j = 0; j < nk; j++) {
                PyObject *pair = PyTuple_GET_ITEM(keys, j);
                PyObject *kobj = item(pair, 0, 2, "level key");
                u128 key;
                if (kobj == NULL || as_u128(kobj, &key) < 0) return -1;
                long loc = PyLong_AsLong(PyTuple_GET_ITEM(pair, 1));
                if (PyErr_Occurred()) return -1;
                if (loc < 1) {
                    PyErr_SetString(PyExc_ValueError, "location ids start at 1");
                    return -1;
                }
                uint64_t hi = (uint64_t)(key >> 64), lo = (uint64_t)key;
                uint32_t i = level_slot(hi, lo, lv->mask);
                while (lv->locs[i] != 0) {
                    if (lv->keys[2 * i] == hi && lv->keys[2 * i + 1] == lo) break; /* first one wins */
                    i = (i + 1) & lv->mask;
                }
                if (lv->locs[i] == 0) {
                    lv->keys[2 * i] = hi;
                    lv->keys[2 * i + 1] = lo;
                    lv->locs[i] = (uint32_t)loc;
                }
            }
        }
    }
    return geox_build(PyTuple_GET_ITEM(spec, 2), l);
}

/* A zone's SOA name (labels without the root) in both forms. */
static int build_zname(PyObject *obj, zname_t *out) {
    out->raw = copy_bytes(obj, &out->len, "SOA name");
    if (out->raw == NULL) return -1;
    out->low = PyMem_RawMalloc((size_t)out->len + 1);
    if (out->low == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (uint32_t i = 0; i < out->len; i++) out->low[i] = lower(out->raw[i]);
    out->low[out->len] = 0;
    /* labels of 1..63 bytes that end exactly at len */
    uint32_t at = 0;
    while (at < out->len) {
        if (out->raw[at] == 0 || out->raw[at] > 63) break;
        at += out->raw[at] + 1u;
    }
    if (at != out->len || out->len > 254) {
        PyErr_SetString(PyExc_ValueError, "a SOA name must be labels of 1..63 bytes");
        return -1;
    }
    return 0;
}

/* A tuple of bytes as one blob with offsets; at most `most` parts. -1 with an exception on error, 1 when
   there are more parts than `most` (C leaves the zone's denials to Python). */
static int build_link(PyObject *parts, link_t *out, uint32_t most) {
    if (!PyTuple_Check(parts)) {
        PyErr_SetString(PyExc_TypeError, "link parts must be a tuple");
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(parts);
    if (n < 1 || (uint64_t)n > most) return 1;
    size_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *part = PyTuple_GET_ITEM(parts, i);
        if (!PyBytes_Check(part)) {
            PyErr_SetString(PyExc_TypeError, "link parts must be bytes");
            return -1;
        }
        total += (size_t)PyBytes_GET_SIZE(part);
    }
    if (total > 0xFFFF) return 1;
    out->off = PyMem_RawMalloc(((size_t)n + 1) * sizeof(uint32_t));
    out->blob = PyMem_RawMalloc(total ? total : 1);
    if (out->off == NULL || out->blob == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    out->n = (uint32_t)n;
    uint32_t at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *part = PyTuple_GET_ITEM(parts, i);
        out->off[i] = at;
        memcpy(out->blob + at, PyBytes_AS_STRING(part), (size_t)PyBytes_GET_SIZE(part));
        at += (uint32_t)PyBytes_GET_SIZE(part);
    }
    out->off[n] = at;
    return 0;
}

/* signed zone spec: (compact40, compact_tc40, nx1_40, nx2_40, nx_tc40, soa tails, flat keys, link parts,
   Gate, DenialCache or None). *out NULL (no error) when C cannot write this zone's denials. */
static int build_szone(PyObject *spec, szone_t **out) {
    *out = NULL;
    PyObject *first = item(spec, 0, 10, "signed zone spec");
    if (first == NULL) return -1;
    szone_t *z = PyMem_RawCalloc(1, sizeof(szone_t));
    if (z == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject *flat = PyTuple_GET_ITEM(spec, 6), *links = PyTuple_GET_ITEM(spec, 7);
    PyObject *gate = PyTuple_GET_ITEM(spec, 8), *cache = PyTuple_GET_ITEM(spec, 9);
    int rc = 0;
    if (fixed_bytes(first, z->compact, 40, "compact heads") < 0 ||
        fixed_bytes(PyTuple_GET_ITEM(spec, 1), z->compact_tc, 40, "compact tc_heads") < 0 ||
        fixed_bytes(PyTuple_GET_ITEM(spec, 2), z->nx1, 40, "nxdomain heads") < 0 ||
        fixed_bytes(PyTuple_GET_ITEM(spec, 3), z->nx2, 40, "nxdomain heads") < 0 ||
        fixed_bytes(PyTuple_GET_ITEM(spec, 4), z->nx_tc, 40, "nxdomain tc_heads") < 0)
        goto fail;
    memcpy(z->co_compact, z->compact, sizeof z->compact);
    memcpy(z->co_compact_tc, z->compact_tc, sizeof z->compact_tc);
    for (int k = 0; k < 4; k++) {
        z->co_compact[k][1] = (uint8_t)((z->co_compact[k][1] & 0xF0) | 3);
        z->co_compact_tc[k][1] = (uint8_t)((z->co_compact_tc[k][1] & 0xF0) | 3);
    }
    if (!PyTuple_Check(flat) || !PyTuple_Check(links) || PyTuple_GET_SIZE(flat) != PyTuple_GET_SIZE(links) ||
        !PyObject_TypeCheck(gate, &GateType) || (cache != Py_None && !PyObject_TypeCheck(cache, &CacheType))) {
        PyErr_SetString(PyExc_TypeError, "bad signed zone spec");
        goto fail;
    }
    z->gate = ((GateObject *)gate)->g;
    __atomic_add_fetch(&z->gate->refs, 1, __ATOMIC_RELAXED);
    if (cache != Py_None) {
        z->cache = ((CacheObject *)cache)->c;
        __atomic_add_fetch(&z->cache->refs, 1, __ATOMIC_RELAXED);
    }
    rc = build_link(PyTuple_GET_ITEM(spec, 5), &z->tails, 1 + DENIAL_SIGS);
    if (rc != 0) goto skip;
    Py_ssize_t n = PyTuple_GET_SIZE(flat);
    if (n < 1 || n > 0x7FFFFFFF) goto skip;
    z->flat = PyMem_RawCalloc((size_t)n, sizeof(uint8_t *));
    z->flat_len = PyMem_RawCalloc((size_t)n, sizeof(uint32_t));
    z->links = PyMem_RawCalloc((size_t)n, sizeof(link_t));
    if (z->flat == NULL || z->flat_len == NULL || z->links == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    z->nlinks = (uint32_t)n;
    for (Py_ssize_t i = 0; i < n; i++) {
        z->flat[i] = copy_bytes(PyTuple_GET_ITEM(flat, i), &z->flat_len[i], "chain key");
        if (z->flat[i] == NULL) goto fail;
        rc = build_link(PyTuple_GET_ITEM(links, i), &z->links[i], 2 + DENIAL_SIGS);
        if (rc != 0) goto skip;
    }
    *out = z;
    return 0;
skip:
    if (rc < 0) goto fail;
    szone_free(z);
    return 0;
fail:
    szone_free(z);
    return -1;
}

/* settings: (max_udp, ecs, opt_plain0, opt_plain1, opt_prefix0, opt_prefix1, refused variant, transfer
   variant, flags); zones: ((key, heads40, tc40, soa, signed), ...) with soa (rr_head8, mname, rname,
   numbers20) or None (ask Python) and signed False (unsigned), True (signed: its DO NXDOMAIN is Python's)
   or a signed zone spec (build_szone); locators: (lpm spec, ...) */
static base_t *build_base(PyObject *settings, PyObject *zones, PyObject *locators, bctx_t *c) {
    base_t *b = PyMem_RawCalloc(1, sizeof(base_t));
    if (b == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    b->refs = 1;
    PyObject *mu = item(settings, 0, 10, "settings");
    if (mu == NULL) goto fail;
    b->max_udp = (uint32_t)PyLong_AsUnsignedLong(mu);
    b->ecs = PyObject_IsTrue(PyTuple_GET_ITEM(settings, 1));
    b->flags = (uint32_t)PyLong_AsUnsignedLong(PyTuple_GET_ITEM(settings, 8));
    if (PyErr_Occurred() || b->ecs < 0) goto fail;
    if (fixed_bytes(PyTuple_GET_ITEM(settings, 2), b->opt_plain[0], 11, "opt_plain") < 0 ||
        fixed_bytes(PyTuple_GET_ITEM(settings, 3), b->opt_plain[1], 11, "opt_plain") < 0 ||
        fixed_bytes(PyTuple_GET_ITEM(settings, 4), b->opt_prefix[0], 9, "opt_prefix") < 0 ||
        fixed_bytes(PyTuple_GET_ITEM(settings, 5), b->opt_prefix[1], 9, "opt_prefix") < 0 ||
        (b->refused = variant_entry(c, PyTuple_GET_ITEM(settings, 6))) == NULL ||
        (b->transfer = variant_entry(c, PyTuple_GET_ITEM(settings, 7))) == NULL)
        goto fail;
    if (!PyBytes_Check(PyTuple_GET_ITEM(settings, 9))) {
        PyErr_SetString(PyExc_TypeError, "nsid must be bytes");
        goto fail;
    }
    if (PyBytes_GET_SIZE(PyTuple_GET_ITEM(settings, 9)) > 0) {
        b->nsid = copy_bytes(PyTuple_GET_ITEM(settings, 9), &b->nsidlen, "nsid");
        if (b->nsid == NULL) goto fail;
    }
    if (!PyTuple_Check(zones) || !PyTuple_Check(locators)) {
        PyErr_SetString(PyExc_TypeError, "zones and locators must be tuples");
        goto fail;
    }
    Py_ssize_t nz = PyTuple_GET_SIZE(zones);
    uint32_t size = table_size((uint32_t)nz);
    b->zmask = size - 1;
    b->zones = PyMem_RawCalloc(nz ? (size_t)nz : 1, sizeof(zone_t));
    b->zindex = PyMem_RawMalloc(size * sizeof(int32_t));
    if (b->zones == NULL || b->zindex == NULL) goto fail;
    memset(b->zindex, 0xFF, size * sizeof(int32_t));
    for (Py_ssize_t i = 0; i < nz; i++) {
        zone_t *z = &b->zones[i];
        PyObject *spec = PyTuple_GET_ITEM(zones, i);
        PyObject *key = item(spec, 0, 5, "zone spec");
        if (key == NULL) goto fail;
        PyObject *signed_spec = PyTuple_GET_ITEM(spec, 4);
        if (PyTuple_Check(signed_spec)) {
            z->signed_ = 1;
            if (build_szone(signed_spec, &z->sz) < 0) goto fail;
        } else {
            z->signed_ = PyObject_IsTrue(signed_spec);
            if (z->signed_ < 0) goto fail;
        }
        b->nzones = (uint32_t)(i + 1);
        z->key = copy_bytes(key, &z->keylen, "zone key");
        if (z->key == NULL) goto fail;
        z->hash = fnv(z->key, z->keylen);
        if (fixed_bytes(PyTuple_GET_ITEM(spec, 1), z->heads, 40, "zone heads") < 0 ||
            fixed_bytes(PyTuple_GET_ITEM(spec, 2), z->tc, 40, "zone tc_heads") < 0)
            goto fail;
        PyObject *soa = PyTuple_GET_ITEM(spec, 3);
        if (soa == Py_None) {
            z->python = 1;
        } else {
            PyObject *head = item(soa, 0, 4, "zone soa");
            if (head == NULL || fixed_bytes(head, z->rr_head, 8, "soa rr_head") < 0 ||
                build_zname(PyTuple_GET_ITEM(soa, 1), &z->mname) < 0 ||
                build_zname(PyTuple_GET_ITEM(soa, 2), &z->rname) < 0 ||
                fixed_bytes(PyTuple_GET_ITEM(soa, 3), z->numbers, 20, "soa numbers") < 0)
                goto fail;
        }
        if (find_zone(b, z->key, z->keylen) != NULL) continue; /* the first one wins */
        uint32_t at = (uint32_t)z->hash & b->zmask;
        while (b->zindex[at] >= 0) at = (at + 1) & b->zmask;
        b->zindex[at] = (int32_t)i;
    }
    Py_ssize_t nl = PyTuple_GET_SIZE(locators);
    b->lpms = PyMem_RawCalloc(nl ? (size_t)nl : 1, sizeof(lpm_t));
    if (b->lpms == NULL) goto fail;
    for (Py_ssize_t i = 0; i < nl; i++) {
        b->nlpm = (uint32_t)(i + 1);
        if (build_lpm(PyTuple_GET_ITEM(locators, i), &b->lpms[i]) < 0) goto fail;
    }
    return b;
fail:
    if (!PyErr_Occurred()) PyErr_NoMemory();
    base_decref(b);
    return NULL;
}

static inline int is_wild(const node_t *n) { return n->keylen > 2 && node_key(n)[0] == 1 && node_key(n)[1] == '*'; }

static uint32_t shard_bits(uint32_t n) {
    uint32_t bits = 0;
    while (bits < SHARD_BITS_MAX && ((uint64_t)SHARD_NODES << bits) < n) bits++;
    return bits;
}

static shard_t *new_shard(uint32_t nodes) {
    uint32_t size = table_size(nodes);
    shard_t *s = PyMem_RawCalloc(1, sizeof(shard_t) + (size_t)size * sizeof(node_t *));
    if (s == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    s->refs = 1;
    s->mask = size - 1;
    return s;
}

/* Puts a node (its reference) into a shard with room for it; a node of the same key is replaced. */
static void shard_place(shard_t *s, node_t *n, totals_t *totals) {
    uint32_t i = (uint32_t)n->hash & s->mask;
    for (;;) {
        node_t *cur = s->slot[i];
        if (cur == NULL) {
            s->slot[i] = n;
            s->count++;
            s->nwild += (uint32_t)is_wild(n);
            return;
        }
        if (cur->hash == n->hash && cur->keylen == n->keylen && memcmp(node_key(cur), node_key(n), n->keylen) == 0) {
            s->slot[i] = n;
            node_decref(cur, totals);
            return;
        }
        i = (i + 1) & s->mask;
    }
}

/* A private copy of `s` (new references to its nodes) with room for `more` nodes; NULL on error. */
static shard_t *shard_copy(const shard_t *s, uint32_t more) {
    shard_t *out = new_shard(s->count + more);
    if (out == NULL) return NULL;
    for (uint32_t i = 0; i <= s->mask; i++) {
        node_t *n = s->slot[i];
        if (n == NULL) continue;
        __atomic_add_fetch(&n->refs, 1, __ATOMIC_RELAXED);
        shard_place(out, n, NULL);
    }
    return out;
}

/* Makes room for one more node in a private shard (moves its nodes to a larger one when half full). */
static int shard_room(shard_t **sp) {
    shard_t *s = *sp;
    if ((s->count + 1) * 2 + 2 <= s->mask + 1) return 0;
    shard_t *out = new_shard(s->count * 2 + 1);
    if (out == NULL) return -1;
    for (uint32_t i = 0; i <= s->mask; i++) {
        if (s->slot[i] != NULL) shard_place(out, s->slot[i], NULL);
    }
    PyMem_RawFree(s); /* the nodes moved with their references */
    *sp = out;
    return 0;
}

/* Removes the node of this key from a private shard (backward-shift deletion), if there is one. */
static void shard_remove(shard_t *s, const uint8_t *key, uint32_t len, uint64_t h, totals_t *totals) {
    uint32_t i = (uint32_t)h & s->mask;
    node_t *n;
    for (;; i = (i + 1) & s->mask) {
        n = s->slot[i];
        if (n == NULL) return;
        if (n->hash == h && n->keylen == len && memcmp(node_key(n), key, len) == 0) break;
    }
    for (uint32_t j = (i + 1) & s->mask; s->slot[j] != NULL; j = (j + 1) & s->mask) {
        uint32_t home = (uint32_t)s->slot[j]->hash & s->mask;
        /* the node at j may move to the hole at i unless its home lies cyclically in (i, j] */
        if (((j - home) & s->mask) >= ((j - i) & s->mask)) {
            s->slot[i] = s->slot[j];
            i = j;
        }
    }
    s->slot[i] = NULL;
    s->count--;
    s->nwild -= (uint32_t)is_wild(n);
    node_decref(n, totals);
}

/* Sums the shards' counts into the table. */
static void ctab_count(ctab_t *t) {
    t->nnodes = t->nwild = 0;
    for (uint32_t i = 0; i < (1u << t->bits); i++) {
        t->nnodes += t->shards[i]->count;
        t->nwild += t->shards[i]->nwild;
    }
}

static ctab_t *new_ctab(base_t *base, totals_t *totals, uint32_t bits) {
    ctab_t *t = PyMem_RawCalloc(1, sizeof(ctab_t));
    if (t == NULL) return NULL;
    t->refs = 1;
    t->base = base;
    t->totals = totals;
    t->flags = base->flags;
    t->bits = bits;
    t->shards = PyMem_RawCalloc((size_t)1 << bits, sizeof(shard_t *));
    if (t->shards == NULL) {
        PyMem_RawFree(t);
        return NULL;
    }
    return t;
}

/* A table from nodes (taking their references, and those to `base` and `totals`); a later node with an
   existing key replaces it. NULL with an exception set on error (every reference released). */
static ctab_t *assemble(base_t *base, totals_t *totals, node_t **nodes, uint32_t count) {
    uint32_t bits = shard_bits(count), nshards = 1u << bits;
    ctab_t *t = new_ctab(base, totals, bits);
    uint32_t *per = PyMem_RawCalloc(nshards, sizeof(uint32_t));
    if (t == NULL || per == NULL) goto nomem;
    for (uint32_t i = 0; i < count; i++) per[shard_of(nodes[i]->hash, bits)]++;
    for (uint32_t i = 0; i < nshards; i++) {
        t->shards[i] = new_shard(per[i]);
        if (t->shards[i] == NULL) goto nomem;
    }
    PyMem_RawFree(per);
    for (uint32_t i = 0; i < count; i++) shard_place(t->shards[shard_of(nodes[i]->hash, bits)], nodes[i], totals);
    ctab_count(t);
    return t;
nomem:
    PyMem_RawFree(per);
    for (uint32_t i = 0; i < count; i++) node_decref(nodes[i], NULL);
    if (t != NULL) ctab_decref(t); /* releases base and totals with the (empty) shards */
    else {
        base_decref(base);
        totals_decref(totals);
    }
    if (!PyErr_Occurred()) PyErr_NoMemory();
    return NULL;
}

/* ------------------------------------------------------------------------------------------------ */
/* Python type: Table */

typedef struct {
    PyObject_HEAD
    ctab_t *t;
    uint64_t rng; /* for answer() calls from Python (under the GIL) */
} TableObject;

static PyTypeObject TableType;

static PyObject *wrap_table(ctab_t *t) {
    TableObject *self = PyObject_New(TableObject, &TableType);
    if (self == NULL) {
        ctab_decref(t);
        return NULL;
    }
    self->t = t;
    self->rng = (uint64_t)(uintptr_t)t ^ 0x5DEECE66DULL;
    return (PyObject *)self;
}

static void table_dealloc(TableObject *self) {
    ctab_decref(self->t);
    PyObject_Free(self);
}

/* Nodes built from `specs` into a fresh array (*out, *count); -1 with every node released on error. */
static int nodes_of(PyObject *specs, bctx_t *c, node_t ***out, uint32_t *count) {
    Py_ssize_t n = PyTuple_GET_SIZE(specs);
    *count = 0;
    *out = PyMem_RawCalloc(n ? (size_t)n : 1, sizeof(node_t *));
    if (*out == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        node_t *node = build_node(PyTuple_GET_ITEM(specs, i), c);
        if (node == NULL) {
            for (uint32_t j = 0; j < *count; j++) node_decref((*out)[j], NULL);
            PyMem_RawFree(*out);
            *out = NULL;
            return -1;
        }
        (*out)[(*count)++] = node;
    }
    return 0;
}

/* The nodes of `old` (NULL: none) but the removed and replaced ones (shared), plus `nodes` (their
   references taken), over `base` and `totals` (references taken here). Only the shards that hold a
   removed or added name are copied; a table that has grown past four times its shards' design is
   resharded whole. NULL with an exception set on error. */
static ctab_t *updated(const ctab_t *old, base_t *base, totals_t *totals, PyObject *removed, node_t **nodes,
                       uint32_t count) {
    Py_ssize_t nr = PyTuple_GET_SIZE(removed);
    for (Py_ssize_t i = 0; i < nr; i++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(removed, i))) {
            PyErr_SetString(PyExc_TypeError, "removed keys must be bytes");
            for (uint32_t j = 0; j < count; j++) node_decref(nodes[j], NULL);
            return NULL;
        }
    }
    __atomic_add_fetch(&base->refs, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&totals->refs, 1, __ATOMIC_RELAXED);
    if (old == NULL) return assemble(base, totals, nodes, count);
    uint32_t bits = old->bits, nshards = 1u << bits;
    if (shard_bits(old->nnodes + count) > bits + 1) { /* reshard: every node into a new table */
        node_t **all = PyMem_RawCalloc((size_t)old->nnodes + count + 1, sizeof(node_t *));
        if (all == NULL) {
            for (uint32_t j = 0; j < count; j++) node_decref(nodes[j], NULL);
            base_decref(base);
            totals_decref(totals);
            PyErr_NoMemory();
            return NULL;
        }
        uint32_t have = 0;
        for (uint32_t s = 0; s < nshards; s++) {
            const shard_t *sh = old->shards[s];
            for (uint32_t i = 0; i <= sh->mask; i++) {
                node_t *n = sh->slot[i];
                if (n == NULL) continue;
                __atomic_add_fetch(&n->refs, 1, __ATOMIC_RELAXED);
                all[have++] = n;
            }
        }
        memcpy(all + have, nodes, (size_t)count * sizeof(node_t *));
        ctab_t *t = assemble(base, totals, all, have + count);
        PyMem_RawFree(all);
        if (t == NULL) return NULL;
        for (Py_ssize_t i = 0; i < nr; i++) { /* a removed name that is not also added: out */
            PyObject *key = PyTuple_GET_ITEM(removed, i);
            const uint8_t *k = (const uint8_t *)PyBytes_AS_STRING(key);
            uint32_t len = (uint32_t)PyBytes_GET_SIZE(key);
            uint64_t h = fnv(k, len);
            int added = 0;
            for (uint32_t j = 0; j < count && !added; j++)
                added = nodes[j]->hash == h && nodes[j]->keylen == len && memcmp(node_key(nodes[j]), k, len) == 0;
            if (!added) shard_remove(t->shards[shard_of(h, t->bits)], k, len, h, totals);
        }
        ctab_count(t);
        return t;
    }
    ctab_t *t = new_ctab(base, totals, bits);
    uint8_t *own = PyMem_RawCalloc(nshards, 1); /* shards copied by this update */
    if (t == NULL || own == NULL) {
        PyMem_RawFree(own);
        for (uint32_t j = 0; j < count; j++) node_decref(nodes[j], NULL);
        if (t != NULL) ctab_decref(t);
        else {
            base_decref(base);
            totals_decref(totals);
        }
        PyErr_NoMemory();
        return NULL;
    }
    for (uint32_t s = 0; s < nshards; s++) {
        t->shards[s] = old->shards[s];
        __atomic_add_fetch(&t->shards[s]->refs, 1, __ATOMIC_RELAXED);
    }
    uint32_t placed = 0;
    for (Py_ssize_t i = 0; i < nr + (Py_ssize_t)count; i++) {
        const uint8_t *k;
        uint32_t len;
        uint64_t h;
        if (i < nr) {
            PyObject *key = PyTuple_GET_ITEM(removed, i);
            k = (const uint8_t *)PyBytes_AS_STRING(key);
            len = (uint32_t)PyBytes_GET_SIZE(key);
            h = fnv(k, len);
        } else {
            k = node_key(nodes[i - nr]);
            len = nodes[i - nr]->keylen;
            h = nodes[i - nr]->hash;
        }
        uint32_t s = shard_of(h, bits);
        if (!own[s]) {
            shard_t *copy = shard_copy(t->shards[s], 4);
            if (copy == NULL) goto fail;
            shard_decref(t->shards[s], totals); /* the old table still holds it */
            t->shards[s] = copy;
            own[s] = 1;
        }
        if (i < nr) {
            shard_remove(t->shards[s], k, len, h, totals);
        } else {
            if (shard_room(&t->shards[s]) < 0) goto fail;
            shard_place(t->shards[s], nodes[i - nr], totals);
            placed++;
        }
    }
    PyMem_RawFree(own);
    ctab_count(t);
    return t;
fail:
    for (uint32_t j = placed; j < count; j++) node_decref(nodes[j], NULL);
    PyMem_RawFree(own);
    ctab_decref(t);
    return NULL;
}

/* build(settings, zones, locators, nodes, inherit, signed_nodes) -> Table; `inherit`: a Table whose policy
   totals this one continues (None: start from zero); `signed_nodes`: the nodes DO queries get (the same
   names in signed zones). */
static PyObject *build(UNUSED PyObject *self, PyObject *args) {
    PyObject *settings, *zones, *locators, *specs, *inherit, *sspecs;
    if (!PyArg_ParseTuple(args, "OOOO!OO!", &settings, &zones, &locators, &PyTuple_Type, &specs, &inherit,
                          &PyTuple_Type, &sspecs))
        return NULL;
    totals_t *totals;
    if (inherit != Py_None) {
        if (!PyObject_TypeCheck(inherit, &TableType)) {
            PyErr_SetString(PyExc_TypeError, "inherit must be a Table or None");
            return NULL;
        }
        totals = ((TableObject *)inherit)->t->totals;
        __atomic_add_fetch(&totals->refs, 1, __ATOMIC_RELAXED);
    } else {
        totals = PyMem_RawCalloc(1, sizeof(totals_t));
        if (totals == NULL) return PyErr_NoMemory();
        totals->refs = 1;
    }
    bctx_t c;
    memset(&c, 0, sizeof(c));
    base_t *base = build_base(settings, zones, locators, &c);
    if (base == NULL) {
        bctx_clear(&c);
        totals_decref(totals);
        return NULL;
    }
    c.b = base;
    node_t **nodes = NULL, **snodes = NULL;
    uint32_t count = 0, scount = 0;
    if (nodes_of(specs, &c, &nodes, &count) < 0) goto fail;
    if (nodes_of(sspecs, &c, &snodes, &scount) < 0) goto fail;
    bctx_clear(&c);
    ctab_t *sig = NULL;
    if (scount) {
        __atomic_add_fetch(&base->refs, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&totals->refs, 1, __ATOMIC_RELAXED);
        sig = assemble(base, totals, snodes, scount);
    }
    PyMem_RawFree(snodes);
    snodes = NULL;
    if (scount && sig == NULL) goto fail;
    ctab_t *t = assemble(base, totals, nodes, count);
    PyMem_RawFree(nodes);
    if (t == NULL) {
        ctab_decref(sig);
        return NULL;
    }
    t->sig = sig;
    return wrap_table(t);
fail:
    bctx_clear(&c);
    for (uint32_t i = 0; nodes != NULL && i < count; i++) node_decref(nodes[i], NULL);
    PyMem_RawFree(nodes);
    base_decref(base);
    totals_decref(totals);
    return NULL;
}

/* table.update(removed_keys, nodes, signed_removed, signed_nodes) -> Table: this table's nodes but the
   removed and replaced ones, shared; the same for its signed nodes. Costs the changed names and the
   shards they fall in, not the table. */
static PyObject *table_update(TableObject *self, PyObject *args) {
    PyObject *removed, *specs, *sremoved, *sspecs;
    long long flags = -1; /* >= 0: what the new table leaves to Python (else the old table's) */
    if (!PyArg_ParseTuple(args, "O!O!O!O!|L", &PyTuple_Type, &removed, &PyTuple_Type, &specs, &PyTuple_Type,
                          &sremoved, &PyTuple_Type, &sspecs, &flags))
        return NULL;
    if (flags > 0xFFFFFFFFLL) {
        PyErr_SetString(PyExc_ValueError, "flags out of range");
        return NULL;
    }
    ctab_t *old = self->t;
    bctx_t c;
    memset(&c, 0, sizeof(c));
    c.b = old->base;
    node_t **nodes = NULL, **snodes = NULL;
    uint32_t count = 0, scount = 0;
    if (nodes_of(sspecs, &c, &snodes, &scount) < 0) {
        bctx_clear(&c);
        return NULL;
    }
    if (nodes_of(specs, &c, &nodes, &count) < 0) {
        bctx_clear(&c);
        for (uint32_t i = 0; i < scount; i++) node_decref(snodes[i], NULL);
        PyMem_RawFree(snodes);
        return NULL;
    }
    bctx_clear(&c);
    ctab_t *sig = NULL;
    if (old->sig != NULL || scount) {
        sig = updated(old->sig, old->base, old->totals, sremoved, snodes, scount);
        if (sig == NULL) {
            for (uint32_t i = 0; i < count; i++) node_decref(nodes[i], NULL);
            PyMem_RawFree(nodes);
            PyMem_RawFree(snodes);
            return NULL;
        }
    } else {
        for (uint32_t i = 0; i < scount; i++) node_decref(snodes[i], NULL);
    }
    PyMem_RawFree(snodes);
    ctab_t *t = updated(old, old->base, old->totals, removed, nodes, count);
    PyMem_RawFree(nodes);
    if (t == NULL) {
        ctab_decref(sig);
        return NULL;
    }
    t->sig = sig;
    t->flags = flags >= 0 ? (uint32_t)flags : old->flags;
    if (sig != NULL) sig->flags = t->flags;
    return wrap_table(t);
}

static int parse_ip(PyObject *obj, int v6, u128 *out) {
    if (v6) return as_u128(obj, out);
    unsigned long long v = PyLong_AsUnsignedLongLong(obj);
    if (PyErr_Occurred()) return -1;
    *out = v;
    return 0;
}

#include "_guard.c"
#include "_shed.c" /* shed_load entries (issue 23) */
#include "_pools.c" /* pools whose plans draw (issue 23) */
#include "_tap.c" /* the dnstap ring the UdpLoop writes (issue 21) */
#include "_geocache_py.c"

/* table.answer(data, ip, v6, tcp, seq=-1, draw=-1.0) -> bytes | None | False (None: ask Python; False:
   the table's guard dropped the answer). With a guard, the answer is the guarded one, as the UDP loop
   sends it. */
static PyObject *table_answer(TableObject *self, PyObject *args) {
    Py_buffer data;
    PyObject *ipobj;
    int v6, tcp;
    long long seq = -1;
    double draw = -1.0;
    u128 ip;
    plan_t plan;
    if (!PyArg_ParseTuple(args, "y*Opp|Ld", &data, &ipobj, &v6, &tcp, &seq, &draw)) return NULL;
    if (parse_ip(ipobj, v6, &ip) < 0 || data.len > 0xFFFFFF) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "message too long");
        PyBuffer_Release(&data);
        return NULL;
    }
    choice_t ch = {seq, draw, &self->rng};
    PyObject *out;
    geo_last.set = 0; /* geo_missed() tells about this call only */
    if (plan_answer(self->t, data.buf, (uint32_t)data.len, ip, v6, tcp, &ch, &plan) < 0) {
        out = Py_NewRef(Py_None);
    } else if (self->t->guard != NULL) {
        uint8_t *buf = PyMem_RawMalloc(plan.total + GUARD_ROOM > GUARD_SMALL ? plan.total + GUARD_ROOM : GUARD_SMALL);
        if (buf == NULL) {
            out = PyErr_NoMemory();
        } else {
            write_plan(&plan, buf);
            int32_t r = guard_apply(self->t->guard, data.buf, (uint32_t)data.len, buf, plan.total, ip, v6, tcp);
            out = r == G_DROPPED ? Py_NewRef(Py_False) : PyBytes_FromStringAndSize((const char *)buf, r);
            PyMem_RawFree(buf);
        }
    } else {
        out = PyBytes_FromStringAndSize(NULL, plan.total);
        if (out != NULL) write_plan(&plan, (uint8_t *)PyBytes_AS_STRING(out));
    }
    PyBuffer_Release(&data);
    return out;
}

/* table.set_guard(guard): the cookies and RRL every answer of this table goes through (once, before the
   table is handed to a Slot: the UDP loops read it without a lock). */
static PyObject *table_set_guard(TableObject *self, PyObject *arg) {
    if (!PyObject_TypeCheck(arg, &GuardType)) {
        PyErr_SetString(PyExc_TypeError, "set_guard needs a Guard");
        return NULL;
    }
    if (self->t->guard != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "this table has a guard already");
        return NULL;
    }
    guard_t *g = ((GuardObject *)arg)->g;
    __atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
    self->t->guard = g;
    Py_RETURN_NONE;
}

/* table.reject(data) -> bytes | False | None: what C answers to a datagram that cannot be a valid query
   (False: dropped), None when it leaves the datagram to Python (see reject_answer). */
static PyObject *table_reject(TableObject *self, PyObject *arg) {
    Py_buffer data;
    uint8_t out[RJ_MAX_REPLY];
    if (PyObject_GetBuffer(arg, &data, PyBUF_SIMPLE) < 0) return NULL;
    if (data.len > 0xFFFF) {
        PyBuffer_Release(&data);
        Py_RETURN_NONE;
    }
    int32_t r = reject_answer(data.buf, (uint32_t)data.len, self->t->base->max_udp, self->t->flags, out);
    PyBuffer_Release(&data);
    if (r == RJ_DROP) Py_RETURN_FALSE;
    if (r < 0) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)out, r);
}

/* Answers decided per policy id: the lineage's retired counts plus this table's live ones. */
static PyObject *table_policy_answers(TableObject *self, UNUSED PyObject *unused) {
    uint64_t sum[MAX_POLICIES];
    ctab_t *t = self->t;
    for (int i = 0; i < MAX_POLICIES; i++) sum[i] = ATOMIC_LOAD(&t->totals->policy[i]);
    for (const ctab_t *part = t; part != NULL; part = part == t ? t->sig : NULL) {
        for (uint32_t s = 0; s < (1u << part->bits); s++) {
            const shard_t *sh = part->shards[s];
            for (uint32_t i = 0; i <= sh->mask; i++) {
                const node_t *n = sh->slot[i];
                for (uint32_t j = 0; n != NULL && j < n->nent; j++) {
                    entry_t *e = n->ent[j];
                    if (counted(e)) sum[e->policy] += ATOMIC_LOAD(&e->counter);
                }
            }
        }
    }
    PyObject *out = PyTuple_New(MAX_POLICIES);
    if (out == NULL) return NULL;
    for (int i = 0; i < MAX_POLICIES; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(sum[i]);
        if (v == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, v);
    }
    return out;
}

/* table.seed(n): the state of the generator answer() draws from (weighted and random policies). */
static PyObject *table_seed(TableObject *self, PyObject *arg) {
    unsigned long long v = PyLong_AsUnsignedLongLongMask(arg);
    if (PyErr_Occurred()) return NULL;
    self->rng = (uint64_t)v;
    Py_RETURN_NONE;
}

static PyObject *table_len(TableObject *self, UNUSED PyObject *unused) { return PyLong_FromUnsignedLong(self->t->nnodes); }

typedef struct {
    uint64_t entries, refs, entry_bytes;
} esums_t;

/* Counts one reference to `e` and, the first time `e` is seen, the entry, its bytes, its variants' header
   blocks (into `blocks`) and the entries it holds: a shed entry's levels (_shed.c) and a pooled geo
   entry's classes (_pools.c), each a reference of its own. -1: out of memory. */
static int layout_entry(const entry_t *e, esums_t *sums, imap_t *seen, imap_t *blocks) {
    sums->refs++;
    if (imap_get(seen, (uint64_t)(uintptr_t)e, NULL, NULL) != NULL) return 0;
    if (imap_put(seen, (uint64_t)(uintptr_t)e, (void *)(uintptr_t)e) < 0) return -1;
    sums->entries++;
    sums->entry_bytes += e->size;
    for (uint32_t v = 0; v < e->nvar; v++) {
        const hblock_t *hb = e->var[v].hb;
        if (imap_get(blocks, (uint64_t)(uintptr_t)hb, NULL, NULL) != NULL) continue;
        if (imap_put(blocks, (uint64_t)(uintptr_t)hb, (void *)(uintptr_t)hb) < 0) return -1;
    }
    uint32_t inner = e->kind == K_SHED ? e->nlev : e->kind == K_GEO ? e->pooled_n : 0;
    entry_t *const *held = e->kind == K_SHED ? shed_levels(e) : inner ? pool_inners(e) : NULL;
    for (uint32_t i = 0; i < inner; i++) { /* a shed level may be a pooled geo entry: recursive */
        if (layout_entry(held[i], sums, seen, blocks) < 0) return -1;
    }
    return 0;
}

/* table.layout() -> (names, shards, index bytes, node bytes, entries, entry references, entry bytes,
   header blocks): what the table (with its signed nodes) holds, each shared block counted once; the
   entries inside shed and pooled entries count as entries (and their references as references). */
static PyObject *table_layout(TableObject *self, UNUSED PyObject *unused) {
    uint64_t names = 0, shards = 0, index = 0, node_bytes = 0;
    uint64_t ntblocks = 0;
    esums_t sums = {0, 0, 0};
    imap_t seen, blocks;
    memset(&seen, 0, sizeof(seen));
    memset(&blocks, 0, sizeof(blocks));
    for (const ctab_t *part = self->t; part != NULL; part = part == self->t ? self->t->sig : NULL) {
        names += part->nnodes;
        shards += 1u << part->bits;
        index += ((size_t)1 << part->bits) * sizeof(shard_t *);
        for (uint32_t s = 0; s < (1u << part->bits); s++) {
            const shard_t *sh = part->shards[s];
            index += sizeof(shard_t) + ((size_t)sh->mask + 1) * sizeof(node_t *);
            for (uint32_t i = 0; i <= sh->mask; i++) {
                const node_t *n = sh->slot[i];
                if (n == NULL) continue;
                node_bytes += n->size;
                if (imap_get(&blocks, (uint64_t)(uintptr_t)n->types, NULL, NULL) == NULL) {
                    if (imap_put(&blocks, (uint64_t)(uintptr_t)n->types, (void *)(uintptr_t)n->types) < 0) goto fail;
                    node_bytes += sizeof(tblock_t) + (size_t)n->types->n * sizeof(tmap_t);
                    ntblocks++;
                }
                for (uint32_t j = 0; j < n->nent; j++) {
                    if (layout_entry(n->ent[j], &sums, &seen, &blocks) < 0) goto fail;
                }
            }
        }
    }
    uint64_t nblocks = blocks.count - ntblocks;
    imap_clear(&seen);
    imap_clear(&blocks);
    return Py_BuildValue("KKKKKKKK", (unsigned long long)names, (unsigned long long)shards,
                         (unsigned long long)index, (unsigned long long)node_bytes, (unsigned long long)sums.entries,
                         (unsigned long long)sums.refs, (unsigned long long)sums.entry_bytes,
                         (unsigned long long)nblocks);
fail:
    imap_clear(&seen);
    imap_clear(&blocks);
    return NULL;
}

/* table.shared_shards(other) -> how many index shards the two tables share (the same block). */
static PyObject *table_shared_shards(TableObject *self, PyObject *other) {
    if (!PyObject_TypeCheck(other, &TableType)) {
        PyErr_SetString(PyExc_TypeError, "other must be a Table");
        return NULL;
    }
    const ctab_t *a = self->t, *b = ((TableObject *)other)->t;
    unsigned long same = 0;
    if (a->bits == b->bits) {
        for (uint32_t s = 0; s < (1u << a->bits); s++) same += a->shards[s] == b->shards[s];
    }
    return PyLong_FromUnsignedLong(same);
}

static PyMethodDef table_methods[] = {
    {"update", (PyCFunction)table_update, METH_VARARGS,
     "update(removed_keys, node_specs, signed_removed, signed_specs, flags=-1) -> Table"},
    {"answer", (PyCFunction)table_answer, METH_VARARGS, "answer(data, ip, v6, tcp, seq=-1, draw=-1.0)"},
    {"reject", (PyCFunction)table_reject, METH_O, "reject(data) -> bytes | False | None (malformed)"},
    {"policy_answers", (PyCFunction)table_policy_answers, METH_NOARGS, "answers per policy id"},
    {"names", (PyCFunction)table_len, METH_NOARGS, "how many names the table holds"},
    {"layout", (PyCFunction)table_layout, METH_NOARGS,
     "layout() -> (names, shards, index bytes, node bytes, entries, entry references, entry bytes, header blocks)"},
    {"shared_shards", (PyCFunction)table_shared_shards, METH_O, "shared_shards(other) -> index shards shared"},
    {"seed", (PyCFunction)table_seed, METH_O, "seed(n): the state of answer()'s random draws"},
    {"set_guard", (PyCFunction)table_set_guard, METH_O, "set_guard(guard): cookies and RRL on every answer"},
    {"geo_missed", (PyCFunction)table_geo_missed, METH_NOARGS, "geo_missed() -> (locator, uid, ip, v6, path) | None"},
    {"geo_fill", (PyCFunction)table_geo_fill, METH_VARARGS, "geo_fill(locator, uid, ip, v6, class, scope)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject TableType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gslbd.wire._cfast.Table",
    .tp_basicsize = sizeof(TableObject),
    .tp_dealloc = (destructor)table_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Precompiled answers in C memory (built by wire/ctable.py).",
    .tp_methods = table_methods,
};

/* ------------------------------------------------------------------------------------------------ */
/* Python types: Gate and DenialCache (a signed zone's denial budget and its signer's compact denials, as
   wire/dnssec.py keeps them, shared with the C tables built since) */

static PyObject *gate_new(PyTypeObject *type, PyObject *args, UNUSED PyObject *kw) {
    double until = 0.0;
    if (!PyArg_ParseTuple(args, "|d", &until)) return NULL;
    GateObject *self = (GateObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->g = PyMem_RawCalloc(1, sizeof(gate_t));
    if (self->g == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    self->g->refs = 1;
    memcpy(&self->g->until, &until, sizeof until);
    return (PyObject *)self;
}

static void gate_dealloc(GateObject *self) {
    gate_decref(self->g);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *gate_set(GateObject *self, PyObject *arg) {
    double until = PyFloat_AsDouble(arg);
    if (until == -1.0 && PyErr_Occurred()) return NULL;
    uint64_t bits;
    memcpy(&bits, &until, sizeof bits);
    __atomic_store_n(&self->g->until, bits, __ATOMIC_RELEASE);
    Py_RETURN_NONE;
}

static PyObject *gate_get(GateObject *self, UNUSED PyObject *unused) {
    uint64_t bits = __atomic_load_n(&self->g->until, __ATOMIC_ACQUIRE);
    double until;
    memcpy(&until, &bits, sizeof until);
    return PyFloat_FromDouble(until);
}

static PyObject *gate_closed_now(GateObject *self, UNUSED PyObject *unused) {
    return PyBool_FromLong(gate_closed(self->g));
}

static PyMethodDef gate_methods[] = {
    {"set", (PyCFunction)gate_set, METH_O, "set(until): no fresh compact denial before this wall time"},
    {"get", (PyCFunction)gate_get, METH_NOARGS, "the wall time set"},
    {"closed", (PyCFunction)gate_closed_now, METH_NOARGS, "whether C answers from the chain now"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject GateType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gslbd.wire._cfast.Gate",
    .tp_basicsize = sizeof(GateObject),
    .tp_dealloc = (destructor)gate_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Gate(until=0.0): a signed zone's denial budget as the C tables read it (wall time, seconds).",
    .tp_methods = gate_methods,
    .tp_new = gate_new,
};

static PyObject *cache_new(PyTypeObject *type, UNUSED PyObject *args, UNUSED PyObject *kw) {
    CacheObject *self = (CacheObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->c = PyMem_RawCalloc(1, sizeof(dcache_t));
    if (self->c == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    self->c->refs = 1;
    self->c->mask = 1023;
    self->c->slots = PyMem_RawCalloc(1024, sizeof(dent_t *));
    self->c->filter = PyMem_RawCalloc(FILTER_BITS / 64, sizeof(uint64_t));
    if (self->c->slots == NULL || self->c->filter == NULL || pthread_mutex_init(&self->c->mu, NULL) != 0) {
        PyMem_RawFree(self->c->filter);
        PyMem_RawFree(self->c->slots);
        PyMem_RawFree(self->c);
        self->c = NULL;
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static void cache_dealloc(CacheObject *self) {
    dcache_decref(self->c);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Insert `e` (its hash set) into `slots` of `mask + 1` entries, replacing an entry of the same key. */
static void dcache_place(dent_t **slots, uint32_t mask, dent_t *e, uint32_t *count) {
    uint32_t i = (uint32_t)e->hash & mask;
    for (;;) {
        dent_t *cur = slots[i];
        if (cur == NULL) {
            slots[i] = e;
            (*count)++;
            return;
        }
        if (cur->hash == e->hash && cur->keylen == e->keylen && memcmp(cur->data, e->data, e->keylen) == 0) {
            slots[i] = e;
            PyMem_RawFree(cur);
            return;
        }
        i = (i + 1) & mask;
    }
}

static PyObject *cache_put(CacheObject *self, PyObject *args) {
    const char *key, *rec;
    Py_ssize_t keylen, reclen;
    if (!PyArg_ParseTuple(args, "y#y#", &key, &keylen, &rec, &reclen)) return NULL;
    if (keylen < 1 || keylen > 255 || reclen > 0xFFFF) {
        PyErr_SetString(PyExc_ValueError, "a denial is a name of 1..255 bytes and records of < 64 KiB");
        return NULL;
    }
    dent_t *e = PyMem_RawMalloc(sizeof(dent_t) + (size_t)keylen + (size_t)reclen);
    if (e == NULL) return PyErr_NoMemory();
    e->hash = fnv((const uint8_t *)key, (uint32_t)keylen);
    e->keylen = (uint32_t)keylen;
    e->reclen = (uint32_t)reclen;
    memcpy(e->data, key, (size_t)keylen);
    memcpy(e->data + keylen, rec, (size_t)reclen);
    dcache_t *c = self->c;
    dent_t **grown = NULL;
    uint32_t size = c->mask + 1;
    if ((c->count + 1) * 2 > size) { /* allocate outside the lock */
        grown = PyMem_RawCalloc((size_t)size * 2, sizeof(dent_t *));
        if (grown == NULL) {
            PyMem_RawFree(e);
            return PyErr_NoMemory();
        }
    }
    pthread_mutex_lock(&c->mu);
    if (grown != NULL) {
        uint32_t count = 0;
        for (uint32_t i = 0; i < size; i++)
            if (c->slots[i] != NULL) dcache_place(grown, size * 2 - 1, c->slots[i], &count);
        PyMem_RawFree(c->slots);
        c->slots = grown;
        c->mask = size * 2 - 1;
        c->count = count;
    }
    dcache_place(c->slots, c->mask, e, &c->count);
    __atomic_store_n(&c->live, c->count, __ATOMIC_RELAXED);
    uint32_t bit = filter_bit(e->hash);
    __atomic_fetch_or(&c->filter[bit >> 6], (uint64_t)1 << (bit & 63), __ATOMIC_RELAXED);
    pthread_mutex_unlock(&c->mu);
    Py_RETURN_NONE;
}

static PyObject *cache_clear(CacheObject *self, UNUSED PyObject *unused) {
    pthread_mutex_lock(&self->c->mu);
    dcache_empty(self->c);
    __atomic_store_n(&self->c->live, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&self->c->mu);
    Py_RETURN_NONE;
}

static PyObject *cache_get(CacheObject *self, PyObject *arg) {
    static uint8_t buf[0x10000];
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "key must be bytes");
        return NULL;
    }
    const uint8_t *key = (const uint8_t *)PyBytes_AS_STRING(arg);
    uint32_t len = (uint32_t)PyBytes_GET_SIZE(arg);
    uint32_t found = dcache_get(self->c, key, len, fnv(key, len), buf, sizeof buf); /* under the GIL */
    if (!found) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)buf, found);
}

static Py_ssize_t cache_len(CacheObject *self) {
    pthread_mutex_lock(&self->c->mu);
    Py_ssize_t n = self->c->count;
    pthread_mutex_unlock(&self->c->mu);
    return n;
}

static PyMethodDef cache_methods[] = {
    {"put", (PyCFunction)cache_put, METH_VARARGS, "put(name, records): a compact denial signed"},
    {"get", (PyCFunction)cache_get, METH_O, "get(name) -> records | None"},
    {"clear", (PyCFunction)cache_clear, METH_NOARGS, "forget every denial"},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods cache_sequence = {.sq_length = (lenfunc)cache_len};

static PyTypeObject CacheType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gslbd.wire._cfast.DenialCache",
    .tp_basicsize = sizeof(CacheObject),
    .tp_dealloc = (destructor)cache_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "DenialCache(): the compact denials a signer made, by lower-case query name, for the C tables.",
    .tp_methods = cache_methods,
    .tp_as_sequence = &cache_sequence,
    .tp_new = cache_new,
};

/* ------------------------------------------------------------------------------------------------ */
/* Python type: Slot (the current table of a responder, read by the UDP loops without the GIL) */

typedef struct {
    PyObject_HEAD
    pthread_mutex_t mu;
    ctab_t *cur;
} SlotObject;

static PyObject *slot_new(PyTypeObject *type, UNUSED PyObject *args, UNUSED PyObject *kw) {
    SlotObject *self = (SlotObject *)type->tp_alloc(type, 0);
    if (self != NULL) {
        pthread_mutex_init(&self->mu, NULL);
        self->cur = NULL;
    }
    return (PyObject *)self;
}

static void slot_dealloc(SlotObject *self) {
    ctab_decref(self->cur);
    pthread_mutex_destroy(&self->mu);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static ctab_t *slot_acquire(SlotObject *s) {
    pthread_mutex_lock(&s->mu);
    ctab_t *t = s->cur;
    if (t != NULL) ctab_incref(t);
    pthread_mutex_unlock(&s->mu);
    return t;
}

static PyObject *slot_set(SlotObject *self, PyObject *arg) {
    ctab_t *t = NULL;
    if (arg != Py_None) {
        if (!PyObject_TypeCheck(arg, &TableType)) {
            PyErr_SetString(PyExc_TypeError, "Slot.set takes a Table or None");
            return NULL;
        }
        t = ((TableObject *)arg)->t;
        ctab_incref(t);
    }
    pthread_mutex_lock(&self->mu);
    ctab_t *old = self->cur;
    self->cur = t;
    pthread_mutex_unlock(&self->mu);
    ctab_decref(old);
    Py_RETURN_NONE;
}

static PyMethodDef slot_methods[] = {
    {"set", (PyCFunction)slot_set, METH_O, "set(table or None): answer from this table (None: all in Python)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SlotType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gslbd.wire._cfast.Slot",
    .tp_basicsize = sizeof(SlotObject),
    .tp_dealloc = (destructor)slot_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The current Table of a responder; swapped with one pointer store.",
    .tp_methods = slot_methods,
    .tp_new = slot_new,
};

#include "_tcp.c" /* TcpAnswerer: DNS over TCP from the same table (server/tcp.py) */

/* ------------------------------------------------------------------------------------------------ */
/* Python type: UdpLoop */

enum {
    C_QUERIES,
    C_RESPONSES,
    C_DROPPED,
    C_SEND_ERRORS,
    C_RECV_ERRORS,
    C_HANDLER_ERRORS,
    C_OVERSIZED,
    C_ANSWERED_C,
    C_ANSWERED_PY,
    C_COUNT
};

enum { PY_HANDLE = 1, PY_GUARD = 2 }; /* what Python does with a datagram of the batch */

typedef struct {
    PyObject_HEAD
    int fd;
    int stop;
    int running;
    PyObject *slot;
    PyObject *handle;
    PyObject *on_error;
    PyObject *guard; /* guard(query, reply, ip, v6) -> bytes | None: RRL and cookies on C's rejections */
    TapObject *tap;  /* dnstap: every exchange of a batch into this ring (_tap.c), or NULL */
    uint64_t rng;
    uint64_t c[C_COUNT];
    uint64_t rcodes[16];
} LoopObject;

static PyObject *loop_new(PyTypeObject *type, PyObject *args, UNUSED PyObject *kw) {
    int fd;
    PyObject *slot, *handle, *on_error, *guard = Py_None, *tap = Py_None;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "iO!OOK|OO", &fd, &SlotType, &slot, &handle, &on_error, &seed, &guard, &tap))
        return NULL;
    if (tap != Py_None && !PyObject_TypeCheck(tap, &TapType)) {
        PyErr_SetString(PyExc_TypeError, "UdpLoop: tap must be a TapRing or None");
        return NULL;
    }
    LoopObject *self = (LoopObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->fd = fd;
    self->slot = Py_NewRef(slot);
    self->handle = Py_NewRef(handle);
    self->on_error = Py_NewRef(on_error);
    self->guard = Py_NewRef(guard);
    self->tap = tap == Py_None ? NULL : (TapObject *)Py_NewRef(tap);
    self->rng = seed;
    return (PyObject *)self;
}

static void loop_dealloc(LoopObject *self) {
    Py_XDECREF(self->slot);
    Py_XDECREF(self->handle);
    Py_XDECREF(self->on_error);
    Py_XDECREF(self->guard);
    Py_XDECREF(self->tap);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *ip_object(const struct sockaddr_storage *sa, u128 *ip, int *v6) {
    if (sa->ss_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;
        u128 v = 0;
        for (int i = 0; i < 16; i++) v = v << 8 | sin6->sin6_addr.s6_addr[i];
        *ip = v;
        *v6 = 1;
        return NULL;
    }
    if (sa->ss_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
        *ip = ntohl(sin->sin_addr.s_addr);
    } else {
        *ip = 0;
    }
    *v6 = 0;
    return NULL;
}

static PyObject *ip_to_long(u128 ip, int v6) {
    if (!v6) return PyLong_FromUnsignedLongLong((unsigned long long)ip);
    unsigned char bytes[16];
    for (int i = 15; i >= 0; i--) {
        bytes[i] = (unsigned char)ip;
        ip >>= 8;
    }
    return _PyLong_FromByteArray(bytes, 16, 0, 0);
}

/* What Python returned for datagram i (GIL held): the reply object, or NULL (dropped, or failed: counted
   and reported once to on_error). */
static PyObject *python_reply(LoopObject *self, PyObject *reply) {
    if (reply == NULL) {
        ATOMIC_ADD(&self->c[C_HANDLER_ERRORS], 1);
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (value != NULL && tb != NULL) PyException_SetTraceback(value, tb);
        if (self->on_error != Py_None && value != NULL) {
            PyObject *r = PyObject_CallOneArg(self->on_error, value);
            if (r == NULL) PyErr_Clear();
            Py_XDECREF(r);
        }
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return NULL;
    }
    if (reply == Py_None) {
        Py_DECREF(reply);
        ATOMIC_ADD(&self->c[C_DROPPED], 1);
        return NULL;
    }
    if (!PyBytes_Check(reply)) {
        Py_DECREF(reply);
        ATOMIC_ADD(&self->c[C_HANDLER_ERRORS], 1);
        return NULL;
    }
    return reply;
}

/* Python answers datagram i (GIL held). Returns the reply object or NULL (dropped or failed). */
static PyObject *python_answer(LoopObject *self, const uint8_t *data, uint32_t len, u128 ip, int v6) {
    PyObject *ipobj = ip_to_long(ip, v6);
    PyObject *reply = NULL;
    if (ipobj != NULL) {
        reply = PyObject_CallFunction(self->handle, "y#OOO", (const char *)data, (Py_ssize_t)len, ipobj,
                                      v6 ? Py_True : Py_False, Py_False);
        Py_DECREF(ipobj);
    }
    return python_reply(self, reply);
}

/* The guard (RRL, cookies) decides what becomes of C's answer to a malformed datagram (GIL held), as
   Responder.handle applies it to the slow path's: the reply object or NULL (dropped or failed). */
static PyObject *python_guarded(LoopObject *self, const uint8_t *data, uint32_t len, const uint8_t *out,
                                uint32_t outlen, u128 ip, int v6) {
    PyObject *ipobj = ip_to_long(ip, v6);
    PyObject *reply = NULL;
    if (ipobj != NULL) {
        reply = PyObject_CallFunction(self->guard, "y#y#OO", (const char *)data, (Py_ssize_t)len,
                                      (const char *)out, (Py_ssize_t)outlen, ipobj, v6 ? Py_True : Py_False);
        Py_DECREF(ipobj);
    }
    return python_reply(self, reply);
}

static void send_all(int fd, struct mmsghdr *msgs, int count, uint64_t *sent, uint64_t *errors) {
    int start = 0;
    while (start < count) {
        int done;
        do {
            done = sendmmsg(fd, msgs + start, (unsigned int)(count - start), MSG_DONTWAIT);
        } while (done < 0 && errno == EINTR);
        if (done <= 0) {
            *errors += 1; /* the first one was refused (full buffer, unreachable peer): skip it */
            start += 1;
            continue;
        }
        *sent += (uint64_t)done;
        start += done;
    }
}

/* loop.run(): answers until stop() (checked at least every SO_RCVTIMEO). Blocks; the GIL is released
   except while Python answers what the table cannot. */
static PyObject *loop_run(LoopObject *self, UNUSED PyObject *unused) {
    if (self->running) {
        PyErr_SetString(PyExc_RuntimeError, "UdpLoop.run is already running");
        return NULL;
    }
    uint8_t *inbuf = PyMem_RawMalloc((size_t)BATCH * BUFSIZE);
    uint8_t *outbuf = PyMem_RawMalloc((size_t)BATCH * OUTSIZE);
    struct mmsghdr *msgs = PyMem_RawCalloc(BATCH, sizeof(struct mmsghdr));
    struct mmsghdr *smsgs = PyMem_RawCalloc(BATCH, sizeof(struct mmsghdr));
    struct iovec *iovs = PyMem_RawCalloc(BATCH, sizeof(struct iovec));
    struct iovec *siovs = PyMem_RawCalloc(BATCH, sizeof(struct iovec));
    struct sockaddr_storage *addrs = PyMem_RawCalloc(BATCH, sizeof(struct sockaddr_storage));
    PyObject **held = PyMem_RawCalloc(BATCH, sizeof(PyObject *));
    uint8_t **big = PyMem_RawCalloc(BATCH, sizeof(uint8_t *));
    int *py = PyMem_RawCalloc(BATCH, sizeof(int)); /* PY_HANDLE or PY_GUARD: Python's part of datagram i */
    uint32_t *rejected = PyMem_RawCalloc(BATCH, sizeof(uint32_t)); /* PY_GUARD: C's reply length */
    if (!inbuf || !outbuf || !msgs || !smsgs || !iovs || !siovs || !addrs || !held || !big || !py ||
        !rejected) {
        PyErr_NoMemory();
        goto done;
    }
    self->running = 1;
    SlotObject *slot = (SlotObject *)self->slot;
    PyThreadState *ts = PyEval_SaveThread();
    while (!__atomic_load_n(&self->stop, __ATOMIC_RELAXED)) {
        int got, i, nsend = 0, npy = 0, nguard = 0;
        for (i = 0; i < BATCH; i++) {
            iovs[i].iov_base = inbuf + (size_t)i * BUFSIZE;
            iovs[i].iov_len = BUFSIZE;
            memset(&msgs[i].msg_hdr, 0, sizeof(msgs[i].msg_hdr));
            msgs[i].msg_hdr.msg_iov = &iovs[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_name = &addrs[i];
            msgs[i].msg_hdr.msg_namelen = sizeof(addrs[i]);
        }
        got = recvmmsg(self->fd, msgs, BATCH, MSG_WAITFORONE, NULL);
        if (got < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
            if (errno == EBADF || errno == ENOTSOCK) break; /* closed under us */
            ATOMIC_ADD(&self->c[C_RECV_ERRORS], 1);
            continue;
        }
        int64_t received = self->tap != NULL ? tap_now() : 0;
        uint64_t rc[16] = {0};
        uint64_t dropped = 0, oversized = 0, by_c = 0, sent = 0, send_errors = 0;
        ctab_t *t = slot_acquire(slot);
        choice_t ch = {-1, -1.0, &self->rng};
        for (i = 0; i < got; i++) {
            const uint8_t *data = iovs[i].iov_base;
            uint32_t len = msgs[i].msg_len;
            uint8_t *out = outbuf + (size_t)i * OUTSIZE;
            py[i] = 0;
            big[i] = NULL;
            held[i] = NULL;
            if (len < 12 || (data[2] & 0x80)) { /* not a query: dropped, as the slow path does */
                dropped++;
                if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) oversized++;
                continue;
            }
            uint32_t outlen;
            if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) {
                /* Longer than the buffer: never answered from a cut copy. FORMERR, no question. */
                oversized++;
                memset(out, 0, 12);
                out[0] = data[0];
                out[1] = data[1];
                out[2] = (uint8_t)(0x80 | (data[2] & 0x79));
                out[3] = 1;
                outlen = 12;
            } else {
                u128 ip;
                int v6;
                plan_t plan;
                ip_object(&addrs[i], &ip, &v6);
                if (t == NULL || plan_answer(t, data, len, ip, v6, 0, &ch, &plan) < 0) {
                    int32_t r =
                        t == NULL ? RJ_PYTHON : reject_answer(data, len, t->base->max_udp, t->flags, out);
                    if (r >= 0 && !(t->flags & FB_ALL)) { /* malformed, answered here */
                        outlen = (uint32_t)r;
                        by_c++;
                        if (t->guard != NULL) { /* cookies and RRL, as on every answer */
                            int32_t kept = guard_apply(t->guard, data, len, out, outlen, ip, v6, 0);
                            if (kept == G_DROPPED) {
                                dropped++;
                                continue;
                            }
                            outlen = (uint32_t)kept;
                        }
                        goto send;
                    }
                    if (r >= 0 && self->guard != Py_None) { /* malformed: the guard decides in Python */
                        py[i] = PY_GUARD;
                        rejected[i] = (uint32_t)r;
                    } else {
                        py[i] = PY_HANDLE;
                        npy++;
                    }
                    nguard += py[i] == PY_GUARD;
                    continue;
                }
                if (plan.total + GUARD_ROOM > OUTSIZE) { /* room for the guard's cookie */
                    big[i] = PyMem_RawMalloc(plan.total + GUARD_ROOM);
                    if (big[i] == NULL) {
                        dropped++;
                        continue;
                    }
                    out = big[i];
                }
                write_plan(&plan, out);
                outlen = plan.total;
                by_c++;
                if (t->guard != NULL) { /* the last stage: cookies and RRL (_guard.c) */
                    int32_t kept = guard_apply(t->guard, data, len, out, outlen, ip, v6, 0);
                    if (kept == G_DROPPED) {
                        dropped++;
                        continue;
                    }
                    outlen = (uint32_t)kept;
                }
            }
        send:
            rc[out[3] & 15]++;
            siovs[nsend].iov_base = out;
            siovs[nsend].iov_len = outlen;
            memset(&smsgs[nsend].msg_hdr, 0, sizeof(smsgs[nsend].msg_hdr));
            smsgs[nsend].msg_hdr.msg_iov = &siovs[nsend];
            smsgs[nsend].msg_hdr.msg_iovlen = 1;
            smsgs[nsend].msg_hdr.msg_name = &addrs[i];
            smsgs[nsend].msg_hdr.msg_namelen = msgs[i].msg_hdr.msg_namelen;
            nsend++;
        }
        if (npy || nguard) {
            /* Python answers the rest; the replies are sent with the GIL held, then released. */
            PyEval_RestoreThread(ts);
            for (i = 0; i < got; i++) {
                if (!py[i]) continue;
                u128 ip;
                int v6;
                ip_object(&addrs[i], &ip, &v6);
                PyObject *reply = py[i] == PY_GUARD
                                      ? python_guarded(self, iovs[i].iov_base, msgs[i].msg_len,
                                                       outbuf + (size_t)i * OUTSIZE, rejected[i], ip, v6)
                                      : python_answer(self, iovs[i].iov_base, msgs[i].msg_len, ip, v6);
                if (reply == NULL) continue;
                held[i] = reply;
                const uint8_t *r = (const uint8_t *)PyBytes_AS_STRING(reply);
                Py_ssize_t rlen = PyBytes_GET_SIZE(reply);
                if (rlen > 3) rc[r[3] & 15]++;
                siovs[nsend].iov_base = (void *)r;
                siovs[nsend].iov_len = (size_t)rlen;
                memset(&smsgs[nsend].msg_hdr, 0, sizeof(smsgs[nsend].msg_hdr));
                smsgs[nsend].msg_hdr.msg_iov = &siovs[nsend];
                smsgs[nsend].msg_hdr.msg_iovlen = 1;
                smsgs[nsend].msg_hdr.msg_name = &addrs[i];
                smsgs[nsend].msg_hdr.msg_namelen = msgs[i].msg_hdr.msg_namelen;
                nsend++;
            }
            send_all(self->fd, smsgs, nsend, &sent, &send_errors);
            if (self->tap != NULL) tap_batch(self->tap, msgs, iovs, got, smsgs, nsend, addrs, received);
            for (i = 0; i < got; i++) Py_CLEAR(held[i]);
            ts = PyEval_SaveThread();
        } else {
            if (nsend) send_all(self->fd, smsgs, nsend, &sent, &send_errors);
            if (self->tap != NULL) tap_batch(self->tap, msgs, iovs, got, smsgs, nsend, addrs, received);
        }
        ctab_decref(t);
        for (i = 0; i < got; i++) {
            if (big[i] != NULL) {
                PyMem_RawFree(big[i]);
                big[i] = NULL;
            }
        }
        ATOMIC_ADD(&self->c[C_QUERIES], (uint64_t)got);
        ATOMIC_ADD(&self->c[C_RESPONSES], sent);
        ATOMIC_ADD(&self->c[C_SEND_ERRORS], send_errors);
        ATOMIC_ADD(&self->c[C_DROPPED], dropped);
        ATOMIC_ADD(&self->c[C_OVERSIZED], oversized);
        ATOMIC_ADD(&self->c[C_ANSWERED_C], by_c);
        ATOMIC_ADD(&self->c[C_ANSWERED_PY], (uint64_t)npy);
        for (i = 0; i < 16; i++) {
            if (rc[i]) ATOMIC_ADD(&self->rcodes[i], rc[i]);
        }
    }
    PyEval_RestoreThread(ts);
    self->running = 0;
done:
    PyMem_RawFree(inbuf);
    PyMem_RawFree(outbuf);
    PyMem_RawFree(msgs);
    PyMem_RawFree(smsgs);
    PyMem_RawFree(iovs);
    PyMem_RawFree(siovs);
    PyMem_RawFree(addrs);
    PyMem_RawFree(held);
    PyMem_RawFree(big);
    PyMem_RawFree(py);
    PyMem_RawFree(rejected);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

static PyObject *loop_stop(LoopObject *self, UNUSED PyObject *unused) {
    __atomic_store_n(&self->stop, 1, __ATOMIC_RELAXED);
    Py_RETURN_NONE;
}

/* counters() -> (queries, responses, dropped, send_errors, recv_errors, handler_errors, oversized,
   answered_in_c, answered_in_python, rcodes[16]) */
static PyObject *loop_counters(LoopObject *self, UNUSED PyObject *unused) {
    PyObject *rc = PyTuple_New(16);
    if (rc == NULL) return NULL;
    for (int i = 0; i < 16; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(ATOMIC_LOAD(&self->rcodes[i]));
        if (v == NULL) {
            Py_DECREF(rc);
            return NULL;
        }
        PyTuple_SET_ITEM(rc, i, v);
    }
    /* handler_errors and dropped by Python are written under the GIL by this loop's thread only. */
    return Py_BuildValue("KKKKKKKKKN", (unsigned long long)ATOMIC_LOAD(&self->c[C_QUERIES]),
                         (unsigned long long)ATOMIC_LOAD(&self->c[C_RESPONSES]),
                         (unsigned long long)ATOMIC_LOAD(&self->c[C_DROPPED]),
                         (unsigned long long)ATOMIC_LOAD(&self->c[C_SEND_ERRORS]),
                         (unsigned long long)ATOMIC_LOAD(&self->c[C_RECV_ERRORS]),
                         (unsigned long long)ATOMIC_LOAD(&self->c[C_HANDLER_ERRORS]),
                         (unsigned long long)ATOMIC_LOAD(&self->c[C_OVERSIZED]),
                         (unsigned long long)ATOMIC_LOAD(&self->c[C_ANSWERED_C]),
                         (unsigned long long)ATOMIC_LOAD(&self->c[C_ANSWERED_PY]), rc);
}

static PyMethodDef loop_methods[] = {
    {"run", (PyCFunction)loop_run, METH_NOARGS, "answer until stop()"},
    {"stop", (PyCFunction)loop_stop, METH_NOARGS, "ask run() to return"},
    {"counters", (PyCFunction)loop_counters, METH_NOARGS, "this loop's counters"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LoopType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gslbd.wire._cfast.UdpLoop",
    .tp_basicsize = sizeof(LoopObject),
    .tp_dealloc = (destructor)loop_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "UdpLoop(fd, slot, handle, on_error, seed): recvmmsg -> C table or handle() -> sendmmsg.",
    .tp_methods = loop_methods,
    .tp_new = loop_new,
};

/* ------------------------------------------------------------------------------------------------ */

/* diff(old, new) -> (changed, removed): keys of `new` whose value is not the very object `old` has for
   them, and keys of `old` that `new` lacks. One pass in C over both dicts (an update of one name in a
   table of many would otherwise spend most of its time in this comparison). */
static PyObject *diff(UNUSED PyObject *self, PyObject *args) {
    PyObject *old, *new_, *key, *value;
    Py_ssize_t pos = 0;
    if (!PyArg_ParseTuple(args, "O!O!", &PyDict_Type, &old, &PyDict_Type, &new_)) return NULL;
    PyObject *changed = PyList_New(0), *removed = PyList_New(0);
    if (changed == NULL || removed == NULL) goto fail;
    while (PyDict_Next(new_, &pos, &key, &value)) {
        PyObject *before = PyDict_GetItemWithError(old, key);
        if (before == NULL && PyErr_Occurred()) goto fail;
        if (before != value && PyList_Append(changed, key) < 0) goto fail;
    }
    pos = 0;
    while (PyDict_Next(old, &pos, &key, &value)) {
        int has = PyDict_Contains(new_, key);
        if (has < 0) goto fail;
        if (!has && PyList_Append(removed, key) < 0) goto fail;
    }
    return Py_BuildValue("NN", changed, removed);
fail:
    Py_XDECREF(changed);
    Py_XDECREF(removed);
    return NULL;
}

static PyMethodDef methods[] = {
    {"build", build, METH_VARARGS, "build(settings, zones, locators, nodes, inherit, signed_nodes) -> Table"},
    {"diff", diff, METH_VARARGS, "diff(old, new) -> (changed keys, removed keys), by value identity"},
    {"geo_counts", geo_counts, METH_NOARGS, "geo_counts() -> (hits, misses, fills) of the GeoIP prefix cache"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "gslbd.wire._cfast", "The query path in C (see wire/ctable.py).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__cfast(void) {
    if (PyType_Ready(&TableType) < 0 || PyType_Ready(&SlotType) < 0 || PyType_Ready(&LoopType) < 0 ||
        PyType_Ready(&GateType) < 0 || PyType_Ready(&CacheType) < 0 || PyType_Ready(&GuardType) < 0 ||
        PyType_Ready(&TapType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddType(m, &TableType) < 0 || PyModule_AddType(m, &SlotType) < 0 ||
        PyModule_AddType(m, &LoopType) < 0 || PyModule_AddType(m, &GateType) < 0 ||
        PyModule_AddType(m, &CacheType) < 0 || PyModule_AddType(m, &GuardType) < 0 ||
        PyModule_AddType(m, &TapType) < 0)
        return NULL;
    if (PyType_Ready(&TcpType) < 0 || PyModule_AddType(m, &TcpType) < 0) return NULL;
    PyModule_AddIntConstant(m, "BATCH", BATCH);
    PyModule_AddIntConstant(m, "BUFSIZE", BUFSIZE);
    PyModule_AddIntConstant(m, "MAX_POLICIES", MAX_POLICIES);
    PyModule_AddIntConstant(m, "K_NONE", K_NONE);
    PyModule_AddIntConstant(m, "K_FIXED", K_FIXED);
    PyModule_AddIntConstant(m, "K_ROTATE", K_ROTATE);
    PyModule_AddIntConstant(m, "K_WEIGHTED", K_WEIGHTED);
    PyModule_AddIntConstant(m, "K_SHUFFLE", K_SHUFFLE);
    PyModule_AddIntConstant(m, "K_GEO", K_GEO);
    PyModule_AddIntConstant(m, "K_HASH", K_HASH);
    PyModule_AddIntConstant(m, "K_WHASH", K_WHASH);
    PyModule_AddIntConstant(m, "K_PYTHON", K_PYTHON);
    PyModule_AddIntConstant(m, "K_SHED", K_SHED);
    PyModule_AddIntConstant(m, "FB_ALL", FB_ALL);
    PyModule_AddIntConstant(m, "FB_NEG", FB_NEG);
    return m;
}
