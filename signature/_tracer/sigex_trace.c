/*
 * sigex_trace.c -- PMPI interposition tracer for sigex.
 *
 * Defines MPI_* entry points that record one event per call and forward to
 * PMPI_*, as Score-P, Extrae, mpiP and DUMPI do.  Loaded with LD_PRELOAD (or
 * mpi4py.profile), it traces any MPI program unchanged.  Both the classic and
 * the MPI-4 large-count (_c) entry points are wrapped: mpi4py 4 calls the _c
 * ones whenever the library has them.
 *
 * Per event the tracer keeps: seq, op, peer (world rank), receive peer for
 * Sendrecv, root (world rank), bytes sent / received, tag, communicator,
 * request id, start time, time inside the call, and for the compute burst
 * that preceded the call: wall time, thread CPU time, context switches and,
 * where the kernel has a hardware PMU, instructions, cycles and LLC misses
 * (perf_event_open on the calling thread).  Where the PMU is missing the
 * columns are not written and the kernel's reason is recorded, and the CPU
 * time is read lazily: only at boundaries that end a long interval or follow
 * a context switch (see "lazy CPU-time sampling" below).
 *
 * Output (directory $SIGEX_TRACE_DIR, one set of files per world rank r):
 *   rank<r>.meta         key=value text written at MPI_Init
 *   rank<r>.events       fixed-size binary records (struct sigex_event)
 *   rank<r>.completions  one record per request completed by Wait/Test
 *   rank<r>.lists        per-peer byte counts of v-collectives, requests
 *                       started by Startall
 *   rank<r>.comms        one text line per communicator seen and per user
 *                        region name (signature.region)
 *   rank<r>.cpucheck     with SIGEX_CPU_SAMPLE_CHECK=1 only: the always-sampled
 *                        CPU time of every burst, to measure the lazy one
 *   rank<r>.end          written last, at MPI_Finalize: the run is complete
 * Binary streams are written through shared file mappings (see ms_write),
 * so that a rank killed by the launcher loses none of its recorded events.
 * The Python side (signature/_raw.py) assembles these into one HDF5 file;
 * docs/trace-format.md describes both.
 *
 * Without $SIGEX_TRACE_DIR the library only forwards calls.
 */
#define _GNU_SOURCE
#include <mpi.h>

/* What this MPI provides is worked out when the library is built
 * (signature/_build.py reads the library's exported PMPI symbols and its
 * mpi.h): the generated header defines SIGEX_LARGE_COUNT where the MPI-4
 * large-count (_c) functions exist, SIGEX_HAVE_ISENDRECV for MPI_Isendrecv,
 * and the table of the library's other MPI functions, which are counted and
 * timed but not modelled (SIGEX_UNMODELLED_N of them, wrappers in
 * SIGEX_GEN_WRAPPERS).  A hand build without it goes by the MPI version, so
 * that no PMPI symbol the library lacks is ever referenced. */
#ifdef SIGEX_GEN_HEADER
#include SIGEX_GEN_HEADER
#else
#if MPI_VERSION >= 4
#define SIGEX_LARGE_COUNT 1
#define SIGEX_HAVE_ISENDRECV 1
#define SIGEX_HAVE_PERSISTENT_COLL 1
#endif
#define SIGEX_UNMODELLED_N 0
#endif
#ifdef SIGEX_LARGE_COUNT
#define IF_LARGE(...) __VA_ARGS__
#else
#define IF_LARGE(...)
#endif

#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SIGEX_RAW_VERSION 1

/* ---- operation codes: the names are written into rank<r>.meta ---------- */
#define SIGEX_OPS(X)                                                          \
  X(INIT, "Init") X(FINALIZE, "Finalize") X(ABORT, "Abort")                   \
  X(SEND, "Send") X(SSEND, "Ssend") X(BSEND, "Bsend") X(RSEND, "Rsend")       \
  X(RECV, "Recv") X(ISEND, "Isend") X(ISSEND, "Issend") X(IBSEND, "Ibsend")   \
  X(IRSEND, "Irsend") X(IRECV, "Irecv") X(SENDRECV, "Sendrecv")               \
  X(SENDRECV_REPLACE, "Sendrecv_replace") X(PROBE, "Probe")                   \
  X(IPROBE, "Iprobe") X(MPROBE, "Mprobe") X(IMPROBE, "Improbe")               \
  X(MRECV, "Mrecv") X(IMRECV, "Imrecv") X(SEND_INIT, "Send_init")             \
  X(SSEND_INIT, "Ssend_init") X(BSEND_INIT, "Bsend_init")                     \
  X(RSEND_INIT, "Rsend_init") X(RECV_INIT, "Recv_init") X(START, "Start")     \
  X(STARTALL, "Startall") X(WAIT, "Wait") X(WAITALL, "Waitall")               \
  X(WAITANY, "Waitany") X(WAITSOME, "Waitsome") X(TEST, "Test")               \
  X(TESTALL, "Testall") X(TESTANY, "Testany") X(TESTSOME, "Testsome")         \
  X(REQUEST_FREE, "Request_free") X(BARRIER, "Barrier") X(BCAST, "Bcast")     \
  X(REDUCE, "Reduce") X(ALLREDUCE, "Allreduce") X(GATHER, "Gather")           \
  X(GATHERV, "Gatherv") X(SCATTER, "Scatter") X(SCATTERV, "Scatterv")         \
  X(ALLGATHER, "Allgather") X(ALLGATHERV, "Allgatherv")                       \
  X(ALLTOALL, "Alltoall") X(ALLTOALLV, "Alltoallv")                           \
  X(REDUCE_SCATTER, "Reduce_scatter")                                         \
  X(REDUCE_SCATTER_BLOCK, "Reduce_scatter_block") X(SCAN, "Scan")             \
  X(EXSCAN, "Exscan") X(IBARRIER, "Ibarrier") X(IBCAST, "Ibcast")             \
  X(IREDUCE, "Ireduce") X(IALLREDUCE, "Iallreduce") X(IGATHER, "Igather")     \
  X(IGATHERV, "Igatherv") X(ISCATTER, "Iscatter") X(ISCATTERV, "Iscatterv")   \
  X(IALLGATHER, "Iallgather") X(IALLGATHERV, "Iallgatherv")                   \
  X(IALLTOALL, "Ialltoall") X(IALLTOALLV, "Ialltoallv")                       \
  X(IREDUCE_SCATTER, "Ireduce_scatter")                                       \
  X(IREDUCE_SCATTER_BLOCK, "Ireduce_scatter_block") X(ISCAN, "Iscan")         \
  X(IEXSCAN, "Iexscan") X(COMM_SPLIT, "Comm_split")                           \
  X(COMM_SPLIT_TYPE, "Comm_split_type") X(COMM_CREATE, "Comm_create")         \
  X(COMM_CREATE_GROUP, "Comm_create_group") X(COMM_DUP, "Comm_dup")           \
  X(CART_CREATE, "Cart_create") X(CART_SUB, "Cart_sub")                       \
  X(COMM_FREE, "Comm_free") X(ISENDRECV, "Isendrecv")                        \
  X(ISENDRECV_REPLACE, "Isendrecv_replace") X(REGION_BEGIN, "Region_begin")   \
  X(REGION_END, "Region_end") X(ALLTOALLW, "Alltoallw")                       \
  X(IALLTOALLW, "Ialltoallw") X(CANCEL, "Cancel")                            \
  X(BARRIER_INIT, "Barrier_init") X(BCAST_INIT, "Bcast_init")                 \
  X(REDUCE_INIT, "Reduce_init") X(ALLREDUCE_INIT, "Allreduce_init")           \
  X(GATHER_INIT, "Gather_init") X(GATHERV_INIT, "Gatherv_init")               \
  X(SCATTER_INIT, "Scatter_init") X(SCATTERV_INIT, "Scatterv_init")           \
  X(ALLGATHER_INIT, "Allgather_init") X(ALLGATHERV_INIT, "Allgatherv_init")   \
  X(ALLTOALL_INIT, "Alltoall_init") X(ALLTOALLV_INIT, "Alltoallv_init")       \
  X(ALLTOALLW_INIT, "Alltoallw_init")                                         \
  X(REDUCE_SCATTER_INIT, "Reduce_scatter_init")                               \
  X(REDUCE_SCATTER_BLOCK_INIT, "Reduce_scatter_block_init")                   \
  X(SCAN_INIT, "Scan_init") X(EXSCAN_INIT, "Exscan_init")                    \
  X(NEIGHBOR_ALLGATHER, "Neighbor_allgather")                                 \
  X(NEIGHBOR_ALLGATHERV, "Neighbor_allgatherv")                               \
  X(NEIGHBOR_ALLTOALL, "Neighbor_alltoall")                                   \
  X(NEIGHBOR_ALLTOALLV, "Neighbor_alltoallv")                                 \
  X(NEIGHBOR_ALLTOALLW, "Neighbor_alltoallw")                                 \
  X(INEIGHBOR_ALLGATHER, "Ineighbor_allgather")                               \
  X(INEIGHBOR_ALLGATHERV, "Ineighbor_allgatherv")                             \
  X(INEIGHBOR_ALLTOALL, "Ineighbor_alltoall")                                 \
  X(INEIGHBOR_ALLTOALLV, "Ineighbor_alltoallv")                               \
  X(INEIGHBOR_ALLTOALLW, "Ineighbor_alltoallw")                               \
  X(NEIGHBOR_ALLGATHER_INIT, "Neighbor_allgather_init")                       \
  X(NEIGHBOR_ALLGATHERV_INIT, "Neighbor_allgatherv_init")                     \
  X(NEIGHBOR_ALLTOALL_INIT, "Neighbor_alltoall_init")                         \
  X(NEIGHBOR_ALLTOALLV_INIT, "Neighbor_alltoallv_init")                       \
  X(NEIGHBOR_ALLTOALLW_INIT, "Neighbor_alltoallw_init")                       \
  X(GRAPH_CREATE, "Graph_create") X(DIST_GRAPH_CREATE, "Dist_graph_create")   \
  X(WIN_CREATE, "Win_create") X(WIN_FREE, "Win_free") X(WIN_FENCE, "Win_fence") \
  X(PUT, "Put") X(GET, "Get") X(ACCUMULATE, "Accumulate")                     \
  X(GET_ACCUMULATE, "Get_accumulate") X(FETCH_AND_OP, "Fetch_and_op")         \
  X(COMPARE_AND_SWAP, "Compare_and_swap") X(RPUT, "Rput") X(RGET, "Rget")     \
  X(RACCUMULATE, "Raccumulate") X(RGET_ACCUMULATE, "Rget_accumulate")         \
  X(WIN_LOCK, "Win_lock") X(WIN_UNLOCK, "Win_unlock")                         \
  X(WIN_LOCK_ALL, "Win_lock_all") X(WIN_UNLOCK_ALL, "Win_unlock_all")         \
  X(WIN_FLUSH, "Win_flush") X(WIN_FLUSH_LOCAL, "Win_flush_local")             \
  X(WIN_FLUSH_ALL, "Win_flush_all") X(WIN_FLUSH_LOCAL_ALL, "Win_flush_local_all") \
  X(WIN_SYNC, "Win_sync") X(WIN_POST, "Win_post") X(WIN_START, "Win_start")   \
  X(WIN_COMPLETE, "Win_complete") X(WIN_WAIT, "Win_wait") X(WIN_TEST, "Win_test")

enum {
  OP_NONE = 0,
#define X_ENUM(id, name) OP_##id,
  SIGEX_OPS(X_ENUM)
#undef X_ENUM
  OP_COUNT
};

static const char *op_names[] = {
  "None",
#define X_NAME(id, name) name,
  SIGEX_OPS(X_NAME)
#undef X_NAME
};

/* Special peer values (world ranks are >= 0). */
#define PEER_NONE (-1)
#define PEER_ANY (-2)
#define PEER_NULL (-3)

/* ---- raw records (little-endian, native alignment, see trace-format.md) - */
struct sigex_event {
  int64_t seq;
  double t_start;      /* s since the post-Init barrier */
  double t_comm;       /* s inside the call */
  double t_comp;       /* s of wall time of the preceding burst */
  double t_cpu;        /* s of thread CPU time of the preceding burst */
  int64_t bytes;       /* bytes sent (block size for collectives) */
  int64_t recv_bytes;  /* bytes received */
  int64_t req;         /* request id created by this call, or -1 */
  int64_t ctx_switches;
  int64_t instr, cycles, llc_misses; /* -1 where no PMU */
  int32_t op, peer, recv_peer, root, tag, comm;
  int32_t aux;         /* op-specific, see trace-format.md */
  int32_t repeat;      /* polls one held poll event stands for (0: one call) */
};

struct sigex_completion {
  int64_t seq;   /* the Wait/Test event that completed the request */
  int64_t req;
  int64_t bytes;
  int32_t peer;
  int32_t tag;
};

/* ---- state --------------------------------------------------------------- */
typedef struct {
  MPI_Comm handle;   /* MPI_COMM_NULL once freed */
  int id;            /* per-rank id in order of first sight */
  int size;
  int *world;        /* world rank of each (remote, for intercomms) rank */
} comm_entry;

typedef struct {
  MPI_Request handle;
  int state;         /* 0 empty, 1 used, 2 deleted */
  int persistent, active;
  int is_recv;       /* 0 send, 1 receive (status read), 2 Isendrecv (not) */
  int64_t id, bytes;
  int32_t peer, tag;
  comm_entry *comm;
} req_entry;

typedef struct { double cpu; int64_t ctx, instr, cycles, llc; } sample_t;

#define MS_WINDOW ((size_t)8 << 20)
typedef struct {
  int fd;
  char *base;
  size_t win_off, pos;
} mstream;

static struct {
  int tracing, depth, rank, size;
  pthread_t main_thread;
  uintptr_t main_tp;  /* its thread pointer (thread_id) */
  int poll_slow;      /* check mode or sampling always: every poll reads the CPU clock */
  double t0, last_end;
  sample_t last;
  sample_t pre;       /* read before a poll's call (sampling always, check mode, and lazily
                       * where the gap before the poll lost the CPU or was long: poll_begin) */
  int pre_real;       /* lazily: pre was read at this poll's start as a real sample */
  int64_t seq, nevents, ncompletions, untraced_calls, next_req;
  mstream m_events, m_compl, m_lists;
  FILE *f_comms;
  char dir[4096];
  /* counters */
  int sw_fd, sw_fd2, hw_fd, hw_ok, sw_ok, n_sw, n_hw;
  /* lazy CPU-time sampling (see cpu_burst_end) */
  double cpu_min_s;   /* T: an interval shorter than this ends without a sample (0: always) */
  double cpu_chain_s; /* bound on the estimated time between two real samples */
  double est;         /* wall time of the intervals estimated since the last real sample */
  int64_t est_ctx;    /* context switches of those intervals known to have switched (polls) */
  int64_t n_bursts, n_bursts_est, n_samples;
  double t_bursts, t_bursts_est;
  int check;          /* SIGEX_CPU_SAMPLE_CHECK: also sample always, write rank<r>.cpucheck */
  int64_t ctx_known;  /* context switches so far while rseq watches them, else -1 */
  int switch_seen;    /* rseq saw a switch since getrusage was last read */
  sample_t ref;       /* the always-sampling tracer's last sample (check mode) */
  mstream m_check;
  /* communicators */
  comm_entry **comms;
  int ncomms, capcomms;
  comm_entry *cur; /* communicator of the event being recorded */
  /* requests */
  req_entry *reqs;
  size_t capreqs, usedreqs;
  /* scratch for Wait/Test families */
  MPI_Request *scratch_req;
  MPI_Status *scratch_st;
  int scratch_n;
} g = {.sw_fd = -1, .sw_fd2 = -1, .hw_fd = -1, .ctx_known = -1, .m_events = {.fd = -1}, .m_compl = {.fd = -1},
       .m_lists = {.fd = -1}, .m_check = {.fd = -1}};

static inline double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Append-only binary streams written through a shared file mapping: the
 * kernel keeps what was written even if the process is killed (SIGKILL from
 * the launcher when another rank dies), so a crashed run loses no recorded
 * event.  The file grows by MS_WINDOW; unwritten space is zeros, which the
 * reader trims (no valid record starts with zeros, see _raw.py). */
static void ms_map(mstream *m, size_t off) {
  if (ftruncate(m->fd, (off_t)(off + MS_WINDOW)) != 0) goto fail;
  m->base = mmap(NULL, MS_WINDOW, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, (off_t)off);
  if (m->base == MAP_FAILED) goto fail;
  m->win_off = off;
  return;
fail:
  fprintf(stderr, "sigex tracer: rank %d cannot extend its trace file: %s\n", g.rank,
          strerror(errno));
  PMPI_Abort(MPI_COMM_WORLD, 3);
}

static void ms_open(mstream *m, const char *suffix) {
  char path[4200];
  snprintf(path, sizeof path, "%s/rank%d.%s", g.dir, g.rank, suffix);
  m->fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (m->fd < 0) {
    fprintf(stderr, "sigex tracer: rank %d cannot write %s: %s\n", g.rank, path,
            strerror(errno));
    PMPI_Abort(MPI_COMM_WORLD, 3);
  }
  m->pos = 0;
  ms_map(m, 0);
}

static void ms_write(mstream *m, const void *p, size_t n) {
  const char *src = p;
  while (n) {
    size_t room = m->win_off + MS_WINDOW - m->pos;
    if (!room) {
      munmap(m->base, MS_WINDOW);
      ms_map(m, m->win_off + MS_WINDOW);
      continue;
    }
    size_t k = n < room ? n : room;
    memcpy(m->base + (m->pos - m->win_off), src, k);
    m->pos += k;
    src += k;
    n -= k;
  }
}

static void ms_close(mstream *m) {
  if (m->fd < 0 || !m->base) return;
  munmap(m->base, MS_WINDOW);
  if (ftruncate(m->fd, (off_t)m->pos) != 0) { /* the reader trims zeros anyway */ }
  close(m->fd);
  m->fd = -1;
  m->base = NULL;
}

/* ---- perf_event_open ---------------------------------------------------- */
static int perf_open(uint32_t type, uint64_t config, int group_fd,
                     int *err) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = type;
  a.config = config;
  a.disabled = group_fd == -1;
  a.exclude_hv = 1;
  if (type == PERF_TYPE_HARDWARE) a.exclude_kernel = 1;
  a.read_format = PERF_FORMAT_GROUP;
  int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, group_fd,
                        PERF_FLAG_FD_CLOEXEC);
  *err = fd < 0 ? errno : 0;
  return fd;
}

static void perf_setup(char *sw_reason, char *hw_reason, size_t n) {
  int err = 0;
  sw_reason[0] = hw_reason[0] = 0;
  if (getenv("SIGEX_NO_PERF")) {
    snprintf(sw_reason, n, "disabled by SIGEX_NO_PERF");
    snprintf(hw_reason, n, "disabled by SIGEX_NO_PERF");
    return;
  }
  g.sw_fd = perf_open(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, -1, &err);
  if (g.sw_fd >= 0) {
    int fd = perf_open(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES,
                       g.sw_fd, &err);
    if (fd >= 0) {
      g.sw_ok = 1;
      g.n_sw = 2;
      g.sw_fd2 = fd;
      ioctl(g.sw_fd, PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP);
    } else {
      snprintf(sw_reason, n,
               "perf_event_open(PERF_COUNT_SW_CONTEXT_SWITCHES): %s (errno %d)",
               strerror(err), err);
      close(g.sw_fd);
      g.sw_fd = -1;
    }
  } else {
    snprintf(sw_reason, n, "perf_event_open(PERF_COUNT_SW_TASK_CLOCK): %s (errno %d)",
             strerror(err), err);
  }
  static const struct { uint64_t config; const char *name; } hw[] = {
    {PERF_COUNT_HW_INSTRUCTIONS, "PERF_COUNT_HW_INSTRUCTIONS"},
    {PERF_COUNT_HW_CPU_CYCLES, "PERF_COUNT_HW_CPU_CYCLES"},
    {PERF_COUNT_HW_CACHE_MISSES, "PERF_COUNT_HW_CACHE_MISSES"},
  };
  int leader = -1;
  for (int i = 0; i < 3; i++) {
    int fd = perf_open(PERF_TYPE_HARDWARE, hw[i].config, leader, &err);
    if (fd < 0) {
      snprintf(hw_reason, n, "perf_event_open(%s): %s (errno %d)", hw[i].name,
               strerror(err), err);
      if (leader >= 0) close(leader); /* closes the group's members too */
      return;
    }
    if (leader < 0) leader = fd;
  }
  g.hw_fd = leader;
  g.hw_ok = 1;
  g.n_hw = 3;
  ioctl(g.hw_fd, PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP);
}

