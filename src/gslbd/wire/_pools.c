/* Pools whose inner policy draws, hashes or is geo in the C table (policy/pools.py PoolPlan, issue 23
   item 5). Included from _cfast.c after _shed.c; the geo entry's dispatch line there calls geo_locate.

   A pools plan whose pools' plans pick by the query counter alone is a plain geo entry (a class per
   client, then seq % the class's rotations). When a pool's plan draws or hashes (weighted, random,
   hash, weighted hash) or is geo, the geo entry is `pooled`: after its class arrays it holds one entry
   per class, the pool's own plan over that class's slice of the variants (built by build_entry from the
   class's spec, as a shed entry holds its levels). Per query the client's class is found as for geo
   (per topology network, or the GeoIP prefix cache for rules on the address or the ASN), then the
   class's entry answers as an entry of its kind with the geo entry's counter as its `seq` and the
   query's draw, exactly as PoolPlan.pick lets the pool's plan pick. A pool's geo plan is a geo entry on
   the same locator: the client's location id (found once) gives its class there too, or the prefix
   cache under that entry's uid (the miss's path names the pool's class, so that Python places the
   client with that pool's GeoPlan: CTable.learn). The ECS scope is the larger of the class's scope and
   the pool plan's own (a hash's /24 or /56, a geo plan's location scope), as policy/scope.py's
   _pool_scope.

   Spec: (K_GEO, policy, locdep, variants, (locator, starts, counts, class_of, inner)) with `inner` one
   entry spec per class, of the kinds fixed, rotate, weighted, shuffle, hash, whash or geo (not pooled,
   the same locator). */

static inline entry_t **pool_inners(const entry_t *e) {
    size_t arrays = align8((2 * (size_t)e->nclass + e->nloc) * sizeof(uint32_t));
    return (entry_t **)(void *)((uint8_t *)entry_params(e) + arrays);
}

/* The class of geo entry `e`'s client at location id `loc` (< e->nloc) and its scope; -1: Python must
   place it (a prefix cache miss, recorded with `path`; `count`: count a hit). */
static int32_t geo_place(const base_t *b, const entry_t *e, uint32_t loc, u128 ip, int v6, const int32_t path[2],
                         int count, uint32_t *scope) {
    const uint32_t *counts = (const uint32_t *)entry_params(e) + e->nclass;
    int32_t c = ((const int32_t *)(counts + e->nclass))[loc];
    if (c < 0)
        c = geo_cached(e->lpm, (uint32_t)(e->lpm - b->lpms), e->uid, ip, v6, path, count, scope);
    else
        *scope = geo_scope(e->lpm, loc, ip, v6);
    return c >= 0 && (uint32_t)c < e->nclass ? c : -1;
}

/* Places the client at location id `loc` (< e->nloc) in geo entry `e` (`level`: its index in a shed
   entry, else -1): its class, for a pooled entry whose class's plan is geo the class in that plan too,
   and the scope of both (with a hashing pool plan's /24 or /56). 0, or -1 when Python must place it. */
static int geo_locate(const base_t *b, const entry_t *e, uint32_t loc, u128 ip, int v6, int32_t level, int count,
                      placed_t *out) {
    int32_t path[2] = {level, -1};
    out->sub = -1;
    if ((out->cls = geo_place(b, e, loc, ip, v6, path, count, &out->scope)) < 0) return -1;
    if (!e->pooled_n) return 0;
    const entry_t *in = pool_inners(e)[out->cls];
    uint32_t s = 0;
    if (in->kind == K_GEO) {
        path[level < 0 ? 0 : 1] = out->cls;
        if ((out->sub = geo_place(b, in, loc, ip, v6, path, count, &s)) < 0) return -1;
    } else if (in->kind == K_HASH || in->kind == K_WHASH) {
        s = v6 ? GEO_SHORT6 : GEO_SHORT4;
    }
    if (s > out->scope) out->scope = s;
    return 0;
}

/* Drops the classes' references (entry_decref of a pooled geo entry). */
static void pool_release(entry_t *e, totals_t *totals) {
    entry_t **inner = pool_inners(e);
    for (uint32_t i = 0; i < e->pooled_n; i++) entry_decref(inner[i], totals);
    e->pooled_n = 0;
}

/* Builds the classes' entries of a pooled geo entry from `inner` (one spec per class); -1 on error. */
static int build_pool_inners(entry_t *e, PyObject *inner, bctx_t *c) {
    if (tuple_len(inner, "pool inner") < 0) return -1;
    if ((uint32_t)PyTuple_GET_SIZE(inner) != e->nclass) {
        PyErr_SetString(PyExc_ValueError, "a pooled geo entry needs one inner entry per class");
        return -1;
    }
    entry_t **at = pool_inners(e);
    for (uint32_t i = 0; i < e->nclass; i++) {
        PyObject *s = PyTuple_GET_ITEM(inner, i);
        long kind = PyTuple_Check(s) && PyTuple_GET_SIZE(s) == 5 ? PyLong_AsLong(PyTuple_GET_ITEM(s, 0)) : -1;
        if (PyErr_Occurred()) return -1;
        if (kind <= K_NONE || kind >= K_PYTHON) {
            PyErr_SetString(PyExc_ValueError, "a pool's inner entry must be a drawing, rotating or geo plan's spec");
            return -1;
        }
        entry_t *l = build_entry(s, c);
        if (l == NULL) return -1;
        if (l->kind == K_PYTHON || l->kind == K_SHED ||
            (l->kind == K_GEO && (l->pooled_n || l->lpm != e->lpm || l->nloc != e->nloc))) {
            entry_decref(l, NULL);
            PyErr_SetString(PyExc_ValueError, "a pool's inner entry must be a plan C answers (geo: on the pools' locator)");
            return -1;
        }
        at[i] = l;
        e->pooled_n = i + 1;
        e->neg |= l->neg;
        e->nx |= l->nx;
    }
    return 0;
}
