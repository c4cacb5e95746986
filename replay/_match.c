/* Linear-time helpers of the message matching in replay/program.py (_build).
 *
 * sigex_pair: pairs sends and receives with equal keys by ordinal, as MPI's
 * non-overtaking rule does (the j-th send with key k is received by the j-th receive
 * with key k), with a hash table of the distinct keys and one list of receives per key,
 * instead of sorting both sides. Both sides must be given in program (position) order.
 *
 * sigex_csr: the CSR of (owner, value) pairs, each owner's values in input order (a
 * counting sort: count, prefix sum, scatter).
 *
 * sigex_ordinals: the number of earlier rows with the same key, per row (a counter per
 * key, keys dense in lo..lo+span-1): a collective call's ordinal on its communicator.
 *
 * sigex_find_events, sigex_latest_before: the Wait/Test event of each completion record
 * (a binary search in its rank's events) and the post that created its request (the
 * latest post of that rank and request id before the wait: one merge pass).
 *
 * They give exactly what the numpy forms in program.py give (_pair, _csr, _lookup), which
 * stay for machines without a C compiler. Built on first use by replay/_kernel.py.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t k1, k2, head, tail;
} entry;

static uint64_t mix(int64_t a, int64_t b) {
    uint64_t h = (uint64_t)a * 0x9E3779B97F4A7C15ULL;
    h ^= (uint64_t)b + 0x7F4A7C159E3779B9ULL + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 29;
    return h;
}

/* find (k1, k2); insert it (empty list) if absent and insert != 0; returns the slot or -1 */
static int64_t find(entry **tab, int64_t *cap, int64_t *used, int64_t k1, int64_t k2, int insert) {
    uint64_t mask = (uint64_t)*cap - 1, i = mix(k1, k2) & mask;
    for (;;) {
        entry *e = &(*tab)[i];
        if (e->head == -2) break;  /* empty */
        if (e->k1 == k1 && e->k2 == k2) return (int64_t)i;
        i = (i + 1) & mask;
    }
    if (!insert) return -1;
    if (2 * (*used + 1) > *cap) {  /* grow and rehash */
        int64_t ncap = *cap * 2, k;
        entry *nt = malloc((size_t)ncap * sizeof(entry));
        if (!nt) return -3;
        for (k = 0; k < ncap; k++) nt[k].head = -2;
        for (k = 0; k < *cap; k++) {
            entry *e = &(*tab)[k];
            if (e->head == -2) continue;
            uint64_t j = mix(e->k1, e->k2) & ((uint64_t)ncap - 1);
            while (nt[j].head != -2) j = (j + 1) & ((uint64_t)ncap - 1);
            nt[j] = *e;
        }
        free(*tab);
        *tab = nt;
        *cap = ncap;
        return find(tab, cap, used, k1, k2, insert);
    }
    (*tab)[i].k1 = k1;
    (*tab)[i].k2 = k2;
    (*tab)[i].head = -1;
    (*tab)[i].tail = -1;
    (*used)++;
    return (int64_t)i;
}

/* match[i] = the receive sends[i] is paired with, or -1; rnext: scratch of n_r. 0 on
 * success, -1 if out of memory. */
int64_t sigex_pair(int64_t n_s, const int64_t *s_k1, const int64_t *s_k2, int64_t n_r,
                   const int64_t *r_k1, const int64_t *r_k2, int64_t *match, int64_t *rnext) {
    int64_t cap = 1024, used = 0, i;
    entry *tab = malloc((size_t)cap * sizeof(entry));
    if (!tab) return -1;
    for (i = 0; i < cap; i++) tab[i].head = -2;
    for (i = 0; i < n_r; i++) {  /* one list of receives per key, in order */
        int64_t k = find(&tab, &cap, &used, r_k1[i], r_k2[i], 1);
        if (k < 0) { free(tab); return -1; }
        rnext[i] = -1;
        if (tab[k].tail < 0) tab[k].head = i;
        else rnext[tab[k].tail] = i;
        tab[k].tail = i;
    }
    for (i = 0; i < n_s; i++) {  /* each send takes its key's next receive */
        int64_t k = find(&tab, &cap, &used, s_k1[i], s_k2[i], 0);
        if (k < 0 || tab[k].head < 0) { match[i] = -1; continue; }
        match[i] = tab[k].head;
        tab[k].head = rnext[tab[k].head];
    }
    free(tab);
    return 0;
}

