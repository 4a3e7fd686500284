/*
 * dnstap from the C UDP loop (included by _cfast.c; docs/wire.md, "dnstap written by the C loop").
 *
 * TapRing(entries, size, queries, responses): a bounded ring of exchanges, filled by C UDP loops and
 * emptied by the dnstap writer thread (server/dnstap/sink.py), which encodes them with message.py as it
 * encodes what Python answers. A UdpLoop given a ring writes one record per datagram it received
 * (tap_batch, after the batch's sendmmsg): the query (when `queries`), the response it sent (when
 * `responses`; none for a datagram it dropped), the client's address, port and family, and the batch's
 * receive and send times (CLOCK_REALTIME, one read each per batch). A datagram longer than the receive buffer
 * (answered FORMERR, its query cut) is not written, as the Python loops never gave it to the dnstap
 * wrapper either.
 *
 * Concurrency: one pthread mutex per ring (several loops may share one ring; no lock-free scheme). A
 * loop takes it once per batch and only copies bytes while holding it; `drain` takes it once, copies up
 * to `max` records out and releases it before creating any Python object (so no GIL is ever awaited with
 * the mutex held). There is one consumer: `drain` never releases the GIL, so two Python threads cannot
 * drain at once. The ring never blocks a producer: an exchange that does not fit (`entries` records, or
 * `size` bytes) is dropped and counted (`counts()`), and the writer adds those to dnstap_dropped.
 *
 * Layout: records of TAP_HDR bytes of header followed by the query and the response, each a multiple of
 * 8 bytes, never split at the end of the buffer. When a record does not fit before the end, the rest of
 * the buffer becomes padding (a header with qlen TAP_PAD when there is room for one; a gap shorter than a
 * header needs no marker: no record fits there) and the record goes to the start.
 */

#define TAP_HDR 48u
#define TAP_PAD 0xFFFFFFFFu  /* in qlen: padding up to the end of the buffer */
#define TAP_NONE 0xFFFFFFFFu /* in rlen: no response */

typedef struct {
    uint32_t size; /* the whole record, header included, a multiple of 8 */
    uint32_t qlen;
    uint32_t rlen;
    uint8_t v6, tcp;
    uint16_t port; /* the client's (0: not known) */
    uint64_t ip_hi, ip_lo;
    int64_t t_query, t_response; /* ns since the epoch */
} taprec_t;

_Static_assert(sizeof(taprec_t) == TAP_HDR, "taprec_t is TAP_HDR bytes");

typedef struct {
    PyObject_HEAD
    pthread_mutex_t mu;
    uint8_t *buf;
    size_t cap, head, tail, used; /* bytes: the buffer, the oldest record, where the next goes, in use */
    uint64_t count, max_count;    /* records */
    uint64_t dropped;             /* exchanges that did not fit, since the ring was made */
    int queries, responses;       /* what the writer encodes: the bytes worth keeping */
} TapObject;

static PyTypeObject TapType;

static inline int64_t tap_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Room for a record of `need` bytes (the mutex held), or NULL when it does not fit. */
static uint8_t *tap_reserve(TapObject *t, size_t need) {
    uint8_t *at;
    if (t->count >= t->max_count || need > t->cap) return NULL;
    if (t->count == 0) t->head = t->tail = t->used = 0;
    if (t->used < t->cap && t->tail >= t->head) { /* free: [tail, cap) and [0, head) */
        size_t end = t->cap - t->tail;
        if (need <= end) {
            at = t->buf + t->tail;
            t->tail += need;
        } else if (need <= t->head) {
            if (end >= TAP_HDR) {
                taprec_t *pad = (taprec_t *)(t->buf + t->tail);
                pad->size = (uint32_t)end;
                pad->qlen = TAP_PAD;
            }
            t->used += end;
            at = t->buf;
            t->tail = need;
        } else {
            return NULL;
        }
    } else if (t->tail < t->head && need <= t->head - t->tail) { /* free: [tail, head) */
        at = t->buf + t->tail;
        t->tail += need;
    } else {
        return NULL;
    }
    if (t->tail == t->cap) t->tail = 0;
    t->used += need;
    t->count++;
    return at;
}

