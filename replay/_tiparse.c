/* The bulk reader of SimGrid time-independent (TI) rank files (replay/simgrid.py, import_ti).
 *
 * It reads one whole rank file from memory and fills sigex's event columns, the
 * completions of its nonblocking requests and its receives from MPI_UNDEFINED, doing
 * for each line exactly what replay/simgrid.py's _TIReader (the reference, in Python)
 * does: the same columns, the same sums of flops in the same order (so the same
 * t_comp to the last bit), the same pairing of waits and tests with pending requests.
 *
 * It handles the actions SimGrid 3.32 writes for almost every line of a real trace:
 * compute, sleep, location, init, finalize, the sends and receives (blocking and not),
 * sendRecv, wait, test, waitall, waitAny, testall/testany/testsome, and the collectives
 * with fixed-size arguments (barrier, bcast, reduce, allreduce, scan, exscan, alltoall,
 * allgather, gather, scatter, blocking or nonblocking). Anything else -- a v-collective,
 * reducescatter, Start, comm_size, comm_dup, an unknown action, a byte outside printable
 * ASCII, a number written in a form it does not parse strictly, and every error -- makes
 * it give up on the file (return 1 with the line); the Python reader then reads that
 * file, and either imports it or raises its error naming the file and line. Nothing is
 * decided here that the reference would decide otherwise.
 *
 * Built on first use by replay/_kernel.py with the C compiler (cc), loaded with ctypes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* actions, in the order of the op-code table the caller passes (replay/simgrid.py) */
enum {
    A_INIT, A_FINALIZE, A_SEND, A_ISEND, A_SSEND, A_ISSEND, A_BSEND, A_IBSEND, A_RECV, A_IRECV,
    A_SENDRECV, A_WAIT, A_TEST, A_WAITALL, A_WAITANY, A_TESTALL, A_TESTANY, A_TESTSOME,
    A_COLL /* + collective index (blocking), then + N_COLL for the nonblocking forms */
};
enum { C_BARRIER, C_BCAST, C_REDUCE, C_ALLREDUCE, C_SCAN, C_EXSCAN, C_ALLTOALL, C_ALLGATHER,
       C_GATHER, C_SCATTER, N_COLL };
static const char *COLL_NAMES[N_COLL] = {"barrier", "bcast", "reduce", "allreduce", "scan",
                                         "exscan", "alltoall", "allgather", "gather", "scatter"};

#define TI_UNDEFINED (-333)
#define TI_ANY_TAG (-444)
#define PEER_NULL (-3)
#define MAX_TOKENS 8

typedef struct {
    /* in */
    const char *buf;
    int64_t len, rank, P, cap, n_sizes;
    double host_speed;
    const int64_t *sizes;   /* bytes per datatype code 0..n_sizes-1; < 0: not in the table */
    const int64_t *opcode;  /* sigex op code per action (enum above) */
    /* out: events (cap each) */
    uint8_t *op;
    int32_t *peer, *recv_peer, *root, *tag, *comm, *aux;
    int64_t *seq, *bytes, *recv_bytes, *req, *line;
    double *t_comp;
    /* out: completions (wait event, request id, posting event; cap each), wildcard receives */
    int64_t *c_wait, *c_req, *c_post, *wild;
    /* scratch: pending requests, 6 x cap */
    int64_t *pend;
    /* results */
    int64_t n_events, n_completions, n_wild, fail_line;
} ti_file;

typedef struct { const char *s; int64_t n; } tok;

/* a decimal integer, [+-]?[0-9]{1,18}, nothing else */
static int parse_int(tok t, int64_t *out) {
    const char *s = t.s;
    int64_t n = t.n, i = 0, v = 0;
    int neg = 0;
    if (n > 0 && (s[0] == '+' || s[0] == '-')) { neg = s[0] == '-'; i = 1; }
    if (i == n || n - i > 18) return 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (s[i] - '0');
    }
    *out = neg ? -v : v;
    return 1;
}

/* a decimal float, [+-]?(d+(.d*)?|.d+)([eE][+-]?d+)?, converted by strtod (correctly
 * rounded, as Python's float() is) */