static void sample(sample_t *s) {
  uint64_t buf[1 + 3];
  if (g.sw_ok && read(g.sw_fd, buf, sizeof(uint64_t) * (1 + g.n_sw)) > 0) {
    s->cpu = 1e-9 * (double)buf[1];
    s->ctx = (int64_t)buf[2];
  } else {
    struct timespec ts;
    struct rusage ru;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    s->cpu = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    if (g.ctx_known >= 0 && !g.switch_seen) {
      s->ctx = g.ctx_known; /* rseq saw no switch since the count was read */
    } else {
      getrusage(RUSAGE_THREAD, &ru);
      s->ctx = ru.ru_nvcsw + ru.ru_nivcsw;
      if (g.ctx_known >= 0) g.ctx_known = s->ctx;
      g.switch_seen = 0;
    }
  }
  if (g.hw_ok && read(g.hw_fd, buf, sizeof(uint64_t) * (1 + g.n_hw)) > 0) {
    s->instr = (int64_t)buf[1];
    s->cycles = (int64_t)buf[2];
    s->llc = (int64_t)buf[3];
  } else {
    s->instr = s->cycles = s->llc = -1;
  }
}

/* Used by tests through ctypes (no MPI needed): burn CPU and report what the
 * counters saw.  out[0] = CPU seconds from the counters in use, out[1] =
 * context switches, out[2] = instructions (-1 without PMU), out[3] = CPU
 * seconds from CLOCK_THREAD_CPUTIME_ID over the same work (an independent
 * reference).  Returns 1 if perf_event_open software events work, 0 if the
 * fallback clocks were used. */
int sigex_perf_selftest(double work_seconds, double *out, char *sw_reason,
                        char *hw_reason, int n) {
  perf_setup(sw_reason, hw_reason, (size_t)n);
  sample_t a, b;
  struct timespec c0, c1;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
  sample(&a);
  double t = wall_now();
  volatile double x = 0;
  while (wall_now() - t < work_seconds)
    for (int i = 0; i < 1000; i++) x += i * 1e-9;
  usleep(1000); /* at least one voluntary context switch */
  sample(&b);
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
  out[0] = b.cpu - a.cpu;
  out[1] = (double)(b.ctx - a.ctx);
  out[2] = g.hw_ok ? (double)(b.instr - a.instr) : -1.0;
  out[3] = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
  return g.sw_ok;
}

/* ---- communicators ------------------------------------------------------ */
static comm_entry *comm_register(MPI_Comm c) {
  comm_entry *e = calloc(1, sizeof *e);
  int inter = 0, topo = MPI_UNDEFINED;
  MPI_Group grp, wgrp;
  PMPI_Comm_test_inter(c, &inter);
  if (inter) {
    PMPI_Comm_remote_size(c, &e->size);
    PMPI_Comm_remote_group(c, &grp);
  } else {
    PMPI_Comm_size(c, &e->size);
    PMPI_Comm_group(c, &grp);
  }
  PMPI_Comm_group(MPI_COMM_WORLD, &wgrp);
  int *local = malloc(sizeof(int) * (size_t)e->size);
  e->world = malloc(sizeof(int) * (size_t)e->size);
  for (int i = 0; i < e->size; i++) local[i] = i;
  PMPI_Group_translate_ranks(grp, e->size, local, wgrp, e->world);
  free(local);
  PMPI_Group_free(&grp);
  PMPI_Group_free(&wgrp);
  e->handle = c;
  e->id = g.ncomms;
  if (g.ncomms == g.capcomms) {
    g.capcomms = g.capcomms ? 2 * g.capcomms : 16;
    g.comms = realloc(g.comms, sizeof(*g.comms) * (size_t)g.capcomms);
  }
  g.comms[g.ncomms++] = e;
  if (g.f_comms) {
    fprintf(g.f_comms, "comm %d size %d inter %d members", e->id, e->size,
            inter);
    for (int i = 0; i < e->size; i++) fprintf(g.f_comms, " %d", e->world[i]);
    if (!inter) PMPI_Topo_test(c, &topo);
    if (topo == MPI_CART) {
      int nd = 0;
      PMPI_Cartdim_get(c, &nd);
      int *dims = malloc(sizeof(int) * (size_t)(3 * nd + 1));
      PMPI_Cart_get(c, nd, dims, dims + nd, dims + 2 * nd);
      fprintf(g.f_comms, " cart %d dims", nd);
      for (int i = 0; i < nd; i++) fprintf(g.f_comms, " %d", dims[i]);
      fprintf(g.f_comms, " periods");
      for (int i = 0; i < nd; i++) fprintf(g.f_comms, " %d", dims[nd + i] ? 1 : 0);
      free(dims);
    }
    fputc('\n', g.f_comms);
    fflush(g.f_comms);
  }
  return e;
}

static comm_entry *comm_get(MPI_Comm c) {
  if (c == MPI_COMM_NULL) return NULL;
  for (int i = 0; i < g.ncomms; i++)
    if (g.comms[i]->handle == c) return g.comms[i];
  return comm_register(c);
}

static inline int32_t world_of(comm_entry *c, int r) {
  if (r == MPI_PROC_NULL) return PEER_NULL;
  if (r == MPI_ANY_SOURCE) return PEER_ANY;
  if (!c || r < 0 || r >= c->size) return PEER_NONE;
  return c->world[r];
}

/* Size of a datatype and bytes of a status: the large-count forms where the
 * library has them, else MPI-3's _x forms (for MPI_BYTE, elements = bytes). */
static inline MPI_Count type_size(MPI_Datatype t) {
  MPI_Count sz = 0;
  if (t == MPI_DATATYPE_NULL) return 0;
#ifdef SIGEX_LARGE_COUNT
  PMPI_Type_size_c(t, &sz);
#else
  PMPI_Type_size_x(t, &sz);
#endif
  return sz;
}

static inline MPI_Count status_bytes(const MPI_Status *st) {
  MPI_Count n = 0;
#ifdef SIGEX_LARGE_COUNT
  PMPI_Get_count_c(st, MPI_BYTE, &n);
#else
  PMPI_Get_elements_x(st, MPI_BYTE, &n);
#endif
  return n;
}

/* ---- requests: open-addressing hash on the handle's bytes ---------------- */
static size_t req_hash(MPI_Request h) {
  uint64_t x = 0;
  memcpy(&x, &h, sizeof h < sizeof x ? sizeof h : sizeof x);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (size_t)x;
}

/* Insert always takes a new slot: MPI libraries may hand out the same handle
 * for several requests at once (MPICH returns one pre-completed handle for
 * every eager send that finished inside Isend).  Lookup returns the oldest
 * entry with that handle, so such requests complete in creation order. */
static req_entry *req_find(MPI_Request h, int insert) {
  if (insert && 2 * (g.usedreqs + 1) > g.capreqs) {
    size_t oldcap = g.capreqs;
    req_entry *old = g.reqs;
    g.capreqs = oldcap ? 2 * oldcap : 1024;
    g.reqs = calloc(g.capreqs, sizeof *g.reqs);
    g.usedreqs = 0;
    for (size_t i = 0; i < oldcap; i++)
      if (old[i].state == 1) {
        req_entry *e = req_find(old[i].handle, 1);
        *e = old[i];
      }
    free(old);
  }
  if (!g.capreqs) return NULL;
  size_t mask = g.capreqs - 1, i = req_hash(h) & mask;
  req_entry *tomb = NULL, *best = NULL;
  for (;;) {
    req_entry *e = &g.reqs[i];
    if (e->state == 0) {
      if (!insert) return best;
      if (tomb) e = tomb;
      else g.usedreqs++;
      memset(e, 0, sizeof *e);
      e->state = 1;
      e->handle = h;
      return e;
    }
    if (e->state == 2) {
      if (!tomb) tomb = e;
    } else if (!insert && memcmp(&e->handle, &h, sizeof h) == 0) {
      if (!best || e->id < best->id) best = e;
    }
    i = (i + 1) & mask;
  }
}

static int64_t req_add(MPI_Request h, int persistent, int is_recv,
                       int32_t peer, int32_t tag, int64_t bytes) {
  if (h == MPI_REQUEST_NULL) return -1;
  req_entry *e = req_find(h, 1);
  e->id = g.next_req++;
  e->persistent = persistent;
  e->active = !persistent;
  e->is_recv = is_recv;
  e->peer = peer;
  e->tag = tag;
  e->bytes = bytes;
  e->comm = g.cur;
  return e->id;
}

static void req_complete(MPI_Request h, const MPI_Status *st, int64_t seq) {
  struct sigex_completion c = {seq, -1, 0, PEER_NONE, -1};
  req_entry *e = req_find(h, 0);
  if (e) {
    if (e->persistent && !e->active) return; /* inactive: nothing completes */
    c.req = e->id;
    c.peer = e->peer;
    c.tag = e->tag;
    c.bytes = e->bytes;
    if (e->persistent) e->active = 0;
    else e->state = 2;
  }
  /* Only receives the tracer saw created have a status worth reading; a
   * request of an untraced call (e.g. a persistent collective) completes
   * with peer -1 and 0 bytes rather than with undefined status fields. */
  if (e && e->is_recv == 1 && st && st != MPI_STATUS_IGNORE &&
      st->MPI_SOURCE != MPI_ANY_SOURCE) {
    /* the source is known unless the receive was posted with ANY_SOURCE */
    if (c.peer == PEER_ANY) c.peer = world_of(e->comm, st->MPI_SOURCE);
    if (c.peer == PEER_NULL) {
      c.bytes = 0; /* a receive from MPI_PROC_NULL receives nothing */
    } else {
      c.tag = st->MPI_TAG;
      c.bytes = status_bytes(st);
    }
  }
  /* A cancelled request moved nothing: its completion says so (peer
   * MPI_PROC_NULL, 0 bytes), and the replay drops its message. */
  int cancelled = 0;
  if (e && st && st != MPI_STATUS_IGNORE) PMPI_Test_cancelled(st, &cancelled);
  if (cancelled) {
    c.peer = PEER_NULL;
    c.bytes = 0;
  }
  ms_write(&g.m_compl, &c, sizeof c);
  g.ncompletions++;
}

/* ---- event begin/end ----------------------------------------------------- */
typedef struct sigex_event ev_t;

/* ---- lazy CPU-time sampling ----------------------------------------------
 * Reading the thread's CPU time is a system call (a read of the
 * perf_event_open group, ~0.2 us here, or clock_gettime(CLOCK_THREAD_
 * CPUTIME_ID) where perf is refused; VMs without user-space rdpmc have no
 * cheaper way), and an event has two boundaries: the call's entry ends the
 * burst before it, its exit ends the call.  Sampled at both, that is more
 * than half of the tracer's cost per call.  But a thread cannot be
 * descheduled and run again inside an interval shorter than the time slice
 * of the thread that displaces it, so over an interval shorter than T its
 * CPU time is its wall time and it saw no context switch, up to interrupt
 * noise.  A boundary is therefore sampled only when the interval ending
 * there lasted T or more of wall time (CLOCK_MONOTONIC, read through the
 * vDSO), or when the intervals estimated since the last real sample add up
 * to cpu_chain_s (so that an error cannot accumulate).  An estimated burst
 * gets its wall time as CPU time and 0 context switches; a sampled burst
 * gets the CPU time since the last real sample minus the wall time of the
 * intervals estimated in between (exact when those were on the CPU, as T
 * makes them), and every context switch since the last real sample.
 * T is $SIGEX_CPU_SAMPLE_MIN_US (0: sample every boundary), the bound
 * $SIGEX_CPU_SAMPLE_CHAIN_US.  With hardware counters every boundary is
 * sampled: instructions and cycles cannot be estimated from wall time.
 * $SIGEX_CPU_SAMPLE_CHECK=1 samples every boundary too and writes what the
 * always-sampling tracer would have recorded to rank<r>.cpucheck, one
 * record per burst (see trace-format.md), so that the lazy figures can be
 * compared with exact ones of the same run. */
#define SIGEX_CPU_SAMPLE_MIN_US_DEFAULT 20.0
#define SIGEX_CPU_SAMPLE_CHAIN_US_DEFAULT 1000.0

/* Where the C library has registered a restartable-sequences area for the
 * thread (glibc >= 2.35), a context switch is also seen directly, without a
 * system call: the tracer points the area's rseq_cs at a descriptor of a
 * critical section that never runs, and the kernel clears that pointer when
 * it returns the thread to user space after a preemption, a block, a
 * migration or a signal (rseq(2): a critical-section pointer whose IP range
 * does not hold the current IP is cleared).  A boundary whose interval saw
 * the pointer cleared is sampled, whatever its length; so an estimated
 * interval is one the thread spent on the CPU, up to interrupts. */
#if defined(__has_include)
#if __has_include(<sys/rseq.h>) && (defined(__x86_64__) || defined(__aarch64__))
#include <sys/rseq.h>
#define SIGEX_RSEQ 1
#endif
#endif
#ifdef SIGEX_RSEQ
#define SIGEX_STR2(x) #x
#define SIGEX_STR(x) SIGEX_STR2(x)
/* The critical section: code that is never executed, the abort signature the
 * kernel checks before the abort address, and the abort address. */
__asm__(".pushsection .text\n.balign 16\n"
        "sigex_rseq_cs_start:\n nop\n nop\n nop\n nop\n"
        ".long " SIGEX_STR(RSEQ_SIG) "\n"
        "sigex_rseq_cs_abort:\n nop\n nop\n"
        ".popsection\n");
extern char sigex_rseq_cs_start[] __attribute__((visibility("hidden")));
extern char sigex_rseq_cs_abort[] __attribute__((visibility("hidden")));
static struct rseq_cs rseq_desc;
static volatile struct rseq *rseq_area;

static const char *rseq_setup(void) {
  if (__rseq_size == 0) return "none: no rseq area registered (GLIBC_TUNABLES=glibc.pthread.rseq=0?)";
  rseq_desc.version = 0;
  rseq_desc.flags = 0;
  rseq_desc.start_ip = (uintptr_t)sigex_rseq_cs_start;
  rseq_desc.post_commit_offset = 4;
  rseq_desc.abort_ip = (uintptr_t)sigex_rseq_cs_abort;
  rseq_area = (volatile struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
  rseq_area->rseq_cs = (uintptr_t)&rseq_desc;
  if (!g.sw_ok) { /* count switches with getrusage only after rseq saw one */
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    g.ctx_known = ru.ru_nvcsw + ru.ru_nivcsw;
  }
  return "rseq";
}

/* 1 if the thread left the CPU since the last call (and re-arm). */
static inline int cpu_switched(void) {
  if (!rseq_area || rseq_area->rseq_cs == (uintptr_t)&rseq_desc) return 0;
  rseq_area->rseq_cs = (uintptr_t)&rseq_desc;
  g.switch_seen = 1;
  return 1;
}
#else
static const char *rseq_setup(void) { return "none: the C library has no rseq (glibc < 2.35)"; }
static inline int cpu_switched(void) { return 0; }
#endif

struct sigex_cpucheck {
  int64_t seq;          /* the event whose preceding burst this is */
  double t_cpu;         /* its CPU time, sampled at both ends */
  int64_t ctx_switches;
};

static inline int cpu_must_sample(double dt) {
  if (g.cpu_min_s <= 0) return 1;
  return cpu_switched() | (dt >= g.cpu_min_s) | (g.est + dt >= g.cpu_chain_s);
}

/* The burst before event e ended after dt s of wall time; `real`: read the
 * clock (else estimate).  The reading is taken now, or is *pre where the clock
 * was read when the burst ended, before a poll that ended a loop (sampling
 * always, lazily where that poll's gap lost the CPU or was long, and the check
 * mode's reference). */
static inline void cpu_burst_record(ev_t *e, double dt, int real, const sample_t *pre) {
  sample_t s;
  g.n_bursts++;
  g.t_bursts += dt;
  if (pre && (g.cpu_min_s <= 0 || g.pre_real)) s = *pre;
  else if (real || g.check) sample(&s);
  if (g.check) {
    const sample_t *x = pre ? pre : &s;
    struct sigex_cpucheck c = {e->seq, x->cpu - g.ref.cpu, x->ctx - g.ref.ctx};
    ms_write(&g.m_check, &c, sizeof c);
    g.ref = *x;
  }
  if (!real) {
    e->t_cpu = dt;
    e->ctx_switches = 0;
    e->instr = e->cycles = e->llc_misses = -1; /* never: counters sample always */
    g.est += dt;
    g.n_bursts_est++;
    g.t_bursts_est += dt;
    return;
  }
  g.n_samples++;
  e->t_cpu = s.cpu - g.last.cpu - g.est;
  if (e->t_cpu < 0) e->t_cpu = 0; /* an estimated interval was off the CPU after all */
  e->ctx_switches = s.ctx - g.last.ctx - g.est_ctx;
  if (e->ctx_switches < 0) e->ctx_switches = 0;
  if (g.hw_ok) {
    e->instr = s.instr - g.last.instr;
    e->cycles = s.cycles - g.last.cycles;
    e->llc_misses = s.llc - g.last.llc;
  } else {
    e->instr = e->cycles = e->llc_misses = -1;
  }
  g.last = s;
  g.est = 0;
  g.est_ctx = 0;
}

/* The burst before event e ended now, after dt s of wall time; 1 if the clock
 * was read. */
static inline int cpu_burst_end(ev_t *e, double dt) {
  int real = cpu_must_sample(dt);
  cpu_burst_record(e, dt, real, NULL);
  return real;
}

/* The sample that starts the next burst, taken now (in check mode g.ref was
 * just taken: the same reading). */
static inline void cpu_take(void) {
  g.n_samples++;
  if (g.check) g.last = g.ref;
  else sample(&g.last);
  g.est = 0;
  g.est_ctx = 0;
}

/* A call ended now after dt s: the next burst starts here.  1 if the CPU time
 * was read. */
static inline int cpu_call_end(double dt) {
  int must = cpu_must_sample(dt); /* first: it notes a switch before any reading */
  if (g.check) sample(&g.ref);
  if (must) cpu_take();
  else g.est += dt;
  return must;
}

/* Polling loops (MPI_Test*, MPI_Iprobe and MPI_Improbe called again and again
 * until something arrives: hpcc's RandomAccess makes 4 million such calls at
 * P = 4) are held, not written: a poll that finds nothing becomes one event
 * whose t_comm spans the loop and whose `repeat` counts the calls, and the
 * identical polls that follow (same function, same requests or source/tag/
 * communicator) only extend it.  The first poll that finds something, or any
 * other MPI call, writes the held event.
 *
 * The burst after a loop is the time from the loop's last poll to the next
 * call.  Sampling always (SIGEX_CPU_SAMPLE_MIN_US=0, or with hardware
 * counters) every boundary is read, each poll's start and end included (two
 * readings per poll: the burst before a poll that ends the loop is read before
 * its call).  Lazily, a poll reads no CPU clock (its own time: the poll clock,
 * below).  Under an oversubscribed MPI a
 * poll yields the CPU and lasts tens of microseconds, so reading at every
 * switch, or every 20 us as this tracer once did, read the clock at almost
 * every poll (1.27 M readings for hpcc's 4.24 M polls at P = 4, over half of
 * the tracer's work there).  Instead:
 * - each poll notes, from the rseq pointer (re-armed at both ends of a poll),
 *   whether the burst before it and its call kept the CPU.  An interval that
 *   kept it took its wall time of CPU time (as an estimated burst does); one
 *   that lost it took the loop's CPU time per switched poll, measured between
 *   readings as their CPU time less the wall time of the intervals that kept
 *   the CPU, over the polls that switched (a mean in which each older pair of
 *   readings weighs half as much);
 * - the clock is read (the sample that starts the next burst refreshed) when
 *   the switched polls since the last reading took about POLL_TAIL_CPU_S of
 *   CPU time by that figure, or after POLL_TAIL_S of polling (a bound on the
 *   error of the intervals estimated from their wall time: interrupts, and
 *   the time a hypervisor takes);
 * - when the loop ends, the polls since the last reading (the loop's tail)
 *   are taken out of what follows as estimated time (g.est, at most their wall
 *   time).  The burst after the loop is almost always short and on the CPU,
 *   so estimated from its wall time; the clock is then read at its end all
 *   the same (once per loop), so that the tail's estimate belongs to no burst
 *   and its error to none.  Only where that burst lost the CPU or lasted
 *   cpu_min_s does the tail's error (its CPU time less its estimate) land in
 *   it, with the tail's context switches less one per poll that switched.
 * A poll that ends a loop knows it only after its call.  Where the gap before
 * a poll lost the CPU or lasted cpu_min_s (rseq and the poll clock tell at the
 * poll's start, for the cost of a compare), the clock is read before the call
 * all the same: should the poll end the loop, that burst is read at both ends
 * and its call is an event as any other.  (Estimating the call as one more
 * poll of the loop put the CPU time of an MPICH Test that found its message and
 * spun through the rest of a time slice, 1.8 ms, into the burst before it,
 * which took 26 us: one run in thirty at P = 4.)  Where the gap kept the CPU
 * and was short, it is estimated and the clock read after the call closes the
 * loop.  In check mode the reference (g.ref) reads every boundary, as sampling
 * always does. */
#define POLL_TAIL_CPU_S 100e-6
#define POLL_TAIL_S 200e-6

/* ---- the poll clock ----------------------------------------------------------
 * A held poll (the same Test or Iprobe again, nothing else between) is the
 * tracer's hottest path: hpcc's RandomAccess makes 4 million of them at P = 4,
 * each ~0.8 us untraced.  It reads the time twice (its start, for the gap
 * before it should it end the loop, and its end), in ticks of the poll clock:
 * with an invariant TSC (x86-64, /proc/cpuinfo flags constant_tsc and
 * nonstop_tsc, kernel clocksource tsc) that is rdtsc, one instruction that
 * touches no vDSO data page (two clock_gettime(CLOCK_MONOTONIC) were about half
 * of the ~0.14 us a held poll cost before); elsewhere, or with
 * SIGEX_POLL_CLOCK=clock_gettime, ticks are CLOCK_MONOTONIC nanoseconds.  Ticks
 * become seconds on the wall_now() time line only where a loop ends (or is
 * read), counted from the loop's anchor: a (CLOCK_MONOTONIC, ticks) pair read
 * where the loop started and again at each CPU-clock reading inside it (at
 * least every POLL_TAIL_S of polling), so that an error of the scale scales only
 * that span.  The scale is calibrated against CLOCK_MONOTONIC over the first
 * millisecond of the run (tracer_start) and refined at every anchor from the
 * first pair and the newest; each anchor first re-checks the TSC's prediction,
 * and where it is off by more than 50 us + 0.1% of the time since the start
 * (a TSC that stopped or jumped) the rest of the run uses clock_gettime
 * (SIGEX_POLL_CLOCK=tsc skips the re-check: under valgrind, whose clock reads
 * lag, for instruction counts).  The trace says which clock it used
 * (poll_clock). */
#if defined(__x86_64__)
#include <x86intrin.h>
#define SIGEX_HAVE_TSC 1
#endif
static struct {
  int tsc;            /* 1: ticks are rdtsc, 0: CLOCK_MONOTONIC ns */
  uint64_t c0;        /* the first (ticks, wall) pair */
  double w0;
  double s_per_tick;
  int trust;          /* SIGEX_POLL_CLOCK=tsc: no re-check (valgrind's TSC drifts) */
  int64_t checks;     /* anchors that re-checked the TSC */
  double max_err;     /* the largest disagreement seen there, s */
  int64_t split;      /* ... and those a preemption split (read again, see pclk_pair) */
  char what[256];
} pclk = {.s_per_tick = 1e-9};

static inline uint64_t ticks(void) {
#ifdef SIGEX_HAVE_TSC
  if (__builtin_expect(pclk.tsc, 1)) return __rdtsc();
#endif
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#ifndef SIGEX_PCLK_TOL
#define SIGEX_PCLK_TOL 1e-3 /* the TSC's tolerated disagreement, relative to the time since start-up */
#endif

/* Ticks once the instructions before have completed: a poll's end.  A plain
 * rdtsc may run ahead of the poll's last loads and read ~0.1 us early, which
 * the gap after the loop's last poll would take (check mode showed it); the
 * vDSO's reading is ordered the same way. */
static inline uint64_t ticks_end(void) {
#ifdef SIGEX_HAVE_TSC
  if (__builtin_expect(pclk.tsc, 1)) {
    _mm_lfence();
    return __rdtsc();
  }
#endif
  return ticks();
}

static void pclk_fallback(const char *why) {
  pclk.tsc = 0;
  pclk.s_per_tick = 1e-9;
  snprintf(pclk.what, sizeof pclk.what, "clock_gettime:CLOCK_MONOTONIC (%s)", why);
}

/* A pair read together: the ticks `*c` read between two CLOCK_MONOTONIC readings,
 * `*w` their midpoint; of up to 16 tries the one whose readings lie closest
 * (the first within 2 us).  A preemption between a wall reading and the TSC
 * would otherwise skew the pair by as long as it lasted: on a loaded 2-vCPU VM
 * a 1 ms calibration was once off by 2%, and an anchor split by 200 us made
 * the re-check give up the TSC. */
static void pclk_read(double *w, uint64_t *c) {
  double best = 1e30;
  for (int i = 0; i < 16 && best > 2e-6; i++) {
    double a = wall_now();
    uint64_t t = ticks();
    double b = wall_now();
    if (b - a < best) {
      best = b - a;
      *w = 0.5 * (a + b);
      *c = t;
    }
  }
}

#ifdef SIGEX_HAVE_TSC
/* 1 if every word of `need` (space-separated) is a word of the line of
 * /proc/cpuinfo that starts with "flags". */
static int cpu_flags_have(const char *need1, const char *need2) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return 0;
  char line[8192];
  int ok = 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "flags", 5) != 0) continue;
    char *nl = strchr(line, '\n');
    if (nl) *nl = ' ';
    char w1[64], w2[64];
    snprintf(w1, sizeof w1, " %s ", need1);
    snprintf(w2, sizeof w2, " %s ", need2);
    ok = strstr(line, w1) && strstr(line, w2);
    break;
  }
  fclose(f);
  return ok;
}
#endif

