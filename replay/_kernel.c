/* The compiled step kernel of sigex's replay engine (replay/engine.py, ReplayState).
 *
 * It advances the ranks of one piece in turns of a few events each, from a ring of the
 * ranks that can move: post a rank's next event, complete it once every slot it waits
 * for is known, and go on; a rank that blocks leaves the ring until a message or
 * collective slot it waits for becomes known (then it is put back). It reads and writes the numpy arrays of
 * ReplayState in place and performs, per event, message and slot, the same
 * floating-point operations as the numpy step (ReplayState._post, _sends_known,
 * _recvs_known, _rendezvous, _complete, _recv_scan), so its times are the numpy
 * engine's to the last bit. A collective instance whose members have all entered
 * is evaluated here when the Python side compiled its pattern into message tables
 * (round by round, as replay.collectives.evaluate does it); the others are listed,
 * the kernel returns when no rank can move, and the Python side evaluates them
 * (ReplayState._evaluate) and calls again.
 *
 * Built on first use by replay/_kernel.py with the C compiler (cc) and loaded with
 * ctypes. Compiled twice, for 32- and 64-bit event columns (the layout's dtype).
 */
#ifndef SIGEX_KERNEL_BODY
#define SIGEX_KERNEL_BODY

#include <math.h>
#include <stdint.h>

typedef struct {
    int64_t n, lo, M;
    int64_t *idx, *limit, *ptr;
    double *clock, *start, *nic;
    uint8_t *posted, *dirty;
    const int64_t *wslots;
    const double *comp, *mp;
    const uint8_t *rdv;
    const int64_t *m_src, *m_dst;
    double *ts, *tr, *arrive, *done, *cost, *entry;
    const int64_t *slot_inst, *inst_size;
    int64_t *inst_count;
    uint8_t *inst_done;
    const uint8_t *inst_has_local;
    /* compiled collective patterns (ReplayState._compile_collectives) */
    const int64_t *inst_pat, *coll_off, *coll_rank, *pat_rounds, *round_msgs, *pat_busy;
    const int64_t *c_src, *c_dst;
    const double *c_terms, *busy;
    const uint8_t *c_rdv;
    double *cT, *cnic, *cts, *cstart, *carr;
    double *t_end, *comm_ev, *dur_ev;
    int64_t *queue, qhead, qn;
    int64_t *full, n_full;
    double *scr_r, *scr_c;
} State;

/* a >= b ? a : b (numpy's engine: np.maximum), written as b > a ? b : a, which the compiler
 * turns into one maxsd instead of four instructions: the same for any two numbers, ties
 * (+0.0 and -0.0 too) included; they would differ on a NaN, and the kernel never compares
 * one (an unknown time is tested with isnan before it is used) */
static inline double dmax(double a, double b) { return b > a ? b : a; }

/* the work list: a ring of the piece's ranks (each at most once: its dirty flag) */
static inline void push(State *S, int64_t r) {
    S->dirty[r] = 1;
    int64_t at = S->qhead + S->qn++;
    S->queue[at >= S->n ? at - S->n : at] = r;
}

static inline int64_t pop(State *S) {
    int64_t r = S->queue[S->qhead];
    S->qhead = S->qhead + 1 == S->n ? 0 : S->qhead + 1;
    S->qn--;
    S->dirty[r] = 0;
    return r;
}

static inline void notify(State *S, int64_t world) {
    int64_t r = world - S->lo;
    if (r >= 0 && r < S->n && S->posted[r] && !S->dirty[r]) {
        push(S, r);
    }
}

/* a rendezvous message whose send and receive are both posted */
static inline void rendezvous(State *S, int64_t m) {
    const double *mp = S->mp + 4 * m;
    double tdata = dmax(S->ts[m] + mp[3], S->tr[m]) + mp[3];
    S->done[m] = tdata + mp[0];
    double arrive = tdata + mp[2];
    S->arrive[m] = arrive;
    S->done[S->M + m] = arrive;
    notify(S, S->m_src[m]);
    notify(S, S->m_dst[m]);
}

static inline void sends_known(State *S, int64_t m, double ts) {
    if (S->rdv[m]) {
        if (!isnan(S->tr[m])) rendezvous(S, m);
        return;
    }
    const double *mp = S->mp + 4 * m;
    S->done[m] = ts + mp[0];
    double arrive = ts + mp[2];
    S->arrive[m] = arrive;
    double tr = S->tr[m];
    if (!isnan(tr)) {
        S->done[S->M + m] = dmax(arrive, tr);
        notify(S, S->m_dst[m]);
    }
}