/* Write one exchange (the mutex held); 0 when it did not fit (counted). */
static int tap_put(TapObject *t, const uint8_t *q, uint32_t qlen, const uint8_t *r, uint32_t rlen, int has_r,
                   u128 ip, int v6, int tcp, uint16_t port, int64_t tq, int64_t tr) {
    if (!t->queries) qlen = 0;
    if (!t->responses) has_r = 0;
    if (!has_r) rlen = 0;
    if (!t->queries && !has_r) return 1; /* nothing the writer would encode */
    size_t need = align8((size_t)TAP_HDR + qlen + rlen);
    uint8_t *at = tap_reserve(t, need);
    if (at == NULL) {
        t->dropped++;
        return 0;
    }
    taprec_t *rec = (taprec_t *)at;
    rec->size = (uint32_t)need;
    rec->qlen = qlen;
    rec->rlen = has_r ? rlen : TAP_NONE;
    rec->v6 = (uint8_t)(v6 != 0);
    rec->tcp = (uint8_t)(tcp != 0);
    rec->port = port;
    rec->ip_hi = (uint64_t)(ip >> 64);
    rec->ip_lo = (uint64_t)ip;
    rec->t_query = tq;
    rec->t_response = tr;
    if (qlen) memcpy(at + TAP_HDR, q, qlen);
    if (rlen) memcpy(at + TAP_HDR + qlen, r, rlen);
    return 1;
}

static void tap_address(const struct sockaddr_storage *sa, u128 *ip, int *v6, uint16_t *port) {
    *ip = 0;
    *port = 0;
    *v6 = sa->ss_family == AF_INET6;
    if (*v6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        for (int i = 0; i < 16; i++) *ip = *ip << 8 | in6->sin6_addr.s6_addr[i];
        *port = ntohs(in6->sin6_port);
    } else if (sa->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        *ip = ntohl(in->sin_addr.s_addr);
        *port = ntohs(in->sin_port);
    }
}

/* What a UdpLoop received and sent in one batch, into the ring: `msgs`/`iovs` the `got` datagrams received
   at `tq`, `smsgs` the `nsend` replies (each names its datagram by its msg_name, &addrs[i]). Takes the
   mutex once; never blocks on anything else. */
static void tap_batch(TapObject *t, const struct mmsghdr *msgs, const struct iovec *iovs, int got,
                      const struct mmsghdr *smsgs, int nsend, const struct sockaddr_storage *addrs,
                      int64_t tq) {
    int reply_of[BATCH];
    int i;
    for (i = 0; i < got; i++) reply_of[i] = -1;
    for (i = 0; i < nsend; i++) {
        long at = (long)((const struct sockaddr_storage *)smsgs[i].msg_hdr.msg_name - addrs);
        if (at >= 0 && at < got) reply_of[at] = i;
    }
    int64_t tr = tap_now();
    pthread_mutex_lock(&t->mu);
    for (i = 0; i < got; i++) {
        if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) continue; /* a cut query: not logged */
        u128 ip;
        uint16_t port;
        int v6, k = reply_of[i];
        tap_address(&addrs[i], &ip, &v6, &port);
        const struct iovec *r = k >= 0 ? smsgs[k].msg_hdr.msg_iov : NULL;
        tap_put(t, iovs[i].iov_base, msgs[i].msg_len, r ? r->iov_base : NULL, r ? (uint32_t)r->iov_len : 0,
                r != NULL, ip, v6, 0, port, tq, tr);
    }
    pthread_mutex_unlock(&t->mu);
}