/* At start-up: which clock polls read (the first calibration pair is taken
 * here, the second by pclk_calibrate at the end of tracer_start). */
static void pclk_setup(void) {
  const char *force = getenv("SIGEX_POLL_CLOCK");
  if (force && *force && strcmp(force, "tsc") != 0) {
    if (strcmp(force, "clock_gettime") != 0) {
      fprintf(stderr, "sigex tracer: SIGEX_POLL_CLOCK=%s is not 'tsc' or 'clock_gettime'\n", force);
      PMPI_Abort(MPI_COMM_WORLD, 3);
    }
    pclk_fallback("SIGEX_POLL_CLOCK=clock_gettime");
    return;
  }
  pclk.trust = force && *force;
#ifdef SIGEX_HAVE_TSC
  if (!cpu_flags_have("constant_tsc", "nonstop_tsc")) {
    pclk_fallback("the CPU flags lack constant_tsc or nonstop_tsc: the TSC is not invariant");
    return;
  }
  char cs[64] = "";
  FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  if (f) {
    if (!fgets(cs, sizeof cs, f)) cs[0] = 0;
    fclose(f);
  }
  char *nl = strchr(cs, '\n');
  if (nl) *nl = 0;
  if (strcmp(cs, "tsc") != 0) {
    char why[160];
    snprintf(why, sizeof why, "the kernel's clocksource is '%s', not tsc", cs);
    pclk_fallback(why);
    return;
  }
  pclk.tsc = 1;
  pclk_read(&pclk.w0, &pclk.c0);
#else
  pclk_fallback("no TSC on this architecture");
#endif
}

/* The end of the first calibration: the scale from >= SIGEX_PCLK_CAL_S of
 * CLOCK_MONOTONIC (the pair read as a wall reading, the TSC, and a second wall
 * reading, taken at their midpoint). */
#ifndef SIGEX_PCLK_CAL_S
#define SIGEX_PCLK_CAL_S 1e-3
#endif
static void pclk_calibrate(void) {
  if (!pclk.tsc) return;
  double w;
  uint64_t c;
  do
    pclk_read(&w, &c);
  while (w - pclk.w0 < SIGEX_PCLK_CAL_S);
  if (c <= pclk.c0) {
    pclk_fallback("the TSC did not advance");
    return;
  }
  pclk.s_per_tick = (w - pclk.w0) / (double)(c - pclk.c0);
  if (pclk.s_per_tick < 1e-11 || pclk.s_per_tick > 1e-8) { /* outside 0.1-100 GHz */
    char why[160];
    snprintf(why, sizeof why, "rdtsc calibrated to %.4g GHz", 1e-9 / pclk.s_per_tick);
    pclk_fallback(why);
    return;
  }
  snprintf(pclk.what, sizeof pclk.what, "rdtsc (invariant TSC, %.4f GHz by CLOCK_MONOTONIC%s)",
           1e-9 / pclk.s_per_tick, pclk.trust ? "; SIGEX_POLL_CLOCK=tsc: not re-checked" : "");
}

/* Ticks `c` read right after `now` (wall_now()): re-checks and refines the
 * TSC's scale (see above); returns `c`, or ticks read again after a fallback.  A
 * pair that a preemption split (off by more than 5 us + 0.01%) does not refine;
 * one off by more than the tolerance is read again as a close pair (pclk_read)
 * before the TSC is given up, and if that pair agrees, the ticks at `now` come
 * from it. */
static inline double pclk_err(double w, uint64_t c) {
  double err = pclk.w0 + (double)(int64_t)(c - pclk.c0) * pclk.s_per_tick - w;
  return err < 0 ? -err : err;
}
static inline uint64_t pclk_pair(double now, uint64_t c) {
  if (pclk.tsc && !pclk.trust) {
    double since = now - pclk.w0;
    double err = pclk_err(now, c);
    pclk.checks++;
    if (err > 50e-6 + SIGEX_PCLK_TOL * since) {
      double w2;
      uint64_t c2;
      pclk_read(&w2, &c2);
      double err2 = pclk_err(w2, c2);
      if (err2 <= 50e-6 + SIGEX_PCLK_TOL * (w2 - pclk.w0)) {
        pclk.split++;
        if (err2 > pclk.max_err) pclk.max_err = err2;
        return c2 - (uint64_t)((w2 > now ? w2 - now : 0) / pclk.s_per_tick);
      }
      err = err2;
      since = w2 - pclk.w0;
    }
    if (err > pclk.max_err) pclk.max_err = err;
    if (err > 50e-6 + SIGEX_PCLK_TOL * since) {
      char why[160];
      snprintf(why, sizeof why, "rdtsc disagreed with it by %.1f us %.3f s into the run",
               1e6 * err, since);
      pclk_fallback(why);
      c = ticks();
    } else if (since > 0.01 && err < 5e-6 + 1e-4 * since) {
      pclk.s_per_tick = since / (double)(c - pclk.c0);
    }
  }
  return c;
}

static struct {
  int active, op;
  uintptr_t k1;
  int64_t k2;
  int anchored;      /* g.last was read in this loop */
  int gap_sw;        /* the burst before the current poll lost the CPU */
  int64_t n_sw;      /* polls since then whose interval lost the CPU ... */
  uint64_t on;       /* ... the ticks of those that kept it ... */
  uint64_t tail;     /* ... and of all of them (their calls and the bursts between) */
  uint64_t tail_lim; /* read when tail reaches this (0: at every poll, see poll_limits) ... */
  int64_t sw_lim;    /* ... or n_sw this */
  double sw_cpu, sw_n; /* CPU time and count of the switched polls between readings, each
                        * older pair of readings weighted half as much as the next */
  uint64_t c_anchor; /* the loop's anchor: ticks ... */
  double w_anchor;   /* ... and wall_now() read together */
  uint64_t c_last;   /* ticks at the end of the last poll */
  uint64_t c_begin;  /* ticks at the start of the current poll */
  uint64_t gap_lim;  /* a gap of this many ticks or more is read at its end (cpu_min_s) */
  struct sigex_event ev;
} poll = {.op = -1}; /* op -1: no loop held */

static inline double poll_wall(uint64_t c) {
  return poll.w_anchor + (double)(int64_t)(c - poll.c_anchor) * pclk.s_per_tick;
}

/* The loop's anchor: wall time `now` and ticks `c` read right after it.  The
 * last poll's end (c_last) stays where it was read: a reading inside the loop
 * happens after it, and the gap after the poll starts there. */
static void poll_anchor(double now, uint64_t c) {
  double last = poll_wall(poll.c_last);
  int tsc = pclk.tsc;
  poll.c_anchor = pclk_pair(now, c);
  poll.w_anchor = now;
  if (tsc != pclk.tsc) /* fell back: c_last in the new ticks */
    poll.c_last = poll.c_anchor - (uint64_t)(now > last ? (now - last) / pclk.s_per_tick : 0);
}

/* When the fast path next leaves for poll_read: where the tail reaches
 * POLL_TAIL_S or its switched polls about POLL_TAIL_CPU_S of CPU time. */
static inline void poll_limits(void) {
  poll.gap_lim = g.cpu_min_s > 0 ? (uint64_t)(g.cpu_min_s / pclk.s_per_tick) : UINT64_MAX;
  poll.sw_lim = 1;
  poll.tail_lim = (uint64_t)(POLL_TAIL_S / pclk.s_per_tick);
  if (!poll.anchored || poll.sw_n <= 0) return;
  if (poll.sw_cpu <= 0) {
    poll.sw_lim = INT64_MAX;
    return;
  }
  double x = POLL_TAIL_CPU_S * poll.sw_n / poll.sw_cpu; /* read once n_sw >= x */
  if (x >= 1e18) {
    poll.sw_lim = INT64_MAX;
    return;
  }
  int64_t n = (int64_t)x;
  poll.sw_lim = (double)n < x ? n + 1 : n;
  if (poll.sw_lim < 1) poll.sw_lim = 1;
}

/* The held loop's tail, as estimated time before the next burst (see above). */
static inline void poll_tail_estimate(void) {
  double est = (double)poll.tail * pclk.s_per_tick;
  if (poll.n_sw && poll.sw_n > 0) {
    double on_cpu = (double)poll.on * pclk.s_per_tick + (double)poll.n_sw * poll.sw_cpu / poll.sw_n;
    if (on_cpu < est) est = on_cpu;
  }
  g.est += est;
  g.est_ctx += poll.n_sw; /* at least one switch each */
  poll.n_sw = 0;
  poll.on = poll.tail = 0;
}

/* Write the held event, which ends at wall time `end`: where its last poll
 * ended.  The callers that know the next call's start put it there less the gap
 * measured in ticks (c_last to then), so that the gap after a loop depends on
 * the TSC's scale only over the gap itself, not over the loop. */
static void poll_flush_at(double end) {
  if (!poll.active) return;
  poll.active = 0;
  poll.op = -1;
  poll.ev.t_comm = end - g.t0 - poll.ev.t_start;
  if (poll.ev.t_comm < 0) poll.ev.t_comm = 0;
  g.last_end = end;
  ms_write(&g.m_events, &poll.ev, sizeof poll.ev);
  poll_tail_estimate();
}

static void poll_flush(void) {
  if (poll.active) poll_flush_at(poll_wall(poll.c_last));
}

static inline int ev_begin(ev_t *e, int op, MPI_Comm comm) {
  if (!g.tracing || g.depth) return 0;
  if (!pthread_equal(pthread_self(), g.main_thread)) {
    g.untraced_calls++;
    return 0;
  }
  g.depth = 1;
  int closing = poll.active;
  /* the held event is written first: a new page of the trace file it may fault in
   * counts in the burst, where the reference (check mode) sees it too */
  if (closing) poll_flush();
  double now = wall_now();
  memset(e, 0, sizeof *e);
  e->seq = g.seq;
  e->op = op;
  e->t_start = now - g.t0;
  /* after a held loop, the gap since its last poll in ticks (the loop's end
   * converted from ticks is off by the TSC scale's error over the loop) */
  e->t_comp = closing ? (double)(int64_t)(ticks() - poll.c_last) * pclk.s_per_tick
                      : now - g.last_end;
  if (e->t_comp < 0) e->t_comp = 0;
  /* after a held loop, a burst estimated from its wall time is read at its end
   * all the same: the loop's estimated tail then belongs to no burst */
  if (!cpu_burst_end(e, e->t_comp) && closing) cpu_take();
  e->peer = e->recv_peer = e->root = PEER_NONE;
  e->tag = -1;
  e->req = -1;
  g.cur = comm_get(comm);
  e->comm = g.cur ? g.cur->id : -1;
  return 1;
}

/* The end of a poll of a held loop in check mode or sampling always (before
 * the poll's switch check, which then sees a switch during these readings): the
 * always-sampling reference reads every poll's end; sampling always, this
 * boundary is read as any other (1: nothing else to do). */
static __attribute__((noinline)) int poll_slow_end(void) {
  if (g.check) {
    g.switch_seen = 1;
    sample(&g.ref);
  }
  if (g.cpu_min_s > 0) return 0;
  cpu_take();
  poll.n_sw = 0;
  poll.on = poll.tail = 0;
  return 1;
}

/* Another poll of a held loop went past poll.tail_lim or poll.sw_lim (see
 * "Polling loops" above and poll_limits): a CPU-clock reading. */
static __attribute__((noinline)) void poll_read(void) {
  double before = g.last.cpu;
  cpu_take();
  if (poll.anchored && poll.n_sw) {
    double c = g.last.cpu - before - (double)poll.on * pclk.s_per_tick;
    poll.sw_cpu = 0.5 * poll.sw_cpu + (c > 0 ? c : 0);
    poll.sw_n = 0.5 * poll.sw_n + (double)poll.n_sw;
  }
  poll.anchored = 1;
  poll.n_sw = 0;
  poll.on = poll.tail = 0;
  double now = wall_now();
  poll_anchor(now, ticks());
  poll_limits();
}

/* The calling thread, cheaply: its thread pointer where the compiler reads it
 * (no call), else pthread_self(). */
static inline uintptr_t thread_id(void) {
#if defined(__x86_64__) || defined(__aarch64__)
  return (uintptr_t)__builtin_thread_pointer();
#else
  return (uintptr_t)pthread_self();
#endif
}

/* A poll with a held twin: no counter read; e->seq is the next seq (the held
 * event took its own), so completions can name it.  A held loop exists only
 * while tracing (poll.op is -1 otherwise). */
static inline int poll_same(int op, uintptr_t k1, int64_t k2) {
  return poll.op == op && poll.k1 == k1 && poll.k2 == k2 && !g.depth &&
         thread_id() == g.main_tp;
}

/* The clock read before a poll's call (see "Polling loops"): sampling always
 * and for check mode's reference at every poll; lazily where the gap before it
 * lost the CPU or was long, in case the poll ends the loop. */
static __attribute__((noinline)) void poll_pre(void) {
  sample(&g.pre);
  g.pre_real = g.cpu_min_s > 0 && (poll.gap_sw | (poll.c_begin - poll.c_last >= poll.gap_lim));
  if (g.cpu_min_s <= 0 || g.pre_real) g.n_samples++;
}

/* The start of a poll with a held twin: one poll-clock reading; e gets only the
 * fields a wrapper reads or sets (poll_end fills the rest if the poll finds
 * something); the communicator is the held event's (g.cur is unchanged). */
static inline __attribute__((always_inline)) int poll_begin(ev_t *e, int op, MPI_Comm comm) {
  (void)comm;
  g.depth = 1;
  poll.c_begin = ticks();
  poll.gap_sw = cpu_switched(); /* the burst before this poll lost the CPU */
  e->seq = g.seq;
  e->op = op;
  e->aux = 0;
  e->bytes = e->recv_bytes = 0;
  e->req = -1;
  e->peer = e->recv_peer = e->root = PEER_NONE;
  e->tag = -1;
  /* the burst before a poll is read before the call, in case the call ends
   * the loop: sampling always (so two readings per poll), in check mode for the
   * reference, and lazily where the gap lost the CPU or was long (poll_pre) */
  g.pre_real = 0;
  if (__builtin_expect(g.poll_slow | poll.gap_sw | (poll.c_begin - poll.c_last >= poll.gap_lim), 0))
    poll_pre();
  return 1;
}

