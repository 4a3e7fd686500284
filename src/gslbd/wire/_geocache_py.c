/* Included by _cfast.c before the Table methods: the GeoIP prefix cache's Python side (_geocache.c). */

/* table.geo_missed() -> (locator, uid, ip, v6, path) | None: the geo client the last answer() of this
   thread could not place (cleared by every answer() call), for Python to locate and `geo_fill`; `path`
   the indices that lead from the node entry's plan to the geo or pools plan that missed (a shed level,
   a pool's class: ShedPlan.levels, PoolPlan.inner), () for the entry itself. */
static PyObject *table_geo_missed(TableObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    if (!geo_last.set) Py_RETURN_NONE;
    geo_last.set = 0;
    unsigned char bytes[16];
    for (int i = 0; i < 16; i++) bytes[i] = (unsigned char)(geo_last.ip >> (8 * (15 - i)));
    PyObject *ip = _PyLong_FromByteArray(bytes, 16, 0, 0);
    if (ip == NULL) return NULL;
    int depth = geo_last.path[0] < 0 ? 0 : geo_last.path[1] < 0 ? 1 : 2;
    PyObject *path = PyTuple_New(depth);
    if (path == NULL) {
        Py_DECREF(ip);
        return NULL;
    }
    for (int i = 0; i < depth; i++) {
        PyObject *at = PyLong_FromLong(geo_last.path[i]);
        if (at == NULL) {
            Py_DECREF(ip);
            Py_DECREF(path);
            return NULL;
        }
        PyTuple_SET_ITEM(path, i, at);
    }
    return Py_BuildValue("(IKNON)", geo_last.lpm, (unsigned long long)geo_last.uid, ip,
                         geo_last.v6 ? Py_True : Py_False, path);
}

/* table.geo_fill(locator, uid, ip, v6, class, scope): keep Python's class and scope for that client. */
static PyObject *table_geo_fill(TableObject *self, PyObject *args) {
    unsigned int which, scope;
    unsigned long long uid;
    PyObject *ipobj;
    int v6, cls;
    u128 ip;
    if (!PyArg_ParseTuple(args, "IKOpiI", &which, &uid, &ipobj, &v6, &cls, &scope)) return NULL;
    if (parse_ip(ipobj, v6, &ip) < 0) return NULL;
    const base_t *b = self->t->base;
    if (which >= b->nlpm) {
        PyErr_SetString(PyExc_ValueError, "no such locator");
        return NULL;
    }
    if (geo_fill(&b->lpms[which], uid, ip, v6, cls, scope) < 0) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

/* geo_counts() -> (hits, misses, fills): the GeoIP prefix cache's counters, for the process. */
static PyObject *geo_counts(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    return Py_BuildValue("(KKK)", (unsigned long long)ATOMIC_LOAD(&geo_hits),
                         (unsigned long long)ATOMIC_LOAD(&geo_misses), (unsigned long long)ATOMIC_LOAD(&geo_fills));
}