static inline void recvs_known(State *S, int64_t m) {
    if (isnan(S->ts[m])) return;
    if (S->rdv[m]) {
        rendezvous(S, m);
        return;
    }
    S->done[S->M + m] = dmax(S->arrive[m], S->tr[m]);
    notify(S, S->m_dst[m]);
}

/* collective instance i, whose members have all entered, with compiled pattern p
 * (replay.collectives.evaluate on one instance: rounds in order; in a round every
 * sender starts at max(its time, its NIC), a rendezvous message waits for its
 * receiver's time, senders pay their overhead, then receivers process) */
static void evaluate(State *S, int64_t i) {
    int64_t p = S->inst_pat[i];
    int64_t a = S->coll_off[i], n = S->coll_off[i + 1] - a;
    double *T = S->cT, *nic = S->cnic;
    for (int64_t j = 0; j < n; j++) {
        T[j] = S->entry[a + j];
        nic[j] = -INFINITY;
    }
    for (int64_t r = S->pat_rounds[p]; r < S->pat_rounds[p + 1]; r++) {
        int64_t m0 = S->round_msgs[r], m1 = S->round_msgs[r + 1];
        for (int64_t m = m0; m < m1; m++) {
            const double *t4 = S->c_terms + 4 * m; /* cpu, gap, lat, oL */
            int64_t src = S->c_src[m], k = m - m0;
            double ts = dmax(T[src], nic[src]);
            double start = S->c_rdv[m] ? dmax(ts + t4[3], T[S->c_dst[m]]) + t4[3] : ts;
            S->cts[k] = ts;
            S->cstart[k] = start;
            S->carr[k] = start + t4[2];
        }
        for (int64_t m = m0; m < m1; m++) {
            const double *t4 = S->c_terms + 4 * m;
            int64_t src = S->c_src[m], k = m - m0;
            nic[src] = S->cts[k] + t4[1];
            T[src] = S->cstart[k] + t4[0];
        }
        for (int64_t m = m0; m < m1; m++) {
            int64_t dst = S->c_dst[m];
            T[dst] = dmax(S->carr[m - m0], T[dst]) + S->c_terms[4 * m];
        }
    }
    const double *busy = S->busy + S->pat_busy[p];
    int64_t base = 2 * S->M + a;
    for (int64_t j = 0; j < n; j++) {
        S->done[base + j] = T[j];
        S->cost[base + j] = busy[j];
    }
    S->inst_done[i] = 1;
    for (int64_t j = 0; j < n; j++) notify(S, S->coll_rank[a + j]);
}

static inline void entries_known(State *S, int64_t slot) {
    int64_t i = S->slot_inst[slot];
    S->inst_count[i] += 1;
    if (S->inst_count[i] == S->inst_size[i] && !S->inst_done[i] && S->inst_has_local[i]) {
        if (S->inst_pat[i] >= 0)
            evaluate(S, i);
        else
            S->full[S->n_full++] = i;
    }
}

/* numpy's pairwise summation of doubles (what np.add.reduce, reduceat and sum use) */
static double pairwise_sum(const double *a, int64_t n) {
    if (n < 8) {
        double res = 0.;
        for (int64_t i = 0; i < n; i++) res += a[i];
        return res;
    } else if (n <= 128) {
        double r[8];
        int64_t i;
        for (int j = 0; j < 8; j++) r[j] = a[j];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) r[j] += a[i + j];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i];
        return res;
    } else {
        int64_t n2 = n / 2;
        n2 -= n2 % 8;
        return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
    }
}

/* sort (ready, cost) pairs by ready, then cost: insertion sort (a call waits for few) */
static void sort_pairs(double *r, double *c, int64_t n) {
    for (int64_t i = 1; i < n; i++) {
        double rv = r[i], cv = c[i];
        int64_t j = i - 1;
        while (j >= 0 && (r[j] > rv || (r[j] == rv && c[j] > cv))) {
            r[j + 1] = r[j];
            c[j + 1] = c[j];
            j--;
        }
        r[j + 1] = rv;
        c[j + 1] = cv;
    }
}