static inline void ev_end(ev_t *e);

static void poll_end_slow(ev_t *e, int fast, int op, uintptr_t k1, int64_t k2);

/* After a poll: found nothing -> hold it (or extend the held twin); found
 * something -> write the held event, then this one as any other.  Inlined into
 * the wrappers: a held repeat (the fast path) is a few additions. */
static inline __attribute__((always_inline)) void poll_end(ev_t *e, int fast, int op, uintptr_t k1,
                                                          int64_t k2) {
  if (__builtin_expect(e->aux == 0 && fast, 1)) { /* one more poll of the held loop */
    uint64_t c = ticks_end();
    uint64_t dt = c - poll.c_last;
    poll.c_last = c;
    poll.ev.repeat++;
    if (__builtin_expect(g.poll_slow, 0) && poll_slow_end()) {
      g.depth = 0;
      return;
    }
    poll.tail += dt;
    if (poll.gap_sw | cpu_switched()) poll.n_sw++;
    else poll.on += dt;
    if (__builtin_expect(poll.tail >= poll.tail_lim || poll.n_sw >= poll.sw_lim, 0)) poll_read();
    g.depth = 0;
    return;
  }
  poll_end_slow(e, fast, op, k1, k2);
}

/* A poll that starts a loop, ends one, or finds something at once. */
static __attribute__((noinline)) void poll_end_slow(ev_t *e, int fast, int op, uintptr_t k1,
                                                    int64_t k2) {
  if (!fast && e->aux) { /* found something at once: an event as any other */
    ev_end(e);
    return;
  }
  double now = wall_now();
  uint64_t c_now = ticks(); /* the same instant in ticks */
  if (e->aux == 0) { /* a loop starts: this poll is held */
    poll_flush();
    e->t_comm = now - g.t0 - e->t_start;
    e->repeat = 1;
    poll.ev = *e;
    poll.op = op;
    poll.k1 = k1;
    poll.k2 = k2;
    poll.active = 1;
    g.nevents++;
    g.seq++;
    poll.anchored = cpu_call_end(e->t_comm);
    poll.n_sw = 0;
    poll.on = poll.tail = 0;
    poll.c_last = c_now;
    poll_anchor(now, c_now);
    poll.c_last = poll.c_anchor;
    poll_limits();
    g.last_end = now;
    g.depth = 0;
    return;
  }
  /* A poll that ends a held loop: the burst before it is the loop's last gap
   * (from the last poll's end to this poll's start, in poll-clock ticks). */
  double call = (double)(int64_t)(c_now - poll.c_begin) * pclk.s_per_tick;
  if (call < 0) call = 0;
  double start = now - call;
  e->comm = poll.ev.comm;
  e->repeat = 0;
  double gap = (double)(int64_t)(poll.c_begin - poll.c_last) * pclk.s_per_tick;
  if (gap < 0) gap = 0;
  poll_flush_at(start - gap);
  e->t_start = start - g.t0;
  e->t_comp = gap;
  if (g.cpu_min_s <= 0) { /* read before the call (poll_begin), then after it as any call */
    cpu_burst_record(e, gap, 1, &g.pre);
    ev_end(e);
    return;
  }
  /* Lazily the clock can be read only now, after the call.  Where the gap kept
   * the CPU and was short, it is estimated (its wall time) and the clock read
   * now closes the loop: its tail and this call belong to no burst.  Else the
   * gap is what the reading shows less the loop's tail and this call, the call
   * estimated as one more poll of the loop. */
  if (g.pre_real) { /* the gap lost the CPU or was long: read at both ends */
    cpu_burst_record(e, gap, 1, &g.pre);
    g.pre_real = 0;
    ev_end(e);
    return;
  }
  int call_sw = cpu_switched();
  int real = poll.gap_sw | (gap >= g.cpu_min_s);
  if (real) {
    double est_call = call;
    if (call_sw && poll.sw_n > 0 && poll.sw_cpu < call * poll.sw_n) est_call = poll.sw_cpu / poll.sw_n;
    g.est += est_call;
    g.est_ctx += call_sw;
  }
  cpu_burst_record(e, gap, real, g.check ? &g.pre : NULL);
  if (g.check) sample(&g.ref); /* the reference reads the call's end, as cpu_call_end */
  if (!real) cpu_take();
  e->t_comm = call;
  ms_write(&g.m_events, e, sizeof *e);
  g.nevents++;
  g.seq++;
  g.last_end = now;
  g.depth = 0;
}

static inline void ev_end(ev_t *e) {
  double now = wall_now();
  e->t_comm = now - g.t0 - e->t_start;
  ms_write(&g.m_events, e, sizeof *e);
  g.nevents++;
  g.seq++;
  cpu_call_end(e->t_comm);
  g.last_end = now;
  g.depth = 0;
}

static inline int64_t type_bytes(MPI_Count count, MPI_Datatype t) {
  return (int64_t)count * (int64_t)type_size(t);
}

/* aux of a blocking receive (Recv, Sendrecv, Sendrecv_replace): bit 1 where it was
 * posted with MPI_ANY_SOURCE, bit 2 with MPI_ANY_TAG (its peer and tag are the matched
 * message's; the signature keys such a receive by what the program asked for). */
static inline int32_t posted_any(int source, int tag) {
  return (source == MPI_ANY_SOURCE ? 1 : 0) | (tag == MPI_ANY_TAG ? 2 : 0);
}

/* Byte count of a received message from its status. */
static inline void status_fill(ev_t *e, const MPI_Status *st) {
  /* Probes see the message but move no data: only peer and tag. */
  int probe = e->op == OP_PROBE || e->op == OP_IPROBE || e->op == OP_MPROBE ||
              e->op == OP_IMPROBE;
  if (st->MPI_SOURCE == MPI_PROC_NULL || st->MPI_SOURCE == MPI_ANY_SOURCE) {
    e->peer = world_of(g.cur, st->MPI_SOURCE);
    return;
  }
  e->peer = world_of(g.cur, st->MPI_SOURCE);
  e->tag = st->MPI_TAG;
  if (probe) return;
  e->recv_bytes = status_bytes(st);
}

static void scratch_reserve(int n) {
  if (n <= g.scratch_n) return;
  g.scratch_n = n > 64 ? n : 64;
  g.scratch_req = realloc(g.scratch_req, sizeof(MPI_Request) * (size_t)g.scratch_n);
  g.scratch_st = realloc(g.scratch_st, sizeof(MPI_Status) * (size_t)g.scratch_n);
}

/* The lists stream: records "int64 seq, int32 n, int32 kind, int64 v[n]".
 * kind LIST_SEND / LIST_RECV: bytes per peer of a v-collective (peers in
 * communicator order); LIST_STARTED: request ids started by Startall. */
enum { LIST_SEND = 0, LIST_RECV = 1, LIST_STARTED = 2, LIST_SOURCES = 3, LIST_DESTS = 4 };

static void lists_write(int64_t seq, int kind, int n, const int64_t *v) {
  int32_t hdr[2] = {n, kind};
  ms_write(&g.m_lists, &seq, sizeof seq);
  ms_write(&g.m_lists, hdr, sizeof hdr);
  ms_write(&g.m_lists, v, sizeof *v * (size_t)n);
}

static void vcounts_write(int64_t seq, int kind, int n, const void *counts,
                          int is_large, MPI_Datatype t) {
  if (!counts || n <= 0) return;
  MPI_Count sz = type_size(t);
  int64_t *v = malloc(sizeof *v * (size_t)n);
  for (int i = 0; i < n; i++)
    v[i] = (is_large ? (int64_t)((const MPI_Count *)counts)[i]
                     : (int64_t)((const int *)counts)[i]) * (int64_t)sz;
  lists_write(seq, kind, n, v);
  free(v);
}

static int64_t vsum(int n, const void *counts, int is_large, MPI_Datatype t) {
  if (!counts) return 0;
  int64_t s = 0;
  for (int i = 0; i < n; i++)
    s += is_large ? (int64_t)((const MPI_Count *)counts)[i]
                  : (int64_t)((const int *)counts)[i];
  return type_bytes(s, t);
}

/* ---- start/stop ---------------------------------------------------------- */
static FILE *open_raw(const char *suffix) {
  char path[4200];
  snprintf(path, sizeof path, "%s/rank%d.%s", g.dir, g.rank, suffix);
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "sigex tracer: rank %d cannot write %s: %s\n", g.rank,
            path, strerror(errno));
    PMPI_Abort(MPI_COMM_WORLD, 3);
  }
  return f;
}


static void close_streams(void) {
  ms_close(&g.m_check);
  ms_close(&g.m_events);
  ms_close(&g.m_compl);
  ms_close(&g.m_lists);
  if (g.f_comms) fclose(g.f_comms);
  g.f_comms = NULL;
}

static void at_exit_close(void) {
  if (g.tracing) { /* exit without MPI_Finalize: no end record */
    poll_flush();
    g.tracing = 0;
    close_streams();
  }
}

/* A duration in microseconds from the environment, or `dflt` where unset. */
static double env_us(const char *name, double dflt) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  char *end;
  double x = strtod(v, &end);
  if (*end || x < 0 || x != x) {
    fprintf(stderr, "sigex tracer: %s=%s is not a duration in microseconds (a number >= 0)\n",
            name, v);
    PMPI_Abort(MPI_COMM_WORLD, 3);
  }
  return x;
}

static void tracer_start(double t_call, int thread_level) {
  const char *dir = getenv("SIGEX_TRACE_DIR");
  if (!dir || !*dir) return;
  snprintf(g.dir, sizeof g.dir, "%s", dir);
  pclk_setup(); /* the first calibration pair: pclk_calibrate takes the second */
  PMPI_Comm_rank(MPI_COMM_WORLD, &g.rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &g.size);
  char end[4200];
  snprintf(end, sizeof end, "%s/rank%d.end", g.dir, g.rank);
  unlink(end); /* a stale end record must not mark this run complete */
  g.main_thread = pthread_self();
  g.main_tp = thread_id();
  ms_open(&g.m_events, "events");
  ms_open(&g.m_compl, "completions");
  ms_open(&g.m_lists, "lists");
  g.f_comms = open_raw("comms");
  comm_get(MPI_COMM_WORLD); /* id 0 */
  comm_get(MPI_COMM_SELF);  /* id 1 */

  char sw_reason[512], hw_reason[512];
  perf_setup(sw_reason, hw_reason, sizeof sw_reason);
  g.cpu_min_s = 1e-6 * env_us("SIGEX_CPU_SAMPLE_MIN_US", SIGEX_CPU_SAMPLE_MIN_US_DEFAULT);
  g.cpu_chain_s = 1e-6 * env_us("SIGEX_CPU_SAMPLE_CHAIN_US", SIGEX_CPU_SAMPLE_CHAIN_US_DEFAULT);
  if (g.hw_ok) g.cpu_min_s = 0; /* counters cannot be estimated: sample always */
  if (g.cpu_min_s > 0 && g.sw_ok) {
    /* A thread with perf events open pays for them at every context switch
     * (~0.5 us here: an oversubscribed MPI that yields while it waits
     * switches at every poll), while the lazy sampler reads the clocks only
     * now and then: it reads CLOCK_THREAD_CPUTIME_ID, and getrusage where
     * rseq saw a switch (rseq_setup). */
    close(g.sw_fd2);
    close(g.sw_fd);
    g.sw_fd = g.sw_fd2 = -1;
    g.sw_ok = 0;
    snprintf(sw_reason, sizeof sw_reason, "not used when CPU time is sampled lazily "
             "(they add to every context switch); SIGEX_CPU_SAMPLE_MIN_US=0 uses them");
  }
  const char *check = getenv("SIGEX_CPU_SAMPLE_CHECK");
  g.check = check && *check && strcmp(check, "0") != 0;
  if (g.check) ms_open(&g.m_check, "cpucheck");
  g.poll_slow = g.check || g.cpu_min_s <= 0;
  const char *switch_check = g.cpu_min_s > 0 ? rseq_setup() : "none: every boundary sampled";

  char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
  int len = 0;
  PMPI_Get_library_version(lib, &len);
  char *nl = strchr(lib, '\n');
  if (nl) *nl = 0;
  char host[256] = "";
  gethostname(host, sizeof host - 1);

  FILE *m = open_raw("meta");
  fprintf(m, "raw_version=%d\nrank=%d\nsize=%d\npid=%d\nhost=%s\n",
          SIGEX_RAW_VERSION, g.rank, g.size, (int)getpid(), host);
  fprintf(m, "mpi_library=%s\nthread_level=%d\n", lib, thread_level);
  fprintf(m, "event_record_size=%zu\ncompletion_record_size=%zu\n",
          sizeof(struct sigex_event), sizeof(struct sigex_completion));
  fprintf(m, "cpu_source=%s\n",
          g.sw_ok ? "perf_event_open:task-clock"
                  : "clock_gettime:CLOCK_THREAD_CPUTIME_ID");
  fprintf(m, "ctx_source=%s\n", g.sw_ok ? "perf_event_open:context-switches"
                                          : "getrusage:RUSAGE_THREAD");
  fprintf(m, "software_events=%d\nsoftware_reason=%s\n", g.sw_ok, sw_reason);
  fprintf(m, "cpu_sampling=%s\ncpu_sample_min_us=%.3f\ncpu_sample_chain_us=%.3f\n"
          "cpu_sample_check=%d\ncpucheck_record_size=%zu\ncpu_switch_check=%s\n",
          g.cpu_min_s > 0 ? "lazy" : g.hw_ok ? "always (hardware counters)" : "always",
          1e6 * g.cpu_min_s, 1e6 * g.cpu_chain_s, g.check, sizeof(struct sigex_cpucheck),
          switch_check);
  fprintf(m, "hw_counters=%d\nhw_reason=%s\n", g.hw_ok, hw_reason);
  fprintf(m, "unmodelled_counted=%d\n", SIGEX_UNMODELLED_N > 0);
  fprintf(m, "ops=");
  for (int i = 0; i < OP_COUNT; i++) fprintf(m, "%s%s", i ? "," : "", op_names[i]);
  fprintf(m, "\n");

  PMPI_Barrier(MPI_COMM_WORLD);
  pclk_calibrate();
  fprintf(m, "poll_clock=%s\n", pclk.what);
  g.t0 = wall_now();
  struct timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  fprintf(m, "t0_unix=%.9f\n", (double)rt.tv_sec + 1e-9 * (double)rt.tv_nsec);
  fclose(m);

  /* The Init event: the time before MPI_Init is not traced. */
  ev_t e;
  memset(&e, 0, sizeof e);
  e.op = OP_INIT;
  e.t_start = t_call - g.t0;
  e.t_comm = g.t0 - t_call;
  e.peer = e.recv_peer = e.root = PEER_NONE;
  e.tag = -1;
  e.req = -1;
  e.instr = e.cycles = e.llc_misses = g.hw_ok ? 0 : -1;
  ms_write(&g.m_events, &e, sizeof e);
  g.nevents = g.seq = 1;
  sample(&g.last);
  g.ref = g.last;
  g.last_end = wall_now();
  g.tracing = 1;
  atexit(at_exit_close);
}

static void unmodelled_write(void);

static void tracer_stop(void) {
  g.tracing = 0;
  close_streams();
  unmodelled_write();
  char tmp[4200], path[4200];
  snprintf(tmp, sizeof tmp, "%s/rank%d.end.tmp", g.dir, g.rank);
  snprintf(path, sizeof path, "%s/rank%d.end", g.dir, g.rank);
  FILE *f = fopen(tmp, "w");
  if (!f) return;
  fprintf(f, "events=%lld\ncompletions=%lld\nuntraced_calls=%lld\n",
          (long long)g.nevents, (long long)g.ncompletions,
          (long long)g.untraced_calls);
  fprintf(f, "cpu_bursts=%lld\ncpu_bursts_estimated=%lld\ncpu_burst_seconds=%.9f\n"
          "cpu_burst_seconds_estimated=%.9f\ncpu_samples=%lld\n",
          (long long)g.n_bursts, (long long)g.n_bursts_est, g.t_bursts, g.t_bursts_est,
          (long long)g.n_samples);
  fprintf(f, "poll_clock=%s\npoll_clock_checks=%lld\npoll_clock_split=%lld\npoll_clock_max_err_us=%.3f\n",
          pclk.what, (long long)pclk.checks, (long long)pclk.split, 1e6 * pclk.max_err);
  fclose(f);
  rename(tmp, path);
}

/* ---- MPI functions sigex does not model ------------------------------------ */
/* The generated wrappers (SIGEX_GEN_WRAPPERS) of every other function the
 * library exports count the calls and the time inside them, so that a trace
 * says what it left out; rank<r>.unmodelled lists "calls seconds name" per
 * function called at least once.  A call made inside a traced call (an MPI
 * library's Fortran layer calling its C layer) is not counted again. */
static int64_t unm_calls[SIGEX_UNMODELLED_N + 1];
static double unm_time[SIGEX_UNMODELLED_N + 1];
#if SIGEX_UNMODELLED_N > 0
static const char *const unm_names[SIGEX_UNMODELLED_N];
#endif

static inline int unm_begin(double *t) {
  if (!g.tracing || g.depth || !pthread_equal(pthread_self(), g.main_thread)) return 0;
  *t = wall_now();
  return 1;
}

static inline void unm_end(int i, double t) {
  unm_calls[i]++;
  unm_time[i] += wall_now() - t;
}

static void unmodelled_write(void) {
#if SIGEX_UNMODELLED_N > 0
  FILE *f = NULL;
  for (int i = 0; i < SIGEX_UNMODELLED_N; i++) {
    if (!unm_calls[i]) continue;
    if (!f) {
      char path[4200];
      snprintf(path, sizeof path, "%s/rank%d.unmodelled", g.dir, g.rank);
      if (!(f = fopen(path, "w"))) return;
    }
    fprintf(f, "%lld %.9f %s\n", (long long)unm_calls[i], unm_time[i], unm_names[i]);
  }
  if (f) fclose(f);
#endif
}

/* ---- user regions (signature.region) ---------------------------------------- */
static char **region_names;
static int nregions, capregions;

static int region_id(const char *name) {
  for (int i = 0; i < nregions; i++)
    if (strcmp(region_names[i], name) == 0) return i;
  if (nregions == capregions) {
    capregions = capregions ? 2 * capregions : 16;
    region_names = realloc(region_names, sizeof(char *) * (size_t)capregions);
  }
  char *copy = strdup(name);
  for (char *c = copy; *c; c++)
    if (*c == '\n' || *c == '\r') *c = ' ';
  region_names[nregions] = copy;
  fprintf(g.f_comms, "region %d %s\n", nregions, copy);
  fflush(g.f_comms);
  return nregions++;
}

/* Called by signature.region() through ctypes: one event per region entry or
 * exit, aux = the region's id (its name is in rank<r>.comms).  Returns 0 when
 * not tracing. */
int sigex_region(const char *name, int enter) {
  ev_t e;
  if (!name || !ev_begin(&e, enter ? OP_REGION_BEGIN : OP_REGION_END, MPI_COMM_NULL)) return 0;
  e.aux = region_id(name);
  ev_end(&e);
  return 1;
}

/* ========================================================================== */
/* Wrappers.  Macros take NAME (with _c suffix where large-count), the       */
/* count type CT and the displacement type DT.                               */
/* ========================================================================== */

int MPI_Init(int *argc, char ***argv) {
  double t = wall_now();
  int rc = PMPI_Init(argc, argv);
  tracer_start(t, MPI_THREAD_SINGLE);
  return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
  double t = wall_now();
  int rc = PMPI_Init_thread(argc, argv, required, provided);
  tracer_start(t, *provided);
  return rc;
}

int MPI_Finalize(void) {
  ev_t e;
  int tr = ev_begin(&e, OP_FINALIZE, MPI_COMM_WORLD);
  int rc = PMPI_Finalize();
  if (tr) {
    ev_end(&e);
    tracer_stop();
  }
  return rc;
}

int MPI_Abort(MPI_Comm comm, int errorcode) {
  ev_t e;
  if (ev_begin(&e, OP_ABORT, comm)) {
    e.aux = errorcode;
    ev_end(&e);
    g.tracing = 0;
    close_streams();
  }
  return PMPI_Abort(comm, errorcode);
}

