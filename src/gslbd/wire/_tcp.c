/* Included by _cfast.c (after the Slot type): DNS over TCP answered from the same C table as UDP.

   Python type TcpAnswerer(slot, seed, tap=None): `answer(buffer, start, ip, v6, port=0)` reads the
   length-prefixed messages (RFC 1035 4.2.2) of a TCP stream's buffer from `start` and answers each
   complete one from the slot's current table, as the UDP loop does (plan_answer with tcp set: never TC, the table's guard with tcp
   set: cookies, no RRL; a message that cannot be a valid query answered by reject_answer), until the
   buffer holds no complete message or C meets one it leaves to Python. It stops there, so that Python
   answers that one in its place in the stream and every counter is what the one-message-at-a-time loop
   counted (server/tcp.py calls it again after Python's answer). Returns

       (out, pos, answered, rcodes, pending)

   out: the framed answers (two-byte length, then the message), in the order of the queries; pos: where
   the unconsumed rest of the buffer starts; answered: how many C answered; rcodes: ((rcode, count), ...)
   of those; pending: None (no complete message left), the message Python must answer next (bytes,
   without its prefix; pos is past it), or False: C drops it (not a query: shorter than a header or QR
   set), which closes the connection as Python's drop does (pos is past it).

   What C declines here is what the UDP loop declines (plan_answer, then reject_answer; every message
   while the table leaves everything to Python, FB_ALL), plus an answer longer than 65,535 bytes with its
   cookie (Python closes the connection for that). Called on the event loop's thread with the GIL held
   (the buffer is a bytearray the protocol owns); the rotation counters are the table's atomics, the
   random draws this answerer's own splitmix64 state (as each UDP loop has its own).

   With a dnstap ring `tap` (_tap.c), each call writes what C did into it, marked TCP, under one lock:
   every message it answered (the query and its answer, unframed) and the one it drops (the query, no
   response), all with the client's `port`, the call's start as query time and its end as response
   time. The message left to
   Python is not written: server/tcp.py writes it with Python's answer, so each exchange is logged once. */

#define TCP_MAX_MESSAGE 65535

typedef struct {
    PyObject_HEAD
    PyObject *slot;
    TapObject *tap; /* dnstap: every exchange C answers or drops into this ring, or NULL */
    uint64_t rng;
} TcpObject;

static PyObject *tcp_new(PyTypeObject *type, PyObject *args, UNUSED PyObject *kw) {
    PyObject *slot, *tap = Py_None;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "O!K|O", &SlotType, &slot, &seed, &tap)) return NULL;
    if (tap != Py_None && !PyObject_TypeCheck(tap, &TapType)) {
        PyErr_SetString(PyExc_TypeError, "TcpAnswerer: tap must be a TapRing or None");
        return NULL;
    }
    TcpObject *self = (TcpObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->slot = Py_NewRef(slot);
    self->tap = tap == Py_None ? NULL : (TapObject *)Py_NewRef(tap);
    self->rng = seed;
    return (PyObject *)self;
}