/* offsets (n_owners + 1) and values grouped by owner (n), each owner's in input order */
void sigex_csr(int64_t n, const int64_t *owner, const int64_t *value, int64_t n_owners,
               int64_t *offsets, int64_t *out) {
    int64_t i;
    memset(offsets, 0, (size_t)(n_owners + 1) * sizeof(int64_t));
    for (i = 0; i < n; i++) offsets[owner[i] + 1]++;
    for (i = 0; i < n_owners; i++) offsets[i + 1] += offsets[i];
    /* fill: offsets[o] walks through owner o's range, then is restored */
    for (i = 0; i < n; i++) out[offsets[owner[i]]++] = value[i];
    for (i = n_owners; i > 0; i--) offsets[i] = offsets[i - 1];
    offsets[0] = 0;
}

/* out[i] = rows before i with key[i]; counters: scratch of span (keys in lo..lo+span-1) */
void sigex_ordinals(int64_t n, const int64_t *key, int64_t lo, int64_t span, int64_t *counters,
                    int64_t *out) {
    int64_t i;
    memset(counters, 0, (size_t)span * sizeof(int64_t));
    for (i = 0; i < n; i++) out[i] = counters[key[i] - lo]++;
}

/* For each query (rank, seq): the event of that rank with that seq (events sorted by rank,
 * each rank's by increasing seq: rank r's are offsets[r]..offsets[r+1]), or -1. */
void sigex_find_events(int64_t nq, const int64_t *q_rank, const int64_t *q_seq, int64_t P,
                       const int64_t *offsets, const int64_t *seq, int64_t *out) {
    int64_t j;
    for (j = 0; j < nq; j++) {
        int64_t r = q_rank[j], lo, hi;
        out[j] = -1;
        if (r < 0 || r >= P) continue;
        lo = offsets[r];
        hi = offsets[r + 1];
        while (lo < hi) {  /* first event of the rank with seq >= q_seq */
            int64_t mid = lo + (hi - lo) / 2;
            if (seq[mid] < q_seq[j]) lo = mid + 1;
            else hi = mid;
        }
        if (lo < offsets[r + 1] && seq[lo] == q_seq[j]) out[j] = lo;
    }
}

/* For each query (key, position), in increasing position order (order: the queries' indices
 * in that order): the index of the table row with that key and the largest position below
 * the query's, or -1. Table rows come in increasing position. One pass over both, keeping
 * the latest row of each key seen so far: in an array indexed by key - lo when span > 0
 * (keys dense in lo..lo+span-1), else in a hash. 0 on success, -1 if out of memory. */
int64_t sigex_latest_before(int64_t nt, const int64_t *t_key, const int64_t *t_pos, int64_t nq,
                            const int64_t *q_key, const int64_t *q_pos, const int64_t *order,
                            int64_t lo, int64_t span, int64_t *out) {
    int64_t cap = 1024, used = 0, i, p = 0;
    entry *tab = NULL;
    int64_t *latest = NULL;
    if (span > 0) {
        latest = malloc((size_t)span * sizeof(int64_t));
        if (!latest) return -1;
        for (i = 0; i < span; i++) latest[i] = -1;
    } else {
        tab = malloc((size_t)cap * sizeof(entry));
        if (!tab) return -1;
        for (i = 0; i < cap; i++) tab[i].head = -2;
    }
    for (i = 0; i < nq; i++) {
        int64_t j = order[i], k;
        while (p < nt && t_pos[p] < q_pos[j]) {
            if (latest) {
                latest[t_key[p] - lo] = p;
            } else {
                k = find(&tab, &cap, &used, t_key[p], 0, 1);
                if (k < 0) { free(tab); return -1; }
                tab[k].head = p;  /* the latest row with this key so far */
            }
            p++;
        }
        if (latest) {
            int64_t d = q_key[j] - lo;
            out[j] = d >= 0 && d < span ? latest[d] : -1;
        } else {
            k = find(&tab, &cap, &used, q_key[j], 0, 0);
            out[j] = k < 0 ? -1 : tab[k].head;
        }
    }
    free(tab);
    free(latest);
    return 0;
}