/* ---- point to point ------------------------------------------------------ */
#define WRAP_SEND(NAME, OPC, CT)                                              \
  int MPI_##NAME(const void *buf, CT count, MPI_Datatype dt, int dest,        \
                 int tag, MPI_Comm comm) {                                    \
    ev_t e;                                                                   \
    int tr = ev_begin(&e, OPC, comm);                                         \
    int rc = PMPI_##NAME(buf, count, dt, dest, tag, comm);                    \
    if (tr) {                                                                 \
      e.peer = world_of(g.cur, dest);                                         \
      e.bytes = type_bytes(count, dt);                                        \
      e.tag = tag;                                                            \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
WRAP_SEND(Send, OP_SEND, int)
IF_LARGE(WRAP_SEND(Send_c, OP_SEND, MPI_Count))
WRAP_SEND(Ssend, OP_SSEND, int)
IF_LARGE(WRAP_SEND(Ssend_c, OP_SSEND, MPI_Count))
WRAP_SEND(Bsend, OP_BSEND, int)
IF_LARGE(WRAP_SEND(Bsend_c, OP_BSEND, MPI_Count))
WRAP_SEND(Rsend, OP_RSEND, int)
IF_LARGE(WRAP_SEND(Rsend_c, OP_RSEND, MPI_Count))

#define WRAP_RECV(NAME, CT)                                                   \
  int MPI_##NAME(void *buf, CT count, MPI_Datatype dt, int source, int tag,   \
                 MPI_Comm comm, MPI_Status *status) {                         \
    ev_t e;                                                                   \
    MPI_Status st;                                                            \
    int tr = ev_begin(&e, OP_RECV, comm);                                     \
    if (tr && status == MPI_STATUS_IGNORE) status = &st;                      \
    int rc = PMPI_##NAME(buf, count, dt, source, tag, comm, status);          \
    if (tr) {                                                                 \
      status_fill(&e, status);                                                \
      e.aux = posted_any(source, tag);                                        \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
WRAP_RECV(Recv, int)
IF_LARGE(WRAP_RECV(Recv_c, MPI_Count))

#define WRAP_ISEND(NAME, OPC, CT, PERSIST)                                    \
  int MPI_##NAME(const void *buf, CT count, MPI_Datatype dt, int dest,        \
                 int tag, MPI_Comm comm, MPI_Request *request) {              \
    ev_t e;                                                                   \
    int tr = ev_begin(&e, OPC, comm);                                         \
    int rc = PMPI_##NAME(buf, count, dt, dest, tag, comm, request);           \
    if (tr) {                                                                 \
      e.peer = world_of(g.cur, dest);                                         \
      e.bytes = type_bytes(count, dt);                                        \
      e.tag = tag;                                                            \
      e.req = req_add(*request, PERSIST, 0, e.peer, tag, e.bytes);            \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
WRAP_ISEND(Isend, OP_ISEND, int, 0)
IF_LARGE(WRAP_ISEND(Isend_c, OP_ISEND, MPI_Count, 0))
WRAP_ISEND(Issend, OP_ISSEND, int, 0)
IF_LARGE(WRAP_ISEND(Issend_c, OP_ISSEND, MPI_Count, 0))
WRAP_ISEND(Ibsend, OP_IBSEND, int, 0)
IF_LARGE(WRAP_ISEND(Ibsend_c, OP_IBSEND, MPI_Count, 0))
WRAP_ISEND(Irsend, OP_IRSEND, int, 0)
IF_LARGE(WRAP_ISEND(Irsend_c, OP_IRSEND, MPI_Count, 0))
WRAP_ISEND(Send_init, OP_SEND_INIT, int, 1)
IF_LARGE(WRAP_ISEND(Send_init_c, OP_SEND_INIT, MPI_Count, 1))
WRAP_ISEND(Ssend_init, OP_SSEND_INIT, int, 1)
IF_LARGE(WRAP_ISEND(Ssend_init_c, OP_SSEND_INIT, MPI_Count, 1))
WRAP_ISEND(Bsend_init, OP_BSEND_INIT, int, 1)
IF_LARGE(WRAP_ISEND(Bsend_init_c, OP_BSEND_INIT, MPI_Count, 1))
WRAP_ISEND(Rsend_init, OP_RSEND_INIT, int, 1)
IF_LARGE(WRAP_ISEND(Rsend_init_c, OP_RSEND_INIT, MPI_Count, 1))

#define WRAP_IRECV(NAME, OPC, CT, PERSIST)                                    \
  int MPI_##NAME(void *buf, CT count, MPI_Datatype dt, int source, int tag,   \
                 MPI_Comm comm, MPI_Request *request) {                       \
    ev_t e;                                                                   \
    int tr = ev_begin(&e, OPC, comm);                                         \
    int rc = PMPI_##NAME(buf, count, dt, source, tag, comm, request);         \
    if (tr) {                                                                 \
      e.peer = world_of(g.cur, source);                                       \
      e.recv_bytes = type_bytes(count, dt);                                   \
      e.tag = tag;                                                            \
      e.req = req_add(*request, PERSIST, 1, e.peer, tag, e.recv_bytes);       \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
WRAP_IRECV(Irecv, OP_IRECV, int, 0)
IF_LARGE(WRAP_IRECV(Irecv_c, OP_IRECV, MPI_Count, 0))
WRAP_IRECV(Recv_init, OP_RECV_INIT, int, 1)
IF_LARGE(WRAP_IRECV(Recv_init_c, OP_RECV_INIT, MPI_Count, 1))

#define WRAP_SENDRECV(NAME, CT)                                               \
  int MPI_##NAME(const void *sbuf, CT scount, MPI_Datatype stype, int dest,   \
                 int stag, void *rbuf, CT rcount, MPI_Datatype rtype,         \
                 int source, int rtag, MPI_Comm comm, MPI_Status *status) {   \
    ev_t e;                                                                   \
    MPI_Status st;                                                            \
    int tr = ev_begin(&e, OP_SENDRECV, comm);                                 \
    if (tr && status == MPI_STATUS_IGNORE) status = &st;                      \
    int rc = PMPI_##NAME(sbuf, scount, stype, dest, stag, rbuf, rcount,       \
                         rtype, source, rtag, comm, status);                  \
    if (tr) {                                                                 \
      status_fill(&e, status);                                                \
      e.recv_peer = e.peer;                                                   \
      e.peer = world_of(g.cur, dest);                                         \
      e.bytes = type_bytes(scount, stype);                                    \
      e.tag = stag;                                                           \
      e.aux = posted_any(source, rtag);                                       \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
WRAP_SENDRECV(Sendrecv, int)
IF_LARGE(WRAP_SENDRECV(Sendrecv_c, MPI_Count))

#define WRAP_SENDRECV_REPLACE(NAME, CT)                                       \
  int MPI_##NAME(void *buf, CT count, MPI_Datatype dt, int dest, int stag,    \
                 int source, int rtag, MPI_Comm comm, MPI_Status *status) {   \
    ev_t e;                                                                   \
    MPI_Status st;                                                            \
    int tr = ev_begin(&e, OP_SENDRECV_REPLACE, comm);                         \
    if (tr && status == MPI_STATUS_IGNORE) status = &st;                      \
    int rc = PMPI_##NAME(buf, count, dt, dest, stag, source, rtag, comm,      \
                         status);                                             \
    if (tr) {                                                                 \
      status_fill(&e, status);                                                \
      e.recv_peer = e.peer;                                                   \
      e.peer = world_of(g.cur, dest);                                         \
      e.bytes = type_bytes(count, dt);                                        \
      e.tag = stag;                                                           \
      e.aux = posted_any(source, rtag);                                       \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
WRAP_SENDRECV_REPLACE(Sendrecv_replace, int)
IF_LARGE(WRAP_SENDRECV_REPLACE(Sendrecv_replace_c, MPI_Count))

#ifdef SIGEX_HAVE_ISENDRECV
/* Isendrecv: one request that completes when both halves have.  Its
 * completion keeps the receive's posted peer and size: MPICH's status for it
 * reports neither (source = the destination, count 0). */
#define WRAP_ISENDRECV(NAME, CT)                                              \
  int MPI_##NAME(const void *sbuf, CT scount, MPI_Datatype stype, int dest,   \
                 int stag, void *rbuf, CT rcount, MPI_Datatype rtype,         \
                 int source, int rtag, MPI_Comm comm, MPI_Request *request) { \
    ev_t e;                                                                   \
    int tr = ev_begin(&e, OP_ISENDRECV, comm);                                \
    int rc = PMPI_##NAME(sbuf, scount, stype, dest, stag, rbuf, rcount,       \
                         rtype, source, rtag, comm, request);                 \
    if (tr) {                                                                 \
      e.peer = world_of(g.cur, dest);                                         \
      e.recv_peer = world_of(g.cur, source);                                  \
      e.bytes = type_bytes(scount, stype);                                    \
      e.recv_bytes = type_bytes(rcount, rtype);                               \
      e.tag = stag;                                                           \
      e.req = req_add(*request, 0, 2, e.recv_peer, rtag, e.recv_bytes);       \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
WRAP_ISENDRECV(Isendrecv, int)
IF_LARGE(WRAP_ISENDRECV(Isendrecv_c, MPI_Count))

#define WRAP_ISENDRECV_REPLACE(NAME, CT)                                      \
  int MPI_##NAME(void *buf, CT count, MPI_Datatype dt, int dest, int stag,    \
                 int source, int rtag, MPI_Comm comm, MPI_Request *request) { \
    ev_t e;                                                                   \
    int tr = ev_begin(&e, OP_ISENDRECV_REPLACE, comm);                        \
    int rc = PMPI_##NAME(buf, count, dt, dest, stag, source, rtag, comm,      \
                         request);                                            \
    if (tr) {                                                                 \
      e.peer = world_of(g.cur, dest);                                         \
      e.recv_peer = world_of(g.cur, source);                                  \
      e.bytes = e.recv_bytes = type_bytes(count, dt);                         \
      e.tag = stag;                                                           \
      e.req = req_add(*request, 0, 2, e.recv_peer, rtag, e.recv_bytes);       \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
WRAP_ISENDRECV_REPLACE(Isendrecv_replace, int)
IF_LARGE(WRAP_ISENDRECV_REPLACE(Isendrecv_replace_c, MPI_Count))
#endif /* SIGEX_HAVE_ISENDRECV */

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status) {
  ev_t e;
  MPI_Status st;
  int tr = ev_begin(&e, OP_PROBE, comm);
  if (tr && status == MPI_STATUS_IGNORE) status = &st;
  int rc = PMPI_Probe(source, tag, comm, status);
  if (tr) {
    status_fill(&e, status);
    ev_end(&e);
  }
  return rc;
}

static inline uintptr_t comm_key(MPI_Comm c) {
  uintptr_t k = 0;
  memcpy(&k, &c, sizeof c < sizeof k ? sizeof c : sizeof k);
  return k;
}
#define PROBE_KEY(src, tag) (((int64_t)(src) << 32) ^ (int64_t)(uint32_t)(tag))

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag,
               MPI_Status *status) {
  ev_t e;
  MPI_Status st;
  int fast = poll_same(OP_IPROBE, comm_key(comm), PROBE_KEY(source, tag));
  int tr = fast ? poll_begin(&e, OP_IPROBE, comm) : ev_begin(&e, OP_IPROBE, comm);
  if (tr && status == MPI_STATUS_IGNORE) status = &st;
  int rc = PMPI_Iprobe(source, tag, comm, flag, status);
  if (tr) {
    e.aux = *flag;
    if (*flag) status_fill(&e, status);
    else e.peer = world_of(g.cur, source);
    poll_end(&e, fast, OP_IPROBE, comm_key(comm), PROBE_KEY(source, tag));
  }
  return rc;
}

/* Matched probes remember the message's communicator for Mrecv. */
static struct { MPI_Message msg; comm_entry *comm; } *matched;
static int nmatched, capmatched;

static void matched_add(MPI_Message msg, comm_entry *c) {
  if (msg == MPI_MESSAGE_NULL || msg == MPI_MESSAGE_NO_PROC) return;
  if (nmatched == capmatched) {
    capmatched = capmatched ? 2 * capmatched : 16;
    matched = realloc(matched, sizeof(*matched) * (size_t)capmatched);
  }
  matched[nmatched].msg = msg;
  matched[nmatched++].comm = c;
}

/* The communicator of a matched message; forgets it (Mrecv consumes it). */
static comm_entry *matched_take(MPI_Message msg) {
  for (int i = 0; i < nmatched; i++)
    if (matched[i].msg == msg) {
      comm_entry *c = matched[i].comm;
      matched[i] = matched[--nmatched];
      return c;
    }
  return NULL;
}

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message,
               MPI_Status *status) {
  ev_t e;
  MPI_Status st;
  int tr = ev_begin(&e, OP_MPROBE, comm);
  if (tr && status == MPI_STATUS_IGNORE) status = &st;
  int rc = PMPI_Mprobe(source, tag, comm, message, status);
  if (tr) {
    status_fill(&e, status);
    matched_add(*message, g.cur);
    ev_end(&e);
  }
  return rc;
}

int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag,
                MPI_Message *message, MPI_Status *status) {
  ev_t e;
  MPI_Status st;
  int fast = poll_same(OP_IMPROBE, comm_key(comm), PROBE_KEY(source, tag));
  int tr = fast ? poll_begin(&e, OP_IMPROBE, comm) : ev_begin(&e, OP_IMPROBE, comm);
  if (tr && status == MPI_STATUS_IGNORE) status = &st;
  int rc = PMPI_Improbe(source, tag, comm, flag, message, status);
  if (tr) {
    e.aux = *flag;
    if (*flag) {
      status_fill(&e, status);
      matched_add(*message, g.cur);
    } else {
      e.peer = world_of(g.cur, source);
    }
    poll_end(&e, fast, OP_IMPROBE, comm_key(comm), PROBE_KEY(source, tag));
  }
  return rc;
}

#define WRAP_MRECV(NAME, CT)                                                  \
  int MPI_##NAME(void *buf, CT count, MPI_Datatype dt, MPI_Message *message,  \
                 MPI_Status *status) {                                        \
    ev_t e;                                                                   \
    MPI_Status st;                                                            \
    int tr = ev_begin(&e, OP_MRECV, MPI_COMM_NULL);                           \
    if (tr && status == MPI_STATUS_IGNORE) status = &st;                      \
    comm_entry *c = matched_take(*message);                                   \
    int rc = PMPI_##NAME(buf, count, dt, message, status);                    \
    if (tr) {                                                                 \
      g.cur = c;                                                              \
      e.comm = c ? c->id : -1;                                                \
      status_fill(&e, status);                                                \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
WRAP_MRECV(Mrecv, int)
IF_LARGE(WRAP_MRECV(Mrecv_c, MPI_Count))

#define WRAP_IMRECV(NAME, CT)                                                 \
  int MPI_##NAME(void *buf, CT count, MPI_Datatype dt, MPI_Message *message,  \
                 MPI_Request *request) {                                      \
    ev_t e;                                                                   \
    int tr = ev_begin(&e, OP_IMRECV, MPI_COMM_NULL);                          \
    comm_entry *c = matched_take(*message);                                   \
    int rc = PMPI_##NAME(buf, count, dt, message, request);                   \
    if (tr) {                                                                 \
      g.cur = c;                                                              \
      e.comm = c ? c->id : -1;                                                \
      e.recv_bytes = type_bytes(count, dt);                                   \
      e.req = req_add(*request, 0, 1, PEER_ANY, -1, e.recv_bytes);            \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
WRAP_IMRECV(Imrecv, int)
IF_LARGE(WRAP_IMRECV(Imrecv_c, MPI_Count))

int MPI_Start(MPI_Request *request) {
  ev_t e;
  int tr = ev_begin(&e, OP_START, MPI_COMM_NULL);
  if (tr) {
    req_entry *r = req_find(*request, 0);
    if (r) {
      r->active = 1;
      e.req = r->id;
      e.peer = r->peer;
      e.tag = r->tag;
      if (r->is_recv) e.recv_bytes = r->bytes;
      else e.bytes = r->bytes;
      e.comm = r->comm ? r->comm->id : -1;
    }
  }
  int rc = PMPI_Start(request);
  if (tr) ev_end(&e);
  return rc;
}

int MPI_Startall(int count, MPI_Request reqs[]) {
  ev_t e;
  int tr = ev_begin(&e, OP_STARTALL, MPI_COMM_NULL);
  if (tr) {
    e.aux = count;
    for (int i = 0; i < count; i++) {
      req_entry *r = req_find(reqs[i], 0);
      if (!r) continue;
      r->active = 1;
      lists_write(e.seq, LIST_STARTED, 1, &r->id);
    }
  }
  int rc = PMPI_Startall(count, reqs);
  if (tr) ev_end(&e);
  return rc;
}

/* MPI_Cancel names the request it cancels (req, peer, tag, communicator);
 * whether the cancel took effect is in the request's completion. */
int MPI_Cancel(MPI_Request *request) {
  ev_t e;
  int tr = ev_begin(&e, OP_CANCEL, MPI_COMM_NULL);
  if (tr) {
    req_entry *r = req_find(*request, 0);
    if (r) {
      e.req = r->id;
      e.peer = r->peer;
      e.tag = r->tag;
      e.comm = r->comm ? r->comm->id : -1;
    }
  }
  int rc = PMPI_Cancel(request);
  if (tr) ev_end(&e);
  return rc;
}

int MPI_Request_free(MPI_Request *request) {
  ev_t e;
  int tr = ev_begin(&e, OP_REQUEST_FREE, MPI_COMM_NULL);
  if (tr) {
    req_entry *r = req_find(*request, 0);
    if (r) {
      e.req = r->id;
      r->state = 2;
    }
  }
  int rc = PMPI_Request_free(request);
  if (tr) ev_end(&e);
  return rc;
}

/* Wait/Test families: the handles are copied before the call because MPI
 * sets completed non-persistent requests to MPI_REQUEST_NULL. */
int MPI_Wait(MPI_Request *request, MPI_Status *status) {
  ev_t e;
  MPI_Status st;
  MPI_Request h = *request;
  int tr = ev_begin(&e, OP_WAIT, MPI_COMM_NULL);
  if (tr && status == MPI_STATUS_IGNORE) status = &st;
  int rc = PMPI_Wait(request, status);
  if (tr) {
    if (h != MPI_REQUEST_NULL) {
      req_complete(h, status, e.seq);
      e.aux = 1;
    }
    ev_end(&e);
  }
  return rc;
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status) {
  ev_t e;
  MPI_Status st;
  MPI_Request h = *request;
  int fast = poll_same(OP_TEST, (uintptr_t)request, 0);
  int tr = fast ? poll_begin(&e, OP_TEST, MPI_COMM_NULL) : ev_begin(&e, OP_TEST, MPI_COMM_NULL);
  if (tr && status == MPI_STATUS_IGNORE) status = &st;
  int rc = PMPI_Test(request, flag, status);
  if (tr) {
    if (*flag && h != MPI_REQUEST_NULL) {
      req_complete(h, status, e.seq);
      e.aux = 1;
    }
    poll_end(&e, fast, OP_TEST, (uintptr_t)request, 0);
  }
  return rc;
}

#define WAIT_PROLOGUE(OPC)                                                    \
  ev_t e;                                                                     \
  int tr = ev_begin(&e, OPC, MPI_COMM_NULL);                                  \
  WAIT_COPY
/* Test families: a poll with a held twin skips the counters (see poll_end). */
#define POLL_PROLOGUE(OPC)                                                    \
  ev_t e;                                                                     \
  int fast = poll_same(OPC, (uintptr_t)reqs, count);                          \
  int tr = fast ? poll_begin(&e, OPC, MPI_COMM_NULL)                          \
                : ev_begin(&e, OPC, MPI_COMM_NULL);                           \
  WAIT_COPY
#define WAIT_COPY                                                             \
  if (tr) {                                                                   \
    scratch_reserve(count);                                                   \
    memcpy(g.scratch_req, reqs, sizeof(MPI_Request) * (size_t)count);         \
    if (statuses == MPI_STATUSES_IGNORE) statuses = g.scratch_st;             \
  }

int MPI_Waitall(int count, MPI_Request reqs[], MPI_Status statuses[]) {
  WAIT_PROLOGUE(OP_WAITALL)
  int rc = PMPI_Waitall(count, reqs, statuses);
  if (tr) {
    for (int i = 0; i < count; i++)
      if (g.scratch_req[i] != MPI_REQUEST_NULL) {
        req_complete(g.scratch_req[i], &statuses[i], e.seq);
        e.aux++;
      }
    ev_end(&e);
  }
  return rc;
}

int MPI_Testall(int count, MPI_Request reqs[], int *flag,
                MPI_Status statuses[]) {
  POLL_PROLOGUE(OP_TESTALL)
  int rc = PMPI_Testall(count, reqs, flag, statuses);
  if (tr) {
    if (*flag)
      for (int i = 0; i < count; i++)
        if (g.scratch_req[i] != MPI_REQUEST_NULL) {
          req_complete(g.scratch_req[i], &statuses[i], e.seq);
          e.aux++;
        }
    poll_end(&e, fast, OP_TESTALL, (uintptr_t)reqs, count);
  }
  return rc;
}

int MPI_Waitany(int count, MPI_Request reqs[], int *index, MPI_Status *status) {
  MPI_Status st;
  MPI_Status *statuses = status == MPI_STATUS_IGNORE ? &st : status;
  WAIT_PROLOGUE(OP_WAITANY)
  int rc = PMPI_Waitany(count, reqs, index, statuses);
  if (tr) {
    if (*index != MPI_UNDEFINED) {
      req_complete(g.scratch_req[*index], statuses, e.seq);
      e.aux = 1;
    }
    ev_end(&e);
  }
  return rc;
}

int MPI_Testany(int count, MPI_Request reqs[], int *index, int *flag,
                MPI_Status *status) {
  MPI_Status st;
  MPI_Status *statuses = status == MPI_STATUS_IGNORE ? &st : status;
  POLL_PROLOGUE(OP_TESTANY)
  int rc = PMPI_Testany(count, reqs, index, flag, statuses);
  if (tr) {
    if (*flag && *index != MPI_UNDEFINED) {
      req_complete(g.scratch_req[*index], statuses, e.seq);
      e.aux = 1;
    }
    poll_end(&e, fast, OP_TESTANY, (uintptr_t)reqs, count);
  }
  return rc;
}

#define WRAP_SOME(NAME, OPC, PROLOGUE, END)                                   \
  int MPI_##NAME(int count, MPI_Request reqs[], int *outcount,                \
                 int indices[], MPI_Status statuses[]) {                      \
    PROLOGUE(OPC)                                                             \
    int rc = PMPI_##NAME(count, reqs, outcount, indices, statuses);           \
    if (tr) {                                                                 \
      if (*outcount != MPI_UNDEFINED)                                         \
        for (int i = 0; i < *outcount; i++) {                                 \
          req_complete(g.scratch_req[indices[i]], &statuses[i], e.seq);       \
          e.aux++;                                                            \
        }                                                                     \
      END;                                                                    \
    }                                                                         \
    return rc;                                                                \
  }
WRAP_SOME(Waitsome, OP_WAITSOME, WAIT_PROLOGUE, ev_end(&e))
WRAP_SOME(Testsome, OP_TESTSOME, POLL_PROLOGUE,
          poll_end(&e, fast, OP_TESTSOME, (uintptr_t)reqs, count))

/* ---- collectives ---------------------------------------------------------- */
/* Root is recorded as a world rank; with MPI_IN_PLACE the send side is the
 * receive side. */
static inline void set_root(ev_t *e, int root) { e->root = world_of(g.cur, root); }

int MPI_Barrier(MPI_Comm comm) {
  ev_t e;
  int tr = ev_begin(&e, OP_BARRIER, comm);
  int rc = PMPI_Barrier(comm);
  if (tr) ev_end(&e);
  return rc;
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request) {
  ev_t e;
  int tr = ev_begin(&e, OP_IBARRIER, comm);
  int rc = PMPI_Ibarrier(comm, request);
  if (tr) {
    e.req = req_add(*request, 0, 0, PEER_NONE, -1, 0);
    ev_end(&e);
  }
  return rc;
}

/* REQ_ARGS / REQ_PASS / REQ_SET add the request of nonblocking forms. */
#define NOREQ_ARGS
#define NOREQ_PASS
#define NOREQ_SET(e)
#define REQ_ARGS , MPI_Request *request
#define REQ_PASS , request
#define REQ_SET(e) (e).req = req_add(*request, 0, 0, PEER_NONE, -1, (e).bytes)

#define WRAP_BCAST(NAME, OPC, CT, RA, RP, RS)                                 \
  int MPI_##NAME(void *buf, CT count, MPI_Datatype dt, int root,              \
                 MPI_Comm comm RA) {                                          \
    ev_t e;                                                                   \
    int tr = ev_begin(&e, OPC, comm);                                         \
    int rc = PMPI_##NAME(buf, count, dt, root, comm RP);                      \
    if (tr) {                                                                 \
      set_root(&e, root);                                                     \
      e.bytes = e.recv_bytes = type_bytes(count, dt);                         \
      RS(e);                                                                  \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
WRAP_BCAST(Bcast, OP_BCAST, int, NOREQ_ARGS, NOREQ_PASS, NOREQ_SET)
IF_LARGE(WRAP_BCAST(Bcast_c, OP_BCAST, MPI_Count, NOREQ_ARGS, NOREQ_PASS, NOREQ_SET))
WRAP_BCAST(Ibcast, OP_IBCAST, int, REQ_ARGS, REQ_PASS, REQ_SET)
IF_LARGE(WRAP_BCAST(Ibcast_c, OP_IBCAST, MPI_Count, REQ_ARGS, REQ_PASS, REQ_SET))

#define WRAP_REDUCE(NAME, OPC, CT, RA, RP, RS)                                \
  int MPI_##NAME(const void *sbuf, void *rbuf, CT count, MPI_Datatype dt,     \
                 MPI_Op op, int root, MPI_Comm comm RA) {                     \
    ev_t e;                                                                   \
    int tr = ev_begin(&e, OPC, comm);                                         \
    int rc = PMPI_##NAME(sbuf, rbuf, count, dt, op, root, comm RP);           \
    if (tr) {                                                                 \
      set_root(&e, root);                                                     \
      e.bytes = e.recv_bytes = type_bytes(count, dt);                         \
      RS(e);                                                                  \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
WRAP_REDUCE(Reduce, OP_REDUCE, int, NOREQ_ARGS, NOREQ_PASS, NOREQ_SET)
IF_LARGE(WRAP_REDUCE(Reduce_c, OP_REDUCE, MPI_Count, NOREQ_ARGS, NOREQ_PASS, NOREQ_SET))
WRAP_REDUCE(Ireduce, OP_IREDUCE, int, REQ_ARGS, REQ_PASS, REQ_SET)
IF_LARGE(WRAP_REDUCE(Ireduce_c, OP_IREDUCE, MPI_Count, REQ_ARGS, REQ_PASS, REQ_SET))

/* Allreduce, Scan, Exscan, Reduce_scatter_block: (sbuf, rbuf, count, dt, op, comm) */
#define WRAP_ALLRED(NAME, OPC, CT, RA, RP, RS)                                \
  int MPI_##NAME(const void *sbuf, void *rbuf, CT count, MPI_Datatype dt,     \
                 MPI_Op op, MPI_Comm comm RA) {                               \
    ev_t e;                                                                   \
    int tr = ev_begin(&e, OPC, comm);                                         \
    int rc = PMPI_##NAME(sbuf, rbuf, count, dt, op, comm RP);                 \
    if (tr) {                                                                 \
      e.bytes = e.recv_bytes = type_bytes(count, dt);                         \
      RS(e);                                                                  \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
#define ALLRED_4(NAME, INAME, OPC, IOPC)                                      \
  WRAP_ALLRED(NAME, OPC, int, NOREQ_ARGS, NOREQ_PASS, NOREQ_SET)              \
  IF_LARGE(WRAP_ALLRED(NAME##_c, OPC, MPI_Count, NOREQ_ARGS, NOREQ_PASS, NOREQ_SET))    \
  WRAP_ALLRED(INAME, IOPC, int, REQ_ARGS, REQ_PASS, REQ_SET)                  \
  IF_LARGE(WRAP_ALLRED(INAME##_c, IOPC, MPI_Count, REQ_ARGS, REQ_PASS, REQ_SET))
ALLRED_4(Allreduce, Iallreduce, OP_ALLREDUCE, OP_IALLREDUCE)
ALLRED_4(Scan, Iscan, OP_SCAN, OP_ISCAN)
ALLRED_4(Exscan, Iexscan, OP_EXSCAN, OP_IEXSCAN)
ALLRED_4(Reduce_scatter_block, Ireduce_scatter_block, OP_REDUCE_SCATTER_BLOCK,
         OP_IREDUCE_SCATTER_BLOCK)

/* Gather, Scatter, Allgather, Alltoall: block sizes of both sides. */
#define WRAP_GATHER(NAME, OPC, CT, R, RA, RP, RS)                             \
  int MPI_##NAME(const void *sbuf, CT scount, MPI_Datatype stype, void *rbuf, \
                 CT rcount, MPI_Datatype rtype R##_ARG, MPI_Comm comm RA) {   \
    ev_t e;                                                                   \
    int tr = ev_begin(&e, OPC, comm);                                         \
    int rc = PMPI_##NAME(sbuf, scount, stype, rbuf, rcount,                   \
                         rtype R##_PASS, comm RP);                            \
    if (tr) {                                                                 \
      R##_SET;                                                                \
      e.recv_bytes = rbuf == MPI_IN_PLACE ? 0 : type_bytes(rcount, rtype);    \
      e.bytes = sbuf == MPI_IN_PLACE ? e.recv_bytes                           \
                                     : type_bytes(scount, stype);             \
      if (rbuf == MPI_IN_PLACE) e.recv_bytes = e.bytes;                       \
      R##_ONLY(e);                                                            \
      RS(e);                                                                  \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
#define ROOT_ARG , int root
#define ROOT_PASS , root
#define ROOT_SET set_root(&e, root)
#define NOROOT_ARG
#define NOROOT_PASS
#define NOROOT_SET (void)0
/* Counts that only the root's arguments define are 0 elsewhere. */
static inline int not_root(int root) {
  int me = 0;
  PMPI_Comm_rank(g.cur->handle, &me);
  return me != root;
}
#define GATHER_ROOT_ONLY(e) if (not_root(root)) (e).recv_bytes = 0
#define SCATTER_ROOT_ONLY(e) if (not_root(root)) (e).bytes = 0
#define NOROOT_ONLY(e) (void)0
#define GATHER_ROOT_ARG ROOT_ARG
#define GATHER_ROOT_PASS ROOT_PASS
#define GATHER_ROOT_SET ROOT_SET
#define SCATTER_ROOT_ARG ROOT_ARG
#define SCATTER_ROOT_PASS ROOT_PASS
#define SCATTER_ROOT_SET ROOT_SET

/* R is GATHER_ROOT, SCATTER_ROOT or NOROOT: pasted (R##_ARG) so that it is
 * not expanded early. */
#define GATHER_4(NAME, INAME, OPC, IOPC, R)                                   \
  WRAP_GATHER(NAME, OPC, int, R, NOREQ_ARGS, NOREQ_PASS, NOREQ_SET)           \
  IF_LARGE(WRAP_GATHER(NAME##_c, OPC, MPI_Count, R, NOREQ_ARGS, NOREQ_PASS, NOREQ_SET)) \
  WRAP_GATHER(INAME, IOPC, int, R, REQ_ARGS, REQ_PASS, REQ_SET)               \
  IF_LARGE(WRAP_GATHER(INAME##_c, IOPC, MPI_Count, R, REQ_ARGS, REQ_PASS, REQ_SET))
GATHER_4(Gather, Igather, OP_GATHER, OP_IGATHER, GATHER_ROOT)
GATHER_4(Scatter, Iscatter, OP_SCATTER, OP_ISCATTER, SCATTER_ROOT)
GATHER_4(Allgather, Iallgather, OP_ALLGATHER, OP_IALLGATHER, NOROOT)
GATHER_4(Alltoall, Ialltoall, OP_ALLTOALL, OP_IALLTOALL, NOROOT)

/* Gatherv / Allgatherv: one send block, per-rank receive counts. */
static inline int comm_size_of(comm_entry *c) { return c ? c->size : 0; }

#define WRAP_GATHERV(NAME, OPC, CT, DT, LARGE, R, ISROOT, RA, RP, RS)          \
  int MPI_##NAME(const void *sbuf, CT scount, MPI_Datatype stype, void *rbuf, \
                 const CT rcounts[], const DT displs[],                       \
                 MPI_Datatype rtype R##_ARG, MPI_Comm comm RA) {              \
    ev_t e;                                                                   \
    int tr = ev_begin(&e, OPC, comm);                                         \
    int rc = PMPI_##NAME(sbuf, scount, stype, rbuf, rcounts, displs,          \
                         rtype R##_PASS, comm RP);                            \
    if (tr) {                                                                 \
      int n = comm_size_of(g.cur), me = 0;                                    \
      R##_SET;                                                                \
      PMPI_Comm_rank(g.cur->handle, &me);                                     \
      if (ISROOT) {                                                           \
        e.recv_bytes = vsum(n, rcounts, LARGE, rtype);                        \
        vcounts_write(e.seq, LIST_RECV, n, rcounts, LARGE, rtype);                    \
      }                                                                       \
      e.bytes = sbuf == MPI_IN_PLACE                                          \
                    ? type_bytes(LARGE ? (int64_t)((const MPI_Count *)        \
                                                       rcounts)[me]           \
                                       : (int64_t)((const int *)rcounts)[me], \
                                 rtype)                                       \
                    : type_bytes(scount, stype);                              \
      RS(e);                                                                  \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
#define GATHERV_4(NAME, INAME, OPC, IOPC, R, ISROOT)                         \
  WRAP_GATHERV(NAME, OPC, int, int, 0, R, ISROOT, NOREQ_ARGS, NOREQ_PASS,     \
               NOREQ_SET)                                                     \
  IF_LARGE(WRAP_GATHERV(NAME##_c, OPC, MPI_Count, MPI_Aint, 1, R, ISROOT,          \
                        NOREQ_ARGS, NOREQ_PASS, NOREQ_SET))                    \
  WRAP_GATHERV(INAME, IOPC, int, int, 0, R, ISROOT, REQ_ARGS, REQ_PASS,       \
               REQ_SET)                                                       \
  IF_LARGE(WRAP_GATHERV(INAME##_c, IOPC, MPI_Count, MPI_Aint, 1, R, ISROOT,        \
                        REQ_ARGS, REQ_PASS, REQ_SET))
GATHERV_4(Gatherv, Igatherv, OP_GATHERV, OP_IGATHERV, ROOT, me == root)
GATHERV_4(Allgatherv, Iallgatherv, OP_ALLGATHERV, OP_IALLGATHERV, NOROOT, 1)

#define WRAP_SCATTERV(NAME, OPC, CT, DT, LARGE, RA, RP, RS)                   \
  int MPI_##NAME(const void *sbuf, const CT scounts[], const DT displs[],     \
                 MPI_Datatype stype, void *rbuf, CT rcount,                   \
                 MPI_Datatype rtype, int root, MPI_Comm comm RA) {            \
    ev_t e;                                                                   \
    int tr = ev_begin(&e, OPC, comm);                                         \
    int rc = PMPI_##NAME(sbuf, scounts, displs, stype, rbuf, rcount, rtype,   \
                         root, comm RP);                                      \
    if (tr) {                                                                 \
      int n = comm_size_of(g.cur), me = 0;                                    \
      set_root(&e, root);                                                     \
      PMPI_Comm_rank(g.cur->handle, &me);                                     \
      if (me == root) {                                                       \
        e.bytes = vsum(n, scounts, LARGE, stype);                             \
        vcounts_write(e.seq, LIST_SEND, n, scounts, LARGE, stype);                    \
      }                                                                       \
      e.recv_bytes = rbuf == MPI_IN_PLACE ? 0 : type_bytes(rcount, rtype);    \
      RS(e);                                                                  \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
WRAP_SCATTERV(Scatterv, OP_SCATTERV, int, int, 0, NOREQ_ARGS, NOREQ_PASS,
              NOREQ_SET)
IF_LARGE(WRAP_SCATTERV(Scatterv_c, OP_SCATTERV, MPI_Count, MPI_Aint, 1, NOREQ_ARGS,
              NOREQ_PASS, NOREQ_SET))
WRAP_SCATTERV(Iscatterv, OP_ISCATTERV, int, int, 0, REQ_ARGS, REQ_PASS,
              REQ_SET)
IF_LARGE(WRAP_SCATTERV(Iscatterv_c, OP_ISCATTERV, MPI_Count, MPI_Aint, 1, REQ_ARGS,
              REQ_PASS, REQ_SET))

#define WRAP_ALLTOALLV(NAME, OPC, CT, DT, LARGE, RA, RP, RS)                  \
  int MPI_##NAME(const void *sbuf, const CT scounts[], const DT sdispls[],    \
                 MPI_Datatype stype, void *rbuf, const CT rcounts[],          \
                 const DT rdispls[], MPI_Datatype rtype, MPI_Comm comm RA) {  \
    ev_t e;                                                                   \
    int tr = ev_begin(&e, OPC, comm);                                         \
    int rc = PMPI_##NAME(sbuf, scounts, sdispls, stype, rbuf, rcounts,        \
                         rdispls, rtype, comm RP);                            \
    if (tr) {                                                                 \
      int n = comm_size_of(g.cur);                                            \
      int inplace = sbuf == MPI_IN_PLACE;                                     \
      e.recv_bytes = vsum(n, rcounts, LARGE, rtype);                          \
      e.bytes = inplace ? e.recv_bytes : vsum(n, scounts, LARGE, stype);      \
      vcounts_write(e.seq, LIST_SEND, n, inplace ? (const void *)rcounts              \
                                         : (const void *)scounts,             \
                    LARGE, inplace ? rtype : stype);                          \
      vcounts_write(e.seq, LIST_RECV, n, rcounts, LARGE, rtype);                      \
      RS(e);                                                                  \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
WRAP_ALLTOALLV(Alltoallv, OP_ALLTOALLV, int, int, 0, NOREQ_ARGS, NOREQ_PASS,
               NOREQ_SET)
IF_LARGE(WRAP_ALLTOALLV(Alltoallv_c, OP_ALLTOALLV, MPI_Count, MPI_Aint, 1, NOREQ_ARGS,
               NOREQ_PASS, NOREQ_SET))
WRAP_ALLTOALLV(Ialltoallv, OP_IALLTOALLV, int, int, 0, REQ_ARGS, REQ_PASS,
               REQ_SET)
IF_LARGE(WRAP_ALLTOALLV(Ialltoallv_c, OP_IALLTOALLV, MPI_Count, MPI_Aint, 1, REQ_ARGS,
               REQ_PASS, REQ_SET))

/* Alltoallw: a datatype per peer (subarrays in FFT transposes), so the
 * bytes per peer are counts[i] x size(types[i]); both lists are written. */
static void wcounts_write(int64_t seq, int kind, int n, const void *counts,
                          int is_large, const MPI_Datatype *types, int64_t *total) {
  if (!counts || !types || n <= 0) return;
  int64_t *v = malloc(sizeof *v * (size_t)n);
  *total = 0;
  for (int i = 0; i < n; i++) {
    int64_t c = is_large ? (int64_t)((const MPI_Count *)counts)[i]
                         : (int64_t)((const int *)counts)[i];
    v[i] = c ? type_bytes(c, types[i]) : 0;
    *total += v[i];
  }
  lists_write(seq, kind, n, v);
  free(v);
}

#define WRAP_ALLTOALLW(NAME, OPC, CT, DT, LARGE, RA, RP, RS)                  \
  int MPI_##NAME(const void *sbuf, const CT scounts[], const DT sdispls[],    \
                 const MPI_Datatype stypes[], void *rbuf, const CT rcounts[], \
                 const DT rdispls[], const MPI_Datatype rtypes[],             \
                 MPI_Comm comm RA) {                                          \
    ev_t e;                                                                   \
    int tr = ev_begin(&e, OPC, comm);                                         \
    int rc = PMPI_##NAME(sbuf, scounts, sdispls, stypes, rbuf, rcounts,       \
                         rdispls, rtypes, comm RP);                           \
    if (tr) {                                                                 \
      int n = comm_size_of(g.cur);                                            \
      int64_t sent = 0, received = 0;                                         \
      if (sbuf == MPI_IN_PLACE)                                               \
        wcounts_write(e.seq, LIST_SEND, n, rcounts, LARGE, rtypes, &sent);    \
      else                                                                    \
        wcounts_write(e.seq, LIST_SEND, n, scounts, LARGE, stypes, &sent);    \
      wcounts_write(e.seq, LIST_RECV, n, rcounts, LARGE, rtypes, &received);  \
      e.bytes = sent;                                                         \
      e.recv_bytes = received;                                                \
      RS(e);                                                                  \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
WRAP_ALLTOALLW(Alltoallw, OP_ALLTOALLW, int, int, 0, NOREQ_ARGS, NOREQ_PASS,
               NOREQ_SET)
WRAP_ALLTOALLW(Ialltoallw, OP_IALLTOALLW, int, int, 0, REQ_ARGS, REQ_PASS,
               REQ_SET)
IF_LARGE(WRAP_ALLTOALLW(Alltoallw_c, OP_ALLTOALLW, MPI_Count, MPI_Aint, 1,
                        NOREQ_ARGS, NOREQ_PASS, NOREQ_SET))
IF_LARGE(WRAP_ALLTOALLW(Ialltoallw_c, OP_IALLTOALLW, MPI_Count, MPI_Aint, 1,
                        REQ_ARGS, REQ_PASS, REQ_SET))

#define WRAP_REDSCAT(NAME, OPC, CT, LARGE, RA, RP, RS)                        \
  int MPI_##NAME(const void *sbuf, void *rbuf, const CT rcounts[],            \
                 MPI_Datatype dt, MPI_Op op, MPI_Comm comm RA) {              \
    ev_t e;                                                                   \
    int tr = ev_begin(&e, OPC, comm);                                         \
    int rc = PMPI_##NAME(sbuf, rbuf, rcounts, dt, op, comm RP);               \
    if (tr) {                                                                 \
      int n = comm_size_of(g.cur), me = 0;                                    \
      PMPI_Comm_rank(g.cur->handle, &me);                                     \
      e.bytes = vsum(n, rcounts, LARGE, dt);                                  \
      e.recv_bytes = type_bytes(LARGE ? (int64_t)((const MPI_Count *)         \
                                                      rcounts)[me]            \
                                      : (int64_t)((const int *)rcounts)[me],  \
                                dt);                                          \
      vcounts_write(e.seq, LIST_RECV, n, rcounts, LARGE, dt);                         \
      RS(e);                                                                  \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
WRAP_REDSCAT(Reduce_scatter, OP_REDUCE_SCATTER, int, 0, NOREQ_ARGS,
             NOREQ_PASS, NOREQ_SET)
IF_LARGE(WRAP_REDSCAT(Reduce_scatter_c, OP_REDUCE_SCATTER, MPI_Count, 1, NOREQ_ARGS,
             NOREQ_PASS, NOREQ_SET))
WRAP_REDSCAT(Ireduce_scatter, OP_IREDUCE_SCATTER, int, 0, REQ_ARGS, REQ_PASS,
             REQ_SET)
IF_LARGE(WRAP_REDSCAT(Ireduce_scatter_c, OP_IREDUCE_SCATTER, MPI_Count, 1, REQ_ARGS,
             REQ_PASS, REQ_SET))

/* MPI-4 persistent collectives (*_init): recorded like their nonblocking
 * forms, with a persistent request; each Start of it is one collective
 * instance (the replay gives a Start the init call's op, sizes and root). */
#ifdef SIGEX_HAVE_PERSISTENT_COLL
#define PREQ_ARGS , MPI_Info info, MPI_Request *request
#define PREQ_PASS , info, request
#define PREQ_SET(e) (e).req = req_add(*request, 1, 0, PEER_NONE, -1, (e).bytes)
int MPI_Barrier_init(MPI_Comm comm, MPI_Info info, MPI_Request *request) {
  ev_t e;
  int tr = ev_begin(&e, OP_BARRIER_INIT, comm);
  int rc = PMPI_Barrier_init(comm, info, request);
  if (tr) {
    PREQ_SET(e);
    ev_end(&e);
  }
  return rc;
}
WRAP_BCAST(Bcast_init, OP_BCAST_INIT, int, PREQ_ARGS, PREQ_PASS, PREQ_SET)
WRAP_REDUCE(Reduce_init, OP_REDUCE_INIT, int, PREQ_ARGS, PREQ_PASS, PREQ_SET)
WRAP_ALLRED(Allreduce_init, OP_ALLREDUCE_INIT, int, PREQ_ARGS, PREQ_PASS, PREQ_SET)
WRAP_ALLRED(Scan_init, OP_SCAN_INIT, int, PREQ_ARGS, PREQ_PASS, PREQ_SET)
WRAP_ALLRED(Exscan_init, OP_EXSCAN_INIT, int, PREQ_ARGS, PREQ_PASS, PREQ_SET)
WRAP_ALLRED(Reduce_scatter_block_init, OP_REDUCE_SCATTER_BLOCK_INIT, int, PREQ_ARGS,
            PREQ_PASS, PREQ_SET)
WRAP_GATHER(Gather_init, OP_GATHER_INIT, int, GATHER_ROOT, PREQ_ARGS, PREQ_PASS, PREQ_SET)
WRAP_GATHER(Scatter_init, OP_SCATTER_INIT, int, SCATTER_ROOT, PREQ_ARGS, PREQ_PASS,
            PREQ_SET)
WRAP_GATHER(Allgather_init, OP_ALLGATHER_INIT, int, NOROOT, PREQ_ARGS, PREQ_PASS, PREQ_SET)
WRAP_GATHER(Alltoall_init, OP_ALLTOALL_INIT, int, NOROOT, PREQ_ARGS, PREQ_PASS, PREQ_SET)
WRAP_GATHERV(Gatherv_init, OP_GATHERV_INIT, int, int, 0, ROOT, me == root, PREQ_ARGS,
             PREQ_PASS, PREQ_SET)
WRAP_GATHERV(Allgatherv_init, OP_ALLGATHERV_INIT, int, int, 0, NOROOT, 1, PREQ_ARGS,
             PREQ_PASS, PREQ_SET)
WRAP_SCATTERV(Scatterv_init, OP_SCATTERV_INIT, int, int, 0, PREQ_ARGS, PREQ_PASS, PREQ_SET)
WRAP_ALLTOALLV(Alltoallv_init, OP_ALLTOALLV_INIT, int, int, 0, PREQ_ARGS, PREQ_PASS,
               PREQ_SET)
WRAP_ALLTOALLW(Alltoallw_init, OP_ALLTOALLW_INIT, int, int, 0, PREQ_ARGS, PREQ_PASS,
               PREQ_SET)
WRAP_REDSCAT(Reduce_scatter_init, OP_REDUCE_SCATTER_INIT, int, 0, PREQ_ARGS, PREQ_PASS,
             PREQ_SET)
IF_LARGE(WRAP_BCAST(Bcast_init_c, OP_BCAST_INIT, MPI_Count, PREQ_ARGS, PREQ_PASS, PREQ_SET))
IF_LARGE(WRAP_REDUCE(Reduce_init_c, OP_REDUCE_INIT, MPI_Count, PREQ_ARGS, PREQ_PASS,
                     PREQ_SET))
IF_LARGE(WRAP_ALLRED(Allreduce_init_c, OP_ALLREDUCE_INIT, MPI_Count, PREQ_ARGS, PREQ_PASS,
                     PREQ_SET))
IF_LARGE(WRAP_ALLRED(Scan_init_c, OP_SCAN_INIT, MPI_Count, PREQ_ARGS, PREQ_PASS, PREQ_SET))
IF_LARGE(WRAP_ALLRED(Exscan_init_c, OP_EXSCAN_INIT, MPI_Count, PREQ_ARGS, PREQ_PASS,
                     PREQ_SET))
IF_LARGE(WRAP_ALLRED(Reduce_scatter_block_init_c, OP_REDUCE_SCATTER_BLOCK_INIT, MPI_Count,
                     PREQ_ARGS, PREQ_PASS, PREQ_SET))
IF_LARGE(WRAP_GATHER(Gather_init_c, OP_GATHER_INIT, MPI_Count, GATHER_ROOT, PREQ_ARGS,
                     PREQ_PASS, PREQ_SET))
IF_LARGE(WRAP_GATHER(Scatter_init_c, OP_SCATTER_INIT, MPI_Count, SCATTER_ROOT, PREQ_ARGS,
                     PREQ_PASS, PREQ_SET))
IF_LARGE(WRAP_GATHER(Allgather_init_c, OP_ALLGATHER_INIT, MPI_Count, NOROOT, PREQ_ARGS,
                     PREQ_PASS, PREQ_SET))
IF_LARGE(WRAP_GATHER(Alltoall_init_c, OP_ALLTOALL_INIT, MPI_Count, NOROOT, PREQ_ARGS,
                     PREQ_PASS, PREQ_SET))
IF_LARGE(WRAP_GATHERV(Gatherv_init_c, OP_GATHERV_INIT, MPI_Count, MPI_Aint, 1, ROOT,
                      me == root, PREQ_ARGS, PREQ_PASS, PREQ_SET))
IF_LARGE(WRAP_GATHERV(Allgatherv_init_c, OP_ALLGATHERV_INIT, MPI_Count, MPI_Aint, 1,
                      NOROOT, 1, PREQ_ARGS, PREQ_PASS, PREQ_SET))
IF_LARGE(WRAP_SCATTERV(Scatterv_init_c, OP_SCATTERV_INIT, MPI_Count, MPI_Aint, 1,
                       PREQ_ARGS, PREQ_PASS, PREQ_SET))
IF_LARGE(WRAP_ALLTOALLV(Alltoallv_init_c, OP_ALLTOALLV_INIT, MPI_Count, MPI_Aint, 1,
                        PREQ_ARGS, PREQ_PASS, PREQ_SET))
IF_LARGE(WRAP_ALLTOALLW(Alltoallw_init_c, OP_ALLTOALLW_INIT, MPI_Count, MPI_Aint, 1,
                        PREQ_ARGS, PREQ_PASS, PREQ_SET))
IF_LARGE(WRAP_REDSCAT(Reduce_scatter_init_c, OP_REDUCE_SCATTER_INIT, MPI_Count, 1,
                      PREQ_ARGS, PREQ_PASS, PREQ_SET))
#endif /* SIGEX_HAVE_PERSISTENT_COLL */

/* ---- one-sided communication ----------------------------------------------- */
/* Windows are numbered per rank in order of creation (aux of every window
 * event); a window's events carry its communicator, and RMA operations the
 * target as a world rank in peer, the bytes the origin moves out in bytes
 * (Put, Accumulate, the origin part of Get_accumulate) and in recv_bytes
 * (Get, the result part).  Post and Start list their group (world ranks). */
static struct win_entry { MPI_Win handle; comm_entry *comm; int id; } *wins;
static int nwins, capwins;

static struct win_entry *win_get(MPI_Win w) {
  for (int i = nwins - 1; i >= 0; i--)
    if (memcmp(&wins[i].handle, &w, sizeof w) == 0) return &wins[i];
  return NULL;
}

static void win_add(ev_t *e, MPI_Win w) {
  if (nwins == capwins) {
    capwins = capwins ? 2 * capwins : 8;
    wins = realloc(wins, sizeof *wins * (size_t)capwins);
  }
  wins[nwins].handle = w;
  wins[nwins].comm = g.cur;
  wins[nwins].id = e->aux = nwins;
  nwins++;
}

/* An event on window w: its communicator and id. */
static inline int win_begin(ev_t *e, int op, MPI_Win w) {
  struct win_entry *we = win_get(w);
  int tr = ev_begin(e, op, MPI_COMM_NULL);
  if (tr) {
    g.cur = we ? we->comm : NULL;
    e->comm = g.cur ? g.cur->id : -1;
    e->aux = we ? we->id : -1;
  }
  return tr;
}

#define WRAP_WIN_NEW(NAME, ARGS, PASS, COMMARG)                               \
  int MPI_##NAME ARGS {                                                       \
    ev_t e;                                                                   \
    int tr = ev_begin(&e, OP_WIN_CREATE, COMMARG);                            \
    int rc = PMPI_##NAME PASS;                                                \
    if (tr) {                                                                 \
      win_add(&e, *win);                                                      \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
WRAP_WIN_NEW(Win_create, (void *base, MPI_Aint size, int disp_unit, MPI_Info info,
                          MPI_Comm comm, MPI_Win *win),
             (base, size, disp_unit, info, comm, win), comm)
WRAP_WIN_NEW(Win_allocate, (MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
                            void *baseptr, MPI_Win *win),
             (size, disp_unit, info, comm, baseptr, win), comm)
WRAP_WIN_NEW(Win_allocate_shared, (MPI_Aint size, int disp_unit, MPI_Info info,
                                   MPI_Comm comm, void *baseptr, MPI_Win *win),
             (size, disp_unit, info, comm, baseptr, win), comm)
WRAP_WIN_NEW(Win_create_dynamic, (MPI_Info info, MPI_Comm comm, MPI_Win *win),
             (info, comm, win), comm)
IF_LARGE(WRAP_WIN_NEW(Win_create_c, (void *base, MPI_Aint size, MPI_Aint disp_unit,
                                     MPI_Info info, MPI_Comm comm, MPI_Win *win),
                      (base, size, disp_unit, info, comm, win), comm))
IF_LARGE(WRAP_WIN_NEW(Win_allocate_c, (MPI_Aint size, MPI_Aint disp_unit, MPI_Info info,
                                       MPI_Comm comm, void *baseptr, MPI_Win *win),
                      (size, disp_unit, info, comm, baseptr, win), comm))
IF_LARGE(WRAP_WIN_NEW(Win_allocate_shared_c, (MPI_Aint size, MPI_Aint disp_unit,
                                              MPI_Info info, MPI_Comm comm, void *baseptr,
                                              MPI_Win *win),
                      (size, disp_unit, info, comm, baseptr, win), comm))

int MPI_Win_free(MPI_Win *win) {
  ev_t e;
  struct win_entry *we = win_get(*win);
  int tr = win_begin(&e, OP_WIN_FREE, *win);
  int rc = PMPI_Win_free(win);
  if (tr) {
    if (we) memset(&we->handle, 0xff, sizeof we->handle); /* the handle may be reused */
    ev_end(&e);
  }
  return rc;
}

/* Synchronisation calls on a window: OP, extra argument list, pass list, and
 * the target (WIN_NO_TARGET: none, peer stays PEER_NONE) recorded in peer.  (A
 * literal -1 for "none" went through world_of as a rank argument: MPICH's
 * MPI_PROC_NULL, Open MPI's MPI_ANY_SOURCE, so a fence recorded -3 under one
 * library and -2 under the other.) */
#define WIN_NO_TARGET INT_MIN
#define WRAP_WIN_SYNC(NAME, OPC, ARGS, PASS, TARGET)                          \
  int MPI_##NAME ARGS {                                                       \
    ev_t e;                                                                   \
    int tr = win_begin(&e, OPC, win);                                         \
    int rc = PMPI_##NAME PASS;                                                \
    if (tr) {                                                                 \
      if ((TARGET) != WIN_NO_TARGET) e.peer = world_of(g.cur, TARGET);        \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
WRAP_WIN_SYNC(Win_fence, OP_WIN_FENCE, (int assert, MPI_Win win), (assert, win), WIN_NO_TARGET)
WRAP_WIN_SYNC(Win_lock, OP_WIN_LOCK, (int lock_type, int rank, int assert, MPI_Win win),
              (lock_type, rank, assert, win), rank)
WRAP_WIN_SYNC(Win_unlock, OP_WIN_UNLOCK, (int rank, MPI_Win win), (rank, win), rank)
WRAP_WIN_SYNC(Win_lock_all, OP_WIN_LOCK_ALL, (int assert, MPI_Win win), (assert, win), WIN_NO_TARGET)
WRAP_WIN_SYNC(Win_unlock_all, OP_WIN_UNLOCK_ALL, (MPI_Win win), (win), WIN_NO_TARGET)
WRAP_WIN_SYNC(Win_flush, OP_WIN_FLUSH, (int rank, MPI_Win win), (rank, win), rank)
WRAP_WIN_SYNC(Win_flush_local, OP_WIN_FLUSH_LOCAL, (int rank, MPI_Win win), (rank, win), rank)
WRAP_WIN_SYNC(Win_flush_all, OP_WIN_FLUSH_ALL, (MPI_Win win), (win), WIN_NO_TARGET)
WRAP_WIN_SYNC(Win_flush_local_all, OP_WIN_FLUSH_LOCAL_ALL, (MPI_Win win), (win), WIN_NO_TARGET)
WRAP_WIN_SYNC(Win_sync, OP_WIN_SYNC, (MPI_Win win), (win), WIN_NO_TARGET)
WRAP_WIN_SYNC(Win_complete, OP_WIN_COMPLETE, (MPI_Win win), (win), WIN_NO_TARGET)
WRAP_WIN_SYNC(Win_wait, OP_WIN_WAIT, (MPI_Win win), (win), WIN_NO_TARGET)

int MPI_Win_test(MPI_Win win, int *flag) {
  ev_t e;
  int tr = win_begin(&e, OP_WIN_TEST, win);
  int rc = PMPI_Win_test(win, flag);
  if (tr) {
    e.aux = *flag;
    ev_end(&e);
  }
  return rc;
}

/* Post and Start: the group, as world ranks, in the destinations list. */
static void group_record(ev_t *e, MPI_Group grp) {
  int n = 0;
  MPI_Group wgrp;
  PMPI_Group_size(grp, &n);
  PMPI_Comm_group(MPI_COMM_WORLD, &wgrp);
  int *in = malloc(sizeof(int) * (size_t)(n + 1)), *out = malloc(sizeof(int) * (size_t)(n + 1));
  int64_t *v = malloc(sizeof(int64_t) * (size_t)(n + 1));
  for (int i = 0; i < n; i++) in[i] = i;
  PMPI_Group_translate_ranks(grp, n, in, wgrp, out);
  for (int i = 0; i < n; i++) v[i] = out[i] == MPI_UNDEFINED ? PEER_NONE : out[i];
  lists_write(e->seq, LIST_DESTS, n, v);
  PMPI_Group_free(&wgrp);
  free(in);
  free(out);
  free(v);
}

#define WRAP_WIN_GROUP(NAME, OPC)                                             \
  int MPI_##NAME(MPI_Group group, int assert, MPI_Win win) {                  \
    ev_t e;                                                                   \
    int tr = win_begin(&e, OPC, win);                                         \
    int rc = PMPI_##NAME(group, assert, win);                                 \
    if (tr) {                                                                 \
      group_record(&e, group);                                                \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
WRAP_WIN_GROUP(Win_post, OP_WIN_POST)
WRAP_WIN_GROUP(Win_start, OP_WIN_START)

/* RMA operations.  OUT and IN are the bytes the origin sends and receives. */
#define RMA_RECORD(OUT, IN, RS)                                               \
  if (tr) {                                                                   \
    e.peer = world_of(g.cur, target_rank);                                    \
    e.bytes = OUT;                                                            \
    e.recv_bytes = IN;                                                        \
    RS(e);                                                                    \
    ev_end(&e);                                                               \
  }
#define WRAP_PUT(NAME, OPC, CT, RA, RP, RS)                                   \
  int MPI_##NAME(const void *origin_addr, CT origin_count, MPI_Datatype origin_datatype, \
                 int target_rank, MPI_Aint target_disp, CT target_count,      \
                 MPI_Datatype target_datatype, MPI_Win win RA) {              \
    ev_t e;                                                                   \
    int tr = win_begin(&e, OPC, win);                                         \
    int rc = PMPI_##NAME(origin_addr, origin_count, origin_datatype, target_rank, \
                         target_disp, target_count, target_datatype, win RP); \
    RMA_RECORD(type_bytes(origin_count, origin_datatype), 0, RS)              \
    return rc;                                                                \
  }
#define WRAP_GET(NAME, OPC, CT, RA, RP, RS)                                   \
  int MPI_##NAME(void *origin_addr, CT origin_count, MPI_Datatype origin_datatype, \
                 int target_rank, MPI_Aint target_disp, CT target_count,      \
                 MPI_Datatype target_datatype, MPI_Win win RA) {              \
    ev_t e;                                                                   \
    int tr = win_begin(&e, OPC, win);                                         \
    int rc = PMPI_##NAME(origin_addr, origin_count, origin_datatype, target_rank, \
                         target_disp, target_count, target_datatype, win RP); \
    RMA_RECORD(0, type_bytes(origin_count, origin_datatype), RS)              \
    return rc;                                                                \
  }
#define WRAP_ACC(NAME, OPC, CT, RA, RP, RS)                                   \
  int MPI_##NAME(const void *origin_addr, CT origin_count, MPI_Datatype origin_datatype, \
                 int target_rank, MPI_Aint target_disp, CT target_count,      \
                 MPI_Datatype target_datatype, MPI_Op op, MPI_Win win RA) {   \
    ev_t e;                                                                   \
    int tr = win_begin(&e, OPC, win);                                         \
    int rc = PMPI_##NAME(origin_addr, origin_count, origin_datatype, target_rank, \
                         target_disp, target_count, target_datatype, op, win RP); \
    RMA_RECORD(type_bytes(origin_count, origin_datatype), 0, RS)              \
    return rc;                                                                \
  }
#define WRAP_GET_ACC(NAME, OPC, CT, RA, RP, RS)                               \
  int MPI_##NAME(const void *origin_addr, CT origin_count, MPI_Datatype origin_datatype, \
                 void *result_addr, CT result_count, MPI_Datatype result_datatype, \
                 int target_rank, MPI_Aint target_disp, CT target_count,      \
                 MPI_Datatype target_datatype, MPI_Op op, MPI_Win win RA) {   \
    ev_t e;                                                                   \
    int tr = win_begin(&e, OPC, win);                                         \
    int rc = PMPI_##NAME(origin_addr, origin_count, origin_datatype, result_addr, \
                         result_count, result_datatype, target_rank, target_disp, \
                         target_count, target_datatype, op, win RP);          \
    RMA_RECORD(type_bytes(origin_count, origin_datatype),                     \
               type_bytes(result_count, result_datatype), RS)                 \
    return rc;                                                                \
  }
/* The four operations in one form: K is NOREQ (Put...) or WREQ (Rput..., a
 * request), pasted so that it is not expanded early. */
#define WREQ_ARGS REQ_ARGS
#define WREQ_PASS REQ_PASS
#define WREQ_SET(e) (e).req = req_add(*request, 0, 0, PEER_NONE, -1, (e).bytes)
#define RMA_4(N_PUT, N_GET, N_ACC, N_GACC, OPR, CT, K)                        \
  WRAP_PUT(N_PUT, OP_##OPR##PUT, CT, K##_ARGS, K##_PASS, K##_SET)             \
  WRAP_GET(N_GET, OP_##OPR##GET, CT, K##_ARGS, K##_PASS, K##_SET)             \
  WRAP_ACC(N_ACC, OP_##OPR##ACCUMULATE, CT, K##_ARGS, K##_PASS, K##_SET)      \
  WRAP_GET_ACC(N_GACC, OP_##OPR##GET_ACCUMULATE, CT, K##_ARGS, K##_PASS, K##_SET)
RMA_4(Put, Get, Accumulate, Get_accumulate, , int, NOREQ)
RMA_4(Rput, Rget, Raccumulate, Rget_accumulate, R, int, WREQ)
IF_LARGE(RMA_4(Put_c, Get_c, Accumulate_c, Get_accumulate_c, , MPI_Count, NOREQ))
IF_LARGE(RMA_4(Rput_c, Rget_c, Raccumulate_c, Rget_accumulate_c, R, MPI_Count, WREQ))

int MPI_Fetch_and_op(const void *origin_addr, void *result_addr, MPI_Datatype datatype,
                     int target_rank, MPI_Aint target_disp, MPI_Op op, MPI_Win win) {
  ev_t e;
  int tr = win_begin(&e, OP_FETCH_AND_OP, win);
  int rc = PMPI_Fetch_and_op(origin_addr, result_addr, datatype, target_rank, target_disp,
                             op, win);
  if (tr) {
    e.peer = world_of(g.cur, target_rank);
    e.bytes = e.recv_bytes = type_bytes(1, datatype);
    ev_end(&e);
  }
  return rc;
}

int MPI_Compare_and_swap(const void *origin_addr, const void *compare_addr, void *result_addr,
                         MPI_Datatype datatype, int target_rank, MPI_Aint target_disp,
                         MPI_Win win) {
  ev_t e;
  int tr = win_begin(&e, OP_COMPARE_AND_SWAP, win);
  int rc = PMPI_Compare_and_swap(origin_addr, compare_addr, result_addr, datatype,
                                 target_rank, target_disp, win);
  if (tr) {
    e.peer = world_of(g.cur, target_rank);
    e.bytes = type_bytes(2, datatype); /* origin and compare values out */
    e.recv_bytes = type_bytes(1, datatype);
    ev_end(&e);
  }
  return rc;
}

/* ---- neighbourhood collectives -------------------------------------------- */
/* The neighbours of a process topology, in MPI's order, as world ranks
 * (MPI_PROC_NULL ends of a non-periodic Cartesian grid stay PEER_NULL):
 * Cartesian: per dimension the source then the destination of Cart_shift(d,
 * 1), the same list both ways; graph: Graph_neighbors both ways; distributed
 * graph: Dist_graph_neighbors.  Returns 0 for a communicator without one. */
static int topo_neighbors(MPI_Comm comm, int64_t **src, int *ns, int64_t **dst, int *nd) {
  int topo = MPI_UNDEFINED, me = 0;
  PMPI_Topo_test(comm, &topo);
  PMPI_Comm_rank(comm, &me);
  *ns = *nd = 0;
  if (topo == MPI_CART) {
    int dims = 0;
    PMPI_Cartdim_get(comm, &dims);
    *src = malloc(sizeof(int64_t) * (size_t)(2 * dims + 1));
    for (int d = 0; d < dims; d++) {
      int a, b;
      PMPI_Cart_shift(comm, d, 1, &a, &b);
      (*src)[2 * d] = world_of(g.cur, a);
      (*src)[2 * d + 1] = world_of(g.cur, b);
    }
    *ns = *nd = 2 * dims;
    *dst = malloc(sizeof(int64_t) * (size_t)(2 * dims + 1));
    memcpy(*dst, *src, sizeof(int64_t) * (size_t)(2 * dims));
    return 1;
  }
  int *a = NULL, *b = NULL;
  if (topo == MPI_GRAPH) {
    int n = 0;
    PMPI_Graph_neighbors_count(comm, me, &n);
    a = malloc(sizeof(int) * (size_t)(n + 1));
    PMPI_Graph_neighbors(comm, me, n, a);
    b = malloc(sizeof(int) * (size_t)(n + 1));
    memcpy(b, a, sizeof(int) * (size_t)n);
    *ns = *nd = n;
  } else if (topo == MPI_DIST_GRAPH) {
    int weighted = 0;
    PMPI_Dist_graph_neighbors_count(comm, ns, nd, &weighted);
    a = malloc(sizeof(int) * (size_t)(*ns + 1));
    b = malloc(sizeof(int) * (size_t)(*nd + 1));
    PMPI_Dist_graph_neighbors(comm, *ns, a, MPI_UNWEIGHTED, *nd, b, MPI_UNWEIGHTED);
  } else {
    return 0;
  }
  *src = malloc(sizeof(int64_t) * (size_t)(*ns + 1));
  *dst = malloc(sizeof(int64_t) * (size_t)(*nd + 1));
  for (int i = 0; i < *ns; i++) (*src)[i] = world_of(g.cur, a[i]);
  for (int i = 0; i < *nd; i++) (*dst)[i] = world_of(g.cur, b[i]);
  free(a);
  free(b);
  return 1;
}

/* One side of a neighbourhood collective: bytes per neighbour from a uniform
 * block, a count vector with one datatype, or counts and a datatype each. */
typedef struct {
  const void *counts;
  int large;
  MPI_Datatype type;
  const MPI_Datatype *types;
  int64_t block;
} nside;

static int64_t nside_bytes(const nside *s, int i) {
  if (!s->counts) return s->block;
  int64_t c = s->large ? (int64_t)((const MPI_Count *)s->counts)[i]
                       : (int64_t)((const int *)s->counts)[i];
  return c ? type_bytes(c, s->types ? s->types[i] : s->type) : 0;
}

/* Lists of a neighbourhood collective: sources and destinations (world
 * ranks), bytes per destination (LIST_SEND) and per source (LIST_RECV);
 * bytes/recv_bytes are the totals over real (non-PROC_NULL) neighbours. */
static void neighbor_record(ev_t *e, MPI_Comm comm, nside snd, nside rcv) {
  int64_t *src = NULL, *dst = NULL;
  int ns = 0, nd = 0;
  if (!topo_neighbors(comm, &src, &ns, &dst, &nd)) return;
  int64_t *v = malloc(sizeof(int64_t) * (size_t)((ns > nd ? ns : nd) + 1));
  lists_write(e->seq, LIST_SOURCES, ns, src);
  lists_write(e->seq, LIST_DESTS, nd, dst);
  e->bytes = e->recv_bytes = 0;
  for (int i = 0; i < nd; i++) {
    v[i] = dst[i] >= 0 ? nside_bytes(&snd, i) : 0;
    e->bytes += v[i];
  }
  lists_write(e->seq, LIST_SEND, nd, v);
  for (int i = 0; i < ns; i++) {
    v[i] = src[i] >= 0 ? nside_bytes(&rcv, i) : 0;
    e->recv_bytes += v[i];
  }
  lists_write(e->seq, LIST_RECV, ns, v);
  free(v);
  free(src);
  free(dst);
}

#define UNIFORM(CNT, T) ((nside){NULL, 0, T, NULL, type_bytes(CNT, T)})
#define VECTOR(CNTS, LARGE, T) ((nside){CNTS, LARGE, T, NULL, 0})
#define TYPED(CNTS, LARGE, TS) ((nside){CNTS, LARGE, MPI_DATATYPE_NULL, TS, 0})

/* allgather and alltoall: one block size each way. */
#define WRAP_NBR_BLOCK(NAME, OPC, CT, RA, RP, RS)                             \
  int MPI_##NAME(const void *sbuf, CT scount, MPI_Datatype stype, void *rbuf, \
                 CT rcount, MPI_Datatype rtype, MPI_Comm comm RA) {           \
    ev_t e;                                                                   \
    int tr = ev_begin(&e, OPC, comm);                                         \
    int rc = PMPI_##NAME(sbuf, scount, stype, rbuf, rcount, rtype, comm RP);  \
    if (tr) {                                                                 \
      neighbor_record(&e, comm, UNIFORM(scount, stype), UNIFORM(rcount, rtype)); \
      RS(e);                                                                  \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
#define WRAP_NBR_ALLGATHERV(NAME, OPC, CT, DT, LARGE, RA, RP, RS)             \
  int MPI_##NAME(const void *sbuf, CT scount, MPI_Datatype stype, void *rbuf, \
                 const CT rcounts[], const DT displs[], MPI_Datatype rtype,   \
                 MPI_Comm comm RA) {                                          \
    ev_t e;                                                                   \
    int tr = ev_begin(&e, OPC, comm);                                         \
    int rc = PMPI_##NAME(sbuf, scount, stype, rbuf, rcounts, displs, rtype,   \
                         comm RP);                                            \
    if (tr) {                                                                 \
      neighbor_record(&e, comm, UNIFORM(scount, stype),                      \
                      VECTOR(rcounts, LARGE, rtype));                         \
      RS(e);                                                                  \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
#define WRAP_NBR_ALLTOALLV(NAME, OPC, CT, DT, LARGE, RA, RP, RS)              \
  int MPI_##NAME(const void *sbuf, const CT scounts[], const DT sdispls[],    \
                 MPI_Datatype stype, void *rbuf, const CT rcounts[],          \
                 const DT rdispls[], MPI_Datatype rtype, MPI_Comm comm RA) {  \
    ev_t e;                                                                   \
    int tr = ev_begin(&e, OPC, comm);                                         \
    int rc = PMPI_##NAME(sbuf, scounts, sdispls, stype, rbuf, rcounts,        \
                         rdispls, rtype, comm RP);                            \
    if (tr) {                                                                 \
      neighbor_record(&e, comm, VECTOR(scounts, LARGE, stype),               \
                      VECTOR(rcounts, LARGE, rtype));                         \
      RS(e);                                                                  \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
/* Neighbor_alltoallw's displacements are MPI_Aint in both forms. */
#define WRAP_NBR_ALLTOALLW(NAME, OPC, CT, LARGE, RA, RP, RS)                  \
  int MPI_##NAME(const void *sbuf, const CT scounts[],                        \
                 const MPI_Aint sdispls[], const MPI_Datatype stypes[],       \
                 void *rbuf, const CT rcounts[], const MPI_Aint rdispls[],    \
                 const MPI_Datatype rtypes[], MPI_Comm comm RA) {             \
    ev_t e;                                                                   \
    int tr = ev_begin(&e, OPC, comm);                                         \
    int rc = PMPI_##NAME(sbuf, scounts, sdispls, stypes, rbuf, rcounts,       \
                         rdispls, rtypes, comm RP);                           \
    if (tr) {                                                                 \
      neighbor_record(&e, comm, TYPED(scounts, LARGE, stypes),               \
                      TYPED(rcounts, LARGE, rtypes));                         \
      RS(e);                                                                  \
      ev_end(&e);                                                             \
    }                                                                         \
    return rc;                                                                \
  }
/* The five functions in one form: blocking (NOREQ), nonblocking (REQ) or
 * persistent (PREQ), with int or large (_c) counts. */
#define NBR_5(PRE, SUF, OPPRE, OPSUF, CT, DT, LARGE, K)                       \
  WRAP_NBR_BLOCK(PRE##eighbor_allgather##SUF, OP_##OPPRE##ALLGATHER##OPSUF, CT,      \
                 K##_ARGS, K##_PASS, K##_SET)                                 \
  WRAP_NBR_ALLGATHERV(PRE##eighbor_allgatherv##SUF, OP_##OPPRE##ALLGATHERV##OPSUF,   \
                      CT, DT, LARGE, K##_ARGS, K##_PASS, K##_SET)             \
  WRAP_NBR_BLOCK(PRE##eighbor_alltoall##SUF, OP_##OPPRE##ALLTOALL##OPSUF, CT,        \
                 K##_ARGS, K##_PASS, K##_SET)                                 \
  WRAP_NBR_ALLTOALLV(PRE##eighbor_alltoallv##SUF, OP_##OPPRE##ALLTOALLV##OPSUF, CT,  \
                     DT, LARGE, K##_ARGS, K##_PASS, K##_SET)                  \
  WRAP_NBR_ALLTOALLW(PRE##eighbor_alltoallw##SUF, OP_##OPPRE##ALLTOALLW##OPSUF, CT,  \
                     LARGE, K##_ARGS, K##_PASS, K##_SET)
/* K (NOREQ, REQ, PREQ) is pasted into K##_ARGS so that it is not expanded early. */
NBR_5(N, , NEIGHBOR_, , int, int, 0, NOREQ)
NBR_5(In, , INEIGHBOR_, , int, int, 0, REQ)
IF_LARGE(NBR_5(N, _c, NEIGHBOR_, , MPI_Count, MPI_Aint, 1, NOREQ))
IF_LARGE(NBR_5(In, _c, INEIGHBOR_, , MPI_Count, MPI_Aint, 1, REQ))
#ifdef SIGEX_HAVE_PERSISTENT_COLL
NBR_5(N, _init, NEIGHBOR_, _INIT, int, int, 0, PREQ)
IF_LARGE(NBR_5(N, _init_c, NEIGHBOR_, _INIT, MPI_Count, MPI_Aint, 1, PREQ))
#endif


/* ---- communicators --------------------------------------------------------- */
static inline void set_newcomm(ev_t *e, MPI_Comm c) {
  comm_entry *n = comm_get(c);
  e->aux = n ? n->id : -1;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
  ev_t e;
  int tr = ev_begin(&e, OP_COMM_SPLIT, comm);
  int rc = PMPI_Comm_split(comm, color, key, newcomm);
  if (tr) {
    set_newcomm(&e, *newcomm);
    ev_end(&e);
  }
  return rc;
}

int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info,
                        MPI_Comm *newcomm) {
  ev_t e;
  int tr = ev_begin(&e, OP_COMM_SPLIT_TYPE, comm);
  int rc = PMPI_Comm_split_type(comm, type, key, info, newcomm);
  if (tr) {
    set_newcomm(&e, *newcomm);
    ev_end(&e);
  }
  return rc;
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm) {
  ev_t e;
  int tr = ev_begin(&e, OP_COMM_CREATE, comm);
  int rc = PMPI_Comm_create(comm, group, newcomm);
  if (tr) {
    set_newcomm(&e, *newcomm);
    ev_end(&e);
  }
  return rc;
}

int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag,
                          MPI_Comm *newcomm) {
  ev_t e;
  int tr = ev_begin(&e, OP_COMM_CREATE_GROUP, comm);
  int rc = PMPI_Comm_create_group(comm, group, tag, newcomm);
  if (tr) {
    set_newcomm(&e, *newcomm);
    ev_end(&e);
  }
  return rc;
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm) {
  ev_t e;
  int tr = ev_begin(&e, OP_COMM_DUP, comm);
  int rc = PMPI_Comm_dup(comm, newcomm);
  if (tr) {
    set_newcomm(&e, *newcomm);
    ev_end(&e);
  }
  return rc;
}

int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[],
                    const int periods[], int reorder, MPI_Comm *newcomm) {
  ev_t e;
  int tr = ev_begin(&e, OP_CART_CREATE, comm);
  int rc = PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm);
  if (tr) {
    set_newcomm(&e, *newcomm);
    ev_end(&e);
  }
  return rc;
}

/* Process-graph communicators: created like any other (their neighbours are
 * recorded with each neighbourhood collective). */
int MPI_Graph_create(MPI_Comm comm, int nnodes, const int index[], const int edges[],
                     int reorder, MPI_Comm *newcomm) {
  ev_t e;
  int tr = ev_begin(&e, OP_GRAPH_CREATE, comm);
  int rc = PMPI_Graph_create(comm, nnodes, index, edges, reorder, newcomm);
  if (tr) {
    set_newcomm(&e, *newcomm);
    ev_end(&e);
  }
  return rc;
}

int MPI_Dist_graph_create(MPI_Comm comm, int n, const int sources[], const int degrees[],
                          const int destinations[], const int weights[], MPI_Info info,
                          int reorder, MPI_Comm *newcomm) {
  ev_t e;
  int tr = ev_begin(&e, OP_DIST_GRAPH_CREATE, comm);
  int rc = PMPI_Dist_graph_create(comm, n, sources, degrees, destinations, weights, info,
                                  reorder, newcomm);
  if (tr) {
    set_newcomm(&e, *newcomm);
    ev_end(&e);
  }
  return rc;
}

int MPI_Dist_graph_create_adjacent(MPI_Comm comm, int indegree, const int sources[],
                                   const int sourceweights[], int outdegree,
                                   const int destinations[], const int destweights[],
                                   MPI_Info info, int reorder, MPI_Comm *newcomm) {
  ev_t e;
  int tr = ev_begin(&e, OP_DIST_GRAPH_CREATE, comm);
  int rc = PMPI_Dist_graph_create_adjacent(comm, indegree, sources, sourceweights, outdegree,
                                           destinations, destweights, info, reorder, newcomm);
  if (tr) {
    set_newcomm(&e, *newcomm);
    ev_end(&e);
  }
  return rc;
}

int MPI_Cart_sub(MPI_Comm comm, const int remain[], MPI_Comm *newcomm) {
  ev_t e;
  int tr = ev_begin(&e, OP_CART_SUB, comm);
  int rc = PMPI_Cart_sub(comm, remain, newcomm);
  if (tr) {
    set_newcomm(&e, *newcomm);
    ev_end(&e);
  }
  return rc;
}

int MPI_Comm_free(MPI_Comm *comm) {
  ev_t e;
  int tr = ev_begin(&e, OP_COMM_FREE, *comm);
  comm_entry *c = g.cur;
  int rc = PMPI_Comm_free(comm);
  if (tr) {
    if (c) c->handle = MPI_COMM_NULL; /* the handle may be reused */
    ev_end(&e);
  }
  return rc;
}

#ifdef SIGEX_GEN_WRAPPERS
#include SIGEX_GEN_WRAPPERS
#endif

#ifdef SIGEX_FORTRAN_WRAPPERS
#include SIGEX_FORTRAN_WRAPPERS
#endif
