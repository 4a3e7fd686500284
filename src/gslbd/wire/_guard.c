/*
 * The guard stages of the C answer path (included by _cfast.c): DNS cookies (RFC 7873, RFC 9018 server
 * cookies with SipHash-2-4) checked on the query, and response rate limiting (BIND/Knot semantics) on the
 * response, as wire/guard.py, wire/cookies.py and wire/rrl.py do them. Those Python modules are the oracle:
 * every function here follows one of theirs step by step, so that the two give the same bytes, the same
 * buckets and the same counts for the same input (tests/unit/wire/test_cguard.py). One guard_t is the state
 * of one responder (buckets, cookie table, counters): the C UDP loops apply it to C's answers without the
 * GIL, and Python applies the same object to what it answers (wire/cguard.py), under the guard's mutex.
 *
 * The clocks are read here (CLOCK_MONOTONIC for the buckets, CLOCK_REALTIME for cookie timestamps, as
 * time.monotonic and time.time) unless a test pins them (`Guard.pin`).
 */

enum { G_SEND = 0, G_DROP = 1, G_SLIP = 2 };            /* wire/rrl.py SEND, DROP, SLIP */
enum { G_RESPONSE = 0, G_NXDOMAIN = 1, G_ERROR = 2, G_NODATA = 3 }; /* bucket kinds */
enum { V_NONE = 0, V_CLIENT_ONLY = 1, V_VALID = 2, V_INVALID = 3, V_MALFORMED = 4 }; /* cookies.Verdict */
enum { G_DROPPED = -1, G_FAILED = -2 };                  /* guard_apply's results besides a length */

#define RRL_MAX_BUCKETS 100000 /* wire/rrl.py MAX_BUCKETS */
#define RRL_SLOTS (1u << 18)
#define COOKIE_CACHE 50000 /* wire/cookies.py CACHE_SIZE */
#define COOKIE_SLOTS (1u << 17)
#define COOKIE_KEY_MAX (40 + 16)
#define GUARD_ROOM 64 /* bytes a response may grow by in guard_apply (a cookie option: 4 + 40) */
#define GUARD_SMALL 640 /* a truncated response: header, question, OPT with EDE and cookie */

typedef struct {
    uint64_t h;
    uint8_t *key; /* prefix (16 bytes), v6, kind, name; NULL: empty */
    uint32_t keylen;
    uint32_t slips; /* limited responses, for slip (wire/rrl.py _slips) */
    double tat;     /* theoretical arrival time */
} rbucket_t;

typedef struct {
    uint64_t h;
    uint32_t epoch; /* valid while equal to the cache's */
    uint32_t stamp;
    uint8_t len;
    uint8_t key[COOKIE_KEY_MAX]; /* the COOKIE option data, then the address */
} centry_t;

typedef struct {
    int v6;
    u128 net, mask;
} exempt_t;

typedef struct guard {
    uint64_t refs;
    pthread_mutex_t mu;
    uint32_t max_udp;
    /* RRL (rrl = 0: off) */
    int rrl;
    double rates[4], intervals[4], tolerances[4], window;
    uint32_t slip, shift4, shift6;
    uint32_t nexempt;
    exempt_t *exempt;
    rbucket_t *buckets;
    uint32_t nbuckets, nslips;
    /* cookies (cookies = 0: off) */
    int cookies;
    uint8_t secret[16];
    centry_t *cache;
    uint32_t ncache, epoch;
    /* clocks pinned by a test (pinned = 0: the system's) */
    int pinned;
    double mono, wall;
    /* counters (under mu) */
    uint64_t limited, dropped, slipped, passed, c_new, c_valid, c_invalid;
} guard_t;

static void guard_decref(guard_t *g);

/* ------------------------------------------------------------------------------------------------ */
/* SipHash-2-4 (wire/siphash.py) */

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                             \
    do {                                                                                                     \
        v0 += v1;                                                                                            \
        v1 = ROTL(v1, 13);                                                                                   \
        v1 ^= v0;                                                                                            \
        v0 = ROTL(v0, 32);                                                                                   \
        v2 += v3;                                                                                            \
        v3 = ROTL(v3, 16);                                                                                   \
        v3 ^= v2;                                                                                            \
        v0 += v3;                                                                                            \
        v3 = ROTL(v3, 21);                                                                                   \
        v3 ^= v0;                                                                                            \
        v2 += v1;                                                                                            \
        v1 = ROTL(v1, 17);                                                                                   \
        v1 ^= v2;                                                                                            \
        v2 = ROTL(v2, 32);                                                                                   \
    } while (0)