#define IDX int32_t
#define KERNEL sigex_replay_run32
#define LAYOUT sigex_layout32
#include __FILE__
#undef IDX
#undef KERNEL
#undef LAYOUT
#define IDX int64_t
#define KERNEL sigex_replay_run64
#define LAYOUT sigex_layout64
#include __FILE__
#undef IDX
#undef KERNEL
#undef LAYOUT

#else /* the kernel, once per event-column type IDX */

/* The time-major layout of a block of nr ranks (replay/engine.py, _layout): rank r has
 * counts[r] events, in program order from row sum(counts[:r]) of the columns; event j
 * of rank r gets the number base[j] + (ranks before r with a j-th event), base[j]
 * counting the events of index below j. Writes, per new number, the event's message
 * sent, message received, collective slot, first wait slot and number of them, next
 * event of its rank (-1), burst and per-phase bin ((phase + 1) * nr + r; phase NULL:
 * none); per row its new number (pos), per rank its first event (-1). work: maxc + 1. */
void LAYOUT(int64_t nr, const int64_t *counts, int64_t maxc, const int64_t *send,
            const int64_t *recv, const int64_t *coll, const int64_t *woff, const double *comp,
            const int64_t *phase, int64_t *work, IDX *o_send, IDX *o_recv, IDX *o_coll,
            IDX *o_wstart, IDX *o_wlen, IDX *o_next, double *o_comp, int64_t *o_keys,
            int64_t *o_pos, int64_t *o_first) {
    for (int64_t j = 0; j <= maxc; j++) work[j] = 0;
    for (int64_t r = 0; r < nr; r++) work[counts[r]]++;
    /* work[j] <- base[j]: events of index below j (ranks with more than j' events, j' < j) */
    int64_t left = nr, base = 0;
    for (int64_t j = 0; j <= maxc; j++) {
        int64_t ended = work[j];  /* ranks with exactly j events */
        work[j] = base;
        left -= ended;
        base += left;
    }
    int64_t row = 0;
    for (int64_t r = 0; r < nr; r++) {
        int64_t prev = -1;
        o_first[r] = counts[r] > 0 ? work[0] : -1;
        for (int64_t j = 0; j < counts[r]; j++, row++) {
            int64_t d = work[j]++;
            o_pos[row] = d;
            if (prev >= 0) o_next[prev] = (IDX)d;
            prev = d;
            o_send[d] = (IDX)send[row];
            o_recv[d] = (IDX)recv[row];
            o_coll[d] = (IDX)coll[row];
            o_wstart[d] = (IDX)woff[row];
            o_wlen[d] = (IDX)(woff[row + 1] - woff[row]);
            o_comp[d] = comp[row];
            o_keys[d] = (phase ? phase[row] + 1 : 0) * nr + r;
        }
        if (prev >= 0) o_next[prev] = -1;
    }
}

/* arrays: see replay/_kernel.py (KernelArgs); ints: n, lo, M.
 * Returns the number of posts plus completions; the instances whose members have all
 * entered are in full[0..*n_full). */
