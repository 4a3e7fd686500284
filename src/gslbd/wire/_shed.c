/* shed_load in the C table (policy/load.py ShedPlan, issue 23 item 5). Included from _cfast.c after
   build_entry; the dispatch lines there call the three functions below (declared before their callers).

   A shed entry (kind K_SHED) holds no variant of its own: its parameters are `nlev` level entries, each
   the policy's own entry over one candidate set (built by build_entry from the level's spec, with the
   level's slice of the Python entry's variants), then the `nlev - 1` upper bounds of the levels' bands
   of the draw. Per query: one uniform draw u (the caller's PRNG, or the test's draw) picks the level,
   bisect_right(bounds, u) as ShedPlan.pick does; then the level answers as an entry of its kind, with the
   shed entry's counter as its `seq` (the level entries have no counter of their own and no policy id: the
   shed entry counts the answers for the metric). A level C cannot answer (a plan kind it does not know)
   sends the query to Python before anything is counted; so does a client some level cannot place yet
   (shed_scope: the GeoIP prefix cache learns it level by level). A level may be a pools entry whose
   pools' plans draw, hash or are geo (_pools.c): the levels of a service with pools and shed_load.

   Spec: (K_SHED, policy, locdep, (), (bounds, levels)) with `levels` entry specs of plan kinds. */

static inline entry_t **shed_levels(const entry_t *e) { return (entry_t **)entry_params(e); }
static inline const double *shed_bounds(const entry_t *e) {
    return (const double *)(shed_levels(e) + e->nlev);
}

/* The level entry answering this query (NULL: ask Python), `sub` the choice it answers with, `index` its
   place among the levels. */
static entry_t *shed_level(entry_t *e, const choice_t *ch, choice_t *sub, int32_t *index) {
    double u = ch->draw >= 0 ? ch->draw : draw_of(ch->rng);
    const double *bounds = shed_bounds(e);
    uint32_t lo = 0, hi = e->nlev - 1;
    while (lo < hi) { /* bisect_right */
        uint32_t mid = (lo + hi) / 2;
        if (u < bounds[mid]) hi = mid;
        else lo = mid + 1;
    }
    entry_t *l = shed_levels(e)[lo];
    if (l->kind == K_PYTHON) return NULL;
    *sub = *ch;
    sub->seq = ch->seq >= 0 ? ch->seq : (int64_t)(ATOMIC_ADD(&e->counter, 1) & INT64_MAX);
    *index = (int32_t)lo;
    return l;
}

/* The ECS scope of a shed entry's answer for (ip, v6): the largest of its levels' (policy/scope.py
   plan_scope of a ShedPlan), since the draw, not the client, picks the level: a geo or pools level's
   placement (its class's scope and its pool plan's, geo_locate), a hash level's /24 or /56, 0 for the
   others (location-independent plans); -1 (ask Python) where a level cannot place the client yet: a
   client only Python places (GeoIP, pools rules on the address) misses in the prefix cache with the
   level's path, and Python fills it (CTable.learn), one level per query, before anything is counted.
   A hit here is not counted: the chosen level's lookup in plan_answer counts it. */
static int64_t shed_scope(const base_t *b, const entry_t *e, u128 ip, int v6) {
    uint32_t most = 0, loc = 0;
    const lpm_t *located = NULL; /* the levels share the service's locator: found once per query */
    for (uint32_t i = 0; i < e->nlev; i++) {
        const entry_t *l = shed_levels(e)[i];
        uint32_t s = 0;
        if (l->kind == K_GEO) {
            if (l->lpm != located) {
                located = l->lpm;
                loc = lpm_find(located, ip, v6);
            }
            placed_t at;
            if (loc >= l->nloc || geo_locate(b, l, loc, ip, v6, (int32_t)i, 0, &at) < 0) return -1;
            s = at.scope;
        } else if (l->kind == K_HASH || l->kind == K_WHASH) {
            s = v6 ? GEO_SHORT6 : GEO_SHORT4;
        }
        if (s > most) most = s;
    }
    return most;
}
/* Drops the levels' references (entry_decref of a shed entry). */
static void shed_release(entry_t *e, totals_t *totals) {
    for (uint32_t i = 0; i < e->nlev; i++) entry_decref(shed_levels(e)[i], totals);
    e->nlev = 0;
}

static entry_t *build_shed(PyObject *spec, bctx_t *c, long policy, int locdep) {
    PyObject *variants = PyTuple_GET_ITEM(spec, 3), *param = PyTuple_GET_ITEM(spec, 4);
    PyObject *bounds = item(param, 0, 2, "shed param"); /* (bounds, levels) */
    Py_ssize_t nb, nl;
    if (bounds == NULL || (nb = tuple_len(bounds, "bounds")) < 0 ||
        (nl = tuple_len(PyTuple_GET_ITEM(param, 1), "levels")) < 0 || tuple_len(variants, "variants") < 0)
        return NULL;
    PyObject *levels = PyTuple_GET_ITEM(param, 1);
    if (nl < 1 || nl > 0xFFFF || nb != nl - 1 || PyTuple_GET_SIZE(variants) != 0) {
        PyErr_SetString(PyExc_ValueError, "a shed entry has 1..65535 levels, one bound fewer, no variants");
        return NULL;
    }
    void *params;
    size_t extra = (size_t)nl * sizeof(entry_t *) + (size_t)nb * sizeof(double);
    entry_t *e = new_entry(c, variants, extra, &params);
    if (e == NULL) return NULL;
    e->kind = K_SHED;
    e->policy = (uint16_t)policy;
    e->locdep = (uint8_t)locdep;
    e->nlev = 0;
    double *at = (double *)((entry_t **)params + nl);
    for (Py_ssize_t i = 0; i < nb; i++) {
        at[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(bounds, i));
        if (PyErr_Occurred()) goto fail;
        if (!(at[i] >= 0.0 && at[i] <= 1.0) || (i > 0 && at[i] < at[i - 1])) {
            PyErr_SetString(PyExc_ValueError, "shed bounds must rise within [0, 1]");
            goto fail;
        }
    }
    for (Py_ssize_t i = 0; i < nl; i++) {
        PyObject *ls = PyTuple_GET_ITEM(levels, i);
        long kind = PyTuple_Check(ls) && PyTuple_GET_SIZE(ls) == 5 ? PyLong_AsLong(PyTuple_GET_ITEM(ls, 0)) : -1;
        if (PyErr_Occurred()) goto fail;
        if (kind <= K_NONE || kind >= K_SHED) {
            PyErr_SetString(PyExc_ValueError, "a shed level must be a plan's entry spec");
            goto fail;
        }
        entry_t *l = build_entry(ls, c);
        if (l == NULL) goto fail;
        ((entry_t **)params)[i] = l;
        e->nlev = (uint32_t)(i + 1);
        e->neg |= l->neg;
        e->nx |= l->nx;
    }
    return e;
fail:
    shed_release(e, NULL);
    e->kind = K_NONE;
    entry_decref(e, NULL);
    return NULL;
}
