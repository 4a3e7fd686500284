/*
 * gslbd.server._mmsg: batched UDP receive and send (recvmmsg/sendmmsg) for the DNS listener.
 *
 * Python's socket module has no recvmmsg/sendmmsg, so a busy listener pays one system call per
 * datagram each way, plus a failing recvfrom per wake-up. This module moves up to BATCH datagrams per
 * call. It does nothing else: parsing and answering stay in Python.
 *
 *   recv_batch(fd, max, buffer, wait) -> list of (data: bytes, peer: bytes, ip: int, v6: bool, cut: bool)
 *       Receives into the caller's writable `buffer` (max x BUFSIZE bytes; one per listener, so
 *       listeners on several threads never share one) and copies each datagram out. wait=False: never
 *       blocks. wait=True: blocks with the GIL released until a datagram arrives (or the socket's
 *       SO_RCVTIMEO passes). An empty list when nothing came. `peer` is the raw sockaddr to pass back
 *       to send_batch; `ip` is the peer address as an integer; `cut`: the datagram was longer than
 *       BUFSIZE and `data` holds only its start (MSG_TRUNC). Raises OSError on other errors.
 *   send_batch(fd, [(reply: bytes, peer: bytes), ...]) -> int
 *       Non-blocking. Returns how many were handed to the kernel; a datagram the kernel refuses
 *       (full buffer, unreachable peer) is skipped and counted as not sent.
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE
#include <Python.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#define UNUSED __attribute__((unused))

#define BATCH 64
#define BUFSIZE 4096 /* a DNS query never needs more; a longer datagram is reported cut (FORMERR) */

static PyObject *peer_ip(const struct sockaddr_storage *sa, int *v6) {
    if (sa->ss_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
        *v6 = 0;
        return PyLong_FromUnsignedLong(ntohl(sin->sin_addr.s_addr));
    }
    if (sa->ss_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;
        *v6 = 1;
        return _PyLong_FromByteArray(sin6->sin6_addr.s6_addr, 16, 0, 0);
    }
    *v6 = 0;
    return PyLong_FromLong(0);
}