static int parse_float(tok t, double *out) {
    const char *s = t.s;
    int64_t n = t.n, i = 0, digits = 0;
    char tmp[64];
    if (n <= 0 || n >= (int64_t)sizeof tmp) return 0;
    if (s[i] == '+' || s[i] == '-') i++;
    while (i < n && s[i] >= '0' && s[i] <= '9') { i++; digits++; }
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && s[i] >= '0' && s[i] <= '9') { i++; digits++; }
    }
    if (!digits) return 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        int64_t e = 0;
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        while (i < n && s[i] >= '0' && s[i] <= '9') { i++; e++; }
        if (!e) return 0;
    }
    if (i != n) return 0;
    memcpy(tmp, s, (size_t)n);
    tmp[n] = 0;
    *out = strtod(tmp, NULL);
    return 1;
}

static int is(tok t, const char *name) {
    size_t n = strlen(name);
    return (size_t)t.n == n && memcmp(t.s, name, n) == 0;
}

/* count x datatype's size (errors: negative count, unknown code, overflow) */
static int nbytes(const ti_file *F, tok count, tok code, int64_t *out) {
    int64_t n, c;
    if (!parse_int(count, &n) || !parse_int(code, &c)) return 0;
    if (n < 0 || c < 0 || c >= F->n_sizes || F->sizes[c] <= 0) return 0;
    if (n > (INT64_C(1) << 62) / F->sizes[c]) return 0;
    *out = n * F->sizes[c];
    return 1;
}

static int peer_of(const ti_file *F, tok t, int64_t *out) {
    int64_t p;
    if (!parse_int(t, &p)) return 0;
    if (p == TI_UNDEFINED) { *out = PEER_NULL; return 1; }
    if (p < 0 || p >= F->P) return 0;
    *out = p;
    return 1;
}

static int root_of(const ti_file *F, tok t, int64_t *out) {
    int64_t p;
    if (!parse_int(t, &p) || p < 0 || p >= F->P) return 0;
    *out = p;
    return 1;
}

static int fits32(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }

/* pending requests: rows of (event, src, dst, tag, collective, last test event or -1) */
#define PQ(k, f) (F->pend[6 * (k) + (f)])