static void tcp_dealloc(TcpObject *self) {
    Py_XDECREF(self->slot);
    Py_XDECREF(self->tap);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

typedef struct {
    uint8_t *p;
    size_t len, cap;
} tcp_out_t;

/* Room for `more` bytes after len: 0, or -1 (no memory). */
static int tcp_room(tcp_out_t *o, size_t more) {
    if (o->len + more <= o->cap) return 0;
    size_t cap = o->cap ? o->cap : 4096;
    while (cap < o->len + more) cap *= 2;
    uint8_t *p = PyMem_RawRealloc(o->p, cap);
    if (p == NULL) return -1;
    o->p = p;
    o->cap = cap;
    return 0;
}

enum { TCP_ANSWERED = 0, TCP_PYTHON = 1, TCP_DROP = 2, TCP_NOMEM = 3 };

/* The `answered` messages framed in d from `start` and their framed answers in out, then (with `drop`)
   the query at `drop_at` (its length `drop_len`) without a response, into the ring under one lock. */
static void tcp_tap(TapObject *tap, const uint8_t *d, size_t start, const tcp_out_t *out, uint64_t answered,
                    int drop, size_t drop_at, uint32_t drop_len, u128 ip, int v6, uint16_t port, int64_t tq) {
    int64_t tr = tap_now();
    size_t q = start, r = 0;
    pthread_mutex_lock(&tap->mu);
    for (uint64_t i = 0; i < answered; i++) {
        uint32_t qlen = (uint32_t)d[q] << 8 | d[q + 1];
        uint32_t rlen = (uint32_t)out->p[r] << 8 | out->p[r + 1];
        tap_put(tap, d + q + 2, qlen, out->p + r + 2, rlen, 1, ip, v6, 1, port, tq, tr);
        q += 2 + (size_t)qlen;
        r += 2 + (size_t)rlen;
    }
    if (drop) tap_put(tap, d + drop_at, drop_len, NULL, 0, 0, ip, v6, 1, port, tq, tr);
    pthread_mutex_unlock(&tap->mu);
}

/* One message (d, n) from the client at ip: its answer framed at the end of o (TCP_ANSWERED), or what
   else becomes of it. */
static int tcp_one(ctab_t *t, uint64_t *rng, const uint8_t *d, uint32_t n, u128 ip, int v6, tcp_out_t *o) {
    if (t == NULL || (t->flags & FB_ALL)) return TCP_PYTHON;
    choice_t ch = {-1, -1.0, rng};
    plan_t plan;
    int32_t len;
    if (plan_answer(t, d, n, ip, v6, 1, &ch, &plan) == 0) {
        size_t room = plan.total + GUARD_ROOM > GUARD_SMALL ? plan.total + GUARD_ROOM : GUARD_SMALL;
        if (tcp_room(o, 2 + room) < 0) return TCP_NOMEM;
        write_plan(&plan, o->p + o->len + 2);
        len = (int32_t)plan.total;
    } else {
        if (tcp_room(o, 2 + GUARD_SMALL) < 0) return TCP_NOMEM;
        len = reject_answer(d, n, t->base->max_udp, t->flags, o->p + o->len + 2);
        if (len == RJ_DROP) return TCP_DROP;
        if (len < 0) return TCP_PYTHON;
    }
    uint8_t *r = o->p + o->len + 2;
    if (t->guard != NULL) { /* cookies (RRL does not apply to TCP): the same stage as on UDP */
        len = guard_apply(t->guard, d, n, r, (uint32_t)len, ip, v6, 1);
        if (len < 0) return TCP_PYTHON; /* never for TCP; Python decides as it always has */
    }
    if (len > TCP_MAX_MESSAGE) return TCP_PYTHON;
    r[-2] = (uint8_t)(len >> 8);
    r[-1] = (uint8_t)len;
    o->len += 2 + (size_t)len;
    return TCP_ANSWERED;
}

static PyObject *tcp_answer(TcpObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t start;
    PyObject *ipobj;
    int v6, port = 0;
    u128 ip;
    if (!PyArg_ParseTuple(args, "y*nOp|i", &buf, &start, &ipobj, &v6, &port)) return NULL;
    if (parse_ip(ipobj, v6, &ip) < 0 || start < 0 || start > buf.len || port < 0 || port > 65535) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "start outside the buffer, or port outside 0-65535");
        PyBuffer_Release(&buf);
        return NULL;
    }
    const uint8_t *d = buf.buf;
    size_t end = (size_t)buf.len, pos = (size_t)start;
    int64_t tq = self->tap != NULL ? tap_now() : 0;
    tcp_out_t o = {NULL, 0, 0};
    uint64_t rc[16] = {0};
    uint64_t answered = 0;
    int status = TCP_ANSWERED;
    size_t msg = 0;
    uint32_t size = 0;
    ctab_t *t = slot_acquire((SlotObject *)self->slot);
    while (end - pos >= 2) {
        size = (uint32_t)d[pos] << 8 | d[pos + 1];
        if (end - pos - 2 < size) break;
        msg = pos + 2;
        pos = msg + size;
        size_t at = o.len;
        status = tcp_one(t, &self->rng, d + msg, size, ip, v6, &o);
        if (status != TCP_ANSWERED) break;
        answered++;
        if (o.len - at > 2 + 3) rc[o.p[at + 2 + 3] & 15]++;
    }
    ctab_decref(t);
    PyObject *result = NULL;
    if (status == TCP_NOMEM) {
        PyErr_NoMemory(); /* nothing written to the ring: Python answers (and logs) from `start` again */
    } else {
        if (self->tap != NULL && (answered || status == TCP_DROP))
            tcp_tap(self->tap, d, (size_t)start, &o, answered, status == TCP_DROP, msg, size, ip, v6,
                    (uint16_t)port, tq);
        PyObject *pending = status == TCP_PYTHON ? PyBytes_FromStringAndSize((const char *)d + msg, size)
                            : status == TCP_DROP ? Py_NewRef(Py_False)
                                                 : Py_NewRef(Py_None);
        PyObject *out = PyBytes_FromStringAndSize((const char *)o.p, (Py_ssize_t)o.len);
        int kinds = 0;
        for (int i = 0; i < 16; i++) kinds += rc[i] != 0;
        PyObject *rcodes = PyTuple_New(kinds);
        int filled = rcodes != NULL;
        for (int i = 0, k = 0; filled && i < 16; i++) {
            if (!rc[i]) continue;
            PyObject *pair = Py_BuildValue("iK", i, (unsigned long long)rc[i]);
            if (pair == NULL) filled = 0;
            else PyTuple_SET_ITEM(rcodes, k++, pair);
        }
        if (pending != NULL && out != NULL && filled) {
            result = Py_BuildValue("NnKNN", out, (Py_ssize_t)pos, (unsigned long long)answered, rcodes, pending);
            out = rcodes = pending = NULL;
        }
        Py_XDECREF(pending);
        Py_XDECREF(out);
        Py_XDECREF(rcodes);
    }
    PyMem_RawFree(o.p);
    PyBuffer_Release(&buf);
    return result;
}

static PyMethodDef tcp_methods[] = {
    {"answer", (PyCFunction)tcp_answer, METH_VARARGS,
     "answer(buffer, start, ip, v6, port=0) -> (out, pos, answered, rcodes, pending): see _tcp.c"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject TcpType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gslbd.wire._cfast.TcpAnswerer",
    .tp_basicsize = sizeof(TcpObject),
    .tp_dealloc = (destructor)tcp_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "TcpAnswerer(slot, seed): a TCP stream's complete messages answered from the slot's table.",
    .tp_methods = tcp_methods,
    .tp_new = tcp_new,
};