static PyObject *recv_batch(UNUSED PyObject *self, PyObject *args) {
    int fd, max, wait, got, i;
    Py_buffer buf;
    PyObject *out = NULL;
    struct mmsghdr msgs[BATCH];
    struct iovec iovs[BATCH];
    struct sockaddr_storage addrs[BATCH];
    unsigned char *base;
    if (!PyArg_ParseTuple(args, "iiw*p", &fd, &max, &buf, &wait)) return NULL;
    if (max < 1) max = 1;
    if (max > BATCH) max = BATCH;
    if (buf.len < (Py_ssize_t)max * BUFSIZE) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "recv_batch buffer must hold max x BUFSIZE bytes");
        return NULL;
    }
    base = (unsigned char *)buf.buf;
    memset(msgs, 0, sizeof(msgs[0]) * (size_t)max);
    for (i = 0; i < max; i++) {
        iovs[i].iov_base = base + (size_t)i * BUFSIZE;
        iovs[i].iov_len = BUFSIZE;
        msgs[i].msg_hdr.msg_iov = &iovs[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_name = &addrs[i];
        msgs[i].msg_hdr.msg_namelen = sizeof(addrs[i]);
    }
    if (wait) {
        /* Blocking (the socket's SO_RCVTIMEO bounds the wait): the GIL is free meanwhile, and the call
           returns as soon as one datagram is there, with whatever else is queued behind it. */
        Py_BEGIN_ALLOW_THREADS
        do {
            got = recvmmsg(fd, msgs, (unsigned int)max, MSG_WAITFORONE, NULL);
        } while (got < 0 && errno == EINTR);
        Py_END_ALLOW_THREADS
    } else {
        do {
            got = recvmmsg(fd, msgs, (unsigned int)max, MSG_DONTWAIT, NULL);
        } while (got < 0 && errno == EINTR);
    }
    if (got < 0) {
        PyBuffer_Release(&buf);
        if (errno == EAGAIN || errno == EWOULDBLOCK) return PyList_New(0);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    out = PyList_New(got);
    if (out == NULL) goto fail;
    for (i = 0; i < got; i++) {
        int v6 = 0;
        PyObject *data = PyBytes_FromStringAndSize((const char *)iovs[i].iov_base, msgs[i].msg_len);
        PyObject *peer = PyBytes_FromStringAndSize((const char *)&addrs[i], msgs[i].msg_hdr.msg_namelen);
        PyObject *ip = peer_ip(&addrs[i], &v6);
        PyObject *item = PyTuple_New(5);
        if (data == NULL || peer == NULL || ip == NULL || item == NULL) {
            Py_XDECREF(data);
            Py_XDECREF(peer);
            Py_XDECREF(ip);
            Py_XDECREF(item);
            goto fail;
        }
        PyTuple_SET_ITEM(item, 0, data);
        PyTuple_SET_ITEM(item, 1, peer);
        PyTuple_SET_ITEM(item, 2, ip);
        PyTuple_SET_ITEM(item, 3, PyBool_FromLong(v6));
        PyTuple_SET_ITEM(item, 4, PyBool_FromLong(msgs[i].msg_hdr.msg_flags & MSG_TRUNC));
        PyList_SET_ITEM(out, i, item);
    }
    PyBuffer_Release(&buf);
    return out;
fail:
    Py_XDECREF(out);
    PyBuffer_Release(&buf);
    return NULL;
}

static PyObject *send_batch(UNUSED PyObject *self, PyObject *args) {
    int fd;
    PyObject *list;
    Py_ssize_t n, i, start = 0;
    long sent = 0;
    struct mmsghdr smsgs[BATCH];
    struct iovec siovs[BATCH];
    if (!PyArg_ParseTuple(args, "iO!", &fd, &PyList_Type, &list)) return NULL;
    n = PyList_GET_SIZE(list);
    while (start < n) {
        Py_ssize_t count = n - start < BATCH ? n - start : BATCH;
        int done;
        for (i = 0; i < count; i++) {
            PyObject *item = PyList_GET_ITEM(list, start + i);
            PyObject *reply, *peer;
            if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
                PyErr_SetString(PyExc_TypeError, "send_batch items are (reply, peer) tuples");
                return NULL;
            }
            reply = PyTuple_GET_ITEM(item, 0);
            peer = PyTuple_GET_ITEM(item, 1);
            if (!PyBytes_Check(reply) || !PyBytes_Check(peer)) {
                PyErr_SetString(PyExc_TypeError, "send_batch reply and peer must be bytes");
                return NULL;
            }
            siovs[i].iov_base = PyBytes_AS_STRING(reply);
            siovs[i].iov_len = (size_t)PyBytes_GET_SIZE(reply);
            memset(&smsgs[i], 0, sizeof(smsgs[i]));
            smsgs[i].msg_hdr.msg_iov = &siovs[i];
            smsgs[i].msg_hdr.msg_iovlen = 1;
            smsgs[i].msg_hdr.msg_name = PyBytes_AS_STRING(peer);
            smsgs[i].msg_hdr.msg_namelen = (socklen_t)PyBytes_GET_SIZE(peer);
        }
        do {
            done = sendmmsg(fd, smsgs, (unsigned int)count, MSG_DONTWAIT);
        } while (done < 0 && errno == EINTR);
        if (done < 0) {
            /* The first datagram was refused (full buffer, unreachable peer): skip it, go on. */
            start += 1;
            continue;
        }
        sent += done;
        start += done;
    }
    return PyLong_FromLong(sent);
}

static PyMethodDef methods[] = {
    {"recv_batch", recv_batch, METH_VARARGS, "recv_batch(fd, max, buffer, wait) -> [(data, peer, ip, v6, cut)]"},
    {"send_batch", send_batch, METH_VARARGS, "send_batch(fd, [(reply, peer), ...]) -> sent"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "gslbd.server._mmsg", "Batched UDP receive/send (recvmmsg/sendmmsg).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__mmsg(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL) {
        PyModule_AddIntConstant(m, "BATCH", BATCH);
        PyModule_AddIntConstant(m, "BUFSIZE", BUFSIZE);
    }
    return m;
}