static PyObject *tap_new(PyTypeObject *type, PyObject *args, UNUSED PyObject *kw) {
    unsigned long long entries, size;
    int queries, responses;
    if (!PyArg_ParseTuple(args, "KKpp", &entries, &size, &queries, &responses)) return NULL;
    if (entries < 1 || size < 4096 || size > ((unsigned long long)1 << 40)) {
        PyErr_SetString(PyExc_ValueError, "TapRing: entries >= 1 and 4096 <= size <= 2**40");
        return NULL;
    }
    TapObject *self = (TapObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->cap = (size_t)size & ~(size_t)7;
    self->buf = PyMem_RawMalloc(self->cap); /* untouched pages cost no memory until written */
    if (self->buf == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    pthread_mutex_init(&self->mu, NULL);
    self->max_count = entries;
    self->queries = queries;
    self->responses = responses;
    return (PyObject *)self;
}

static void tap_dealloc(TapObject *self) {
    if (self->buf != NULL) {
        pthread_mutex_destroy(&self->mu);
        PyMem_RawFree(self->buf);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *tap_ip(uint64_t hi, uint64_t lo, int v6) {
    if (!v6) return PyLong_FromUnsignedLongLong((unsigned long long)lo);
    unsigned char bytes[16];
    for (int i = 0; i < 8; i++) {
        bytes[i] = (unsigned char)(hi >> (56 - 8 * i));
        bytes[8 + i] = (unsigned char)(lo >> (56 - 8 * i));
    }
    return _PyLong_FromByteArray(bytes, 16, 0, 0);
}

/* drain(max) -> [(query, response | None, ip, v6, tcp, query ns, response ns, port)]: the oldest `max`
   at most, removed from the ring (sink.Entry, as the Python query path queues them). */
static PyObject *tap_drain(TapObject *self, PyObject *arg) {
    Py_ssize_t max = PyLong_AsSsize_t(arg);
    if (max < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "drain(max): max >= 0");
        return NULL;
    }
    pthread_mutex_lock(&self->mu);
    size_t bytes = 0, head = self->head;
    uint64_t n = 0, skipped = 0;
    while (n < self->count && (Py_ssize_t)n < max) { /* the records to take, and their bytes */
        if (self->cap - head < TAP_HDR) {
            skipped += self->cap - head;
            head = 0;
        }
        const taprec_t *rec = (const taprec_t *)(self->buf + head);
        if (rec->qlen == TAP_PAD) {
            skipped += rec->size;
            head = 0;
            continue;
        }
        bytes += rec->size;
        head += rec->size;
        if (head == self->cap) head = 0;
        n++;
    }
    uint8_t *copy = n ? PyMem_RawMalloc(bytes) : NULL;
    if (n && copy == NULL) {
        pthread_mutex_unlock(&self->mu);
        return PyErr_NoMemory();
    }
    size_t at = 0;
    for (uint64_t i = 0; i < n;) { /* the same walk, copying */
        if (self->cap - self->head < TAP_HDR) self->head = 0;
        const taprec_t *rec = (const taprec_t *)(self->buf + self->head);
        if (rec->qlen == TAP_PAD) {
            self->head = 0;
            continue;
        }
        memcpy(copy + at, rec, rec->size);
        at += rec->size;
        self->head += rec->size;
        if (self->head == self->cap) self->head = 0;
        i++;
    }
    self->used -= bytes + skipped;
    self->count -= n;
    pthread_mutex_unlock(&self->mu);
    PyObject *out = PyList_New((Py_ssize_t)n);
    at = 0;
    for (uint64_t i = 0; out != NULL && i < n; i++) {
        const taprec_t *rec = (const taprec_t *)(copy + at);
        const char *q = (const char *)(copy + at + TAP_HDR);
        PyObject *response = Py_None;
        if (rec->rlen != TAP_NONE) response = PyBytes_FromStringAndSize(q + rec->qlen, rec->rlen);
        else Py_INCREF(response);
        PyObject *entry = response == NULL ? NULL
                                           : Py_BuildValue("(y#NNOOLLi)", q, (Py_ssize_t)rec->qlen, response,
                                                           tap_ip(rec->ip_hi, rec->ip_lo, rec->v6),
                                                           rec->v6 ? Py_True : Py_False,
                                                           rec->tcp ? Py_True : Py_False,
                                                           (long long)rec->t_query, (long long)rec->t_response,
                                                           (int)rec->port);
        if (entry == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)i, entry);
        at += rec->size;
    }
    PyMem_RawFree(copy);
    return out;
}

/* put(query, response | None, ip, v6, tcp, query ns, response ns, port=0) -> bool: what a loop writes, from
   Python (tests, scripts/fuzz_cfast.py); False when it did not fit (counted as dropped). */
static PyObject *tap_put_py(TapObject *self, PyObject *args) {
    Py_buffer q, r = {0};
    PyObject *response, *ipobj;
    int v6, tcp, port = 0;
    long long tq, tr;
    u128 ip;
    if (!PyArg_ParseTuple(args, "y*OOppLL|i", &q, &response, &ipobj, &v6, &tcp, &tq, &tr, &port)) return NULL;
    int has_r = response != Py_None;
    int ok = -1;
    if (port < 0 || port > 65535) {
        PyErr_SetString(PyExc_ValueError, "TapRing.put: port outside 0-65535");
        goto done;
    }
    if (has_r && PyObject_GetBuffer(response, &r, PyBUF_SIMPLE) < 0) goto done;
    if (as_u128(ipobj, &ip) < 0) goto done;
    if (q.len > UINT32_MAX / 4 || (has_r && r.len > UINT32_MAX / 4)) {
        PyErr_SetString(PyExc_ValueError, "TapRing.put: message too long");
        goto done;
    }
    pthread_mutex_lock(&self->mu);
    ok = tap_put(self, q.buf, (uint32_t)q.len, has_r ? r.buf : NULL, has_r ? (uint32_t)r.len : 0, has_r, ip,
                 v6, tcp, (uint16_t)port, tq, tr);
    pthread_mutex_unlock(&self->mu);
done:
    PyBuffer_Release(&q);
    if (has_r && r.obj != NULL) PyBuffer_Release(&r);
    if (ok < 0) return NULL;
    return PyBool_FromLong(ok);
}

/* counts() -> (queued, dropped): records waiting, exchanges dropped since the ring was made. */
static PyObject *tap_counts(TapObject *self, UNUSED PyObject *unused) {
    pthread_mutex_lock(&self->mu);
    unsigned long long queued = self->count, dropped = self->dropped;
    pthread_mutex_unlock(&self->mu);
    return Py_BuildValue("KK", queued, dropped);
}

static Py_ssize_t tap_len(TapObject *self) {
    pthread_mutex_lock(&self->mu);
    Py_ssize_t n = (Py_ssize_t)self->count;
    pthread_mutex_unlock(&self->mu);
    return n;
}

static PyMethodDef tap_methods[] = {
    {"drain", (PyCFunction)tap_drain, METH_O, "drain(max) -> the oldest exchanges, removed"},
    {"put", (PyCFunction)tap_put_py, METH_VARARGS,
     "put(query, response, ip, v6, tcp, tq, tr, port=0) -> fitted"},
    {"counts", (PyCFunction)tap_counts, METH_NOARGS, "counts() -> (queued, dropped)"},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods tap_sequence = {.sq_length = (lenfunc)tap_len};

static PyTypeObject TapType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gslbd.wire._cfast.TapRing",
    .tp_basicsize = sizeof(TapObject),
    .tp_dealloc = (destructor)tap_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "TapRing(entries, size, queries, responses): the C UDP loops' dnstap exchanges (_tap.c).",
    .tp_methods = tap_methods,
    .tp_as_sequence = &tap_sequence,
    .tp_new = tap_new,
};