int64_t sigex_ti_parse(ti_file *F) {
    const char *b = F->buf, *end = F->buf + F->len;
    int64_t ln = 0, e = 0, nc = 0, nw = 0, np_ = 0, next_req = 0;
    double pending_flops = 0.0;
    const int64_t r = F->rank;
    F->fail_line = 0;
    while (b < end) {
        const char *eol = memchr(b, '\n', (size_t)(end - b));
        if (!eol) eol = end;
        ln++;
        tok t[MAX_TOKENS];
        int nt = 0;
        const char *p = b;
        while (p < eol) {
            unsigned char ch = (unsigned char)*p;
            if (ch == ' ' || ch == '\t') { p++; continue; }
            if (ch < 0x21 || ch > 0x7e) goto fail;
            const char *s = p;
            while (p < eol && (unsigned char)*p > 0x20) {
                if ((unsigned char)*p > 0x7e) goto fail;
                p++;
            }
            if (p < eol && *p != ' ' && *p != '\t') goto fail;
            if (nt < MAX_TOKENS) { t[nt].s = s; t[nt].n = p - s; }
            nt++;
        }
        b = eol + 1;
        if (nt == 0) continue;
        if (nt < 2) goto fail;
        {
            int64_t own;
            if (!parse_int(t[0], &own) || own != r) goto fail;
        }
        const tok act = t[1];
        const tok *x = t + 2;
        const int nx = nt - 2 < MAX_TOKENS - 2 ? nt - 2 : MAX_TOKENS - 2; /* tokens kept */
        const int nxall = nt - 2;
        int a = -1;
        int64_t peer = -1, recv_peer = -1, root = -1, tg = -1, comm = 0, by = 0, rb = 0;
        int post = 0, collective = 0;
        int64_t key_src = 0, key_dst = 0, key_tag = 0;
        if (is(act, "compute")) {
            double f;
            if (nxall < 1 || !parse_float(x[0], &f)) goto fail;
            pending_flops += f;
            continue;
        }
        if (is(act, "send") || is(act, "isend") || is(act, "Ssend") || is(act, "ISsend")
            || is(act, "bsend") || is(act, "ibsend")) {
            int64_t d, tag_;
            if (nx < 4 || !peer_of(F, x[0], &peer) || !parse_int(x[0], &d)
                || !parse_int(x[1], &tag_) || !nbytes(F, x[2], x[3], &by) || !fits32(tag_))
                goto fail;
            tg = tag_;
            if (is(act, "send")) a = A_SEND;
            else if (is(act, "isend")) a = A_ISEND;
            else if (is(act, "Ssend")) a = A_SSEND;
            else if (is(act, "ISsend")) a = A_ISSEND;
            else if (is(act, "bsend")) a = A_BSEND;
            else a = A_IBSEND;
            post = a == A_ISEND || a == A_ISSEND || a == A_IBSEND;
            key_src = r; key_dst = d; key_tag = tag_;
        } else if (is(act, "recv") || is(act, "irecv")) {
            int64_t s, tag_;
            if (nx < 4 || !parse_int(x[0], &s) || !parse_int(x[1], &tag_)
                || !nbytes(F, x[2], x[3], &rb))
                goto fail;
            if (s == TI_UNDEFINED) peer = s;
            else if (!peer_of(F, x[0], &peer)) goto fail;
            tg = tag_ == TI_ANY_TAG ? -1 : tag_;
            if (!fits32(tg)) goto fail;
            if (s == TI_UNDEFINED) F->wild[nw++] = e;
            a = is(act, "recv") ? A_RECV : A_IRECV;
            post = a == A_IRECV;
            key_src = s; key_dst = r; key_tag = tag_;
        } else if (is(act, "sendRecv")) {
            int64_t s;
            if (nx < 6 || !parse_int(x[3], &s) || !peer_of(F, x[1], &peer)
                || !nbytes(F, x[0], x[4], &by) || !nbytes(F, x[2], x[5], &rb))
                goto fail;
            if (s == TI_UNDEFINED) recv_peer = s;
            else if (!peer_of(F, x[3], &recv_peer)) goto fail;
            if (s == TI_UNDEFINED) F->wild[nw++] = e;
            a = A_SENDRECV;
        } else if (is(act, "wait") || is(act, "test")) {
            int64_t s, d, tag_, k;
            if (nx < 3 || !parse_int(x[0], &s) || !parse_int(x[1], &d) || !parse_int(x[2], &tag_))
                goto fail;
            for (k = 0; k < np_; k++) {
                if (PQ(k, 4) ? (s == d && tag_ < 0 && tag_ != TI_ANY_TAG)
                             : (PQ(k, 1) == s && PQ(k, 2) == d && PQ(k, 3) == tag_))
                    break;
            }
            comm = -1;
            if (is(act, "wait")) {
                if (k == np_) goto fail;  /* no such pending request */
                a = A_WAIT;
                F->c_wait[nc] = e; F->c_req[nc] = F->req[PQ(k, 0)]; F->c_post[nc] = PQ(k, 0);
                nc++;
                memmove(&PQ(k, 0), &PQ(k + 1, 0), (size_t)(np_ - k - 1) * 6 * sizeof(int64_t));
                np_--;
                F->aux[e] = 1;
            } else {
                a = A_TEST;
                if (k < np_) PQ(k, 5) = e;
            }
        } else if (is(act, "waitall") || is(act, "waitAny")) {
            if (is(act, "waitall")) {
                int64_t n;
                if (nxall >= 1) {
                    if (!parse_int(x[0], &n)) goto fail;
                    if (n < np_) {  /* settle the tested ones: their last test completed them */
                        int64_t k, w = 0;
                        for (k = 0; k < np_; k++) {
                            if (PQ(k, 5) >= 0) {
                                int64_t te = PQ(k, 5);
                                F->c_wait[nc] = te; F->c_req[nc] = F->req[PQ(k, 0)];
                                F->c_post[nc] = PQ(k, 0);
                                nc++;
                                F->aux[te] += 1;
                            } else {
                                if (w != k) memcpy(&PQ(w, 0), &PQ(k, 0), 6 * sizeof(int64_t));
                                w++;
                            }
                        }
                        np_ = w;
                    }
                    if (n < np_) goto fail;
                }
                a = A_WAITALL;
            } else {
                if (np_ > 1) goto fail;
                a = A_WAITANY;
            }
            comm = -1;
            {
                int64_t k;
                for (k = 0; k < np_; k++) {
                    F->c_wait[nc] = e; F->c_req[nc] = F->req[PQ(k, 0)]; F->c_post[nc] = PQ(k, 0);
                    nc++;
                }
                F->aux[e] = np_;
                np_ = 0;
            }
        } else if (is(act, "testall") || is(act, "testany") || is(act, "testsome")) {
            a = is(act, "testall") ? A_TESTALL : is(act, "testany") ? A_TESTANY : A_TESTSOME;
            comm = -1;
        } else if (is(act, "init") || is(act, "finalize")) {
            a = is(act, "init") ? A_INIT : A_FINALIZE;
            comm = -1;
        } else if (is(act, "location")) {
            int64_t v;
            if (nx < 2 || !parse_int(x[1], &v)) goto fail;
            continue;
        } else if (is(act, "sleep")) {
            double f;
            if (nxall < 1 || !parse_float(x[0], &f)) goto fail;
            pending_flops += f * F->host_speed;
            continue;
        } else {
            int nb = 0, c;
            tok base = act;
            for (c = 0; c < N_COLL; c++)
                if (is(act, COLL_NAMES[c])) break;
            if (c == N_COLL && act.n > 1 && act.s[0] == 'i') {
                base.s = act.s + 1; base.n = act.n - 1;
                for (c = 0; c < N_COLL; c++)
                    if (is(base, COLL_NAMES[c])) break;
                nb = 1;
            }
            if (c == N_COLL) goto fail;  /* the Python reader imports or refuses it */
            switch (c) {
            case C_BARRIER: break;
            case C_BCAST:
                if (nx < 3 || !nbytes(F, x[0], x[2], &by) || !root_of(F, x[1], &root)) goto fail;
                rb = by;
                break;
            case C_REDUCE:
                if (nx < 4 || !nbytes(F, x[0], x[3], &by) || !root_of(F, x[2], &root)) goto fail;
                rb = by;
                break;
            case C_ALLREDUCE: case C_SCAN: case C_EXSCAN:
                if (nx < 3 || !nbytes(F, x[0], x[2], &by)) goto fail;
                rb = by;
                break;
            case C_ALLTOALL: case C_ALLGATHER:
                if (nx < 4 || !nbytes(F, x[0], x[2], &by) || !nbytes(F, x[1], x[3], &rb)) goto fail;
                break;
            default: /* gather, scatter */
                if (nx < 5 || !root_of(F, x[2], &root) || !nbytes(F, x[0], x[3], &by)
                    || !nbytes(F, x[1], x[4], &rb))
                    goto fail;
                if (c == C_GATHER && r != root) rb = 0;
                if (c == C_SCATTER && r != root) by = 0;
            }
            a = A_COLL + c + (nb ? N_COLL : 0);
            post = nb;
            collective = 1;
        }
        /* the event (what _TIReader.add does) */
        F->seq[e] = e;
        F->op[e] = (uint8_t)F->opcode[a];
        F->peer[e] = (int32_t)peer;
        F->recv_peer[e] = (int32_t)recv_peer;
        F->root[e] = (int32_t)root;
        F->tag[e] = (int32_t)tg;
        F->comm[e] = (int32_t)comm;
        if (a != A_WAIT && a != A_WAITALL && a != A_WAITANY) F->aux[e] = 0;  /* theirs: above */
        F->bytes[e] = by;
        F->recv_bytes[e] = rb;
        F->req[e] = -1;
        F->t_comp[e] = pending_flops / F->host_speed;
        F->line[e] = ln;
        pending_flops = 0.0;
        if (post) {
            F->req[e] = next_req++;
            PQ(np_, 0) = e; PQ(np_, 1) = key_src; PQ(np_, 2) = key_dst; PQ(np_, 3) = key_tag;
            PQ(np_, 4) = collective; PQ(np_, 5) = -1;
            np_++;
        }
        e++;
    }
    /* the end of the file (_TIReader.finish): tested requests were completed by their last test */
    {
        int64_t k;
        for (k = 0; k < np_; k++) {
            if (PQ(k, 5) < 0) goto fail_end;
            F->c_wait[nc] = PQ(k, 5); F->c_req[nc] = F->req[PQ(k, 0)]; F->c_post[nc] = PQ(k, 0);
            nc++;
            F->aux[PQ(k, 5)] += 1;
        }
    }
    if (pending_flops != 0.0) goto fail_end;
    F->n_events = e;
    F->n_completions = nc;
    F->n_wild = nw;
    return 0;
fail:
    F->fail_line = ln;
    return 1;
fail_end:
    F->fail_line = ln;
    return 2;
}