static inline uint64_t le64(const uint8_t *p, uint32_t n) {
    uint64_t v = 0;
    for (uint32_t i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint64_t siphash24(const uint8_t key[16], const uint8_t *data, uint32_t n) {
    uint64_t k0 = le64(key, 8), k1 = le64(key + 8, 8);
    uint64_t v0 = k0 ^ 0x736F6D6570736575ULL, v1 = k1 ^ 0x646F72616E646F6DULL;
    uint64_t v2 = k0 ^ 0x6C7967656E657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
    uint32_t tail = n & ~7u;
    for (uint32_t i = 0; i < tail; i += 8) {
        uint64_t m = le64(data + i, 8);
        v3 ^= m;
        SIPROUND;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t m = le64(data + tail, n - tail) | ((uint64_t)(n & 0xFF) << 56);
    v3 ^= m;
    SIPROUND;
    SIPROUND;
    v0 ^= m;
    v2 ^= 0xFF;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

/* ------------------------------------------------------------------------------------------------ */
/* Reading messages (wire/names.py, wire/cookies.py opt_rdata and find_cookie) */

static inline uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }

/* wire/names.py read_name: 0 with the name (as sent, `out` may be NULL) and the offset after it, -1 when
   dnspython would not read it. */
static int gd_read_name(const uint8_t *d, uint32_t n, uint32_t pos, uint8_t *out, uint32_t *outlen,
                        uint32_t *after) {
    uint32_t limit = n, start = pos, size = 1, end = 0, hops = 0, w = 0;
    int pointed = 0;
    for (;;) {
        if (pos >= limit) return -1;
        uint32_t len = d[pos];
        if (!len) break;
        if (len <= 63) {
            size += len + 1;
            if (pos + len + 1 > limit || size > 255) return -1;
            if (out != NULL) memcpy(out + w, d + pos, len + 1);
            w += len + 1;
            pos += len + 1;
            continue;
        }
        if (len < 0xC0 || pos + 1 >= limit) return -1;
        uint32_t target = (len & 0x3F) << 8 | d[pos + 1];
        if (target >= start || ++hops > 16) return -1;
        if (!pointed) {
            pointed = 1;
            end = pos + 2;
        }
        limit = start;
        start = pos = target;
    }
    if (out != NULL) out[w] = 0;
    if (outlen != NULL) *outlen = w + 1;
    *after = pointed ? end : pos + 1;
    return 0;
}

/* wire/names.py name_end */
static inline int gd_name_end(const uint8_t *d, uint32_t n, uint32_t pos, uint32_t *after) {
    if (pos < n && !d[pos]) {
        *after = pos + 1;
        return 0;
    }
    return gd_read_name(d, n, pos, NULL, NULL, after);
}

/* wire/cookies.py opt_rdata: 0 with the OPT record's RDATA span, -1 without one (or a broken message). */
static int gd_opt_rdata(const uint8_t *d, uint32_t n, uint32_t *start, uint32_t *end) {
    if (n < 12 || (d[10] == 0 && d[11] == 0)) return -1;
    uint32_t qd = be16(d + 4), an = be16(d + 6), ns = be16(d + 8), ar = be16(d + 10), pos = 12;
    for (uint32_t i = 0; i < qd; i++) {
        if (gd_name_end(d, n, pos, &pos) < 0) return -1;
        pos += 4;
    }
    uint32_t first = an + ns;
    for (uint32_t index = 0; index < first + ar; index++) {
        if (gd_name_end(d, n, pos, &pos) < 0 || pos + 9 >= n) return -1;
        uint32_t rtype = be16(d + pos), after = pos + 10 + be16(d + pos + 8);
        if (after > n) return -1;
        if (rtype == 41 && index >= first) {
            *start = pos + 10;
            *end = after;
            return 0;
        }
        pos = after;
    }
    return -1;
}

/* wire/cookies.py find_cookie over the OPT RDATA at..end: the verdict on the first COOKIE option
   (V_CLIENT_ONLY with its data). */
static int gd_cookie_in(const uint8_t *d, uint32_t at, uint32_t end, uint32_t *at_out, uint32_t *len_out) {
    while (at + 4 <= end) {
        uint32_t code = be16(d + at), after = at + 4 + be16(d + at + 2);
        if (after > end) return V_NONE;
        if (code == 10) {
            uint32_t size = after - at - 4;
            if (size != 8 && !(size >= 16 && size <= 40)) return V_MALFORMED;
            *at_out = at + 4;
            *len_out = size;
            return V_CLIENT_ONLY;
        }
        at = after;
    }
    return V_NONE;
}

static int gd_find_cookie(const uint8_t *d, uint32_t n, uint32_t *at_out, uint32_t *len_out) {
    uint32_t at, end;
    if (gd_opt_rdata(d, n, &at, &end) < 0) return V_NONE;
    return gd_cookie_in(d, at, end, at_out, len_out);
}

/* wire/cookies.py learning_query */
static int gd_learning(const uint8_t *d, uint32_t n) {
    uint32_t a, l, start, end;
    if (n < 12 || (d[2] & 0xF8)) return 0;
    for (int i = 4; i < 10; i++)
        if (d[i]) return 0;
    if (gd_find_cookie(d, n, &a, &l) != V_CLIENT_ONLY) return 0;
    return gd_opt_rdata(d, n, &start, &end) == 0 && d[start - 5] == 0;
}

/* ------------------------------------------------------------------------------------------------ */
/* Clocks */

static double gd_monotonic(const guard_t *g) {
    if (g->pinned) return g->mono;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int64_t gd_wall(const guard_t *g) {
    if (g->pinned) return (int64_t)g->wall; /* int(time.time()): towards zero */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec;
}

/* ------------------------------------------------------------------------------------------------ */
/* Response rate limiting (wire/rrl.py RateLimiter) */

/* wire/rrl.py denial_of: the zone of a negative response (lower case, in `zone`, length in *zlen; 0: none)
   and whether an NSEC of its authority section lists NXNAME. */
static int gd_denial_of(const uint8_t *r, uint32_t n, uint8_t *zone, uint32_t *zlen) {
    uint32_t authority = be16(r + 8), pos = 12, nxname = 0, len = 0;
    *zlen = 0;
    if (!authority) return 0;
    for (uint32_t i = 0; i < be16(r + 4); i++) {
        if (gd_name_end(r, n, pos, &pos) < 0) return 0;
        pos += 4;
    }
    for (uint32_t i = 0; i < be16(r + 6); i++) {
        if (gd_name_end(r, n, pos, &pos) < 0 || pos + 9 >= n) return 0;
        pos += 10 + be16(r + pos + 8);
    }
    if (gd_read_name(r, n, pos, zone, &len, &pos) < 0) return 0;
    for (uint32_t index = 0; index < authority; index++) {
        if (index && gd_name_end(r, n, pos, &pos) < 0) return 0;
        if (pos + 9 >= n) return 0;
        uint32_t end = pos + 10 + be16(r + pos + 8);
        if (r[pos] == 0 && r[pos + 1] == 47 && !nxname) {
            uint32_t at;
            if (gd_name_end(r, n, pos + 10, &at) < 0) return 0;
            while (at + 2 <= end) {
                if (at + 1 >= n) return 0;
                uint32_t window = r[at], size = r[at + 1];
                if (window == 0 && size > 16) {
                    if (at + 18 >= n) return 0;
                    if (r[at + 18] & 0x80) {
                        nxname = 1;
                        break;
                    }
                }
                at += 2 + size;
            }
        }
        pos = end;
    }
    for (uint32_t i = 0; i < len; i++) zone[i] = lower(zone[i]);
    *zlen = len;
    return (int)nxname;
}

/* wire/rrl.py question_key, into `out` (at most 258 bytes); returns its length. */
static uint32_t gd_question_key(const uint8_t *r, uint32_t n, uint8_t *out) {
    if (!(r[4] || r[5])) return 0;
    const uint8_t *z = memchr(r + 12, 0, n - 12);
    if (z == NULL) return 0; /* reply[12:2] */
    uint32_t end = (uint32_t)(z - r) + 3;
    if (end > n) end = n;
    if (end - 12 > 258) end = 12 + 258; /* never: a name ends within 255 bytes */
    for (uint32_t i = 12; i < end; i++) out[i - 12] = lower(r[i]);
    return end - 12;
}

static int gd_exempt(const guard_t *g, u128 ip, int v6) {
    for (uint32_t i = 0; i < g->nexempt; i++)
        if (g->exempt[i].v6 == v6 && (ip & g->exempt[i].mask) == g->exempt[i].net) return 1;
    return 0;
}

static void gd_buckets_clear(guard_t *g) {
    for (uint32_t i = 0; i < RRL_SLOTS; i++) {
        PyMem_RawFree(g->buckets[i].key);
        g->buckets[i].key = NULL;
    }
    g->nbuckets = 0;
    g->nslips = 0;
}

static rbucket_t *gd_bucket_slot(rbucket_t *table, uint64_t h, const uint8_t *key, uint32_t len) {
    uint32_t at = (uint32_t)h & (RRL_SLOTS - 1);
    for (;;) {
        rbucket_t *b = &table[at];
        if (b->key == NULL || (b->h == h && b->keylen == len && memcmp(b->key, key, len) == 0)) return b;
        at = (at + 1) & (RRL_SLOTS - 1);
    }
}

/* wire/rrl.py _sweep: forget full buckets; start afresh when that frees less than a quarter. */
static void gd_sweep(guard_t *g, double now) {
    uint32_t stale = 0;
    for (uint32_t i = 0; i < RRL_SLOTS; i++)
        if (g->buckets[i].key != NULL && g->buckets[i].tat <= now) stale++;
    if (stale < g->nbuckets / 4) {
        gd_buckets_clear(g);
        return;
    }
    rbucket_t *fresh = PyMem_RawCalloc(RRL_SLOTS, sizeof(rbucket_t));
    if (fresh == NULL) {
        gd_buckets_clear(g);
        return;
    }
    g->nbuckets = 0;
    g->nslips = 0;
    for (uint32_t i = 0; i < RRL_SLOTS; i++) {
        rbucket_t *b = &g->buckets[i];
        if (b->key == NULL) continue;
        if (b->tat <= now) {
            PyMem_RawFree(b->key);
            continue;
        }
        *gd_bucket_slot(fresh, b->h, b->key, b->keylen) = *b;
        g->nbuckets++;
        g->nslips += b->slips != 0;
    }
    PyMem_RawFree(g->buckets);
    g->buckets = fresh;
}

/* wire/rrl.py _limited */
static int gd_limited(guard_t *g, rbucket_t *b, double now, int kind) {
    double ceiling = now + 1.0 + g->window;
    double tat = b->tat + g->intervals[kind];
    b->tat = tat < ceiling ? tat : ceiling;
    g->limited++;
    if (g->slip) {
        uint32_t count = b->slips + 1;
        if (g->nslips >= RRL_MAX_BUCKETS) { /* _slips.clear() */
            for (uint32_t i = 0; i < RRL_SLOTS; i++) g->buckets[i].slips = 0;
            g->nslips = 0;
        }
        g->nslips += b->slips == 0;
        b->slips = count;
        if (count % g->slip == 0) {
            g->slipped++;
            return G_SLIP;
        }
    }
    g->dropped++;
    return G_DROP;
}

/* wire/rrl.py decide (and _decide_other): SEND, DROP or SLIP for a response of at least 12 bytes. */
static int gd_decide(guard_t *g, const uint8_t *r, uint32_t n, u128 ip, int v6) {
    uint8_t key[16 + 2 + 258];
    uint32_t rcode = r[3] & 15, namelen, kind;
    int fresh_full = 0; /* a new RESPONSE bucket starts one response on (`decide`); others at now */
    if (rcode || !(r[6] || r[7])) {
        namelen = 0;
        if (rcode == 0 || rcode == 3) {
            uint32_t zlen;
            int nxname = gd_denial_of(r, n, key + 18, &zlen);
            kind = (rcode == 3 || nxname) ? G_NXDOMAIN : G_NODATA;
            namelen = zlen ? zlen : gd_question_key(r, n, key + 18);
        } else {
            kind = G_ERROR;
        }
    } else {
        kind = G_RESPONSE;
        fresh_full = 1;
        namelen = 0;
    }
    if (g->rates[kind] == 0.0) return G_SEND;
    if (g->nexempt && gd_exempt(g, ip, v6)) return G_SEND;
    if (kind == G_RESPONSE) namelen = gd_question_key(r, n, key + 18);
    uint32_t shift = v6 ? g->shift6 : g->shift4;
    u128 prefix = shift >= 128 ? 0 : ip >> shift;
    for (int i = 15; i >= 0; i--) {
        key[i] = (uint8_t)prefix;
        prefix >>= 8;
    }
    key[16] = (uint8_t)v6;
    key[17] = (uint8_t)kind;
    uint32_t keylen = 18 + namelen;
    uint64_t h = fnv(key, keylen);
    double now = gd_monotonic(g);
    rbucket_t *b = gd_bucket_slot(g->buckets, h, key, keylen);
    if (b->key == NULL) {
        if (g->nbuckets >= RRL_MAX_BUCKETS) {
            gd_sweep(g, now);
            b = gd_bucket_slot(g->buckets, h, key, keylen);
        }
        b->key = PyMem_RawMalloc(keylen);
        if (b->key == NULL) return G_SEND; /* no memory: answered, as without a bucket */
        memcpy(b->key, key, keylen);
        b->h = h;
        b->keylen = keylen;
        b->slips = 0;
        g->nbuckets++;
        if (fresh_full) {
            b->tat = now + g->intervals[kind];
            return G_SEND;
        }
        b->tat = now;
    } else if (fresh_full) {
        double tat = b->tat;
        if (tat < now) {
            b->tat = now + g->intervals[kind];
            return G_SEND;
        }
        if (tat - now <= g->tolerances[kind]) {
            b->tat = tat + g->intervals[kind];
            return G_SEND;
        }
        return gd_limited(g, b, now, (int)kind);
    }
    double tat = b->tat > now ? b->tat : now;
    if (tat - now <= g->tolerances[kind]) {
        b->tat = tat + g->intervals[kind];
        return G_SEND;
    }
    return gd_limited(g, b, now, (int)kind);
}

/* ------------------------------------------------------------------------------------------------ */
/* Cookies (wire/cookies.py CookieJar) */

static inline uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The 16-byte server cookie for a client cookie and address at `stamp` (CookieJar.server_cookie). */
static void gd_server_cookie(const guard_t *g, const uint8_t *client, const uint8_t *addr, uint32_t alen,
                             uint32_t stamp, const uint8_t reserved[3], uint8_t out[16]) {
    uint8_t buf[8 + 8 + 16];
    out[0] = 1;
    memcpy(out + 1, reserved, 3);
    out[4] = (uint8_t)(stamp >> 24);
    out[5] = (uint8_t)(stamp >> 16);
    out[6] = (uint8_t)(stamp >> 8);
    out[7] = (uint8_t)stamp;
    memcpy(buf, client, 8);
    memcpy(buf + 8, out, 8);
    memcpy(buf + 16, addr, alen);
    uint64_t mac = siphash24(g->secret, buf, 16 + alen);
    for (int i = 0; i < 8; i++) out[8 + i] = (uint8_t)(mac >> (8 * i));
}

static centry_t *gd_cache_slot(guard_t *g, uint64_t h, const uint8_t *key, uint32_t len) {
    uint32_t at = (uint32_t)h & (COOKIE_SLOTS - 1);
    for (;;) {
        centry_t *e = &g->cache[at];
        if (e->epoch != g->epoch || (e->h == h && e->len == len && memcmp(e->key, key, len) == 0)) return e;
        at = (at + 1) & (COOKIE_SLOTS - 1);
    }
}

static int gd_cache_get(guard_t *g, const uint8_t *key, uint32_t len, uint32_t *stamp) {
    centry_t *e = gd_cache_slot(g, fnv(key, len), key, len);
    if (e->epoch != g->epoch) return 0;
    *stamp = e->stamp;
    return 1;
}

/* CookieJar._remember: bounded, cleared when full (an epoch: no memory is touched). */
static void gd_remember(guard_t *g, const uint8_t *key, uint32_t len, uint32_t stamp) {
    if (g->ncache >= COOKIE_CACHE) {
        g->epoch++;
        g->ncache = 0;
    }
    uint64_t h = fnv(key, len);
    centry_t *e = gd_cache_slot(g, h, key, len);
    if (e->epoch != g->epoch) {
        e->epoch = g->epoch;
        e->h = h;
        e->len = (uint8_t)len;
        memcpy(e->key, key, len);
        g->ncache++;
    }
    e->stamp = stamp;
}

static inline int64_t gd_age(uint32_t stamp, int64_t now) {
    uint32_t diff = (uint32_t)((uint64_t)now - stamp);
    return diff & 0x80000000u ? (int64_t)diff - 0x100000000LL : (int64_t)diff;
}

/* CookieJar._issue: the client cookie and a fresh server cookie (24 bytes into out). */
static void gd_issue(guard_t *g, const uint8_t *client, const uint8_t *addr, uint32_t alen, int64_t now,
                     uint8_t out[24]) {
    static const uint8_t zero[3] = {0, 0, 0};
    uint8_t key[24 + 16];
    memcpy(out, client, 8);
    gd_server_cookie(g, client, addr, alen, (uint32_t)now, zero, out + 8);
    memcpy(key, out, 24);
    memcpy(key + 24, addr, alen);
    gd_remember(g, key, 24 + alen, (uint32_t)now);
}

/* CookieJar.answer: the verdict on a well-formed COOKIE option's data and the data to answer with. */
static int gd_cookie_answer(guard_t *g, const uint8_t *cookie, uint32_t clen, const uint8_t *addr,
                            uint32_t alen, uint8_t *out, uint32_t *outlen) {
    int64_t now = gd_wall(g);
    int verdict = V_CLIENT_ONLY;
    if (clen > 8) {
        uint8_t key[COOKIE_KEY_MAX];
        uint32_t stamp = 0;
        memcpy(key, cookie, clen);
        memcpy(key + clen, addr, alen);
        int found = gd_cache_get(g, key, clen + alen, &stamp);
        if (!found && clen == 24 && cookie[8] == 1) {
            uint8_t mine[16];
            stamp = be32(cookie + 12);
            gd_server_cookie(g, cookie, addr, alen, stamp, cookie + 9, mine);
            if (memcmp(mine, cookie + 8, 16) == 0) {
                found = 1;
                gd_remember(g, key, clen + alen, stamp);
            }
        }
        if (found) {
            int64_t age = gd_age(stamp, now);
            if (age >= -300 && age <= 3600) {
                if (age < 1800) {
                    memcpy(out, cookie, clen);
                    *outlen = clen;
                } else {
                    gd_issue(g, cookie, addr, alen, now, out);
                    *outlen = 24;
                }
                return V_VALID;
            }
        }
        verdict = V_INVALID;
    }
    gd_issue(g, cookie, addr, alen, now, out);
    *outlen = 24;
    return verdict;
}

/* CookieJar.known_valid: by table lookup only. */
static int gd_known_valid(guard_t *g, const uint8_t *cookie, uint32_t clen, const uint8_t *addr, uint32_t alen) {
    uint8_t key[COOKIE_KEY_MAX];
    uint32_t stamp;
    if (clen <= 8) return 0;
    memcpy(key, cookie, clen);
    memcpy(key + clen, addr, alen);
    if (!gd_cache_get(g, key, clen + alen, &stamp)) return 0;
    int64_t age = gd_age(stamp, gd_wall(g));
    return age >= -300 && age <= 3600;
}

/* ------------------------------------------------------------------------------------------------ */
/* Writing responses (wire/guard.py) */

/* wire/cookies.py add_option(reply, COOKIE, value), in place (`r` has room): the new length, or 0 when
   the OPT record does not end the reply (a TSIG-signed one). */
static uint32_t gd_add_cookie(uint8_t *r, uint32_t n, const uint8_t *value, uint32_t vlen) {
    uint32_t start, end;
    if (gd_opt_rdata(r, n, &start, &end) < 0 || end != n) return 0;
    uint32_t size = n - start + 4 + vlen;
    if (size > 0xFFFF) return 0;
    r[start - 2] = (uint8_t)(size >> 8);
    r[start - 1] = (uint8_t)size;
    r[n] = 0;
    r[n + 1] = 10;
    r[n + 2] = (uint8_t)(vlen >> 8);
    r[n + 3] = (uint8_t)vlen;
    memcpy(r + n + 4, value, vlen);
    return n + 4 + vlen;
}

/* Guard._udp_limit, from the query's OPT payload field (512 without OPT) */
static uint32_t gd_udp_limit(const guard_t *g, uint32_t payload) {
    if (payload < 512) payload = 512;
    uint32_t most = g->max_udp > 512 ? g->max_udp : 512;
    return payload < most ? payload : most;
}

static const uint8_t RATE_LIMITED_EDE[6] = {0, 15, 0, 2, 0, 0}; /* wire/ede.py RATE_LIMITED_OPTION */

/* Guard._truncated, written over `r` (room for GUARD_SMALL bytes): its header and question with TC=1,
   its OPT (if any) with the EDE (`ede`) and the cookie. Returns the new length. */
static uint32_t gd_truncated(uint8_t *r, uint32_t n, const uint8_t *cookie, uint32_t clen, int ede) {
    uint8_t out[GUARD_SMALL];
    uint32_t qdcount = be16(r + 4), qend = 12, start, end, w = 12;
    if (qdcount) {
        if (gd_name_end(r, n, 12, &qend) < 0) {
            qdcount = 0;
            qend = 12;
        } else {
            qend += 4;
        }
    }
    if (qend > n) qend = n;
    int has_opt = gd_opt_rdata(r, n, &start, &end) == 0;
    memcpy(out, r, 2);
    out[2] = r[2] | 0x02;
    out[3] = r[3];
    memset(out + 4, 0, 8);
    out[5] = qdcount ? 1 : 0;
    out[11] = has_opt ? 1 : 0;
    memcpy(out + w, r + 12, qend - 12);
    w += qend - 12;
    if (has_opt) {
        uint32_t options = (ede ? 6 : 0) + (clen ? 4 + clen : 0);
        out[w++] = 0;
        memcpy(out + w, r + start - 10, 8);
        w += 8;
        out[w++] = (uint8_t)(options >> 8);
        out[w++] = (uint8_t)options;
        if (ede) {
            memcpy(out + w, RATE_LIMITED_EDE, 6);
            w += 6;
        }
        if (clen) {
            out[w++] = 0;
            out[w++] = 10;
            out[w++] = 0;
            out[w++] = (uint8_t)clen;
            memcpy(out + w, cookie, clen);
            w += clen;
        }
    }
    memcpy(r, out, w);
    return w;
}

static uint32_t gd_address(u128 ip, int v6, uint8_t out[16]) {
    uint32_t alen = v6 ? 16 : 4;
    for (int i = (int)alen - 1; i >= 0; i--) {
        out[i] = (uint8_t)ip;
        ip >>= 8;
    }
    return alen;
}

/* Guard._with_cookie */
static int32_t gd_with_cookie(guard_t *g, uint32_t payload, uint8_t *r, uint32_t n, const uint8_t *data,
                              uint32_t dlen, u128 ip, int v6, int tcp, int limit) {
    uint8_t addr[16], cookie[40];
    uint32_t alen = gd_address(ip, v6, addr), clen = 0;
    int action = G_SEND;
    if (limit && !gd_known_valid(g, data, dlen, addr, alen)) {
        action = gd_decide(g, r, n, ip, v6);
        if (action == G_DROP) return G_DROPPED;
    }
    int verdict = gd_cookie_answer(g, data, dlen, addr, alen, cookie, &clen);
    if (verdict == V_VALID) g->c_valid++;
    else if (verdict == V_INVALID) g->c_invalid++;
    else g->c_new++;
    uint32_t grown = gd_add_cookie(r, n, cookie, clen);
    if (grown) {
        if (!tcp && grown > gd_udp_limit(g, payload)) return (int32_t)gd_truncated(r, grown, cookie, clen, 0);
        n = grown;
    }
    if (!limit) return (int32_t)n;
    if (verdict == V_VALID) {
        g->passed++;
        return (int32_t)n;
    }
    if (action == G_SEND) return (int32_t)n;
    return (int32_t)gd_truncated(r, n, cookie, clen, 1);
}

/* Guard.apply over the response in `r` (n bytes, room for n + GUARD_ROOM and for GUARD_SMALL), changed in
   place: its new length, or G_DROPPED. The caller holds no lock; the guard's mutex is taken here. */
static int32_t guard_apply(guard_t *g, const uint8_t *q, uint32_t qn, uint8_t *r, uint32_t n, u128 ip, int v6,
                           int tcp) {
    int32_t out = (int32_t)n;
    if (n < 12) return out;
    pthread_mutex_lock(&g->mu);
    if (!g->cookies) {
        if (!tcp && g->rrl) {
            int action = gd_decide(g, r, n, ip, v6);
            if (action == G_DROP) out = G_DROPPED;
            else if (action == G_SLIP) out = (int32_t)gd_truncated(r, n, NULL, 0, 1);
        }
        pthread_mutex_unlock(&g->mu);
        return out;
    }
    if ((r[3] & 15) == 1 && gd_learning(q, qn)) r[3] &= 0xF0; /* RFC 7873 5.4: NOERROR and the cookie */
    int limit = !tcp && g->rrl;
    uint32_t start, end;
    if (qn >= 12 && (q[10] || q[11]) && (r[3] & 15) != 1 && gd_opt_rdata(q, qn, &start, &end) == 0) {
        uint32_t at = 0, len = 0;
        if (gd_cookie_in(q, start, end, &at, &len) == V_CLIENT_ONLY) {
            out = gd_with_cookie(g, be16(q + start - 8), r, n, q + at, len, ip, v6, tcp, limit);
            pthread_mutex_unlock(&g->mu);
            return out;
        }
    }
    if (limit) {
        int action = gd_decide(g, r, n, ip, v6);
        if (action == G_DROP) out = G_DROPPED;
        else if (action == G_SLIP) out = (int32_t)gd_truncated(r, n, NULL, 0, 1);
    }
    pthread_mutex_unlock(&g->mu);
    return out;
}

static void guard_decref(guard_t *g) {
    if (g == NULL || __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    if (g->buckets != NULL) gd_buckets_clear(g);
    PyMem_RawFree(g->buckets);
    PyMem_RawFree(g->cache);
    PyMem_RawFree(g->exempt);
    pthread_mutex_destroy(&g->mu);
    PyMem_RawFree(g);
}

/* ------------------------------------------------------------------------------------------------ */
/* Python type: Guard */

typedef struct {
    PyObject_HEAD
    guard_t *g;
} GuardObject;

static PyTypeObject GuardType;

/* Guard(rrl, secret, max_udp_payload): rrl is None or (responses, nxdomains, errors, window, slip,
   ipv4_prefix_length, ipv6_prefix_length, ((v6, network, netmask), ...)); secret is None (cookies off)
   or the 16-byte SipHash key. */
static PyObject *guard_new(PyTypeObject *type, PyObject *args, UNUSED PyObject *kw) {
    PyObject *rrl, *secret;
    unsigned int max_udp;
    if (!PyArg_ParseTuple(args, "OOI", &rrl, &secret, &max_udp)) return NULL;
    guard_t *g = PyMem_RawCalloc(1, sizeof(guard_t));
    if (g == NULL) return PyErr_NoMemory();
    g->refs = 1;
    pthread_mutex_init(&g->mu, NULL);
    g->max_udp = max_udp;
    if (rrl != Py_None) {
        double r, nx, err, window;
        unsigned int slip, v4, v6len;
        PyObject *exempt;
        if (!PyArg_ParseTuple(rrl, "ddddIIIO!", &r, &nx, &err, &window, &slip, &v4, &v6len, &PyTuple_Type,
                              &exempt))
            goto fail;
        if (v4 > 32 || v6len > 128) {
            PyErr_SetString(PyExc_ValueError, "prefix length out of range");
            goto fail;
        }
        g->rrl = 1;
        double rates[4] = {r, nx, err, r}; /* NODATA: the answer rate */
        for (int k = 0; k < 4; k++) {
            g->rates[k] = rates[k];
            g->intervals[k] = rates[k] != 0.0 ? 1.0 / rates[k] : 0.0;
            g->tolerances[k] = 1.0 - g->intervals[k] + 1e-9;
        }
        g->window = window;
        g->slip = slip;
        g->shift4 = 32 - v4;
        g->shift6 = 128 - v6len;
        Py_ssize_t ne = PyTuple_GET_SIZE(exempt);
        g->exempt = PyMem_RawCalloc(ne ? (size_t)ne : 1, sizeof(exempt_t));
        g->buckets = PyMem_RawCalloc(RRL_SLOTS, sizeof(rbucket_t));
        if (g->exempt == NULL || g->buckets == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        for (Py_ssize_t i = 0; i < ne; i++) {
            PyObject *spec = PyTuple_GET_ITEM(exempt, i);
            if (item(spec, 0, 3, "exempt network") == NULL) goto fail;
            int is6 = PyObject_IsTrue(PyTuple_GET_ITEM(spec, 0));
            if (is6 < 0 || as_u128(PyTuple_GET_ITEM(spec, 1), &g->exempt[i].net) < 0 ||
                as_u128(PyTuple_GET_ITEM(spec, 2), &g->exempt[i].mask) < 0)
                goto fail;
            g->exempt[i].v6 = is6;
            g->nexempt = (uint32_t)(i + 1);
        }
    }
    if (secret != Py_None) {
        if (fixed_bytes(secret, g->secret, 16, "cookie secret") < 0) goto fail;
        g->cookies = 1;
        g->epoch = 1; /* calloc'd entries (epoch 0) are empty */
        g->cache = PyMem_RawCalloc(COOKIE_SLOTS, sizeof(centry_t));
        if (g->cache == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
    }
    GuardObject *self = (GuardObject *)type->tp_alloc(type, 0);
    if (self == NULL) goto fail;
    self->g = g;
    return (PyObject *)self;
fail:
    guard_decref(g);
    return NULL;
}

static void guard_dealloc(GuardObject *self) {
    guard_decref(self->g);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* guard.apply(query, reply, ip, v6, tcp) -> bytes | None: wire/guard.py Guard.apply. */
static PyObject *guard_apply_py(GuardObject *self, PyObject *args) {
    Py_buffer q;
    PyObject *reply, *ipobj;
    int v6, tcp;
    u128 ip;
    if (!PyArg_ParseTuple(args, "y*OOpp", &q, &reply, &ipobj, &v6, &tcp)) return NULL;
    PyObject *out = NULL;
    if (parse_ip(ipobj, v6, &ip) < 0 || q.len > 0xFFFF) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "message too long");
        goto done;
    }
    if (reply == Py_None) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    if (!PyBytes_Check(reply) || PyBytes_GET_SIZE(reply) > 0xFFFF) {
        PyErr_SetString(PyExc_TypeError, "reply must be bytes of at most 65535");
        goto done;
    }
    uint32_t n = (uint32_t)PyBytes_GET_SIZE(reply);
    size_t room = (size_t)n + GUARD_ROOM > GUARD_SMALL ? (size_t)n + GUARD_ROOM : GUARD_SMALL;
    uint8_t *buf = PyMem_RawMalloc(room);
    if (buf == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(buf, PyBytes_AS_STRING(reply), n);
    /* The GIL stays held: a UDP thread holding the guard's mutex never waits for it. */
    int32_t r = guard_apply(self->g, q.buf, (uint32_t)q.len, buf, n, ip, v6, tcp);
    if (r == G_DROPPED) out = Py_NewRef(Py_None);
    else if ((uint32_t)r == n && memcmp(buf, PyBytes_AS_STRING(reply), n) == 0) out = Py_NewRef(reply);
    else out = PyBytes_FromStringAndSize((const char *)buf, r);
    PyMem_RawFree(buf);
done:
    PyBuffer_Release(&q);
    return out;
}

/* guard.counts() -> (limited, dropped, slipped, cookie_passed, cookies_new, cookies_valid, cookies_invalid) */
static PyObject *guard_counts(GuardObject *self, UNUSED PyObject *unused) {
    guard_t *g = self->g;
    pthread_mutex_lock(&g->mu);
    unsigned long long v[7] = {g->limited, g->dropped, g->slipped, g->passed, g->c_new, g->c_valid, g->c_invalid};
    pthread_mutex_unlock(&g->mu);
    return Py_BuildValue("KKKKKKK", v[0], v[1], v[2], v[3], v[4], v[5], v[6]);
}

/* guard.pin(monotonic, wall): the clocks a test gives (None: the system's again). */
static PyObject *guard_pin(GuardObject *self, PyObject *args) {
    PyObject *mono, *wall;
    if (!PyArg_ParseTuple(args, "OO", &mono, &wall)) return NULL;
    guard_t *g = self->g;
    if (mono == Py_None || wall == Py_None) {
        pthread_mutex_lock(&g->mu);
        g->pinned = 0;
        pthread_mutex_unlock(&g->mu);
        Py_RETURN_NONE;
    }
    double m = PyFloat_AsDouble(mono), w = PyFloat_AsDouble(wall);
    if (PyErr_Occurred()) return NULL;
    pthread_mutex_lock(&g->mu);
    g->pinned = 1;
    g->mono = m;
    g->wall = w;
    pthread_mutex_unlock(&g->mu);
    Py_RETURN_NONE;
}

/* len(guard): the rate limiter's buckets */
static Py_ssize_t guard_len(GuardObject *self) {
    pthread_mutex_lock(&self->g->mu);
    Py_ssize_t n = self->g->nbuckets;
    pthread_mutex_unlock(&self->g->mu);
    return n;
}

static PyMethodDef guard_methods[] = {
    {"apply", (PyCFunction)guard_apply_py, METH_VARARGS, "the response to send, or None"},
    {"counts", (PyCFunction)guard_counts, METH_NOARGS, "the counters"},
    {"pin", (PyCFunction)guard_pin, METH_VARARGS, "pin the clocks (tests)"},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods guard_sequence = {.sq_length = (lenfunc)guard_len};

static PyTypeObject GuardType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gslbd.wire._cfast.Guard",
    .tp_basicsize = sizeof(GuardObject),
    .tp_dealloc = (destructor)guard_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Guard(rrl, secret, max_udp_payload): cookies and RRL in C (wire/cguard.py).",
    .tp_methods = guard_methods,
    .tp_as_sequence = &guard_sequence,
    .tp_new = guard_new,
};