int64_t KERNEL(void **a, const int64_t *ints, int64_t *n_full) {
    State S;
    S.n = ints[0];
    S.lo = ints[1];
    S.M = ints[2];
    const int64_t burst = ints[3];
    int k = 0;
    S.idx = a[k++]; S.limit = a[k++]; S.ptr = a[k++];
    S.clock = a[k++]; S.start = a[k++]; S.nic = a[k++];
    S.posted = a[k++]; S.dirty = a[k++];
    const IDX *f_send = a[k++], *f_recv = a[k++], *f_coll = a[k++];
    const IDX *f_wstart = a[k++], *f_wlen = a[k++], *f_next = a[k++];
    S.wslots = a[k++]; S.comp = a[k++]; S.mp = a[k++]; S.rdv = a[k++];
    S.m_src = a[k++]; S.m_dst = a[k++];
    S.ts = a[k++]; S.tr = a[k++]; S.arrive = a[k++];
    S.done = a[k++]; S.cost = a[k++]; S.entry = a[k++];
    S.slot_inst = a[k++]; S.inst_size = a[k++]; S.inst_count = a[k++];
    S.inst_done = a[k++]; S.inst_has_local = a[k++];
    S.t_end = a[k++]; S.comm_ev = a[k++]; S.dur_ev = a[k++];
    S.queue = a[k++]; S.full = a[k++]; S.scr_r = a[k++]; S.scr_c = a[k++];
    S.inst_pat = a[k++]; S.coll_off = a[k++]; S.coll_rank = a[k++]; S.pat_rounds = a[k++];
    S.round_msgs = a[k++]; S.pat_busy = a[k++]; S.c_src = a[k++]; S.c_dst = a[k++];
    S.c_terms = a[k++]; S.busy = a[k++]; S.c_rdv = a[k++];
    S.cT = a[k++]; S.cnic = a[k++]; S.cts = a[k++]; S.cstart = a[k++]; S.carr = a[k++];
    S.qhead = S.qn = 0;
    S.n_full = 0;
    const int64_t M = S.M;

    for (int64_t r = 0; r < S.n; r++)
        if (S.dirty[r] || (!S.posted[r] && S.idx[r] < S.limit[r])) push(&S, r);
    int64_t moved = 0;
    /* ranks take turns, at most `burst` events each (events are numbered time-major: the
     * j-th events of all ranks lie together, so short turns read memory in order) */
    while (S.qn > 0) {
        int64_t r = pop(&S);
        for (int64_t turn = 0;; turn++) {
            if (turn == burst) {
                if (!S.dirty[r]) push(&S, r);
                break;
            }
            int64_t p = S.ptr[r];
            if (!S.posted[r]) {
                /* ---- post (ReplayState._post) ---- */
                if (S.idx[r] >= S.limit[r]) break;
                double c0 = S.clock[r];
                double enter = c0 + S.comp[p];
                double t = enter, tsv = 0.0;
                int64_t mr = f_recv[p], ms = f_send[p], cs = f_coll[p];
                if (mr >= 0) S.tr[mr] = t;
                if (ms >= 0) {
                    const double *mp = S.mp + 4 * ms;
                    tsv = dmax(t, S.nic[r]);
                    S.nic[r] = tsv + mp[1];
                    t = tsv + mp[0];
                    S.ts[ms] = tsv;
                }
                S.comm_ev[p] = t - enter;
                S.dur_ev[p] = t - c0;
                moved++;
                int waits = f_wlen[p] > 0;
                S.clock[r] = t;
                if (!waits) {
                    S.t_end[p] = t;
                    S.idx[r] += 1;
                    S.ptr[r] = f_next[p];
                    moved++;
                } else {
                    S.start[r] = c0;
                    S.posted[r] = 1;
                }
                if (ms >= 0) sends_known(&S, ms, tsv);
                if (mr >= 0) recvs_known(&S, mr);
                if (cs >= 0) {
                    S.entry[cs] = t;
                    entries_known(&S, cs);
                }
                if (!waits) continue;
            }
            /* ---- complete (ReplayState._complete and _recv_scan) ---- */
            int64_t a0 = f_wstart[p], nn = f_wlen[p];
            double x0 = S.clock[r];
            double plain = -INFINITY;
            int64_t nr = 0, known = 1;
            for (int64_t j = 0; j < nn; j++) {
                int64_t s = S.wslots[a0 + j];
                double d = S.done[s];
                if (isnan(d)) { known = 0; break; }
                if (s >= M && s < 2 * M) {
                    S.scr_r[nr] = d;
                    S.scr_c[nr] = S.cost[s];
                    nr++;
                } else if (d > plain) {
                    plain = d;
                }
            }
            if (!known) break;
            double now = dmax(x0, plain);
            if (nr) {
                if (nr > 1) sort_pairs(S.scr_r, S.scr_c, nr);
                double x = x0;
                for (int64_t j = 0; j < nr; j++) x = dmax(x, S.scr_r[j]) + S.scr_c[j];
                now = dmax(now, x);
            }
            /* the call's overheads: its slots' costs, summed as numpy reduces a row */
            for (int64_t j = 0; j < nn; j++) S.scr_c[j] = S.cost[S.wslots[a0 + j]];
            double acct = S.scr_c[0] + pairwise_sum(S.scr_c + 1, nn - 1);
            S.t_end[p] = now;
            S.comm_ev[p] = S.comm_ev[p] + acct;
            S.dur_ev[p] = now - S.start[r];
            S.clock[r] = now;
            S.idx[r] += 1;
            S.ptr[r] = f_next[p];
            S.posted[r] = 0;
            moved++;
        }
    }
    *n_full = S.n_full;
    return moved;
}

#endif
