/* Pools whose inner policy draws in the C table (policy/pools.py PoolPlan, issue 23 item 5). Included
   from _cfast.c after _shed.c; the geo entry's dispatch line there calls pool_inner.

   A pools plan whose pools' plans pick by the query counter alone is a plain geo entry (a class per
   client, then seq % the class's rotations). When a pool's plan draws or hashes (weighted, random,
   hash, weighted hash), the geo entry is `pooled`: after its class arrays it holds one entry per class,
   the pool's own plan over that class's slice of the variants (built by build_entry from the class's
   spec, as a shed entry holds its levels). Per query the client's class is found as for geo (per
   topology network, or the GeoIP prefix cache for rules on the address or the ASN), then the class's
   entry answers as an entry of its kind with the geo entry's counter as its `seq` and the query's draw,
   exactly as PoolPlan.pick lets the pool's plan pick. The ECS scope is the larger of the class's scope
   and the pool plan's own (a hash's /24 or /56), as policy/scope.py's _pool_scope.

   Spec: (K_GEO, policy, locdep, variants, (locator, starts, counts, class_of, inner)) with `inner` one
   entry spec per class, of the kinds fixed, rotate, weighted, shuffle, hash or whash. */

static inline entry_t **pool_inners(const entry_t *e) {
    size_t arrays = align8((2 * (size_t)e->nclass + e->nloc) * sizeof(uint32_t));
    return (entry_t **)(void *)((uint8_t *)entry_params(e) + arrays);
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
        if (kind <= K_NONE || kind == K_GEO || kind >= K_PYTHON) {
            PyErr_SetString(PyExc_ValueError, "a pool's inner entry must be a drawing or rotating plan's spec");
            return -1;
        }
        entry_t *l = build_entry(s, c);
        if (l == NULL) return -1;
        if (l->kind == K_PYTHON || l->kind == K_GEO || l->kind == K_SHED) {
            entry_decref(l, NULL);
            PyErr_SetString(PyExc_ValueError, "a pool's inner entry must be a plan C answers");
            return -1;
        }
        at[i] = l;
        e->pooled_n = i + 1;
        e->neg |= l->neg;
        e->nx |= l->nx;
    }
    return 0;
}
